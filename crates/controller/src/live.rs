//! Which replicas are alive: the heartbeat table (controller-mode.md §3.1, §3.4).
//!
//! Not replicated: a new leader rebuilds it from the heartbeats it receives within one
//! heartbeat timeout, and should not elect before that (§9). Times are milliseconds on a clock
//! the caller passes in, so elections and tests are deterministic.

use std::collections::HashMap;

/// What a replica's last heartbeat said (BROKER_HEARTBEAT, code 904).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerLiveInfo {
    /// The replica's cluster.
    pub cluster_name: String,
    /// Its broker set.
    pub broker_name: String,
    /// Its controller-assigned id.
    pub broker_id: i64,
    /// Its address.
    pub broker_addr: String,
    /// It counts as dead this long after its last heartbeat.
    pub heartbeat_timeout_ms: i64,
    /// When the last heartbeat arrived.
    pub last_update_ms: i64,
    /// Its last local epoch.
    pub epoch: i32,
    /// Its CommitLog max offset.
    pub max_offset: i64,
    /// Its confirm offset.
    pub confirm_offset: i64,
    /// Lower wins ties in an election (`brokerElectionPriority`).
    pub election_priority: i32,
    /// The connection the heartbeat came on: when it closes the replica counts as dead at
    /// once (Java: the channel's close marks the broker inactive).
    pub connection: Option<u64>,
}

impl BrokerLiveInfo {
    fn alive_at(&self, now_ms: i64) -> bool {
        self.last_update_ms.saturating_add(self.heartbeat_timeout_ms) >= now_ms
    }
}

type Key = (String, String, i64);

/// The heartbeat table, keyed by (cluster, broker set, id).
#[derive(Debug, Default)]
pub struct LiveTable {
    entries: HashMap<Key, BrokerLiveInfo>,
}

impl LiveTable {
    /// Replicas alive at `now_ms`, by cluster and broker set.
    pub fn active_counts(&self, now_ms: i64) -> std::collections::BTreeMap<(String, String), usize> {
        let mut counts = std::collections::BTreeMap::new();
        for ((cluster, set, _), info) in &self.entries {
            if info.alive_at(now_ms) {
                *counts.entry((cluster.clone(), set.clone())).or_default() += 1;
            }
        }
        counts
    }

    /// Records a heartbeat (replacing the replica's previous one).
    pub fn heartbeat(&mut self, info: BrokerLiveInfo) {
        self.entries.insert((info.cluster_name.clone(), info.broker_name.clone(), info.broker_id), info);
    }

    /// The replica's last heartbeat, if it is alive at `now_ms`.
    pub fn alive(&self, cluster: &str, broker_name: &str, id: i64, now_ms: i64) -> Option<&BrokerLiveInfo> {
        self.entries.get(&(cluster.to_owned(), broker_name.to_owned(), id)).filter(|i| i.alive_at(now_ms))
    }

    /// Whether the replica is alive at `now_ms`.
    pub fn is_alive(&self, cluster: &str, broker_name: &str, id: i64, now_ms: i64) -> bool {
        self.alive(cluster, broker_name, id, now_ms).is_some()
    }

    /// Forgets a replica whose connection closed (it is dead from now on).
    pub fn remove(&mut self, cluster: &str, broker_name: &str, id: i64) -> Option<BrokerLiveInfo> {
        self.entries.remove(&(cluster.to_owned(), broker_name.to_owned(), id))
    }

    /// Removes and returns the replicas whose heartbeats came on `connection` (it closed).
    pub fn connection_closed(&mut self, connection: u64) -> Vec<BrokerLiveInfo> {
        self.remove_where(|i| i.connection == Some(connection))
    }

    /// Removes and returns the replicas whose heartbeat timed out by `now_ms` (the scan every
    /// `scanNotActiveBrokerInterval`).
    pub fn expire(&mut self, now_ms: i64) -> Vec<BrokerLiveInfo> {
        self.remove_where(|i| !i.alive_at(now_ms))
    }

    fn remove_where(&mut self, gone: impl Fn(&BrokerLiveInfo) -> bool) -> Vec<BrokerLiveInfo> {
        let keys: Vec<Key> = self.entries.iter().filter(|(_, i)| gone(i)).map(|(k, _)| k.clone()).collect();
        keys.into_iter().filter_map(|k| self.entries.remove(&k)).collect()
    }

    /// Replicas with a heartbeat on record.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No heartbeat on record.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn beat(id: i64, now: i64, epoch: i32, max_offset: i64, priority: i32) -> BrokerLiveInfo {
        BrokerLiveInfo {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            broker_id: id,
            broker_addr: format!("a:{id}"),
            heartbeat_timeout_ms: 10_000,
            last_update_ms: now,
            epoch,
            max_offset,
            confirm_offset: 0,
            election_priority: priority,
            connection: Some(id as u64),
        }
    }

    #[test]
    fn replicas_die_one_timeout_after_their_last_heartbeat() {
        let mut t = LiveTable::default();
        t.heartbeat(beat(1, 1_000, 0, 0, 0));
        t.heartbeat(beat(2, 5_000, 0, 0, 0));
        assert!(t.is_alive("c", "b", 1, 11_000));
        assert!(!t.is_alive("c", "b", 1, 11_001));
        assert!(!t.is_alive("other", "b", 1, 2_000));
        let dead = t.expire(12_000);
        assert_eq!(dead.iter().map(|i| i.broker_id).collect::<Vec<_>>(), vec![1]);
        assert_eq!(t.len(), 1);
        assert!(t.remove("c", "b", 2).is_some());
        assert!(t.is_empty());
        t.heartbeat(beat(3, 1_000, 0, 0, 0));
        assert!(t.connection_closed(4).is_empty());
        assert_eq!(t.connection_closed(3).len(), 1);
        assert!(t.is_empty());
    }
}
