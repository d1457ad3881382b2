//! The master's side of AutoSwitchHA. Java: `AutoSwitchHAService` (master part),
//! `AutoSwitchHAConnection`.
//!
//! Each replica connection: the replica's handshake (its broker id, learner flag), the
//! master's handshake (its end and epochs), the replica's first report (where it truncated to:
//! shipping starts there), then frames of at most `haTransferBatchSize` bytes that never cross
//! an epoch boundary, each with the epoch's start and the confirm offset, and heartbeats when
//! idle. Reports acknowledge; they also move the replica's caught-up time, which decides
//! SyncStateSet membership.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use ferromq_store::MessageStore;
use tokio::io::AsyncReadExt;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use tracing::{debug, info, trace, warn};

use super::{epochs, SharedEpochs};
use crate::autoswitch_frame::{MasterHandshake, MasterTransfer, SlaveFrame, SlaveFrameReader};
use crate::config::HaConfig;
use crate::error::ReplicaWaitError;
use crate::link::{HaListener, Link, LinkReader, LinkWriter};
use crate::runtime_info::{HaConnectionRuntimeInfo, HaRuntimeInfo};

/// The SyncStateSet as the controller last agreed to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncStateSet {
    /// Broker ids of the members (the master included).
    pub members: BTreeSet<i64>,
    /// Its epoch (`syncStateSetEpoch`).
    pub epoch: i32,
}

/// One replica's connection as the master sees it.
#[derive(Debug)]
struct Replica {
    addr: SocketAddr,
    /// From the handshake; -1 before it.
    broker_id: AtomicI64,
    async_learner: AtomicBool,
    sync_from_last_file: AtomicBool,
    /// The last report; -1 before the first.
    ack: AtomicI64,
    /// The first report: where shipping starts.
    request: watch::Sender<i64>,
    transfer_from: AtomicI64,
    /// The master's end when it last shipped, and when (Java: `lastMasterMaxOffset`,
    /// `lastTransferTimeMs`): a report reaching it means the replica caught up then.
    last_master_max: AtomicI64,
    last_transfer: Mutex<Instant>,
    caught_up: Mutex<Instant>,
}

impl Replica {
    fn id(&self) -> i64 {
        self.broker_id.load(Ordering::Acquire)
    }

    fn ack(&self) -> i64 {
        self.ack.load(Ordering::Acquire)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain values replaced whole: never left half-updated.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug)]
struct Shared {
    store: Arc<MessageStore>,
    config: HaConfig,
    broker_id: i64,
    master_epoch: i32,
    epochs: SharedEpochs,
    data_arrived: Arc<Notify>,
    replicas: Mutex<Vec<Arc<Replica>>>,
    sync_state: Mutex<SyncStateSet>,
    /// Replicas proposed for the SyncStateSet and not yet confirmed by the controller. They
    /// count as members for acknowledgements meanwhile: the controller may already have added
    /// them (and may elect one), so a put must not be acknowledged without them (Java: the
    /// in-sync count is the larger of the local and the proposed set while a change is pending).
    pending: Mutex<BTreeSet<i64>>,
    /// Bumped on every acknowledgement or SyncStateSet change; waiting puts watch it.
    progress: watch::Sender<u64>,
    /// Bumped when a replica may join the SyncStateSet (the broker proposes it at once).
    expand: Notify,
    closed: AtomicBool,
}

