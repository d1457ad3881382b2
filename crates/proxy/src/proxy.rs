//! The proxy's shared state and the work around the RPCs: registering gRPC clients with the
//! brokers as remoting producers and consumers (Java: `ClientActivity`, the proxy's
//! heartbeats), the requests brokers send back (transaction checks), and client expiry.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use ferromq_protocol::body::{
    self, ConsumeFromWhere, ConsumeType, ConsumerConnection, ConsumerData, HeartbeatData, JsonBody, MessageModel,
    ProducerData,
};
use ferromq_protocol::header::{CheckTransactionStateRequestHeader, UnregisterClientRequestHeader};
use ferromq_protocol::message::{keys, StoredMessage};
use ferromq_protocol::{request_code, RemotingCommand};
use ferromq_remoting::{Connection, Dispatcher, RequestHandler};
use tracing::{debug, info, warn};

use crate::brokers::{Brokers, Connector};
use crate::clients::{ClientRegistry, Departed};
use crate::config::ProxyConfig;
use crate::consumer::Renewals;
use crate::context::remoting_language;
use crate::convert::{self, MessageLimits};
use crate::filter::subscription_data;
use crate::pb::{self, ClientType};
use crate::route::Advertise;

/// A half message the proxy can end: where it is stored.
#[derive(Debug, Clone)]
pub struct TransactionData {
    /// Broker group holding it.
    pub broker_name: String,
    /// Its queue offset in the half topic (the prepared message's queue offset).
    pub tran_state_table_offset: i64,
    /// Its commit-log offset.
    pub commit_log_offset: i64,
    /// The client's message id.
    pub message_id: String,
    /// When the entry may be dropped.
    pub expires: Instant,
}

/// Half messages by (producer group = topic, transaction id): one entry per send and per
/// broker check, as Java's TransactionDataManager keeps them, so the EndTransaction answering
/// one check (UNKNOWN included) leaves the producer's own entry for its later COMMIT/ROLLBACK.
#[derive(Debug, Default)]
pub struct Transactions {
    table: Mutex<TransactionTable>,
}

#[derive(Debug, Default)]
struct TransactionTable {
    entries: HashMap<(String, String), std::collections::VecDeque<TransactionData>>,
    total: usize,
}

impl TransactionTable {
    fn drop_expired(&mut self) {
        let now = Instant::now();
        let mut total = 0;
        self.entries.retain(|_, v| {
            v.retain(|d| d.expires > now);
            total += v.len();
            !v.is_empty()
        });
        self.total = total;
    }
}

impl Transactions {
    /// Remembers a half message: at most `max_per` entries per transaction (the oldest goes,
    /// Java's `transactionDataMaxNum`) and `max_total` in all (expired ones are dropped first).
    pub fn insert(
        &self,
        topic: &str,
        transaction_id: &str,
        data: TransactionData,
        max_per: usize,
        max_total: usize,
    ) -> bool {
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if t.total >= max_total {
            t.drop_expired();
            if t.total >= max_total {
                return false;
            }
        }
        let v = t.entries.entry((topic.to_owned(), transaction_id.to_owned())).or_default();
        v.push_back(data);
        let dropped = v.len() > max_per.max(1);
        if dropped {
            v.pop_front();
        }
        if !dropped {
            t.total += 1;
        }
        true
    }

    /// Takes the newest unexpired entry of a transaction being ended.
    pub fn take(&self, topic: &str, transaction_id: &str) -> Option<TransactionData> {
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let key = (topic.to_owned(), transaction_id.to_owned());
        let now = Instant::now();
        let (found, removed, empty) = {
            let v = t.entries.get_mut(&key)?;
            let before = v.len();
            let mut found = None;
            while let Some(d) = v.pop_back() {
                if d.expires > now {
                    found = Some(d);
                    break;
                }
            }
            (found, before - v.len(), v.is_empty())
        };
        t.total = t.total.saturating_sub(removed);
        if empty {
            t.entries.remove(&key);
        }
        found
    }

    /// Drops expired entries.
    pub fn expire(&self) {
        self.table.lock().unwrap_or_else(|e| e.into_inner()).drop_expired();
    }
}

