//! One controller node: its Raft member, the controller requests on its remoting port, and the
//! leader's liveness scan that replaces dead masters (controller-mode.md §2-§4).
//!
//! Requests that read or change the broker sets are served by the leader only (others answer
//! CONTROLLER_NOT_LEADER naming the leader, as Java's do; brokers then find the leader with
//! GET_METADATA_INFO, which every node answers). The leader decides one request at a time: it
//! first makes sure it is still the leader and has applied everything committed
//! (`ensure_linearizable`), decides against that state, commits the events, and answers only
//! after they are applied.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferromq_protocol::header::{
    AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader, ApplyBrokerIdRequestHeader,
    ApplyBrokerIdResponseHeader, BrokerHeartbeatRequestHeader, CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader, ElectMasterResponseHeader, GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
    NotifyBrokerRoleChangedRequestHeader, RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::tls::TlsConfig;
use ferromq_remoting::{ClientConfig, Dispatcher, RemotingClient};
use openraft::{BasicNode, Raft, SnapshotPolicy};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::body::{self, BrokerMemberGroup, BrokerReplicasInfo, ElectMasterResponseBody, SyncStateSet};
use crate::config::{ControllerConfig, Peer, PeersError};
use crate::error::ControllerError;
use crate::live::{BrokerLiveInfo, LiveTable};
use crate::network::{Network, RAFT_APPEND_ENTRIES, RAFT_INSTALL_SNAPSHOT, RAFT_VOTE};
use crate::raft::{Command, LogStore, StateMachine, TypeConfig, SNAPSHOT_EVERY};
use crate::requests::{self, Elected, Outcome, Requests};
use crate::state::ReplicaState;