impl Shared {
    fn replicas(&self) -> MutexGuard<'_, Vec<Arc<Replica>>> {
        lock(&self.replicas)
    }

    /// The set acknowledgements are counted against: the one in force plus pending additions.
    fn effective(&self) -> SyncStateSet {
        let mut set = lock(&self.sync_state).clone();
        set.members.extend(lock(&self.pending).iter().copied());
        set
    }

    /// Whether dispatch waits for the SyncStateSet: `allAckInSyncStateSet` with other members.
    fn confirm_bounded(&self, set: &SyncStateSet) -> bool {
        self.config.all_ack_in_sync_state_set && set.members.iter().any(|&m| m != self.broker_id)
    }

    /// The confirm offset now: the store's end when nothing is waited for; else the lowest
    /// acknowledgement among the other members, none of which may be disconnected (Java:
    /// `computeConfirmOffset`).
    fn compute_confirm(&self) -> Option<i64> {
        let set = self.effective();
        let max = self.store.max_phy_offset();
        if !self.confirm_bounded(&set) {
            return Some(max);
        }
        let replicas = self.replicas();
        let mut confirm = max;
        for &member in set.members.iter().filter(|&&m| m != self.broker_id) {
            let ack = replicas.iter().filter(|r| r.id() == member).map(|r| r.ack()).max()?;
            confirm = confirm.min(ack);
        }
        Some(confirm)
    }

    /// After the SyncStateSet (or a proposal) changed: whether dispatch waits for the set, then
    /// the confirm offset.
    fn sync_state_changed(&self) {
        self.store.bound_dispatch_by_confirm(self.confirm_bounded(&self.effective()));
        self.update_confirm();
    }

    /// Recomputes the confirm offset and gives it to the store; it never moves back here.
    fn update_confirm(&self) {
        if let Some(confirm) = self.compute_confirm() {
            if confirm > self.store.confirm_offset() {
                self.store.set_confirm_offset(confirm);
            }
        }
        self.progress.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The confirm offset frames carry.
    fn confirm_for_replicas(&self) -> i64 {
        if self.confirm_bounded(&self.effective()) {
            self.store.confirm_offset()
        } else {
            self.store.max_phy_offset()
        }
    }

    /// A replica reported `offset`.
    fn acknowledged(&self, replica: &Replica, offset: i64) {
        replica.ack.store(offset, Ordering::Release);
        replica.request.send_if_modified(|r| {
            let first = *r < 0;
            if first {
                *r = offset;
            }
            first
        });
        if offset >= replica.last_master_max.load(Ordering::Acquire) {
            let at = if offset >= self.store.max_phy_offset() { Instant::now() } else { *lock(&replica.last_transfer) };
            *lock(&replica.caught_up) = at;
            let id = replica.id();
            let learner = replica.async_learner.load(Ordering::Acquire);
            if !learner && !lock(&self.sync_state).members.contains(&id) && self.may_join(offset) {
                self.expand.notify_one();
            }
        }
        self.update_confirm();
    }

    /// Whether a replica acknowledging `offset` may join the SyncStateSet: it holds what is
    /// confirmed and everything of the current epoch before it. Java:
    /// `maybeExpandInSyncStateSet`.
    fn may_join(&self, offset: i64) -> bool {
        let epoch_start = epochs(&self.epochs).last().map_or(0, |e| e.start_offset);
        offset >= self.confirm_for_replicas() && offset >= epoch_start
    }
}

/// The master's AutoSwitchHA service. Dropping it stops accepting and closes the connections;
/// [`shutdown`](Self::shutdown) waits for that.
#[derive(Debug)]
pub struct AutoSwitchMaster {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    background: crate::net::Background,
}

impl AutoSwitchMaster {
    /// Becomes master for `master_epoch`: records the epoch in the epoch file as starting at
    /// the store's end (or at its first offset when the file is empty, so data written before
    /// controller mode belongs to an epoch too; Java leaves it in none), confirms everything
    /// the store holds (this log is now the one replicas follow; Java keeps the old confirm
    /// offset, so records past it are dispatched after new puts took their queue offsets),
    /// then serves replicas on `listener`. `sync_state` is the SyncStateSet the controller
    /// gave. The caller waits for dispatch and rebuilds the queue-offset table
    /// ([`MessageStore::recover_topic_queue_table`]) before taking writes. Must be called
    /// inside a tokio runtime.
    ///
    /// # Errors
    /// The epoch is older than the file's last one, the file cannot be written, the
    /// listener's address cannot be read.
    pub fn start(
        store: Arc<MessageStore>,
        config: HaConfig,
        broker_id: i64,
        master_epoch: i32,
        sync_state: SyncStateSet,
        epoch_file: SharedEpochs,
        listener: impl Into<HaListener>,
    ) -> Result<AutoSwitchMaster, super::RoleChangeError> {
        {
            let mut file = epochs(&epoch_file);
            match file.last() {
                Some(last) if last.epoch == master_epoch => {}
                last => {
                    let start = if last.is_none() { store.min_phy_offset() } else { store.max_phy_offset() };
                    file.append(master_epoch, start)?;
                    info!(master_epoch, start_offset = start, "new epoch recorded");
                }
            }
        }
        let listener = listener.into();
        let local_addr = listener.local_addr().map_err(super::RoleChangeError::Listener)?;
        let data_arrived = Arc::new(Notify::new());
        let weak = Arc::downgrade(&data_arrived);
        store.on_commit_log_advance(Arc::new(move |_end| match weak.upgrade() {
            Some(notify) => {
                notify.notify_waiters();
                true
            }
            None => false,
        }));
        let shared = Arc::new(Shared {
            store,
            config,
            broker_id,
            master_epoch,
            epochs: epoch_file,
            data_arrived,
            replicas: Mutex::new(Vec::new()),
            sync_state: Mutex::new(sync_state),
            pending: Mutex::new(BTreeSet::new()),
            progress: watch::Sender::new(0),
            expand: Notify::new(),
            closed: AtomicBool::new(false),
        });
        shared.store.set_confirm_offset(shared.store.max_phy_offset());
        shared.sync_state_changed();
        let background = crate::net::Background::spawn(|stop| accept_loop(shared.clone(), listener, stop));
        info!(ha_addr = %local_addr, master_epoch, "AutoSwitchHA master listening for replicas");
        Ok(AutoSwitchMaster { shared, local_addr, background })
    }

