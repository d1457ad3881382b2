//! Topic route data as the name server serves it (GET_ROUTEINFO_BY_TOPIC, 105): which brokers
//! hold a topic (`QueueData`), where those brokers are (`BrokerData`), and the envelope
//! (`TopicRouteData`). Java: `org.apache.rocketmq.remoting.protocol.route.*`.
//!
//! Building routes from registrations is the name server's job; choosing queues is the
//! client's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::body::{lenient, JsonBody};

/// Broker id of a master in [`BrokerData::broker_addrs`]. Java: `MixAll.MASTER_ID`.
pub const MASTER_ID: i64 = 0;

/// A topic's queues on one broker group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueData {
    /// Broker group name.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_name: String,
    /// Permission bits (`crate::body::perm`).
    #[serde(deserialize_with = "lenient::int")]
    pub perm: i32,
    /// Readable queue count.
    #[serde(deserialize_with = "lenient::int")]
    pub read_queue_nums: i32,
    /// Topic system flag of the topic on that broker.
    #[serde(deserialize_with = "lenient::int")]
    pub topic_sys_flag: i32,
    /// Writable queue count.
    #[serde(deserialize_with = "lenient::int")]
    pub write_queue_nums: i32,
}

/// One broker group (a master and its slaves) and where its members listen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerData {
    /// Broker id (0 = master) -> `host:port`. fastjson writes these keys unquoted.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_addrs: BTreeMap<i64, String>,
    /// Broker group name.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_name: String,
    /// Cluster the group belongs to.
    #[serde(deserialize_with = "lenient::or_default")]
    pub cluster: String,
    /// 5.x: a slave may act as master when the master is gone.
    #[serde(deserialize_with = "lenient::boolean")]
    pub enable_acting_master: bool,
    /// Zone of the group, when zone-aware routing is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone_name: Option<String>,
}

impl JsonBody for QueueData {}

impl JsonBody for BrokerData {}

impl BrokerData {
    /// A group with the given members and no zone.
    pub fn new(
        cluster: impl Into<String>,
        broker_name: impl Into<String>,
        broker_addrs: BTreeMap<i64, String>,
    ) -> Self {
        Self { broker_addrs, broker_name: broker_name.into(), cluster: cluster.into(), ..Self::default() }
    }

    /// The master's address if it is present, otherwise the lowest-id member's, or `None`
    /// for an empty group. Java: `BrokerData#selectBrokerAddr` (which picks a random slave
    /// instead of the lowest id).
    pub fn select_broker_addr(&self) -> Option<&str> {
        self.broker_addrs.get(&MASTER_ID).or_else(|| self.broker_addrs.values().next()).map(String::as_str)
    }

    /// The master's address, if a master is registered.
    pub fn master_addr(&self) -> Option<&str> {
        self.broker_addrs.get(&MASTER_ID).map(String::as_str)
    }
}

/// The route of one topic.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicRouteData {
    /// Broker groups that hold the topic.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_datas: Vec<BrokerData>,
    /// Broker address -> filter server addresses (obsolete; usually empty).
    #[serde(deserialize_with = "lenient::or_default")]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    /// Ordered-topic config from the name server's KV store (`brokerName:queueNum;...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    /// The topic's queues per broker group.
    #[serde(deserialize_with = "lenient::or_default")]
    pub queue_datas: Vec<QueueData>,
    /// 5.x static topics: broker name -> `TopicQueueMappingInfo` JSON (opaque).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_queue_mapping_by_broker: Option<BTreeMap<String, Value>>,
}

impl JsonBody for TopicRouteData {}

impl TopicRouteData {
    /// Encodes for a GET_ROUTEINFO_BY_TOPIC response.
    ///
    /// `standard` gives standard JSON (quoted `"0"` broker-id keys), which Java name servers
    /// send to clients of version >= V4_9_4 or that set `acceptStandardJsonOnly`; otherwise
    /// fastjson's default style with unquoted broker-id keys, for older clients. Absent
    /// optional fields are left out, as fastjson does with nulls.
    pub fn to_json_bytes(&self, standard: bool) -> Vec<u8> {
        if standard {
            self.encode()
        } else {
            self.encode_fastjson()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(entries: &[(i64, &str)]) -> BTreeMap<i64, String> {
        entries.iter().map(|(id, addr)| (*id, (*addr).to_owned())).collect()
    }

    #[test]
    fn select_prefers_master_then_lowest_slave() {
        let group = BrokerData::new("c", "b", addrs(&[(2, "s2"), (0, "m"), (1, "s1")]));
        assert_eq!(group.select_broker_addr(), Some("m"));
        let group = BrokerData::new("c", "b", addrs(&[(2, "s2"), (1, "s1")]));
        assert_eq!(group.select_broker_addr(), Some("s1"));
        assert_eq!(group.master_addr(), None);
        assert_eq!(BrokerData::default().select_broker_addr(), None);
    }

    #[test]
    fn broker_data_reads_unquoted_ids() {
        let group = BrokerData::decode(
            br#"{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"b","cluster":"c","zoneName":null}"#,
        )
        .unwrap();
        assert_eq!(group.broker_addrs, addrs(&[(0, "10.0.0.1:10911"), (1, "10.0.0.2:10911")]));
        assert_eq!(group.zone_name, None);
    }

    #[test]
    fn none_fields_are_omitted() {
        let route = TopicRouteData::default();
        assert_eq!(route.to_json_bytes(true), br#"{"brokerDatas":[],"filterServerTable":{},"queueDatas":[]}"#);
    }
}