/// The proxy.
pub struct Proxy {
    /// Settings.
    pub config: ProxyConfig,
    /// Broker access.
    pub brokers: Brokers,
    /// Known gRPC clients.
    pub clients: ClientRegistry,
    /// Remoting clients connected to the proxy's remoting port.
    pub remoting_clients: crate::remoting::RemotingClients,
    /// Half messages sent through this proxy or checked by brokers.
    pub transactions: Transactions,
    /// Auto-renewed receipt handles.
    pub renewals: Renewals,
    /// Where routes point clients.
    pub advertise: Advertise,
    /// Message limits from the config.
    pub limits: MessageLimits,
    /// Round-robin position for sends and receives.
    pub round_robin: AtomicUsize,
    /// Delay levels (`messageDelayLevel`) in ms, for `useDelayLevel` and consumer backoff.
    pub delay_levels_ms: Vec<i64>,
    /// Receives in flight ([`RECEIVES_IN_FLIGHT_MAX`]); beyond it TOO_MANY_REQUESTS.
    pub receive_permits: Arc<tokio::sync::Semaphore>,
    /// Brokers that could not be reached, by name, until when sends and receives avoid them.
    isolated: Mutex<HashMap<String, Instant>>,
    /// ACL 2.0 for the proxy's clients: the local broker's users and ACLs in local mode, a
    /// copy of the brokers' in cluster mode (`crate::auth::sync`).
    pub auth: std::sync::OnceLock<Arc<ferromq_auth::v2::AuthService>>,
    /// Refusals of ACL 2.0, logged at most once a minute per user and resource.
    pub denials: crate::auth::DenialLog,
    /// Set when the proxy stops: long polls relayed for remoting clients are answered at once.
    stopping: tokio::sync::watch::Sender<bool>,
}

/// How long a broker that could not be reached is avoided (Java: latency fault tolerance).
pub const ISOLATION: Duration = Duration::from_secs(10);

/// The most ReceiveMessage calls (each a parked POP on a broker) served at once.
pub const RECEIVES_IN_FLIGHT_MAX: usize = 8192;

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("advertise", &self.advertise)
            .field("brokers", &self.brokers)
            .finish_non_exhaustive()
    }
}

/// Parses `messageDelayLevel` (`1s 5s 1m 2h ...`) into ms.
pub fn parse_delay_levels(text: &str) -> Vec<i64> {
    text.split_whitespace()
        .filter_map(|l| {
            let (n, unit) = l.split_at(l.len().checked_sub(1)?);
            let n: i64 = n.parse().ok()?;
            Some(
                n * match unit {
                    "s" => 1000,
                    "m" => 60_000,
                    "h" => 3_600_000,
                    "d" => 86_400_000,
                    _ => return None,
                },
            )
        })
        .collect()
}

impl Proxy {
    /// Builds the proxy. `connector` is made with the handler for what brokers send to the
    /// proxy's connections (transaction checks), so it can be a remoting client or an
    /// in-process connection to the local broker. Name servers are reached as `namesrv_client`
    /// says (TLS, signing).
    pub fn new(
        config: ProxyConfig,
        advertise: Advertise,
        namesrv_client: ferromq_remoting::ClientConfig,
        connector: impl FnOnce(Arc<dyn RequestHandler>) -> Arc<dyn Connector>,
    ) -> Arc<Proxy> {
        Arc::new_cyclic(|weak: &Weak<Proxy>| {
            let connector = connector(Arc::new(broker_requests(weak.clone())));
            let brokers = Brokers::new(
                &config.namesrv_addr,
                connector,
                namesrv_client,
                Duration::from_secs(config.topic_route_service_cache_refresh_seconds.max(1)),
                Duration::from_millis(config.remoting_timeout_millis.max(100)),
            );
            let limits = MessageLimits {
                max_body_bytes: config.max_message_size,
                refuse_empty_body: config.enable_message_body_empty_check,
                max_user_properties: config.user_property_max_num,
                max_user_property_bytes: config.max_user_property_size,
                max_message_group_bytes: config.max_message_group_size,
                max_delay_ms: config.max_delay_time_mills,
                max_transaction_recovery_s: config.max_transaction_recovery_second,
                delay_levels_ms: config.use_delay_level.then(|| parse_delay_levels(&config.message_delay_level)),
            };
            Proxy {
                delay_levels_ms: parse_delay_levels(&config.message_delay_level),
                renewals: Renewals::new(config.renew_max_handles),
                config,
                brokers,
                clients: ClientRegistry::default(),
                remoting_clients: crate::remoting::RemotingClients::default(),
                transactions: Transactions::default(),
                advertise,
                limits,
                round_robin: AtomicUsize::new(0),
                receive_permits: Arc::new(tokio::sync::Semaphore::new(RECEIVES_IN_FLIGHT_MAX)),
                isolated: Mutex::new(HashMap::new()),
                auth: std::sync::OnceLock::new(),
                denials: crate::auth::DenialLog::default(),
                stopping: tokio::sync::watch::channel(false).0,
            }
        })
    }

