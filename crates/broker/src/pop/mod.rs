//! POP consumption (RocketMQ 5.x): the broker hands out messages of a topic to whoever asks,
//! hides each for an invisible time and brings it back unless it is acknowledged. Beside the
//! pull processor, not inside it: a pop reads queues through the store as a pull does, but
//! owns its offsets, checkpoints and parked requests. Facts:
//! `../shared/reference/pop-consumption.md`. Java: `PopMessageProcessor`,
//! `AckMessageProcessor`, `ChangeInvisibleTimeProcessor`, `PopReviveService`,
//! `PopLongPollingService`, `ConsumerOrderInfoManager`, `QueryAssignmentProcessor`.
//!
//! - `pop_message.rs`: POP_MESSAGE and PEEK_MESSAGE.
//! - `ack.rs`: ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME.
//! - `checkpoint.rs`: the CK and AK records written to the revive topic, through the wheel.
//! - `revive.rs`: one task per revive queue, putting unacknowledged messages back.
//! - `hold.rs`: parked pops and notifications (long polling), NOTIFICATION, POLLING_INFO.
//! - `order_info.rs`: FIFO pop state (`consumerOrderInfo.json`).
//! - `request_mode.rs`: SET_MESSAGE_REQUEST_MODE, QUERY_ASSIGNMENT (the modes themselves are
//!   metadata: `metadata/message_request_mode.rs`).

pub(crate) mod ack;
pub(crate) mod ack_merge;
pub(crate) mod checkpoint;
pub(crate) mod ck_buffer;
pub(crate) mod hold;
pub(crate) mod notification;
pub(crate) mod order_info;
pub(crate) mod pop_message;
pub(crate) mod pop_metrics;
pub(crate) mod request_mode;
pub(crate) mod revive;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// `topic@group@queueId`: the key of queue locks, in-flight counts and parked pops.
pub(crate) fn lock_key(topic: &str, group: &str, queue_id: i32) -> String {
    format!("{topic}@{group}@{queue_id}")
}

/// The (topic, group, queue id) of a lock key (topic and group names never hold `@`).
pub(crate) fn parse_lock_key(key: &str) -> Option<(&str, &str, i32)> {
    let (rest, qid) = key.rsplit_once('@')?;
    let (topic, group) = rest.rsplit_once('@')?;
    Some((topic, group, qid.parse().ok()?))
}

impl crate::broker::Broker {
    /// Commits a pop's offset: at once, or with the checkpoint buffer in pop order behind
    /// the queue's buffered pops.
    pub(crate) fn commit_pop_offset(&self, topic: &str, group: &str, queue_id: i32, offset: i64) {
        let commit = match &self.pop.buffer {
            Some(buffer) => buffer.add_stored(&lock_key(topic, group, queue_id), offset),
            None => Some(offset),
        };
        if let Some(offset) = commit {
            self.offsets().commit_offset("Pop", group, topic, queue_id, offset);
        }
    }

    /// Commits the offset the buffer released for `lock_key`.
    pub(crate) fn commit_released(&self, released: Option<(String, i64)>) {
        if let Some((key, offset)) = released {
            if let Some((topic, group, queue_id)) = parse_lock_key(&key) {
                self.offsets().commit_offset("Pop", group, topic, queue_id, offset);
            }
        }
    }

    /// Writes the buffered checkpoints whose wait ended (every one with `all`, at shutdown).
    pub(crate) async fn flush_ck_buffer(&self, all: bool) {
        let Some(buffer) = &self.pop.buffer else { return };
        for due in buffer.take_due(crate::broker::now_ms(), all) {
            match self.put_checkpoint(&due.ck, due.revive_qid).await {
                Ok(()) => self.commit_released(buffer.stored(&due.key)),
                Err(e) => {
                    tracing::warn!(key = %due.key, error = %e, "buffered checkpoint not stored; retried");
                    buffer.store_failed(&due.key);
                }
            }
        }
    }
}

/// Non-blocking per-queue locks: one pop reads a queue at a time; another skips it. Java:
/// `QueueLockManager`.
#[derive(Debug, Default)]
pub(crate) struct QueueLocks {
    held: Mutex<HashSet<String>>,
}

/// A held queue lock; released on drop.
pub(crate) struct QueueLockGuard<'a> {
    locks: &'a QueueLocks,
    key: String,
}

