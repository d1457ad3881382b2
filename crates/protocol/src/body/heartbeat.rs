//! The HEART_BEAT (34) body: a client's identity and the producer and consumer groups it runs,
//! with each consumer's subscriptions.
//! Java: `org.apache.rocketmq.remoting.protocol.heartbeat.*`, `ConsumeFromWhere`,
//! `ExpressionType`.
//!
//! Java's `Set`s are read and written as JSON arrays; duplicates are kept as sent. Evaluating
//! subscriptions (tag codes, SQL92) is the broker's and client's job.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::body::lenient::{self, java_enum};
use crate::body::JsonBody;

/// Subscription expression type for tag expressions (`tagA || tagB`, `*`).
pub const EXPRESSION_TYPE_TAG: &str = "TAG";
/// Subscription expression type for SQL92 property filters.
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";
/// The "subscribe to everything" tag expression.
pub const SUB_ALL: &str = "*";

java_enum! {
    /// How a consumer takes messages. Java also names them `PULL`/`PUSH`/`POP`; those
    /// spellings are accepted on input.
    #[derive(Default)]
    pub enum ConsumeType {
        /// Pull consumer (`PULL`).
        ConsumeActively = "CONSUME_ACTIVELY" | "PULL",
        /// Push consumer (`PUSH`), the usual kind.
        #[default]
        ConsumePassively = "CONSUME_PASSIVELY" | "PUSH",
        /// 5.x pop consumer (`POP`).
        ConsumePop = "CONSUME_POP" | "POP",
    }
}

java_enum! {
    /// Whether every consumer of the group gets every message.
    #[derive(Default)]
    pub enum MessageModel {
        /// Every consumer gets every message; offsets kept by the client.
        Broadcasting = "BROADCASTING",
        /// Messages are shared out among the group; offsets kept by the broker.
        #[default]
        Clustering = "CLUSTERING",
    }
}

java_enum! {
    /// Where a consumer group with no stored offset starts.
    #[derive(Default)]
    pub enum ConsumeFromWhere {
        /// From the end of the queue.
        #[default]
        ConsumeFromLastOffset = "CONSUME_FROM_LAST_OFFSET",
        /// Deprecated in Java; brokers treat it like `ConsumeFromLastOffset`.
        ConsumeFromLastOffsetAndFromMinWhenBootFirst = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        /// Deprecated in Java; brokers treat it like `ConsumeFromLastOffset`.
        ConsumeFromMinOffset = "CONSUME_FROM_MIN_OFFSET",
        /// Deprecated in Java; brokers treat it like `ConsumeFromLastOffset`.
        ConsumeFromMaxOffset = "CONSUME_FROM_MAX_OFFSET",
        /// From the start of the queue.
        ConsumeFromFirstOffset = "CONSUME_FROM_FIRST_OFFSET",
        /// From the first message stored at or after the consumer's timestamp.
        ConsumeFromTimestamp = "CONSUME_FROM_TIMESTAMP",
    }
}

/// Heartbeat response field: the broker takes heartbeats that leave unchanged subscriptions
/// out (heartbeat V2). Java: `MixAll.IS_SUPPORT_HEART_BEAT_V2`.
pub const IS_SUPPORT_HEART_BEAT_V2: &str = "IS_SUPPORT_HEART_BEAT_V2";
/// Heartbeat response field: the client should send its subscriptions again. Java:
/// `MixAll.IS_SUB_CHANGE`.
pub const IS_SUB_CHANGE: &str = "IS_SUB_CHANGE";

/// The heartbeat body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeartbeatData {
    /// `ip@instanceName` of the client.
    #[serde(rename = "clientID", deserialize_with = "lenient::or_default")]
    pub client_id: String,
    /// Consumer groups the client runs.
    #[serde(deserialize_with = "lenient::or_default")]
    pub consumer_data_set: Vec<ConsumerData>,
    /// 5.x: hash of the heartbeat content; non-zero lets the broker skip unchanged ones.
    #[serde(deserialize_with = "lenient::int")]
    pub heartbeat_fingerprint: i32,
    /// Producer groups the client runs.
    #[serde(deserialize_with = "lenient::or_default")]
    pub producer_data_set: Vec<ProducerData>,
    /// 5.x: the consumers' subscriptions were left out because they did not change.
    /// Java field `isWithoutSub`.
    #[serde(deserialize_with = "lenient::boolean")]
    pub without_sub: bool,
}

