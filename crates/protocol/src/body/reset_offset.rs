//! The offsets of a consumer-offset reset: the INVOKE_BROKER_TO_RESET_OFFSET (222) response
//! body and the RESET_CONSUMER_CLIENT_OFFSET (220) request body the broker sends to consumers.
//! Java: `ResetOffsetBody`, `ResetOffsetBodyForC`, `MessageQueueForC`.
//!
//! [`ResetOffsetBody`] is keyed by queue and written in fastjson's object-key form (see the
//! private `queue_map` module). The C++ client cannot read that form; it gets
//! [`ResetOffsetBodyForC`], a list of queues carrying their offsets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::body::{lenient, queue_map, BodyError, JsonBody, MessageQueue};

/// Queue -> the offset it was reset to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResetOffsetBody {
    /// Queue -> new consumer offset.
    #[serde(serialize_with = "queue_map::serialize", deserialize_with = "queue_map::deserialize")]
    pub offset_table: BTreeMap<MessageQueue, i64>,
}

impl ResetOffsetBody {
    /// The same offsets in the C++ client's form.
    pub fn to_c_body(&self) -> ResetOffsetBodyForC {
        ResetOffsetBodyForC {
            offset_table: self
                .offset_table
                .iter()
                .map(|(queue, &offset)| MessageQueueForC {
                    broker_name: queue.broker_name.clone(),
                    offset,
                    queue_id: queue.queue_id,
                    topic: queue.topic.clone(),
                })
                .collect(),
        }
    }
}

impl JsonBody for ResetOffsetBody {
    /// fastjson's form, with queue objects as keys; not standard JSON.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + 80 * self.offset_table.len());
        out.extend_from_slice(b"{\"offsetTable\":");
        queue_map::write_map(&self.offset_table, &mut out);
        out.push(b'}');
        out
    }

    /// The same as [`ResetOffsetBody::encode`]: the body has no integer-keyed map.
    fn encode_fastjson(&self) -> Vec<u8> {
        self.encode()
    }

    /// Reads fastjson's object keys, string keys holding a queue's JSON, and the usual
    /// lenient forms.
    fn decode(bytes: &[u8]) -> Result<Self, BodyError> {
        queue_map::decode(bytes)
    }
}

/// The reset offsets as a list, for C++ clients.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResetOffsetBodyForC {
    /// One entry per queue.
    #[serde(deserialize_with = "lenient::or_default")]
    pub offset_table: Vec<MessageQueueForC>,
}

impl JsonBody for ResetOffsetBodyForC {}

/// A queue with its new offset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageQueueForC {
    /// Broker group name.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_name: String,
    /// New consumer offset.
    #[serde(deserialize_with = "lenient::int")]
    pub offset: i64,
    /// Queue id.
    #[serde(deserialize_with = "lenient::int")]
    pub queue_id: i32,
    /// Topic name.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> ResetOffsetBody {
        ResetOffsetBody {
            offset_table: BTreeMap::from([(MessageQueue::new("T", "b", 1), 20), (MessageQueue::new("T", "b", 0), 10)]),
        }
    }

    #[test]
    fn golden_bytes_in_fastjson_form() {
        let golden = concat!(
            r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:10,"#,
            r#"{"brokerName":"b","queueId":1,"topic":"T"}:20}}"#
        );
        assert_eq!(String::from_utf8(body().encode()).unwrap(), golden);
        assert_eq!(ResetOffsetBody::decode(golden.as_bytes()).unwrap(), body());
        assert_eq!(ResetOffsetBody::default().encode(), br#"{"offsetTable":{}}"#);
    }

    #[test]
    fn c_form_is_a_list_of_queues_with_offsets() {
        assert_eq!(
            String::from_utf8(body().to_c_body().encode()).unwrap(),
            concat!(
                r#"{"offsetTable":[{"brokerName":"b","offset":10,"queueId":0,"topic":"T"},"#,
                r#"{"brokerName":"b","offset":20,"queueId":1,"topic":"T"}]}"#
            )
        );
    }
}
