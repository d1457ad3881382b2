//! Messages between the two protocols (Java: `GrpcConverter`, `SendMessageActivity`): a gRPC
//! `Message` becomes the properties, system flag and body of a remoting send; a stored
//! message becomes the gRPC `Message` a consumer receives.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use ferromq_protocol::message::{keys, sysflag, StoredMessage};

use crate::brokers::TopicMessageType;
use crate::pb::{self, Code, DigestType, Encoding, MessageType};
use crate::status::{bad, ProxyResult};

/// Now, in ms since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A timestamp from ms since the epoch.
pub fn timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp { seconds: ms.div_euclid(1000), nanos: (ms.rem_euclid(1000) * 1_000_000) as i32 }
}

/// ms since the epoch of a timestamp (saturating).
pub fn timestamp_ms(t: &prost_types::Timestamp) -> i64 {
    t.seconds.saturating_mul(1000).saturating_add(i64::from(t.nanos) / 1_000_000)
}

/// A duration from ms (negative reads as 0).
pub fn duration(ms: i64) -> prost_types::Duration {
    let ms = ms.max(0);
    prost_types::Duration { seconds: ms / 1000, nanos: ((ms % 1000) * 1_000_000) as i32 }
}

/// ms of a duration (saturating; negative stays negative so callers can refuse it).
pub fn duration_ms(d: &prost_types::Duration) -> i64 {
    d.seconds.saturating_mul(1000).saturating_add(i64::from(d.nanos) / 1_000_000)
}

/// Limits a message must keep (from `ProxyConfig`).
#[derive(Debug, Clone)]
pub struct MessageLimits {
    /// `maxMessageSize`.
    pub max_body_bytes: usize,
    /// `enableMessageBodyEmptyCheck`.
    pub refuse_empty_body: bool,
    /// `userPropertyMaxNum`.
    pub max_user_properties: usize,
    /// `maxUserPropertySize`.
    pub max_user_property_bytes: usize,
    /// `maxMessageGroupSize`.
    pub max_message_group_bytes: usize,
    /// `maxDelayTimeMills`.
    pub max_delay_ms: i64,
    /// `maxTransactionRecoverySecond`.
    pub max_transaction_recovery_s: i64,
    /// With `useDelayLevel`, the delay levels (`messageDelayLevel`, ms): a delivery time also
    /// names the level that covers it (DELAY), which the broker's schedule serves first.
    pub delay_levels_ms: Option<Vec<i64>>,
}

/// Java's `ProxyConfig#computeDelayLevel`: the first level (1-based) longer than the time
/// left, or the longest one.
pub fn delay_level_for(levels_ms: &[i64], delay_ms: i64) -> usize {
    let mut sorted: Vec<(usize, i64)> = levels_ms.iter().copied().enumerate().map(|(i, ms)| (i + 1, ms)).collect();
    sorted.sort_by_key(|&(_, ms)| ms);
    sorted.iter().find(|&&(_, ms)| ms > delay_ms).or(sorted.last()).map_or(0, |&(level, _)| level)
}

/// What a remoting send of one gRPC message carries.
#[derive(Debug, Clone)]
pub struct OutgoingMessage {
    /// The properties, as the stored record will hold them.
    pub properties: ferromq_protocol::message::MessageProperties,
    /// The system flag (compression, transaction).
    pub sys_flag: i32,
    /// The body as the client sent it.
    pub body: bytes::Bytes,
    /// The client's message id (UNIQ_KEY).
    pub message_id: String,
    /// The message type the properties give.
    pub message_type: TopicMessageType,
    /// FIFO only: the message group.
    pub message_group: Option<String>,
    /// The client's born timestamp, ms.
    pub born_timestamp_ms: i64,
    /// RECONSUME_TIME, for messages a client resends.
    pub reconsume_times: i32,
    /// Transactional messages: the seconds before the broker's first check
    /// (CHECK_IMMUNITY_TIME_IN_SECONDS), when the client gave them.
    pub check_immunity_secs: Option<u64>,
}

fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// Checks one gRPC message as Java's proxy does (first failure wins) and converts it.
/// `producer_group` is the topic (gRPC producers have no group).
///
/// # Errors
/// The validation codes of `SendMessage` (grpc-proxy.md §6.3).
pub fn outgoing(
    message: pb::Message,
    producer_group: &str,
    limits: &MessageLimits,
    now: i64,
) -> ProxyResult<OutgoingMessage> {
    let sys = message.system_properties.unwrap_or_default();
    if message.body.is_empty() && limits.refuse_empty_body {
        return Err(bad!(MessageBodyEmpty, "message body cannot be empty"));
    }
    if message.body.len() > limits.max_body_bytes {
        return Err(bad!(
            MessageBodyTooLarge,
            "message body cannot exceed the max {} bytes (it has {})",
            limits.max_body_bytes,
            message.body.len()
        ));
    }
    let mut props = ferromq_protocol::message::MessageProperties::new();
    let mut user_bytes = 0usize;
    if message.user_properties.len() > limits.max_user_properties {
        return Err(bad!(
            MessagePropertiesTooLarge,
            "too many user properties: {} (the max is {})",
            message.user_properties.len(),
            limits.max_user_properties
        ));
    }
    for (k, v) in &message.user_properties {
        if keys::RESERVED.contains(&k.as_str()) {
            return Err(bad!(IllegalMessagePropertyKey, "property key {k} is reserved for the system"));
        }
        if k.is_empty() || has_control(k) || has_control(v) {
            return Err(bad!(IllegalMessagePropertyKey, "property {k:?} has a blank key or control characters"));
        }
        user_bytes += k.len() + v.len();
        props.insert(k.clone(), v.clone());
    }
    if let Some(tag) = &sys.tag {
        if tag.trim().is_empty() || tag.contains('|') || has_control(tag) {
            return Err(bad!(IllegalMessageTag, "tag {tag:?} is blank or holds '|' or control characters"));
        }
        user_bytes += tag.len();
        props.insert(keys::TAGS, tag.clone());
    }
    if !sys.keys.is_empty() {
        for key in &sys.keys {
            if key.trim().is_empty() || has_control(key) {
                return Err(bad!(IllegalMessageKey, "message key {key:?} is blank or holds control characters"));
            }
            user_bytes += key.len();
        }
        props.insert(keys::KEYS, sys.keys.join(keys::KEY_SEPARATOR));
    }
    if user_bytes > limits.max_user_property_bytes {
        return Err(bad!(
            MessagePropertiesTooLarge,
            "user properties take {user_bytes} bytes (the max is {})",
            limits.max_user_property_bytes
        ));
    }
    if sys.message_id.trim().is_empty() {
        return Err(bad!(IllegalMessageId, "message id cannot be empty"));
    }
    props.insert(keys::UNIQ_KEY, sys.message_id.clone());
    let mut message_type = TopicMessageType::Normal;
    let mut message_group = None;
    if let Some(group) = &sys.message_group {
        if group.trim().is_empty() || group.len() > limits.max_message_group_bytes || has_control(group) {
            return Err(bad!(
                IllegalMessageGroup,
                "message group {group:?} is blank, longer than {} bytes or holds control characters",
                limits.max_message_group_bytes
            ));
        }
        props.insert(keys::SHARDING_KEY, group.clone());
        message_type = TopicMessageType::Fifo;
        message_group = Some(group.clone());
    }
    if let Some(at) = &sys.delivery_timestamp {
        let at = timestamp_ms(at);
        if at - now > limits.max_delay_ms {
            return Err(bad!(IllegalDeliveryTime, "delivery timestamp is more than {} ms ahead", limits.max_delay_ms));
        }
        if at > now {
            props.insert(keys::TIMER_DELIVER_MS, at.to_string());
            if let Some(levels) = limits.delay_levels_ms.as_deref().filter(|l| !l.is_empty()) {
                props.insert(keys::DELAY, delay_level_for(levels, at - now).to_string());
            }
            message_type = TopicMessageType::Delay;
        }
    }
    let mut sys_flag = 0;
    let mut check_immunity_secs = None;
    if sys.message_type == MessageType::Transaction as i32 {
        props.insert(keys::TRAN_MSG, "true");
        sys_flag = sysflag::with_transaction_value(sys_flag, sysflag::TRANSACTION_PREPARED_TYPE);
        message_type = TopicMessageType::Transaction;
        if let Some(d) = &sys.orphaned_transaction_recovery_duration {
            let secs = duration_ms(d) / 1000;
            if secs > limits.max_transaction_recovery_s {
                return Err(bad!(
                    BadRequest,
                    "orphaned transaction recovery duration exceeds {} s",
                    limits.max_transaction_recovery_s
                ));
            }
            if secs > 0 {
                props.insert(keys::CHECK_IMMUNITY_TIME_IN_SECONDS, secs.to_string());
                check_immunity_secs = u64::try_from(secs).ok();
            }
        }
    }
    if sys.body_encoding == Encoding::Gzip as i32 {
        sys_flag |= sysflag::COMPRESSED_FLAG;
    }
    let reconsume_times = sys.delivery_attempt.map_or(0, |a| (a - 1).max(0));
    if reconsume_times > 0 {
        props.insert(keys::RECONSUME_TIME, reconsume_times.to_string());
    }
    props.insert(keys::PGROUP, producer_group);
    if let Some(trace) = sys.trace_context.as_ref().filter(|t| !t.is_empty()) {
        props.insert(keys::TRACE_CONTEXT, trace.clone());
    }
    if !sys.born_host.is_empty() {
        props.insert(keys::BORN_HOST, sys.born_host.clone());
    }
    let born_timestamp_ms = sys.born_timestamp.as_ref().map_or(now, timestamp_ms);
    props.insert(keys::BORN_TIMESTAMP, born_timestamp_ms.to_string());
    Ok(OutgoingMessage {
        properties: props,
        sys_flag,
        body: message.body.into(),
        message_id: sys.message_id,
        message_type,
        message_group,
        born_timestamp_ms,
        reconsume_times,
        check_immunity_secs,
    })
}

