//! `ClientInstance`: what every producer and consumer of one client id shares: name servers
//! with fail-over, the route cache, broker addresses, heartbeats and the connections.
//! Java: `MQClientInstance` with the route and heartbeat parts of `MQClientAPIImpl`. The
//! requests brokers send to the client are served by `broker_requests`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferromq_protocol::body::{
    ConsumerData, ConsumerListByGroupResponseBody, HeartbeatData, JsonBody, ProducerData, TopicRouteData, MASTER_ID,
};
use ferromq_protocol::header::{
    GetConsumerListByGroupRequestHeader, GetRouteInfoRequestHeader, UnregisterClientRequestHeader,
};
use ferromq_protocol::signature::SessionCredentials;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::tls::ClientTls;
use ferromq_remoting::RemotingClient;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::broker_requests::{self, ConsumerControl, ConsumerTable, TransactionCheck, TransactionChecks};
use crate::error::ClientError;
use crate::publish_info::PublishInfo;

/// Client settings shared by producers and consumers. Java: `ClientConfig`.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Name server addresses (`host:port`), tried in turn.
    pub namesrv_addrs: Vec<String>,
    /// This client's IP as brokers see it. Default: the local outbound address.
    pub client_ip: String,
    /// Instance name. Default: `pid#nanos`, as Java renames `DEFAULT`.
    pub instance_name: String,
    /// How often routes are refreshed (Java: `pollNameServerInterval`, 30 s).
    pub poll_name_server_interval: Duration,
    /// How often brokers get a heartbeat (Java: `heartbeatBrokerInterval`, 30 s).
    pub heartbeat_broker_interval: Duration,
    /// Timeout of name server and admin calls (Java: `mqClientApiTimeout`, 3 s).
    pub mq_client_api_timeout: Duration,
    /// Access key and secret every request is signed with, for brokers with ACL on (Java:
    /// `new AclClientRPCHook(new SessionCredentials(ak, sk))`). `None`: unsigned.
    pub credentials: Option<SessionCredentials>,
    /// Connect to name servers and brokers with TLS (Java: `useTLS`, default false).
    pub use_tls: bool,
    /// How TLS connections are made when `use_tls`: by default any server certificate is
    /// trusted and none is presented, as Java's clients do; build another from the `tls.client.*`
    /// keys with `ferromq_remoting::tls::TlsConfig::client_tls`.
    pub tls: ClientTls,
}

impl Default for ClientConfig {
    fn default() -> Self {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        ClientConfig {
            namesrv_addrs: Vec::new(),
            client_ip: local_ip().to_string(),
            instance_name: format!("{}#{}", std::process::id(), nanos),
            poll_name_server_interval: Duration::from_secs(30),
            heartbeat_broker_interval: Duration::from_secs(30),
            mq_client_api_timeout: Duration::from_secs(3),
            credentials: None,
            use_tls: false,
            tls: ClientTls::default(),
        }
    }
}

impl ClientConfig {
    /// Defaults with these name servers (`;`-separated, as Java's `namesrvAddr`).
    pub fn with_namesrv(addrs: &str) -> Self {
        let namesrv_addrs = addrs.split(';').map(str::trim).filter(|a| !a.is_empty()).map(String::from).collect();
        ClientConfig { namesrv_addrs, ..Self::default() }
    }

    /// `ip@instanceName`. Java: `ClientConfig#buildMQClientId` without unit name.
    pub fn client_id(&self) -> String {
        format!("{}@{}", self.client_ip, self.instance_name)
    }
}

