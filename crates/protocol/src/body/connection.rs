//! Bodies listing a group's client connections: GET_CONSUMER_CONNECTION_LIST (203) and
//! GET_PRODUCER_CONNECTION_LIST (204). Java: `ConsumerConnection`, `ProducerConnection`,
//! `Connection` in `org.apache.rocketmq.remoting.protocol.body`.
//!
//! Java's `HashSet<Connection>` is a JSON array; it is a `Vec` here, in the broker's order.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::body::{lenient, ConsumeFromWhere, ConsumeType, JsonBody, MessageModel, SubscriptionData};
use crate::LanguageCode;

/// One client connection of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Connection {
    /// The client's `ip:port` as the broker sees it.
    #[serde(deserialize_with = "lenient::or_default")]
    pub client_addr: String,
    /// `ip@instanceName` as the client announced it.
    #[serde(deserialize_with = "lenient::or_default")]
    pub client_id: String,
    /// The client's implementation language, by Java name (`JAVA`, `CPP`, ...).
    #[serde(serialize_with = "serialize_language", deserialize_with = "deserialize_language")]
    pub language: LanguageCode,
    /// The client's `MQVersion` ordinal.
    #[serde(deserialize_with = "lenient::int")]
    pub version: i32,
}

impl Default for Connection {
    /// Empty strings, a Java client, version 0.
    fn default() -> Self {
        Self { client_addr: String::new(), client_id: String::new(), language: LanguageCode::Java, version: 0 }
    }
}

/// The members of a consumer group and how the group consumes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerConnection {
    /// The members' connections.
    #[serde(deserialize_with = "lenient::or_default")]
    pub connection_set: Vec<Connection>,
    /// Start position for queues without an offset.
    #[serde(deserialize_with = "lenient::or_default")]
    pub consume_from_where: ConsumeFromWhere,
    /// Pull, push or pop.
    #[serde(deserialize_with = "lenient::or_default")]
    pub consume_type: ConsumeType,
    /// Clustering or broadcasting.
    #[serde(deserialize_with = "lenient::or_default")]
    pub message_model: MessageModel,
    /// Topic -> the group's subscription to it.
    #[serde(deserialize_with = "lenient::or_default")]
    pub subscription_table: BTreeMap<String, SubscriptionData>,
}

impl JsonBody for ConsumerConnection {}

impl ConsumerConnection {
    /// The oldest client version among the members (`i32::MAX` with none).
    /// Java: `ConsumerConnection#computeMinVersion`.
    pub fn min_version(&self) -> i32 {
        self.connection_set.iter().map(|c| c.version).min().unwrap_or(i32::MAX)
    }
}

/// The connections of a producer group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerConnection {
    /// The producers' connections.
    #[serde(deserialize_with = "lenient::or_default")]
    pub connection_set: Vec<Connection>,
}

impl JsonBody for ProducerConnection {}

/// One producer client of a group, for GET_ALL_PRODUCER_INFO (328). Java: `ProducerInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerInfo {
    /// `ip@instanceName` as the client announced it.
    #[serde(deserialize_with = "lenient::or_default")]
    pub client_id: String,
    /// The client's implementation language, by Java name.
    #[serde(serialize_with = "serialize_language", deserialize_with = "deserialize_language")]
    pub language: LanguageCode,
    /// When the client was last heard from, in epoch milliseconds.
    #[serde(deserialize_with = "lenient::int")]
    pub last_update_timestamp: i64,
    /// The client's address as Java prints a socket address (`/ip:port`).
    #[serde(rename = "remoteIP", deserialize_with = "lenient::or_default")]
    pub remote_ip: String,
    /// The client's `MQVersion` ordinal.
    #[serde(deserialize_with = "lenient::int")]
    pub version: i32,
}

impl Default for ProducerInfo {
    /// Empty strings, a Java client, version 0.
    fn default() -> Self {
        Self {
            client_id: String::new(),
            language: LanguageCode::Java,
            last_update_timestamp: 0,
            remote_ip: String::new(),
            version: 0,
        }
    }
}

/// Every producer group's clients. Java: `ProducerTableInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerTableInfo {
    /// Producer group -> its clients.
    #[serde(deserialize_with = "lenient::or_default")]
    pub data: BTreeMap<String, Vec<ProducerInfo>>,
}

impl JsonBody for ProducerTableInfo {}

fn serialize_language<S: Serializer>(language: &LanguageCode, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(language.name())
}

