//! Queue leases for orderly consumers (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ): per consumer group,
//! which client holds each message queue and since when. A lease lasts
//! [`REBALANCE_LOCK_MAX_LIVE_TIME_MS`] after it was last taken or renewed; clients renew every
//! 20 s. Java: `RebalanceLockManager`.
//!
//! It does not read the clock (callers pass `now_ms`) and does not decode request bodies.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use ferromq_protocol::body::MessageQueue;
use tracing::{debug, info, warn};

/// How long a queue lease lasts without renewal (Java: system property
/// `rocketmq.broker.rebalance.lockMaxLiveTime`, default 60 s).
pub const REBALANCE_LOCK_MAX_LIVE_TIME_MS: i64 = 60_000;

/// Who holds one queue.
#[derive(Debug, Clone)]
struct LockEntry {
    client_id: String,
    last_update_ms: i64,
}

impl LockEntry {
    fn is_expired(&self, now_ms: i64, max_live_time_ms: i64) -> bool {
        now_ms.saturating_sub(self.last_update_ms) > max_live_time_ms
    }

    fn is_held_by(&self, client_id: &str, now_ms: i64, max_live_time_ms: i64) -> bool {
        self.client_id == client_id && !self.is_expired(now_ms, max_live_time_ms)
    }
}

/// Group -> queue -> holder.
type LockTable = HashMap<String, HashMap<MessageQueue, LockEntry>>;

/// Queue leases of all consumer groups. Thread-safe; every method takes `&self`.
#[derive(Debug)]
pub struct RebalanceLockManager {
    table: Mutex<LockTable>,
    max_live_time_ms: i64,
}

impl Default for RebalanceLockManager {
    fn default() -> Self {
        Self::new()
    }
}

impl RebalanceLockManager {
    /// Leases last [`REBALANCE_LOCK_MAX_LIVE_TIME_MS`].
    pub fn new() -> Self {
        Self::with_max_live_time_ms(REBALANCE_LOCK_MAX_LIVE_TIME_MS)
    }

    /// Leases last `max_live_time_ms` (Java's `lockMaxLiveTime` override).
    pub fn with_max_live_time_ms(max_live_time_ms: i64) -> Self {
        RebalanceLockManager { table: Mutex::new(HashMap::new()), max_live_time_ms }
    }