/// The address the host would use to reach the outside; loopback when there is none.
/// No packet is sent: connecting a UDP socket only picks a route.
fn local_ip() -> IpAddr {
    UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("8.8.8.8:80").map(|()| s))
        .and_then(|s| s.local_addr())
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_unspecified())
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// State shared by the clients of one client id. Create with [`ClientInstance::new`], share
/// through `Arc`, and end with [`ClientInstance::shutdown`].
#[derive(Debug)]
pub struct ClientInstance {
    config: ClientConfig,
    client_id: String,
    remoting: RemotingClient,
    /// Index of the name server tried first.
    namesrv_index: AtomicUsize,
    routes: Mutex<HashMap<String, Arc<PublishInfo>>>,
    /// Broker name -> broker id -> address, from every route seen.
    brokers: Mutex<HashMap<String, BTreeMap<i64, String>>>,
    /// Static topics: topic -> logic queue id -> the broker leading it (from the route's
    /// mappings). Java: `ClientMetadata`'s `topicEndPointsTable`.
    logic_queues: Mutex<HashMap<String, BTreeMap<i32, String>>>,
    producer_groups: Mutex<BTreeSet<String>>,
    /// Consumer group -> what heartbeats say about it.
    consumer_groups: Mutex<BTreeMap<String, ConsumerData>>,
    /// Consumer group -> its rebalance trigger and control, for the requests brokers send.
    consumer_table: ConsumerTable,
    /// Producer group -> its transactional producer's check queue.
    transaction_checks: TransactionChecks,
    /// Woken when a route names a broker address not seen before, so that it gets a heartbeat
    /// at once rather than on the next timer tick: a broker checks transactions back only
    /// with producers whose heartbeat it has, and a slave that took over reads while its
    /// master is down answers rebalances only for consumers whose heartbeat it has.
    new_broker: Arc<Notify>,
    tasks: Mutex<JoinSet<()>>,
    stop_tx: watch::Sender<bool>,
}

impl ClientInstance {
    /// A client with `config`; its background task (route refresh, heartbeats) runs until
    /// [`ClientInstance::shutdown`]. Must be called inside a tokio runtime.
    pub fn new(config: ClientConfig) -> Arc<Self> {
        // Requests brokers send (transaction checks, consumer ids changed, offset reset,
        // running info) are served by `broker_requests`; other codes get
        // REQUEST_CODE_NOT_SUPPORTED.
        let consumer_table = ConsumerTable::default();
        let transaction_checks = TransactionChecks::default();
        let dispatcher = broker_requests::dispatcher(&consumer_table, &transaction_checks, &config);
        let remoting = RemotingClient::with_handler(
            ferromq_remoting::ClientConfig::default()
                .with_zone_from_env()
                .with_credentials(config.credentials.clone())
                .with_tls(config.use_tls.then(|| config.tls.clone())),
            Arc::new(dispatcher),
        );
        let (stop_tx, _) = watch::channel(false);
        let instance = Arc::new(ClientInstance {
            client_id: config.client_id(),
            config,
            remoting,
            namesrv_index: AtomicUsize::new(0),
            routes: Mutex::new(HashMap::new()),
            brokers: Mutex::new(HashMap::new()),
            logic_queues: Mutex::new(HashMap::new()),
            producer_groups: Mutex::new(BTreeSet::new()),
            consumer_groups: Mutex::new(BTreeMap::new()),
            consumer_table,
            transaction_checks,
            new_broker: Arc::new(Notify::new()),
            tasks: Mutex::new(JoinSet::new()),
            stop_tx,
        });
        let task = background(Arc::downgrade(&instance), instance.new_broker.clone(), instance.stop_tx.subscribe());
        lock(&instance.tasks).spawn(task);
        info!(client_id = %instance.client_id, "client instance started");
        instance
    }

    /// `ip@instanceName`.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The settings.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The transport, for requests this crate does not wrap yet.
    pub fn remoting(&self) -> &RemotingClient {
        &self.remoting
    }

    pub(crate) fn register_producer(&self, group: &str) -> bool {
        lock(&self.producer_groups).insert(group.to_owned())
    }