impl JsonBody for HeartbeatData {}

/// A producer group run by the client.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerData {
    /// Producer group name.
    #[serde(deserialize_with = "lenient::or_default")]
    pub group_name: String,
}

/// A consumer group run by the client.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerData {
    /// Start position for queues without a stored offset.
    #[serde(deserialize_with = "lenient::or_default")]
    pub consume_from_where: ConsumeFromWhere,
    /// Pull, push or pop.
    #[serde(deserialize_with = "lenient::or_default")]
    pub consume_type: ConsumeType,
    /// Consumer group name.
    #[serde(deserialize_with = "lenient::or_default")]
    pub group_name: String,
    /// Clustering or broadcasting.
    #[serde(deserialize_with = "lenient::or_default")]
    pub message_model: MessageModel,
    /// Topics and expressions the group subscribes to.
    #[serde(deserialize_with = "lenient::or_default")]
    pub subscription_data_set: Vec<SubscriptionData>,
    /// Unit (multi-tenant) mode.
    #[serde(deserialize_with = "lenient::boolean")]
    pub unit_mode: bool,
}

/// One topic subscription of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionData {
    /// Obsolete class-filter mode (removed feature; always false in practice).
    #[serde(deserialize_with = "lenient::boolean")]
    pub class_filter_mode: bool,
    /// Java `String.hashCode` of each tag in `tags_set`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub code_set: BTreeSet<i32>,
    /// [`EXPRESSION_TYPE_TAG`] (the default) or [`EXPRESSION_TYPE_SQL92`].
    #[serde(deserialize_with = "lenient::or_default")]
    pub expression_type: String,
    /// Obsolete class-filter source. Read if present, never written (Java marks it
    /// `serialize = false`).
    #[serde(skip_serializing)]
    pub filter_class_source: Option<String>,
    /// The expression as the user wrote it (`tagA || tagB`, `*`, or SQL).
    #[serde(deserialize_with = "lenient::or_default")]
    pub sub_string: String,
    /// Subscription version, the client's millisecond clock when it subscribed.
    #[serde(deserialize_with = "lenient::int")]
    pub sub_version: i64,
    /// Tags of a tag expression (empty for `*`).
    #[serde(deserialize_with = "lenient::or_default")]
    pub tags_set: BTreeSet<String>,
    /// Subscribed topic.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic: String,
}

impl Default for SubscriptionData {
    /// Expression type `TAG`, everything else empty or zero.
    fn default() -> Self {
        Self {
            class_filter_mode: false,
            code_set: BTreeSet::new(),
            expression_type: EXPRESSION_TYPE_TAG.to_owned(),
            filter_class_source: None,
            sub_string: String::new(),
            sub_version: 0,
            tags_set: BTreeSet::new(),
            topic: String::new(),
        }
    }
}

impl SubscriptionData {
    /// A tag subscription (`TagA || TagB`, `*`, blank = `*`) of `topic` at `sub_version`.
    /// Java: `FilterAPI#buildSubscriptionData`.
    pub fn of_tags(topic: &str, expression: &str, sub_version: i64) -> SubscriptionData {
        let expression = expression.trim();
        let mut sub = SubscriptionData {
            topic: topic.to_owned(),
            sub_string: expression.to_owned(),
            sub_version,
            ..SubscriptionData::default()
        };
        if expression.is_empty() || expression == SUB_ALL {
            sub.sub_string = SUB_ALL.to_owned();
            return sub;
        }
        for tag in expression.split("||").map(str::trim).filter(|t| !t.is_empty()) {
            sub.tags_set.insert(tag.to_owned());
            sub.code_set.insert(crate::message::java_string_hash(tag));
        }
        sub
    }
}

