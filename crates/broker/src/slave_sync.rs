//! A slave's copy of its master's metadata: every sync interval (10 s by default, the first time
//! 3 s after start) the slave asks its master for the topic configs with the static topics'
//! queue mappings (GET_ALL_TOPIC_CONFIG), consumer offsets (GET_ALL_CONSUMER_OFFSET, which carry
//! POP's revive progress), delay offsets (GET_ALL_DELAY_OFFSET), subscription groups
//! (GET_ALL_SUBSCRIPTIONGROUP_CONFIG) and message request modes (GET_ALL_MESSAGE_REQUEST_MODE),
//! in Java's order, and applies each to its own table and persists it; then ACL 2.0's users
//! and ACLs; and, with the timer wheel enabled, the wheel's progress (GET_TIMER_CHECK_POINT),
//! adopted once this CommitLog holds what the master had written when it answered
//! (`crate::timer`). Java: `SlaveSynchronize#syncAll`, scheduled by 4.x's
//! `BrokerController#handleSlaveSynchronize` (3 s, then every 10 s; Java 5 checks every 3 s
//! and syncs at most once a minute).
//!
//! How each table is applied is the table's business (`replace_all` / `merge_all` in
//! `metadata/`): topics and groups are replaced when the master's data version differs, offsets
//! are merged, delay offsets replaced. Every table is fetched and applied on its own: a failed
//! request or a body that does not parse leaves that table as it is until the next round.
//! Failures are logged once when a table starts failing and once when it recovers.
//!
//! Not here: learning the master's address (the registration loop in `broker.rs`, from
//! REGISTER_BROKER answers), CommitLog replication (`ferromq-replication`), timer metrics,
//! FIFO pop order info (Java has no request for it either), and the paged
//! GET_ALL_TOPIC_CONFIG / GET_ALL_SUBSCRIPTIONGROUP_CONFIG of Java after 5.3.3 (a master that
//! pages answers a request without paging fields with everything).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferromq_auth::v2::{AuthMetadata, Snapshot};
use ferromq_config::error_chain;
use ferromq_protocol::body::{AclInfo, KVTable, UserInfo};
use ferromq_protocol::body::{
    BodyError, ConsumerOffsetSerializeWrapper, JsonBody, MessageRequestModeSerializeWrapper, SubscriptionGroupWrapper,
    TopicConfigAndMappingSerializeWrapper, TopicConfigSerializeWrapper, TopicQueueMappingSerializeWrapper,
};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient, RemotingError};
use ferromq_timer::{TimerCheckpoint, TimerError};
use tokio::time::MissedTickBehavior;
use tracing::{debug, info, warn};

use crate::broker::Broker;
use crate::metadata::{DelayOffsetSerializeWrapper, MetadataError, MetadataStore, ReplaceSummary};

/// Time from start to the first sync, or the interval if shorter (Java 4.x: 3 s).
const FIRST_SYNC_DELAY: Duration = Duration::from_secs(3);
/// Shortest interval accepted, so a misconfigured one cannot turn the task into a busy loop.
const MIN_SYNC_INTERVAL: Duration = Duration::from_millis(100);
/// Time allowed for one request to the master, connecting included (Java: 3 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// Copies the master's metadata into `broker`'s tables until the task is dropped (the broker
/// aborts it at shutdown; a sync cut short leaves each table either old or new, and the
/// shutdown persist writes whichever it is). `master_addr` is asked before every round; while
/// it returns `None` (not learned yet, or the master went away), or the broker's own address,
/// nothing is synced. `interval` is the time between rounds (`slaveSyncInterval`, 10 s by
/// default as in Java 4.x).
pub(crate) async fn run_slave_sync(
    broker: Arc<Broker>,
    master_addr: impl Fn() -> Option<String> + Send + 'static,
    interval: Duration,
) {
    let own_addr = broker.config.broker_addr();
    run_loop(broker, own_addr, master_addr, interval).await;
}

