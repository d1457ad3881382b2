//! Bodies of the 5.x controller's requests and answers (controller-mode.md §2).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::body::{lenient, BrokerMemberGroup, JsonBody};

/// `{"syncStateSet":[ids],"syncStateSetEpoch":n}`: ALTER_SYNC_STATE_SET's body (the proposed
/// set with the epoch the master knows) and the body of REGISTER_BROKER, GET_REPLICA_INFO,
/// ALTER_SYNC_STATE_SET answers and NOTIFY_BROKER_ROLE_CHANGED. Java: `SyncStateSet`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SyncStateSet {
    /// Broker ids.
    #[serde(deserialize_with = "lenient::or_default")]
    pub sync_state_set: BTreeSet<i64>,
    /// Its epoch.
    #[serde(deserialize_with = "lenient::or_default")]
    pub sync_state_set_epoch: i32,
}

/// ELECT_MASTER's answer body. Java: `ElectMasterResponseBody`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ElectMasterResponseBody {
    /// Every replica of the set.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_member_group: BrokerMemberGroup,
    /// The new SyncStateSet.
    #[serde(deserialize_with = "lenient::or_default")]
    pub sync_state_set: BTreeSet<i64>,
}

impl JsonBody for SyncStateSet {}

impl JsonBody for ElectMasterResponseBody {}

/// One epoch of a broker's epoch file as GET_BROKER_EPOCH_CACHE lists it: the last one ends at
/// `i64::MAX` (Java's default; mqadmin prints the cache's `maxOffset` there). Java: `EpochEntry`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EpochEntryBody {
    /// Where the epoch ends (the next one's start).
    #[serde(deserialize_with = "lenient::or_default")]
    pub end_offset: i64,
    /// The master epoch.
    #[serde(deserialize_with = "lenient::or_default")]
    pub epoch: i32,
    /// Its first CommitLog offset.
    #[serde(deserialize_with = "lenient::or_default")]
    pub start_offset: i64,
}

/// GET_BROKER_EPOCH_CACHE's answer body (1007, controller mode). Java: `EpochEntryCache`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EpochEntryCache {
    /// The broker's id now (0 on a master).
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_id: i64,
    /// `brokerName`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_name: String,
    /// `brokerClusterName`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub cluster_name: String,
    /// The epochs, oldest first.
    #[serde(deserialize_with = "lenient::or_default")]
    pub epoch_list: Vec<EpochEntryBody>,
    /// The CommitLog's max offset.
    #[serde(deserialize_with = "lenient::or_default")]
    pub max_offset: i64,
}

impl JsonBody for EpochEntryCache {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_json() {
        let s = SyncStateSet { sync_state_set: [1, 2].into(), sync_state_set_epoch: 3 };
        assert_eq!(s.encode(), br#"{"syncStateSet":[1,2],"syncStateSetEpoch":3}"#);
        let e = ElectMasterResponseBody {
            broker_member_group: BrokerMemberGroup {
                cluster: "c".into(),
                broker_name: "b".into(),
                broker_addrs: [(1, "a:1".to_owned())].into(),
            },
            sync_state_set: [1].into(),
        };
        assert_eq!(
            e.encode(),
            br#"{"brokerMemberGroup":{"brokerAddrs":{"1":"a:1"},"brokerName":"b","cluster":"c"},"syncStateSet":[1]}"#
        );
        // fastjson's unquoted keys parse.
        let back = ElectMasterResponseBody::decode(
            br#"{"brokerMemberGroup":{"cluster":"c","brokerName":"b","brokerAddrs":{1:"a:1"}},"syncStateSet":[1]}"#,
        )
        .unwrap();
        assert_eq!(back, e);
        let cache = EpochEntryCache {
            broker_id: 0,
            broker_name: "b".into(),
            cluster_name: "c".into(),
            epoch_list: vec![
                EpochEntryBody { epoch: 1, start_offset: 0, end_offset: 100 },
                EpochEntryBody { epoch: 2, start_offset: 100, end_offset: i64::MAX },
            ],
            max_offset: 150,
        };
        assert_eq!(
            String::from_utf8(cache.encode()).unwrap(),
            r#"{"brokerId":0,"brokerName":"b","clusterName":"c","epochList":[{"endOffset":100,"epoch":1,"startOffset":0},{"endOffset":9223372036854775807,"epoch":2,"startOffset":100}],"maxOffset":150}"#
        );
    }
}
