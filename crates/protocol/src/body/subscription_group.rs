//! `SubscriptionGroupConfig`: one consumer group's settings on a broker (retry queues and
//! attempts, broadcast and orderly flags, which broker to read from when slow), and
//! `SubscriptionGroupWrapper`, the table of them (subscriptionGroup.json,
//! GET_ALL_SUBSCRIPTIONGROUP_CONFIG). Java: `SubscriptionGroupConfig`, `SubscriptionGroupWrapper`.
//!
//! The retry policy and the 5.x subscription list are carried as opaque JSON. Input is read as
//! fastjson reads it: missing or `null` fields take Java's defaults, unknown fields are ignored.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::body::{DataVersion, JsonBody};

/// Default retry queues of a group (`retryQueueNums`).
pub const DEFAULT_RETRY_QUEUE_NUMS: i32 = 1;
/// Default delivery attempts before a message goes to the DLQ (`retryMaxTimes`).
pub const DEFAULT_RETRY_MAX_TIMES: i32 = 16;
/// Default push-consumer consume timeout (`consumeTimeoutMinute`).
pub const DEFAULT_CONSUME_TIMEOUT_MINUTE: i32 = 15;

/// Settings of one consumer group. Fields are in JSON-key (alphabetical) order, so the output
/// has fastjson's key order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "RawSubscriptionGroupConfig")]
pub struct SubscriptionGroupConfig {
    /// 5.x group attributes.
    pub attributes: BTreeMap<String, String>,
    /// Broker id consumers should pull from (0 = master).
    pub broker_id: i64,
    /// Broadcast consumption allowed.
    pub consume_broadcast_enable: bool,
    /// Consumption allowed at all.
    pub consume_enable: bool,
    /// A new consumer may start from the minimum offset.
    pub consume_from_min_enable: bool,
    /// Orderly consumption (affects retry topic creation and POP).
    pub consume_message_orderly: bool,
    /// Push consumer consume timeout in minutes.
    pub consume_timeout_minute: i32,
    /// The group's name.
    pub group_name: String,
    /// `GroupRetryPolicy` JSON (`{"type":"CUSTOMIZED"|"EXPONENTIAL",...}`), kept opaque.
    pub group_retry_policy: Value,
    /// Group flags.
    pub group_sys_flag: i32,
    /// Tell consumers when the group's membership changes.
    pub notify_consumer_ids_changed_enable: bool,
    /// Delivery attempts before the DLQ.
    pub retry_max_times: i32,
    /// Queues of the group's retry topic.
    pub retry_queue_nums: i32,
    /// 5.x `SimpleSubscriptionData` set, kept opaque. Not written when empty (Java's `null`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subscription_data_set: Vec<Value>,
    /// Broker id to pull from when the master is slow.
    pub which_broker_when_consume_slowly: i64,
}

impl Default for SubscriptionGroupConfig {
    /// Java's field defaults, with an empty name.
    fn default() -> Self {
        Self {
            attributes: BTreeMap::new(),
            broker_id: 0,
            consume_broadcast_enable: true,
            consume_enable: true,
            consume_from_min_enable: true,
            consume_message_orderly: false,
            consume_timeout_minute: DEFAULT_CONSUME_TIMEOUT_MINUTE,
            group_name: String::new(),
            group_retry_policy: default_retry_policy(),
            group_sys_flag: 0,
            notify_consumer_ids_changed_enable: true,
            retry_max_times: DEFAULT_RETRY_MAX_TIMES,
            retry_queue_nums: DEFAULT_RETRY_QUEUE_NUMS,
            subscription_data_set: Vec::new(),
            which_broker_when_consume_slowly: 1,
        }
    }
}

impl JsonBody for SubscriptionGroupConfig {}

impl SubscriptionGroupConfig {
    /// A group with Java's defaults.
    pub fn new(group_name: impl Into<String>) -> Self {
        Self { group_name: group_name.into(), ..Self::default() }
    }
}

/// Java's `new GroupRetryPolicy()` as fastjson writes it (null members left out).
fn default_retry_policy() -> Value {
    serde_json::json!({ "type": "CUSTOMIZED" })
}

/// The wire/file form with every field optional, so `null` and absent fields both become the
/// Java default.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct RawSubscriptionGroupConfig {
    attributes: Option<BTreeMap<String, String>>,
    broker_id: Option<i64>,
    consume_broadcast_enable: Option<bool>,
    consume_enable: Option<bool>,
    consume_from_min_enable: Option<bool>,
    consume_message_orderly: Option<bool>,
    consume_timeout_minute: Option<i32>,
    group_name: Option<String>,
    group_retry_policy: Option<Value>,
    group_sys_flag: Option<i32>,
    notify_consumer_ids_changed_enable: Option<bool>,
    retry_max_times: Option<i32>,
    retry_queue_nums: Option<i32>,
    subscription_data_set: Option<Vec<Value>>,
    which_broker_when_consume_slowly: Option<i64>,
}

