//! `TopicConfig`: one topic's queue counts, permission, filter type, flags and attributes, in
//! its JSON form (topics.json, GET_ALL_TOPIC_CONFIG, RegisterBrokerBody) and its
//! space-separated text form (compressed RegisterBrokerBody).
//! Java: `org.apache.rocketmq.common.TopicConfig`, `TopicFilterType`.
//!
//! Does not validate topic names or apply attribute modification lists
//! (`+message.type=FIFO`); the broker does that.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::body::lenient::{self, java_enum};
use crate::body::perm::PERM_READ_WRITE;
use crate::body::{BodyError, JsonBody};
use crate::json::parse_lenient;

/// Default read and write queue count of a `TopicConfig` built without explicit counts
/// (Java's class default; the broker's `defaultTopicQueueNums` of 8 applies elsewhere).
pub const DEFAULT_QUEUE_NUMS: i32 = 16;

java_enum! {
    /// How a topic's tags are filtered. Only `SINGLE_TAG` is used in practice.
    #[derive(Default)]
    pub enum TopicFilterType {
        /// One tag per message (the default).
        #[default]
        SingleTag = "SINGLE_TAG",
        /// Several tags per message (never implemented by Java brokers).
        MultiTag = "MULTI_TAG",
    }
}

/// Configuration of one topic on one broker.
///
/// Fields are declared in JSON-key order (alphabetical), so serde writes what fastjson writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfig {
    /// 5.x attributes such as `message.type` = `NORMAL`/`FIFO`/`DELAY`/`TRANSACTION`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub attributes: BTreeMap<String, String>,
    /// Ordered (FIFO) topic flag.
    #[serde(deserialize_with = "lenient::boolean")]
    pub order: bool,
    /// Permission bits, see `crate::body::perm`.
    #[serde(deserialize_with = "lenient::int")]
    pub perm: i32,
    /// Number of queues consumers read from.
    #[serde(deserialize_with = "lenient::int")]
    pub read_queue_nums: i32,
    /// Tag filter type.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic_filter_type: TopicFilterType,
    /// Topic name.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic_name: String,
    /// Bit 0 unit topic, bit 1 unit-subscription topic.
    #[serde(deserialize_with = "lenient::int")]
    pub topic_sys_flag: i32,
    /// Number of queues producers write to.
    #[serde(deserialize_with = "lenient::int")]
    pub write_queue_nums: i32,
}

impl Default for TopicConfig {
    /// Java's field defaults: 16 read and write queues, read-write, single tag.
    fn default() -> Self {
        Self {
            attributes: BTreeMap::new(),
            order: false,
            perm: PERM_READ_WRITE,
            read_queue_nums: DEFAULT_QUEUE_NUMS,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_name: String::new(),
            topic_sys_flag: 0,
            write_queue_nums: DEFAULT_QUEUE_NUMS,
        }
    }
}

impl JsonBody for TopicConfig {}

impl TopicConfig {
    /// A topic with the given queue counts and otherwise default settings.
    pub fn new(topic_name: impl Into<String>, read_queue_nums: i32, write_queue_nums: i32) -> Self {
        Self { topic_name: topic_name.into(), read_queue_nums, write_queue_nums, ..Self::default() }
    }

    /// The text form `name read write perm filterType[ attributesJson]`.
    /// Java: `TopicConfig#encode`.
    ///
    /// `order` and `topicSysFlag` are not part of the text form (as in Java). The attributes
    /// JSON is written only when there are attributes: 4.x name servers accept exactly five
    /// fields, and 5.x ones read a missing sixth field as "no attributes", which is what
    /// Java 5.x's trailing `{}` means too.
    pub fn encode_text(&self) -> String {
        let mut text = format!(
            "{} {} {} {} {}",
            self.topic_name,
            self.read_queue_nums,
            self.write_queue_nums,
            self.perm,
            self.topic_filter_type.as_str()
        );
        if !self.attributes.is_empty() {
            text.push(' ');
            text.push_str(&serde_json::to_string(&self.attributes).expect("a string-to-string map always serializes"));
        }
        text
    }

