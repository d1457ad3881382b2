//! Recalling a pending timer message (RECALL_MESSAGE, request code 370): the handle a send
//! response carries, its checks, and the delete marker the broker stores for it.
//! Java: `RecallMessageHandle` (V1), `SendMessageProcessor#attachRecallHandle`,
//! `RecallMessageProcessor`, `TimerMessageStore#buildDeleteKey`.
//!
//! The handle is the URL-safe Base64 (padded) of `"v1 <topic> <brokerName> <timestamp>
//! <messageId>"`, where the timestamp is TIMER_OUT_MS + 1 and the message id is UNIQ_KEY.
//!
//! The delete marker is an ordinary timer message to the same topic with TIMER_DELIVER_MS =
//! that timestamp: the send-time transform rounds it down to the same TIMER_OUT_MS, so the
//! marker lands in the slot of the message it cancels. It carries TIMER_DEL_UNIQKEY =
//! `<topic>+<messageId>`; the wheel files it with the delete magic and, when the slot is
//! due, skips the message whose REAL_TOPIC and UNIQ_KEY form that key. A marker is never
//! delivered itself. A marker arriving after its slot is due is refused at send time
//! (WHEEL_TIMER_MSG_ILLEGAL) or, if it reaches the wheel too late, dropped.

use bytes::Bytes;
use ferromq_protocol::message::{keys, MessageProperties, StoredMessage};

use crate::base64url;
use crate::config::TimerConfig;

/// TAGS of a delete marker. Java: `RecallMessageProcessor.RECALL_MESSAGE_TAG`.
pub const RECALL_MESSAGE_TAG: &str = "_RECALL_TAG_";
/// Handle version tag. Java: `RecallMessageHandle.VERSION_1`.
pub const RECALL_HANDLE_V1: &str = "v1";
/// Prefix of retry topics, whose messages get no recall handle. Java:
/// `MixAll.RETRY_GROUP_TOPIC_PREFIX`.
const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";

/// A decoded V1 recall handle. Java: `RecallMessageHandle.HandleV1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecallHandle {
    /// The real topic of the message.
    pub topic: String,
    /// The broker that holds it.
    pub broker_name: String,
    /// TIMER_OUT_MS + 1, as text (checked when the recall is made, not when decoded).
    pub timestamp: String,
    /// The message's UNIQ_KEY.
    pub message_id: String,
}

/// Why a recall request is refused; the text is Java's remark. All map to
/// ILLEGAL_OPERATION.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecallRefusal {
    /// The handle is empty, not Base64, not `v1`, or has fewer than five fields.
    #[error("recall handle is invalid")]
    InvalidHandle,
    /// The request's topic is not the handle's.
    #[error("recall failed, topic not match")]
    TopicMismatch,
    /// The handle names another broker.
    #[error("recall failed, broker service not available")]
    BrokerMismatch,
    /// The timestamp is not a number, already past, or beyond `timerMaxDelaySec`.
    #[error("recall failed, timestamp invalid")]
    TimestampInvalid,
}

impl RecallHandle {
    /// The handle text. Java: `HandleV1#buildHandle`.
    pub fn encode(&self) -> String {
        build_handle(&self.topic, &self.broker_name, &self.timestamp, &self.message_id)
    }

    /// Parses a handle. Java: `RecallMessageHandle#decodeHandle` (invalid UTF-8 is replaced,
    /// fields are split on single spaces, fields beyond the fifth are ignored).
    ///
    /// # Errors
    /// [`RecallRefusal::InvalidHandle`].
    pub fn decode(handle: &str) -> Result<RecallHandle, RecallRefusal> {
        if handle.is_empty() {
            return Err(RecallRefusal::InvalidHandle);
        }
        let raw = base64url::decode(handle).ok_or(RecallRefusal::InvalidHandle)?;
        let raw = String::from_utf8_lossy(&raw);
        let mut items: Vec<&str> = raw.split(' ').collect();
        // Java's String#split drops trailing empty fields.
        while items.len() > 1 && items.last() == Some(&"") {
            items.pop();
        }
        if items.first() != Some(&RECALL_HANDLE_V1) || items.len() < 5 {
            return Err(RecallRefusal::InvalidHandle);
        }
        Ok(RecallHandle {
            topic: items[1].to_owned(),
            broker_name: items[2].to_owned(),
            timestamp: items[3].to_owned(),
            message_id: items[4].to_owned(),
        })
    }
}