    /// Removes the group and tells every broker, slaves included. Java: `unregisterProducer` +
    /// `unregisterClient`.
    pub(crate) async fn unregister_producer(&self, group: &str) {
        lock(&self.producer_groups).remove(group);
        let header = UnregisterClientRequestHeader {
            client_id: self.client_id.clone(),
            producer_group: Some(group.to_owned()),
            consumer_group: None,
        };
        for addr in self.broker_addrs(true) {
            let req = RemotingCommand::request(request_code::UNREGISTER_CLIENT).with_header(&header);
            match self.remoting.invoke(&addr, req, self.config.mq_client_api_timeout).await {
                Ok(r) if r.code == response_code::SUCCESS => {}
                Ok(r) => warn!(remote_addr = %addr, code = r.code, "unregister client refused"),
                Err(e) => warn!(remote_addr = %addr, error = %e, "unregister client failed"),
            }
        }
    }

    /// Routes the brokers' CHECK_TRANSACTION_STATE requests of `group` to `queue`. False if
    /// the group already has a transactional producer in this instance.
    pub(crate) fn register_transaction_checks(&self, group: &str, queue: mpsc::Sender<TransactionCheck>) -> bool {
        self.transaction_checks.insert(group, queue)
    }

    /// Stops routing `group`'s transaction checks; later ones are ignored.
    pub(crate) fn unregister_transaction_checks(&self, group: &str) {
        self.transaction_checks.remove(group);
    }

    /// Adds a consumer group to the heartbeats; `trigger` is woken on
    /// NOTIFY_CONSUMER_IDS_CHANGED, `control` serves offset resets and running-info requests.
    /// False if the group is already registered.
    pub(crate) fn register_consumer(
        &self,
        data: ConsumerData,
        trigger: Arc<Notify>,
        control: Weak<dyn ConsumerControl>,
    ) -> bool {
        let mut groups = lock(&self.consumer_groups);
        if groups.contains_key(&data.group_name) {
            return false;
        }
        self.consumer_table.insert(&data.group_name, trigger, control);
        groups.insert(data.group_name.clone(), data);
        true
    }

    /// Replaces what heartbeats say about a registered consumer group.
    pub(crate) fn update_consumer(&self, data: ConsumerData) {
        if let Some(d) = lock(&self.consumer_groups).get_mut(&data.group_name) {
            *d = data;
        }
    }

    /// Removes the consumer group and tells every broker, slaves included. Java:
    /// `unregisterConsumer` + `unregisterClient`.
    pub(crate) async fn unregister_consumer(&self, group: &str) {
        lock(&self.consumer_groups).remove(group);
        self.consumer_table.remove(group);
        let header = UnregisterClientRequestHeader {
            client_id: self.client_id.clone(),
            producer_group: None,
            consumer_group: Some(group.to_owned()),
        };
        for addr in self.broker_addrs(true) {
            let req = RemotingCommand::request(request_code::UNREGISTER_CLIENT).with_header(&header);
            match self.remoting.invoke(&addr, req, self.config.mq_client_api_timeout).await {
                Ok(r) if r.code == response_code::SUCCESS => {}
                Ok(r) => warn!(remote_addr = %addr, code = r.code, "unregister client refused"),
                Err(e) => warn!(remote_addr = %addr, error = %e, "unregister client failed"),
            }
        }
    }

    /// The client ids of `group` as the broker at `addr` knows them.
    /// Java: `MQClientAPIImpl#getConsumerIdListByGroup`.
    pub(crate) async fn consumer_ids(&self, addr: &str, group: &str) -> Result<Vec<String>, ClientError> {
        let header = GetConsumerListByGroupRequestHeader { consumer_group: group.to_owned() };
        let req = RemotingCommand::request(request_code::GET_CONSUMER_LIST_BY_GROUP).with_header(&header);
        let resp = self
            .remoting
            .invoke(addr, req, self.config.mq_client_api_timeout)
            .await
            .map_err(|source| ClientError::Remoting { topic: String::new(), addr: addr.to_owned(), source })?;
        if resp.code != response_code::SUCCESS {
            return Err(ClientError::Broker {
                topic: String::new(),
                broker_addr: addr.to_owned(),
                code: resp.code,
                remark: resp.remark.unwrap_or_default(),
            });
        }
        ConsumerListByGroupResponseBody::decode(&resp.body)
            .map(|b| b.consumer_id_list)
            .map_err(|source| ClientError::Body { addr: addr.to_owned(), source })
    }

