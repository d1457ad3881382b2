//! A controller-mode broker's side of the controller (controller-mode.md §5.1-5.2; Java:
//! `ReplicasManager`): it finds the controller leader, takes an id in its broker set (kept in
//! `brokerIdentity`), registers, sends heartbeats, and learns its role — master, or slave of
//! which master — with the master epoch that fences stale decisions.
//!
//! Roles are published on a watch channel; the broker acts on them (the store's role, the
//! AutoSwitchHA service, the name server registration). Epochs only move forward: a view with a
//! master epoch older than the one known is ignored, wherever it comes from (a periodic
//! GET_REPLICA_INFO, a NOTIFY_BROKER_ROLE_CHANGED, an election answer).
//!
//! Not yet wired into `ferromq broker` (issue 18): the broker still runs classic master/slave.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferromq_protocol::body::{JsonBody, SyncStateSet};
use ferromq_protocol::header::{
    AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader, ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader, ElectMasterRequestHeader, ElectMasterResponseHeader, GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader, GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader, NotifyBrokerRoleChangedRequestHeader, RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_replication::identity_file::{BrokerIdentity, IdentityError, PendingIdentity};
use tokio::sync::watch;
use tracing::{info, warn};

/// Settings of a controller-mode broker (Java's keys, §7.2).
#[derive(Debug, Clone)]
pub struct ControllerModeConfig {
    /// `controllerAddr`, split on `;`.
    pub controller_addrs: Vec<String>,
    /// `brokerClusterName`.
    pub cluster_name: String,
    /// `brokerName`.
    pub broker_name: String,
    /// This broker's address (`ip:listenPort`), as clients and other replicas reach it.
    pub broker_addr: String,
    /// `storePathBrokerIdentity`.
    pub identity_path: PathBuf,
    /// `brokerHeartbeatInterval`.
    pub heartbeat_interval: Duration,
    /// `controllerHeartBeatTimeoutMills`: sent in every heartbeat.
    pub heartbeat_timeout: Duration,
    /// `sendHeartbeatTimeoutMillis` (and the timeout of every controller request).
    pub request_timeout: Duration,
    /// `syncBrokerMetadataPeriod`: how often the role is checked with GET_REPLICA_INFO.
    pub sync_period: Duration,
    /// `brokerElectionPriority`: lower wins ties.
    pub election_priority: i32,
    /// TLS for the connections to the controllers (the broker's `useTLS`); `None`: plaintext.
    pub client_tls: Option<ferromq_remoting::tls::ClientTls>,
}

/// What the broker does now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Not decided yet (no id, no master known): no writes, no replication.
    Fenced,
    /// This broker is the master.
    Master {
        /// The master epoch it leads in.
        epoch: i32,
        /// Its SyncStateSet and that set's epoch.
        sync_state_set: SyncStateSet,
    },
    /// This broker replicates from another.
    Slave {
        /// The master's id.
        master_id: i64,
        /// The master's address (`ip:listenPort`).
        master_addr: String,
        /// The master epoch.
        epoch: i32,
    },
}

impl Role {
    fn epoch(&self) -> Option<i32> {
        match self {
            Role::Fenced => None,
            Role::Master { epoch, .. } | Role::Slave { epoch, .. } => Some(*epoch),
        }
    }
}

/// What a heartbeat reports about the local store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalState {
    /// The last epoch in the local epoch file.
    pub epoch: i32,
    /// The CommitLog max offset.
    pub max_offset: i64,
    /// The confirm offset.
    pub confirm_offset: i64,
}