/// Why a controller node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The peers or self id are wrong.
    #[error(transparent)]
    Peers(#[from] PeersError),
    /// The store directory cannot be used.
    #[error("controllerStorePath {path}: {source}")]
    Store {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// openraft refused to start.
    #[error("raft: {0}")]
    Raft(String),
    /// The `tls.*` settings are unusable (a bad value, an unreadable certificate).
    #[error("controller TLS: {0}")]
    Tls(#[from] ferromq_remoting::tls::TlsError),
}

/// A running controller node.
pub struct ControllerNode {
    /// Changed by UPDATE_CONTROLLER_CONFIG; the peers, self id and store path are read at start.
    config: RwLock<ControllerConfig>,
    me: Peer,
    peers: Vec<Peer>,
    raft: Raft<TypeConfig>,
    sm: StateMachine,
    live: Mutex<LiveTable>,
    decide: tokio::sync::Mutex<()>,
    client: Arc<RemotingClient>,
    /// Which connections the node's port takes (`tls.server.mode`), read at start.
    server_tls: ferromq_remoting::tls::ServerTls,
    leader_since: Mutex<Option<Instant>>,
    /// Elections decided on this node, by Java's `election_result` label.
    elections: Mutex<BTreeMap<&'static str, u64>>,
}

impl std::fmt::Debug for ControllerNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerNode").field("me", &self.me).finish_non_exhaustive()
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn fail(code: i32, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(code, Some(remark.into()))
}

fn refused(e: &ControllerError) -> RemotingCommand {
    fail(e.code, e.remark.clone())
}

impl ControllerNode {
    /// Opens the store, starts the Raft member and, on a node that has never run, proposes the
    /// group of `controllerDLegerPeers` (every node proposes the same; openraft takes the first).
    ///
    /// # Errors
    /// [`StartError`] naming the bad key or the store directory.
    pub async fn start(config: ControllerConfig) -> Result<Arc<ControllerNode>, StartError> {
        let me = config.self_peer()?;
        let peers = config.peer_list()?;
        let dir = config.store_path.join("raft");
        let store_err = |source| StartError::Store { path: dir.clone(), source };
        let log = LogStore::open(&dir).map_err(store_err)?;
        let sm = StateMachine::open(&dir).map_err(store_err)?;
        let raft_config = openraft::Config {
            cluster_name: config.group.clone(),
            heartbeat_interval: 200,
            election_timeout_min: 1_000,
            election_timeout_max: 2_000,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(SNAPSHOT_EVERY),
            max_in_snapshot_log_to_keep: 0,
            ..Default::default()
        }
        .validate()
        .map_err(|e| StartError::Raft(e.to_string()))?;
        // The `tls.*` keys of the config file (kept among its unknown keys); the nodes talk to
        // each other with TLS when their own ports take TLS only (or tls.enable).
        let tls = TlsConfig::load(config.unknown.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
        let server_tls = tls.server_tls("FerroMQ controller (self-signed)")?;
        let client_tls = if tls.server_process_clients_use_tls() { Some(tls.client_tls()?) } else { None };
        let client = Arc::new(RemotingClient::new(ClientConfig::default().with_tls(client_tls)));
        let raft = Raft::new(me.id, Arc::new(raft_config), Network::new(client.clone()), log.clone(), sm.clone())
            .await
            .map_err(|e| StartError::Raft(e.to_string()))?;
        let members: BTreeMap<u64, BasicNode> = peers.iter().map(|p| (p.id, BasicNode::new(&p.addr))).collect();
        if raft.is_initialized().await.map_err(|e| StartError::Raft(e.to_string()))? {
            info!(node = %me.name, "controller restarted from its store");
        } else if let Err(e) = raft.initialize(members).await {
            // Another node's proposal reached this one first: nothing to do.
            info!(node = %me.name, error = %e, "controller group already formed");
        }
        Ok(Arc::new(ControllerNode {
            config: RwLock::new(config),
            me,
            peers,
            raft,
            sm,
            live: Mutex::new(LiveTable::default()),
            decide: tokio::sync::Mutex::new(()),
            client,
            server_tls,
            leader_since: Mutex::new(None),
            elections: Mutex::new(BTreeMap::new()),
        }))
    }

    fn config(&self) -> RwLockReadGuard<'_, ControllerConfig> {
        self.config.read().unwrap_or_else(|e| e.into_inner())
    }

    fn requests(&self) -> Requests {
        Requests { enable_elect_unclean_master: self.config().enable_elect_unclean_master }
    }

    fn live(&self) -> MutexGuard<'_, LiveTable> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current leader, if one is known.
    pub fn leader(&self) -> Option<Peer> {
        let id = self.raft.metrics().borrow().current_leader?;
        self.peers.iter().find(|p| p.id == id).cloned()
    }

    /// Whether this node leads the group now.
    pub fn is_leader(&self) -> bool {
        self.leader().is_some_and(|l| l.id == self.me.id)
    }

    /// Runs `f` on the applied state (tests, admin views).
    pub fn read<T>(&self, f: impl FnOnce(&ReplicaState) -> T) -> T {
        self.sm.read(f)
    }

    fn not_leader(&self) -> ControllerError {
        let remark = match self.leader() {
            Some(l) => format!("controller {} is not the leader; the leader is {} at {}", self.me.name, l.name, l.addr),
            None => format!("controller {} is not the leader and no leader is elected yet", self.me.name),
        };
        ControllerError { code: response_code::CONTROLLER_NOT_LEADER, remark }
    }

    fn raft_failure(&self, e: impl std::fmt::Display) -> ControllerError {
        if self.is_leader() {
            ControllerError { code: response_code::SYSTEM_ERROR, remark: format!("controller raft: {e}") }
        } else {
            self.not_leader()
        }
    }

    /// Decides a request on the leader and commits its events before returning the reply.
    async fn decide<R>(
        &self,
        f: impl FnOnce(&Requests, &ReplicaState, &LiveTable, i64) -> Result<Outcome<R>, ControllerError>,
    ) -> Result<R, ControllerError> {
        if !self.is_leader() {
            return Err(self.not_leader());
        }
        let _turn = self.decide.lock().await;
        self.raft.ensure_linearizable().await.map_err(|e| self.raft_failure(e))?;
        let outcome = {
            let live = self.live();
            self.sm.read(|state| f(&self.requests(), state, &live, now_ms()))?
        };
        if !outcome.events.is_empty() {
            self.raft.client_write(Command { events: outcome.events }).await.map_err(|e| self.raft_failure(e))?;
        }
        Ok(outcome.reply)
    }

    /// The dispatcher of the controller's port: Raft traffic and the controller requests.
    pub fn dispatcher(self: &Arc<Self>) -> Dispatcher {
        let mut d = Dispatcher::new();
        macro_rules! serve {
            ($code:expr, $method:ident) => {{
                let node = self.clone();
                d.register($code, move |_conn, req| {
                    let node = node.clone();
                    async move { Some(node.$method(req).await) }
                });
            }};
        }
        serve!(RAFT_APPEND_ENTRIES, raft_append_entries);
        serve!(RAFT_VOTE, raft_vote);
        serve!(RAFT_INSTALL_SNAPSHOT, raft_install_snapshot);
        serve!(request_code::CONTROLLER_GET_METADATA_INFO, get_metadata_info);
        serve!(request_code::CONTROLLER_GET_NEXT_BROKER_ID, get_next_broker_id);
        serve!(request_code::CONTROLLER_APPLY_BROKER_ID, apply_broker_id);
        serve!(request_code::CONTROLLER_REGISTER_BROKER, register_broker);
        {
            let node = self.clone();
            d.register(request_code::BROKER_HEARTBEAT, move |conn, req| {
                let node = node.clone();
                async move {
                    // A heartbeat read before the connection closed but handled after: the
                    // broker is gone, and recording it would keep it alive for a whole timeout.
                    if conn.is_closed() {
                        return None;
                    }
                    Some(node.broker_heartbeat(conn.id(), req))
                }
            });
            let node = self.clone();
            d.on_close(move |conn| {
                for gone in node.live().connection_closed(conn.id()) {
                    info!(broker = %gone.broker_addr, broker_name = %gone.broker_name, id = gone.broker_id, "broker connection closed");
                }
            });
        }
        serve!(request_code::CONTROLLER_ELECT_MASTER, elect_master);
        serve!(request_code::CONTROLLER_ALTER_SYNC_STATE_SET, alter_sync_state_set);
        serve!(request_code::CONTROLLER_GET_REPLICA_INFO, get_replica_info);
        serve!(request_code::CONTROLLER_GET_SYNC_STATE_DATA, get_sync_state_data);
        serve!(request_code::CLEAN_BROKER_DATA, clean_broker_data);
        serve!(request_code::GET_CONTROLLER_CONFIG, get_controller_config);
        serve!(request_code::UPDATE_CONTROLLER_CONFIG, update_controller_config);
        d
    }

    async fn raft_rpc<Req, Resp, E>(
        &self,
        req: RemotingCommand,
        call: impl AsyncFnOnce(&Raft<TypeConfig>, Req) -> Result<Resp, E>,
    ) -> RemotingCommand
    where
        Req: DeserializeOwned,
        Resp: Serialize,
        E: Serialize,
    {
        let request: Req = match serde_json::from_slice(&req.body) {
            Ok(r) => r,
            Err(e) => return fail(response_code::SYSTEM_ERROR, format!("bad raft message: {e}")),
        };
        let result = call(&self.raft, request).await;
        match serde_json::to_vec(&result) {
            Ok(body) => RemotingCommand::response(response_code::SUCCESS, None).with_body(body),
            Err(e) => fail(response_code::SYSTEM_ERROR, format!("raft answer: {e}")),
        }
    }

    async fn raft_append_entries(&self, req: RemotingCommand) -> RemotingCommand {
        self.raft_rpc(req, async |raft, r| raft.append_entries(r).await).await
    }

    async fn raft_vote(&self, req: RemotingCommand) -> RemotingCommand {
        self.raft_rpc(req, async |raft, r| raft.vote(r).await).await
    }

    async fn raft_install_snapshot(&self, req: RemotingCommand) -> RemotingCommand {
        self.raft_rpc(req, async |raft, r| raft.install_snapshot(r).await).await
    }

    async fn get_metadata_info(&self, _req: RemotingCommand) -> RemotingCommand {
        let leader = self.leader();
        let peers: String = self.peers.iter().map(|p| format!("{}:{};", p.name, p.addr)).collect();
        RemotingCommand::response(response_code::SUCCESS, None).with_header(&GetMetaDataResponseHeader {
            group: Some(self.config().group.clone()),
            controller_leader_id: leader.as_ref().map(|l| l.name.clone()),
            controller_leader_address: leader.as_ref().map(|l| l.addr.clone()),
            is_leader: Some(leader.is_some_and(|l| l.id == self.me.id)),
            peers: Some(peers),
        })
    }

    async fn get_next_broker_id(&self, req: RemotingCommand) -> RemotingCommand {
        let h: GetNextBrokerIdRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return fail(response_code::CONTROLLER_INVALID_REQUEST, e.to_string()),
        };
        let next =
            self.decide(|r, s, _, _| Ok(Outcome { reply: r.next_broker_id(s, &h.broker_name), events: vec![] })).await;
        match next {
            Ok(id) => {
                RemotingCommand::response(response_code::SUCCESS, None).with_header(&GetNextBrokerIdResponseHeader {
                    cluster_name: Some(h.cluster_name),
                    broker_name: Some(h.broker_name),
                    next_broker_id: Some(id),
                })
            }
            Err(e) => refused(&e),
        }
    }

    async fn apply_broker_id(&self, req: RemotingCommand) -> RemotingCommand {
        let h: ApplyBrokerIdRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return fail(response_code::CONTROLLER_INVALID_REQUEST, e.to_string()),
        };
        let apply = requests::ApplyBrokerId {
            cluster_name: h.cluster_name.clone(),
            broker_name: h.broker_name.clone(),
            applied_broker_id: h.applied_broker_id,
            register_check_code: h.register_check_code,
        };
        match self.decide(|r, s, _, _| r.apply_broker_id(s, &apply)).await {
            Ok(()) => {
                RemotingCommand::response(response_code::SUCCESS, None).with_header(&ApplyBrokerIdResponseHeader {
                    cluster_name: Some(h.cluster_name),
                    broker_name: Some(h.broker_name),
                })
            }
            Err(e) => refused(&e),
        }
    }

    async fn register_broker(&self, req: RemotingCommand) -> RemotingCommand {
        let h: RegisterBrokerToControllerRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return fail(response_code::CONTROLLER_INVALID_REQUEST, e.to_string()),
        };
        let reg = requests::RegisterBroker {
            cluster_name: h.cluster_name.clone(),
            broker_name: h.broker_name.clone(),
            broker_id: h.broker_id,
            broker_address: h.broker_address,
        };
        match self.decide(|r, s, live, now| r.register_broker(s, live, &reg, now)).await {
            Ok(v) => RemotingCommand::response(response_code::SUCCESS, None)
                .with_header(&RegisterBrokerToControllerResponseHeader {
                    cluster_name: Some(h.cluster_name),
                    broker_name: Some(h.broker_name),
                    master_broker_id: v.master_broker_id,
                    master_address: v.master_address,
                    master_epoch: Some(v.master_epoch),
                    sync_state_set_epoch: Some(v.sync_state_set_epoch),
                })
                .with_body(body::to_json(&SyncStateSet {
                    sync_state_set: v.sync_state_set,
                    sync_state_set_epoch: v.sync_state_set_epoch,
                })),
            Err(e) => refused(&e),
        }
    }

    fn broker_heartbeat(&self, connection: u64, req: RemotingCommand) -> RemotingCommand {
        let h: BrokerHeartbeatRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return fail(response_code::CONTROLLER_INVALID_REQUEST, e.to_string()),
        };
        let Some(broker_id) = h.broker_id else {
            return fail(response_code::CONTROLLER_INVALID_REQUEST, "heartbeat without brokerId");
        };
        if !self.is_leader() {
            return refused(&self.not_leader());
        }
        tracing::trace!(broker_id, connection, timeout = ?h.heartbeat_timeout_mills, "broker heartbeat");
        self.live().heartbeat(BrokerLiveInfo {
            cluster_name: h.cluster_name,
            broker_name: h.broker_name,
            broker_id,
            broker_addr: h.broker_addr,
            heartbeat_timeout_ms: h.heartbeat_timeout_mills.unwrap_or(self.config().broker_heartbeat_timeout_ms as i64),
            last_update_ms: now_ms(),
            epoch: h.epoch.unwrap_or(0),
            max_offset: h.max_offset.unwrap_or(0),
            confirm_offset: h.confirm_offset.unwrap_or(0),
            election_priority: h.election_priority.unwrap_or(i32::MAX),
            connection: Some(connection),
        });
        RemotingCommand::response(response_code::SUCCESS, None)
    }

    async fn elect_master(&self, req: RemotingCommand) -> RemotingCommand {
        let h: ElectMasterRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return fail(response_code::CONTROLLER_INVALID_REQUEST, e.to_string()),
        };
        let elect = requests::ElectMaster {
            cluster_name: h.cluster_name.unwrap_or_default(),
            broker_name: h.broker_name,
            broker_id: h.broker_id.filter(|&id| id >= 0),
            designate_elect: h.designate_elect.unwrap_or(false),
        };
        match self.elect(&elect).await {
            Ok(e) => elected_response(&e),
            Err(e) => refused(&e),
        }
    }

    /// An election, with the notification of the set's live replicas when the master changed.
    async fn elect(&self, req: &requests::ElectMaster) -> Result<Elected, ControllerError> {
        let elected = self.decide(|r, s, live, now| r.elect_master(s, live, req, now)).await;
        match &elected {
            Ok(e) if e.still_exists => self.count_election("keep_current_master"),
            Ok(_) => self.count_election("new_master_elected"),
            Err(_) => self.count_election("no_master_elected"),
        }
        let elected = elected?;
        self.announce(&elected);
        Ok(elected)
    }

    fn count_election(&self, result: &'static str) {
        *self.elections.lock().unwrap_or_else(|e| e.into_inner()).entry(result).or_default() += 1;
    }

    /// Elections decided on this node, by result (`new_master_elected`, `keep_current_master`,
    /// `no_master_elected`).
    pub fn election_counts(&self) -> Vec<(&'static str, u64)> {
        self.elections.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| (*k, *v)).collect()
    }

    /// Live replicas by cluster and broker set (Java's `active_broker_num`).
    pub fn active_brokers(&self) -> Vec<((String, String), usize)> {
        self.live().active_counts(now_ms()).into_iter().collect()
    }

    /// This node's name in `controllerDLegerPeers` and the group's name.
    pub fn identity(&self) -> (String, String, String) {
        (self.me.name.clone(), self.me.addr.clone(), self.config().group.clone())
    }

    /// Bytes the Raft log and snapshots take in `controllerStorePath`.
    pub fn store_bytes(&self) -> u64 {
        fn size(path: &std::path::Path) -> u64 {
            let Ok(entries) = std::fs::read_dir(path) else { return 0 };
            entries
                .flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => size(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        }
        size(&self.config().store_path.join("raft"))
    }

    /// Logs a changed master and tells the set's live replicas (`notifyBrokerRoleChanged`).
    fn announce(&self, elected: &Elected) {
        if elected.still_exists {
            return;
        }
        info!(broker_name = %elected.broker_name, master = ?elected.view.master_broker_id,
            epoch = elected.view.master_epoch, "new master elected");
        if self.config().notify_broker_role_changed {
            self.notify_role_changed(elected);
        }
    }

    fn notify_role_changed(&self, e: &Elected) {
        let targets: Vec<String> = {
            let live = self.live();
            let now = now_ms();
            e.broker_addrs
                .keys()
                .filter_map(|id| live.alive(&e.cluster_name, &e.broker_name, *id, now).map(|i| i.broker_addr.clone()))
                .collect()
        };
        let header = NotifyBrokerRoleChangedRequestHeader {
            master_address: e.view.master_address.clone(),
            master_epoch: Some(e.view.master_epoch),
            sync_state_set_epoch: Some(e.view.sync_state_set_epoch),
            master_broker_id: e.view.master_broker_id,
        };
        let body = body::to_json(&SyncStateSet {
            sync_state_set: e.view.sync_state_set.clone(),
            sync_state_set_epoch: e.view.sync_state_set_epoch,
        });
        for addr in targets {
            let client = self.client.clone();
            let request = RemotingCommand::request(request_code::NOTIFY_BROKER_ROLE_CHANGED)
                .with_header(&header)
                .with_body(body.clone());
            tokio::spawn(async move {
                if let Err(e) = client.invoke(&addr, request, Duration::from_secs(3)).await {
                    warn!(broker = %addr, error = %e, "cannot notify the broker of its role change; it learns it at its next sync");
                }
            });
        }
    }

    async fn alter_sync_state_set(&self, req: RemotingCommand) -> RemotingCommand {
        let h: AlterSyncStateSetRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return fail(response_code::CONTROLLER_INVALID_REQUEST, e.to_string()),
        };
        let proposed: SyncStateSet = match ferromq_protocol::json::parse_lenient(&req.body) {
            Ok(b) => b,
            Err(e) => return fail(response_code::CONTROLLER_INVALID_REQUEST, format!("bad SyncStateSet body: {e}")),
        };
        let alter = requests::AlterSyncStateSet {
            broker_name: h.broker_name,
            master_broker_id: h.master_broker_id,
            master_epoch: h.master_epoch,
            sync_state_set_epoch: proposed.sync_state_set_epoch,
            new_sync_state_set: proposed.sync_state_set,
        };
        match self.decide(|r, s, live, now| r.alter_sync_state_set(s, live, &alter, now)).await {
            Ok((epoch, set)) => RemotingCommand::response(response_code::SUCCESS, None)
                .with_header(&AlterSyncStateSetResponseHeader { new_sync_state_set_epoch: Some(epoch) })
                .with_body(body::to_json(&SyncStateSet { sync_state_set: set, sync_state_set_epoch: epoch })),
            Err(e) => refused(&e),
        }
    }

    async fn get_replica_info(&self, req: RemotingCommand) -> RemotingCommand {
        let h: GetReplicaInfoRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return fail(response_code::CONTROLLER_INVALID_REQUEST, e.to_string()),
        };
        let info = self
            .decide(|r, s, _, _| r.replica_info(s, &h.broker_name).map(|reply| Outcome { reply, events: vec![] }))
            .await;
        match info {
            Ok(v) => RemotingCommand::response(response_code::SUCCESS, None)
                .with_header(&GetReplicaInfoResponseHeader {
                    master_broker_id: v.master_broker_id,
                    master_address: v.master_address,
                    master_epoch: Some(v.master_epoch),
                })
                .with_body(body::to_json(&SyncStateSet {
                    sync_state_set: v.sync_state_set,
                    sync_state_set_epoch: v.sync_state_set_epoch,
                })),
            Err(e) => refused(&e),
        }
    }

    async fn get_sync_state_data(&self, req: RemotingCommand) -> RemotingCommand {
        let names: Vec<String> = match ferromq_protocol::json::parse_lenient(&req.body) {
            Ok(n) => n,
            Err(e) => {
                return fail(
                    response_code::CONTROLLER_INVALID_REQUEST,
                    format!("body is not a list of broker names: {e}"),
                )
            }
        };
        let table = self
            .decide(|r, s, live, now| Ok(Outcome { reply: r.sync_state_data(s, live, &names, now), events: vec![] }))
            .await;
        match table {
            Ok(t) => RemotingCommand::response(response_code::SUCCESS, None)
                .with_body(body::to_json(&BrokerReplicasInfo { replicas_info_table: t })),
            Err(e) => refused(&e),
        }
    }

    async fn clean_broker_data(&self, req: RemotingCommand) -> RemotingCommand {
        let h: CleanControllerBrokerDataRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return fail(response_code::CONTROLLER_INVALID_REQUEST, e.to_string()),
        };
        let clean = requests::CleanBrokerData {
            broker_name: h.broker_name,
            broker_ids_to_clean: h.broker_controller_ids_to_clean,
            clean_living_broker: h.is_clean_living_broker.unwrap_or(false),
        };
        match self.decide(|r, s, live, now| r.clean_broker_data(s, live, &clean, now)).await {
            Ok(()) => RemotingCommand::response(response_code::SUCCESS, None),
            Err(e) => refused(&e),
        }
    }

    /// UPDATE_CONTROLLER_CONFIG: `k=v` lines; a black-listed key (`configBlackList`) is refused
    /// with NO_PERMISSION, a bad value with SYSTEM_ERROR and nothing applied; the settings are
    /// then written to `configStorePath`. Elections and scans use the new values at once; the
    /// peers, self id and store path at the next start.
    async fn update_controller_config(&self, req: RemotingCommand) -> RemotingCommand {
        use ferromq_config::RocketMqConfig as _;
        let Ok(text) = std::str::from_utf8(&req.body) else {
            return fail(response_code::SYSTEM_ERROR, "config body is not UTF-8");
        };
        let entries = match ferromq_protocol::properties_text::parse(text) {
            Ok(e) => e,
            Err(e) => return fail(response_code::SYSTEM_ERROR, format!("string2Properties error: {e}")),
        };
        let mut config = self.config.write().unwrap_or_else(|e| e.into_inner());
        let black: Vec<String> =
            config.config_black_list.split(';').map(str::trim).filter(|k| !k.is_empty()).map(str::to_owned).collect();
        if let Some((key, _)) = entries.iter().find(|(k, _)| black.iter().any(|b| b == k)) {
            warn!(key = %key, "refused to update a black-listed controller config key");
            return fail(response_code::NO_PERMISSION, "Can not update config in black list.");
        }
        let mut updated = config.clone();
        for (key, value) in &entries {
            if let Err(e) = updated.set(key, value) {
                return fail(response_code::SYSTEM_ERROR, e.to_string());
            }
        }
        *config = updated;
        info!(keys = entries.len(), "controller config updated");
        if let Err(e) = ferromq_config::file::replace_file(&config.config_store_path, config.to_text().as_bytes()) {
            warn!(path = %e.path.display(), error = %e.source, "updated controller config not persisted");
        }
        RemotingCommand::response(response_code::SUCCESS, None)
    }

    async fn get_controller_config(&self, _req: RemotingCommand) -> RemotingCommand {
        use ferromq_config::RocketMqConfig as _;
        RemotingCommand::response(response_code::SUCCESS, None).with_body(self.config().to_text())
    }

    /// The leader's scans (every `scanInactiveMasterInterval`): forget replicas whose
    /// heartbeat timed out, and elect a master for every set without a live one. A new leader
    /// first waits one heartbeat timeout, so the replicas' heartbeats reach it before it judges.
    pub async fn run_scans(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let (period, wait) = {
                let c = self.config();
                (
                    Duration::from_millis(c.scan_inactive_master_interval_ms.max(100)),
                    Duration::from_millis(c.broker_heartbeat_timeout_ms),
                )
            };
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(period) => {}
            }
            if !self.is_leader() {
                *self.leader_since.lock().unwrap_or_else(|e| e.into_inner()) = None;
                *self.live() = LiveTable::default();
                continue;
            }
            let since = *self.leader_since.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(Instant::now);
            if since.elapsed() < wait {
                continue;
            }
            let now = now_ms();
            for dead in self.live().expire(now) {
                info!(broker = %dead.broker_addr, broker_name = %dead.broker_name, id = dead.broker_id, "broker heartbeat timed out");
            }
            let sets: Vec<(String, String)> = {
                let live = self.live();
                self.sm.read(|s| {
                    self.requests()
                        .masters_to_replace(s, &live, now)
                        .into_iter()
                        .filter_map(|name| s.set(&name).map(|b| (b.cluster_name.clone(), name)))
                        .collect()
                })
            };
            for (cluster_name, broker_name) in sets {
                debug!(broker_name = %broker_name, "no live master; electing one");
                self.replace_master(cluster_name, broker_name).await;
            }
        }
    }

    /// A controller-triggered election for a set without a live master. When no replica can
    /// take over, a set that still names a master is recorded as masterless (epoch + 1: the
    /// dead master is fenced) in the same decision, as Java commits its ElectMasterEvent; a set
    /// already without one is retried at the next scan without bumping its epoch again.
    async fn replace_master(&self, cluster_name: String, broker_name: String) {
        let req = requests::ElectMaster {
            cluster_name,
            broker_name: broker_name.clone(),
            broker_id: None,
            designate_elect: false,
        };
        let attempts = self.config().elect_master_max_retry_count.max(1);
        for attempt in 1..=attempts {
            let decided = self
                .decide(|r, s, live, now| match r.elect_master(s, live, &req, now) {
                    Ok(o) => Ok(Outcome { reply: Some(o.reply), events: o.events }),
                    Err(e) if e.code == response_code::CONTROLLER_MASTER_NOT_AVAILABLE => {
                        let fence = s.set(&req.broker_name).is_some_and(|b| b.master_broker_id.is_some());
                        let events = if fence { vec![Requests::no_master_event(&req.broker_name)] } else { vec![] };
                        if fence {
                            warn!(broker_name = %req.broker_name, "master is dead and no replica can take over; the set has no master");
                        }
                        Ok(Outcome { reply: None, events })
                    }
                    Err(e) => Err(e),
                })
                .await;
            match decided {
                Ok(Some(elected)) => {
                    self.count_election(if elected.still_exists {
                        "keep_current_master"
                    } else {
                        "new_master_elected"
                    });
                    self.announce(&elected);
                    return;
                }
                Ok(None) => {
                    self.count_election("no_master_elected");
                    return;
                }
                Err(e) => warn!(broker_name = %broker_name, attempt, error = %e, "election failed"),
            }
        }
    }

    /// Stops the Raft member.
    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            warn!(error = %e, "raft shutdown");
        }
        self.client.shutdown().await;
    }
}

