//! Topic route data as the name server serves it (GET_ROUTEINFO_BY_TOPIC, 105): which brokers
//! hold a topic (`QueueData`), where those brokers are (`BrokerData`), and the envelope
//! (`TopicRouteData`). Java: `org.apache.rocketmq.remoting.protocol.route.*`.
//!
//! Building routes from registrations is the name server's job; choosing queues is the
//! client's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::body::{lenient, JsonBody, MessageQueue};

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

    /// The writable queues of `topic`, each with its broker group's master (groups without one
    /// are left out), in route order. Java: `topicRouteData2TopicPublishInfo`.
    pub fn publish_queues(&self, topic: &str) -> Vec<(MessageQueue, String)> {
        self.queues(topic, true)
    }

    /// The readable queues of `topic`, sorted, each with the address to read from (the master,
    /// else the lowest slave). Java: `topicRouteData2TopicSubscribeInfo`.
    pub fn subscribe_queues(&self, topic: &str) -> Vec<(MessageQueue, String)> {
        let mut queues = self.queues(topic, false);
        queues.sort_by(|a, b| (&a.0.broker_name, a.0.queue_id).cmp(&(&b.0.broker_name, b.0.queue_id)));
        queues
    }

    fn queues(&self, topic: &str, write: bool) -> Vec<(MessageQueue, String)> {
        let mut queues = Vec::new();
        for q in &self.queue_datas {
            let (allowed, count) = if write {
                (crate::body::perm::is_writeable(q.perm), q.write_queue_nums)
            } else {
                (crate::body::perm::is_readable(q.perm), q.read_queue_nums)
            };
            let group = self.broker_datas.iter().find(|b| b.broker_name == q.broker_name);
            let addr = group.and_then(|b| if write { b.master_addr() } else { b.select_broker_addr() });
            let (true, Some(addr)) = (allowed, addr) else { continue };
            queues.extend((0..count).map(|id| (MessageQueue::new(topic, q.broker_name.clone(), id), addr.to_owned())));
        }
        queues
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(entries: &[(i64, &str)]) -> BTreeMap<i64, String> {
        entries.iter().map(|(id, addr)| (*id, (*addr).to_owned())).collect()
    }

    #[test]
    fn publish_and_subscribe_queues_follow_permissions_and_addresses() {
        let queue = |name: &str, read, write, perm| QueueData {
            broker_name: name.to_owned(),
            read_queue_nums: read,
            write_queue_nums: write,
            perm,
            ..QueueData::default()
        };
        let route = TopicRouteData {
            queue_datas: vec![
                queue("b", 2, 1, 6),
                queue("a", 1, 2, 6),
                queue("ro", 1, 1, 4),
                queue("noMaster", 1, 1, 6),
            ],
            broker_datas: vec![
                BrokerData::new("c", "a", addrs(&[(0, "ma")])),
                BrokerData::new("c", "b", addrs(&[(0, "mb")])),
                BrokerData::new("c", "ro", addrs(&[(0, "mr")])),
                BrokerData::new("c", "noMaster", addrs(&[(1, "s")])),
            ],
            ..TopicRouteData::default()
        };
        let names = |qs: Vec<(MessageQueue, String)>| -> Vec<(String, i32, String)> {
            qs.into_iter().map(|(q, a)| (q.broker_name, q.queue_id, a)).collect()
        };
        let s = |v: &str| v.to_owned();
        assert_eq!(
            names(route.publish_queues("T")),
            vec![(s("b"), 0, s("mb")), (s("a"), 0, s("ma")), (s("a"), 1, s("ma"))]
        );
        assert_eq!(
            names(route.subscribe_queues("T")),
            vec![
                (s("a"), 0, s("ma")),
                (s("b"), 0, s("mb")),
                (s("b"), 1, s("mb")),
                (s("noMaster"), 0, s("s")),
                (s("ro"), 0, s("mr"))
            ]
        );
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
