//! ACL 2.0 bodies (5.3): `UserInfo` and `AclInfo` with its policies and entries, names as
//! strings (`Super`, `enable`, `Custom`, `Topic:t1`, `Pub`, `Allow`). Java:
//! `org.apache.rocketmq.remoting.protocol.body.{UserInfo,AclInfo}`.

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody};

/// A user as the admin API shows it (the password included, as Java's AUTH_GET_USER).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UserInfo {
    /// `password`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// `userStatus`: `enable` / `disable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_status: Option<String>,
    /// `userType`: `Super` / `Normal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_type: Option<String>,
    /// `username` (fastjson's order puts it last: `userS`, `userT` and `usern` compare by
    /// code unit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}

impl JsonBody for UserInfo {}

/// One entry of a policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyEntryInfo {
    /// `actions`: `Pub`, `Sub`, `Create`, `Update`, `Delete`, `Get`, `List`, `All`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub actions: Vec<String>,
    /// `decision`: `Allow` / `Deny`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// `resource`: `*`, `Topic:*`, `Topic:orders`, `Group:g*`, `Cluster:c`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// `sourceIps`: addresses or CIDR blocks; none means any.
    #[serde(deserialize_with = "lenient::or_default", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
}

/// One policy of an ACL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyInfo {
    /// `entries`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub entries: Vec<PolicyEntryInfo>,
    /// `policyType`: `Custom` / `Default`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_type: Option<String>,
}

/// A subject's ACL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AclInfo {
    /// `policies`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub policies: Vec<PolicyInfo>,
    /// `subject`: `User:<name>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

impl JsonBody for AclInfo {}

/// AUTH_LIST_USER's answer.
pub type UserInfoList = Vec<UserInfo>;
/// AUTH_LIST_ACL's answer.
pub type AclInfoList = Vec<AclInfo>;

impl JsonBody for Vec<UserInfo> {}
impl JsonBody for Vec<AclInfo> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_java_writes_and_writes_java_names() {
        // fastjson output of AclInfo.of("User:alice", ["Topic:t1"], ["Pub", "Sub"], ["10.0.0.0/8"], "Allow").
        let java = br#"{"policies":[{"entries":[{"actions":["Pub","Sub"],"decision":"Allow","resource":"Topic:t1","sourceIps":["10.0.0.0/8"]}]}],"subject":"User:alice"}"#;
        let acl = AclInfo::decode(java).expect("decodes");
        assert_eq!(acl.subject.as_deref(), Some("User:alice"));
        assert_eq!(acl.policies[0].entries[0].actions, ["Pub", "Sub"]);
        assert_eq!(acl.encode(), java.to_vec());
        let user = UserInfo {
            username: Some("alice".into()),
            password: Some("secret".into()),
            user_type: Some("Normal".into()),
            user_status: Some("enable".into()),
        };
        assert_eq!(
            String::from_utf8(user.encode()).expect("utf-8"),
            r#"{"password":"secret","userStatus":"enable","userType":"Normal","username":"alice"}"#
        );
        let list: Vec<UserInfo> =
            JsonBody::decode(br#"[{"username":"a"},{"username":"b","userType":"Super"}]"#).expect("list");
        assert_eq!(list.len(), 2);
    }
}
