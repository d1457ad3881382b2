//! `SubscriptionGroupSettings`: the UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body.
//! Java: `org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig`.

use serde::{Deserialize, Serialize};

/// A consumer group's broker-side settings, with Java's defaults. Fields are in JSON-key order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionGroupSettings {
    /// Broker id consumers of this group read from.
    pub broker_id: i64,
    /// Whether broadcast consumption is allowed.
    pub consume_broadcast_enable: bool,
    /// Whether the group may consume at all.
    pub consume_enable: bool,
    /// Whether a new group starts from the minimum offset.
    pub consume_from_min_enable: bool,
    /// Whether the group consumes orderly.
    pub consume_message_orderly: bool,
    /// Consume timeout in minutes.
    pub consume_timeout_minute: i32,
    /// The group name.
    pub group_name: String,
    /// Group system flag.
    pub group_sys_flag: i32,
    /// Whether consumers are told when the group's membership changes.
    pub notify_consumer_ids_changed_enable: bool,
    /// Redeliveries before a message goes to the dead-letter queue.
    pub retry_max_times: i32,
    /// Queues of the group's retry topic.
    pub retry_queue_nums: i32,
    /// Broker id to read from when consumption is slow.
    pub which_broker_when_consume_slowly: i64,
}

impl SubscriptionGroupSettings {
    /// Java's defaults for group `name`.
    pub fn new(name: impl Into<String>) -> Self {
        SubscriptionGroupSettings {
            broker_id: 0,
            consume_broadcast_enable: true,
            consume_enable: true,
            consume_from_min_enable: true,
            consume_message_orderly: false,
            consume_timeout_minute: 15,
            group_name: name.into(),
            group_sys_flag: 0,
            notify_consumer_ids_changed_enable: true,
            retry_max_times: 16,
            retry_queue_nums: 1,
            which_broker_when_consume_slowly: 1,
        }
    }
}