    fn lock(&self) -> MutexGuard<'_, LockTable> {
        // Updates are single inserts, field writes and removes: a panicking holder cannot leave
        // the table half-updated.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks each of `mqs` for `client_id` in `group` where it can: a queue nobody holds, one
    /// whose lease expired, or one `client_id` already holds (the lease is renewed). Returns
    /// the queues `client_id` now holds among `mqs`. Java: `RebalanceLockManager#tryLockBatch`.
    pub fn try_lock_batch<'a>(
        &self,
        group: &str,
        mqs: impl IntoIterator<Item = &'a MessageQueue>,
        client_id: &str,
        now_ms: i64,
    ) -> BTreeSet<MessageQueue> {
        let mut locked = BTreeSet::new();
        let mut table = self.lock();
        let queues = table.entry(group.to_owned()).or_default();
        for mq in mqs {
            match queues.get_mut(mq) {
                None => {
                    queues.insert(mq.clone(), LockEntry { client_id: client_id.to_owned(), last_update_ms: now_ms });
                    info!(consumer_group = group, client_id, topic = %mq.topic, broker_name = %mq.broker_name,
                        queue_id = mq.queue_id, "queue locked");
                }
                Some(entry) if entry.is_held_by(client_id, now_ms, self.max_live_time_ms) => {
                    entry.last_update_ms = now_ms;
                }
                Some(entry) if entry.is_expired(now_ms, self.max_live_time_ms) => {
                    warn!(consumer_group = group, client_id, previous_client_id = %entry.client_id, topic = %mq.topic,
                        broker_name = %mq.broker_name, queue_id = mq.queue_id, "expired queue lock taken over");
                    entry.client_id = client_id.to_owned();
                    entry.last_update_ms = now_ms;
                }
                Some(entry) => {
                    debug!(consumer_group = group, client_id, holder_client_id = %entry.client_id, topic = %mq.topic,
                        broker_name = %mq.broker_name, queue_id = mq.queue_id, "queue locked by another client");
                    continue;
                }
            }
            locked.insert(mq.clone());
        }
        if queues.is_empty() {
            table.remove(group);
        }
        locked
    }

    /// Releases each of `mqs` that `client_id` holds in `group` (expired or not); queues held
    /// by other clients are left alone. Java: `RebalanceLockManager#unlockBatch`.
    pub fn unlock_batch<'a>(&self, group: &str, mqs: impl IntoIterator<Item = &'a MessageQueue>, client_id: &str) {
        let mut table = self.lock();
        let Some(queues) = table.get_mut(group) else {
            debug!(consumer_group = group, client_id, "unlock for a group without locks");
            return;
        };
        for mq in mqs {
            match queues.get(mq) {
                Some(entry) if entry.client_id == client_id => {
                    queues.remove(mq);
                    info!(consumer_group = group, client_id, topic = %mq.topic, broker_name = %mq.broker_name,
                        queue_id = mq.queue_id, "queue unlocked");
                }
                Some(entry) => {
                    warn!(consumer_group = group, client_id, holder_client_id = %entry.client_id, topic = %mq.topic,
                        broker_name = %mq.broker_name, queue_id = mq.queue_id, "unlock refused: held by another client");
                }
                None => {}
            }
        }
        if queues.is_empty() {
            table.remove(group);
        }
    }

    /// Whether `client_id` holds an unexpired lease on `mq` in `group` at `now_ms`. A pure
    /// query: unlike Java's private `isLocked`, it does not renew the lease.
    pub fn is_locked(&self, group: &str, mq: &MessageQueue, client_id: &str, now_ms: i64) -> bool {
        self.lock()
            .get(group)
            .and_then(|queues| queues.get(mq))
            .is_some_and(|entry| entry.is_held_by(client_id, now_ms, self.max_live_time_ms))
    }

    /// Whether no lease of `group` is live at `now_ms` (also true for a group that never
    /// locked anything). Java: `RebalanceLockManager#isLockAllExpired`.
    pub fn is_lock_all_expired(&self, group: &str, now_ms: i64) -> bool {
        self.lock()
            .get(group)
            .is_none_or(|queues| queues.values().all(|entry| entry.is_expired(now_ms, self.max_live_time_ms)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    const T0: i64 = 1_700_000_000_000;

    fn mq(queue_id: i32) -> MessageQueue {
        MessageQueue::new("T", "broker-a", queue_id)
    }

    fn set(ids: &[i32]) -> BTreeSet<MessageQueue> {
        ids.iter().map(|&id| mq(id)).collect()
    }

    #[test]
    fn a_held_queue_is_refused_to_another_client_until_the_lease_expires() {
        let locks = RebalanceLockManager::new();
        assert_eq!(locks.try_lock_batch("g", &set(&[0, 1]), "a", T0), set(&[0, 1]));
        assert_eq!(locks.try_lock_batch("g", &set(&[1, 2]), "b", T0 + 1), set(&[2]));
        // Exactly at the lease length the lock is still live; one millisecond later it is not.
        assert!(locks.try_lock_batch("g", &set(&[0]), "b", T0 + REBALANCE_LOCK_MAX_LIVE_TIME_MS).is_empty());
        assert_eq!(locks.try_lock_batch("g", &set(&[0]), "b", T0 + REBALANCE_LOCK_MAX_LIVE_TIME_MS + 1), set(&[0]));
        assert!(locks.is_locked("g", &mq(0), "b", T0 + REBALANCE_LOCK_MAX_LIVE_TIME_MS + 1));
        assert!(!locks.is_locked("g", &mq(0), "a", T0 + REBALANCE_LOCK_MAX_LIVE_TIME_MS + 1));
    }

    #[test]
    fn relocking_renews_the_lease() {
        let locks = RebalanceLockManager::new();
        locks.try_lock_batch("g", &set(&[0]), "a", T0);
        assert_eq!(locks.try_lock_batch("g", &set(&[0]), "a", T0 + 50_000), set(&[0]));
        // Without the renewal this would be past the lease.
        assert!(locks.try_lock_batch("g", &set(&[0]), "b", T0 + 100_000).is_empty());
        assert!(locks.is_locked("g", &mq(0), "a", T0 + 110_000));
        assert!(!locks.is_locked("g", &mq(0), "a", T0 + 110_001));
    }

    #[test]
    fn is_locked_does_not_renew() {
        let locks = RebalanceLockManager::new();
        locks.try_lock_batch("g", &set(&[0]), "a", T0);
        assert!(locks.is_locked("g", &mq(0), "a", T0 + 59_000));
        assert_eq!(locks.try_lock_batch("g", &set(&[0]), "b", T0 + 60_001), set(&[0]));
    }

    #[test]
    fn only_the_owner_unlocks() {
        let locks = RebalanceLockManager::new();
        locks.try_lock_batch("g", &set(&[0, 1]), "a", T0);
        locks.unlock_batch("g", &set(&[0, 1]), "b");
        assert!(locks.is_locked("g", &mq(0), "a", T0));
        assert!(locks.is_locked("g", &mq(1), "a", T0));
        locks.unlock_batch("g", &set(&[0]), "a");
        assert!(!locks.is_locked("g", &mq(0), "a", T0));
        assert_eq!(locks.try_lock_batch("g", &set(&[0, 1]), "b", T0 + 1), set(&[0]));
    }

    #[test]
    fn groups_are_independent() {
        let locks = RebalanceLockManager::new();
        locks.try_lock_batch("g1", &set(&[0]), "a", T0);
        assert_eq!(locks.try_lock_batch("g2", &set(&[0]), "b", T0), set(&[0]));
        assert!(!locks.is_lock_all_expired("g1", T0));
        assert!(locks.is_lock_all_expired("g1", T0 + 60_001));
        assert!(locks.is_lock_all_expired("unknown", T0));
    }

    #[test]
    fn a_custom_lease_length_applies() {
        let locks = RebalanceLockManager::with_max_live_time_ms(1_000);
        locks.try_lock_batch("g", &set(&[0]), "a", T0);
        assert_eq!(locks.try_lock_batch("g", &set(&[0]), "b", T0 + 1_001), set(&[0]));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Lock { client: u8, queues: Vec<i32>, advance_ms: i64 },
        Unlock { client: u8, queues: Vec<i32> },
    }

    fn op() -> impl Strategy<Value = Op> {
        let client = 0u8..3;
        let queues = proptest::collection::vec(0i32..4, 0..4);
        prop_oneof![
            (client.clone(), queues.clone(), 0i64..40_000).prop_map(|(client, queues, advance_ms)| Op::Lock {
                client,
                queues,
                advance_ms
            }),
            (client, queues).prop_map(|(client, queues)| Op::Unlock { client, queues }),
        ]
    }

    proptest! {
        /// Against a plain map of queue -> (holder, last renewal): every lock result matches,
        /// so no queue is ever handed to a second client while a lease is live.
        #[test]
        fn leases_match_a_simple_model(ops in proptest::collection::vec(op(), 1..60)) {
            let locks = RebalanceLockManager::new();
            let mut model: BTreeMap<i32, (u8, i64)> = BTreeMap::new();
            let mut now = T0;
            for op in ops {
                match op {
                    Op::Lock { client, queues, advance_ms } => {
                        now += advance_ms;
                        let got = locks.try_lock_batch("g", &set(&queues), &client.to_string(), now);
                        let mut expected = BTreeSet::new();
                        for q in queues {
                            let free = match model.get(&q) {
                                None => true,
                                Some(&(holder, at)) => holder == client || now - at > REBALANCE_LOCK_MAX_LIVE_TIME_MS,
                            };
                            if free {
                                model.insert(q, (client, now));
                                expected.insert(mq(q));
                            }
                        }
                        prop_assert_eq!(got, expected);
                    }
                    Op::Unlock { client, queues } => {
                        locks.unlock_batch("g", &set(&queues), &client.to_string());
                        for q in queues {
                            if model.get(&q).is_some_and(|&(holder, _)| holder == client) {
                                model.remove(&q);
                            }
                        }
                    }
                }
                for q in 0..4 {
                    for client in 0..3u8 {
                        let live = model.get(&q).is_some_and(|&(holder, at)| {
                            holder == client && now - at <= REBALANCE_LOCK_MAX_LIVE_TIME_MS
                        });
                        prop_assert_eq!(locks.is_locked("g", &mq(q), &client.to_string(), now), live);
                    }
                }
            }
        }
    }
}
