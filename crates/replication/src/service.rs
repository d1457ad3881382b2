//! `HaService`: the master's side of replication. It accepts slave connections on the HA
//! port, keeps what each slave acknowledged, and lets SYNC_MASTER puts wait for enough
//! acknowledgements. Every waiting put is released by the same acknowledgement that covers
//! it: an acknowledgement bumps one watch channel and all waiters re-check at once (one
//! wake-up per acknowledgement, not per message). Java: `DefaultHAService`,
//! `AcceptSocketService`, `GroupTransferService`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_store::MessageStore;
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use crate::config::HaConfig;
use crate::connection::{serve, SlaveConnection};
use crate::error::ReplicaWaitError;
use crate::link::HaListener;
use crate::runtime_info::{HaConnectionRuntimeInfo, HaRuntimeInfo};

/// Slave connections served at once; more are refused (a broker group has a few slaves).
pub const MAX_SLAVE_CONNECTIONS: usize = 64;

/// State shared by the service and its connection tasks.
#[derive(Debug)]
pub(crate) struct MasterShared {
    pub(crate) store: Arc<MessageStore>,
    pub(crate) config: HaConfig,
    /// Woken (all waiters) whenever the store's dispatch thread sees the CommitLog grow.
    pub(crate) data_arrived: Arc<Notify>,
    connections: Mutex<Vec<Arc<SlaveConnection>>>,
    /// The highest offset any slave acknowledged. Java: `push2SlaveMaxOffset`.
    push2_slave_max: AtomicI64,
    /// Bumped on every acknowledgement that moves a slave forward; replica waiters watch it.
    acks: watch::Sender<u64>,
    closed: AtomicBool,
}

impl MasterShared {
    fn connections(&self) -> std::sync::MutexGuard<'_, Vec<Arc<SlaveConnection>>> {
        // A list of handles, only pushed to and removed from: never left half-updated.
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn flow_cap(&self) -> Option<u64> {
        self.config.ha_flow_control_enable.then_some(self.config.max_ha_transfer_byte_in_second)
    }

    pub(crate) fn add_connection(&self, conn: Arc<SlaveConnection>) {
        self.connections().push(conn);
    }

    pub(crate) fn remove_connection(&self, conn: &Arc<SlaveConnection>) {
        self.connections().retain(|c| !Arc::ptr_eq(c, conn));
    }

