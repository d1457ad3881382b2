//! The topic table as a broker ships it: `TopicConfigSerializeWrapper` (topics.json, 4.x
//! registration) and the 5.x `TopicConfigAndMappingSerializeWrapper` that adds static-topic
//! queue mappings (GET_ALL_TOPIC_CONFIG, 5.x registration).
//! Java: `TopicConfigSerializeWrapper`, `TopicConfigAndMappingSerializeWrapper`.
//!
//! Queue mappings (`TopicQueueMappingInfo` / `TopicQueueMappingDetail`) are kept as opaque
//! JSON values per topic; nothing here interprets them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::body::{lenient, DataVersion, JsonBody, TopicConfig};

/// Topic name -> config, with the table's version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfigSerializeWrapper {
    /// Version of the topic table.
    #[serde(deserialize_with = "lenient::or_default")]
    pub data_version: DataVersion,
    /// Topic name -> config.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
}

impl JsonBody for TopicConfigSerializeWrapper {}

/// The topic table plus 5.x static-topic queue mappings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfigAndMappingSerializeWrapper {
    /// Version of the topic table.
    #[serde(deserialize_with = "lenient::or_default")]
    pub data_version: DataVersion,
    /// Version of the mapping tables.
    #[serde(deserialize_with = "lenient::or_default")]
    pub mapping_data_version: DataVersion,
    /// Topic name -> config.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
    /// Topic -> `TopicQueueMappingDetail` JSON (opaque).
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic_queue_mapping_detail_map: BTreeMap<String, Value>,
    /// Topic -> `TopicQueueMappingInfo` JSON (opaque).
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic_queue_mapping_info_map: BTreeMap<String, Value>,
}

impl JsonBody for TopicConfigAndMappingSerializeWrapper {}

impl From<TopicConfigSerializeWrapper> for TopicConfigAndMappingSerializeWrapper {
    fn from(plain: TopicConfigSerializeWrapper) -> Self {
        Self { data_version: plain.data_version, topic_config_table: plain.topic_config_table, ..Self::default() }
    }
}

impl From<TopicConfigAndMappingSerializeWrapper> for TopicConfigSerializeWrapper {
    /// Drops the mappings.
    fn from(full: TopicConfigAndMappingSerializeWrapper) -> Self {
        Self { data_version: full.data_version, topic_config_table: full.topic_config_table }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_topics_json_shape() {
        let json = br#"{"dataVersion":{"counter":2,"stateVersion":0,"timestamp":10},
            "topicConfigTable":{"T":{"attributes":{},"order":false,"perm":6,"readQueueNums":8,
            "topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":8}}}"#;
        let wrapper = TopicConfigSerializeWrapper::decode(json).unwrap();
        assert_eq!(wrapper.data_version.counter, 2);
        assert_eq!(wrapper.topic_config_table["T"], TopicConfig::new("T", 8, 8));
    }

    #[test]
    fn mapping_wrapper_keys_are_alphabetical() {
        let wrapper = TopicConfigAndMappingSerializeWrapper::default();
        let text = String::from_utf8(wrapper.encode()).unwrap();
        assert_eq!(
            text,
            r#"{"dataVersion":{"counter":0,"stateVersion":0,"timestamp":0},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":0},"topicConfigTable":{},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}"#
        );
    }

    #[test]
    fn mapping_wrapper_reads_plain_wrapper_json() {
        let plain = TopicConfigSerializeWrapper {
            data_version: DataVersion { counter: 1, state_version: 0, timestamp: 2 },
            topic_config_table: BTreeMap::from([("A".to_owned(), TopicConfig::new("A", 1, 1))]),
        };
        let full = TopicConfigAndMappingSerializeWrapper::decode(&plain.encode()).unwrap();
        assert_eq!(full, TopicConfigAndMappingSerializeWrapper::from(plain.clone()));
        assert_eq!(TopicConfigSerializeWrapper::from(full), plain);
    }
}
