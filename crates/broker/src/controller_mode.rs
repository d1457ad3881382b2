//! A controller-mode broker (`enableControllerMode=true`, controller-mode.md §5): the
//! controller group decides whether this broker is master or slave, and this module acts on
//! each decision at runtime, without a restart (Java: `ReplicasManager#changeToMaster`,
//! `changeToSlave`).
//!
//! - Until the controller names a role the broker is fenced: it refuses writes, does not
//!   register with the name servers and runs no replication.
//! - **To master** (epoch E): the replica client stops; the AutoSwitchHA master starts on the
//!   HA port with epoch E recorded in the epoch file; dispatch catches up and the queue-offset
//!   table is rebuilt from the consume queues; the master-only services start (delay levels,
//!   timer wheel, POP revive, transaction check and op writer); the broker takes writes as
//!   SYNC_MASTER and registers as brokerId 0.
//! - **To slave**: the master-only services and the AutoSwitchHA master stop; the replica client
//!   starts (its HA address comes from the name servers once they list the controller's
//!   master); the broker registers under its controller-assigned id and syncs metadata.
//! - As master it keeps the SyncStateSet current: every `checkSyncStateSetPeriod`, and at once
//!   when a replica catches up, it proposes the set the HA service wants (ALTER_SYNC_STATE_SET).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use ferromq_protocol::header::NotifyBrokerRoleChangedRequestHeader;
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_replication::autoswitch::{AutoSwitchMaster, AutoSwitchSlave, SyncStateSet};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};
use tracing::{error, info, warn};

use crate::broker::Broker;
use crate::config::{BrokerRole, BrokerSettings};
use crate::ha::{Replication, RuntimeRole};
use crate::processor::{failure, success};
use crate::replicas_manager::{ControllerModeConfig, ControllerModeError, LocalState, ReplicasManager, Role};

/// Pause before joining the controllers again, or retrying a role that could not be taken.
const RETRY: Duration = Duration::from_secs(5);
/// How long a new master waits for dispatch to catch up before taking writes.
const DISPATCH_CATCH_UP: Duration = Duration::from_secs(60);
/// Attempts to bind the HA port (a previous master service may still be closing it).
const HA_BIND_ATTEMPTS: u32 = 25;

/// What runs only while this broker is master.
struct MasterServices {
    tasks: JoinSet<()>,
    timer: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl MasterServices {
    async fn stop(mut self, broker: &Broker) {
        self.tasks.shutdown().await;
        if let Some((stop, task)) = self.timer.take() {
            let _ = stop.send(());
            let _ = task.await;
        }
        broker.replace_timer(None);
    }
}

fn manager_config(broker: &Broker, settings: &BrokerSettings) -> ControllerModeConfig {
    let c = &settings.broker;
    ControllerModeConfig {
        controller_addrs: c
            .controller_addr
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(Into::into)
            .collect(),
        cluster_name: c.broker_cluster_name.clone(),
        broker_name: c.broker_name.clone(),
        broker_addr: broker.config.broker_addr(),
        identity_path: settings.broker_identity_path(),
        heartbeat_interval: Duration::from_millis(c.broker_heartbeat_interval.max(100)),
        heartbeat_timeout: Duration::from_millis(c.controller_heart_beat_timeout_mills),
        request_timeout: Duration::from_millis(c.send_heartbeat_timeout_millis.max(100)),
        sync_period: Duration::from_millis(c.sync_broker_metadata_period.max(100)),
        election_priority: c.broker_election_priority,
        client_tls: broker.client_tls.clone(),
    }
}

/// Joins the controllers and follows their decisions until the broker stops (the task is
/// aborted then; the broker shuts the replication and the wheel down itself).
pub(crate) async fn run(broker: Arc<Broker>, settings: BrokerSettings, ha_bind: IpAddr) {
    let cfg = manager_config(&broker, &settings);
    let manager = loop {
        match ReplicasManager::start(cfg.clone()).await {
            Ok(m) => break m,
            Err(e @ ControllerModeError::WrongSet { .. }) => {
                // Not something a retry fixes: the store belongs to another broker set.
                error!(error = %e, "controller mode cannot start; the broker stays fenced");
                return;
            }
            Err(e) => {
                warn!(error = %e, controller_addr = %settings.broker.controller_addr,
                    "cannot join the controllers' broker set; retrying in 5 s");
                tokio::time::sleep(RETRY).await;
            }
        }
    };
    let _ = broker.replicas_manager.set(manager.clone());
    let my_id = manager.broker_id();
    let mut background = JoinSet::new();
    {
        let b = broker.clone();
        let local = move || LocalState {
            epoch: b
                .epochs
                .as_ref()
                .and_then(|e| e.lock().unwrap_or_else(|p| p.into_inner()).last())
                .map_or(0, |e| e.epoch),
            max_offset: b.store.max_phy_offset(),
            confirm_offset: b.store.confirm_offset(),
        };
        background.spawn(manager.clone().run(local, std::future::pending()));
    }
    let mut roles = manager.role();
    let mut services: Option<MasterServices> = None;
    let check_every = Duration::from_millis(settings.broker.check_sync_state_set_period.max(100));
    let mut check = tokio::time::interval(check_every);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let role = roles.borrow_and_update().clone();
        let taken = take_role(&broker, &settings, ha_bind, my_id, &role, &mut services).await;
        // Fixed once: the SyncStateSet checks below must not push the retry back each time.
        let retry_at = tokio::time::Instant::now() + RETRY;
        loop {
            let master = match broker.replication() {
                Replication::AutoSwitchMaster(m) => Some(m),
                _ => None,
            };
            let expand = async {
                match &master {
                    Some(m) => m.expand_wanted().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = roles.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    break;
                }
                _ = tokio::time::sleep_until(retry_at), if !taken => break,
                _ = check.tick() => maintain_sync_state_set(&manager, master.as_deref()).await,
                () = expand => maintain_sync_state_set(&manager, master.as_deref()).await,
            }
        }
    }
}

