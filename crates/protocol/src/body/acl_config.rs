//! `AclConfig`: every ACL 1.0 account and global white address of a broker
//! (GET_BROKER_CLUSTER_ACL_CONFIG 54). Java: `org.apache.rocketmq.common.AclConfig`.

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody};

/// One account as the 4.x admin API shows it (Java: `PlainAccessConfig`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PlainAccessConfigBody {
    /// `accessKey`.
    pub access_key: String,
    /// `admin`.
    pub admin: bool,
    /// `defaultGroupPerm`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_group_perm: Option<String>,
    /// `defaultTopicPerm`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_topic_perm: Option<String>,
    /// `groupPerms`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub group_perms: Vec<String>,
    /// `secretKey`.
    pub secret_key: String,
    /// `topicPerms`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic_perms: Vec<String>,
    /// `whiteRemoteAddress`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub white_remote_address: Option<String>,
}

/// The body of GET_BROKER_CLUSTER_ACL_CONFIG's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AclConfig {
    /// `globalWhiteAddrs`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub global_white_addrs: Vec<String>,
    /// `plainAccessConfigs`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub plain_access_configs: Vec<PlainAccessConfigBody>,
}

impl JsonBody for AclConfig {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_in_java_field_names() {
        let c = AclConfig {
            global_white_addrs: vec!["10.0.0.*".into()],
            plain_access_configs: vec![PlainAccessConfigBody {
                access_key: "RocketMQ".into(),
                secret_key: "12345678".into(),
                admin: true,
                topic_perms: vec!["t=PUB".into()],
                ..Default::default()
            }],
        };
        let json = String::from_utf8(c.encode()).expect("utf-8");
        assert_eq!(
            json,
            r#"{"globalWhiteAddrs":["10.0.0.*"],"plainAccessConfigs":[{"accessKey":"RocketMQ","admin":true,"groupPerms":[],"secretKey":"12345678","topicPerms":["t=PUB"]}]}"#
        );
        assert_eq!(AclConfig::decode(json.as_bytes()).expect("decodes"), c);
    }
}