/// `base64url("v1 <topic> <brokerName> <timestamp> <messageId>")`, padded, fields not
/// checked. Java: `HandleV1#buildHandle`.
pub fn build_handle(topic: &str, broker_name: &str, timestamp: &str, message_id: &str) -> String {
    let raw = [RECALL_HANDLE_V1, topic, broker_name, timestamp, message_id].join(" ");
    base64url::encode(raw.as_bytes())
}

/// The key a delete marker names and a pending message is matched by:
/// `<realTopic>+<uniqKey>`. Java: `TimerMessageStore#buildDeleteKey`.
pub fn delete_key(real_topic: &str, uniq_key: &str) -> String {
    format!("{real_topic}+{uniq_key}")
}

/// The recall handle a send response carries for a message the transform moved to the
/// wheel (`props` as stored): none without TIMER_OUT_MS or REAL_TOPIC, or for a retry
/// topic. The broker skips SEND_BATCH_MESSAGE and CONSUMER_SEND_MSG_BACK. A missing UNIQ_KEY
/// is written as `null`, as Java's `String.join` does. Java:
/// `SendMessageProcessor#attachRecallHandle`.
pub fn recall_handle_for_send(props: &MessageProperties, broker_name: &str) -> Option<String> {
    let timer_out_ms: i64 = props.get(keys::TIMER_OUT_MS)?.parse().ok()?;
    let real_topic = props.get(keys::REAL_TOPIC)?;
    if real_topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        return None;
    }
    // +1 so the marker's own rounding lands on the same TIMER_OUT_MS.
    let timestamp = timer_out_ms.wrapping_add(1).to_string();
    Some(build_handle(real_topic, broker_name, &timestamp, props.get(keys::UNIQ_KEY).unwrap_or("null")))
}

/// Checks a RECALL_MESSAGE request against this broker and the clock, in Java's order:
/// handle, topic, broker name, then the timestamp must be ahead of now by less than
/// `timerMaxDelaySec`. Java: `RecallMessageProcessor#processRequest`.
///
/// # Errors
/// The [`RecallRefusal`] Java answers ILLEGAL_OPERATION with.
pub fn check_recall(
    recall_handle: &str,
    request_topic: &str,
    broker_name: &str,
    now_ms: i64,
    config: &TimerConfig,
) -> Result<RecallHandle, RecallRefusal> {
    let handle = RecallHandle::decode(recall_handle)?;
    if handle.topic != request_topic {
        return Err(RecallRefusal::TopicMismatch);
    }
    if handle.broker_name != broker_name {
        return Err(RecallRefusal::BrokerMismatch);
    }
    let timestamp: i64 = handle.timestamp.parse().unwrap_or(-1);
    let time_left = timestamp.wrapping_sub(now_ms);
    if time_left <= 0 || time_left >= config.max_delay_ms() {
        return Err(RecallRefusal::TimestampInvalid);
    }
    Ok(handle)
}