fn sync_state_set(set: &ferromq_protocol::body::SyncStateSet) -> SyncStateSet {
    SyncStateSet { members: set.sync_state_set.clone(), epoch: set.sync_state_set_epoch }
}

/// Acts on `role`; false when it could not be taken (retried later).
async fn take_role(
    broker: &Arc<Broker>,
    settings: &BrokerSettings,
    ha_bind: IpAddr,
    my_id: i64,
    role: &Role,
    services: &mut Option<MasterServices>,
) -> bool {
    match role {
        Role::Fenced => true,
        Role::Master { epoch, sync_state_set: set } => {
            if let Replication::AutoSwitchMaster(m) = broker.replication() {
                if m.master_epoch() == *epoch {
                    m.set_sync_state_set(sync_state_set(set));
                    return true;
                }
            }
            match become_master(broker, settings, ha_bind, my_id, *epoch, sync_state_set(set), services).await {
                Ok(()) => true,
                Err(reason) => {
                    error!(master_epoch = epoch, reason, "cannot become master; retrying in 5 s");
                    false
                }
            }
        }
        Role::Slave { master_id, master_addr, epoch } => {
            become_slave(broker, settings, my_id, *master_id, master_addr, *epoch, services).await;
            true
        }
    }
}

async fn become_master(
    broker: &Arc<Broker>,
    settings: &BrokerSettings,
    ha_bind: IpAddr,
    my_id: i64,
    epoch: i32,
    set: SyncStateSet,
    services: &mut Option<MasterServices>,
) -> Result<(), String> {
    info!(broker_id = my_id, master_epoch = epoch, sync_state_set = ?set.members, "becoming master");
    // No writes while the role changes.
    broker.set_role(RuntimeRole { broker_role: BrokerRole::Slave, broker_id: my_id, fenced: false });
    if let Some(s) = services.take() {
        s.stop(broker).await;
    }
    crate::ha::shut_down(broker.replace_replication(Replication::None)).await;
    let port = settings.ha_listen_port();
    let mut attempt = 0;
    let listener = loop {
        match TcpListener::bind((ha_bind, port)).await {
            Ok(l) => break l,
            Err(e) if attempt + 1 < HA_BIND_ATTEMPTS => {
                attempt += 1;
                warn!(port, error = %e, "HA port busy; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                return Err(format!("cannot bind the HA port {ha_bind}:{port}: {e}; set haListenPort to a free port"))
            }
        }
    };
    let epochs = broker.epochs.clone().ok_or("controller mode without an epoch file")?;
    let master = AutoSwitchMaster::start(
        broker.store.clone(),
        settings.ha.clone(),
        my_id,
        epoch,
        set,
        epochs,
        broker.ha_security.listener(listener),
    )
    .map_err(|e| format!("{e}: {}", std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_default()))?;
    // Every record this log holds gets its queue offset before new puts take the next ones.
    let store = broker.store.clone();
    let caught_up = tokio::task::spawn_blocking(move || {
        let done = store.wait_dispatched(DISPATCH_CATCH_UP);
        store.recover_topic_queue_table();
        done
    })
    .await
    .unwrap_or(false);
    if !caught_up {
        warn!(behind = broker.store.dispatch_behind_bytes(), "dispatch did not catch up before taking writes");
    }
    broker.replace_replication(Replication::AutoSwitchMaster(Arc::new(master)));
    *broker.master_addr.write().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    broker.set_role(RuntimeRole { broker_role: BrokerRole::SyncMaster, broker_id: 0, fenced: false });
    *services = Some(start_master_services(broker, settings).await);
    broker.register_soon();
    info!(broker_id = my_id, master_epoch = epoch, "master: taking writes");
    Ok(())
}

async fn start_master_services(broker: &Arc<Broker>, settings: &BrokerSettings) -> MasterServices {
    let mut tasks = JoinSet::new();
    let mut timer = None;
    let timer_config = crate::timer::timer_config(&settings.store);
    if timer_config.timer_wheel_enable {
        let (cfg, root, s) = (timer_config, settings.store.store_path_root_dir.clone(), broker.store.clone());
        // Not while the slave sync replaces the files with a master's progress.
        let _files = broker.timer_files.lock().await;
        match tokio::task::spawn_blocking(move || ferromq_timer::TimerMessageStore::open(cfg, &root, s)).await {
            Ok(Ok(t)) => {
                broker.replace_timer(Some(t.clone()));
                let (stop, stopped) = oneshot::channel::<()>();
                let task = tokio::spawn(t.run(async {
                    let _ = stopped.await;
                }));
                timer = Some((stop, task));
            }
            Ok(Err(e)) => error!(error = %e, "timer wheel failed to open; timed messages and POP revive are off"),
            Err(e) => error!(error = %e, "timer wheel open panicked"),
        }
    }
    crate::schedule::start(broker, &mut tasks);
    crate::pop::revive::start(broker, &mut tasks);
    {
        let b = broker.clone();
        tasks.spawn(async move { b.run_op_writer().await });
    }
    tasks.spawn(crate::transaction::check::run(broker.clone()));
    MasterServices { tasks, timer }
}

async fn become_slave(
    broker: &Arc<Broker>,
    settings: &BrokerSettings,
    my_id: i64,
    master_id: i64,
    master_addr: &str,
    epoch: i32,
    services: &mut Option<MasterServices>,
) {
    let same_master = broker.master_addr().as_deref() == Some(master_addr);
    if let (Replication::AutoSwitchSlave(_), true) = (broker.replication(), same_master) {
        return;
    }
    info!(broker_id = my_id, master_id, master_addr, master_epoch = epoch, "becoming slave");
    broker.set_role(RuntimeRole { broker_role: BrokerRole::Slave, broker_id: my_id, fenced: false });
    if let Some(s) = services.take() {
        s.stop(broker).await;
    }
    let previous = broker.replace_replication(Replication::None);
    crate::ha::shut_down(previous).await;
    let epochs = broker.epochs.clone().expect("controller mode has an epoch file");
    // The HA address is learned from the name servers once they list this master.
    let client = AutoSwitchSlave::start(
        broker.store.clone(),
        settings.ha.clone(),
        broker.ha_security.client.clone(),
        my_id,
        epochs,
        None,
    );
    *broker.master_addr.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(master_addr.to_owned());
    broker.replace_replication(Replication::AutoSwitchSlave(Arc::new(client)));
    broker.register_soon();
}

/// As master: proposes the SyncStateSet the HA service wants, and applies what the controller
/// agrees to.
async fn maintain_sync_state_set(manager: &ReplicasManager, master: Option<&AutoSwitchMaster>) {
    let Some(master) = master else { return };
    let Some(wanted) = master.wanted_sync_state_set() else { return };
    // Replicas being added count for acknowledgements from now on: the controller may add
    // them (and elect one) before its answer arrives.
    master.propose(&wanted);
    match manager.alter_sync_state_set(wanted.clone()).await {
        Ok(set) => master.set_sync_state_set(sync_state_set(&set)),
        Err(e) => {
            warn!(wanted = ?wanted, error = %e, "SyncStateSet change refused");
            // The controller's view settles the proposal; until it is known the pending
            // replicas keep counting (a lost answer may hide an accepted change).
            if let Ok(Role::Master { sync_state_set: set, .. }) = manager.check_replica_info().await {
                master.set_sync_state_set(sync_state_set(&set));
            }
        }
    }
}

impl Broker {
    /// GET_BROKER_EPOCH_CACHE (1007): the epoch file with end offsets, for `getBrokerEpoch`.
    /// Java answers SYSTEM_ERROR outside controller mode, as here.
    pub(crate) fn get_broker_epoch_cache(&self, req: &RemotingCommand) -> RemotingCommand {
        let Some(epochs) = &self.epochs else {
            return failure(req, response_code::SYSTEM_ERROR, "this request only for controllerMode");
        };
        let entries = epochs.lock().unwrap_or_else(|e| e.into_inner()).entries().to_vec();
        let epoch_list = entries
            .iter()
            .enumerate()
            .map(|(i, e)| ferromq_protocol::body::EpochEntryBody {
                epoch: e.epoch,
                start_offset: e.start_offset,
                end_offset: entries.get(i + 1).map_or(i64::MAX, |next| next.start_offset),
            })
            .collect();
        let cache = ferromq_protocol::body::EpochEntryCache {
            broker_id: self.role().broker_id,
            broker_name: self.config.broker_name.clone(),
            cluster_name: self.config.broker_cluster_name.clone(),
            epoch_list,
            max_offset: self.store.max_phy_offset(),
        };
        success(req).with_body(ferromq_protocol::body::JsonBody::encode(&cache))
    }

    /// NOTIFY_BROKER_ROLE_CHANGED (1008), pushed by the controller leader.
    pub(crate) fn notify_broker_role_changed(&self, req: &RemotingCommand) -> RemotingCommand {
        let Some(manager) = self.replicas_manager.get() else {
            return failure(
                req,
                response_code::REQUEST_CODE_NOT_SUPPORTED,
                "this broker is not in controller mode (enableControllerMode=false)",
            );
        };
        let header: NotifyBrokerRoleChangedRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, e.to_string()),
        };
        manager.on_role_changed(&header, &req.body);
        success(req)
    }
}
