//! The JSON bodies of the controller's requests and answers (controller-mode.md §2), with
//! Java's field names. Parsing is lenient (fastjson may write numeric map keys unquoted).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// `{"syncStateSet":[ids],"syncStateSetEpoch":n}`: ALTER_SYNC_STATE_SET's body (the proposed
/// set with the epoch the master knows) and the body of several answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncStateSet {
    /// Broker ids.
    #[serde(default)]
    pub sync_state_set: BTreeSet<i64>,
    /// Its epoch.
    #[serde(default)]
    pub sync_state_set_epoch: i32,
}

/// `brokerMemberGroup` of ELECT_MASTER's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerMemberGroup {
    /// The cluster.
    pub cluster: String,
    /// The broker set.
    pub broker_name: String,
    /// Address by broker id.
    pub broker_addrs: BTreeMap<i64, String>,
}

/// ELECT_MASTER's answer body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElectMasterResponseBody {
    /// Every replica of the set.
    pub broker_member_group: BrokerMemberGroup,
    /// The new SyncStateSet.
    pub sync_state_set: BTreeSet<i64>,
}

/// GET_SYNC_STATE_DATA's answer body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerReplicasInfo {
    /// Per broker set.
    pub replicas_info_table: BTreeMap<String, crate::requests::ReplicasInfo>,
}

/// Serializes a body (plain data: cannot fail).
pub fn to_json<T: Serialize>(body: &T) -> Vec<u8> {
    serde_json::to_vec(body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_json() {
        let s = SyncStateSet { sync_state_set: [1, 2].into(), sync_state_set_epoch: 3 };
        assert_eq!(to_json(&s), br#"{"syncStateSet":[1,2],"syncStateSetEpoch":3}"#);
        let e = ElectMasterResponseBody {
            broker_member_group: BrokerMemberGroup {
                cluster: "c".into(),
                broker_name: "b".into(),
                broker_addrs: [(1, "a:1".to_owned())].into(),
            },
            sync_state_set: [1].into(),
        };
        assert_eq!(
            to_json(&e),
            br#"{"brokerMemberGroup":{"cluster":"c","brokerName":"b","brokerAddrs":{"1":"a:1"}},"syncStateSet":[1]}"#
        );
        // fastjson's unquoted keys parse.
        let back: ElectMasterResponseBody = ferromq_protocol::json::parse_lenient(
            br#"{"brokerMemberGroup":{"cluster":"c","brokerName":"b","brokerAddrs":{1:"a:1"}},"syncStateSet":[1]}"#,
        )
        .unwrap();
        assert_eq!(back, e);
    }
}
