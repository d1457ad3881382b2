//! How the proxy reaches brokers: routes and the cluster's masters from the name servers, topic
//! and group configs from the brokers (cached as Java's `TopicRouteService` and
//! `MetadataService` cache them), and requests to a broker by name over a [`Connector`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferromq_protocol::body::{ClusterInfo, JsonBody, SubscriptionGroupConfig, TopicConfig, TopicRouteData};
use ferromq_protocol::header::{
    GetRouteInfoRequestHeader, GetSubscriptionGroupConfigRequestHeader, GetTopicConfigRequestHeader,
};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, Connection, RemotingClient, RemotingError};
use tracing::debug;

use crate::route::{writable_queues, WritableQueue};
use crate::status::{bad, ProxyError, ProxyResult};

/// The most topics (and groups) whose metadata is cached; beyond it the oldest are dropped.
pub const METADATA_CACHE_MAX: usize = 10_000;

/// Opens connections to brokers by address.
pub trait Connector: Send + Sync + 'static {
    /// The connection to the broker at `addr` (`host:port`).
    fn connect<'a>(
        &'a self,
        addr: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<Connection, RemotingError>> + Send + 'a>>;

    /// The service of the broker at `addr` when that broker runs in this process (local
    /// mode): called directly, without a remoting frame. `None` (the default) for brokers
    /// reached over a connection.
    fn local_service(&self, addr: &str) -> Option<ferromq_broker::LocalCall> {
        let _ = addr;
        None
    }
}

/// Cluster mode: every broker over the network.
impl Connector for RemotingClient {
    fn connect<'a>(
        &'a self,
        addr: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<Connection, RemotingError>> + Send + 'a>> {
        Box::pin(self.connection(addr))
    }
}

/// The caller the proxy is to a broker's in-process service: the gRPC client's address when
/// known, else an unspecified local one; the current RocketMQ version.
pub fn local_caller(peer: Option<std::net::SocketAddr>) -> ferromq_broker::service::Caller {
    ferromq_broker::service::Caller {
        remote_addr: peer.unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
        client_version: ferromq_protocol::version::CURRENT,
    }
}

/// A topic's message type as the `message.type` attribute says (absent: NORMAL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicMessageType {
    /// Attribute absent or `NORMAL`.
    Normal,
    /// `FIFO`.
    Fifo,
    /// `DELAY`.
    Delay,
    /// `TRANSACTION`.
    Transaction,
    /// `MIXED`: every type accepted.
    Mixed,
    /// The topic could not be read (Java: `UNSPECIFIED`).
    Unspecified,
}

impl TopicMessageType {
    /// Reads the `message.type` attribute.
    pub fn of(config: &TopicConfig) -> TopicMessageType {
        match config
            .attributes
            .get("message.type")
            .or_else(|| config.attributes.get("+message.type"))
            .map(String::as_str)
        {
            None | Some("NORMAL") => TopicMessageType::Normal,
            Some("FIFO") => TopicMessageType::Fifo,
            Some("DELAY") => TopicMessageType::Delay,
            Some("TRANSACTION") => TopicMessageType::Transaction,
            Some("MIXED") => TopicMessageType::Mixed,
            Some(_) => TopicMessageType::Unspecified,
        }
    }

    /// The name Java prints.
    pub fn name(self) -> &'static str {
        match self {
            TopicMessageType::Normal => "NORMAL",
            TopicMessageType::Fifo => "FIFO",
            TopicMessageType::Delay => "DELAY",
            TopicMessageType::Transaction => "TRANSACTION",
            TopicMessageType::Mixed => "MIXED",
            TopicMessageType::Unspecified => "UNSPECIFIED",
        }
    }
}

/// A cached route and the send queues it gives (computed once per fetch, not per send).
#[derive(Clone)]
struct Route {
    data: Arc<TopicRouteData>,
    writable: Arc<Vec<WritableQueue>>,
}

struct Cached<T> {
    value: T,
    fetched: Instant,
}