/// A controller request that failed.
#[derive(Debug, thiserror::Error)]
pub enum ControllerModeError {
    /// No controller answered, or none knows a leader.
    #[error("no controller leader reachable at {0}")]
    NoLeader(String),
    /// The controller refused.
    #[error("controller {addr} refused {request}: {code} {remark}")]
    Refused {
        /// The controller.
        addr: String,
        /// The request.
        request: &'static str,
        /// Response code.
        code: i32,
        /// Its remark.
        remark: String,
    },
    /// The identity files.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The identity on disk is for another broker set.
    #[error(
        "{path}: this store belongs to {found}, not {cluster}#{broker_name}; point storePathBrokerIdentity elsewhere"
    )]
    WrongSet {
        /// The identity file.
        path: PathBuf,
        /// What it holds.
        found: String,
        /// The configured cluster.
        cluster: String,
        /// The configured broker name.
        broker_name: String,
    },
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A controller-mode broker's link to the controller group.
pub struct ReplicasManager {
    cfg: ControllerModeConfig,
    client: RemotingClient,
    leader: Mutex<Option<String>>,
    identity: BrokerIdentity,
    role: watch::Sender<Role>,
}

impl std::fmt::Debug for ReplicasManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicasManager").field("identity", &self.identity).finish_non_exhaustive()
    }
}

impl ReplicasManager {
    /// Takes (or finds on disk) this broker's id and registers it. The role is [`Role::Fenced`]
    /// until [`ReplicasManager::sync_role`] (run by [`ReplicasManager::run`]) learns it.
    ///
    /// # Errors
    /// No controller leader, a refusal, the identity files.
    pub async fn start(cfg: ControllerModeConfig) -> Result<Arc<ReplicasManager>, ControllerModeError> {
        let client = RemotingClient::new(ClientConfig::default().with_tls(cfg.client_tls.clone()));
        let mut m = ReplicasManager {
            identity: BrokerIdentity {
                cluster_name: cfg.cluster_name.clone(),
                broker_name: cfg.broker_name.clone(),
                broker_id: -1,
            },
            cfg,
            client,
            leader: Mutex::new(None),
            role: watch::channel(Role::Fenced).0,
        };
        m.identity = m.take_identity().await?;
        info!(broker_id = m.identity.broker_id, broker_name = %m.identity.broker_name, "broker id in the controller's broker set");
        Ok(Arc::new(m))
    }

    /// This broker's controller-assigned id.
    pub fn broker_id(&self) -> i64 {
        self.identity.broker_id
    }

    /// The current role, and its changes.
    pub fn role(&self) -> watch::Receiver<Role> {
        self.role.subscribe()
    }