    /// The proxy is stopping: long polls in flight are to end now ([`Proxy::stopped`]).
    pub fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// Completes once [`Proxy::stop`] was called.
    pub async fn stopped(&self) {
        let mut rx = self.stopping.subscribe();
        let _ = rx.wait_for(|stopping| *stopping).await;
    }

    /// A broker could not be reached: avoid it for [`ISOLATION`] and look its topic up again.
    pub fn isolate(&self, broker_name: &str, topic: &str) {
        self.isolated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(broker_name.to_owned(), Instant::now() + ISOLATION);
        self.brokers.invalidate_route(topic);
    }

    /// Remembers a half message of `group`'s transaction `id` within the table's bounds
    /// (`transactionDataMaxNum`, `transactionDataMaxTotal`); false when the table is full, and
    /// the transaction then ends by the broker's check.
    pub fn remember_transaction(&self, group: &str, id: &str, data: TransactionData) -> bool {
        self.transactions.insert(
            group,
            id,
            data,
            self.config.transaction_data_max_num,
            self.config.transaction_data_max_total,
        )
    }

    /// How long the proxy keeps what routes a transaction's END_TRANSACTION (its broker and
    /// offsets). Java keeps it `transactionDataExpireMillis` (30 s) from the send; here four
    /// times as long (at least 1 s each), so a local transaction that takes longer still ends by
    /// its producer's call rather than by the broker's check-back. The table stays bounded by
    /// `transactionDataMaxNum` and `transactionDataMaxTotal` (docs/decisions/0012).
    pub fn transaction_data_ttl(&self) -> Duration {
        Duration::from_millis(self.config.transaction_data_expire_millis.max(1000) as u64 * 4)
    }

