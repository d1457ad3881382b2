//! The route table: which brokers are alive, which topics they serve, and how clusters group
//! them. Pure in-memory state, driven by the processors; time is passed in, so expiry is
//! testable without a clock. Java: `RouteInfoManager`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ferromq_protocol::body::{
    perm, BrokerData, BrokerMemberGroup, ClusterInfo, DataVersion, QueueData, TopicConfig, TopicList, TopicRouteData,
};
use ferromq_remoting::ConnectionId;
use serde_json::Value;
use tracing::{debug, info, warn};

/// Topics a broker group uses to learn its members (Java: `TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX`).
const SYNC_BROKER_MEMBER_GROUP_PREFIX: &str = "rmq_sys_SYNC_BROKER_MEMBER_";

/// Broker id of a master.
pub const MASTER_ID: i64 = 0;

/// Default broker expiry when a registration does not say (Java:
/// `DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`, 120 s).
pub const DEFAULT_BROKER_TIMEOUT_MS: i64 = 120_000;

/// A broker's address within its cluster: the key of the liveness table.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BrokerAddrInfo {
    /// Cluster name.
    pub cluster: String,
    /// `ip:port` of the broker's remoting server.
    pub addr: String,
}

#[derive(Debug, Clone)]
struct BrokerLiveInfo {
    last_update_ms: i64,
    timeout_ms: i64,
    data_version: DataVersion,
    connection: Option<ConnectionId>,
    ha_server_addr: String,
}

/// One REGISTER_BROKER request, decoded.
#[derive(Debug, Clone, Default)]
pub struct BrokerRegistration {
    /// Cluster name.
    pub cluster_name: String,
    /// Broker remoting address.
    pub broker_addr: String,
    /// Broker group name.
    pub broker_name: String,
    /// 0 master, > 0 slave.
    pub broker_id: i64,
    /// HA address slaves connect to.
    pub ha_server_addr: String,
    /// Zone, if the broker reports one.
    pub zone_name: Option<String>,
    /// Expiry override.
    pub timeout_ms: Option<i64>,
    /// `None` for brokers older than 5.x.
    pub enable_acting_master: Option<bool>,
    /// The broker's topic-config data version.
    pub data_version: DataVersion,
    /// The broker's topics.
    pub topic_config_table: BTreeMap<String, TopicConfig>,
    /// Static-topic mapping info per topic (opaque JSON).
    pub topic_queue_mapping_info: BTreeMap<String, Value>,
    /// Filter servers (legacy).
    pub filter_server_list: Vec<String>,
    /// The connection the registration came on, so its close unregisters the broker.
    pub connection: Option<ConnectionId>,
}

/// What a registration answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegisterResult {
    /// The master's HA address, for a slave whose master is alive.
    pub ha_server_addr: Option<String>,
    /// The master's address, for a slave whose master is alive.
    pub master_addr: Option<String>,
}

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// Another broker with the same id and a newer state version owns the slot.
    #[error(
        "broker {broker_name}[{broker_id}] at {broker_addr} conflicts with a newer registration at {existing_addr}"
    )]
    StaleStateVersion {
        /// Group.
        broker_name: String,
        /// Id.
        broker_id: i64,
        /// Refused address.
        broker_addr: String,
        /// Address kept.
        existing_addr: String,
    },
}

/// A broker removed from the table, and the connection to close for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredBroker {
    /// Who.
    pub broker: BrokerAddrInfo,
    /// Its registration connection, if known.
    pub connection: Option<ConnectionId>,
}

/// The name server's routing state.
#[derive(Debug, Default)]
pub struct RouteTable {
    topic_queue_table: HashMap<String, BTreeMap<String, QueueData>>,
    broker_addr_table: BTreeMap<String, BrokerData>,
    cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
    broker_live_table: HashMap<BrokerAddrInfo, BrokerLiveInfo>,
    filter_server_table: HashMap<BrokerAddrInfo, Vec<String>>,
    topic_queue_mapping_info: HashMap<String, BTreeMap<String, Value>>,
    /// `deleteTopicWithBrokerRegistration`: a registration that no longer lists a topic
    /// removes the broker's queues of it.
    pub delete_topic_with_registration: bool,
}