    /// Reads the text form written by [`TopicConfig::encode_text`] or by Java 4.x/5.x.
    /// Java: `TopicConfig#decode`.
    ///
    /// Fields are split on single spaces like Java's `split(" ")` (trailing empty fields
    /// dropped). A sixth field is parsed as the attributes JSON; if that fails, for example
    /// because an attribute contains a space, the attributes are left empty, as Java does.
    ///
    /// # Errors
    ///
    /// [`BodyError::TopicConfigFields`] for fewer than five fields,
    /// [`BodyError::TopicConfigNumber`] for a non-integer count or perm, and
    /// [`BodyError::UnknownTopicFilterType`] for an unknown filter type.
    pub fn decode_text(text: &str) -> Result<Self, BodyError> {
        let mut fields: Vec<&str> = text.split(' ').collect();
        while fields.last() == Some(&"") {
            fields.pop();
        }
        if fields.len() < 5 {
            return Err(BodyError::TopicConfigFields { text: text.to_owned(), fields: fields.len() });
        }
        let number = |index: usize, field: &'static str| {
            fields[index].parse::<i32>().map_err(|source| BodyError::TopicConfigNumber {
                text: text.to_owned(),
                field,
                source,
            })
        };
        // Same order of checks as Java: the three numbers, then the filter type.
        let read_queue_nums = number(1, "readQueueNums")?;
        let write_queue_nums = number(2, "writeQueueNums")?;
        let perm = number(3, "perm")?;
        let topic_filter_type = TopicFilterType::from_name(fields[4])
            .ok_or_else(|| BodyError::UnknownTopicFilterType { value: fields[4].to_owned() })?;
        let attributes = match fields.get(5) {
            Some(json) => parse_lenient(json.as_bytes()).unwrap_or_default(),
            None => BTreeMap::new(),
        };
        Ok(Self {
            attributes,
            perm,
            read_queue_nums,
            topic_filter_type,
            topic_name: fields[0].to_owned(),
            write_queue_nums,
            ..Self::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_matches_java_class_defaults() {
        let config = TopicConfig::default();
        assert_eq!((config.read_queue_nums, config.write_queue_nums, config.perm), (16, 16, 6));
        assert_eq!(config.topic_filter_type, TopicFilterType::SingleTag);
    }

    #[test]
    fn json_has_alphabetical_keys() {
        let mut config = TopicConfig::new("TopicTest", 8, 8);
        config.attributes.insert("message.type".into(), "FIFO".into());
        assert_eq!(
            String::from_utf8(config.encode()).unwrap(),
            r#"{"attributes":{"message.type":"FIFO"},"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":8}"#
        );
    }

    #[test]
    fn json_missing_fields_take_java_defaults() {
        let config = TopicConfig::decode(br#"{"topicName":"T","unknown":1}"#).unwrap();
        assert_eq!(config, TopicConfig::new("T", 16, 16));
    }

    #[test]
    fn filter_type_reads_ordinal() {
        let config = TopicConfig::decode(br#"{"topicFilterType":1}"#).unwrap();
        assert_eq!(config.topic_filter_type, TopicFilterType::MultiTag);
    }

    #[test]
    fn text_round_trip_with_attributes() {
        let mut config = TopicConfig::new("T", 4, 2);
        config.perm = 4;
        config.attributes.insert("queue.type".into(), "BatchCQ".into());
        let text = config.encode_text();
        assert_eq!(text, r#"T 4 2 4 SINGLE_TAG {"queue.type":"BatchCQ"}"#);
        assert_eq!(TopicConfig::decode_text(&text).unwrap(), config);
    }

    #[test]
    fn text_decode_rejects_bad_input() {
        assert!(matches!(TopicConfig::decode_text("T 1 1 6"), Err(BodyError::TopicConfigFields { fields: 4, .. })));
        assert!(matches!(
            TopicConfig::decode_text("T 1 x 6 SINGLE_TAG"),
            Err(BodyError::TopicConfigNumber { field: "writeQueueNums", .. })
        ));
        assert!(matches!(
            TopicConfig::decode_text("T 1 1 6 single_tag"),
            Err(BodyError::UnknownTopicFilterType { .. })
        ));
    }
}