    /// The brokers avoided now.
    pub fn isolated_brokers(&self) -> Vec<String> {
        let now = Instant::now();
        let mut m = self.isolated.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, until| *until > now);
        m.keys().cloned().collect()
    }

    /// The heartbeat a client's registration sends to brokers.
    fn heartbeat_of(&self, client_id: &str) -> Option<(HeartbeatData, Vec<String>, String)> {
        self.clients.with(client_id, |r| {
            let mut hb = HeartbeatData { client_id: client_id.to_owned(), ..Default::default() };
            let topics: Vec<String>;
            if r.client_type == ClientType::Producer {
                hb.producer_data_set = r.topics.iter().map(|t| ProducerData { group_name: t.clone() }).collect();
                topics = r.topics.clone();
            } else {
                let group = r.group.clone().unwrap_or_default();
                hb.consumer_data_set = vec![ConsumerData {
                    consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
                    consume_type: if r.client_type == ClientType::PushConsumer {
                        ConsumeType::ConsumePassively
                    } else {
                        ConsumeType::ConsumeActively
                    },
                    group_name: group,
                    message_model: MessageModel::Clustering,
                    subscription_data_set: r
                        .subscriptions
                        .iter()
                        .filter_map(|(t, e)| subscription_data(t, e).ok())
                        .collect(),
                    unit_mode: false,
                }];
                topics = r.subscriptions.iter().map(|(t, _)| t.clone()).collect();
            }
            (hb, topics, r.language.clone())
        })
    }

    /// The consumer group's members connected to this proxy, remoting and gRPC clients alike,
    /// as GET_CONSUMER_CONNECTION_LIST on the remoting port answers (Java: the proxy's
    /// `ConsumerManager`); `None` when none is. The group's settings are its first member's
    /// (by client id); the subscriptions are every member's.
    pub fn consumer_connection(&self, group: &str) -> Option<ConsumerConnection> {
        let mut members = self.remoting_clients.consumer_members(group);
        for id in self.clients.consumer_ids_of(group) {
            let Some((mut hb, _, language)) = self.heartbeat_of(&id) else { continue };
            let Some(data) = hb.consumer_data_set.pop() else { continue };
            let Some((peer, version)) = self.clients.with(&id, |r| (r.peer, r.version.clone())) else { continue };
            let connection = body::Connection {
                client_addr: peer.map(|p| p.to_string()).unwrap_or_default(),
                client_id: id,
                language: remoting_language(&language),
                // Java's parse: a version name (`V5_0_0`), else its own version.
                version: ferromq_protocol::version::ordinal(&version.to_ascii_uppercase())
                    .unwrap_or(ferromq_protocol::version::CURRENT),
            };
            members.push((connection, data));
        }
        let first = members.first()?.1.clone();
        let mut body = ConsumerConnection {
            consume_from_where: first.consume_from_where,
            consume_type: first.consume_type,
            message_model: first.message_model,
            ..ConsumerConnection::default()
        };
        for (connection, data) in members {
            for sub in data.subscription_data_set {
                body.subscription_table.insert(sub.topic.clone(), sub);
            }
            body.connection_set.push(connection);
        }
        Some(body)
    }

    /// Registers the client with every master of its topics (Java: the proxy's
    /// `ProducerManager`/`ConsumerManager` registration). Failures are logged: the next
    /// heartbeat tries again.
    pub async fn register_with_brokers(&self, client_id: &str) {
        let Some((hb, topics, language)) = self.heartbeat_of(client_id) else { return };
        let mut addrs = Vec::new();
        for topic in &topics {
            match self.brokers.route(topic).await {
                Ok(route) => addrs.extend(route.broker_datas.iter().filter_map(|b| b.master_addr().map(str::to_owned))),
                Err(e) => debug!(client_id, topic, error = %e, "no route to register the client"),
            }
        }
        addrs.sort();
        addrs.dedup();
        let body = hb.encode();
        for addr in addrs {
            let mut req = RemotingCommand::request(request_code::HEART_BEAT).with_body(body.clone());
            req.language = remoting_language(&language);
            if let Err(e) = self.brokers.invoke(&addr, req, None).await {
                debug!(client_id, broker = %addr, error = %e, "heartbeat to broker failed");
            }
        }
    }

    /// Unregisters a departed client from the brokers it was registered with, and hands its
    /// auto-renewed messages back soon (`invisibleTimeMillisWhenClear`).
    pub async fn forget(&self, departed: Departed) {
        let Departed { client_id, record } = departed;
        let (topics, mut producer_groups, mut consumer_group): (Vec<String>, Vec<String>, Option<String>) =
            if record.client_type == ClientType::Producer {
                (record.topics.clone(), record.topics.clone(), None)
            } else {
                (record.subscriptions.iter().map(|(t, _)| t.clone()).collect(), Vec::new(), record.group.clone())
            };
        // Brokers know the proxy's clients by its connection, not by client id: unregistering a
        // group another client here still belongs to would unregister that client too.
        producer_groups.retain(|g| !self.clients.has_producer_of(g) && !self.remoting_clients.has_producer_of(g));
        consumer_group = consumer_group
            .filter(|g| !self.clients.has_consumer_of(g) && self.remoting_clients.consumer_ids(g).is_empty());
        let mut addrs = Vec::new();
        for topic in &topics {
            if let Ok(route) = self.brokers.route(topic).await {
                addrs.extend(route.broker_datas.iter().filter_map(|b| b.master_addr().map(str::to_owned)));
            }
        }
        addrs.sort();
        addrs.dedup();
        for addr in &addrs {
            let mut headers: Vec<UnregisterClientRequestHeader> = producer_groups
                .iter()
                .map(|g| UnregisterClientRequestHeader {
                    client_id: client_id.clone(),
                    producer_group: Some(g.clone()),
                    consumer_group: None,
                })
                .collect();
            if let Some(g) = &consumer_group {
                headers.push(UnregisterClientRequestHeader {
                    client_id: client_id.clone(),
                    producer_group: None,
                    consumer_group: Some(g.clone()),
                });
            }
            for h in headers {
                let req = RemotingCommand::request(request_code::UNREGISTER_CLIENT).with_header(&h);
                if let Err(e) = self.brokers.invoke(addr, req, None).await {
                    debug!(client_id, broker = %addr, error = %e, "unregister failed");
                }
            }
        }
        crate::consumer::clear_client_handles(self, &client_id).await;
    }

    /// Periodic work: idle clients, expired transaction data, auto-renewal. Runs until the
    /// proxy is dropped.
    pub async fn run_background(self: Arc<Self>) {
        let weak = Arc::downgrade(&self);
        drop(self);
        let mut expiry = tokio::time::interval(Duration::from_secs(5));
        let mut renew = tokio::time::interval(Duration::from_millis(
            weak.upgrade().map_or(5000, |p| p.config.renew_schedule_period_millis.max(100)),
        ));
        loop {
            tokio::select! {
                _ = expiry.tick() => {
                    let Some(p) = weak.upgrade() else { return };
                    p.transactions.expire();
                    for d in p.clients.expire(Duration::from_millis(p.config.grpc_client_idle_time_mills)) {
                        info!(client_id = %d.client_id, "gRPC client idle for grpcClientIdleTimeMills; forgotten");
                        p.forget(d).await;
                    }
                }
                _ = renew.tick() => {
                    let Some(p) = weak.upgrade() else { return };
                    crate::consumer::renew_due(&p).await;
                }
            }
        }
    }
}

