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
}