    /// Stops the background task and closes every connection.
    pub async fn shutdown(&self) {
        self.stop_tx.send_replace(true);
        let mut tasks = std::mem::take(&mut *lock(&self.tasks));
        while tasks.join_next().await.is_some() {}
        self.remoting.shutdown().await;
        info!(client_id = %self.client_id, "client instance stopped");
    }

    /// The cached publish info of `topic`, fetching the route when there is none.
    pub(crate) async fn publish_info(&self, topic: &str) -> Result<Arc<PublishInfo>, ClientError> {
        if let Some(info) = lock(&self.routes).get(topic).cloned() {
            if info.is_ok() {
                return Ok(info);
            }
        }
        self.refresh_route(topic).await
    }

    /// Fetches `topic`'s route and replaces the cache entry.
    pub(crate) async fn refresh_route(&self, topic: &str) -> Result<Arc<PublishInfo>, ClientError> {
        let route = self.fetch_route(topic).await?;
        Ok(self.install_route(topic, &route))
    }

    /// Caches publish info for `topic` built from `route` (possibly a template's). Each
    /// broker name's addresses are replaced by the route's, so a broker the name server
    /// dropped (a master that died) is no longer called.
    pub(crate) fn install_route(&self, topic: &str, route: &TopicRouteData) -> Arc<PublishInfo> {
        let mut new_broker = false;
        {
            let mut brokers = lock(&self.brokers);
            let known: BTreeSet<String> = brokers.values().flat_map(|m| m.values().cloned()).collect();
            for bd in &route.broker_datas {
                new_broker |= bd.broker_addrs.values().any(|a| !known.contains(a));
                brokers.insert(bd.broker_name.clone(), bd.broker_addrs.clone());
            }
        }
        if new_broker {
            self.new_broker.notify_one();
        }
        let leaders = crate::publish_info::logic_queue_leaders(route);
        {
            let mut logic = lock(&self.logic_queues);
            if leaders.is_empty() {
                logic.remove(topic);
            } else {
                logic.insert(topic.to_owned(), leaders);
            }
        }
        let info = Arc::new(PublishInfo::from_route(topic, route));
        lock(&self.routes).insert(topic.to_owned(), info.clone());
        info
    }

    /// The broker a request about `mq` goes to: its broker name, or for a static topic's
    /// logic queue (broker `__syslo__...`) the broker leading it now (`None` when no broker
    /// does). Java: `MQClientInstance#getBrokerNameFromMessageQueue`.
    pub(crate) fn broker_name_of(&self, mq: &ferromq_protocol::body::MessageQueue) -> Option<String> {
        if !crate::publish_info::is_logic_queue(mq) {
            return Some(mq.broker_name.clone());
        }
        lock(&self.logic_queues).get(&mq.topic).and_then(|leaders| leaders.get(&mq.queue_id).cloned())
    }

    /// The master address of `broker_name`, if known. Java: `findBrokerAddressInPublish`.
    pub(crate) fn master_addr(&self, broker_name: &str) -> Option<String> {
        lock(&self.brokers).get(broker_name).and_then(|m| m.get(&MASTER_ID).cloned())
    }

    /// The broker of `broker_name` to read from, preferring `broker_id`.
    /// Java: `MQClientInstance#findBrokerAddressInSubscribe`; see [`select_broker`].
    pub(crate) fn find_broker_in_subscribe(
        &self,
        broker_name: &str,
        broker_id: i64,
        only_this_broker: bool,
    ) -> Option<FoundBroker> {
        lock(&self.brokers).get(broker_name).and_then(|m| select_broker(m, broker_id, only_this_broker))
    }

    /// Every known master address, and with `slaves` every slave address too.
    fn broker_addrs(&self, slaves: bool) -> BTreeSet<String> {
        lock(&self.brokers)
            .values()
            .flat_map(|m| m.iter())
            .filter(|(id, _)| slaves || **id == MASTER_ID)
            .map(|(_, addr)| addr.clone())
            .collect()
    }

