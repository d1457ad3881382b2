//! `ClusterInfo`: every broker group and which cluster it belongs to
//! (GET_BROKER_CLUSTER_INFO, 106). Java: `org.apache.rocketmq.remoting.protocol.body.ClusterInfo`.
//!
//! A plain snapshot; the name server's live tables live in the namesrv crate.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::body::{lenient, BrokerData, JsonBody};

/// Broker groups by name, and broker-group names by cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterInfo {
    /// Broker group name -> group.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    /// Cluster name -> broker group names.
    #[serde(deserialize_with = "lenient::or_default")]
    pub cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
}

impl JsonBody for ClusterInfo {}

impl ClusterInfo {
    /// Addresses of every member of every group in `cluster`.
    /// Java: `ClusterInfo#retrieveAllAddrByCluster`.
    pub fn addrs_in_cluster(&self, cluster: &str) -> Vec<&str> {
        self.cluster_addr_table
            .get(cluster)
            .into_iter()
            .flatten()
            .filter_map(|name| self.broker_addr_table.get(name))
            .flat_map(|group| group.broker_addrs.values().map(String::as_str))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fastjson_cluster_info() {
        let json = br#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},
            "brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},
            "clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#;
        let info = ClusterInfo::decode(json).unwrap();
        assert_eq!(info.addrs_in_cluster("DefaultCluster"), vec!["10.0.0.1:10911"]);
        assert!(info.addrs_in_cluster("Other").is_empty());
    }
}