impl RouteTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or refreshes) a broker and its topics at time `now_ms`.
    /// Java: `RouteInfoManager#registerBroker`.
    ///
    /// # Errors
    /// [`RegisterError`] when the registration is refused; the table is then unchanged except
    /// that a refused address loses its liveness entry, as in RocketMQ.
    pub fn register_broker(&mut self, reg: BrokerRegistration, now_ms: i64) -> Result<RegisterResult, RegisterError> {
        self.cluster_addr_table.entry(reg.cluster_name.clone()).or_default().insert(reg.broker_name.clone());
        let mut register_first = false;
        let broker_data = self.broker_addr_table.entry(reg.broker_name.clone()).or_insert_with(|| {
            register_first = true;
            BrokerData {
                cluster: reg.cluster_name.clone(),
                broker_name: reg.broker_name.clone(),
                broker_addrs: BTreeMap::new(),
                zone_name: None,
                enable_acting_master: false,
            }
        });
        let old_version_broker = reg.enable_acting_master.is_none();
        broker_data.enable_acting_master = reg.enable_acting_master.unwrap_or(false);
        broker_data.zone_name = reg.zone_name.clone();

        // One address has one id: a slave promoted to master first leaves its old id.
        broker_data.broker_addrs.retain(|id, addr| !(*addr == reg.broker_addr && *id != reg.broker_id));

        if let Some(old_addr) = broker_data.broker_addrs.get(&reg.broker_id).cloned() {
            if old_addr != reg.broker_addr {
                let old_key = BrokerAddrInfo { cluster: reg.cluster_name.clone(), addr: old_addr.clone() };
                if let Some(old) = self.broker_live_table.get(&old_key) {
                    if old.data_version.state_version > reg.data_version.state_version {
                        warn!(broker_name = %reg.broker_name, broker_id = reg.broker_id, broker_addr = %reg.broker_addr,
                            existing_addr = %old_addr, "registration conflicts with a newer one; ignored");
                        self.broker_live_table.remove(&BrokerAddrInfo {
                            cluster: reg.cluster_name.clone(),
                            addr: reg.broker_addr.clone(),
                        });
                        return Err(RegisterError::StaleStateVersion {
                            broker_name: reg.broker_name,
                            broker_id: reg.broker_id,
                            broker_addr: reg.broker_addr,
                            existing_addr: old_addr,
                        });
                    }
                }
            }
        }

        // RocketMQ 5.x refuses a one-topic registration from an address not yet registered (its
        // single-topic re-registration path). Real brokers always carry system topics, but a
        // minimal broker or test harness may register exactly one topic, and refusing it would
        // lose a valid route; FerroMQ accepts it.
        let old_addr = broker_data.broker_addrs.insert(reg.broker_id, reg.broker_addr.clone());
        register_first |= old_addr.as_deref().is_none_or(str::is_empty);
        let is_master = reg.broker_id == MASTER_ID;
        let is_prime_slave =
            !old_version_broker && !is_master && broker_data.broker_addrs.keys().next().copied() == Some(reg.broker_id);
        let acting_master = broker_data.enable_acting_master;

        let addr_info = BrokerAddrInfo { cluster: reg.cluster_name.clone(), addr: reg.broker_addr.clone() };
        if is_master || is_prime_slave {
            let config_changed = self.is_broker_topic_config_changed(&addr_info, &reg.data_version);
            if self.delete_topic_with_registration && reg.topic_queue_mapping_info.is_empty() {
                self.delete_topics_not_in(&reg.broker_name, &reg.topic_config_table);
            }
            for config in reg.topic_config_table.values() {
                // Java 5 `isTopicConfigChanged`: also a topic whose queues no longer name this
                // broker (a topic deleted from it by cluster) comes back with its registration.
                let missing =
                    self.topic_queue_table.get(&config.topic_name).is_none_or(|q| !q.contains_key(&reg.broker_name));
                if register_first || config_changed || missing {
                    let mut config = config.clone();
                    if is_prime_slave && acting_master {
                        config.perm &= !perm::PERM_WRITE;
                    }
                    self.create_and_update_queue_data(&reg.broker_name, &config);
                }
            }
            if config_changed || register_first {
                for (topic, info) in &reg.topic_queue_mapping_info {
                    let bname = info.get("bname").and_then(Value::as_str).unwrap_or(&reg.broker_name).to_owned();
                    self.topic_queue_mapping_info.entry(topic.clone()).or_default().insert(bname, info.clone());
                }
            }
        }

        let previous = self.broker_live_table.insert(
            addr_info.clone(),
            BrokerLiveInfo {
                last_update_ms: now_ms,
                timeout_ms: reg.timeout_ms.unwrap_or(DEFAULT_BROKER_TIMEOUT_MS),
                data_version: reg.data_version,
                connection: reg.connection,
                ha_server_addr: reg.ha_server_addr.clone(),
            },
        );
        if previous.is_none() {
            info!(cluster = %reg.cluster_name, broker_name = %reg.broker_name, broker_id = reg.broker_id,
                broker_addr = %reg.broker_addr, ha_server_addr = %reg.ha_server_addr,
                topics = reg.topic_config_table.len(), "new broker registered");
        }
        if reg.filter_server_list.is_empty() {
            self.filter_server_table.remove(&addr_info);
        } else {
            self.filter_server_table.insert(addr_info, reg.filter_server_list.clone());
        }

        let mut result = RegisterResult::default();
        if !is_master {
            let master_addr =
                self.broker_addr_table.get(&reg.broker_name).and_then(|b| b.broker_addrs.get(&MASTER_ID)).cloned();
            if let Some(master_addr) = master_addr {
                let key = BrokerAddrInfo { cluster: reg.cluster_name.clone(), addr: master_addr.clone() };
                if let Some(master) = self.broker_live_table.get(&key) {
                    result.ha_server_addr = Some(master.ha_server_addr.clone());
                    result.master_addr = Some(master_addr);
                }
            }
        }
        Ok(result)
    }

    fn is_broker_topic_config_changed(&self, addr: &BrokerAddrInfo, version: &DataVersion) -> bool {
        match self.broker_live_table.get(addr) {
            Some(live) => live.data_version != *version,
            None => true,
        }
    }

    fn create_and_update_queue_data(&mut self, broker_name: &str, config: &TopicConfig) {
        let queue_data = QueueData {
            broker_name: broker_name.to_owned(),
            read_queue_nums: config.read_queue_nums,
            write_queue_nums: config.write_queue_nums,
            perm: config.perm,
            topic_sys_flag: config.topic_sys_flag,
        };
        let queues = self.topic_queue_table.entry(config.topic_name.clone()).or_default();
        match queues.get(broker_name) {
            Some(existing) if *existing == queue_data => {}
            Some(_) => {
                info!(topic = %config.topic_name, broker_name, "topic queue data changed");
                queues.insert(broker_name.to_owned(), queue_data);
            }
            None => {
                debug!(topic = %config.topic_name, broker_name, "new topic registered");
                queues.insert(broker_name.to_owned(), queue_data);
            }
        }
    }

    /// Drops a broker's topics that its latest registration did not list.
    fn delete_topics_not_in(&mut self, broker_name: &str, keep: &BTreeMap<String, TopicConfig>) {
        let mut emptied = Vec::new();
        for (topic, queues) in self.topic_queue_table.iter_mut() {
            if !keep.contains_key(topic) && queues.remove(broker_name).is_some() {
                info!(topic = %topic, broker_name, "topic dropped: missing from broker registration");
                if queues.is_empty() {
                    emptied.push(topic.clone());
                }
            }
        }
        for topic in emptied {
            self.topic_queue_table.remove(&topic);
        }
    }

    /// Removes one broker address. Java: `RouteInfoManager#unRegisterBroker`.
    pub fn unregister_broker(&mut self, cluster: &str, broker_addr: &str, broker_name: &str, broker_id: i64) {
        let key = BrokerAddrInfo { cluster: cluster.to_owned(), addr: broker_addr.to_owned() };
        let was_live = self.broker_live_table.remove(&key).is_some();
        self.filter_server_table.remove(&key);
        let mut remove_broker_name = false;
        let mut acting_without_master = false;
        if let Some(data) = self.broker_addr_table.get_mut(broker_name) {
            // By address, whatever id the request names (Java removes every entry of it).
            let before = data.broker_addrs.len();
            data.broker_addrs.retain(|_, addr| addr != broker_addr);
            let removed = data.broker_addrs.len() < before;
            if removed || was_live {
                info!(cluster, broker_name, broker_id, broker_addr, "broker unregistered");
            }
            if data.broker_addrs.is_empty() {
                self.broker_addr_table.remove(broker_name);
                remove_broker_name = true;
            } else {
                acting_without_master =
                    removed && data.enable_acting_master && !data.broker_addrs.contains_key(&MASTER_ID);
            }
        }
        if acting_without_master {
            // The master is gone and a slave may act for it (5.x): the group stays readable
            // but takes no writes until a master registers again.
            self.set_write_perm(broker_name, false);
        }
        if remove_broker_name {
            if let Some(names) = self.cluster_addr_table.get_mut(cluster) {
                names.remove(broker_name);
                if names.is_empty() {
                    self.cluster_addr_table.remove(cluster);
                }
            }
            self.remove_topics_of_broker_name(broker_name);
        }
    }

    fn remove_topics_of_broker_name(&mut self, broker_name: &str) {
        self.topic_queue_table.retain(|topic, queues| {
            if queues.remove(broker_name).is_some() {
                debug!(topic = %topic, broker_name, "topic queue data removed with its broker");
            }
            !queues.is_empty()
        });
    }

    /// Unregisters every broker that registered over `connection` (it closed).
    /// Java: `RouteInfoManager#onChannelDestroy`.
    pub fn on_connection_closed(&mut self, connection: ConnectionId) -> Vec<BrokerAddrInfo> {
        let gone: Vec<BrokerAddrInfo> = self
            .broker_live_table
            .iter()
            .filter(|(_, live)| live.connection == Some(connection))
            .map(|(k, _)| k.clone())
            .collect();
        for broker in &gone {
            self.remove_by_addr(broker);
        }
        gone
    }

    fn remove_by_addr(&mut self, broker: &BrokerAddrInfo) {
        let found = self.broker_addr_table.values().find_map(|data| {
            data.broker_addrs
                .iter()
                .find(|(_, addr)| **addr == broker.addr)
                .map(|(id, _)| (data.broker_name.clone(), *id))
        });
        match found {
            Some((name, id)) => self.unregister_broker(&broker.cluster, &broker.addr, &name, id),
            None => {
                self.broker_live_table.remove(broker);
                self.filter_server_table.remove(broker);
            }
        }
    }

    /// Removes brokers silent past their timeout at `now_ms`.
    /// Java: `RouteInfoManager#scanNotActiveBroker`.
    pub fn scan_not_active(&mut self, now_ms: i64) -> Vec<ExpiredBroker> {
        let expired: Vec<ExpiredBroker> = self
            .broker_live_table
            .iter()
            .filter(|(_, live)| live.last_update_ms + live.timeout_ms < now_ms)
            .map(|(k, live)| ExpiredBroker { broker: k.clone(), connection: live.connection })
            .collect();
        for e in &expired {
            warn!(cluster = %e.broker.cluster, broker_addr = %e.broker.addr, "broker expired: no heartbeat within its timeout");
            self.remove_by_addr(&e.broker);
        }
        expired
    }

    /// Refreshes a broker's liveness (BROKER_HEARTBEAT, QUERY_DATA_VERSION). Returns false for
    /// an unknown broker.
    pub fn touch(&mut self, broker: &BrokerAddrInfo, now_ms: i64) -> bool {
        match self.broker_live_table.get_mut(broker) {
            Some(live) => {
                live.last_update_ms = now_ms;
                true
            }
            None => false,
        }
    }

    /// Compares a broker's data version with the registered one and refreshes its liveness.
    /// Returns whether it changed and the registered version.
    pub fn query_data_version(
        &mut self,
        broker: &BrokerAddrInfo,
        version: Option<&DataVersion>,
        now_ms: i64,
    ) -> (bool, Option<DataVersion>) {
        let registered = self.broker_live_table.get(broker).map(|l| l.data_version);
        // No version given counts as changed (Java compares with null).
        let changed = version.is_none_or(|v| registered.as_ref() != Some(v));
        // The query itself shows the broker alive (Java refreshes on every query).
        self.touch(broker, now_ms);
        (changed, registered)
    }

    /// The route of `topic`, or `None` if no live broker serves it.
    /// Java: `RouteInfoManager#pickupTopicRouteData`.
    pub fn pickup_topic_route(&self, topic: &str, support_acting_master: bool) -> Option<TopicRouteData> {
        let queues = self.topic_queue_table.get(topic)?;
        let mut route = TopicRouteData { queue_datas: queues.values().cloned().collect(), ..TopicRouteData::default() };
        for broker_name in queues.keys() {
            let Some(data) = self.broker_addr_table.get(broker_name) else { continue };
            route.broker_datas.push(data.clone());
            if self.filter_server_table.is_empty() {
                continue;
            }
            for addr in data.broker_addrs.values() {
                let key = BrokerAddrInfo { cluster: data.cluster.clone(), addr: addr.clone() };
                if let Some(list) = self.filter_server_table.get(&key) {
                    route.filter_server_table.insert(addr.clone(), list.clone());
                }
            }
        }
        if route.broker_datas.is_empty() || route.queue_datas.is_empty() {
            return None;
        }
        route.topic_queue_mapping_by_broker = self.topic_queue_mapping_info.get(topic).cloned();
        // A broker group's own member-sync topic shows its real members (Java).
        if support_acting_master && !topic.starts_with(SYNC_BROKER_MEMBER_GROUP_PREFIX) {
            Self::apply_acting_master(&mut route);
        }
        Some(route)
    }

    /// A broker group without a master, whose queues are read-only, shows its lowest slave as
    /// the master so clients keep reading (5.x acting master).
    fn apply_acting_master(route: &mut TopicRouteData) {
        let queue_perms: HashMap<String, i32> =
            route.queue_datas.iter().map(|q| (q.broker_name.clone(), q.perm)).collect();
        for data in &mut route.broker_datas {
            if data.broker_addrs.is_empty() || data.broker_addrs.contains_key(&MASTER_ID) || !data.enable_acting_master
            {
                continue;
            }
            if queue_perms.get(&data.broker_name).is_some_and(|p| !perm::is_writeable(*p)) {
                if let Some((&min_id, _)) = data.broker_addrs.iter().next() {
                    if let Some(addr) = data.broker_addrs.remove(&min_id) {
                        data.broker_addrs.insert(MASTER_ID, addr);
                    }
                }
            }
        }
    }

    /// Registers queue data for a topic directly (REGISTER_TOPIC_IN_NAMESRV).
    pub fn register_topic(&mut self, topic: &str, queue_datas: &[QueueData]) {
        for q in queue_datas {
            if !self.broker_addr_table.contains_key(&q.broker_name) {
                continue;
            }
            self.topic_queue_table.entry(topic.to_owned()).or_default().insert(q.broker_name.clone(), q.clone());
        }
    }

    /// Cluster membership (GET_BROKER_CLUSTER_INFO).
    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            broker_addr_table: self.broker_addr_table.clone(),
            cluster_addr_table: self.cluster_addr_table.clone(),
        }
    }

    /// The live members of broker group `broker_name` (GET_BROKER_MEMBER_GROUP), labelled
    /// with the cluster asked for; without members when the group is unknown. As in Java, the
    /// group is looked up by name alone.
    pub fn broker_member_group(&self, cluster: &str, broker_name: &str) -> BrokerMemberGroup {
        BrokerMemberGroup {
            broker_addrs: self.broker_addr_table.get(broker_name).map(|g| g.broker_addrs.clone()).unwrap_or_default(),
            broker_name: broker_name.to_owned(),
            cluster: cluster.to_owned(),
        }
    }

    /// Every topic with live queues.
    pub fn all_topics(&self) -> TopicList {
        TopicList { topic_list: self.topic_queue_table.keys().cloned().collect(), broker_addr: None }
    }

    /// Topics with queues on any broker of `cluster`.
    pub fn topics_by_cluster(&self, cluster: &str) -> TopicList {
        let names = self.cluster_addr_table.get(cluster);
        let topic_list = self
            .topic_queue_table
            .iter()
            .filter(|(_, queues)| names.is_some_and(|n| queues.keys().any(|b| n.contains(b))))
            .map(|(t, _)| t.clone())
            .collect();
        TopicList { topic_list, broker_addr: None }
    }

    /// Topics whose (first) queue data's sysflag satisfies `keep`; serves the unit-topic
    /// lists.
    pub fn topics_by_sys_flag(&self, keep: fn(i32) -> bool) -> TopicList {
        let topic_list = self
            .topic_queue_table
            .iter()
            .filter(|(_, queues)| queues.values().next().is_some_and(|q| keep(q.topic_sys_flag)))
            .map(|(t, _)| t.clone())
            .collect();
        TopicList { topic_list, broker_addr: None }
    }

    /// Cluster and broker names, which RocketMQ treats as system topics, plus one broker
    /// address to ask for the rest (GET_SYSTEM_TOPIC_LIST_FROM_NS).
    pub fn system_topic_list(&self) -> TopicList {
        let mut topic_list = BTreeSet::new();
        for (cluster, names) in &self.cluster_addr_table {
            topic_list.insert(cluster.clone());
            topic_list.extend(names.iter().cloned());
        }
        let broker_addr = self.broker_addr_table.values().find_map(|b| b.broker_addrs.values().next().cloned());
        TopicList { topic_list, broker_addr }
    }

    /// Deletes a topic's routes, from one cluster's brokers or everywhere.
    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) {
        match cluster.filter(|c| !c.is_empty()) {
            None => {
                self.topic_queue_table.remove(topic);
            }
            Some(cluster) => {
                let Some(names) = self.cluster_addr_table.get(cluster) else { return };
                if let Some(queues) = self.topic_queue_table.get_mut(topic) {
                    queues.retain(|broker_name, _| !names.contains(broker_name));
                    if queues.is_empty() {
                        self.topic_queue_table.remove(topic);
                    }
                }
            }
        }
    }

    /// Clears (`wipe`) or sets the write permission of every queue of `broker_name`; returns
    /// how many topics changed.
    pub fn set_write_perm(&mut self, broker_name: &str, writable: bool) -> i32 {
        let mut count = 0;
        for queues in self.topic_queue_table.values_mut() {
            if let Some(q) = queues.get_mut(broker_name) {
                // Adding gives read and write, whatever the queue had (Java).
                q.perm = if writable { perm::PERM_READ | perm::PERM_WRITE } else { q.perm & !perm::PERM_WRITE };
                count += 1;
            }
        }
        count
    }

    /// Number of live broker addresses.
    pub fn live_broker_count(&self) -> usize {
        self.broker_live_table.len()
    }

    /// How many topics have routes.
    pub fn topic_count(&self) -> usize {
        self.topic_queue_table.len()
    }
}