    /// GET_ROUTEINFO_BY_TOPIC against the name servers, moving to the next on a transport
    /// failure. Java: `MQClientAPIImpl#getTopicRouteInfoFromNameServer` with the fail-over of
    /// `NettyRemotingClient#getAndCreateNameserverChannel`.
    pub(crate) async fn fetch_route(&self, topic: &str) -> Result<TopicRouteData, ClientError> {
        let addrs = &self.config.namesrv_addrs;
        if addrs.is_empty() {
            return Err(ClientError::NoNameServer);
        }
        let start = self.namesrv_index.load(Ordering::Relaxed);
        let header = GetRouteInfoRequestHeader { topic: topic.to_owned(), accept_standard_json_only: Some(true) };
        let mut last_err = None;
        for k in 0..addrs.len() {
            let i = (start + k) % addrs.len();
            let addr = &addrs[i];
            let req = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(&header);
            let resp = match self.remoting.invoke(addr, req, self.config.mq_client_api_timeout).await {
                Ok(r) => r,
                Err(e) => {
                    warn!(remote_addr = %addr, error = %e, "name server call failed, trying the next");
                    last_err = Some(e);
                    continue;
                }
            };
            self.namesrv_index.store(i, Ordering::Relaxed);
            return match resp.code {
                response_code::SUCCESS => TopicRouteData::decode(&resp.body)
                    .map_err(|source| ClientError::Body { addr: addr.clone(), source }),
                response_code::TOPIC_NOT_EXIST => Err(ClientError::RouteNotFound { topic: topic.to_owned() }),
                code => Err(ClientError::NameServer {
                    topic: topic.to_owned(),
                    addr: addr.clone(),
                    code,
                    remark: resp.remark.unwrap_or_default(),
                }),
            };
        }
        Err(ClientError::NameServerUnavailable {
            topic: topic.to_owned(),
            source: last_err.expect("the loop ran at least once because addrs is not empty"),
        })
    }

    /// Refreshes every cached route. Java: `updateTopicRouteInfoFromNameServer`.
    async fn refresh_all_routes(&self) {
        let topics: Vec<String> = lock(&self.routes).keys().cloned().collect();
        for topic in topics {
            if let Err(e) = self.refresh_route(&topic).await {
                debug!(topic = %topic, error = %e, "route refresh failed");
            }
        }
    }

    /// HEART_BEAT to every master broker, and to the slaves too when there are consumer
    /// groups (a consumer may pull from a slave, and asks it for the group's members while
    /// the master is down), listing the producer and consumer groups.
    /// Java: `sendHeartbeatToAllBroker`.
    pub(crate) async fn heartbeat_all(&self) {
        let groups: Vec<ProducerData> =
            lock(&self.producer_groups).iter().map(|g| ProducerData { group_name: g.clone() }).collect();
        let consumers: Vec<ConsumerData> = lock(&self.consumer_groups).values().cloned().collect();
        if groups.is_empty() && consumers.is_empty() {
            return;
        }
        let addrs = self.broker_addrs(!consumers.is_empty());
        let body = HeartbeatData {
            client_id: self.client_id.clone(),
            producer_data_set: groups,
            consumer_data_set: consumers,
            ..Default::default()
        }
        .encode();
        for addr in addrs {
            let req = RemotingCommand::request(request_code::HEART_BEAT).with_body(body.clone());
            match self.remoting.invoke(&addr, req, self.config.mq_client_api_timeout).await {
                Ok(r) if r.code == response_code::SUCCESS => {}
                Ok(r) => warn!(remote_addr = %addr, code = r.code, "heartbeat refused"),
                Err(e) => debug!(remote_addr = %addr, error = %e, "heartbeat failed"),
            }
        }
    }
}

