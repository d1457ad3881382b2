//! Bodies that create or update several topics or subscription groups in one admin request:
//! UPDATE_AND_CREATE_TOPIC_LIST (18) and UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225).
//! Java: `CreateTopicListRequestBody`, `SubscriptionGroupList`.

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody, SubscriptionGroupConfig, TopicConfig};

/// Topics to create or update. Each config's `attributes` are changes: `+key` to add or
/// replace, `-key` to remove.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CreateTopicListRequestBody {
    /// The topics.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic_config_list: Vec<TopicConfig>,
}

impl JsonBody for CreateTopicListRequestBody {}

/// Subscription groups to create or update.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupList {
    /// The groups.
    #[serde(deserialize_with = "lenient::or_default")]
    pub group_config_list: Vec<SubscriptionGroupConfig>,
}

impl JsonBody for SubscriptionGroupList {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_java_shapes() {
        let topics = CreateTopicListRequestBody::decode(
            br#"{"topicConfigList":[{"topicName":"A","readQueueNums":2,"writeQueueNums":2,"perm":6,"attributes":{"+message.type":"FIFO"}},{"topicName":"B"}]}"#,
        )
        .unwrap();
        assert_eq!(topics.topic_config_list.len(), 2);
        assert_eq!(topics.topic_config_list[0].attributes["+message.type"], "FIFO");
        assert_eq!(topics.topic_config_list[1].read_queue_nums, 16, "Java's default queue count");
        let groups = SubscriptionGroupList::decode(
            br#"{"groupConfigList":[{"groupName":"g1","retryMaxTimes":3},{"groupName":"g2"}]}"#,
        )
        .unwrap();
        assert_eq!(groups.group_config_list[0].retry_max_times, 3);
        assert_eq!(groups.group_config_list[1].group_name, "g2");
        assert!(groups.group_config_list[1].consume_enable, "Java's defaults for absent fields");
    }
}