/// The message type a stored message's properties give (Java: `GrpcConverter#buildMessage`).
fn stored_message_type(m: &StoredMessage) -> MessageType {
    if m.property(keys::TRAN_MSG).is_some_and(|v| v == "true") {
        MessageType::Transaction
    } else if m.property(keys::DELAY).is_some()
        || m.property(keys::TIMER_DELIVER_MS).is_some()
        || m.property(keys::TIMER_DELAY_SEC).is_some()
        || m.property(keys::TIMER_DELAY_MS).is_some()
    {
        MessageType::Delay
    } else if m.property(keys::SHARDING_KEY).is_some() {
        MessageType::Fifo
    } else {
        MessageType::Normal
    }
}

/// Properties the proxy hands to consumers only as system properties.
fn is_system_key(k: &str) -> bool {
    keys::RESERVED.contains(&k)
        || k.starts_with("__")
        || k.starts_with("TIMER_")
        || matches!(
            k,
            keys::TRACE_CONTEXT | keys::BORN_TIMESTAMP | keys::DLQ_ORIGIN_TOPIC | keys::DLQ_ORIGIN_MESSAGE_ID
        )
}

/// Upper-case hex MD5 of `body` (Java: `UtilAll.bytes2string(MD5)`).
pub fn md5_hex(body: &[u8]) -> String {
    let digest = md5::compute(body);
    let mut s = String::with_capacity(32);
    for b in digest.0 {
        s.push(char::from(b"0123456789ABCDEF"[usize::from(b >> 4)]));
        s.push(char::from(b"0123456789ABCDEF"[usize::from(b & 15)]));
    }
    s
}

/// How a consumer receives one stored message.
#[derive(Debug, Clone, Default)]
pub struct Delivery {
    /// The topic the consumer asked for (retry topics are not shown), as brokers name it.
    pub topic: String,
    /// The consumer's namespace: the topic is shown without it.
    pub namespace: String,
    /// The receipt handle, for POP deliveries.
    pub receipt_handle: Option<String>,
    /// The invisible duration, ms, for POP deliveries.
    pub invisible_ms: Option<i64>,
    /// Reconsume count (from a FIFO pop's order count info when it has one).
    pub reconsume_times: i32,
}