/// The delete marker for a checked handle, ready for the broker's put path (which applies
/// [`timer_transform`](crate::timer_transform) and so files it in the wheel). The broker
/// fills in born host and store host. Java: `RecallMessageProcessor#buildMessage`.
pub fn delete_marker(handle: &RecallHandle, producer_group: &str, now_ms: i64) -> StoredMessage {
    let mut props = MessageProperties::new();
    props.insert(keys::TAGS, RECALL_MESSAGE_TAG);
    props.insert(keys::TIMER_DEL_UNIQKEY, delete_key(&handle.topic, &handle.message_id));
    props.insert(keys::UNIQ_KEY, handle.message_id.as_str());
    props.insert(keys::TIMER_DELIVER_MS, handle.timestamp.as_str());
    props.insert(keys::BORN_TIMESTAMP, now_ms.to_string());
    props.insert(keys::TRACE_CONTEXT, "");
    props.insert(keys::PGROUP, producer_group);
    StoredMessage {
        topic: handle.topic.clone(),
        queue_id: 0,
        body: Bytes::from_static(b"0"),
        born_timestamp_ms: now_ms,
        properties: props.encode(),
        ..StoredMessage::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_is_url_safe_padded_base64_of_five_fields() {
        let handle = build_handle("topic", "broker-0", "1700000005001", "7F0000010001");
        assert_eq!(handle, "djEgdG9waWMgYnJva2VyLTAgMTcwMDAwMDAwNTAwMSA3RjAwMDAwMTAwMDE=");
        let decoded = RecallHandle::decode(&handle).unwrap();
        assert_eq!(
            decoded,
            RecallHandle {
                topic: "topic".into(),
                broker_name: "broker-0".into(),
                timestamp: "1700000005001".into(),
                message_id: "7F0000010001".into()
            }
        );
        assert_eq!(decoded.encode(), handle);
    }

    #[test]
    fn invalid_handles_are_refused_like_java() {
        let b64 = |s: &str| base64url::encode(s.as_bytes());
        assert_eq!(RecallHandle::decode(""), Err(RecallRefusal::InvalidHandle));
        assert_eq!(RecallHandle::decode(&b64("v1 a b c")), Err(RecallRefusal::InvalidHandle));
        assert_eq!(RecallHandle::decode(&b64("v2 a b c d")), Err(RecallRefusal::InvalidHandle));
        assert_eq!(RecallHandle::decode("v1 a b c d"), Err(RecallRefusal::InvalidHandle));
        assert_eq!(RecallHandle::decode(&b64("v1 a b c d ")), RecallHandle::decode(&b64("v1 a b c d")));
        assert_eq!(RecallHandle::decode(&b64("v1 a b c  ")), Err(RecallRefusal::InvalidHandle));
        assert_eq!(RecallHandle::decode(&b64("v1 a b c d e")).unwrap().message_id, "d");
        let unpadded = b64("v1 a b c d").trim_end_matches('=').to_owned();
        assert!(RecallHandle::decode(&unpadded).is_ok());
    }

    #[test]
    fn send_handle_uses_timer_out_plus_one_and_skips_retry_topics() {
        let props =
            MessageProperties::decode("TIMER_OUT_MS\u{1}1700000005000\u{2}REAL_TOPIC\u{1}T\u{2}UNIQ_KEY\u{1}U1\u{2}");
        let h = RecallHandle::decode(&recall_handle_for_send(&props, "b").unwrap()).unwrap();
        assert_eq!((h.topic.as_str(), h.broker_name.as_str(), h.timestamp.as_str()), ("T", "b", "1700000005001"));
        assert_eq!(h.message_id, "U1");
        let retry = MessageProperties::decode("TIMER_OUT_MS\u{1}1\u{2}REAL_TOPIC\u{1}%RETRY%g\u{2}");
        assert_eq!(recall_handle_for_send(&retry, "b"), None);
        assert_eq!(recall_handle_for_send(&MessageProperties::decode("REAL_TOPIC\u{1}T\u{2}"), "b"), None);
    }

    #[test]
    fn recall_checks_follow_javas_order() {
        let c = TimerConfig::default();
        let now = 1_700_000_000_000;
        let h = build_handle("T", "b", "1700000005001", "U");
        assert!(check_recall(&h, "T", "b", now, &c).is_ok());
        assert_eq!(check_recall("%%", "T", "b", now, &c), Err(RecallRefusal::InvalidHandle));
        assert_eq!(check_recall(&h, "X", "b", now, &c), Err(RecallRefusal::TopicMismatch));
        assert_eq!(check_recall(&h, "T", "x", now, &c), Err(RecallRefusal::BrokerMismatch));
        assert_eq!(check_recall(&h, "T", "b", 1_700_000_005_001, &c), Err(RecallRefusal::TimestampInvalid));
        let bad = build_handle("T", "b", "soon", "U");
        assert_eq!(check_recall(&bad, "T", "b", now, &c), Err(RecallRefusal::TimestampInvalid));
        let far = build_handle("T", "b", &(now + c.max_delay_ms()).to_string(), "U");
        assert_eq!(check_recall(&far, "T", "b", now, &c), Err(RecallRefusal::TimestampInvalid));
    }

    #[test]
    fn delete_marker_lands_in_the_slot_of_its_message() {
        let c = TimerConfig::default();
        let now = 1_700_000_000_000;
        let handle = RecallHandle::decode(&build_handle("T", "b", "1700000005001", "U")).unwrap();
        let marker = delete_marker(&handle, "pg", now);
        let mut props = MessageProperties::decode(&marker.properties);
        assert_eq!(props.get(keys::TIMER_DEL_UNIQKEY), Some("T+U"));
        assert_eq!(props.get(keys::UNIQ_KEY), Some("U"));
        assert_eq!(props.get(keys::TAGS), Some(RECALL_MESSAGE_TAG));
        assert!(marker.properties.contains("TRACE_CONTEXT\u{1}\u{2}"), "empty value written as Java does");
        let (mut topic, mut qid) = (marker.topic.clone(), marker.queue_id);
        let d = crate::timer_transform(&mut props, &mut topic, &mut qid, || now, &c).unwrap();
        assert_eq!(d, crate::TimerDecision::Wheel { timer_out_ms: 1_700_000_005_000 });
    }
}