    /// The address replicas connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The epoch this master serves.
    pub fn master_epoch(&self) -> i32 {
        self.shared.master_epoch
    }

    /// The SyncStateSet in force.
    pub fn sync_state_set(&self) -> SyncStateSet {
        lock(&self.shared.sync_state).clone()
    }

    /// Records that `wanted` is being proposed to the controller: replicas it adds count as
    /// members for acknowledgements until the controller's answer (or its current view) comes
    /// back through [`set_sync_state_set`](Self::set_sync_state_set).
    pub fn propose(&self, wanted: &BTreeSet<i64>) {
        let current = lock(&self.shared.sync_state).members.clone();
        lock(&self.shared.pending).extend(wanted.difference(&current).copied());
        self.shared.sync_state_changed();
    }

    /// Replaces the SyncStateSet with the controller's view (after it accepted a change, or
    /// when the broker checks its role). An older epoch is ignored; any view at least as new
    /// settles pending proposals.
    pub fn set_sync_state_set(&self, set: SyncStateSet) {
        {
            let mut current = lock(&self.shared.sync_state);
            if set.epoch < current.epoch {
                debug!(epoch = set.epoch, current = current.epoch, "older SyncStateSet ignored");
                return;
            }
            lock(&self.shared.pending).clear();
            if *current != set {
                info!(members = ?set.members, epoch = set.epoch, "SyncStateSet in force");
                *current = set;
            }
        }
        self.shared.sync_state_changed();
    }

    /// The SyncStateSet this master wants: members whose connection is gone or that have not
    /// caught up within `haMaxTimeSlaveNotCatchup` leave; connected replicas (not learners)
    /// that hold the confirmed data and the current epoch join. `None` when it is the one in
    /// force. Java: `maybeShrinkSyncStateSet`, `maybeExpandInSyncStateSet`.
    pub fn wanted_sync_state_set(&self) -> Option<BTreeSet<i64>> {
        let shared = &self.shared;
        let current = lock(&shared.sync_state).members.clone();
        let limit = shared.config.max_time_slave_not_catchup();
        let now = Instant::now();
        let replicas = shared.replicas().clone();
        let mut wanted = BTreeSet::from([shared.broker_id]);
        for &member in current.iter().filter(|&&m| m != shared.broker_id) {
            let fresh = replicas.iter().any(|r| r.id() == member && now.duration_since(*lock(&r.caught_up)) <= limit);
            if fresh {
                wanted.insert(member);
            }
        }
        for r in &replicas {
            let id = r.id();
            let candidate = id >= 0 && !r.async_learner.load(Ordering::Acquire) && !current.contains(&id);
            if candidate && r.ack() >= 0 && shared.may_join(r.ack()) {
                wanted.insert(id);
            }
        }
        (wanted != current).then_some(wanted)
    }

    /// Resolves when a replica may join the SyncStateSet (call
    /// [`wanted_sync_state_set`](Self::wanted_sync_state_set) then).
    pub async fn expand_wanted(&self) {
        self.shared.expand.notified().await;
    }

    /// The confirm offset replicas are told (the store's end when nothing is waited for).
    pub fn confirm_offset(&self) -> i64 {
        self.shared.confirm_for_replicas()
    }