/// The handler for requests brokers send on the proxy's connections.
fn broker_requests(proxy: Weak<Proxy>) -> Dispatcher {
    let mut d = Dispatcher::new();
    let checks = proxy.clone();
    d.register(request_code::CHECK_TRANSACTION_STATE, move |conn: Connection, req: RemotingCommand| {
        let proxy = checks.clone();
        async move {
            if let Some(p) = proxy.upgrade() {
                relay_transaction_check(&p, &conn, &req).await;
            }
            None
        }
    });
    let relay = proxy.clone();
    d.register(request_code::GET_CONSUMER_RUNNING_INFO, move |_conn, req: RemotingCommand| {
        let proxy = relay.clone();
        async move {
            let p = proxy.upgrade()?;
            if let Some(answer) = to_remoting_client(&p, &req).await {
                return Some(answer);
            }
            Some(crate::admin_relay::consumer_running_info(&p, &req).await)
        }
    });
    let relay = proxy.clone();
    d.register(request_code::CONSUME_MESSAGE_DIRECTLY, move |_conn, req: RemotingCommand| {
        let proxy = relay.clone();
        async move {
            let p = proxy.upgrade()?;
            if let Some(answer) = to_remoting_client(&p, &req).await {
                return Some(answer);
            }
            Some(crate::admin_relay::consume_message_directly(&p, &req).await)
        }
    });
    // Consumers of a gRPC proxy pop; they have no queues to rebalance, so a change of the
    // group's membership needs no action (Java's proxy ignores it too).
    d.register(request_code::NOTIFY_CONSUMER_IDS_CHANGED, |_conn, _req| async { None });
    d
}

/// A broker's request for the client named by its `clientId` field, when that client is
/// connected to the proxy's remoting port: relayed to it.
async fn to_remoting_client(p: &Proxy, req: &RemotingCommand) -> Option<RemotingCommand> {
    let client_id = req.ext("clientId")?;
    crate::remoting::local::to_client(p, client_id, req).await
}

