//! The broker core: its state, the request dispatcher, and `run`, which serves a listener and
//! drives the background work (name-server registration, parked pulls, client expiry,
//! metadata persistence) until shutdown. Java: `BrokerController`. `run_with_local_access`
//! is `run` that also hands out a `LocalAccess`, the in-process way to the same dispatcher.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferromq_protocol::body::{RegisterBrokerBody, TopicConfig, TopicConfigAndMappingSerializeWrapper};
use ferromq_protocol::header::{
    RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnRegisterBrokerRequestHeader,
};
use ferromq_protocol::message::{crc32_masked, MessageProperties, StoredMessage, UniqIdGenerator};
use ferromq_protocol::{request_code, response_code, version, RemotingCommand};
use ferromq_remoting::{ClientConfig, Connection, Dispatcher, RemotingClient, RemotingServer, ServerConfig};
use ferromq_store::{MessageStore, StoreError};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::{info, warn};

use crate::client::{ConsumerManager, ProducerManager, RebalanceLockManager};
use crate::config::{BrokerConfig, BrokerRole, BrokerSettings};
use crate::local_access::{LocalAccess, LocalAccessParts};
use crate::long_polling::{HeldPull, PullHold};
use crate::metadata::{MetadataError, MetadataOptions, MetadataStore, TopicConfigOptions};
use crate::processor::pull::PullOutcome;
use crate::stats::{self, BrokerStats};

/// How often the checkpoint buffer writes what is due (Java's merge service: 5 ms).
const CK_BUFFER_TICK: Duration = Duration::from_millis(20);
/// How often parked pops are checked for expiry (Java: 20 ms).
const POP_EXPIRY_TICK: Duration = Duration::from_millis(20);
/// How often parked pulls are checked for expiry.
const PULL_EXPIRY_TICK: Duration = Duration::from_millis(100);
/// How often silent clients are looked for (Java: every 10 s).
const CLIENT_SCAN_INTERVAL: Duration = Duration::from_secs(10);
/// How soon a slave registers again while the name servers know no master for it.
const SLAVE_MASTER_RETRY: Duration = Duration::from_secs(1);
/// The first wait before a failed registration is tried again (doubling up to the period).
const REGISTER_RETRY_MIN: Duration = Duration::from_millis(500);
/// Time allowed for one name-server registration call.
pub(crate) const NAMESRV_TIMEOUT: Duration = Duration::from_secs(6);
/// How long an admin request that changed topics waits for the name servers to hear of it.
const REGISTERED_WAIT: Duration = Duration::from_secs(8);
/// How long a send that created its topic waits for the name servers to list it. Java's
/// single-topic registration waits up to 3 s, a producer's whole default send timeout: an
/// unreachable name server would then turn a stored message into a timed-out send that the
/// producer retries (a duplicate). 2 s leaves the answer time to arrive.
const SEND_REGISTERED_WAIT: Duration = Duration::from_secs(2);