/// The CHECK_CLIENT_CONFIG (46) body: a consumer asks the broker, before it starts, whether
/// it can serve a subscription (a SQL92 one needs `enablePropertyFilter` and must compile).
/// Java: `CheckClientRequestBody`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CheckClientRequestBody {
    /// The asking client's id.
    #[serde(deserialize_with = "lenient::or_default")]
    pub client_id: String,
    /// Its consumer group.
    #[serde(deserialize_with = "lenient::or_default")]
    pub group: String,
    /// The subscription to check.
    pub subscription_data: Option<SubscriptionData>,
    /// The client's namespace (5.x), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl JsonBody for CheckClientRequestBody {}

impl SubscriptionData {
    /// True for a tag expression: type `TAG` or empty. Java: `ExpressionType#isTagType`.
    pub fn is_tag_type(&self) -> bool {
        self.expression_type.is_empty() || self.expression_type == EXPRESSION_TYPE_TAG
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_client_body_is_javas() {
        let body = CheckClientRequestBody {
            client_id: "c1".into(),
            group: "g".into(),
            subscription_data: Some(SubscriptionData {
                topic: "T".into(),
                sub_string: "a > 1".into(),
                expression_type: EXPRESSION_TYPE_SQL92.into(),
                sub_version: 7,
                ..SubscriptionData::default()
            }),
            namespace: None,
        };
        let json = String::from_utf8(body.encode().to_vec()).unwrap();
        assert_eq!(
            json,
            r#"{"clientId":"c1","group":"g","subscriptionData":{"classFilterMode":false,"codeSet":[],"expressionType":"SQL92","subString":"a > 1","subVersion":7,"tagsSet":[],"topic":"T"}}"#
        );
        assert_eq!(CheckClientRequestBody::decode(json.as_bytes()).unwrap(), body);
    }

    #[test]
    fn reads_cpp_client_heartbeat() {
        // The C++ 2.x client writes enums as ordinals and subVersion as a string, and omits
        // empty arrays and expressionType.
        let json = br#"{"clientID":"10.0.0.7@9876","consumerDataSet":[{"consumeFromWhere":5,
            "consumeType":1,"groupName":"g","messageModel":0,"subscriptionDataSet":[
            {"subString":"*","subVersion":"1700000000000","topic":"T"}]}]}"#;
        let heartbeat = HeartbeatData::decode(json).unwrap();
        let consumer = &heartbeat.consumer_data_set[0];
        assert_eq!(consumer.consume_from_where, ConsumeFromWhere::ConsumeFromTimestamp);
        assert_eq!(consumer.consume_type, ConsumeType::ConsumePassively);
        assert_eq!(consumer.message_model, MessageModel::Broadcasting);
        let subscription = &consumer.subscription_data_set[0];
        assert_eq!(subscription.sub_version, 1_700_000_000_000);
        assert!(subscription.is_tag_type());
        assert!(heartbeat.producer_data_set.is_empty());
    }

    #[test]
    fn enum_names_and_aliases() {
        assert_eq!(ConsumeType::from_name("PULL"), Some(ConsumeType::ConsumeActively));
        assert_eq!(ConsumeType::ConsumePop.as_str(), "CONSUME_POP");
        assert_eq!(ConsumeFromWhere::from_ordinal(3), Some(ConsumeFromWhere::ConsumeFromMaxOffset));
        assert_eq!(ConsumeFromWhere::from_ordinal(6), None);
        assert!(HeartbeatData::decode(br#"{"consumerDataSet":[{"consumeType":"NOPE"}]}"#).is_err());
    }

    #[test]
    fn filter_class_source_is_read_but_not_written() {
        let subscription: SubscriptionData =
            serde_json::from_str(r#"{"filterClassSource":"class X {}","topic":"T"}"#).unwrap();
        assert_eq!(subscription.filter_class_source.as_deref(), Some("class X {}"));
        let text = serde_json::to_string(&subscription).unwrap();
        assert!(!text.contains("filterClassSource"));
    }
}
