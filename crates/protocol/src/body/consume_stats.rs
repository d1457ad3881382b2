//! The GET_CONSUME_STATS (208) response body: per queue, how far the broker and a consumer
//! group have got. Java: `org.apache.rocketmq.remoting.protocol.admin.ConsumeStats`,
//! `OffsetWrapper`.
//!
//! The table is keyed by queue, so it is written in fastjson's object-key form (see the
//! private `queue_map` module).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::body::{lenient, queue_map, BodyError, JsonBody, MessageQueue};

/// A consumer group's progress on one broker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeStats {
    /// Messages the group consumed per second, summed over the topics.
    #[serde(deserialize_with = "lenient::or_default")]
    pub consume_tps: f64,
    /// Queue -> the group's progress on it.
    #[serde(serialize_with = "queue_map::serialize", deserialize_with = "queue_map::deserialize")]
    pub offset_table: BTreeMap<MessageQueue, OffsetWrapper>,
}

impl ConsumeStats {
    /// Messages not yet consumed, over every queue (broker offset minus consumer offset).
    /// Java: `ConsumeStats#computeTotalDiff`.
    pub fn total_diff(&self) -> i64 {
        self.offset_table.values().map(|o| o.broker_offset - o.consumer_offset).sum()
    }
}

/// One queue's offsets for a consumer group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OffsetWrapper {
    /// Offset after the queue's last message.
    #[serde(deserialize_with = "lenient::int")]
    pub broker_offset: i64,
    /// The group's committed offset (0 if none).
    #[serde(deserialize_with = "lenient::int")]
    pub consumer_offset: i64,
    /// Store time (ms) of the last consumed message; 0 if unknown.
    #[serde(deserialize_with = "lenient::int")]
    pub last_timestamp: i64,
    /// 5.x: how far the group has pulled (at least the consumer offset).
    #[serde(deserialize_with = "lenient::int")]
    pub pull_offset: i64,
}

impl JsonBody for ConsumeStats {
    /// fastjson's form, with queue objects as keys; not standard JSON.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + 160 * self.offset_table.len());
        out.extend_from_slice(b"{\"consumeTps\":");
        queue_map::write_value(&self.consume_tps, &mut out);
        out.extend_from_slice(b",\"offsetTable\":");
        queue_map::write_map(&self.offset_table, &mut out);
        out.push(b'}');
        out
    }

    /// The same as [`ConsumeStats::encode`]: the body has no integer-keyed map.
    fn encode_fastjson(&self) -> Vec<u8> {
        self.encode()
    }

    /// Reads fastjson's object keys, string keys holding a queue's JSON, and the usual
    /// lenient forms.
    fn decode(bytes: &[u8]) -> Result<Self, BodyError> {
        queue_map::decode(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes_in_fastjson_form() {
        let stats = ConsumeStats {
            consume_tps: 0.0,
            offset_table: BTreeMap::from([(
                MessageQueue::new("T", "broker-a", 0),
                OffsetWrapper {
                    broker_offset: 5,
                    consumer_offset: 3,
                    last_timestamp: 1_700_000_000_000,
                    pull_offset: 3,
                },
            )]),
        };
        let golden = concat!(
            r#"{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:"#,
            r#"{"brokerOffset":5,"consumerOffset":3,"lastTimestamp":1700000000000,"pullOffset":3}}}"#
        );
        assert_eq!(String::from_utf8(stats.encode()).unwrap(), golden);
        assert_eq!(ConsumeStats::decode(golden.as_bytes()).unwrap(), stats);
        assert_eq!(stats.total_diff(), 2);
    }

    #[test]
    fn reads_4x_output_without_pull_offset() {
        let java = concat!(
            r#"{"consumeTps":1.5,"offsetTable":{{"brokerName":"b","queueId":3,"topic":"T"}:"#,
            r#"{"brokerOffset":100,"consumerOffset":90,"lastTimestamp":0}}}"#
        );
        let stats = ConsumeStats::decode(java.as_bytes()).unwrap();
        let wrapper = stats.offset_table[&MessageQueue::new("T", "b", 3)];
        assert_eq!((wrapper.broker_offset, wrapper.consumer_offset, wrapper.pull_offset), (100, 90, 0));
        assert!((stats.consume_tps - 1.5).abs() < f64::EPSILON);
    }
}