/// Routes and metadata, and requests to brokers.
pub struct Brokers {
    namesrv: RemotingClient,
    namesrv_addrs: Vec<String>,
    connector: Arc<dyn Connector>,
    routes: Mutex<HashMap<String, Cached<Route>>>,
    topics: Mutex<HashMap<String, Cached<TopicMessageType>>>,
    groups: Mutex<HashMap<String, Cached<Arc<SubscriptionGroupConfig>>>>,
    refresh_after: Duration,
    timeout: Duration,
}

impl std::fmt::Debug for Brokers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Brokers").field("namesrv_addrs", &self.namesrv_addrs).finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn insert_bounded<T>(map: &mut HashMap<String, Cached<T>>, key: &str, value: T) {
    if map.len() >= METADATA_CACHE_MAX && !map.contains_key(key) {
        if let Some(oldest) = map.iter().min_by_key(|(_, c)| c.fetched).map(|(k, _)| k.clone()) {
            map.remove(&oldest);
        }
    }
    map.insert(key.to_owned(), Cached { value, fetched: Instant::now() });
}

impl Brokers {
    /// Reaches the name servers `namesrv_addrs` (`;`-separated) as `namesrv_client` says (TLS,
    /// the credentials requests are signed with) and brokers through `connector`; metadata
    /// older than `refresh_after` is fetched again.
    pub fn new(
        namesrv_addrs: &str,
        connector: Arc<dyn Connector>,
        namesrv_client: ClientConfig,
        refresh_after: Duration,
        timeout: Duration,
    ) -> Self {
        Brokers {
            namesrv: RemotingClient::new(namesrv_client),
            namesrv_addrs: namesrv_addrs
                .split(';')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
            connector,
            routes: Mutex::new(HashMap::new()),
            topics: Mutex::new(HashMap::new()),
            groups: Mutex::new(HashMap::new()),
            refresh_after,
            timeout,
        }
    }

    /// The default timeout of a broker request.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The topic's route. TOPIC_NOT_FOUND when no name server knows it.
    ///
    /// # Errors
    /// TOPIC_NOT_FOUND, or the transport failure of the last name server tried.
    pub async fn route(&self, topic: &str) -> ProxyResult<Arc<TopicRouteData>> {
        Ok(self.cached_route(topic).await?.data)
    }

    /// The writable master queues of the topic's route, sorted as [`writable_queues`] sorts.
    ///
    /// # Errors
    /// As [`Brokers::route`].
    pub async fn writable_queues(&self, topic: &str) -> ProxyResult<Arc<Vec<WritableQueue>>> {
        Ok(self.cached_route(topic).await?.writable)
    }

    async fn cached_route(&self, topic: &str) -> ProxyResult<Route> {
        if let Some(c) = lock(&self.routes).get(topic) {
            if c.fetched.elapsed() < self.refresh_after {
                return Ok(c.value.clone());
            }
        }
        let data = Arc::new(self.fetch_route(topic).await?);
        let route = Route { writable: Arc::new(writable_queues(&data)), data };
        insert_bounded(&mut lock(&self.routes), topic, route.clone());
        Ok(route)
    }

    /// Forgets the topic's route (a broker of it failed).
    pub fn invalidate_route(&self, topic: &str) {
        lock(&self.routes).remove(topic);
    }

    async fn fetch_route(&self, topic: &str) -> ProxyResult<TopicRouteData> {
        if self.namesrv_addrs.is_empty() {
            return Err(bad!(InternalServerError, "no name server configured (namesrvAddr)"));
        }
        let mut last = None;
        for addr in &self.namesrv_addrs {
            let req = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(
                &GetRouteInfoRequestHeader { topic: topic.to_owned(), accept_standard_json_only: Some(true) },
            );
            match self.namesrv.invoke(addr, req, self.timeout).await {
                Ok(resp) if resp.code == response_code::SUCCESS => {
                    return TopicRouteData::decode(&resp.body)
                        .map_err(|e| bad!(InternalServerError, "name server {addr} sent an unreadable route: {e}"));
                }
                Ok(resp) if resp.code == response_code::TOPIC_NOT_EXIST => {
                    return Err(bad!(TopicNotFound, "topic {topic} does not exist"));
                }
                Ok(resp) => last = Some(ProxyError::from_remoting(resp.code, resp.remark.as_deref())),
                Err(e) => {
                    debug!(namesrv = %addr, error = %e, "name server unreachable");
                    last = Some(ProxyError::from_transport(&e));
                }
            }
        }
        Err(last.unwrap_or_else(|| bad!(InternalServerError, "no name server answered")))
    }