fn elected_response(e: &Elected) -> RemotingCommand {
    let code = if e.still_exists { response_code::CONTROLLER_MASTER_STILL_EXIST } else { response_code::SUCCESS };
    RemotingCommand::response(code, None)
        .with_header(&ElectMasterResponseHeader {
            master_broker_id: e.view.master_broker_id,
            master_address: e.view.master_address.clone(),
            master_epoch: Some(e.view.master_epoch),
            sync_state_set_epoch: Some(e.view.sync_state_set_epoch),
        })
        .with_body(body::to_json(&ElectMasterResponseBody {
            broker_member_group: BrokerMemberGroup {
                cluster: e.cluster_name.clone(),
                broker_name: e.broker_name.clone(),
                broker_addrs: e.broker_addrs.clone(),
            },
            sync_state_set: e.view.sync_state_set.clone(),
        }))
}

/// Why a controller stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// It could not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// Its port failed.
    #[error(transparent)]
    Remoting(#[from] ferromq_remoting::RemotingError),
}

/// Runs a controller node on `listener` (its address in `controllerDLegerPeers`) until
/// `shutdown` completes.
///
/// # Errors
/// [`RunError`]: the store, the peers or the port.
pub async fn run(
    config: ControllerConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), RunError> {
    run_with_metrics(config, listener, shutdown, None).await
}