    /// Waits until a SYNC_MASTER put ending at `next_offset` is held as
    /// `allAckInSyncStateSet` or `inSyncReplicas` require: every SyncStateSet member, or that
    /// many members (the master included). Java: `GroupTransferService` in controller mode.
    ///
    /// # Errors
    /// [`ReplicaWaitError::NotAvailable`] when the SyncStateSet is smaller than
    /// `inSyncReplicas`; [`ReplicaWaitError::Timeout`] after `slaveTimeout`;
    /// [`ReplicaWaitError::ShutDown`].
    pub async fn replicate(&self, next_offset: i64) -> Result<(), ReplicaWaitError> {
        let shared = &self.shared;
        let all = shared.config.all_ack_in_sync_state_set;
        let needed = |set: &SyncStateSet| {
            if all {
                set.members.len() as u32
            } else {
                shared.config.in_sync_replicas.max(1)
            }
        };
        let acked = |set: &SyncStateSet| {
            let replicas = shared.replicas();
            let others = set
                .members
                .iter()
                .filter(|&&m| m != shared.broker_id)
                .filter(|&&m| replicas.iter().any(|r| r.id() == m && r.ack() >= next_offset))
                .count();
            1 + others as u32
        };
        // A master that stepped down (its service closed) answers for nothing, even a put that
        // needs no replica: its log past the new master's epoch start is cut when it follows.
        if shared.closed.load(Ordering::Acquire) {
            return Err(ReplicaWaitError::ShutDown);
        }
        {
            let set = shared.effective();
            let need = needed(&set);
            if need <= 1 {
                return Ok(());
            }
            if !all && (set.members.len() as u32) < need {
                return Err(ReplicaWaitError::NotAvailable { in_sync: set.members.len() as u32, needed: need });
            }
        }
        let mut progress = shared.progress.subscribe();
        let deadline = tokio::time::Instant::now() + shared.config.slave_timeout();
        loop {
            if shared.closed.load(Ordering::Acquire) {
                return Err(ReplicaWaitError::ShutDown);
            }
            let set = shared.effective();
            let (need, have) = (needed(&set), acked(&set));
            if have >= need {
                return Ok(());
            }
            match tokio::time::timeout_at(deadline, progress.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(ReplicaWaitError::ShutDown),
                Err(_) => return Err(ReplicaWaitError::Timeout { next_offset, acked: have, needed: need }),
            }
        }
    }

    /// Connected replicas.
    pub fn connection_count(&self) -> usize {
        self.shared.replicas().len()
    }

    /// The replication state for GET_BROKER_HA_STATUS (master side).
    pub fn runtime_info(&self) -> HaRuntimeInfo {
        let shared = &self.shared;
        let max = shared.store.max_phy_offset();
        let members = lock(&shared.sync_state).members.clone();
        let replicas = shared.replicas().clone();
        let mut in_sync = 0;
        let ha_connection_info = replicas
            .iter()
            .map(|r| {
                let ack = r.ack();
                let member = members.contains(&r.id());
                in_sync += i32::from(member);
                HaConnectionRuntimeInfo {
                    addr: r.addr.to_string(),
                    diff: max - ack,
                    in_sync: member,
                    slave_ack_offset: ack,
                    transfer_from_where: r.transfer_from.load(Ordering::Acquire),
                    transferred_byte_in_second: 0,
                }
            })
            .collect();
        HaRuntimeInfo {
            master: true,
            master_commit_log_max_offset: max,
            in_sync_slave_nums: in_sync,
            ha_connection_info,
            ..HaRuntimeInfo::default()
        }
    }

    /// Stops accepting, closes every connection and fails waiting puts; returns when done.
    pub async fn shutdown(&self) {
        self.signal_shutdown();
        self.background.stop().await;
    }