/// Route refresh and heartbeats (on the timer and when a new master broker appears) until
/// stopped. Holds only a weak reference, so dropping every `Arc` also ends it.
async fn background(instance: Weak<ClientInstance>, new_broker: Arc<Notify>, mut stop: watch::Receiver<bool>) {
    let (poll, beat) = match instance.upgrade() {
        Some(i) => (i.config.poll_name_server_interval, i.config.heartbeat_broker_interval),
        None => return,
    };
    let mut poll_tick = tokio::time::interval_at(tokio::time::Instant::now() + poll, poll);
    let mut beat_tick = tokio::time::interval_at(tokio::time::Instant::now() + beat, beat);
    if *stop.borrow() {
        return;
    }
    loop {
        tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
            _ = poll_tick.tick() => {
                let Some(i) = instance.upgrade() else { return };
                i.refresh_all_routes().await;
            }
            _ = beat_tick.tick() => {
                let Some(i) = instance.upgrade() else { return };
                i.heartbeat_all().await;
            }
            () = new_broker.notified() => {
                let Some(i) = instance.upgrade() else { return };
                i.heartbeat_all().await;
            }
        }
    }
}

/// A broker chosen for a call: its address and whether it is a slave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoundBroker {
    pub(crate) addr: String,
    pub(crate) slave: bool,
}

/// Picks from one broker name's addresses (broker id -> address): `broker_id`; for a slave
/// id that is not there, the next id; then, unless `only_this_broker`, the lowest id present
/// (the master when it is alive, else a slave). Java:
/// `MQClientInstance#findBrokerAddressInSubscribe` (whose `HashMap` of small ids iterates in
/// id order).
pub(crate) fn select_broker(
    addrs: &BTreeMap<i64, String>,
    broker_id: i64,
    only_this_broker: bool,
) -> Option<FoundBroker> {
    if let Some(addr) = addrs.get(&broker_id) {
        return Some(FoundBroker { addr: addr.clone(), slave: broker_id != MASTER_ID });
    }
    if broker_id != MASTER_ID {
        if let Some(addr) = addrs.get(&(broker_id + 1)) {
            return Some(FoundBroker { addr: addr.clone(), slave: true });
        }
    }
    if only_this_broker {
        return None;
    }
    addrs.iter().next().map(|(id, addr)| FoundBroker { addr: addr.clone(), slave: *id != MASTER_ID })
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribe_lookup_prefers_the_id_then_the_next_slave_then_the_lowest_id() {
        let both = BTreeMap::from([(0, "m:1".to_owned()), (1, "s1:1".to_owned())]);
        let found = |addr: &str, slave| Some(FoundBroker { addr: addr.to_owned(), slave });
        assert_eq!(select_broker(&both, 1, false), found("s1:1", true));
        assert_eq!(select_broker(&both, 0, false), found("m:1", false));
        assert_eq!(select_broker(&both, 0, true), found("m:1", false));
        // The suggested slave left the route: its next id, else the master.
        let two_slaves = BTreeMap::from([(0, "m:1".to_owned()), (2, "s2:1".to_owned())]);
        assert_eq!(select_broker(&two_slaves, 1, false), found("s2:1", true));
        assert_eq!(select_broker(&two_slaves, 3, false), found("m:1", false));
        assert_eq!(select_broker(&two_slaves, 3, true), None);
        // The master left the route: a slave serves, unless only the master will do.
        let no_master = BTreeMap::from([(1, "s1:1".to_owned()), (2, "s2:1".to_owned())]);
        assert_eq!(select_broker(&no_master, 0, false), found("s1:1", true));
        assert_eq!(select_broker(&no_master, 0, true), None);
        assert_eq!(select_broker(&BTreeMap::new(), 0, false), None);
    }

    #[test]
    fn client_id_is_ip_at_instance_name() {
        let mut c = ClientConfig::with_namesrv("a:1; b:2");
        assert_eq!(c.namesrv_addrs, vec!["a:1", "b:2"]);
        assert!(c.instance_name.contains('#'));
        c.client_ip = "10.0.0.1".into();
        c.instance_name = "i".into();
        assert_eq!(c.client_id(), "10.0.0.1@i");
    }
}