    /// The masters of `cluster` as (broker name, address), sorted by name, from the first name
    /// server that answers GET_BROKER_CLUSTER_INFO; empty when no broker of the cluster is
    /// registered or none has a master.
    ///
    /// # Errors
    /// The failure of the last name server tried.
    pub async fn cluster_masters(&self, cluster: &str) -> ProxyResult<Vec<(String, String)>> {
        if self.namesrv_addrs.is_empty() {
            return Err(bad!(InternalServerError, "no name server configured (namesrvAddr)"));
        }
        let mut last = None;
        for addr in &self.namesrv_addrs {
            let req = RemotingCommand::request(request_code::GET_BROKER_CLUSTER_INFO);
            match self.namesrv.invoke(addr, req, self.timeout).await {
                Ok(resp) if resp.code == response_code::SUCCESS => {
                    let info = ClusterInfo::decode(&resp.body).map_err(|e| {
                        bad!(InternalServerError, "name server {addr} sent unreadable cluster info: {e}")
                    })?;
                    let names = info.cluster_addr_table.get(cluster).into_iter().flatten();
                    return Ok(names
                        .filter_map(|name| {
                            let master = info.broker_addr_table.get(name)?.master_addr()?;
                            Some((name.clone(), master.to_owned()))
                        })
                        .collect());
                }
                Ok(resp) => last = Some(ProxyError::from_remoting(resp.code, resp.remark.as_deref())),
                Err(e) => {
                    debug!(namesrv = %addr, error = %e, "name server unreachable");
                    last = Some(ProxyError::from_transport(&e));
                }
            }
        }
        Err(last.unwrap_or_else(|| bad!(InternalServerError, "no name server answered")))
    }

    /// The master address of broker group `broker_name` in `topic`'s route.
    ///
    /// # Errors
    /// TOPIC_NOT_FOUND, or BAD_REQUEST when the route has no such broker with a master.
    pub async fn master_addr(&self, topic: &str, broker_name: &str) -> ProxyResult<String> {
        let route = self.route(topic).await?;
        if let Some(addr) =
            route.broker_datas.iter().find(|b| b.broker_name == broker_name).and_then(|b| b.master_addr())
        {
            return Ok(addr.to_owned());
        }
        // The route may predate a fail-over: ask again once.
        self.invalidate_route(topic);
        let route = self.route(topic).await?;
        route
            .broker_datas
            .iter()
            .find(|b| b.broker_name == broker_name)
            .and_then(|b| b.master_addr())
            .map(str::to_owned)
            .ok_or_else(|| bad!(BadRequest, "broker {broker_name} has no master serving topic {topic}"))
    }

    /// The topic's message type, read from a master holding it.
    pub async fn topic_message_type(&self, topic: &str) -> TopicMessageType {
        if let Some(c) = lock(&self.topics).get(topic) {
            if c.fetched.elapsed() < self.refresh_after {
                return c.value;
            }
        }
        let t = match self.fetch_topic_config(topic).await {
            Ok(config) => TopicMessageType::of(&config),
            Err(e) => {
                debug!(topic, error = %e, "topic config unavailable");
                TopicMessageType::Unspecified
            }
        };
        insert_bounded(&mut lock(&self.topics), topic, t);
        t
    }