/// CHECK_TRANSACTION_STATE for a producer group (for gRPC producers, the topic): ask one live
/// producer of that group, a gRPC one through its Telemetry stream
/// (RecoverOrphanedTransactionCommand), else a remoting one connected to the proxy's remoting
/// port (the request relayed as is). The broker checks again later when no producer is
/// connected.
async fn relay_transaction_check(p: &Proxy, conn: &Connection, req: &RemotingCommand) {
    let h: CheckTransactionStateRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => {
            warn!(broker = %conn.remote_addr(), error = %e, "unreadable transaction check");
            return;
        }
    };
    let m = match StoredMessage::decode(&req.body) {
        Ok((m, _)) => m,
        Err(e) => {
            warn!(broker = %conn.remote_addr(), error = %e, "transaction check without a readable message");
            return;
        }
    };
    let topic = m.property(keys::REAL_TOPIC).unwrap_or(&m.topic).to_owned();
    let group = m.property(keys::PGROUP).unwrap_or(&topic).to_owned();
    let transaction_id = h
        .transaction_id
        .clone()
        .or_else(|| m.property(keys::UNIQ_KEY).map(str::to_owned))
        .unwrap_or_else(|| m.offset_msg_id());
    let broker_name = match h.broker_name.clone() {
        Some(b) if !b.is_empty() => b,
        _ => match p.brokers.broker_name_of(&conn.remote_addr().to_string()) {
            Some(b) => b,
            None => {
                warn!(broker = %conn.remote_addr(), topic, "transaction check from a broker no route names");
                return;
            }
        },
    };
    let message_id = m.property(keys::UNIQ_KEY).unwrap_or_default().to_owned();
    let data = TransactionData {
        broker_name,
        tran_state_table_offset: h.tran_state_table_offset,
        commit_log_offset: h.commit_log_offset,
        message_id,
        expires: Instant::now() + p.transaction_data_ttl(),
    };
    if !p.remember_transaction(&group, &transaction_id, data) {
        warn!(topic, "transaction table full (transactionDataMaxTotal); check dropped, the broker asks again");
        return;
    }
    let Some((client_id, tx)) = p.clients.telemetry_of_producer(&group) else {
        if let Some(producer) = p.remoting_clients.producer_connection(&group) {
            let mut relayed = req.clone();
            relayed.flag = 0;
            if let Err(e) = producer.invoke_oneway(relayed).await {
                debug!(group, transaction_id, error = %e, "transaction check not relayed to the remoting producer");
            }
            return;
        }
        debug!(topic, transaction_id, "no live producer for a transaction check");
        return;
    };
    let namespace = p.clients.with(&client_id, |r| r.namespace.clone()).unwrap_or_default();
    let message = convert::incoming(&m, convert::Delivery { topic: topic.clone(), namespace, ..Default::default() });
    let cmd = pb::TelemetryCommand {
        status: None,
        command: Some(pb::telemetry_command::Command::RecoverOrphanedTransactionCommand(
            pb::RecoverOrphanedTransactionCommand { message: Some(message), transaction_id: transaction_id.clone() },
        )),
    };
    if tx.try_send(Ok(cmd)).is_err() {
        debug!(client_id, transaction_id, "producer's telemetry stream is full or gone; the broker asks again");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(expires_in: Duration, id: &str) -> TransactionData {
        TransactionData {
            broker_name: "b".into(),
            tran_state_table_offset: 0,
            commit_log_offset: 0,
            message_id: id.into(),
            expires: Instant::now() + expires_in,
        }
    }

    #[test]
    fn a_transaction_keeps_one_entry_per_send_and_check() {
        let t = Transactions::default();
        let hour = Duration::from_secs(3600);
        assert!(t.insert("T", "tx", data(hour, "send"), 2, 10));
        assert!(t.insert("T", "tx", data(hour, "check"), 2, 10));
        assert_eq!(t.take("T", "tx").unwrap().message_id, "check");
        assert_eq!(t.take("T", "tx").unwrap().message_id, "send");
        assert!(t.take("T", "tx").is_none());
        // Bounded per transaction and in all; expired entries make room.
        for i in 0..5 {
            assert!(t.insert("T", "tx2", data(hour, &i.to_string()), 2, 3));
        }
        assert!(t.insert("T", "tx3", data(Duration::ZERO, "old"), 2, 3));
        assert!(t.insert("T", "tx4", data(hour, "new"), 2, 3), "the expired entry made room");
        assert!(!t.insert("T", "tx5", data(hour, "full"), 2, 3));
        assert_eq!(t.take("T", "tx2").unwrap().message_id, "4");
    }

    #[test]
    fn delay_levels() {
        assert_eq!(parse_delay_levels("1s 5s 1m 2h"), vec![1000, 5000, 60_000, 7_200_000]);
        assert_eq!(parse_delay_levels(crate::config::DEFAULT_DELAY_LEVELS).len(), 18);
    }
}
