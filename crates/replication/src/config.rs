//! `HaConfig`: the replication settings under RocketMQ's `broker.conf` keys, with Java's
//! defaults (Java: the HA fields of `MessageStoreConfig`). The broker reads them from the same
//! file as its own and the store's settings. `brokerRole` stays with the broker; the segment
//! size and `flushDiskType` are the store's.

use std::time::Duration;

use ferromq_config::rocketmq_config;

rocketmq_config! {
    /// Replication settings. Field docs name the RocketMQ key.
    pub struct HaConfig {
        /// `haListenPort`. Java 4.x always uses `listenPort + 1`; 5.x does so unless the
        /// file sets it. The broker binds the listener it hands to
        /// [`HaService`](crate::HaService) and advertises it as `haServerAddr`.
        ha_listen_port: u16 = "haListenPort", default 10912;
        /// `haSlaveWhiteList` (FerroMQ): addresses and CIDR blocks the HA port accepts replicas
        /// from, comma-separated; empty: any (the broker narrows it to loopback when ACL is on).
        ha_slave_white_list: String = "haSlaveWhiteList", default String::new();
        /// `haAuthenticationEnabled` (FerroMQ): with ACL on (`aclEnable`, or
        /// `authenticationEnabled`), a master admits only replicas that authenticate (a SUPER
        /// user, or an ACL 1.0 admin account) and a slave authenticates with
        /// `innerClientAuthenticationCredentials`. `false` for Java peers, which cannot: the
        /// HA port then relies on `haSlaveWhiteList` alone.
        ha_authentication_enabled: bool = "haAuthenticationEnabled", default true;
        /// `haSendHeartbeatInterval` (ms): the master sends an empty frame, and the slave
        /// reports its offset, when this long has passed since its last write.
        ha_send_heartbeat_interval_ms: u64 = "haSendHeartbeatInterval", default 5_000;
        /// `haHousekeepingInterval` (ms): either side closes a connection it has read
        /// nothing from for this long.
        ha_housekeeping_interval_ms: u64 = "haHousekeepingInterval", default 20_000;
        /// `haTransferBatchSize` (bytes): the largest frame body the master ships.
        ha_transfer_batch_size: u32 = "haTransferBatchSize", default 32 * 1024;
        /// `haMasterAddress`: the master's HA address (`ip:port`) for a slave. When set, Java
        /// keeps it and ignores the name server; empty means learn it from each
        /// REGISTER_BROKER answer (`haServerAddr`).
        ha_master_address: String = "haMasterAddress", default String::new();
        /// `haMaxGapNotInSync` (bytes; 4.x spelling `haSlaveFallbehindMax`): a slave further
        /// behind than this is not in sync.
        ha_max_gap_not_in_sync: u64 = "haMaxGapNotInSync" | "haSlaveFallbehindMax", default 256 * 1024 * 1024;
        /// `slaveTimeout` (ms): how long a SYNC_MASTER put waits for its replicas before
        /// FLUSH_SLAVE_TIMEOUT (older 4.x releases used `syncFlushTimeout` here).
        slave_timeout_ms: u64 = "slaveTimeout", default 3_000;
        /// `totalReplicas`: replicas in the group, master included (informational outside
        /// controller mode).
        total_replicas: u32 = "totalReplicas", default 1;
        /// `inSyncReplicas`: acknowledgements a SYNC_MASTER put needs, the master's own
        /// included. 1 waits for no slave (5.x); 2 waits for one slave, as every 4.x
        /// SYNC_MASTER did.
        in_sync_replicas: u32 = "inSyncReplicas", default 1;
        /// `minInSyncReplicas`: the floor of the automatic adjustment below.
        min_in_sync_replicas: u32 = "minInSyncReplicas", default 1;
        /// `enableAutoInSyncReplicas`: lower the needed acknowledgements to the replicas in
        /// sync now, but not below `minInSyncReplicas`.
        enable_auto_in_sync_replicas: bool = "enableAutoInSyncReplicas", default false;
        /// `allAckInSyncStateSet` (controller mode): a SYNC_MASTER put needs every member of
        /// the SyncStateSet, and dispatch stops at what all of them hold (the confirm offset).
        all_ack_in_sync_state_set: bool = "allAckInSyncStateSet", default false;
        /// `haMaxTimeSlaveNotCatchup` (ms, controller mode): a SyncStateSet member behind the
        /// master for longer than this is proposed for removal.
        ha_max_time_slave_not_catchup_ms: u64 = "haMaxTimeSlaveNotCatchup", default 15_000;
        /// `syncFromLastFile` (controller mode): an empty replica starts at the master's newest
        /// CommitLog segment instead of its oldest data.
        sync_from_last_file: bool = "syncFromLastFile", default false;
        /// `asyncLearner` (controller mode): this replica never joins the SyncStateSet.
        async_learner: bool = "asyncLearner", default false;
        /// `haFlowControlEnable`: cap the master's shipping rate per connection.
        ha_flow_control_enable: bool = "haFlowControlEnable", default false;
        /// `maxHaTransferByteInSecond`: the cap, in bytes per second.
        max_ha_transfer_byte_in_second: u64 = "maxHaTransferByteInSecond", default 100 * 1024 * 1024;
    }
}

impl HaConfig {
    /// `haSendHeartbeatInterval` as a duration.
    pub fn heartbeat_interval(&self) -> Duration {
        Duration::from_millis(self.ha_send_heartbeat_interval_ms.max(1))
    }

    /// `haHousekeepingInterval` as a duration.
    pub fn housekeeping_interval(&self) -> Duration {
        Duration::from_millis(self.ha_housekeeping_interval_ms.max(1))
    }

    /// `slaveTimeout` as a duration.
    pub fn slave_timeout(&self) -> Duration {
        Duration::from_millis(self.slave_timeout_ms)
    }

    /// `haTransferBatchSize`, at least one byte.
    pub fn transfer_batch_size(&self) -> usize {
        (self.ha_transfer_batch_size as usize).max(1)
    }

    /// `haMaxGapNotInSync` as a signed byte count (offsets are `i64`).
    pub fn max_gap_not_in_sync(&self) -> i64 {
        i64::try_from(self.ha_max_gap_not_in_sync).unwrap_or(i64::MAX)
    }

    /// `haMaxTimeSlaveNotCatchup` as a duration.
    pub fn max_time_slave_not_catchup(&self) -> Duration {
        Duration::from_millis(self.ha_max_time_slave_not_catchup_ms)
    }

    /// `haMasterAddress`, if set.
    pub fn master_address(&self) -> Option<&str> {
        Some(self.ha_master_address.trim()).filter(|a| !a.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use ferromq_config::RocketMqConfig;

    use super::*;

    #[test]
    fn java_keys_defaults_and_the_4x_alias() {
        let mut c = HaConfig::default();
        assert_eq!(c.ha_transfer_batch_size, 32768);
        assert_eq!(c.slave_timeout(), Duration::from_secs(3));
        assert_eq!(c.master_address(), None);
        let unknown =
            c.apply_text("haSlaveFallbehindMax=1024\nhaMasterAddress=10.0.0.1:10912\nbrokerRole=SLAVE\n").unwrap();
        assert_eq!(unknown, vec!["brokerRole".to_owned()]);
        assert_eq!(c.max_gap_not_in_sync(), 1024);
        assert_eq!(c.master_address(), Some("10.0.0.1:10912"));
    }
}
