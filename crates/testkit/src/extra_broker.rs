//! More brokers next to a [`LocalCluster`](crate::LocalCluster)'s: a slave of its broker name
//! on a directory of its own, or any broker from hand-made settings (for example one that
//! fills a store directory before a slave starts on it). Each runs in process on 127.0.0.1
//! port 0 until stopped.

use std::path::Path;

use ferromq_broker::{BrokerRole, BrokerSettings};

use crate::{start_broker, test_settings, RunningBroker, TIMEOUT};

/// A broker started by [`spawn_broker`] or [`LocalCluster::start_slave`](crate::LocalCluster::start_slave).
pub struct ExtraBroker {
    /// Its `ip:port`.
    pub addr: String,
    running: Option<RunningBroker>,
}

impl std::fmt::Debug for ExtraBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtraBroker").field("addr", &self.addr).finish()
    }
}

/// Starts a broker with `settings` (its listener bound to 127.0.0.1 port 0).
pub async fn spawn_broker(settings: BrokerSettings) -> ExtraBroker {
    let running = start_broker(settings).await;
    ExtraBroker { addr: running.addr.clone(), running: Some(running) }
}

/// Settings of a slave (`broker_id` > 0, role SLAVE) of the cluster's broker name, storing
/// under `dir`, registering with `ns_addr`; `tweak` then adjusts them.
pub fn slave_settings(
    dir: &Path,
    ns_addr: &str,
    master: &BrokerSettings,
    broker_id: i64,
    tweak: impl FnOnce(&mut BrokerSettings),
) -> BrokerSettings {
    let mut s = test_settings(dir, ns_addr);
    s.broker.broker_cluster_name = master.broker.broker_cluster_name.clone();
    s.broker.broker_name = master.broker.broker_name.clone();
    s.broker.broker_ip1 = master.broker.broker_ip1.clone();
    s.broker.broker_ip2 = master.broker.broker_ip2.clone();
    s.broker.broker_id = broker_id;
    s.broker.broker_role = BrokerRole::Slave;
    tweak(&mut s);
    s
}

impl ExtraBroker {
    /// Stops the broker cleanly (it unregisters from the name servers) and waits for it.
    ///
    /// # Panics
    /// When it does not stop within [`TIMEOUT`].
    pub async fn stop(mut self) {
        if let Some(b) = self.running.take() {
            let _ = b.stop.send(());
            tokio::time::timeout(TIMEOUT, b.task).await.expect("broker stops in time").expect("broker task");
        }
    }
}

impl crate::LocalCluster {
    /// Starts a slave (`broker_id` > 0, role SLAVE) of the cluster's broker, with the
    /// cluster's tweak, then `tweak`, applied; it stores under `dir`, which may hold data
    /// already. Stop it with [`ExtraBroker::stop`] before [`LocalCluster::stop`](crate::LocalCluster::stop).
    pub async fn start_slave(
        &self,
        broker_id: i64,
        dir: &Path,
        tweak: impl FnOnce(&mut BrokerSettings),
    ) -> ExtraBroker {
        let mut master = test_settings(self.dir.path(), &self.ns_addr);
        (self.tweak)(&mut master);
        let settings = slave_settings(dir, &self.ns_addr, &master, broker_id, |s| {
            (self.tweak)(s);
            s.broker.broker_id = broker_id;
            s.broker.broker_role = BrokerRole::Slave;
            s.store.store_path_root_dir = dir.join("store");
            tweak(s);
        });
        spawn_broker(settings).await
    }
}