    /// A slave reported `offset` (after `previous`). Java: `notifyTransferSome`.
    pub(crate) fn acknowledged(&self, offset: i64, previous: i64) {
        self.push2_slave_max.fetch_max(offset, Ordering::AcqRel);
        if offset > previous {
            self.acks.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Replicas holding everything below `next_offset`, the master included.
    fn acked(&self, next_offset: i64) -> u32 {
        1 + self.connections().iter().filter(|c| c.ack() >= next_offset).count() as u32
    }

    fn is_in_sync(&self, master_put_where: i64, conn: &SlaveConnection) -> bool {
        master_put_where - conn.ack() < self.config.max_gap_not_in_sync()
    }
}

/// The master's HA service. Dropping it stops accepting and closes the connections; call
/// [`shutdown`](Self::shutdown) to wait for that.
#[derive(Debug)]
pub struct HaService {
    shared: Arc<MasterShared>,
    local_addr: SocketAddr,
    background: crate::net::Background,
}

impl HaService {
    /// Starts serving slaves on `listener` (bound by the broker to `haListenPort`, Java's
    /// broker port + 1; a plain `TcpListener`, or an [`HaListener`] with TLS and
    /// authentication). Registers a CommitLog listener on `store` so connections ship new
    /// data as soon as the store's dispatch thread sees it. Must be called inside a tokio
    /// runtime.
    ///
    /// # Errors
    /// The listener's local address cannot be read.
    pub fn start(
        store: Arc<MessageStore>,
        config: HaConfig,
        listener: impl Into<HaListener>,
    ) -> std::io::Result<HaService> {
        let listener = listener.into();
        let local_addr = listener.local_addr()?;
        let data_arrived = Arc::new(Notify::new());
        let weak = Arc::downgrade(&data_arrived);
        store.on_commit_log_advance(Arc::new(move |_end| match weak.upgrade() {
            Some(notify) => {
                notify.notify_waiters();
                true
            }
            None => false,
        }));
        let shared = Arc::new(MasterShared {
            store,
            config,
            data_arrived,
            connections: Mutex::new(Vec::new()),
            push2_slave_max: AtomicI64::new(0),
            acks: watch::Sender::new(0),
            closed: AtomicBool::new(false),
        });
        let background = crate::net::Background::spawn(|stop| accept_loop(shared.clone(), listener, stop));
        info!(ha_addr = %local_addr, "HA service listening for slaves");
        Ok(HaService { shared, local_addr, background })
    }

    /// The address slaves connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Connected slaves. Java: `connectionCount`.
    pub fn connection_count(&self) -> usize {
        self.shared.connections().len()
    }

    /// The highest offset any slave acknowledged. Java: `push2SlaveMaxOffset`.
    pub fn push2_slave_max_offset(&self) -> i64 {
        self.shared.push2_slave_max.load(Ordering::Acquire)
    }

    /// How far the slaves are behind: the master's end minus
    /// [`push2_slave_max_offset`](Self::push2_slave_max_offset). Java: `slaveFallBehindMuch`.
    pub fn slave_fall_behind_bytes(&self) -> i64 {
        self.shared.store.max_phy_offset() - self.push2_slave_max_offset()
    }

    /// Whether a slave is connected and the best one is less than `haMaxGapNotInSync` behind
    /// `master_put_where`. Java: `DefaultHAService#isSlaveOK`.
    pub fn is_slave_ok(&self, master_put_where: i64) -> bool {
        self.connection_count() > 0
            && master_put_where - self.push2_slave_max_offset() < self.shared.config.max_gap_not_in_sync()
    }

    /// Replicas in sync at `master_put_where`, the master included: connected slaves less than
    /// `haMaxGapNotInSync` behind. Java: `DefaultHAService#inSyncReplicasNums`.
    pub fn in_sync_replicas(&self, master_put_where: i64) -> u32 {
        let conns = self.shared.connections();
        1 + conns.iter().filter(|c| self.shared.is_in_sync(master_put_where, c)).count() as u32
    }

    /// The acknowledgements a SYNC_MASTER put ending at `master_put_where` needs, the master
    /// included: `inSyncReplicas`, or with `enableAutoInSyncReplicas` the replicas in sync now
    /// but at least `minInSyncReplicas`. Java: `CommitLog#calcNeedAckNums` (which applies the
    /// adjustment only with `enableSlaveActingMaster`).
    ///
    /// # Errors
    /// [`ReplicaWaitError::NotEnoughInSync`] when the adjusted need exceeds the replicas in
    /// sync.
    pub fn needed_acks(&self, master_put_where: i64) -> Result<u32, ReplicaWaitError> {
        let config = &self.shared.config;
        let needed = config.in_sync_replicas.max(1);
        if !config.enable_auto_in_sync_replicas {
            return Ok(needed);
        }
        let in_sync = self.in_sync_replicas(master_put_where);
        let needed = needed.min(in_sync).max(config.min_in_sync_replicas);
        if needed > in_sync {
            return Err(ReplicaWaitError::NotEnoughInSync { in_sync, needed });
        }
        Ok(needed)
    }

    /// The whole SYNC_MASTER replica step for a put whose bytes end at `next_offset`:
    /// [`needed_acks`](Self::needed_acks), then
    /// [`wait_for_replicas`](Self::wait_for_replicas) with `slaveTimeout`. The broker calls
    /// it for SYNC_MASTER puts whose WAIT property is not "false", next to the flush wait.
    ///
    /// # Errors
    /// As the two calls.
    pub async fn replicate(&self, next_offset: i64) -> Result<(), ReplicaWaitError> {
        let needed = self.needed_acks(next_offset)?;
        self.wait_for_replicas(next_offset, needed, self.shared.config.slave_timeout()).await
    }

    /// Waits until `needed_acks` replicas (the master counts as one) hold everything below
    /// `next_offset`, or `timeout` passes. `needed_acks` <= 1 returns at once. Before waiting,
    /// the replicas must be able to make it: for one slave, [`is_slave_ok`](Self::is_slave_ok)
    /// (Java 4.x); for more, enough [`in_sync_replicas`](Self::in_sync_replicas). One slave is
    /// waited for on `push2SlaveMaxOffset`, more by counting connections whose acknowledged
    /// offset reaches `next_offset`. Java: `GroupTransferService#doWaitTransfer`,
    /// `CommitLog#submitReplicaRequest` (4.x).
    ///
    /// # Errors
    /// [`ReplicaWaitError::NotAvailable`] without waiting, [`ReplicaWaitError::Timeout`] at the
    /// deadline, [`ReplicaWaitError::ShutDown`] if the service stops.
    pub async fn wait_for_replicas(
        &self,
        next_offset: i64,
        needed_acks: u32,
        timeout: Duration,
    ) -> Result<(), ReplicaWaitError> {
        if needed_acks <= 1 {
            return Ok(());
        }
        let available = if needed_acks == 2 {
            self.is_slave_ok(next_offset)
        } else {
            self.in_sync_replicas(next_offset) >= needed_acks
        };
        if !available {
            return Err(ReplicaWaitError::NotAvailable {
                in_sync: self.in_sync_replicas(next_offset),
                needed: needed_acks,
            });
        }
        let acked = |shared: &MasterShared| {
            if needed_acks == 2 {
                if shared.push2_slave_max.load(Ordering::Acquire) >= next_offset {
                    2
                } else {
                    1
                }
            } else {
                shared.acked(next_offset)
            }
        };
        // Subscribed before the first look: an acknowledgement after it marks the channel
        // changed, so none is missed.
        let mut acks = self.shared.acks.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.shared.closed.load(Ordering::Acquire) {
                return Err(ReplicaWaitError::ShutDown);
            }
            if acked(&self.shared) >= needed_acks {
                return Ok(());
            }
            match tokio::time::timeout_at(deadline, acks.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(ReplicaWaitError::ShutDown),
                Err(_) => {
                    let acked = acked(&self.shared);
                    warn!(physical_offset = next_offset, acked, needed = needed_acks, "transfer to slaves timed out");
                    return Err(ReplicaWaitError::Timeout { next_offset, acked, needed: needed_acks });
                }
            }
        }
    }

    /// The replication state for GET_BROKER_HA_STATUS. Java: `DefaultHAService#getRuntimeInfo`
    /// (master side).
    pub fn runtime_info(&self) -> HaRuntimeInfo {
        let max = self.shared.store.max_phy_offset();
        let conns = self.shared.connections().clone();
        let mut in_sync_slaves = 0;
        let ha_connection_info = conns
            .iter()
            .map(|c| {
                let ack = c.ack();
                let in_sync = self.shared.is_in_sync(max, c);
                in_sync_slaves += i32::from(in_sync);
                HaConnectionRuntimeInfo {
                    addr: c.addr.to_string(),
                    diff: max - ack,
                    in_sync,
                    slave_ack_offset: ack,
                    transfer_from_where: c.transfer_from(),
                    transferred_byte_in_second: i64::try_from(c.flow.bytes_in_last_second()).unwrap_or(i64::MAX),
                }
            })
            .collect();
        HaRuntimeInfo {
            master: true,
            master_commit_log_max_offset: max,
            in_sync_slave_nums: in_sync_slaves,
            ha_connection_info,
            ..HaRuntimeInfo::default()
        }
    }

    /// Stops accepting, closes every slave connection and fails waiting puts with
    /// [`ReplicaWaitError::ShutDown`]; returns when the tasks have ended.
    pub async fn shutdown(&self) {
        self.signal_shutdown();
        self.background.stop().await;
    }

    fn signal_shutdown(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.background.signal();
        self.shared.acks.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Drop for HaService {
    fn drop(&mut self) {
        self.signal_shutdown();
    }
}

/// Accepts slaves until shutdown; owns the connection tasks. Java: `AcceptSocketService`.
async fn accept_loop(shared: Arc<MasterShared>, listener: HaListener, shutdown: watch::Receiver<bool>) {
    let white_list = shared.config.ha_slave_white_list.clone();
    let first_byte_timeout = shared.config.housekeeping_interval();
    let serving = shared.clone();
    crate::net::accept_loop(listener, &white_list, first_byte_timeout, shutdown, move |link, addr, stop| {
        info!(remote_addr = %addr, "slave connected");
        serve(serving.clone(), link, addr, stop)
    })
    .await;
    info!("HA service stopped");
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use ferromq_store::StoreConfig;

    use super::*;

    async fn service(dir: &std::path::Path) -> HaService {
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let store = Arc::new(MessageStore::open(StoreConfig::with_root(dir), host).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        HaService::start(store, HaConfig::default(), listener).unwrap()
    }

    /// Registers a connection as the accept loop would, without a socket.
    fn slave(ha: &HaService, port: u16) -> Arc<SlaveConnection> {
        let conn = Arc::new(SlaveConnection::new(SocketAddr::from(([127, 0, 0, 1], port)), None));
        ha.shared.add_connection(conn.clone());
        conn
    }

    fn report(ha: &HaService, conn: &SlaveConnection, offset: i64) {
        let previous = conn.take_report(offset);
        ha.shared.acknowledged(offset, previous);
    }

    #[tokio::test]
    async fn one_acknowledgement_releases_every_put_it_covers() {
        let dir = tempfile::tempdir().unwrap();
        let ha = Arc::new(service(dir.path()).await);
        let conn = slave(&ha, 50001);
        let waiters: Vec<_> = (1..=200)
            .map(|end| {
                let ha = ha.clone();
                tokio::spawn(async move { ha.wait_for_replicas(end, 2, Duration::from_secs(30)).await })
            })
            .collect();
        let beyond = {
            let ha = ha.clone();
            tokio::spawn(async move { ha.wait_for_replicas(300, 2, Duration::from_secs(30)).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        report(&ha, &conn, 200);
        for w in waiters {
            assert_eq!(w.await.unwrap(), Ok(()));
        }
        assert!(!beyond.is_finished(), "a put past the acknowledged offset keeps waiting");
        assert_eq!(ha.push2_slave_max_offset(), 200);
        report(&ha, &conn, 300);
        assert_eq!(beyond.await.unwrap(), Ok(()));
    }

    #[tokio::test]
    async fn three_acknowledgements_need_two_slaves_at_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let ha = Arc::new(service(dir.path()).await);
        let (a, b) = (slave(&ha, 50001), slave(&ha, 50002));
        report(&ha, &a, 0);
        report(&ha, &b, 0);
        assert_eq!(ha.in_sync_replicas(100), 3);
        let waiter = {
            let ha = ha.clone();
            tokio::spawn(async move { ha.wait_for_replicas(100, 3, Duration::from_secs(30)).await })
        };
        report(&ha, &a, 150);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "one slave is not enough for three acknowledgements");
        report(&ha, &b, 100);
        assert_eq!(waiter.await.unwrap(), Ok(()));
        let timed_out = ha.wait_for_replicas(200, 3, Duration::from_millis(20)).await;
        assert_eq!(timed_out, Err(ReplicaWaitError::Timeout { next_offset: 200, acked: 1, needed: 3 }));
        let info = ha.runtime_info();
        assert_eq!(info.ha_connection_info.len(), 2);
        assert_eq!(info.in_sync_slave_nums, 2);
        assert!(info.master);
    }
}