/// Access to the tables a sync writes. The broker in production; a bare [`MetadataStore`] in
/// tests.
trait MetadataOwner: Send + Sync + 'static {
    fn metadata(&self) -> &MetadataStore;

    /// ACL 2.0's users and ACLs, copied too when present.
    fn auth(&self) -> Option<&Arc<AuthMetadata>> {
        None
    }

    /// How the connection to the master is made.
    fn client_config(&self) -> ClientConfig {
        ClientConfig::default().with_zone_from_env()
    }

    /// Whether the master's timer progress is copied (the wheel is enabled).
    fn follows_timer(&self) -> bool {
        false
    }

    /// Where this CommitLog ends.
    fn commit_log_end(&self) -> i64 {
        0
    }

    /// Adopts the master's timer progress (blocking); whether anything changed.
    fn adopt_timer_progress(&self, _master: &TimerCheckpoint) -> Result<bool, TimerError> {
        Ok(false)
    }
}

impl MetadataOwner for Broker {
    fn metadata(&self) -> &MetadataStore {
        &self.metadata
    }

    fn auth(&self) -> Option<&Arc<AuthMetadata>> {
        Some(&self.auth)
    }

    /// TLS as the broker's own clients use it, and signed with
    /// `innerClientAuthenticationCredentials` (a master with ACL on checks them).
    fn client_config(&self) -> ClientConfig {
        ClientConfig::default()
            .with_zone_from_env()
            .with_tls(self.client_tls.clone())
            .with_credentials(self.inner_credentials.clone())
    }

    fn follows_timer(&self) -> bool {
        self.timer_config.timer_wheel_enable
    }

    fn commit_log_end(&self) -> i64 {
        self.store.max_phy_offset()
    }

    fn adopt_timer_progress(&self, master: &TimerCheckpoint) -> Result<bool, TimerError> {
        Broker::adopt_timer_progress(self, master)
    }
}

impl MetadataOwner for MetadataStore {
    fn metadata(&self) -> &MetadataStore {
        self
    }
}

/// [`run_slave_sync`] for any table owner.
async fn run_loop<T: MetadataOwner>(
    owner: Arc<T>,
    own_addr: String,
    master_addr: impl Fn() -> Option<String> + Send + 'static,
    interval: Duration,
) {
    let interval = interval.max(MIN_SYNC_INTERVAL);
    info!(interval_ms = interval.as_millis() as u64, "slave metadata sync started");
    let mut sync = SlaveSync::new(owner);
    tokio::time::sleep(FIRST_SYNC_DELAY.min(interval)).await;
    let mut tick = tokio::time::interval(interval);
    // A round can outlast the interval (four requests, each up to REQUEST_TIMEOUT): start the
    // next one a full interval after, rather than catching up in a burst.
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut followed: Option<String> = None;
    loop {
        tick.tick().await;
        let Some(master) = master_addr().filter(|m| !m.is_empty() && *m != own_addr) else {
            debug!("master address unknown; slave metadata sync skipped");
            continue;
        };
        if followed.as_deref() != Some(master.as_str()) {
            if let Some(old) = followed.replace(master.clone()) {
                sync.client.close_connection(&old).await;
            }
            info!(master_addr = %master, "slave metadata sync follows a new master");
        }
        sync.sync_all(&master).await;
    }
}

/// One of the four tables a slave copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    Topics = 0,
    ConsumerOffsets = 1,
    DelayOffsets = 2,
    Groups = 3,
    RequestModes = 4,
    /// ACL 2.0's users and ACLs (AUTH_LIST_USER, then AUTH_LIST_ACL), replaced as a whole.
    Auth = 5,
    /// The timer wheel's checkpoint (GET_TIMER_CHECK_POINT, then GET_BROKER_RUNTIME_INFO for
    /// the master's CommitLog end).
    TimerProgress = 6,
}

impl Table {
    /// Java's order of `syncAll`.
    const ALL: [Table; 7] = [
        Table::Topics,
        Table::ConsumerOffsets,
        Table::DelayOffsets,
        Table::Groups,
        Table::RequestModes,
        Table::Auth,
        Table::TimerProgress,
    ];

