//! `TopicList`: a set of topic names (GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_TOPICS_BY_CLUSTER,
//! the system-topic and unit-topic listings). Java: `org.apache.rocketmq.remoting.protocol.body.TopicList`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody};

/// Topic names, optionally with the broker address they came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicList {
    /// Set on system-topic listings to a broker address the caller may query.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
    /// Topic names.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic_list: BTreeSet<String>,
}

impl JsonBody for TopicList {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_sorted_topics_without_absent_addr() {
        let list = TopicList { broker_addr: None, topic_list: ["b", "a"].into_iter().map(String::from).collect() };
        assert_eq!(list.encode(), br#"{"topicList":["a","b"]}"#);
        assert_eq!(TopicList::decode(&list.encode()).unwrap(), list);
    }
}