    async fn fetch_topic_config(&self, topic: &str) -> ProxyResult<TopicConfig> {
        let route = self.route(topic).await?;
        let mut last = bad!(TopicNotFound, "no master holds topic {topic}");
        for addr in route.broker_datas.iter().filter_map(|b| b.master_addr()) {
            if let Some(service) = self.local_service(addr) {
                match service.topic_config(topic) {
                    Ok(config) => return Ok(config),
                    Err(e) => {
                        last = ProxyError::from_service(&e);
                        continue;
                    }
                }
            }
            let req = RemotingCommand::request(request_code::GET_TOPIC_CONFIG)
                .with_header(&GetTopicConfigRequestHeader { topic: topic.to_owned(), lo: None });
            match self.invoke(addr, req, None).await {
                Ok(resp) if resp.code == response_code::SUCCESS => {
                    return TopicConfig::decode(&resp.body)
                        .map_err(|e| bad!(InternalServerError, "broker {addr} sent an unreadable topic config: {e}"));
                }
                Ok(resp) => last = ProxyError::from_remoting(resp.code, resp.remark.as_deref()),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The subscription group's config from a master of `topic` (creating the group when the
    /// broker auto-creates groups).
    ///
    /// # Errors
    /// CONSUMER_GROUP_NOT_FOUND, TOPIC_NOT_FOUND, transport failures.
    pub async fn group_config(&self, topic: &str, group: &str) -> ProxyResult<Arc<SubscriptionGroupConfig>> {
        if let Some(c) = lock(&self.groups).get(group) {
            if c.fetched.elapsed() < self.refresh_after {
                return Ok(c.value.clone());
            }
        }
        let route = self.route(topic).await?;
        let mut last = bad!(ConsumerGroupNotFound, "no master answered for group {group}");
        for addr in route.broker_datas.iter().filter_map(|b| b.master_addr()) {
            if let Some(service) = self.local_service(addr) {
                match service.subscription_group(group) {
                    Ok(config) => {
                        let config = Arc::new(config);
                        insert_bounded(&mut lock(&self.groups), group, config.clone());
                        return Ok(config);
                    }
                    Err(e) => {
                        last = ProxyError::from_service(&e);
                        continue;
                    }
                }
            }
            let req = RemotingCommand::request(request_code::GET_SUBSCRIPTIONGROUP_CONFIG)
                .with_header(&GetSubscriptionGroupConfigRequestHeader { group: group.to_owned() });
            match self.invoke(addr, req, None).await {
                Ok(resp) if resp.code == response_code::SUCCESS => {
                    let config = Arc::new(SubscriptionGroupConfig::decode(&resp.body).map_err(|e| {
                        bad!(InternalServerError, "broker {addr} sent an unreadable group config: {e}")
                    })?);
                    insert_bounded(&mut lock(&self.groups), group, config.clone());
                    return Ok(config);
                }
                Ok(resp) => last = ProxyError::from_remoting(resp.code, resp.remark.as_deref()),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The in-process service of the broker at `addr`, if it runs in this process.
    pub fn local_service(&self, addr: &str) -> Option<ferromq_broker::LocalCall> {
        self.connector.local_service(addr)
    }

    /// Sends `request` to the broker at `addr` and waits for the answer (at most `timeout`,
    /// or the default).
    ///
    /// # Errors
    /// PROXY_TIMEOUT or INTERNAL_SERVER_ERROR naming the broker when it cannot be reached.
    pub async fn invoke(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Option<Duration>,
    ) -> ProxyResult<RemotingCommand> {
        let conn = self.connector.connect(addr).await.map_err(|e| ProxyError::from_transport(&e))?;
        conn.invoke(request, timeout.unwrap_or(self.timeout)).await.map_err(|e| ProxyError::from_transport(&e))
    }

    /// Sends `request` to `addr` without waiting for an answer.
    ///
    /// # Errors
    /// INTERNAL_SERVER_ERROR when the broker cannot be reached.
    pub async fn invoke_oneway(&self, addr: &str, request: RemotingCommand) -> ProxyResult<()> {
        let conn = self.connector.connect(addr).await.map_err(|e| ProxyError::from_transport(&e))?;
        conn.invoke_oneway(request).await.map_err(|e| ProxyError::from_transport(&e))
    }

    /// The broker name of the master at `addr`, from the cached routes.
    pub fn broker_name_of(&self, addr: &str) -> Option<String> {
        lock(&self.routes).values().find_map(|c| {
            c.value
                .data
                .broker_datas
                .iter()
                .find(|b| b.broker_addrs.values().any(|a| a == addr))
                .map(|b| b.broker_name.clone())
        })
    }

    /// Stops the name server connections.
    pub async fn shutdown(&self) {
        self.namesrv.shutdown().await;
    }
}
