//! The GET_TOPIC_STATS_INFO (202) response body: each queue's offset range and last store time.
//! Java: `org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable`, `TopicOffset`.
//!
//! The table is keyed by queue, so it is written in fastjson's object-key form (see the
//! private `queue_map` module).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::body::{lenient, queue_map, BodyError, JsonBody, MessageQueue};

/// Offsets of every queue of one topic on one broker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicStatsTable {
    /// Queue -> its offsets.
    #[serde(serialize_with = "queue_map::serialize", deserialize_with = "queue_map::deserialize")]
    pub offset_table: BTreeMap<MessageQueue, TopicOffset>,
    /// Messages put per second into the topic.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic_put_tps: f64,
}

/// One queue's offset range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicOffset {
    /// Store time (ms) of the queue's last message; 0 for an empty queue.
    #[serde(deserialize_with = "lenient::int")]
    pub last_update_timestamp: i64,
    /// Offset after the last message.
    #[serde(deserialize_with = "lenient::int")]
    pub max_offset: i64,
    /// Offset of the first message still stored.
    #[serde(deserialize_with = "lenient::int")]
    pub min_offset: i64,
}

impl JsonBody for TopicStatsTable {
    /// fastjson's form, with queue objects as keys; not standard JSON.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + 128 * self.offset_table.len());
        out.extend_from_slice(b"{\"offsetTable\":");
        queue_map::write_map(&self.offset_table, &mut out);
        out.extend_from_slice(b",\"topicPutTps\":");
        queue_map::write_value(&self.topic_put_tps, &mut out);
        out.push(b'}');
        out
    }

    /// The same as [`TopicStatsTable::encode`]: the body has no integer-keyed map.
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
        let offset = TopicOffset { last_update_timestamp: 1_700_000_000_123, max_offset: 3, min_offset: 0 };
        let table = TopicStatsTable {
            offset_table: BTreeMap::from([
                (MessageQueue::new("T", "broker-a", 1), TopicOffset::default()),
                (MessageQueue::new("T", "broker-a", 0), offset),
            ]),
            topic_put_tps: 0.0,
        };
        let golden = concat!(
            r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:"#,
            r#"{"lastUpdateTimestamp":1700000000123,"maxOffset":3,"minOffset":0},"#,
            r#"{"brokerName":"broker-a","queueId":1,"topic":"T"}:"#,
            r#"{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}},"topicPutTps":0.0}"#
        );
        assert_eq!(String::from_utf8(table.encode()).unwrap(), golden);
        assert_eq!(TopicStatsTable::decode(golden.as_bytes()).unwrap(), table);
    }

    #[test]
    fn reads_java_output_with_tps_and_whitespace() {
        let java = concat!(
            r#"{"offsetTable":{ {"brokerName":"b","queueId":3,"topic":"MyTopic"} : "#,
            r#"{"lastUpdateTimestamp":1700000000000,"maxOffset":500,"minOffset":0}},"topicPutTps":2.5}"#
        );
        let table = TopicStatsTable::decode(java.as_bytes()).unwrap();
        assert_eq!(table.offset_table[&MessageQueue::new("MyTopic", "b", 3)].max_offset, 500);
        assert!((table.topic_put_tps - 2.5).abs() < f64::EPSILON);
        assert_eq!(TopicStatsTable::decode(b"{}").unwrap(), TopicStatsTable::default());
        assert_eq!(TopicStatsTable::default().encode(), br#"{"offsetTable":{},"topicPutTps":0.0}"#);
    }
}
