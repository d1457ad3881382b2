//! `MessageExt`: a message as a consumer receives it (or a transactional producer is asked
//! about it), with its queue and offset. Java: `MessageExt` as `MessageDecoder#decodes` builds
//! it for the client.

use std::io::Read;

use bytes::Bytes;
use ferromq_protocol::body::MessageQueue;
use ferromq_protocol::message::{keys, sysflag, MessageError, StoredMessage};
use tracing::warn;

/// A consumed message: the stored record (body inflated) and the queue it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageExt {
    /// The queue the message was pulled from.
    pub message_queue: MessageQueue,
    /// The stored record. Its `body` is already inflated when the producer compressed it.
    pub stored: StoredMessage,
}

impl MessageExt {
    /// The body, inflated.
    pub fn body(&self) -> &Bytes {
        &self.stored.body
    }

    /// The offset in the consume queue.
    pub fn queue_offset(&self) -> i64 {
        self.stored.queue_offset
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.stored.topic
    }

    /// A user or system property.
    pub fn property(&self, name: &str) -> Option<&str> {
        self.stored.property(name)
    }

    /// The tag, if any.
    pub fn tags(&self) -> Option<&str> {
        self.property(keys::TAGS)
    }

    /// The producer's id (`UNIQ_KEY`), else the offset message id. Java: `MessageClientExt#getMsgId`.
    pub fn msg_id(&self) -> String {
        self.property(keys::UNIQ_KEY).map_or_else(|| self.stored.offset_msg_id(), str::to_owned)
    }

    /// How many times the message was redelivered.
    pub fn reconsume_times(&self) -> i32 {
        self.stored.reconsume_times
    }

    /// The transaction id of a transactional message: `__transactionId__` as the broker set
    /// it, else the `UNIQ_KEY`. Java: `MessageExt#getTransactionId` as
    /// `ClientRemotingProcessor#checkTransactionState` fills it.
    pub fn transaction_id(&self) -> Option<&str> {
        self.property(keys::TRANSACTION_ID).or_else(|| self.property(keys::UNIQ_KEY)).filter(|id| !id.is_empty())
    }
}

/// Inflates a compressed body in place; a body that does not inflate is kept as stored, with
/// a warning.
fn inflate(stored: &mut StoredMessage) {
    if stored.sys_flag & sysflag::COMPRESSED_FLAG == 0 {
        return;
    }
    let mut inflated = Vec::new();
    match flate2::read::ZlibDecoder::new(&stored.body[..]).read_to_end(&mut inflated) {
        Ok(_) => stored.body = Bytes::from(inflated),
        Err(e) => warn!(topic = %stored.topic, queue_offset = stored.queue_offset, error = %e,
            "compressed body does not inflate, kept as stored"),
    }
}

/// Decodes a PULL_MESSAGE body, inflating compressed bodies. A body that does not inflate is
/// kept as stored, with a warning.
///
/// A message pulled from a light queue (`%LMQ%...`) is the record of its own topic: its
/// queue offset becomes its offset in the light queue (from `INNER_MULTI_QUEUE_OFFSET`), so
/// that consumed offsets count in the queue pulled from.
pub(crate) fn decode_pulled(mq: &MessageQueue, body: &[u8]) -> Result<Vec<MessageExt>, MessageError> {
    let mut out = Vec::new();
    for mut stored in StoredMessage::decode_all(body)? {
        inflate(&mut stored);
        if mq.topic.starts_with(LMQ_PREFIX) {
            if let Some(offset) = light_queue_offset(&stored, &mq.topic) {
                stored.queue_offset = offset;
            }
        }
        out.push(MessageExt { message_queue: mq.clone(), stored });
    }
    Ok(out)
}

/// The prefix of light queue names. Java: `MixAll.LMQ_PREFIX`.
const LMQ_PREFIX: &str = "%LMQ%";

/// The record's offset in light queue `queue`: the entry of `INNER_MULTI_QUEUE_OFFSET` at the
/// position of `queue` in `INNER_MULTI_DISPATCH`.
fn light_queue_offset(stored: &StoredMessage, queue: &str) -> Option<i64> {
    let names = stored.property(keys::INNER_MULTI_DISPATCH)?;
    let offsets = stored.property(keys::INNER_MULTI_QUEUE_OFFSET)?;
    let position = names.split(',').position(|name| name == queue)?;
    offsets.split(',').nth(position)?.parse().ok()
}

/// Decodes the half message of a CHECK_TRANSACTION_STATE body (one stored record, with the
/// real topic and queue) from broker `broker_name`, inflating a compressed body.
/// Java: `MessageDecoder#decode`.
pub(crate) fn decode_checked(broker_name: &str, body: &[u8]) -> Result<MessageExt, MessageError> {
    let (mut stored, _) = StoredMessage::decode(body)?;
    inflate(&mut stored);
    let message_queue = MessageQueue::new(&stored.topic, broker_name, stored.queue_id);
    Ok(MessageExt { message_queue, stored })
}

#[cfg(test)]
mod light_queue_tests {
    use super::*;

    #[test]
    fn a_message_pulled_from_a_light_queue_carries_its_offset_there() {
        let stored = StoredMessage {
            topic: "T".into(),
            queue_offset: 40,
            properties: "INNER_MULTI_DISPATCH\u{1}%LMQ%a,%LMQ%b\u{2}INNER_MULTI_QUEUE_OFFSET\u{1}3,9\u{2}".into(),
            ..StoredMessage::default()
        };
        let body = stored.encode().unwrap();
        let from = |queue: &str| decode_pulled(&MessageQueue::new(queue, "b", 0), &body).unwrap()[0].queue_offset();
        assert_eq!(from("%LMQ%b"), 9);
        assert_eq!(from("%LMQ%a"), 3);
        assert_eq!(from("T"), 40);
        assert_eq!(from("%LMQ%other"), 40);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn checked_half_message_is_inflated_and_keeps_its_real_queue() {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(b"the body").unwrap();
        let stored = StoredMessage {
            topic: "Orders".into(),
            queue_id: 3,
            sys_flag: sysflag::COMPRESSED_FLAG,
            body: Bytes::from(z.finish().unwrap()),
            properties: "UNIQ_KEY\u{1}U1\u{2}PGROUP\u{1}pg\u{2}".into(),
            ..StoredMessage::default()
        };
        let msg = decode_checked("broker-a", &stored.encode().unwrap()).unwrap();
        assert_eq!(msg.message_queue, MessageQueue::new("Orders", "broker-a", 3));
        assert_eq!(&msg.body()[..], b"the body");
        assert_eq!(msg.transaction_id(), Some("U1"), "the UNIQ_KEY when the broker set no id");
        assert!(decode_checked("broker-a", b"short").is_err());
    }
}