    async fn find_leader(&self) -> Result<String, ControllerModeError> {
        if let Some(l) = self.leader.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(l);
        }
        for addr in &self.cfg.controller_addrs {
            let req = RemotingCommand::request(request_code::CONTROLLER_GET_METADATA_INFO);
            let Ok(r) = self.client.invoke(addr, req, self.cfg.request_timeout).await else { continue };
            let Ok(h) = r.decode_header::<GetMetaDataResponseHeader>() else { continue };
            if let Some(leader) = h.controller_leader_address.filter(|l| !l.is_empty()) {
                *self.leader.lock().unwrap_or_else(|e| e.into_inner()) = Some(leader.clone());
                return Ok(leader);
            }
        }
        Err(ControllerModeError::NoLeader(self.cfg.controller_addrs.join(";")))
    }

    /// Sends `request` to the leader; on a transport failure or CONTROLLER_NOT_LEADER finds the
    /// leader again and retries once. Codes in `accept` besides SUCCESS are answers, not errors.
    async fn call(&self, request: RemotingCommand, accept: &[i32]) -> Result<RemotingCommand, ControllerModeError> {
        let name = request_code::name(request.code).unwrap_or("CONTROLLER_REQUEST");
        let mut last = None;
        for _ in 0..2 {
            let leader = self.find_leader().await?;
            match self.client.invoke(&leader, request.clone(), self.cfg.request_timeout).await {
                Ok(r) if r.code == response_code::SUCCESS || accept.contains(&r.code) => return Ok(r),
                Ok(r) => {
                    let err = ControllerModeError::Refused {
                        addr: leader,
                        request: name,
                        code: r.code,
                        remark: r.remark.unwrap_or_default(),
                    };
                    if r.code != response_code::CONTROLLER_NOT_LEADER {
                        return Err(err);
                    }
                    last = Some(err);
                }
                Err(e) => last = Some(ControllerModeError::NoLeader(format!("{leader}: {e}"))),
            }
            *self.leader.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        Err(last.unwrap_or_else(|| ControllerModeError::NoLeader(self.cfg.controller_addrs.join(";"))))
    }

    /// The id on disk; else the pending one applied for again; else a new one (§5.1 step 2).
    async fn take_identity(&self) -> Result<BrokerIdentity, ControllerModeError> {
        let path = &self.cfg.identity_path;
        if let Some(id) = BrokerIdentity::load(path)? {
            if id.cluster_name != self.cfg.cluster_name || id.broker_name != self.cfg.broker_name {
                return Err(ControllerModeError::WrongSet {
                    path: path.clone(),
                    found: id.encode(),
                    cluster: self.cfg.cluster_name.clone(),
                    broker_name: self.cfg.broker_name.clone(),
                });
            }
            return Ok(id);
        }
        let pending = match PendingIdentity::load(path)? {
            Some(p)
                if p.identity.cluster_name == self.cfg.cluster_name
                    && p.identity.broker_name == self.cfg.broker_name =>
            {
                p
            }
            _ => {
                let r = self
                    .call(
                        RemotingCommand::request(request_code::CONTROLLER_GET_NEXT_BROKER_ID).with_header(
                            &GetNextBrokerIdRequestHeader {
                                cluster_name: self.cfg.cluster_name.clone(),
                                broker_name: self.cfg.broker_name.clone(),
                            },
                        ),
                        &[],
                    )
                    .await?;
                let next =
                    r.decode_header::<GetNextBrokerIdResponseHeader>().ok().and_then(|h| h.next_broker_id).unwrap_or(1);
                let p = PendingIdentity {
                    identity: BrokerIdentity {
                        cluster_name: self.cfg.cluster_name.clone(),
                        broker_name: self.cfg.broker_name.clone(),
                        broker_id: next,
                    },
                    register_check_code: format!("{};{}", self.cfg.broker_addr, now_ms()),
                };
                // Stored before asking: a crash after the controller granted the id leaves
                // the check code that lets this broker claim the same id again.
                p.store(path)?;
                p
            }
        };
        let applied = self
            .call(
                RemotingCommand::request(request_code::CONTROLLER_APPLY_BROKER_ID).with_header(
                    &ApplyBrokerIdRequestHeader {
                        cluster_name: self.cfg.cluster_name.clone(),
                        broker_name: self.cfg.broker_name.clone(),
                        applied_broker_id: pending.identity.broker_id,
                        register_check_code: pending.register_check_code.clone(),
                    },
                ),
                &[],
            )
            .await;
        if let Err(ControllerModeError::Refused { code: response_code::CONTROLLER_BROKER_ID_INVALID, .. }) = &applied {
            // Another broker of the set took this id first (both were offered the same next
            // id): forget it, so the next attempt asks for a new one (Java clears its temp file
            // the same way). Any other failure keeps it: the grant may have happened.
            warn!(broker_id = pending.identity.broker_id, "broker id taken by another replica; asking for a new one");
            PendingIdentity::remove(path)?;
        }
        applied?;
        pending.identity.store(path)?;
        PendingIdentity::remove(path)?;
        Ok(pending.identity)
    }

    /// One heartbeat to the leader.
    ///
    /// # Errors
    /// No leader, or a refusal.
    pub async fn heartbeat(&self, local: LocalState) -> Result<(), ControllerModeError> {
        let h = BrokerHeartbeatRequestHeader {
            cluster_name: self.cfg.cluster_name.clone(),
            broker_addr: self.cfg.broker_addr.clone(),
            broker_name: self.cfg.broker_name.clone(),
            broker_id: Some(self.identity.broker_id),
            epoch: Some(local.epoch),
            max_offset: Some(local.max_offset),
            confirm_offset: Some(local.confirm_offset),
            heartbeat_timeout_mills: Some(self.cfg.heartbeat_timeout.as_millis() as i64),
            election_priority: Some(self.cfg.election_priority),
        };
        self.call(RemotingCommand::request(request_code::BROKER_HEARTBEAT).with_header(&h), &[]).await.map(|_| ())
    }

    /// Registers (REGISTER_BROKER), then learns the role: the master the controller names,
    /// or, when the set has none, an election asked for with this broker's id (§5.1 steps 3-5).
    ///
    /// # Errors
    /// No leader, or a refusal.
    pub async fn sync_role(&self) -> Result<Role, ControllerModeError> {
        let r = self
            .call(
                RemotingCommand::request(request_code::CONTROLLER_REGISTER_BROKER).with_header(
                    &RegisterBrokerToControllerRequestHeader {
                        cluster_name: self.cfg.cluster_name.clone(),
                        broker_name: self.cfg.broker_name.clone(),
                        broker_id: self.identity.broker_id,
                        broker_address: self.cfg.broker_addr.clone(),
                        invoke_time: Some(now_ms()),
                    },
                ),
                &[],
            )
            .await?;
        let h: RegisterBrokerToControllerResponseHeader = r.decode_header().unwrap_or_default();
        let set = SyncStateSet::decode(&r.body).unwrap_or_default();
        if let (Some(id), Some(addr)) = (h.master_broker_id, h.master_address.clone()) {
            return Ok(self.apply_view(id, addr, h.master_epoch.unwrap_or(0), set));
        }
        let r = self
            .call(
                RemotingCommand::request(request_code::CONTROLLER_ELECT_MASTER).with_header(
                    &ElectMasterRequestHeader {
                        cluster_name: Some(self.cfg.cluster_name.clone()),
                        broker_name: self.cfg.broker_name.clone(),
                        broker_id: Some(self.identity.broker_id),
                        designate_elect: Some(false),
                        invoke_time: Some(now_ms()),
                    },
                ),
                &[response_code::CONTROLLER_MASTER_STILL_EXIST],
            )
            .await?;
        let h: ElectMasterResponseHeader = r.decode_header().unwrap_or_default();
        match (h.master_broker_id, h.master_address) {
            (Some(id), Some(addr)) => {
                let set = SyncStateSet {
                    sync_state_set: ferromq_protocol::body::ElectMasterResponseBody::decode(&r.body)
                        .map(|b| b.sync_state_set)
                        .unwrap_or_default(),
                    sync_state_set_epoch: h.sync_state_set_epoch.unwrap_or(0),
                };
                Ok(self.apply_view(id, addr, h.master_epoch.unwrap_or(0), set))
            }
            _ => Ok(self.role.borrow().clone()),
        }
    }

    /// GET_REPLICA_INFO: the periodic check (§5.1 step 6).
    ///
    /// # Errors
    /// No leader, or a refusal (CONTROLLER_BROKER_METADATA_NOT_EXIST: the set was cleaned).
    pub async fn check_replica_info(&self) -> Result<Role, ControllerModeError> {
        let r = self
            .call(
                RemotingCommand::request(request_code::CONTROLLER_GET_REPLICA_INFO)
                    .with_header(&GetReplicaInfoRequestHeader { broker_name: self.cfg.broker_name.clone() }),
                &[],
            )
            .await?;
        let h: GetReplicaInfoResponseHeader = r.decode_header().unwrap_or_default();
        let set = SyncStateSet::decode(&r.body).unwrap_or_default();
        match (h.master_broker_id, h.master_address) {
            (Some(id), Some(addr)) => Ok(self.apply_view(id, addr, h.master_epoch.unwrap_or(0), set)),
            // No master: ask for an election (this broker may win it).
            _ => self.sync_role().await,
        }
    }

    /// NOTIFY_BROKER_ROLE_CHANGED from the controller (the broker's request handler calls it).
    pub fn on_role_changed(&self, h: &NotifyBrokerRoleChangedRequestHeader, body: &[u8]) -> Role {
        match (h.master_broker_id, h.master_address.clone()) {
            (Some(id), Some(addr)) => {
                let set = SyncStateSet::decode(body).unwrap_or_default();
                self.apply_view(id, addr, h.master_epoch.unwrap_or(0), set)
            }
            _ => self.role.borrow().clone(),
        }
    }

    /// As master: asks the controller to make `new_set` the SyncStateSet (the HA service
    /// decides who is in sync, §5.3). Returns the new set with its epoch.
    ///
    /// # Errors
    /// Not the master (by the controller's view), stale epochs, replicas not alive.
    pub async fn alter_sync_state_set(&self, new_set: BTreeSet<i64>) -> Result<SyncStateSet, ControllerModeError> {
        let Role::Master { epoch, sync_state_set } = self.role.borrow().clone() else {
            return Err(ControllerModeError::Refused {
                addr: String::new(),
                request: "CONTROLLER_ALTER_SYNC_STATE_SET",
                code: response_code::CONTROLLER_INVALID_MASTER,
                remark: "this broker is not the master".to_owned(),
            });
        };
        let proposed =
            SyncStateSet { sync_state_set: new_set, sync_state_set_epoch: sync_state_set.sync_state_set_epoch };
        let r = self
            .call(
                RemotingCommand::request(request_code::CONTROLLER_ALTER_SYNC_STATE_SET)
                    .with_header(&AlterSyncStateSetRequestHeader {
                        broker_name: self.cfg.broker_name.clone(),
                        master_broker_id: self.identity.broker_id,
                        master_epoch: epoch,
                        invoke_time: Some(now_ms()),
                    })
                    .with_body(proposed.encode()),
                &[],
            )
            .await?;
        let h: AlterSyncStateSetResponseHeader = r.decode_header().unwrap_or_default();
        let set = SyncStateSet {
            sync_state_set: SyncStateSet::decode(&r.body).map(|b| b.sync_state_set).unwrap_or(proposed.sync_state_set),
            sync_state_set_epoch: h.new_sync_state_set_epoch.unwrap_or(proposed.sync_state_set_epoch + 1),
        };
        self.role.send_if_modified(|role| match role {
            Role::Master { epoch: e, sync_state_set } if *e == epoch => {
                *sync_state_set = set.clone();
                true
            }
            _ => false,
        });
        Ok(set)
    }

    /// Publishes the role a controller view gives, unless its epoch is older than the one
    /// known (a stale answer must not undo a newer decision).
    fn apply_view(&self, master_id: i64, master_addr: String, epoch: i32, set: SyncStateSet) -> Role {
        let new = if master_id == self.identity.broker_id {
            Role::Master { epoch, sync_state_set: set }
        } else {
            Role::Slave { master_id, master_addr, epoch }
        };
        self.role.send_if_modified(|role| {
            if role.epoch().is_some_and(|known| epoch < known) || *role == new {
                return false;
            }
            info!(broker_id = self.identity.broker_id, role = ?new, "role from the controller");
            *role = new.clone();
            true
        });
        self.role.borrow().clone()
    }

    /// Heartbeats every `brokerHeartbeatInterval` and the role check every
    /// `syncBrokerMetadataPeriod`, until `shutdown`. `local` reports the store's state.
    pub async fn run(
        self: Arc<Self>,
        local: impl Fn() -> LocalState + Send + 'static,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut beat = tokio::time::interval(self.cfg.heartbeat_interval);
        let mut sync = tokio::time::interval(self.cfg.sync_period);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        sync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                _ = beat.tick() => {
                    if let Err(e) = self.heartbeat(local()).await {
                        warn!(error = %e, "heartbeat to the controller failed");
                    }
                }
                _ = sync.tick() => {
                    let checked = if *self.role.borrow() == Role::Fenced {
                        self.sync_role().await
                    } else {
                        self.check_replica_info().await
                    };
                    if let Err(e) = checked {
                        warn!(error = %e, "role check with the controller failed");
                    }
                }
            }
        }
    }

    /// Closes the connections to the controllers.
    pub async fn shutdown(&self) {
        self.client.shutdown().await;
    }
}