impl QueueLocks {
    pub(crate) fn try_lock(&self, key: String) -> Option<QueueLockGuard<'_>> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if !held.insert(key.clone()) {
            return None;
        }
        Some(QueueLockGuard { locks: self, key })
    }
}

impl Drop for QueueLockGuard<'_> {
    fn drop(&mut self) {
        self.locks.held.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.key);
    }
}

/// Messages popped and not yet acknowledged or revived, per (topic, group, queue). In memory,
/// as Java's `PopInflightMessageCounter`: after a restart the count starts again from zero
/// while the checkpoints written before it still bring their messages back.
#[derive(Debug, Default)]
pub(crate) struct InflightCounter {
    counts: Mutex<HashMap<(String, String, i32), i64>>,
}

impl InflightCounter {
    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String, i32), i64>> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn add(&self, topic: &str, group: &str, queue_id: i32, n: i64) {
        *self.counts().entry((topic.to_owned(), group.to_owned(), queue_id)).or_default() += n;
    }

    pub(crate) fn sub(&self, topic: &str, group: &str, queue_id: i32, n: i64) {
        let mut counts = self.counts();
        let key = (topic.to_owned(), group.to_owned(), queue_id);
        if let Some(c) = counts.get_mut(&key) {
            *c -= n;
            if *c <= 0 {
                counts.remove(&key);
            }
        }
    }

    pub(crate) fn get(&self, topic: &str, group: &str, queue_id: i32) -> i64 {
        self.counts().get(&(topic.to_owned(), group.to_owned(), queue_id)).copied().unwrap_or(0)
    }

    /// Drops every count of `group` (the group was deleted).
    pub(crate) fn clear_group(&self, group: &str) {
        self.counts().retain(|(_, g, _), _| g != group);
    }
}

/// The broker's POP state.
#[derive(Debug)]
pub(crate) struct PopState {
    pub(crate) queue_locks: QueueLocks,
    pub(crate) inflight: InflightCounter,
    /// Round-robin over the revive queues (Java: `ckMessageNumber`).
    ck_counter: AtomicU64,
    /// xorshift state for the retry-topic draw.
    random: AtomicU64,
    pub(crate) hold: hold::PopHold,
    pub(crate) order: order_info::ConsumerOrderInfoManager,
    /// Acks on their way to the revive topic (`ack_merge.rs`).
    pub(crate) acks: ack_merge::AckSender,
    /// The checkpoint buffer, with `enablePopBufferMerge`.
    pub(crate) buffer: Option<ck_buffer::CkBuffer>,
    /// Revive figures for `/metrics`.
    pub(crate) metrics: pop_metrics::PopMetrics,
}

impl PopState {
    pub(crate) fn new(
        hold: hold::PopHold,
        order: order_info::ConsumerOrderInfoManager,
        acks: ack_merge::AckSender,
        buffer: Option<ck_buffer::CkBuffer>,
    ) -> PopState {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9E37_79B9_7F4A_7C15, |d| d.as_nanos() as u64)
            | 1;
        PopState {
            queue_locks: QueueLocks::default(),
            inflight: InflightCounter::default(),
            ck_counter: AtomicU64::new(0),
            random: AtomicU64::new(seed),
            hold,
            order,
            acks,
            buffer,
            metrics: pop_metrics::PopMetrics::default(),
        }
    }

    /// The revive queue of the next pop.
    pub(crate) fn next_revive_qid(&self, revive_queue_num: i32) -> i32 {
        (self.ck_counter.fetch_add(1, Ordering::Relaxed) % revive_queue_num.max(1) as u64) as i32
    }

    /// A number in 0..100 (Java: `random.nextInt(100)`).
    pub(crate) fn random_percent(&self) -> u32 {
        let mut x = self.random.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.random.store(x, Ordering::Relaxed);
        (x % 100) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_lock_is_exclusive_until_dropped() {
        let locks = QueueLocks::default();
        let a = locks.try_lock("T@G@0".into()).unwrap();
        assert!(locks.try_lock("T@G@0".into()).is_none());
        assert!(locks.try_lock("T@G@1".into()).is_some());
        drop(a);
        assert!(locks.try_lock("T@G@0".into()).is_some());
    }

    #[test]
    fn inflight_counts_never_go_negative() {
        let c = InflightCounter::default();
        c.add("T", "G", 0, 3);
        c.sub("T", "G", 0, 5);
        assert_eq!(c.get("T", "G", 0), 0);
        c.add("T", "G", 0, 2);
        assert_eq!(c.get("T", "G", 0), 2);
    }
}