impl From<RawSubscriptionGroupConfig> for SubscriptionGroupConfig {
    fn from(raw: RawSubscriptionGroupConfig) -> Self {
        let d = SubscriptionGroupConfig::default();
        Self {
            attributes: raw.attributes.unwrap_or(d.attributes),
            broker_id: raw.broker_id.unwrap_or(d.broker_id),
            consume_broadcast_enable: raw.consume_broadcast_enable.unwrap_or(d.consume_broadcast_enable),
            consume_enable: raw.consume_enable.unwrap_or(d.consume_enable),
            consume_from_min_enable: raw.consume_from_min_enable.unwrap_or(d.consume_from_min_enable),
            consume_message_orderly: raw.consume_message_orderly.unwrap_or(d.consume_message_orderly),
            consume_timeout_minute: raw.consume_timeout_minute.unwrap_or(d.consume_timeout_minute),
            group_name: raw.group_name.unwrap_or(d.group_name),
            group_retry_policy: raw.group_retry_policy.filter(|v| !v.is_null()).unwrap_or(d.group_retry_policy),
            group_sys_flag: raw.group_sys_flag.unwrap_or(d.group_sys_flag),
            notify_consumer_ids_changed_enable: raw
                .notify_consumer_ids_changed_enable
                .unwrap_or(d.notify_consumer_ids_changed_enable),
            retry_max_times: raw.retry_max_times.unwrap_or(d.retry_max_times),
            retry_queue_nums: raw.retry_queue_nums.unwrap_or(d.retry_queue_nums),
            subscription_data_set: raw.subscription_data_set.unwrap_or(d.subscription_data_set),
            which_broker_when_consume_slowly: raw
                .which_broker_when_consume_slowly
                .unwrap_or(d.which_broker_when_consume_slowly),
        }
    }
}

/// The group table with its forbidden bits and version: subscriptionGroup.json and the
/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG body. Java: `SubscriptionGroupWrapper` (the file is Java's
/// `SubscriptionGroupManager` serialized, which has the same three keys).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupWrapper {
    /// Version of the table.
    #[serde(deserialize_with = "null_as_default")]
    pub data_version: DataVersion,
    /// Group -> topic -> forbidden bits.
    #[serde(deserialize_with = "null_as_default")]
    pub forbidden_table: BTreeMap<String, BTreeMap<String, i32>>,
    /// Group name -> config.
    #[serde(deserialize_with = "null_as_default")]
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

/// Whether a group may read a topic: the answer to UPDATE_AND_GET_GROUP_FORBIDDEN. Java:
/// `GroupForbidden`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupForbidden {
    /// Consumer group.
    pub group: String,
    /// Whether the group may read the topic.
    pub readable: Option<bool>,
    /// Topic.
    pub topic: String,
}

impl JsonBody for GroupForbidden {}

/// Reads `null` as the type's default, as fastjson does.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

impl JsonBody for SubscriptionGroupWrapper {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_null_fields_take_java_defaults() {
        let config = SubscriptionGroupConfig::decode(
            br#"{"groupName":"g","consumeEnable":null,"retryMaxTimes":3,"groupRetryPolicy":null,"x":1}"#,
        )
        .unwrap();
        assert_eq!(config, SubscriptionGroupConfig { retry_max_times: 3, ..SubscriptionGroupConfig::new("g") });
    }

    #[test]
    fn output_keys_are_alphabetical_and_empty_subscriptions_omitted() {
        let text = String::from_utf8(SubscriptionGroupConfig::new("g").encode()).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"attributes":{},"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"#,
                r#""consumeFromMinEnable":true,"consumeMessageOrderly":false,"consumeTimeoutMinute":15,"#,
                r#""groupName":"g","groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,"#,
                r#""notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,"#,
                r#""whichBrokerWhenConsumeSlowly":1}"#
            )
        );
        let wrapper = SubscriptionGroupWrapper::default();
        let text = String::from_utf8(wrapper.encode()).unwrap();
        assert!(
            text.starts_with(r#"{"dataVersion":"#)
                && text.ends_with(r#""forbiddenTable":{},"subscriptionGroupTable":{}}"#)
        );
    }
}
