//! The members of one broker group as the name server knows them (GET_BROKER_MEMBER_GROUP,
//! 901), which a 5.x broker asks for to learn whether it is the group's lowest-id live member.
//! Java: `BrokerMemberGroup`, `GetBrokerMemberGroupResponseBody`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody};

/// One broker group's live members.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerMemberGroup {
    /// Broker id -> `host:port`. fastjson writes these keys unquoted.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_addrs: BTreeMap<i64, String>,
    /// Broker group name.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_name: String,
    /// Cluster the group belongs to.
    #[serde(deserialize_with = "lenient::or_default")]
    pub cluster: String,
}

impl BrokerMemberGroup {
    /// The lowest member id, 0 for a group without members. Java: `minimumBrokerId`.
    pub fn minimum_broker_id(&self) -> i64 {
        self.broker_addrs.keys().next().copied().unwrap_or(0)
    }
}

/// Response body of GET_BROKER_MEMBER_GROUP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GetBrokerMemberGroupResponseBody {
    /// The asked-for group; without members when the name server does not know it.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_member_group: BrokerMemberGroup,
}

impl JsonBody for BrokerMemberGroup {}

impl JsonBody for GetBrokerMemberGroupResponseBody {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::to_fastjson_vec;

    #[test]
    fn writes_fastjson_unquoted_ids_in_field_order() {
        let body = GetBrokerMemberGroupResponseBody {
            broker_member_group: BrokerMemberGroup {
                broker_addrs: BTreeMap::from([(0, "10.0.0.1:10911".into()), (2, "10.0.0.3:10911".into())]),
                broker_name: "broker-a".into(),
                cluster: "DefaultCluster".into(),
            },
        };
        let json = to_fastjson_vec(&body).unwrap();
        assert_eq!(
            String::from_utf8(json.clone()).unwrap(),
            r#"{"brokerMemberGroup":{"brokerAddrs":{0:"10.0.0.1:10911",2:"10.0.0.3:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}}"#
        );
        assert_eq!(GetBrokerMemberGroupResponseBody::decode(&json).unwrap(), body);
        assert_eq!(body.broker_member_group.minimum_broker_id(), 0);
    }

    #[test]
    fn a_group_without_members_has_minimum_id_zero() {
        let group = BrokerMemberGroup::decode(br#"{"brokerAddrs":{},"brokerName":"b","cluster":"c"}"#).unwrap();
        assert_eq!(group.minimum_broker_id(), 0);
        let group = BrokerMemberGroup::decode(br#"{"brokerAddrs":{3:"h:1",1:"h:2"}}"#).unwrap();
        assert_eq!(group.minimum_broker_id(), 1);
    }
}