/// Reads a language by Java name or by its code (its Java ordinal); unknown names read as
/// `OTHER`, as the remoting header does, and `null` as `JAVA`.
fn deserialize_language<'de, D: Deserializer<'de>>(deserializer: D) -> Result<LanguageCode, D::Error> {
    deserializer.deserialize_any(LanguageVisitor)
}

struct LanguageVisitor;

impl Visitor<'_> for LanguageVisitor {
    type Value = LanguageCode;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a LanguageCode name or ordinal")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<LanguageCode, E> {
        Ok(LanguageCode::from_name(v.trim()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<LanguageCode, E> {
        u8::try_from(v).map(LanguageCode::from_code).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<LanguageCode, E> {
        u8::try_from(v).map(LanguageCode::from_code).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_unit<E: de::Error>(self) -> Result<LanguageCode, E> {
        Ok(LanguageCode::Java)
    }

    fn visit_none<E: de::Error>(self) -> Result<LanguageCode, E> {
        Ok(LanguageCode::Java)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::*;

    fn connection(id: &str, version: i32) -> Connection {
        Connection { client_addr: "127.0.0.1:50001".into(), client_id: id.into(), language: LanguageCode::Cpp, version }
    }

    #[test]
    fn producer_table_golden_bytes() {
        let table = ProducerTableInfo {
            data: BTreeMap::from([(
                "pg".to_owned(),
                vec![ProducerInfo {
                    client_id: "10.0.0.1@1".into(),
                    language: LanguageCode::Go,
                    last_update_timestamp: 1700000000000,
                    remote_ip: "/10.0.0.1:50001".into(),
                    version: 479,
                }],
            )]),
        };
        let golden = r#"{"data":{"pg":[{"clientId":"10.0.0.1@1","language":"GO","lastUpdateTimestamp":1700000000000,"remoteIP":"/10.0.0.1:50001","version":479}]}}"#;
        assert_eq!(String::from_utf8(table.encode()).unwrap(), golden);
        assert_eq!(ProducerTableInfo::decode(golden.as_bytes()).unwrap(), table);
    }

    #[test]
    fn consumer_connection_golden_bytes() {
        let body = ConsumerConnection {
            connection_set: vec![connection("10.0.0.1@1", 479)],
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            consume_type: ConsumeType::ConsumePassively,
            message_model: MessageModel::Clustering,
            subscription_table: BTreeMap::from([(
                "T".to_owned(),
                SubscriptionData {
                    topic: "T".into(),
                    sub_string: "a || b".into(),
                    tags_set: BTreeSet::from(["a".into(), "b".into()]),
                    code_set: BTreeSet::from([97, 98]),
                    sub_version: 7,
                    ..SubscriptionData::default()
                },
            )]),
        };
        let golden = concat!(
            r#"{"connectionSet":[{"clientAddr":"127.0.0.1:50001","clientId":"10.0.0.1@1","#,
            r#""language":"CPP","version":479}],"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","#,
            r#""consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","#,
            r#""subscriptionTable":{"T":{"classFilterMode":false,"codeSet":[97,98],"expressionType":"TAG","#,
            r#""subString":"a || b","subVersion":7,"tagsSet":["a","b"],"topic":"T"}}}"#
        );
        assert_eq!(String::from_utf8(body.encode()).unwrap(), golden);
        assert_eq!(ConsumerConnection::decode(golden.as_bytes()).unwrap(), body);
        assert_eq!(body.min_version(), 479);
    }

    #[test]
    fn producer_connection_reads_ordinals_and_unknown_languages() {
        let json = br#"{"connectionSet":[{"clientAddr":"a:1","clientId":"x","language":1,"version":"5"},
            {"clientId":"y","language":"COBOL"},{"clientId":"z","language":null}]}"#;
        let body = ProducerConnection::decode(json).unwrap();
        let languages: Vec<LanguageCode> = body.connection_set.iter().map(|c| c.language).collect();
        assert_eq!(languages, vec![LanguageCode::Cpp, LanguageCode::Other, LanguageCode::Java]);
        assert_eq!(body.connection_set[0].version, 5);
        assert!(ProducerConnection::decode(br#"{"connectionSet":[{"language":-1}]}"#).is_err());
    }

    #[test]
    fn fields_are_in_json_key_order() {
        for text in [
            String::from_utf8(
                ConsumerConnection { connection_set: vec![connection("c", 1)], ..Default::default() }.encode(),
            )
            .unwrap(),
            String::from_utf8(ProducerConnection { connection_set: vec![connection("p", 1)] }.encode()).unwrap(),
        ] {
            let sorted = serde_json::to_string(&serde_json::from_str::<Value>(&text).unwrap()).unwrap();
            assert_eq!(text, sorted);
        }
    }
}
