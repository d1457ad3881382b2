//! `MessageQueue`: the (topic, broker name, queue id) triple that names one queue in lock,
//! offset and stats bodies. Java: `org.apache.rocketmq.common.message.MessageQueue`.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::body::lenient;

/// One queue of a topic on one broker group.
///
/// Ordered by topic, then broker name, then queue id, as Java's `compareTo`; the fields are
/// declared in JSON-key order instead.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageQueue {
    /// Broker group name.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_name: String,
    /// Queue id within the topic on that broker.
    #[serde(deserialize_with = "lenient::int")]
    pub queue_id: i32,
    /// Topic name.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic: String,
}

impl MessageQueue {
    /// A queue from its parts.
    pub fn new(topic: impl Into<String>, broker_name: impl Into<String>, queue_id: i32) -> Self {
        Self { broker_name: broker_name.into(), queue_id, topic: topic.into() }
    }
}

impl Ord for MessageQueue {
    fn cmp(&self, other: &Self) -> Ordering {
        self.topic
            .cmp(&other.topic)
            .then_with(|| self.broker_name.cmp(&other.broker_name))
            .then(self.queue_id.cmp(&other.queue_id))
    }
}

impl PartialOrd for MessageQueue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_topic_first() {
        let a = MessageQueue::new("A", "z", 9);
        let b = MessageQueue::new("B", "a", 0);
        assert!(a < b);
        assert!(MessageQueue::new("A", "a", 1) < MessageQueue::new("A", "a", 2));
    }

    #[test]
    fn json_keys_are_alphabetical() {
        let queue = MessageQueue::new("T", "broker-a", 3);
        assert_eq!(serde_json::to_string(&queue).unwrap(), r#"{"brokerName":"broker-a","queueId":3,"topic":"T"}"#);
    }
}