    fn signal_shutdown(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.background.signal();
        self.shared.progress.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Drop for AutoSwitchMaster {
    fn drop(&mut self) {
        self.signal_shutdown();
    }
}

async fn accept_loop(shared: Arc<Shared>, listener: HaListener, shutdown: watch::Receiver<bool>) {
    let white_list = shared.config.ha_slave_white_list.clone();
    let first_byte_timeout = shared.config.housekeeping_interval();
    let serving = shared.clone();
    crate::net::accept_loop(listener, &white_list, first_byte_timeout, shutdown, move |link, addr, stop| {
        serve(serving.clone(), link, addr, stop)
    })
    .await;
    info!("AutoSwitchHA master stopped");
}

/// Why a replica connection closed.
#[derive(Debug, thiserror::Error)]
enum Closed {
    #[error("the replica closed the connection")]
    Eof,
    #[error("nothing read from the replica within haHousekeepingInterval ({0:?})")]
    Expired(Duration),
    #[error("socket error")]
    Io(#[from] std::io::Error),
    #[error("a write did not complete within haHousekeepingInterval ({0:?})")]
    WriteStalled(Duration),
    #[error("bad frame from the replica")]
    Frame(#[from] crate::autoswitch_frame::FrameError),
    #[error("the replica reports offset {replica}, beyond the master's end {master}: its log has diverged")]
    Diverged { replica: i64, master: i64 },
    #[error("no epoch covers physical offset {0}")]
    NoEpoch(i64),
    #[error("the service is shutting down")]
    ShutDown,
}

async fn serve(shared: Arc<Shared>, link: Link, addr: SocketAddr, mut shutdown: watch::Receiver<bool>) {
    let now = Instant::now();
    let replica = Arc::new(Replica {
        addr,
        broker_id: AtomicI64::new(-1),
        async_learner: AtomicBool::new(false),
        sync_from_last_file: AtomicBool::new(false),
        ack: AtomicI64::new(-1),
        request: watch::Sender::new(-1),
        transfer_from: AtomicI64::new(-1),
        last_master_max: AtomicI64::new(i64::MAX),
        last_transfer: Mutex::new(now),
        // A new connection has not caught up yet: only a report moves this.
        caught_up: Mutex::new(now.checked_sub(Duration::from_secs(3600)).unwrap_or(now)),
    });
    shared.replicas().push(replica.clone());
    let Link { reader, writer } = link;
    let (handshaken_tx, handshaken_rx) = tokio::sync::oneshot::channel();
    let closed = tokio::select! {
        c = read_side(&shared, &replica, reader, handshaken_tx) => c,
        c = write_side(&shared, &replica, writer, handshaken_rx) => c,
        _ = crate::stopped(&mut shutdown) => Closed::ShutDown,
    };
    shared.replicas().retain(|r| !Arc::ptr_eq(r, &replica));
    shared.update_confirm();
    match &closed {
        Closed::Diverged { .. } | Closed::Frame(_) | Closed::NoEpoch(_) => {
            warn!(remote_addr = %addr, broker_id = replica.id(), reason = %closed, "replica refused")
        }
        other => info!(remote_addr = %addr, broker_id = replica.id(), reason = %other, "replica connection closed"),
    }
}

/// Reads the handshake, then reports.
async fn read_side(
    shared: &Shared,
    replica: &Replica,
    mut reader: LinkReader,
    handshaken: tokio::sync::oneshot::Sender<()>,
) -> Closed {
    let housekeeping = shared.config.housekeeping_interval();
    let mut frames = SlaveFrameReader::default();
    let mut buf = vec![0u8; 4096];
    let mut handshaken = Some(handshaken);
    loop {
        let n = match tokio::time::timeout(housekeeping, reader.read(&mut buf)).await {
            Err(_) => return Closed::Expired(housekeeping),
            Ok(Err(e)) => return Closed::Io(e),
            Ok(Ok(0)) => return Closed::Eof,
            Ok(Ok(n)) => n,
        };
        frames.feed(&buf[..n]);
        loop {
            match frames.next_frame() {
                Ok(None) => break,
                Err(e) => return Closed::Frame(e),
                Ok(Some(SlaveFrame::Handshake(h))) => {
                    replica.broker_id.store(h.slave_broker_id, Ordering::Release);
                    replica.async_learner.store(h.async_learner, Ordering::Release);
                    info!(remote_addr = %replica.addr, broker_id = h.slave_broker_id, async_learner = h.async_learner,
                        sync_from_last_file = h.sync_from_last_file, "replica handshake");
                    replica.sync_from_last_file.store(h.sync_from_last_file, Ordering::Release);
                    if let Some(tx) = handshaken.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(Some(SlaveFrame::Report(offset))) => {
                    let master = shared.store.max_phy_offset();
                    if offset > master {
                        return Closed::Diverged { replica: offset, master };
                    }
                    trace!(remote_addr = %replica.addr, physical_offset = offset, "replica report");
                    shared.acknowledged(replica, offset);
                }
            }
        }
    }
}

/// Sends the handshake, then ships from the replica's first report.
async fn write_side(
    shared: &Shared,
    replica: &Replica,
    mut writer: LinkWriter,
    handshaken: tokio::sync::oneshot::Receiver<()>,
) -> Closed {
    let write_timeout = shared.config.housekeeping_interval();
    if handshaken.await.is_err() {
        return Closed::ShutDown;
    }
    let sync_from_last_file = replica.sync_from_last_file.load(Ordering::Acquire);
    let handshake = {
        let file = epochs(&shared.epochs);
        MasterHandshake {
            max_phy_offset: shared.store.max_phy_offset(),
            last_epoch: file.last().map_or(0, |e| e.epoch),
            epochs: file.entries().to_vec(),
        }
    };
    if let Err(e) = send(&mut writer, &[Bytes::from(handshake.encode())], write_timeout).await {
        return e;
    }
    let mut request = replica.request.subscribe();
    let requested = match request.wait_for(|r| *r >= 0).await {
        Ok(r) => *r,
        Err(_) => return Closed::ShutDown,
    };
    let store = &shared.store;
    let mut next = if requested == 0 {
        // An empty replica: the master's oldest data, or its newest segment if it asked.
        if sync_from_last_file {
            let max = store.max_phy_offset();
            let size = store.config().mapped_file_size_commit_log.max(1) as i64;
            max - max % size
        } else {
            store.min_phy_offset()
        }
    } else {
        requested
    };
    replica.transfer_from.store(next, Ordering::Release);
    info!(remote_addr = %replica.addr, physical_offset = next, "shipping CommitLog to replica");
    let heartbeat = shared.config.heartbeat_interval();
    let batch = shared.config.transfer_batch_size();
    let mut last_write = Instant::now();
    loop {
        let max = store.max_phy_offset();
        let Some((epoch, epoch_start, epoch_end)) = epoch_of(shared, next, max) else {
            return Closed::NoEpoch(next);
        };
        let want = batch.min(usize::try_from(epoch_end - next).unwrap_or(usize::MAX));
        let body = if want > 0 { store.read_commit_log(next, want).filter(|b| !b.is_empty()) } else { None };
        let arrived = shared.data_arrived.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        let now = Instant::now();
        if body.is_none() && now < last_write + heartbeat {
            if store.read_commit_log(next, 1).is_some_and(|b| !b.is_empty()) {
                continue;
            }
            tokio::select! {
                _ = &mut arrived => {}
                _ = tokio::time::sleep_until(last_write + heartbeat) => {}
            }
            continue;
        }
        let body = body.unwrap_or_default();
        let frame = MasterTransfer {
            start_offset: next,
            epoch,
            epoch_start_offset: epoch_start,
            confirm_offset: shared.confirm_for_replicas(),
            body,
        };
        let len = frame.body.len();
        let parts = [Bytes::copy_from_slice(&frame.encode_header()), frame.body];
        replica.last_master_max.store(max, Ordering::Release);
        *lock(&replica.last_transfer) = Instant::now();
        if let Err(e) = send(&mut writer, &parts, write_timeout).await {
            return e;
        }
        next += len as i64;
        replica.transfer_from.store(next, Ordering::Release);
        last_write = Instant::now();
    }
}

/// The epoch holding `offset`: (epoch, its start, its end). An offset at the very end belongs
/// to the newest epoch.
fn epoch_of(shared: &Shared, offset: i64, max: i64) -> Option<(i32, i64, i64)> {
    let file = epochs(&shared.epochs);
    let entries = file.entries();
    let i = entries.iter().rposition(|e| e.start_offset <= offset)?;
    let end = entries.get(i + 1).map_or(max, |n| n.start_offset);
    Some((entries[i].epoch, entries[i].start_offset, end))
}

async fn send(writer: &mut LinkWriter, parts: &[Bytes], limit: Duration) -> Result<(), Closed> {
    crate::net::write_parts(writer, parts, limit).await.map_err(|e| match e {
        crate::net::WriteFailed::Io(e) => Closed::Io(e),
        crate::net::WriteFailed::Stalled => Closed::WriteStalled(limit),
    })
}
