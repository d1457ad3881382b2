//! The checkpoint buffer (`enablePopBufferMerge`): a pop's checkpoint waits in memory for a
//! while (`popCkStayBufferTime`, at most half its invisible time) and acks for it only mark
//! bits there, so a batch acknowledged in time costs no checkpoint and no ack record at all;
//! what is still unacknowledged when the wait ends is written (with the acknowledged bits in
//! `bm`) and revived as usual. Java: `PopBufferMergeService`.
//!
//! Durability: the group's offset of a queue passes a pop's messages only once the pop's
//! checkpoint is stored or all of its messages are acknowledged, in pop order. A crash loses
//! the buffered checkpoints and the acks kept with them, and the offset still points before
//! those messages: they are popped again after the restart (at least once, never lost), also
//! those acknowledged to a client while buffered.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use ferromq_protocol::body::PopCheckPoint;

/// The merge key of a checkpoint: `topic group queue startOffset popTime brokerName`.
pub(crate) fn ck_key(
    topic: &str,
    group: &str,
    queue_id: i32,
    start_offset: i64,
    pop_time: i64,
    broker: &str,
) -> String {
    format!("{topic}\u{1}{group}\u{1}{queue_id}\u{1}{start_offset}\u{1}{pop_time}\u{1}{broker}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CkState {
    /// In memory only; acks mark bits here.
    Buffered,
    /// Being written: acks from now on are written as records.
    Storing,
}

#[derive(Debug)]
struct BufferedCk {
    ck: PopCheckPoint,
    revive_qid: i32,
    state: CkState,
    lock_key: String,
    /// When it is written if not all acknowledged, ms.
    flush_at: i64,
}

impl BufferedCk {
    fn all_acked(&self) -> bool {
        let n = self.ck.num.clamp(0, 32) as u32;
        let all = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
        (self.ck.bit_map as u32) & all == all
    }
}

/// One pop of a queue, in pop order: its checkpoint (None once stored) and where the queue's
/// offset goes once it is done.
#[derive(Debug)]
struct QueueEntry {
    ck: Option<String>,
    next_begin: i64,
}

#[derive(Debug, Default)]
struct State {
    cks: HashMap<String, BufferedCk>,
    queues: HashMap<String, VecDeque<QueueEntry>>,
}

/// What an ack found in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckOutcome {
    /// Marked in memory: nothing to write.
    Merged,
    /// Not buffered (never, or already written): write an ack record.
    WriteRecord,
}

/// A checkpoint to write now.
#[derive(Debug)]
pub(crate) struct DueCk {
    pub(crate) key: String,
    pub(crate) ck: PopCheckPoint,
    pub(crate) revive_qid: i32,
}

/// The buffer. Bounded by `max_entries` checkpoints; past it pops write their checkpoints at
/// once.
#[derive(Debug)]
pub(crate) struct CkBuffer {
    state: Mutex<State>,
    max_entries: usize,
    stay_ms: i64,
}

