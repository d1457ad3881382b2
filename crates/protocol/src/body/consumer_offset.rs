//! `ConsumerOffsetSerializeWrapper`: committed consumer offsets per `topic@group` and queue
//! (consumerOffset.json, GET_ALL_CONSUMER_OFFSET 43).
//! Java: `org.apache.rocketmq.remoting.protocol.body.ConsumerOffsetSerializeWrapper`.
//!
//! Java writes the queue-id keys unquoted (`{"T@G":{0:12}}`); `crate::json` reads that.
//! The live offset table is the broker's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::body::{lenient, DataVersion, JsonBody};

/// Separator between topic and group in offset-table keys.
pub const TOPIC_GROUP_SEPARATOR: char = '@';

/// `topic@group` -> queue id -> next offset to consume.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerOffsetSerializeWrapper {
    /// Version of the table (absent in 4.x files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_version: Option<DataVersion>,
    /// `topic@group` -> queue id -> offset.
    #[serde(deserialize_with = "lenient::or_default")]
    pub offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

impl JsonBody for ConsumerOffsetSerializeWrapper {}

/// `config/lmqConsumerOffset.json` of a broker with light queues: the offsets of light queue
/// groups (`%LMQ%...`), one per `topic@group` (light queues have queue 0 only), beside the
/// other groups' offsets. Java: `LmqConsumerOffsetManager` (which keeps every offset in this
/// file alone).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LmqConsumerOffsetWrapper {
    /// Version of the table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_version: Option<DataVersion>,
    /// `lmqTopic@lmqGroup` -> offset.
    #[serde(deserialize_with = "lenient::or_default")]
    pub lmq_offset_table: BTreeMap<String, i64>,
    /// `topic@group` -> queue id -> offset, of the other groups.
    #[serde(deserialize_with = "lenient::or_default")]
    pub offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

impl JsonBody for LmqConsumerOffsetWrapper {}

/// `compaction/position-checkpoint`: per compaction topic queue (`<topic>_<queueId>`), the
/// last queue offset a compaction covered. Java: `CompactionPositionMgr`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CompactionPositionCheckpoint {
    /// `<topic>_<queueId>` -> offset.
    #[serde(deserialize_with = "lenient::or_default")]
    pub queue_offset_map: BTreeMap<String, i64>,
}

impl JsonBody for CompactionPositionCheckpoint {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_java_offsets_file() {
        let json = br#"{"offsetTable":{"TopicTest@g1":{0:12,1:456},"%RETRY%g1@g1":{0:0}}}"#;
        let wrapper = ConsumerOffsetSerializeWrapper::decode(json).unwrap();
        assert_eq!(wrapper.offset_table["TopicTest@g1"][&1], 456);
        assert_eq!(wrapper.data_version, None);
        assert_eq!(wrapper.encode_fastjson(), br#"{"offsetTable":{"%RETRY%g1@g1":{0:0},"TopicTest@g1":{0:12,1:456}}}"#);
    }

    #[test]
    fn reads_java_compaction_checkpoint() {
        let json = br#"{"empty":false,"queueOffsetMap":{"Kv_0":41,"Kv_1":-1}}"#;
        let c = CompactionPositionCheckpoint::decode(json).unwrap();
        assert_eq!(c.queue_offset_map["Kv_0"], 41);
        assert_eq!(c.encode_fastjson(), br#"{"queueOffsetMap":{"Kv_0":41,"Kv_1":-1}}"#);
    }

    #[test]
    fn reads_java_lmq_offsets_file() {
        let json = br#"{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},
            "lmqOffsetTable":{"%LMQ%a@%LMQ%g":7},"offsetTable":{"T@g":{0:2}}}"#;
        let wrapper = LmqConsumerOffsetWrapper::decode(json).unwrap();
        assert_eq!(wrapper.lmq_offset_table["%LMQ%a@%LMQ%g"], 7);
        assert_eq!(wrapper.offset_table["T@g"][&0], 2);
        assert_eq!(wrapper.data_version.unwrap().counter, 3);
    }
}