/// [`run`], serving the controller's `/metrics` on `metrics` (an exporter prepared by
/// `ferromq_metrics::exporter::prepare`) while it runs.
///
/// # Errors
/// As [`run`].
pub async fn run_with_metrics(
    config: ControllerConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
    metrics: Option<ferromq_metrics::exporter::Prepared>,
) -> Result<(), RunError> {
    let node = ControllerNode::start(config).await?;
    let mut server_config = ferromq_remoting::ServerConfig { tls: node.server_tls.clone(), ..Default::default() };
    let exporter = metrics.map(|p| {
        server_config.rpc_observer = Some(Arc::new(p.rpc));
        let mut registry = p.metrics;
        registry.register_collector(Box::new(crate::metrics::ControllerCollector { node: Arc::downgrade(&node) }));
        tokio::spawn(ferromq_metrics::exporter::serve(p.listener, Arc::new(registry), std::future::pending::<()>()))
    });
    let server = ferromq_remoting::RemotingServer::new(server_config, Arc::new(node.dispatcher()));
    info!(node = %node.me.name, addr = %node.me.addr, peers = node.peers.len(), tls = %node.server_tls, "controller listening");
    let (stop_scans, scans_stopped) = tokio::sync::oneshot::channel::<()>();
    let scans = tokio::spawn(node.clone().run_scans(async move {
        let _ = scans_stopped.await;
    }));
    let served = server.serve(listener, shutdown).await;
    if let Some(exporter) = exporter {
        exporter.abort();
    }
    let _ = stop_scans.send(());
    let _ = scans.await;
    node.shutdown().await;
    served?;
    Ok(())
}
