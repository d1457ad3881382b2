//! Units of one consume queue as `mqadmin queryCq` shows them (QUERY_CONSUME_QUEUE, 321).
//! Java: `QueryConsumeQueueResponseBody`, `ConsumeQueueData`.

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody, SubscriptionData};

/// One unit: where its message is and its tag hash code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeQueueData {
    /// The bloom-filter bitmap of the unit's extension, as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bit_map: Option<String>,
    /// Whether the group's filter matches the unit (extension units only).
    #[serde(deserialize_with = "lenient::boolean")]
    pub eval: bool,
    /// The unit's extension as JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extend_data_json: Option<String>,
    /// A note about the unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
    /// CommitLog offset of the message.
    #[serde(deserialize_with = "lenient::int")]
    pub physic_offset: i64,
    /// Size of the message.
    #[serde(deserialize_with = "lenient::int")]
    pub physic_size: i32,
    /// Tag hash code (delivery time on the schedule topic).
    #[serde(deserialize_with = "lenient::int")]
    pub tags_code: i64,
}

/// The answer to QUERY_CONSUME_QUEUE.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueryConsumeQueueResponseBody {
    /// The group's filter, or why there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_data: Option<String>,
    /// Queue offset after the last unit.
    #[serde(deserialize_with = "lenient::int")]
    pub max_queue_index: i64,
    /// Queue offset of the first live unit.
    #[serde(deserialize_with = "lenient::int")]
    pub min_queue_index: i64,
    /// The units asked for.
    #[serde(deserialize_with = "lenient::or_default")]
    pub queue_data: Vec<ConsumeQueueData>,
    /// The group's subscription to the topic, when a group was named and is online.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription_data: Option<SubscriptionData>,
}

impl JsonBody for QueryConsumeQueueResponseBody {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes() {
        let body = QueryConsumeQueueResponseBody {
            filter_data: Some("null".into()),
            max_queue_index: 2,
            min_queue_index: 0,
            queue_data: vec![ConsumeQueueData {
                physic_offset: 120,
                physic_size: 200,
                tags_code: 65,
                ..Default::default()
            }],
            subscription_data: None,
        };
        let golden = concat!(
            r#"{"filterData":"null","maxQueueIndex":2,"minQueueIndex":0,"#,
            r#""queueData":[{"eval":false,"physicOffset":120,"physicSize":200,"tagsCode":65}]}"#
        );
        assert_eq!(String::from_utf8(body.encode()).unwrap(), golden);
        assert_eq!(QueryConsumeQueueResponseBody::decode(golden.as_bytes()).unwrap(), body);
    }
}