/// The gRPC message a consumer receives for `m`.
pub fn incoming(m: &StoredMessage, delivery: Delivery) -> pb::Message {
    let mut user_properties = HashMap::new();
    let props = m.properties_map();
    for (k, v) in props.iter() {
        if !is_system_key(k) {
            user_properties.insert(k.to_owned(), v.to_owned());
        }
    }
    let message_id = m.property(keys::UNIQ_KEY).map_or_else(|| m.offset_msg_id(), str::to_owned);
    let delivery_ms = m
        .property(keys::TIMER_DELIVER_MS)
        .and_then(|v| v.parse::<i64>().ok())
        .or_else(|| m.property(keys::START_DELIVER_TIME).and_then(|v| v.parse().ok()));
    let dead_letter_queue = m.property(keys::DLQ_ORIGIN_TOPIC).map(|t| pb::DeadLetterQueue {
        topic: t.to_owned(),
        message_id: m.property(keys::DLQ_ORIGIN_MESSAGE_ID).unwrap_or_default().to_owned(),
    });
    let born_host = m.property(keys::BORN_HOST).map_or_else(|| m.born_host.to_string(), str::to_owned);
    let sys = pb::SystemProperties {
        tag: m.property(keys::TAGS).map(str::to_owned),
        keys: m
            .property(keys::KEYS)
            .map(|k| k.split(keys::KEY_SEPARATOR).filter(|s| !s.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default(),
        message_id,
        body_digest: Some(pb::Digest { r#type: DigestType::Md5 as i32, checksum: md5_hex(&m.body) }),
        body_encoding: if m.sys_flag & sysflag::COMPRESSED_FLAG != 0 { Encoding::Gzip } else { Encoding::Identity }
            as i32,
        message_type: stored_message_type(m) as i32,
        born_timestamp: Some(timestamp(m.born_timestamp_ms)),
        born_host,
        store_timestamp: Some(timestamp(m.store_timestamp_ms)),
        store_host: m.store_host.to_string(),
        delivery_timestamp: delivery_ms.map(timestamp),
        receipt_handle: delivery.receipt_handle,
        queue_id: m.queue_id,
        queue_offset: Some(m.queue_offset),
        invisible_duration: delivery.invisible_ms.map(duration),
        delivery_attempt: Some(delivery.reconsume_times.saturating_add(1)),
        message_group: m.property(keys::SHARDING_KEY).map(str::to_owned),
        trace_context: m.property(keys::TRACE_CONTEXT).map(str::to_owned),
        orphaned_transaction_recovery_duration: None,
        dead_letter_queue,
        ..Default::default()
    };
    pb::Message {
        topic: Some(crate::namespace::resource(&delivery.namespace, &delivery.topic)),
        user_properties,
        system_properties: Some(sys),
        body: m.body.to_vec(),
    }
}

/// The gRPC message type a topic accepts (QueryRoute's `accept_message_types`).
pub fn accepted_types(t: TopicMessageType) -> Vec<i32> {
    match t {
        TopicMessageType::Normal => vec![MessageType::Normal as i32],
        TopicMessageType::Fifo => vec![MessageType::Fifo as i32],
        TopicMessageType::Delay => vec![MessageType::Delay as i32],
        TopicMessageType::Transaction => vec![MessageType::Transaction as i32],
        TopicMessageType::Mixed => vec![
            MessageType::Normal as i32,
            MessageType::Fifo as i32,
            MessageType::Delay as i32,
            MessageType::Transaction as i32,
        ],
        TopicMessageType::Unspecified => vec![MessageType::Unspecified as i32],
    }
}

/// Refuses a message whose type the topic does not take (Java: `ProducerProcessor`'s
/// `TopicMessageType` check; MIXED takes every type).
///
/// # Errors
/// MESSAGE_PROPERTY_CONFLICT_WITH_TYPE naming both types.
pub fn check_message_type(topic_type: TopicMessageType, message_type: TopicMessageType) -> ProxyResult<()> {
    if topic_type == TopicMessageType::Mixed || topic_type == message_type {
        return Ok(());
    }
    Err(crate::status::ProxyError::new(
        Code::MessagePropertyConflictWithType,
        format!(
            "TopicMessageType validate failed, the expected type is {}, but actual type is {}",
            topic_type.name(),
            message_type.name()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> MessageLimits {
        MessageLimits {
            max_body_bytes: 16,
            refuse_empty_body: true,
            max_user_properties: 2,
            max_user_property_bytes: 64,
            max_message_group_bytes: 8,
            max_delay_ms: 1000,
            max_transaction_recovery_s: 10,
            delay_levels_ms: None,
        }
    }

    #[test]
    fn use_delay_level_names_the_level_covering_the_delay() {
        let levels = [1000, 5000, 10_000];
        assert_eq!(delay_level_for(&levels, 0), 1);
        assert_eq!(delay_level_for(&levels, 999), 1);
        assert_eq!(delay_level_for(&levels, 1000), 2, "strictly longer, as Java");
        assert_eq!(delay_level_for(&levels, 7000), 3);
        assert_eq!(delay_level_for(&levels, 60_000), 3, "past the longest: the longest");
        let mut m = msg(b"x");
        m.system_properties.as_mut().unwrap().delivery_timestamp = Some(timestamp(10_700));
        let with_levels = MessageLimits { delay_levels_ms: Some(vec![100, 500, 1000]), ..limits() };
        let out = outgoing(m.clone(), "T", &with_levels, 10_000).unwrap();
        assert_eq!(out.properties.get("DELAY"), Some("3"));
        assert_eq!(out.properties.get("TIMER_DELIVER_MS"), Some("10700"), "the timer key stays, as Java");
        let out = outgoing(m, "T", &limits(), 10_000).unwrap();
        assert_eq!(out.properties.get("DELAY"), None, "useDelayLevel off: the timer only");
    }

    fn msg(body: &[u8]) -> pb::Message {
        pb::Message {
            topic: Some(pb::Resource { resource_namespace: String::new(), name: "T".into() }),
            user_properties: HashMap::new(),
            system_properties: Some(pb::SystemProperties { message_id: "ID1".into(), ..Default::default() }),
            body: body.to_vec(),
        }
    }

    #[test]
    fn validation_codes() {
        let code = |m: pb::Message| outgoing(m, "T", &limits(), 0).unwrap_err().code;
        assert_eq!(code(msg(b"")), Code::MessageBodyEmpty);
        assert_eq!(code(msg(&[0; 17])), Code::MessageBodyTooLarge);
        let mut m = msg(b"x");
        m.user_properties.insert("UNIQ_KEY".into(), "v".into());
        assert_eq!(code(m), Code::IllegalMessagePropertyKey);
        let mut m = msg(b"x");
        m.system_properties.as_mut().unwrap().tag = Some("a|b".into());
        assert_eq!(code(m), Code::IllegalMessageTag);
        let mut m = msg(b"x");
        m.system_properties.as_mut().unwrap().message_group = Some("123456789".into());
        assert_eq!(code(m), Code::IllegalMessageGroup);
        let mut m = msg(b"x");
        m.system_properties.as_mut().unwrap().message_id = String::new();
        assert_eq!(code(m), Code::IllegalMessageId);
        let mut m = msg(b"x");
        m.system_properties.as_mut().unwrap().delivery_timestamp = Some(timestamp(5000));
        assert_eq!(code(m), Code::IllegalDeliveryTime);
    }

    #[test]
    fn properties_follow_the_proxy_mapping() {
        let mut m = msg(b"body");
        m.user_properties.insert("color".into(), "red".into());
        let sys = m.system_properties.as_mut().unwrap();
        sys.tag = Some("TagA".into());
        sys.keys = vec!["k1".into(), "k2".into()];
        sys.message_group = Some("g".into());
        let out = outgoing(m, "T", &limits(), 0).unwrap();
        let p = &out.properties;
        assert_eq!(p.get("TAGS"), Some("TagA"));
        assert_eq!(p.get("KEYS"), Some("k1 k2"));
        assert_eq!(p.get("UNIQ_KEY"), Some("ID1"));
        assert_eq!(p.get("__SHARDINGKEY"), Some("g"));
        assert_eq!(p.get("PGROUP"), Some("T"));
        assert_eq!(p.get("color"), Some("red"));
        assert_eq!(out.message_type, TopicMessageType::Fifo);
    }

    #[test]
    fn type_check_accepts_mixed() {
        assert!(check_message_type(TopicMessageType::Mixed, TopicMessageType::Fifo).is_ok());
        let e = check_message_type(TopicMessageType::Normal, TopicMessageType::Fifo).unwrap_err();
        assert_eq!(e.code, Code::MessagePropertyConflictWithType);
        assert!(e.message.contains("expected type is NORMAL, but actual type is FIFO"), "{}", e.message);
    }

    #[test]
    fn md5_is_upper_hex() {
        assert_eq!(md5_hex(b""), "D41D8CD98F00B204E9800998ECF8427E");
    }
}
