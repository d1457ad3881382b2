//! `MessageExt`: a message as a consumer receives it, with its queue and offset.
//! Java: `MessageExt` as `MessageDecoder#decodes` builds it for the client.

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
}

/// Decodes a PULL_MESSAGE body, inflating compressed bodies. A body that does not inflate is
/// kept as stored, with a warning.
pub(crate) fn decode_pulled(mq: &MessageQueue, body: &[u8]) -> Result<Vec<MessageExt>, MessageError> {
    let mut out = Vec::new();
    for mut stored in StoredMessage::decode_all(body)? {
        if stored.sys_flag & sysflag::COMPRESSED_FLAG != 0 {
            let mut inflated = Vec::new();
            match flate2::read::ZlibDecoder::new(&stored.body[..]).read_to_end(&mut inflated) {
                Ok(_) => stored.body = Bytes::from(inflated),
                Err(e) => warn!(topic = %mq.topic, queue_offset = stored.queue_offset, error = %e,
                    "compressed body does not inflate, kept as stored"),
            }
        }
        out.push(MessageExt { message_queue: mq.clone(), stored });
    }
    Ok(out)
}
