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

/// Every subscription group's progress on this broker (GET_BROKER_CONSUME_STATS, 317;
/// `mqadmin brokerConsumeStats`). Java: `ConsumeStatsList`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeStatsList {
    /// The broker's address.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_addr: String,
    /// One map per group: group -> its stats per topic.
    #[serde(deserialize_with = "lenient::or_default")]
    pub consume_stats_list: Vec<BTreeMap<String, Vec<ConsumeStats>>>,
    /// Messages not yet consumed, over every group and queue.
    #[serde(deserialize_with = "lenient::int")]
    pub total_diff: i64,
    /// Messages pulled but not yet committed, over every group and queue.
    #[serde(deserialize_with = "lenient::int")]
    pub total_inflight_diff: i64,
}

impl JsonBody for ConsumeStatsList {
    /// fastjson's form: the nested stats have queue objects as keys.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(b"{\"brokerAddr\":");
        queue_map::write_value(&self.broker_addr, &mut out);
        out.extend_from_slice(b",\"consumeStatsList\":[");
        for (i, groups) in self.consume_stats_list.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'{');
            for (j, (group, stats)) in groups.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                queue_map::write_value(group, &mut out);
                out.extend_from_slice(b":[");
                for (k, one) in stats.iter().enumerate() {
                    if k > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(&one.encode());
                }
                out.push(b']');
            }
            out.push(b'}');
        }
        out.extend_from_slice(b"],\"totalDiff\":");
        queue_map::write_value(&self.total_diff, &mut out);
        out.extend_from_slice(b",\"totalInflightDiff\":");
        queue_map::write_value(&self.total_inflight_diff, &mut out);
        out.push(b'}');
        out
    }

    /// The same as [`ConsumeStatsList::encode`].
    fn encode_fastjson(&self) -> Vec<u8> {
        self.encode()
    }

    /// Reads the nested queue-object keys as [`ConsumeStats::decode`] does.
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
    fn consume_stats_list_golden_bytes() {
        let stats = ConsumeStats {
            consume_tps: 0.0,
            offset_table: BTreeMap::from([(
                MessageQueue::new("T", "b", 1),
                OffsetWrapper { broker_offset: 9, consumer_offset: 4, last_timestamp: 0, pull_offset: 4 },
            )]),
        };
        let list = ConsumeStatsList {
            broker_addr: "10.0.0.1:10911".into(),
            consume_stats_list: vec![
                BTreeMap::from([("g".to_owned(), vec![stats])]),
                BTreeMap::from([("h".to_owned(), vec![])]),
            ],
            total_diff: 5,
            total_inflight_diff: 0,
        };
        let golden = concat!(
            r#"{"brokerAddr":"10.0.0.1:10911","consumeStatsList":[{"g":[{"consumeTps":0.0,"offsetTable":"#,
            r#"{{"brokerName":"b","queueId":1,"topic":"T"}:{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":0,"pullOffset":4}}}]},"#,
            r#"{"h":[]}],"totalDiff":5,"totalInflightDiff":0}"#
        );
        assert_eq!(String::from_utf8(list.encode()).unwrap(), golden);
        assert_eq!(ConsumeStatsList::decode(golden.as_bytes()).unwrap(), list);
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