    fn request_code(self) -> i32 {
        match self {
            Table::Topics => request_code::GET_ALL_TOPIC_CONFIG,
            Table::ConsumerOffsets => request_code::GET_ALL_CONSUMER_OFFSET,
            Table::DelayOffsets => request_code::GET_ALL_DELAY_OFFSET,
            Table::Groups => request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
            Table::RequestModes => request_code::GET_ALL_MESSAGE_REQUEST_MODE,
            Table::Auth => request_code::AUTH_LIST_USER,
            Table::TimerProgress => request_code::GET_TIMER_CHECK_POINT,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Table::Topics => "topics",
            Table::ConsumerOffsets => "consumer_offsets",
            Table::DelayOffsets => "delay_offsets",
            Table::Groups => "subscription_groups",
            Table::RequestModes => "message_request_modes",
            Table::Auth => "users_and_acls",
            Table::TimerProgress => "timer_progress",
        }
    }
}

/// Why one table was not synced this round.
#[derive(Debug, thiserror::Error)]
enum SyncError {
    #[error("request to the master failed")]
    Remoting(#[source] RemotingError),
    #[error("master answered code {code}: {remark}")]
    Refused { code: i32, remark: String },
    #[error("master's body does not parse")]
    Body(#[source] BodyError),
    #[error("synced table not persisted")]
    Persist(#[source] MetadataError),
    #[error("sync task did not finish")]
    Join(#[source] tokio::task::JoinError),
    #[error("users and ACLs not applied: {0}")]
    Auth(String),
    #[error("timer progress not adopted: {0}")]
    Timer(String),
}

/// What applying one table changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Applied {
    /// Nothing (same data version, or same content).
    Unchanged,
    /// The table was replaced.
    Replaced(ReplaceSummary),
    /// This many keys (consumer offsets) or the whole table (delay offsets) changed.
    Merged { keys: usize },
}

/// The sync state of one slave: its connection to the master and which tables are failing.
struct SlaveSync<T> {
    owner: Arc<T>,
    client: RemotingClient,
    /// Per [`Table`]: the last attempt failed (so the next failure is not logged at warn).
    failing: [bool; 7],
    /// The master's timer checkpoint and its CommitLog end when it answered, waiting for this
    /// CommitLog to reach that end.
    timer_pending: std::sync::Mutex<Option<(TimerCheckpoint, i64)>>,
}

impl<T: MetadataOwner> SlaveSync<T> {
    fn new(owner: Arc<T>) -> Self {
        let client = RemotingClient::new(owner.client_config());
        Self { owner, client, failing: [false; 7], timer_pending: std::sync::Mutex::new(None) }
    }

    /// One round: every table in Java's order, each on its own.
    async fn sync_all(&mut self, master: &str) {
        for table in Table::ALL {
            if table == Table::Auth && self.owner.auth().is_none() {
                continue;
            }
            if table == Table::TimerProgress && !self.owner.follows_timer() {
                continue;
            }
            let result = self.sync_table(table, master).await;
            self.report(table, master, result);
        }
    }

    async fn sync_table(&self, table: Table, master: &str) -> Result<Applied, SyncError> {
        let body = self.fetch(table, master).await?;
        match table {
            Table::Topics => {
                let full = TopicConfigAndMappingSerializeWrapper::decode(&body).map_err(SyncError::Body)?;
                let wrapper = TopicConfigSerializeWrapper {
                    data_version: full.data_version,
                    topic_config_table: full.topic_config_table,
                };
                // The static topics' mappings come with the topics (Java's SlaveSynchronize).
                let mappings = TopicQueueMappingSerializeWrapper {
                    data_version: full.mapping_data_version,
                    topic_queue_mapping_info_map: full
                        .topic_queue_mapping_detail_map
                        .into_iter()
                        .filter_map(|(topic, detail)| Some((topic, serde_json::from_value(detail).ok()?)))
                        .collect(),
                };
                let replaced = self
                    .apply(move |m| {
                        if m.mappings().replace_all(mappings) {
                            m.mappings().persist_if_dirty()?;
                        }
                        m.topics().replace_all(wrapper)
                    })
                    .await?;
                Ok(replaced.map_or(Applied::Unchanged, Applied::Replaced))
            }
            Table::ConsumerOffsets => {
                let wrapper = ConsumerOffsetSerializeWrapper::decode(&body).map_err(SyncError::Body)?;
                let keys = self
                    .apply(move |m| {
                        let keys = m.offsets().merge_all(wrapper);
                        m.offsets().persist_if_dirty().map(|_| keys)
                    })
                    .await?;
                Ok(if keys == 0 { Applied::Unchanged } else { Applied::Merged { keys } })
            }
            Table::DelayOffsets => {
                // Java writes a non-empty body to delayOffset.json as it is; an empty one
                // changes nothing.
                if body.iter().all(u8::is_ascii_whitespace) {
                    return Ok(Applied::Unchanged);
                }
                let wrapper = DelayOffsetSerializeWrapper::decode(&body).map_err(SyncError::Body)?;
                let levels = wrapper.offset_table.len();
                let changed = self
                    .apply(move |m| {
                        let changed = m.delay_offsets().replace_all(wrapper);
                        m.delay_offsets().persist_if_dirty().map(|_| changed)
                    })
                    .await?;
                Ok(if changed { Applied::Merged { keys: levels } } else { Applied::Unchanged })
            }
            Table::Groups => {
                let wrapper = SubscriptionGroupWrapper::decode(&body).map_err(SyncError::Body)?;
                let replaced = self.apply(move |m| m.groups().replace_all(wrapper)).await?;
                Ok(replaced.map_or(Applied::Unchanged, Applied::Replaced))
            }
            Table::Auth => {
                // Java answers an empty list with no body.
                let users: Vec<UserInfo> =
                    if body.is_empty() { Vec::new() } else { JsonBody::decode(&body).map_err(SyncError::Body)? };
                let acl_body = self.fetch_code(request_code::AUTH_LIST_ACL, master).await?;
                let acls: Vec<AclInfo> = if acl_body.is_empty() {
                    Vec::new()
                } else {
                    JsonBody::decode(&acl_body).map_err(SyncError::Body)?
                };
                let snapshot = Snapshot::from_infos(users, acls).map_err(|e| SyncError::Auth(e.to_string()))?;
                let Some(auth) = self.owner.auth().cloned() else {
                    return Ok(Applied::Unchanged);
                };
                let count = snapshot.users.len();
                let changed = tokio::task::spawn_blocking(move || auth.replace_all(snapshot))
                    .await
                    .map_err(SyncError::Join)?
                    .map_err(|e| SyncError::Auth(e.to_string()))?;
                Ok(if changed { Applied::Merged { keys: count } } else { Applied::Unchanged })
            }
            Table::TimerProgress => {
                let master_progress = TimerCheckpoint::decode(&body)
                    .ok_or_else(|| SyncError::Timer(format!("a checkpoint of {} bytes", body.len())))?;
                // What it counts as delivered lies below the master's CommitLog end now.
                let info = self.fetch_code(request_code::GET_BROKER_RUNTIME_INFO, master).await?;
                let end = KVTable::decode(&info)
                    .map_err(SyncError::Body)?
                    .table
                    .get("commitLogMaxOffset")
                    .and_then(|v| v.parse::<i64>().ok())
                    .ok_or_else(|| SyncError::Timer("no commitLogMaxOffset in the runtime info".into()))?;
                let local = self.owner.commit_log_end();
                let ready = {
                    let mut pending = self.timer_pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    if local >= end {
                        pending.take();
                        Some(master_progress)
                    } else {
                        pending.replace((master_progress, end)).filter(|(_, e)| local >= *e).map(|(cp, _)| cp)
                    }
                };
                let Some(progress) = ready else { return Ok(Applied::Unchanged) };
                let owner = self.owner.clone();
                let changed = tokio::task::spawn_blocking(move || owner.adopt_timer_progress(&progress))
                    .await
                    .map_err(SyncError::Join)?
                    .map_err(|e| SyncError::Timer(error_chain(&e)))?;
                if changed {
                    debug!(
                        read_time_ms = progress.last_read_time_ms,
                        queue_offset = progress.last_timer_queue_offset,
                        "timer progress adopted from the master"
                    );
                }
                // Changes every round the master's wheel moves: not worth an info line each time.
                Ok(Applied::Unchanged)
            }
            Table::RequestModes => {
                let wrapper = MessageRequestModeSerializeWrapper::decode(&body).map_err(SyncError::Body)?;
                let keys = wrapper.message_request_mode_map.values().map(BTreeMap::len).sum();
                let changed = self
                    .apply(move |m| {
                        let changed = m.request_modes().replace_all(wrapper);
                        m.request_modes().persist_if_dirty().map(|_| changed)
                    })
                    .await?;
                Ok(if changed { Applied::Merged { keys } } else { Applied::Unchanged })
            }
        }
    }

    /// The body of the master's answer to `table`'s request.
    async fn fetch(&self, table: Table, master: &str) -> Result<Bytes, SyncError> {
        self.fetch_code(table.request_code(), master).await
    }

    /// The body of the master's answer to a request with `code` and no header.
    async fn fetch_code(&self, code: i32, master: &str) -> Result<Bytes, SyncError> {
        let request = RemotingCommand::request(code);
        let response = self.client.invoke(master, request, REQUEST_TIMEOUT).await.map_err(SyncError::Remoting)?;
        if response.code != response_code::SUCCESS {
            return Err(SyncError::Refused { code: response.code, remark: response.remark.unwrap_or_default() });
        }
        Ok(response.body)
    }

    /// Runs `apply` on the tables off the async workers: it persists, which blocks on fsync.
    async fn apply<R: Send + 'static>(
        &self,
        apply: impl FnOnce(&MetadataStore) -> Result<R, MetadataError> + Send + 'static,
    ) -> Result<R, SyncError> {
        let owner = self.owner.clone();
        tokio::task::spawn_blocking(move || apply(owner.metadata()))
            .await
            .map_err(SyncError::Join)?
            .map_err(SyncError::Persist)
    }

    /// Logs a table's outcome: changes at info, the first failure of a run of failures at
    /// warn (later ones at debug), and the recovery at info.
    fn report(&mut self, table: Table, master: &str, result: Result<Applied, SyncError>) {
        let request_code = table.request_code();
        let was_failing = std::mem::replace(&mut self.failing[table as usize], result.is_err());
        match result {
            Ok(applied) => {
                if was_failing {
                    info!(master_addr = master, table = table.name(), "slave metadata sync recovered");
                }
                match applied {
                    Applied::Unchanged => {
                        debug!(master_addr = master, table = table.name(), "slave metadata unchanged")
                    }
                    Applied::Replaced(s) => info!(
                        master_addr = master,
                        table = table.name(),
                        added = s.added,
                        updated = s.updated,
                        removed = s.removed,
                        "slave metadata replaced from master"
                    ),
                    Applied::Merged { keys } => {
                        info!(master_addr = master, table = table.name(), keys, "slave metadata merged from master");
                    }
                }
            }
            Err(e) if was_failing => {
                debug!(master_addr = master, table = table.name(), request_code, error = %error_chain(&e),
                    "slave metadata sync still failing; retrying next round");
            }
            Err(e) => {
                warn!(master_addr = master, table = table.name(), request_code, error = %error_chain(&e),
                    "slave metadata sync failed; retrying next round");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    use std::time::Instant;

    use ferromq_protocol::body::{SubscriptionGroupConfig, TopicConfig};
    use ferromq_remoting::{Dispatcher, RemotingServer, ServerConfig};
    use tokio::net::TcpListener;
    use tokio::sync::oneshot;

    use super::*;
    use crate::metadata::{config_dir, MetadataOptions};

    fn tables(dir: &tempfile::TempDir) -> MetadataStore {
        MetadataStore::load(&config_dir(dir.path()), MetadataOptions::default()).unwrap()
    }

    /// A stand-in master: serves `tables` for the four requests with the bodies the broker's
    /// own handlers send (`processor/admin.rs`, `processor/admin_query.rs`). While `refuse` is
    /// set, GET_ALL_TOPIC_CONFIG answers SYSTEM_ERROR and GET_ALL_DELAY_OFFSET a body that
    /// does not parse.
    struct FakeMaster {
        addr: String,
        refuse: Arc<AtomicBool>,
        stop: Option<oneshot::Sender<()>>,
        task: tokio::task::JoinHandle<()>,
    }

    impl FakeMaster {
        async fn start(tables: Arc<MetadataStore>) -> FakeMaster {
            let refuse = Arc::new(AtomicBool::new(false));
            let mut d = Dispatcher::new();
            let (t, r) = (tables.clone(), refuse.clone());
            d.register_sync(request_code::GET_ALL_TOPIC_CONFIG, move |_, req| {
                Some(if r.load(Ordering::SeqCst) {
                    RemotingCommand::response_to(req, response_code::SYSTEM_ERROR, Some("refused".to_owned()))
                } else {
                    RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(t.topics().all().encode())
                })
            });
            let t = tables.clone();
            d.register_sync(request_code::GET_ALL_CONSUMER_OFFSET, move |_, req| {
                Some(
                    RemotingCommand::response_to(req, response_code::SUCCESS, None)
                        .with_body(t.offsets().snapshot().encode()),
                )
            });
            let (t, r) = (tables.clone(), refuse.clone());
            d.register_sync(request_code::GET_ALL_DELAY_OFFSET, move |_, req| {
                let body = if r.load(Ordering::SeqCst) {
                    b"{not json".to_vec()
                } else {
                    t.delay_offsets().snapshot().encode_fastjson()
                };
                Some(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body))
            });
            let t = tables.clone();
            d.register_sync(request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, move |_, req| {
                let body = serde_json::to_vec(&t.groups().all()).unwrap();
                Some(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body))
            });
            let t = tables;
            d.register_sync(request_code::GET_ALL_MESSAGE_REQUEST_MODE, move |_, req| {
                let body = t.request_modes().snapshot().encode();
                Some(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body))
            });
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            let (stop, stopped) = oneshot::channel::<()>();
            let server = RemotingServer::new(ServerConfig::default(), Arc::new(d));
            let task = tokio::spawn(async move {
                server
                    .serve(listener, async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
            FakeMaster { addr, refuse, stop: Some(stop), task }
        }

        async fn stop(mut self) {
            let _ = self.stop.take().unwrap().send(());
            self.task.await.unwrap();
        }
    }

    /// A master with one topic, group, committed offset and delay offset.
    fn master_tables(dir: &tempfile::TempDir) -> Arc<MetadataStore> {
        let master = tables(dir);
        master.topics().update(TopicConfig::new("Orders", 4, 4)).unwrap();
        master.groups().update(SubscriptionGroupConfig::new("billing")).unwrap();
        master.offsets().commit_offset("c", "billing", "Orders", 0, 5);
        master.delay_offsets().set(1, 3);
        master.request_modes().set(ferromq_protocol::body::SetMessageRequestModeRequestBody {
            consumer_group: "billing".into(),
            mode: ferromq_protocol::body::MessageRequestMode::Pop,
            pop_share_queue_num: 1,
            topic: "Orders".into(),
        });
        Arc::new(master)
    }

    async fn wait_for(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "slave never {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// What the slave should hold of `master`'s tables.
    fn assert_copied(slave: &MetadataStore, master: &MetadataStore) {
        assert_eq!(slave.topics().all(), master.topics().all(), "topics and their version");
        assert_eq!(slave.groups().all(), master.groups().all(), "groups and their version");
        assert_eq!(slave.delay_offsets().snapshot(), master.delay_offsets().snapshot());
        assert_eq!(slave.request_modes().snapshot(), master.request_modes().snapshot(), "request modes");
        let slave_offsets = slave.offsets().snapshot();
        for (key, queues) in master.offsets().snapshot().offset_table {
            assert_eq!(slave_offsets.offset_table.get(&key), Some(&queues), "{key}");
        }
        assert_eq!(slave_offsets.data_version, master.offsets().snapshot().data_version);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_round_copies_every_table_and_a_reload_keeps_it() {
        let (master_dir, slave_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let master = master_tables(&master_dir);
        let fake = FakeMaster::start(master.clone()).await;
        let slave = Arc::new(tables(&slave_dir));
        // Two changes: the slave's version (counter 2) cannot equal the master's (counter 1)
        // even when both tables changed in the same millisecond, as Java compares versions,
        // not contents.
        slave.topics().update(TopicConfig::new("OnlyOnSlave", 1, 1)).unwrap();
        slave.topics().update(TopicConfig::new("OnlyOnSlave", 2, 2)).unwrap();
        slave.offsets().commit_offset("c", "reader", "OnlyOnSlave", 0, 9);
        let mut sync = SlaveSync::new(slave.clone());

        sync.sync_all(&fake.addr).await;
        assert_eq!(sync.failing, [false; 7]);
        assert_copied(&slave, &master);
        assert!(!slave.topics().contains("OnlyOnSlave"), "topics the master lacks are deleted");
        assert_eq!(slave.offsets().query_offset("reader", "OnlyOnSlave", 0), Some(9), "offsets are merged");

        // Changes on the master, including a deleted topic and a moved offset, follow.
        master.topics().delete("Orders").unwrap();
        master.topics().update(TopicConfig::new("Payments", 2, 2)).unwrap();
        master.offsets().commit_offset("c", "billing", "Orders", 0, 8);
        master.delay_offsets().set(2, 1);
        sync.sync_all(&fake.addr).await;
        assert_copied(&slave, &master);
        assert!(!slave.topics().contains("Orders") && slave.topics().contains("Payments"));

        // Every table was persisted as it was synced.
        let reloaded = tables(&slave_dir);
        assert_copied(&reloaded, &master);
        assert_eq!(reloaded.offsets().query_offset("reader", "OnlyOnSlave", 0), Some(9));
        fake.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_table_is_left_alone_and_retried_next_round() {
        let (master_dir, slave_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let master = master_tables(&master_dir);
        let fake = FakeMaster::start(master.clone()).await;
        let slave = Arc::new(tables(&slave_dir));
        let before = slave.topics().all();
        let mut sync = SlaveSync::new(slave.clone());

        fake.refuse.store(true, Ordering::SeqCst);
        sync.sync_all(&fake.addr).await;
        assert_eq!(
            sync.failing,
            [true, false, true, false, false, false, false],
            "refused topics, unparsable delay offsets"
        );
        assert_eq!(slave.topics().all(), before);
        assert_eq!(slave.delay_offsets().get(1), None);
        assert!(slave.groups().contains("billing"), "the other tables were synced");
        assert_eq!(slave.offsets().query_offset("billing", "Orders", 0), Some(5));

        fake.refuse.store(false, Ordering::SeqCst);
        sync.sync_all(&fake.addr).await;
        assert_eq!(sync.failing, [false; 7]);
        assert_copied(&slave, &master);

        // A master that is gone: every table fails within the request timeouts, nothing changes.
        let addr = fake.addr.clone();
        fake.stop().await;
        let synced = slave.topics().all();
        let started = Instant::now();
        sync.sync_all(&addr).await;
        assert_eq!(
            sync.failing,
            [true, true, true, true, true, false, false],
            "the users and ACLs table and the timer progress are not synced without a broker"
        );
        assert!(started.elapsed() < 5 * REQUEST_TIMEOUT + Duration::from_secs(1));
        assert_eq!(slave.topics().all(), synced);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_loop_waits_for_a_master_address_then_syncs_every_interval() {
        let (master_dir, slave_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let master = master_tables(&master_dir);
        let fake = FakeMaster::start(master.clone()).await;
        let slave = Arc::new(tables(&slave_dir));
        let known = Arc::new(Mutex::new(None::<String>));
        let own_addr = "127.0.0.1:1".to_owned();
        let mut tasks = tokio::task::JoinSet::new();
        let k = known.clone();
        tasks.spawn(run_loop(slave.clone(), own_addr.clone(), move || k.lock().unwrap().clone(), MIN_SYNC_INTERVAL));

        // Unknown master, or the slave's own address: several rounds pass without a sync.
        *known.lock().unwrap() = Some(own_addr);
        tokio::time::sleep(5 * MIN_SYNC_INTERVAL).await;
        assert!(!slave.topics().contains("Orders"));

        *known.lock().unwrap() = Some(fake.addr.clone());
        wait_for("copied the topic", || slave.topics().contains("Orders")).await;
        master.groups().update(SubscriptionGroupConfig::new("later")).unwrap();
        master.offsets().commit_offset("c", "later", "Orders", 1, 2);
        wait_for("copied the later changes", || {
            slave.groups().contains("later") && slave.offsets().query_offset("later", "Orders", 1) == Some(2)
        })
        .await;
        tasks.shutdown().await;
        fake.stop().await;
    }
}