/// Now, in ms since the epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Why the broker could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// The store failed to open.
    #[error("cannot open the message store")]
    Store(#[from] StoreError),
    /// The HA (replication) port could not be bound.
    #[error("cannot listen for replication on port {port} (haListenPort; by default the listen port + 1)")]
    HaListen {
        /// The port.
        port: u16,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The timer wheel failed to open.
    #[error("timer wheel")]
    Timer(#[from] ferromq_timer::TimerError),
    /// Metadata files failed to load.
    #[error("broker metadata")]
    Metadata(#[from] MetadataError),
    /// A setting cannot be served (the reason says which and how to fix it).
    #[error("invalid broker config: {0}")]
    Config(String),
    /// The transport failed.
    #[error("remoting server")]
    Remoting(#[from] ferromq_remoting::RemotingError),
    /// The `tls.*` settings are unusable (a bad value, an unreadable certificate).
    #[error("broker TLS: {0}")]
    Tls(#[from] ferromq_remoting::tls::TlsError),
}

/// The broker's state, shared by every processor.
pub struct Broker {
    pub(crate) settings: RwLock<BrokerSettings>,
    /// ACL 1.0 when `aclEnable=true`.
    pub(crate) acl: Option<Arc<ferromq_auth::plain::PlainAccessValidator>>,
    /// ACL 2.0's users and ACLs (open whatever the switches).
    pub(crate) auth: Arc<ferromq_auth::v2::AuthMetadata>,
    /// `innerClientAuthenticationCredentials`: what the broker's own requests are signed with.
    pub(crate) inner_credentials: Option<ferromq_protocol::signature::SessionCredentials>,
    /// The broker settings as started (UPDATE_BROKER_CONFIG changes `settings`, effective at the
    /// next start, as for most Java keys).
    pub(crate) config: BrokerConfig,
    pub(crate) store: Arc<MessageStore>,
    pub(crate) metadata: MetadataStore,
    pub(crate) producers: ProducerManager,
    pub(crate) consumers: ConsumerManager,
    pub(crate) locks: RebalanceLockManager,
    pub(crate) pull_hold: PullHold,
    pub(crate) store_host: SocketAddr,
    pub(crate) send_permits: Semaphore,
    /// Serializes UPDATE_AND_CREATE_TOPIC: it reads a topic's attributes, applies the
    /// request's changes and writes the topic back (Java's handler is `synchronized`).
    pub(crate) topic_updates: std::sync::Mutex<()>,
    pub(crate) uniq_ids: UniqIdGenerator,
    /// Put and get counters behind the TPS figures of the stats requests.
    pub(crate) stats: BrokerStats,
    /// Traffic counters of `/metrics`.
    pub(crate) metrics: crate::metrics::BrokerMetrics,
    /// `brokerPermission` as it is now: UPDATE_BROKER_CONFIG changes it at once (the one
    /// broker key that takes effect without a restart, as in Java).
    permission: AtomicI32,
    /// Client of name servers, and of peer brokers a static topic's requests are forwarded to.
    pub(crate) namesrv: RemotingClient,
    /// Static topics: broker name -> master address learnt from routes, and when.
    pub(crate) static_topic_peers: std::sync::Mutex<std::collections::HashMap<String, (String, std::time::Instant)>>,
    /// How the broker's own clients (name servers, master, controllers) connect: TLS when
    /// `useTLS`, `tls.enable` or `tls.server.mode=enforcing`, else plaintext.
    pub(crate) client_tls: Option<ferromq_remoting::tls::ClientTls>,
    /// TLS and authentication of the HA port and of this broker as a replica.
    pub(crate) ha_security: crate::ha::HaSecurity,
    /// Wakes the registration loop when a topic is created.
    register_now: tokio::sync::Notify,
    /// What the next registration round sends: the whole table or the topics changed.
    pub(crate) registration_queue: std::sync::Mutex<crate::registration_queue::RegistrationQueue>,
    /// Name servers whose last full registration succeeded: they know this broker, so a
    /// single-topic registration takes effect there (a name server ignores one for an
    /// unknown broker).
    pub(crate) namesrv_in_sync: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Registration rounds asked for (`register_requested`) and the last round the loop
    /// finished (`registered`): an admin request that created a topic answers once a round
    /// that includes it is done, so a client told "created" finds the route (Java registers
    /// before it answers UPDATE_AND_CREATE_TOPIC).
    register_requested: AtomicU64,
    registered: tokio::sync::watch::Sender<u64>,
    /// Replication as it runs now (classic master or slave; AutoSwitchHA in controller mode).
    pub(crate) replication: RwLock<crate::ha::Replication>,
    /// The role as it is now (see [`crate::ha::RuntimeRole`]).
    pub(crate) role: RwLock<crate::ha::RuntimeRole>,
    /// Controller mode: the link to the controllers, once it is established.
    pub(crate) replicas_manager: std::sync::OnceLock<Arc<crate::replicas_manager::ReplicasManager>>,
    /// Controller mode: the epoch file (`storePathEpochFile`).
    pub(crate) epochs: Option<ferromq_replication::autoswitch::SharedEpochs>,
    /// `ip:port` slaves connect to (advertised in registrations).
    pub(crate) ha_server_addr: String,
    /// The master's broker address, learned from registration answers (slaves).
    pub(crate) master_addr: RwLock<Option<String>>,
    /// The timer wheel (masters with `timerWheelEnable`; in controller mode, opened and
    /// closed as the broker becomes master and steps down).
    pub(crate) timer: RwLock<Option<Arc<ferromq_timer::TimerMessageStore>>>,
    /// Held while the wheel's files are opened (promotion) or replaced by a master's progress
    /// (a replica's sync): one at a time.
    pub(crate) timer_files: tokio::sync::Mutex<()>,
    /// The wheel's settings (also checked by sends when the wheel is not running).
    pub(crate) timer_config: ferromq_timer::TimerConfig,
    /// SQL92 subscriptions registered through heartbeats.
    pub(crate) consumer_filters: crate::filter::ConsumerFilterManager,
    /// Ends of transactions waiting to be written as op messages.
    pub(crate) tx_ops: crate::transaction::op_writer::OpQueue,
    /// Groups already told (in the log) that their SQL92 subscription needs
    /// `enablePropertyFilter` (one warning per group, at most [`SQL92_WARNED_GROUPS_MAX`]).
    pub(crate) sql92_warned: std::sync::Mutex<std::collections::HashSet<String>>,
    /// POP consumption: queue locks, in-flight counts, parked pops, FIFO and request-mode
    /// state.
    pub(crate) pop: crate::pop::PopState,
    /// Half messages waiting for their end, per topic (`rocketmq_half_messages`).
    pub(crate) half_messages: crate::transaction::HalfMessages,
    /// Where each pull group's last pull left each queue (in flight against ready).
    pub(crate) pull_offsets: crate::client::PullOffsets,
}

/// Groups remembered for the SQL92 refusal warning; beyond it, warnings stop.
const SQL92_WARNED_GROUPS_MAX: usize = 10_000;

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker").field("broker_name", &self.config.broker_name).finish_non_exhaustive()
    }
}

impl std::ops::Deref for Broker {
    type Target = MetadataStore;
    fn deref(&self) -> &MetadataStore {
        &self.metadata
    }
}

impl Broker {
    /// Logs, once per group, that a SQL92 (or other non-tag) subscription was refused because
    /// `enablePropertyFilter` is off, naming the key that enables it.
    pub(crate) fn warn_property_filter_off(&self, group: &str, expression_type: &str) {
        let mut warned = self.sql92_warned.lock().unwrap_or_else(|e| e.into_inner());
        if warned.len() < SQL92_WARNED_GROUPS_MAX && warned.insert(group.to_owned()) {
            warn!(
                consumer_group = group,
                expression_type,
                "subscription refused: filtering by {expression_type} needs enablePropertyFilter=true in broker.conf"
            );
        }
    }

    pub(crate) fn is_slave(&self) -> bool {
        self.role().broker_role == BrokerRole::Slave
    }

    /// The timer wheel, while it runs.
    pub(crate) fn timer(&self) -> Option<Arc<ferromq_timer::TimerMessageStore>> {
        self.timer.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Replaces the running timer wheel (controller mode: on promotion and stepping down);
    /// returns the previous one.
    pub(crate) fn replace_timer(
        &self,
        next: Option<Arc<ferromq_timer::TimerMessageStore>>,
    ) -> Option<Arc<ferromq_timer::TimerMessageStore>> {
        std::mem::replace(&mut *self.timer.write().unwrap_or_else(std::sync::PoisonError::into_inner), next)
    }

    /// Registers the whole table with the name servers now rather than at the next period (a
    /// role change).
    pub(crate) fn register_soon(&self) {
        self.registration_queue().request_full();
        self.register_now.notify_one();
    }

    /// A topic was created or changed: register it with the name servers soon (alone, unless
    /// many changes are waiting).
    pub(crate) fn on_topic_created(&self, config: &TopicConfig) {
        self.registration_queue().topic_changed(&config.topic_name);
        self.register_now.notify_one();
    }

    /// Registers the topic a create-if-absent call returned when that call created it (an
    /// existing topic is listed already); returns whether it did.
    pub(crate) fn on_topic_ensured(&self, ensured: &crate::metadata::Ensured) -> bool {
        if ensured.created {
            self.on_topic_created(&ensured.config);
        }
        ensured.created
    }

    /// The registration loop's pending work.
    pub(crate) fn registration_queue(&self) -> std::sync::MutexGuard<'_, crate::registration_queue::RegistrationQueue> {
        // A set and a flag, valid after any panic.
        self.registration_queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits (at most `REGISTERED_WAIT`) until a registration round that began after this
    /// call has reached every name server, or failed to: what the name servers list then
    /// includes every topic stored before the call. A dead name server does not fail the
    /// caller (the topic is stored; the periodic registration retries), as in Java.
    pub(crate) async fn registered_with_name_servers(&self) {
        self.registered_with_name_servers_within(REGISTERED_WAIT).await;
    }

    /// When a send created its topic (a new topic, retry, dead-letter or reply topic): waits, at
    /// most [`SEND_REGISTERED_WAIT`], until the name servers list it, as Java registers such a
    /// topic before answering: a client that asks for its route once answered finds it.
    pub(crate) async fn created_topic_routable(&self, created: bool) {
        if created {
            self.registered_with_name_servers_within(SEND_REGISTERED_WAIT).await;
        }
    }

    /// As [`registered_with_name_servers`](Self::registered_with_name_servers), waiting at most
    /// `wait`.
    pub(crate) async fn registered_with_name_servers_within(&self, wait: Duration) {
        let round = self.register_requested.fetch_add(1, Ordering::AcqRel) + 1;
        self.register_now.notify_one();
        let mut done = self.registered.subscribe();
        if tokio::time::timeout(wait, done.wait_for(|d| *d >= round)).await.is_err() {
            warn!(
                wait_ms = wait.as_millis() as u64,
                "name servers not told of the change in time; the next registration will"
            );
        }
    }

    /// A new message carrying `original`'s body, flag, system flag, born time and host and
    /// reconsume times, stored by this broker in `topic`/`queue_id` with `properties`: what
    /// the broker's own re-puts (due delayed messages, half-message copies, discards,
    /// commits) have in common.
    pub(crate) fn stored_copy(
        &self,
        original: &StoredMessage,
        topic: String,
        queue_id: i32,
        properties: &MessageProperties,
    ) -> StoredMessage {
        StoredMessage {
            topic,
            queue_id,
            flag: original.flag,
            body: original.body.clone(),
            properties: properties.encode(),
            sys_flag: original.sys_flag,
            born_timestamp_ms: original.born_timestamp_ms,
            born_host: original.born_host,
            store_host: self.store_host,
            reconsume_times: original.reconsume_times,
            ..StoredMessage::default()
        }
    }

    /// The store.
    pub fn store(&self) -> &MessageStore {
        &self.store
    }

    fn dispatcher(self: &Arc<Self>) -> Dispatcher {
        let mut d = Dispatcher::new();
        // Sends are polled by the connection's reader first: under ASYNC_FLUSH the append is
        // done and answered there, with no task of its own.
        for code in [request_code::SEND_MESSAGE, request_code::SEND_MESSAGE_V2, request_code::SEND_BATCH_MESSAGE] {
            let b = self.clone();
            d.register_inline(code, move |conn, req| {
                let b = b.clone();
                async move { Some(b.send(conn, req).await) }
            });
        }
        for code in [request_code::SEND_REPLY_MESSAGE, request_code::SEND_REPLY_MESSAGE_V2] {
            let b = self.clone();
            d.register(code, move |conn, req| {
                let b = b.clone();
                async move { Some(b.send_reply(conn, req).await) }
            });
        }
        {
            let b = self.clone();
            d.register(request_code::RECALL_MESSAGE, move |conn, req| {
                let b = b.clone();
                async move { Some(b.recall_message(conn, req).await) }
            });
        }
        {
            let b = self.clone();
            d.register(request_code::RESUME_CHECK_HALF_MESSAGE, move |_conn, req| {
                let b = b.clone();
                async move { Some(b.resume_check_half_message(&req).await) }
            });
        }
        {
            let b = self.clone();
            d.register(request_code::END_TRANSACTION, move |conn, req| {
                let b = b.clone();
                async move { Some(b.end_transaction(conn, req).await) }
            });
        }
        {
            let b = self.clone();
            d.register(request_code::CONSUMER_SEND_MSG_BACK, move |conn, req| {
                let b = b.clone();
                async move { Some(b.consumer_send_msg_back(conn, req).await) }
            });
        }
        for code in [request_code::PULL_MESSAGE, request_code::LITE_PULL_MESSAGE] {
            let b = self.clone();
            d.register(code, move |conn, req| {
                let b = b.clone();
                async move { b.pull(conn, req).await }
            });
        }
        {
            let b = self.clone();
            d.register(request_code::POP_MESSAGE, move |conn, req| {
                let b = b.clone();
                async move { b.pop_message(conn, req).await }
            });
        }
        for code in
            [request_code::ACK_MESSAGE, request_code::BATCH_ACK_MESSAGE, request_code::CHANGE_MESSAGE_INVISIBLETIME]
        {
            let b = self.clone();
            d.register(code, move |conn, req| {
                let b = b.clone();
                async move {
                    Some(match req.code {
                        request_code::ACK_MESSAGE => b.ack_message(&conn, &req).await,
                        request_code::BATCH_ACK_MESSAGE => b.batch_ack_message(&req).await,
                        _ => b.change_invisible_time(&conn, &req).await,
                    })
                }
            });
        }
        {
            let b = self.clone();
            d.register(request_code::QUERY_ASSIGNMENT, move |_conn, req| {
                let b = b.clone();
                async move { Some(b.query_assignment(&req).await) }
            });
        }
        macro_rules! sync {
            ($code:expr, |$b:ident, $conn:ident, $req:ident| $body:expr) => {{
                let b = self.clone();
                d.register_sync($code, move |$conn: &Connection, $req: &RemotingCommand| {
                    let $b = &b;
                    let _ = $conn;
                    Some($body)
                });
            }};
        }
        sync!(request_code::PEEK_MESSAGE, |b, conn, req| b.peek_message(conn, req));
        {
            let b = self.clone();
            d.register_sync(request_code::NOTIFICATION, move |conn: &Connection, req: &RemotingCommand| {
                b.notification(conn, req, true)
            });
        }
        sync!(request_code::POLLING_INFO, |b, conn, req| b.polling_info(conn, req));
        sync!(request_code::SET_MESSAGE_REQUEST_MODE, |b, conn, req| b.set_message_request_mode(req));
        sync!(request_code::GET_ALL_MESSAGE_REQUEST_MODE, |b, conn, req| b.get_all_message_request_mode(req));
        // Offsets of a static topic's logic queue may live on another broker: these are async.
        for code in [
            request_code::QUERY_CONSUMER_OFFSET,
            request_code::UPDATE_CONSUMER_OFFSET,
            request_code::GET_MAX_OFFSET,
            request_code::GET_MIN_OFFSET,
            request_code::GET_EARLIEST_MSG_STORETIME,
            request_code::SEARCH_OFFSET_BY_TIMESTAMP,
        ] {
            let b = self.clone();
            d.register(code, move |conn, req| {
                let b = b.clone();
                async move { Some(b.offset_request(&conn, &req).await) }
            });
        }
        sync!(request_code::HEART_BEAT, |b, conn, req| b.heart_beat(conn, req));
        sync!(request_code::UNREGISTER_CLIENT, |b, conn, req| b.unregister_client(conn, req));
        sync!(request_code::CHECK_CLIENT_CONFIG, |b, conn, req| b.check_client_config(req));
        sync!(request_code::GET_BROKER_HA_STATUS, |b, conn, req| b.get_broker_ha_status(req));
        sync!(request_code::NOTIFY_BROKER_ROLE_CHANGED, |b, conn, req| b.notify_broker_role_changed(req));
        sync!(request_code::GET_BROKER_EPOCH_CACHE, |b, conn, req| b.get_broker_epoch_cache(req));
        sync!(request_code::GET_CONSUMER_LIST_BY_GROUP, |b, conn, req| b.get_consumer_list_by_group(req));
        sync!(request_code::LOCK_BATCH_MQ, |b, conn, req| b.lock_batch_mq(req));
        sync!(request_code::UNLOCK_BATCH_MQ, |b, conn, req| b.unlock_batch_mq(req));
        sync!(request_code::QUERY_MESSAGE, |b, conn, req| b.query_message(req));
        sync!(request_code::VIEW_MESSAGE_BY_ID, |b, conn, req| b.view_message_by_id(req));
        sync!(request_code::QUERY_CONSUME_QUEUE, |b, conn, req| b.query_consume_queue(req));
        for code in [
            request_code::UPDATE_AND_CREATE_TOPIC,
            request_code::UPDATE_AND_CREATE_TOPIC_LIST,
            request_code::UPDATE_AND_CREATE_STATIC_TOPIC,
        ] {
            let b = self.clone();
            d.register(code, move |_conn, req| {
                let b = b.clone();
                async move {
                    let started = std::time::Instant::now();
                    let response = match req.code {
                        request_code::UPDATE_AND_CREATE_TOPIC => b.update_and_create_topic(&req),
                        request_code::UPDATE_AND_CREATE_STATIC_TOPIC => b.update_and_create_static_topic(&req),
                        _ => b.update_and_create_topic_list(&req),
                    };
                    if response.code == response_code::SUCCESS {
                        b.registered_with_name_servers().await;
                        b.metrics.topic_created(started.elapsed());
                    }
                    Some(response)
                }
            });
        }
        sync!(request_code::GET_TOPIC_CONFIG, |b, conn, req| b.get_topic_config(req));
        sync!(request_code::GET_SUBSCRIPTIONGROUP_CONFIG, |b, conn, req| b.get_subscription_group_config(req));
        sync!(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, |b, conn, req| {
            b.update_and_create_subscription_group_list(req)
        });
        sync!(request_code::GET_SYSTEM_TOPIC_LIST_FROM_BROKER, |b, conn, req| b.get_system_topic_list(req));
        sync!(request_code::UPDATE_AND_GET_GROUP_FORBIDDEN, |b, conn, req| b.update_and_get_group_forbidden(req));
        sync!(request_code::GET_ALL_PRODUCER_INFO, |b, conn, req| b.get_all_producer_info(req));
        sync!(request_code::GET_BROKER_CONSUME_STATS, |b, conn, req| b.get_broker_consume_stats(req));
        sync!(request_code::VIEW_BROKER_STATS_DATA, |b, conn, req| b.view_broker_stats_data(req));
        sync!(request_code::DELETE_TOPIC_IN_BROKER, |b, conn, req| b.delete_topic(req));
        sync!(request_code::CLEAN_UNUSED_TOPIC, |b, conn, req| b.clean_unused_topic(req));
        sync!(request_code::CLEAN_EXPIRED_CONSUMEQUEUE, |b, conn, req| b.clean_expired_consume_queue(req));
        sync!(request_code::DELETE_EXPIRED_COMMITLOG, |b, conn, req| b.delete_expired_commit_log(req));
        sync!(request_code::GET_ALL_TOPIC_CONFIG, |b, conn, req| b.get_all_topic_config(req));
        sync!(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, |b, conn, req| {
            let started = std::time::Instant::now();
            let response = b.update_and_create_subscription_group(req);
            if response.code == response_code::SUCCESS {
                b.metrics.group_created(started.elapsed());
            }
            response
        });
        sync!(request_code::DELETE_SUBSCRIPTIONGROUP, |b, conn, req| b.delete_subscription_group(req));
        sync!(request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, |b, conn, req| b.get_all_subscription_group(req));
        sync!(request_code::GET_ALL_CONSUMER_OFFSET, |b, conn, req| b.get_all_consumer_offset(req));
        sync!(request_code::GET_BROKER_CONFIG, |b, conn, req| b.get_broker_config(req));
        sync!(request_code::UPDATE_AND_CREATE_ACL_CONFIG, |b, conn, req| b.update_acl_config(req));
        sync!(request_code::DELETE_ACL_CONFIG, |b, conn, req| b.delete_acl_config(req));
        sync!(request_code::GET_BROKER_CLUSTER_ACL_INFO, |b, conn, req| b.get_broker_acl_info(req));
        sync!(request_code::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, |b, conn, req| b.update_global_white_addrs(req));
        sync!(request_code::GET_BROKER_CLUSTER_ACL_CONFIG, |b, conn, req| b.get_broker_acl_config(req));
        sync!(request_code::AUTH_CREATE_USER, |b, conn, req| b.auth_create_user(req));
        sync!(request_code::AUTH_UPDATE_USER, |b, conn, req| b.auth_update_user(req));
        sync!(request_code::AUTH_DELETE_USER, |b, conn, req| b.auth_delete_user(req));
        sync!(request_code::AUTH_GET_USER, |b, conn, req| b.auth_get_user(req));
        sync!(request_code::AUTH_LIST_USER, |b, conn, req| b.auth_list_users(req));
        sync!(request_code::AUTH_CREATE_ACL, |b, conn, req| b.auth_upsert_acl(req));
        sync!(request_code::AUTH_UPDATE_ACL, |b, conn, req| b.auth_upsert_acl(req));
        sync!(request_code::AUTH_DELETE_ACL, |b, conn, req| b.auth_delete_acl(req));
        sync!(request_code::AUTH_GET_ACL, |b, conn, req| b.auth_get_acl(req));
        sync!(request_code::AUTH_LIST_ACL, |b, conn, req| b.auth_list_acls(req));
        sync!(request_code::GET_BROKER_RUNTIME_INFO, |b, conn, req| b.get_broker_runtime_info(req));
        sync!(request_code::GET_TOPIC_STATS_INFO, |b, conn, req| b.get_topic_stats_info(req));
        sync!(request_code::GET_CONSUMER_CONNECTION_LIST, |b, conn, req| b.get_consumer_connection_list(req));
        sync!(request_code::GET_PRODUCER_CONNECTION_LIST, |b, conn, req| b.get_producer_connection_list(req));
        sync!(request_code::GET_CONSUME_STATS, |b, conn, req| b.get_consume_stats(req));
        sync!(request_code::QUERY_TOPIC_CONSUME_BY_WHO, |b, conn, req| b.query_topic_consume_by_who(req));
        sync!(request_code::CLONE_GROUP_OFFSET, |b, conn, req| b.clone_group_offset(req));
        sync!(request_code::GET_ALL_DELAY_OFFSET, |b, conn, req| b.get_all_delay_offset(req));
        sync!(request_code::GET_TIMER_CHECK_POINT, |b, conn, req| b.get_timer_check_point(req));
        sync!(request_code::UPDATE_BROKER_CONFIG, |b, conn, req| b.update_broker_config(conn, req));
        {
            let b = self.clone();
            d.register(request_code::INVOKE_BROKER_TO_RESET_OFFSET, move |_conn, req| {
                let b = b.clone();
                async move { Some(b.invoke_broker_to_reset_offset(&req).await) }
            });
        }
        {
            let b = self.clone();
            d.register(request_code::GET_CONSUMER_RUNNING_INFO, move |_conn, req| {
                let b = b.clone();
                async move { Some(b.get_consumer_running_info(&req).await) }
            });
        }
        {
            let b = self.clone();
            d.register(request_code::CONSUME_MESSAGE_DIRECTLY, move |_conn, req| {
                let b = b.clone();
                async move { Some(b.consume_message_directly(&req).await) }
            });
        }
        let b = self.clone();
        d.on_close(move |conn| {
            b.producers.on_connection_closed(conn.id());
            b.consumers.on_connection_closed(conn.id());
        });
        d
    }

    /// Answers a released parked pop or notification: processed again (it may park again
    /// when woken by an arrival and time is left), then answered on its connection.
    async fn answer_parked_pop(self: &Arc<Self>, held: crate::pop::hold::HeldPop, why: crate::pop::hold::Release) {
        use crate::pop::hold::{PollKind, Waiter};
        let (conn, request) = match held.waiter {
            // The service's caller processes the pop again itself.
            Waiter::Local(tx) => {
                let _ = tx.send(why);
                return;
            }
            Waiter::Remote { conn, request } => (conn, request),
        };
        if conn.is_closed() {
            return;
        }
        let allow_park = why == crate::pop::hold::Release::Arrived;
        let response = match held.kind {
            PollKind::Pop => self.pop_remoting_once(&conn, &request, allow_park).await,
            PollKind::Notification => self.notification(&conn, &request, allow_park),
        };
        if let Some(r) = response {
            let _ = conn.send_response(r).await;
        }
    }

    /// Whether a FIFO order-info entry (`topic@group`, queue) still has its topic, group and
    /// queue.
    fn order_info_live(&self, key: &str, queue_id: i32) -> bool {
        let Some((topic, group)) = key.split_once('@') else { return false };
        self.topics().select(topic).is_some_and(|t| queue_id < t.read_queue_nums) && self.groups().contains(group)
    }

    /// Answers a released parked pull.
    async fn answer_parked(&self, held: HeldPull) {
        if held.conn.is_closed() {
            return;
        }
        let response = match self.process_pull(&held.conn, &held.request, false) {
            PullOutcome::Respond(r) => r,
            PullOutcome::Park { .. } => return, // cannot happen with suspension disallowed
        };
        let response = match &held.logic {
            Some(mapping) => self.rewrite_pull_answer(mapping, response),
            None => response,
        };
        let _ = held.conn.send_response(response).await;
    }

    /// The broker's current `brokerPermission` (PermName bits).
    pub(crate) fn permission(&self) -> i32 {
        self.permission.load(Ordering::Relaxed)
    }

    /// Changes `brokerPermission` at once and re-registers with the name servers so routes
    /// show it. Java: `AdminBrokerProcessor#updateBrokerConfig` for `brokerPermission`.
    pub(crate) fn set_permission(&self, permission: i32) {
        let old = self.permission.swap(permission, Ordering::Relaxed);
        if old != permission {
            info!(old, new = permission, "broker permission changed");
            self.topics().bump_data_version();
            self.register_soon();
        }
    }

    fn registration(&self, compressed: bool) -> RemotingCommand {
        let mut wrapper = self.topics().all();
        // A broker that is not both readable and writable registers every topic with the
        // broker's permission masked in, so clients route around it. Java: `registerBrokerAll`.
        let permission = self.permission();
        for topic in wrapper.topic_config_table.values_mut() {
            topic.perm = crate::registration::masked_perm(topic.perm, permission);
        }
        let body = RegisterBrokerBody {
            filter_server_list: Vec::new(),
            topic_config_serialize_wrapper: TopicConfigAndMappingSerializeWrapper {
                data_version: wrapper.data_version,
                topic_config_table: wrapper.topic_config_table,
                // Routes carry each static topic's logic queues this broker leads.
                topic_queue_mapping_info_map: self
                    .mappings()
                    .infos()
                    .into_iter()
                    .map(|(topic, info)| (topic, serde_json::to_value(info).expect("a mapping is plain JSON")))
                    .collect(),
                ..Default::default()
            },
        }
        .encode(compressed, version::CURRENT);
        RemotingCommand::request(request_code::REGISTER_BROKER)
            .with_header(&RegisterBrokerRequestHeader {
                broker_name: self.config.broker_name.clone(),
                broker_addr: self.config.broker_addr(),
                cluster_name: self.config.broker_cluster_name.clone(),
                ha_server_addr: self.ha_server_addr.clone(),
                broker_id: self.role().broker_id,
                heartbeat_timeout_millis: None,
                enable_acting_master: Some(false),
                compressed: Some(compressed),
                body_crc32: Some(crc32_masked(&body) as i32),
            })
            .with_body(body)
    }

    /// Registers the whole topic table with every name server; returns whether each of them
    /// took the registration. Java: `BrokerController#registerBrokerAll` (forced).
    pub(crate) async fn register_all(&self) -> bool {
        if self.role().fenced {
            // Controller mode before the controller named a role.
            return true;
        }
        let mut all = true;
        for addr in &self.config.namesrv_addrs() {
            all &= self.register_with(addr).await;
        }
        all
    }

    /// REGISTER_BROKER with the whole table to one name server; returns whether it took it.
    pub(crate) async fn register_with(&self, addr: &str) -> bool {
        let request = self.registration(self.config.compressed_register);
        let answer = self.call_namesrv(addr, request, "broker registration").await;
        let ok = answer.is_some();
        if let Some(h) = answer.and_then(|r| r.decode_header::<RegisterBrokerResponseHeader>().ok()) {
            self.on_registered(addr, h);
        }
        self.set_namesrv_in_sync(addr, ok);
        ok
    }

    /// A slave learns its master's addresses from the registration answer: the broker
    /// address (metadata sync) and, unless `haMasterAddress` is set, the HA address.
    fn on_registered(&self, namesrv: &str, h: RegisterBrokerResponseHeader) {
        if !self.is_slave() {
            return;
        }
        let master = h.master_addr.clone().filter(|m| !m.is_empty());
        if self.config.enable_controller_mode {
            // The controller names the master; a name server that still lists another one (the
            // new master has not registered yet) is asked again soon.
            if master.is_none() || master != self.master_addr() {
                tracing::debug!(namesrv, listed = ?master, "name server does not list the controller's master yet");
                return;
            }
        } else {
            // The answer names the live master, if any: a master that went away is forgotten
            // (reads are then served here, and the registration is retried soon).
            let mut known = self.master_addr.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            if *known != master {
                match &master {
                    Some(m) => info!(namesrv, master_addr = %m, "master known"),
                    None => warn!(namesrv, "no master registered for this broker name"),
                }
                *known = master;
            }
            drop(known);
            let settings = self.settings.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            if !settings.ha.ha_master_address.is_empty() {
                return;
            }
        }
        let Some(ha) = h.ha_server_addr.filter(|a| !a.is_empty()) else { return };
        let update = |current: Option<String>, set: &dyn Fn(&str)| {
            if current.as_deref() != Some(ha.as_str()) {
                info!(namesrv, ha_master_addr = %ha, "replicating from the master");
                set(&ha);
            }
        };
        match self.replication() {
            crate::ha::Replication::Slave(client) => {
                update(client.master_address(), &|a| client.update_master_address(a))
            }
            crate::ha::Replication::AutoSwitchSlave(client) => {
                update(client.master_address(), &|a| client.update_master_address(a))
            }
            _ => {}
        }
    }

    /// Whether a slave still needs a registration answer to replicate: its master or the
    /// master's HA address is not known yet.
    fn waits_for_master(&self) -> bool {
        if !self.is_slave() || self.role().fenced {
            return false;
        }
        match self.replication() {
            crate::ha::Replication::AutoSwitchSlave(client) => client.master_address().is_none(),
            _ => self.master_addr().is_none(),
        }
    }

    /// The master's broker address, for a slave's metadata sync.
    pub(crate) fn master_addr(&self) -> Option<String> {
        self.master_addr.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    async fn unregister_all(&self) {
        for addr in self.config.namesrv_addrs() {
            let request =
                RemotingCommand::request(request_code::UNREGISTER_BROKER).with_header(&UnRegisterBrokerRequestHeader {
                    broker_name: self.config.broker_name.clone(),
                    broker_addr: self.config.broker_addr(),
                    cluster_name: self.config.broker_cluster_name.clone(),
                    broker_id: self.role().broker_id,
                });
            if let Err(e) = self.namesrv.invoke(&addr, request, NAMESRV_TIMEOUT).await {
                warn!(namesrv = %addr, error = %e, "unregister failed");
            }
        }
    }
}

/// Opens the store and metadata and serves `listener` until `shutdown` completes; then stops
/// accepting, answers in-flight requests, unregisters from the name servers, persists metadata
/// and shuts the store down cleanly.
///
/// # Errors
/// [`BrokerError`] when the store or metadata cannot be opened, or the listener fails.
pub async fn run(
    settings: BrokerSettings,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), BrokerError> {
    let (ready, _) = tokio::sync::oneshot::channel();
    run_with_local_access(settings, listener, shutdown, ready).await
}

/// [`run`], handing out a [`LocalAccess`] through `ready` once the broker is ready to serve, so
/// a component in the same process (the proxy in local mode) reaches the same processors as
/// remote clients without a socket. Its connections are drained at shutdown together with the
/// listeners' ones. When the broker fails to start, `ready` is dropped unsent.
///
/// # Errors
/// As [`run`].
pub async fn run_with_local_access(
    mut settings: BrokerSettings,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
    ready: tokio::sync::oneshot::Sender<LocalAccess>,
) -> Result<(), BrokerError> {
    // The registered address uses the port actually bound (tests bind port 0).
    if let Ok(local) = listener.local_addr() {
        settings.broker.listen_port = local.port();
    }
    crate::config::check_max_message_size(settings.store.max_message_size).map_err(BrokerError::Config)?;
    if settings.broker.broker_role == BrokerRole::SyncMaster && settings.ha.in_sync_replicas < 2 {
        warn!(
            in_sync_replicas = settings.ha.in_sync_replicas,
            "brokerRole=SYNC_MASTER with inSyncReplicas < 2: sends are not replicated synchronously (a put is \
             acknowledged before any slave has it); set inSyncReplicas=2 to wait for one slave"
        );
    }
    if settings.broker.filter_server_nums != 0 {
        return Err(BrokerError::Config(format!(
            "filterServerNums={}: FerroMQ runs no filter servers (filters run in the broker); set filterServerNums=0",
            settings.broker.filter_server_nums
        )));
    }
    if settings.broker.revive_queue_num < 1 {
        return Err(BrokerError::Config(format!(
            "reviveQueueNum={}: the revive topic needs at least one queue; set reviveQueueNum=8 (Java's default)",
            settings.broker.revive_queue_num
        )));
    }
    let acl = if settings.broker.acl_enable {
        let (file, dir) = settings.plain_acl_paths();
        let validator = ferromq_auth::plain::PlainAccessValidator::load(file.clone(), dir)
            .map_err(|e| BrokerError::Config(format!("aclEnable=true: {e}")))?;
        info!(file = %file.display(), "ACL 1.0 enabled: every request is checked against the ACL accounts");
        Some(Arc::new(validator))
    } else {
        None
    };
    let auth = crate::auth::setup(&settings)?;
    ferromq_replication::parse_white_list(&settings.ha.ha_slave_white_list).map_err(BrokerError::Config)?;
    let acl_on = acl.is_some() || settings.broker.authentication_enabled;
    let ha_authentication = acl_on && settings.ha.ha_authentication_enabled;
    if acl_on && !ha_authentication && settings.ha.ha_slave_white_list.trim().is_empty() {
        // Anyone who reaches the HA port reads every message: with ACL on and no HA
        // authentication, it is not open to the world by default.
        settings.ha.ha_slave_white_list = "127.0.0.1,::1".to_owned();
        warn!(
            "ACL is on, haAuthenticationEnabled=false and haSlaveWhiteList is empty: the HA port admits replicas \
             from this host only; list the slaves' addresses in haSlaveWhiteList"
        );
    }
    let tls = settings.tls_config()?;
    let server_tls = tls.server_tls("FerroMQ broker (self-signed)")?;
    // Java's BrokerStartup: the broker's client uses TLS with `tls.enable`, by default when its
    // own ports take TLS only; `useTLS=true` in broker.conf turns it on too.
    let client_tls =
        if settings.broker.use_tls || tls.server_process_clients_use_tls() { Some(tls.client_tls()?) } else { None };
    let ha_security = crate::ha::HaSecurity {
        server_tls: server_tls.clone(),
        authenticator: ha_authentication.then(|| {
            Arc::new(crate::ha::ReplicaAccounts {
                v2: settings.broker.authentication_enabled.then(|| auth.metadata.clone()),
                plain: acl.clone(),
            }) as Arc<dyn ferromq_replication::ReplicaAuthenticator>
        }),
        client: ferromq_replication::HaClientOptions {
            tls: client_tls.clone(),
            credentials: if settings.ha.ha_authentication_enabled { auth.inner_credentials.clone() } else { None },
            ..Default::default()
        },
    };
    if ha_authentication {
        info!("HA port: replicas must authenticate (SUPER user or ACL 1.0 admin account)");
    }
    let config = settings.broker.clone();
    let store_host: SocketAddr = config.broker_addr().parse().unwrap_or_else(|_| {
        warn!(broker_ip1 = %config.broker_ip1, "brokerIP1 is not an IP address; STOREHOST falls back to 127.0.0.1");
        SocketAddr::from(([127, 0, 0, 1], config.listen_port))
    });
    let store_config = settings.store.clone();
    let store = tokio::task::spawn_blocking(move || MessageStore::open(store_config, store_host))
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
    let store = Arc::new(store);
    let metadata = MetadataStore::load(
        &crate::metadata::config_dir(&settings.store.store_path_root_dir),
        MetadataOptions {
            broker_name: config.broker_name.clone(),
            cluster_name: config.broker_cluster_name.clone(),
            topics: TopicConfigOptions {
                default_topic_queue_nums: config.default_topic_queue_nums,
                auto_create_topic_enable: config.auto_create_topic_enable,
                cluster_topic_enable: config.cluster_topic_enable,
                broker_topic_enable: config.broker_topic_enable,
                timer_wheel_enable: settings.store.timer_wheel_enable,
                trace_topic_enable: config.trace_topic_enable,
                msg_trace_topic_name: config.msg_trace_topic_name.clone(),
                revive_queue_num: config.revive_queue_num,
                lmq: settings.store.enable_lmq,
            },
            groups: crate::metadata::SubscriptionGroupOptions {
                lmq: settings.store.enable_lmq,
                ..crate::metadata::SubscriptionGroupOptions::default()
            },
            lmq: settings.store.enable_lmq,
        },
    )?;
    let config_dir = crate::metadata::config_dir(&settings.store.store_path_root_dir);
    let (pop_hold, mut pop_woken) = crate::pop::hold::PopHold::new(crate::pop::hold::HoldLimits {
        max_total: config.max_pop_polling_size,
        per_key: config.pop_polling_size,
        max_keys: config.pop_polling_map_size,
        force_notify_interval: config.pop_long_polling_force_notify_interval,
    });
    let (ack_tx, ack_rx) = tokio::sync::mpsc::channel(crate::pop::ack_merge::ACK_QUEUE_CAPACITY);
    let pop = crate::pop::PopState::new(
        pop_hold,
        crate::pop::order_info::ConsumerOrderInfoManager::load(config_dir.join("consumerOrderInfo.json"))?,
        ack_tx,
        config.enable_pop_buffer_merge.then(|| {
            crate::pop::ck_buffer::CkBuffer::new(config.pop_ck_max_buffer_size, config.pop_ck_stay_buffer_time)
        }),
    );
    let timer_config = crate::timer::timer_config(&settings.store);
    let controller_mode = config.enable_controller_mode;
    // In controller mode the wheel runs while the broker is master (controller_mode.rs).
    let timer = if timer_config.timer_wheel_enable && config.broker_role != BrokerRole::Slave && !controller_mode {
        let (cfg, root, s) = (timer_config.clone(), settings.store.store_path_root_dir.clone(), store.clone());
        let opened = tokio::task::spawn_blocking(move || ferromq_timer::TimerMessageStore::open(cfg, &root, s))
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        Some(opened)
    } else {
        None
    };
    // Replication: a master listens for slaves on the HA port (same interface as the broker
    // port); a slave follows the master given by haMasterAddress or the name servers.
    let bind_ip = listener.local_addr().map(|a| a.ip()).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
    let (replication, ha_server_addr, role, epochs) = if controller_mode {
        if config.controller_addr.trim().is_empty() {
            return Err(BrokerError::Config(
                "enableControllerMode=true needs controllerAddr (the controllers' host:port, ';'-separated)".into(),
            ));
        }
        let path = settings.epoch_file_path();
        let epochs = ferromq_replication::epoch_file::EpochFile::load(&path)
            .map_err(|e| BrokerError::Config(format!("{}: {e}", path.display())))?;
        // Fenced until the controller names a role: no writes, no registration, no HA.
        let role = crate::ha::RuntimeRole { broker_role: BrokerRole::Slave, broker_id: -1, fenced: true };
        let ha_server_addr = format!("{}:{}", config.broker_ip2, settings.ha_listen_port());
        (crate::ha::Replication::None, ha_server_addr, role, Some(Arc::new(std::sync::Mutex::new(epochs))))
    } else {
        let role =
            crate::ha::RuntimeRole { broker_role: config.broker_role, broker_id: config.broker_id, fenced: false };
        if config.broker_role == BrokerRole::Slave {
            let client = ferromq_replication::HaClient::start_with(
                store.clone(),
                settings.ha.clone(),
                ha_security.client.clone(),
            );
            if !settings.ha.ha_master_address.is_empty() {
                client.update_master_address(&settings.ha.ha_master_address);
            }
            (crate::ha::Replication::Slave(Arc::new(client)), String::new(), role, None)
        } else {
            let ha_port = settings.ha_listen_port();
            let ha_listener = TcpListener::bind((bind_ip, ha_port))
                .await
                .map_err(|source| BrokerError::HaListen { port: ha_port, source })?;
            let port =
                ha_listener.local_addr().map_err(|source| BrokerError::HaListen { port: ha_port, source })?.port();
            let service = ferromq_replication::HaService::start(
                store.clone(),
                settings.ha.clone(),
                ha_security.listener(ha_listener),
            )
            .map_err(|source| BrokerError::HaListen { port, source })?;
            let addr = format!("{}:{port}", config.broker_ip2);
            (crate::ha::Replication::Master(Arc::new(service)), addr, role, None)
        }
    };
    let (pull_hold, mut woken) = PullHold::new(config.pull_thread_pool_queue_capacity);
    let broker = Arc::new(Broker {
        settings: RwLock::new(settings.clone()),
        config: config.clone(),
        store: store.clone(),
        metadata,
        producers: ProducerManager::new(),
        consumers: ConsumerManager::new(),
        locks: RebalanceLockManager::new(),
        pull_hold,
        store_host,
        send_permits: Semaphore::new(config.send_thread_pool_queue_capacity),
        topic_updates: std::sync::Mutex::new(()),
        uniq_ids: UniqIdGenerator::new(store_host.ip()),
        stats: BrokerStats::default(),
        permission: AtomicI32::new(config.broker_permission),
        acl: acl.clone(),
        auth: auth.metadata.clone(),
        inner_credentials: auth.inner_credentials.clone(),
        namesrv: RemotingClient::new(
            ClientConfig::default()
                .with_zone_from_env()
                .with_tls(client_tls.clone())
                .with_credentials(auth.inner_credentials.clone()),
        ),
        client_tls: client_tls.clone(),
        ha_security: ha_security.clone(),
        metrics: crate::metrics::BrokerMetrics::new(settings.metrics.metrics_otel_cardinality_limit),
        register_now: tokio::sync::Notify::new(),
        registration_queue: std::sync::Mutex::new({
            // The first round registers the whole table.
            let mut queue = crate::registration_queue::RegistrationQueue::default();
            queue.request_full();
            queue
        }),
        namesrv_in_sync: Default::default(),
        static_topic_peers: Default::default(),
        register_requested: AtomicU64::new(0),
        registered: tokio::sync::watch::channel(0).0,
        tx_ops: Default::default(),
        sql92_warned: Default::default(),
        pop,
        half_messages: crate::transaction::HalfMessages::default(),
        pull_offsets: crate::client::PullOffsets::default(),
        timer: RwLock::new(timer.clone()),
        timer_files: tokio::sync::Mutex::new(()),
        replication: RwLock::new(replication),
        role: RwLock::new(role),
        replicas_manager: std::sync::OnceLock::new(),
        epochs,
        ha_server_addr,
        master_addr: RwLock::new(None),
        timer_config,
        consumer_filters: crate::filter::ConsumerFilterManager::new(
            config.max_error_rate_of_bloom_filter,
            config.expect_consumer_num_use_filter,
        ),
    });
    if settings.store.enable_compaction {
        // Dispatch copies these topics' records into their compacted stores, and reads serve
        // them from there; what was dispatched before now is copied here.
        let b = Arc::downgrade(&broker);
        let store2 = store.clone();
        let topics: ferromq_store::CompactionTopics =
            Arc::new(move |topic| b.upgrade().is_some_and(|b| b.topics().is_compaction(topic)));
        tokio::task::spawn_blocking(move || store2.set_compaction_topics(topics))
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    }
    if config.enable_calc_filter_bit_map {
        if settings.store.enable_consume_queue_ext {
            let b = Arc::downgrade(&broker);
            store.set_bit_map_calculator(Arc::new(move |req| {
                let b = b.upgrade()?;
                b.consumer_filters.calc_bit_map(&req.topic, req.properties.as_deref()?)
            }));
        } else {
            warn!("enableCalcFilterBitMap needs enableConsumeQueueExt; no bitmaps are stored");
        }
    }
    {
        let b = Arc::downgrade(&broker);
        store.on_message_arrival(Arc::new(move |req| {
            if let Some(b) = b.upgrade() {
                b.pull_hold.notify_arrival(&req.topic, req.queue_id, req.consume_queue_offset, req.tags_code);
                b.pop.hold.notify_arrival(&req.topic, req.queue_id, req.consume_queue_offset, req.tags_code);
            }
        }));
    }
    let mut server_config = ServerConfig {
        idle_timeout: Duration::from_secs(config.server_channel_max_idle_time_seconds),
        max_connections: config.server_max_connections.max(1),
        max_connections_per_ip: config.server_max_connections_per_address.max(1),
        tls: server_tls,
        proxy_protocol_trusted: ferromq_config::IpBlock::parse_list(
            "proxyProtocolTrustedAddresses",
            &config.proxy_protocol_trusted_addresses,
        )
        .map_err(BrokerError::Config)?
        .into(),
        ..ServerConfig::default()
    };
    let exporter =
        crate::metrics::exporter(&settings, &broker, &mut server_config).await.map_err(BrokerError::Config)?;
    // One dispatcher for the listeners and the in-process connections: the same processors
    // answer every client, however it is connected.
    let dispatcher = Arc::new(broker.dispatcher());
    // The listeners' requests pass the ACL first; in-process ones (the proxy in local mode,
    // which authenticates its own clients) do not.
    let gated: Arc<dyn ferromq_remoting::RequestHandler> = if acl.is_some() || auth.service.is_some() {
        Arc::new(crate::auth::AuthGate::new(dispatcher.clone(), auth.service.clone(), acl.clone()))
    } else {
        dispatcher.clone()
    };
    let server = RemotingServer::new(server_config.clone(), gated.clone());
    // Java's "fast" (VIP) port, listenPort - 2, where 4.x clients with `vipChannelEnabled`
    // send. Best effort: a broker whose neighbouring port is taken serves the main port only.
    let fast_listener = match listener.local_addr() {
        Ok(local) if local.port() > 2 => {
            let fast_addr = SocketAddr::new(local.ip(), local.port() - 2);
            match TcpListener::bind(fast_addr).await {
                Ok(l) => Some(l),
                Err(e) => {
                    warn!(fast_addr = %fast_addr, error = %e, "VIP channel port not available; serving the main port only");
                    None
                }
            }
        }
        _ => None,
    };
    let fast_server = RemotingServer::new(server_config.clone(), gated);
    let tls_text = server_config.tls.to_string();
    let local_access = LocalAccess::new(LocalAccessParts {
        dispatcher,
        server_config,
        client_tls: client_tls.clone(),
        broker_addr: config.broker_addr(),
        server_addr: store_host,
        broker_name: config.broker_name.clone(),
        cluster_name: config.broker_cluster_name.clone(),
        service: crate::service::Service::new(broker.clone()),
        auth: auth.service.clone(),
    });
    info!(addr = ?listener.local_addr().ok(), broker_name = %config.broker_name, cluster = %config.broker_cluster_name,
        namesrv = %config.namesrv_addr, tls = %tls_text, client_tls = client_tls.is_some(), "broker listening");

    let mut tasks = JoinSet::new();
    if let Some((listener, metrics)) = exporter {
        tasks.spawn(ferromq_metrics::exporter::serve(listener, Arc::new(metrics), std::future::pending()));
    }
    if let Some(validator) = &acl {
        tasks.spawn(crate::acl::watch_files(validator.clone()));
    }
    // Parked pulls: answer the released ones; expire the rest.
    {
        let b = broker.clone();
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(PULL_EXPIRY_TICK);
            loop {
                tokio::select! {
                    released = woken.recv() => match released {
                        Some((held, _why)) => b.answer_parked(held).await,
                        None => return,
                    },
                    _ = tick.tick() => b.pull_hold.expire(Instant::now()),
                }
            }
        });
    }
    // Parked pops and notifications: re-run the released ones (each on its own task: a pop
    // waits for its checkpoint's put); expire the rest every 20 ms, as Java does.
    {
        let b = broker.clone();
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(POP_EXPIRY_TICK);
            let mut running = JoinSet::new();
            loop {
                tokio::select! {
                    released = pop_woken.recv() => match released {
                        Some((held, why)) => {
                            let b = b.clone();
                            running.spawn(async move { b.answer_parked_pop(held, why).await });
                        }
                        None => return,
                    },
                    _ = tick.tick() => b.pop.hold.expire(Instant::now()),
                    Some(_) = running.join_next(), if !running.is_empty() => {}
                }
            }
        });
    }
    tasks.spawn(crate::pop::ack_merge::run(Arc::downgrade(&broker), ack_rx));
    if broker.pop.buffer.is_some() {
        let b = broker.clone();
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(CK_BUFFER_TICK);
            loop {
                tick.tick().await;
                b.flush_ck_buffer(false).await;
            }
        });
    }
    // Registration with the name servers: at start, every registerNameServerPeriod, and soon
    // after a topic is created.
    {
        let b = broker.clone();
        let period = Duration::from_millis(config.register_name_server_period.clamp(10_000, 60_000));
        tasks.spawn(async move {
            let mut backoff = REGISTER_RETRY_MIN;
            let mut periodic = false;
            loop {
                // Everything asked for up to now is in this round: the queue and the topic
                // tables are read after this load.
                let round = b.register_requested.load(Ordering::Acquire);
                let work = b.registration_queue().take();
                let registered = b.register_round(work, periodic).await;
                if !registered {
                    // A name server that missed a change gets the whole table next time.
                    b.registration_queue().request_full();
                }
                b.registered.send_if_modified(|done| {
                    let advanced = round > *done;
                    *done = (*done).max(round);
                    advanced
                });
                // A slave that does not know its master yet (it registered first) asks again
                // soon rather than a whole period later: replication waits on the answer. A
                // name server that refused or missed the registration (not started yet, or not
                // yet reading the user the broker signs as) is asked again soon too, backing
                // off to the period; Java waits a whole period, leaving new topics unrouted.
                let wait = if b.waits_for_master() {
                    SLAVE_MASTER_RETRY
                } else if registered {
                    backoff = REGISTER_RETRY_MIN;
                    period
                } else {
                    let wait = backoff;
                    backoff = (backoff * 2).min(period);
                    wait
                };
                periodic = tokio::select! {
                    _ = tokio::time::sleep(wait) => true,
                    _ = b.register_now.notified() => false,
                };
            }
        });
    }
    // Silent clients and metadata persistence.
    {
        let b = broker.clone();
        let persist_every = Duration::from_millis(config.flush_consumer_offset_interval.max(100));
        tasks.spawn(async move {
            let mut scan = tokio::time::interval(CLIENT_SCAN_INTERVAL);
            let mut persist = tokio::time::interval(persist_every);
            let mut sample = tokio::time::interval(Duration::from_millis(stats::SAMPLE_INTERVAL_MS));
            loop {
                tokio::select! {
                    _ = sample.tick() => {
                        let now = stats::clock_ms();
                        b.stats.sample(now);
                        if let Some(timer) = b.timer() {
                            let counts = timer.stats();
                            b.stats.timer_tps.sample(counts.enqueued, counts.delivered, now);
                        }
                    }
                    _ = scan.tick() => {
                        let now = now_ms();
                        b.producers.scan_not_active(now);
                        b.consumers.scan_not_active(now);
                        b.consumer_filters.retain_groups(|g| b.consumers.group(g).is_some());
                    }
                    _ = persist.tick() => {
                        // File writes and fsyncs stay off the async workers.
                        let b2 = b.clone();
                        let result = tokio::task::spawn_blocking(move || {
                            b2.pop.order.auto_clean(now_ms(), |key, qid| b2.order_info_live(key, qid));
                            b2.metadata.persist_all()?;
                            b2.pop.order.persist_if_dirty().map(|_| ())
                        })
                        .await;
                        if let Ok(Err(e)) = result {
                            warn!(error = %e, "metadata persistence failed");
                        }
                    }
                }
            }
        });
    }

    if broker.is_slave() {
        // In controller mode a master stops syncing when it steps up, and a slave starts.
        let b = broker.clone();
        let interval = Duration::from_millis(config.slave_sync_interval);
        let master = move || if b.is_slave() { b.master_addr() } else { None };
        tasks.spawn(crate::slave_sync::run_slave_sync(broker.clone(), master, interval));
    }
    if controller_mode {
        tasks.spawn(crate::controller_mode::run(broker.clone(), settings.clone(), bind_ip));
    } else if !broker.is_slave() {
        crate::schedule::start(&broker, &mut tasks);
        crate::pop::revive::start(&broker, &mut tasks);
        let b = broker.clone();
        tasks.spawn(async move { b.run_op_writer().await });
        tasks.spawn(crate::transaction::check::run(broker.clone()));
    }

    let (stop_timer, timer_stopped) = tokio::sync::oneshot::channel::<()>();
    let timer_task = timer.map(|t| {
        tokio::spawn(t.run(async {
            let _ = timer_stopped.await;
        }))
    });

    let (stop_fast, fast_stopped) = tokio::sync::oneshot::channel::<()>();
    // The in-process connections start draining when the listeners' do (or when the main
    // listener fails, which drops the sender), so their grace periods overlap.
    let (stop_local, local_stopped) = tokio::sync::oneshot::channel::<()>();
    let main = async {
        let shutdown = async move {
            shutdown.await;
            let _ = stop_local.send(());
        };
        let served = server.serve(listener, shutdown).await;
        let _ = stop_fast.send(());
        served
    };
    let local = async {
        let _ = local_stopped.await;
        local_access.shutdown().await;
    };
    let fast = async {
        if let Some(l) = fast_listener {
            info!(addr = ?l.local_addr().ok(), "VIP channel listening");
            let stopped = async {
                let _ = fast_stopped.await;
            };
            if let Err(e) = fast_server.serve(l, stopped).await {
                warn!(error = %e, "VIP channel listener failed");
            }
        }
    };
    // Nobody waiting for the handle (plain `run`) is fine: the connections it would open are
    // simply never made.
    let _ = ready.send(local_access.clone());
    let (served, (), ()) = tokio::join!(main, fast, local);
    tasks.shutdown().await;
    // The wheel stops (final flush and checkpoint) before the store does.
    let _ = stop_timer.send(());
    if let Some(task) = timer_task {
        let _ = task.await;
    }
    broker.flush_transaction_ops().await;
    // Controller mode: the wheel the role driver ran (it was aborted with the tasks).
    if let Some(t) = broker.replace_timer(None) {
        let _ = tokio::task::spawn_blocking(move || t.shutdown()).await;
    }
    crate::ha::shut_down(broker.replace_replication(crate::ha::Replication::None)).await;
    if let Some(manager) = broker.replicas_manager.get() {
        manager.shutdown().await;
    }
    broker.unregister_all().await;
    broker.namesrv.shutdown().await;
    // Buffered checkpoints are written, so the offsets of their pops can be committed.
    broker.flush_ck_buffer(true).await;
    if let Err(e) = broker.metadata.persist_all() {
        warn!(error = %e, "metadata not persisted at shutdown");
    }
    if let Err(e) = broker.pop.order.persist_if_dirty() {
        warn!(error = %e, "pop state not persisted at shutdown");
    }
    let store_for_shutdown = store.clone();
    let _ = tokio::task::spawn_blocking(move || store_for_shutdown.shutdown()).await;
    info!("broker stopped");
    served.map_err(BrokerError::from)
}