impl CkBuffer {
    pub(crate) fn new(max_entries: usize, stay_ms: i64) -> CkBuffer {
        CkBuffer { state: Mutex::new(State::default()), max_entries, stay_ms }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checkpoints held (`rocketmq_pop_checkpoint_buffer_size`).
    pub(crate) fn len(&self) -> usize {
        self.state().cks.len()
    }

    /// Where the next pop of `lock_key` starts at the earliest (offsets of pops not
    /// committed yet).
    pub(crate) fn latest_offset(&self, lock_key: &str) -> Option<i64> {
        self.state().queues.get(lock_key).and_then(|q| q.back()).map(|e| e.next_begin)
    }

    /// Keeps a pop's checkpoint in memory. False when the buffer is full (the caller writes
    /// it and calls [`CkBuffer::add_stored`]).
    pub(crate) fn add(&self, lock_key: &str, ck: PopCheckPoint, revive_qid: i32, next_begin: i64) -> bool {
        let mut st = self.state();
        if st.cks.len() >= self.max_entries {
            return false;
        }
        let key = ck_key(
            ck.topic.as_deref().unwrap_or_default(),
            ck.cid.as_deref().unwrap_or_default(),
            ck.queue_id,
            ck.start_offset,
            ck.pop_time,
            ck.broker_name.as_deref().unwrap_or_default(),
        );
        let flush_at = ck.pop_time + self.stay_ms.min(ck.invisible_time / 2);
        if st.cks.contains_key(&key) {
            // The same queue popped twice in one millisecond from one offset cannot happen
            // (the queue lock); refuse rather than merge two pops.
            return false;
        }
        st.cks.insert(
            key.clone(),
            BufferedCk { ck, revive_qid, state: CkState::Buffered, lock_key: lock_key.to_owned(), flush_at },
        );
        st.queues.entry(lock_key.to_owned()).or_default().push_back(QueueEntry { ck: Some(key), next_begin });
        true
    }

    /// A pop whose checkpoint was written at once: only its offset waits (behind earlier
    /// buffered pops of the queue). Returns the offset to commit now, if any.
    pub(crate) fn add_stored(&self, lock_key: &str, next_begin: i64) -> Option<i64> {
        let mut st = self.state();
        st.queues.entry(lock_key.to_owned()).or_default().push_back(QueueEntry { ck: None, next_begin });
        Self::drain_done(&mut st, lock_key)
    }

    /// An ack of `offset` for the checkpoint `key`. When it completes the checkpoint, returns
    /// the lock key and the offset to commit.
    pub(crate) fn ack(&self, key: &str, offset: i64) -> (AckOutcome, Option<(String, i64)>) {
        let mut st = self.state();
        let Some(b) = st.cks.get_mut(key) else { return (AckOutcome::WriteRecord, None) };
        if b.state != CkState::Buffered {
            return (AckOutcome::WriteRecord, None);
        }
        let Some(i) = b.ck.index_of(offset).filter(|i| *i < 32) else { return (AckOutcome::WriteRecord, None) };
        b.ck.bit_map |= 1 << i;
        if !b.all_acked() {
            return (AckOutcome::Merged, None);
        }
        let lock_key = b.lock_key.clone();
        st.cks.remove(key);
        let commit = Self::drain_done(&mut st, &lock_key).map(|o| (lock_key, o));
        (AckOutcome::Merged, commit)
    }

    /// Takes the checkpoints whose wait ended (or, with `all`, every one), marking them being
    /// written.
    pub(crate) fn take_due(&self, now: i64, all: bool) -> Vec<DueCk> {
        let mut st = self.state();
        st.cks
            .iter_mut()
            .filter(|(_, b)| b.state == CkState::Buffered && (all || now >= b.flush_at))
            .map(|(key, b)| {
                b.state = CkState::Storing;
                DueCk { key: key.clone(), ck: b.ck.clone(), revive_qid: b.revive_qid }
            })
            .collect()
    }

    /// The checkpoint `key` is written: returns the lock key and the offset to commit.
    pub(crate) fn stored(&self, key: &str) -> Option<(String, i64)> {
        let mut st = self.state();
        let b = st.cks.remove(key)?;
        Self::drain_done(&mut st, &b.lock_key).map(|o| (b.lock_key, o))
    }

    /// Writing the checkpoint `key` failed: it stays buffered and is tried again.
    pub(crate) fn store_failed(&self, key: &str) {
        if let Some(b) = self.state().cks.get_mut(key) {
            b.state = CkState::Buffered;
        }
    }

    /// Pops the leading entries of a queue whose checkpoints are done (stored or fully
    /// acknowledged, i.e. no longer in `cks`); the offset after the last of them.
    fn drain_done(st: &mut State, lock_key: &str) -> Option<i64> {
        let State { cks, queues } = st;
        let q = queues.get_mut(lock_key)?;
        let mut commit = None;
        while let Some(front) = q.front() {
            if front.ck.as_ref().is_some_and(|k| cks.contains_key(k)) {
                break;
            }
            commit = q.pop_front().map(|e| e.next_begin);
        }
        if q.is_empty() {
            queues.remove(lock_key);
        }
        commit
    }

    /// An admin reset moved the queue's offset: the pops buffered for it no longer hold the
    /// offset back (their checkpoints are still written when due, and revived as usual).
    pub(crate) fn reset_queue(&self, lock_key: &str) {
        let mut st = self.state();
        st.queues.remove(lock_key);
        for b in st.cks.values_mut().filter(|b| b.lock_key == lock_key) {
            b.lock_key.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ck(so: i64, n: i32, pt: i64) -> PopCheckPoint {
        PopCheckPoint {
            topic: Some("T".into()),
            cid: Some("G".into()),
            broker_name: Some("b".into()),
            queue_id: 0,
            start_offset: so,
            num: n,
            queue_offset_diff: (0..n).collect(),
            pop_time: pt,
            invisible_time: 60_000,
            ..PopCheckPoint::default()
        }
    }

    #[test]
    fn acked_pops_commit_in_order_and_write_nothing() {
        let b = CkBuffer::new(10, 10_000);
        assert!(b.add("T@G@0", ck(0, 2, 1), 0, 2));
        assert!(b.add("T@G@0", ck(2, 2, 2), 0, 4));
        assert_eq!(b.latest_offset("T@G@0"), Some(4));
        let k2 = ck_key("T", "G", 0, 2, 2, "b");
        let k1 = ck_key("T", "G", 0, 0, 1, "b");
        assert_eq!(b.ack(&k2, 2), (AckOutcome::Merged, None));
        assert_eq!(b.ack(&k2, 3), (AckOutcome::Merged, None), "the second pop is done but waits for the first");
        assert_eq!(b.ack(&k1, 0), (AckOutcome::Merged, None));
        assert_eq!(b.ack(&k1, 1), (AckOutcome::Merged, Some(("T@G@0".into(), 4))));
        assert_eq!(b.len(), 0);
        assert_eq!(b.latest_offset("T@G@0"), None);
        assert_eq!(b.ack(&k1, 1).0, AckOutcome::WriteRecord, "gone: written as a record");
    }

    #[test]
    fn due_checkpoints_are_written_with_their_acked_bits() {
        let b = CkBuffer::new(10, 10_000);
        b.add("T@G@0", ck(0, 3, 1_000), 0, 3);
        let key = ck_key("T", "G", 0, 0, 1_000, "b");
        b.ack(&key, 1);
        assert!(b.take_due(5_000, false).is_empty());
        let due = b.take_due(11_000, false);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].ck.bit_map, 0b010);
        assert_eq!(b.ack(&key, 2).0, AckOutcome::WriteRecord, "being written: acks become records");
        b.store_failed(&key);
        assert_eq!(b.take_due(11_000, false).len(), 1, "tried again");
        assert_eq!(b.stored(&key), Some(("T@G@0".into(), 3)));
    }

    #[test]
    fn a_reset_queue_releases_no_older_offset() {
        let b = CkBuffer::new(10, 10_000);
        b.add("T@G@0", ck(0, 1, 1), 0, 1);
        b.reset_queue("T@G@0");
        assert_eq!(b.latest_offset("T@G@0"), None);
        let k = ck_key("T", "G", 0, 0, 1, "b");
        assert_eq!(b.ack(&k, 0), (AckOutcome::Merged, None), "acked, but its offset is not committed over the reset");
    }

    #[test]
    fn a_full_buffer_refuses_and_stored_pops_wait_their_turn() {
        let b = CkBuffer::new(1, 10_000);
        assert!(b.add("T@G@0", ck(0, 1, 1), 0, 1));
        assert!(!b.add("T@G@0", ck(1, 1, 2), 0, 2));
        assert_eq!(b.add_stored("T@G@0", 2), None, "behind the buffered one");
        let k = ck_key("T", "G", 0, 0, 1, "b");
        assert_eq!(b.ack(&k, 0).1, Some(("T@G@0".into(), 2)));
        assert_eq!(b.add_stored("T@G@1", 9), Some(9));
    }
}
