//! The revive service: one task per revive queue (`reviveQueueNum`), masters only. It reads
//! the checkpoints and acks the timer wheel delivers into its queue, matches acks to their
//! checkpoint, and once a checkpoint's deadline has passed puts every message it lists that
//! was not acknowledged into the group's pop retry topic (reconsume times + 1), or into the
//! group's dead-letter topic once it was consumed `retryMaxTimes` times. Progress is the
//! offset of `CID_RMQ_SYS_REVIVE_GROUP` in the revive topic (consumerOffset.json): the last
//! revive-queue offset before the oldest checkpoint still open, so a restart reads again
//! what was not finished (duplicates possible, loss not). Java: `PopReviveService`.
//!
//! When is a checkpoint safe to revive? Its acks are due at its deadline R. The wheel
//! delivers everything due before its read time, so once (a) every timer message stored
//! before this round is enqueued in the wheel, (b) the wheel's read time is past R, and (c)
//! dispatch has caught up with what the wheel delivered, every ack sent before R is in the
//! revive queue. Java reaches the same point by the delivery times of what it reads plus a
//! 2 s margin.

use crate::pop::pop_metrics::{ReviveKind, ReviveProgress};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use ferromq_protocol::body::{AckMsg, JsonBody, PopCheckPoint};
use ferromq_protocol::message::{keys, StoredMessage};
use ferromq_protocol::pop::{self, RETRY_GROUP_TOPIC_PREFIX};
use ferromq_store::PutMessageStatus;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::broker::{now_ms, Broker};
use crate::metadata::dlq_topic;
use crate::pop::checkpoint::{ACK_TAG, BATCH_ACK_TAG, CK_TAG, REVIVE_GROUP};
use crate::pop::ck_buffer::ck_key;

/// Records read from a revive queue per `getMessage` (Java: 32).
const READ_BATCH: usize = 32;
/// Most records one round reads, so a backlog is worked through in bounded steps.
const ROUND_MAX_RECORDS: usize = 16_384;
/// Acks whose checkpoint was not read (yet) kept per revive queue, and for how long.
const ORPHAN_ACKS_MAX: usize = 100_000;
const ORPHAN_ACK_KEEP_MS: i64 = 180_000;
/// Pause after a round that could not finish a due checkpoint (the store refused a put).
const FAILURE_PAUSE: Duration = Duration::from_secs(1);
/// Widest queue-offset range of one checkpoint read in one go.
const REVIVE_RANGE_MAX: usize = 1_024;
/// Longest wait for the wheel to enqueue what was put before a round.
const ENQUEUE_WAIT: Duration = Duration::from_secs(2);

/// Starts the revive tasks (masters with the timer wheel only).
pub(crate) fn start(broker: &Arc<Broker>, tasks: &mut JoinSet<()>) {
    if broker.timer().is_none() || broker.is_slave() {
        return;
    }
    for qid in 0..broker.config.revive_queue_num {
        let b = broker.clone();
        tasks.spawn(async move { ReviveQueue::new(b, qid).run().await });
    }
    info!(revive_queue_num = broker.config.revive_queue_num, "pop revive started");
}

/// A checkpoint read and not yet finished.
struct OpenCk {
    ck: PopCheckPoint,
    /// Its merge key (what its acks name).
    key: String,
    /// Bit i: message i is acknowledged or already put back.
    done: u64,
}

impl OpenCk {
    fn is_done(&self, i: usize) -> bool {
        i >= 64 || self.done & (1 << i) != 0
    }
    fn mark(&mut self, i: usize) {
        if i < 64 {
            self.done |= 1 << i;
        }
    }
}

struct ReviveQueue {
    broker: Arc<Broker>,
    qid: i32,
    topic: String,
    /// Next revive-queue offset to read.
    next: i64,
    /// Open checkpoints by their revive-queue offset.
    open: BTreeMap<i64, OpenCk>,
    by_key: HashMap<String, i64>,
    /// Acks read before their checkpoint: key -> (acked offsets, when due).
    orphans: HashMap<String, (Vec<i64>, i64)>,
    committed: i64,
}

impl ReviveQueue {
    fn new(broker: Arc<Broker>, qid: i32) -> ReviveQueue {
        let topic = broker.revive_topic();
        let committed = broker.offsets().query_offset(REVIVE_GROUP, &topic, qid).unwrap_or(-1);
        let next = (committed + 1).max(broker.store.min_offset_in_queue(&topic, qid));
        ReviveQueue {
            broker,
            qid,
            topic,
            next,
            open: BTreeMap::new(),
            by_key: HashMap::new(),
            orphans: HashMap::new(),
            committed,
        }
    }

    async fn run(mut self) {
        let interval = Duration::from_millis(self.broker.config.revive_interval.max(10));
        loop {
            tokio::time::sleep(interval).await;
            let Some(safe_before) = self.barrier().await else { continue };
            self.read();
            if !self.revive_due(safe_before).await {
                tokio::time::sleep(FAILURE_PAUSE).await;
            }
            self.commit_progress();
            self.report_progress();
        }
    }

    /// The queue's backlog for `/metrics`: records past the committed revive offset, and how
    /// late the oldest open checkpoint is.
    fn report_progress(&self) {
        let end = self.broker.store.max_offset_in_queue(&self.topic, self.qid);
        let now = now_ms();
        let latency_ms = self.open.values().map(|o| now - o.ck.revive_time()).max().unwrap_or(0).max(0);
        let lag = (end - (self.committed + 1)).max(0);
        self.broker.pop.metrics.progress(self.qid, ReviveProgress { lag, latency_ms });
    }

    /// Waits until every ack stored before now can be in the revive queue; returns the time
    /// before which checkpoints are safe to revive, or None when the wheel is behind.
    async fn barrier(&self) -> Option<i64> {
        let b = &self.broker;
        let timer = b.timer()?;
        if timer.is_poisoned() {
            return None;
        }
        let stored = b.store.max_phy_offset();
        b.wait_dispatched(stored).await;
        let need = b.store.max_offset_in_queue(ferromq_timer::TIMER_TOPIC, 0);
        let deadline = tokio::time::Instant::now() + ENQUEUE_WAIT;
        while timer.queue_offset() < need {
            if tokio::time::Instant::now() >= deadline {
                debug!(
                    revive_qid = self.qid,
                    behind = need - timer.queue_offset(),
                    "timer wheel enqueue behind; revive waits"
                );
                return None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let safe_before = timer.read_time_ms();
        let delivered = b.store.max_phy_offset();
        b.wait_dispatched(delivered).await;
        if b.store.dispatched_phy_offset() < delivered {
            return None;
        }
        Some(safe_before)
    }

    /// Reads the revive queue from `next`.
    fn read(&mut self) {
        let broker = self.broker.clone();
        let store = &broker.store;
        let mut read = 0;
        while read < ROUND_MAX_RECORDS {
            let r = store.get_message(&self.topic, self.qid, self.next, READ_BATCH, 4 << 20, None);
            if r.messages.is_empty() {
                if r.next_begin_offset > self.next {
                    warn!(revive_qid = self.qid, from = self.next, to = r.next_begin_offset, status = ?r.status, "revive offset corrected");
                    self.next = r.next_begin_offset;
                    continue;
                }
                break;
            }
            for (record, offset) in r.messages.iter().zip(&r.queue_offsets) {
                self.handle(record, *offset);
                self.next = offset + 1;
                read += 1;
            }
        }
        let now = now_ms();
        if self.orphans.len() > ORPHAN_ACKS_MAX / 2 {
            self.orphans.retain(|_, (_, due)| now - *due < ORPHAN_ACK_KEEP_MS);
        }
    }

    fn handle(&mut self, record: &bytes::Bytes, offset: i64) {
        let Ok((msg, _)) = StoredMessage::decode_shared(record) else {
            warn!(revive_qid = self.qid, offset, "revive record unreadable; skipped");
            return;
        };
        match msg.property(keys::TAGS) {
            Some(CK_TAG) => {
                self.broker.pop.metrics.revive_out(ReviveKind::Ck, self.qid);
                let Ok(mut ck) = PopCheckPoint::decode(&msg.body) else {
                    warn!(revive_qid = self.qid, offset, "checkpoint body unreadable; skipped");
                    return;
                };
                let (Some(topic), Some(group)) = (ck.topic.clone(), ck.cid.clone()) else { return };
                ck.revive_offset = offset;
                let bn = ck.broker_name.clone().unwrap_or_default();
                // Java matches on `t + c + q + so + pt + bn` concatenated; the buffer's key has
                // the same fields, separated, so no two checkpoints share one.
                let key = ck_key(&topic, &group, ck.queue_id, ck.start_offset, ck.pop_time, &bn);
                if let Some(old) = self.by_key.insert(key.clone(), offset) {
                    self.open.remove(&old);
                }
                // Messages acknowledged while the checkpoint was buffered are in `bm`.
                let done = u64::from(ck.bit_map as u32);
                let mut open = OpenCk { ck, key: key.clone(), done };
                if let Some((acked, _)) = self.orphans.remove(&key) {
                    for a in acked {
                        if let Some(i) = open.ck.index_of(a) {
                            open.mark(i);
                        }
                    }
                }
                self.open.insert(offset, open);
            }
            Some(tag @ (ACK_TAG | BATCH_ACK_TAG)) => {
                self.broker.pop.metrics.revive_out(ReviveKind::Ack, self.qid);
                let Ok(ack) = AckMsg::decode(&msg.body) else {
                    warn!(revive_qid = self.qid, offset, tag, "ack body unreadable; skipped");
                    return;
                };
                let bn = ack
                    .broker_name
                    .clone()
                    .filter(|b| !b.is_empty())
                    .unwrap_or_else(|| self.broker.config.broker_name.clone());
                let key = ck_key(
                    ack.topic.as_deref().unwrap_or_default(),
                    ack.consumer_group.as_deref().unwrap_or_default(),
                    ack.queue_id,
                    ack.start_offset,
                    ack.pop_time,
                    &bn,
                );
                let offsets = ack.ack_offset_list.clone().unwrap_or_else(|| vec![ack.ack_offset]);
                match self.by_key.get(&key).and_then(|ro| self.open.get_mut(ro)) {
                    Some(open) => {
                        for a in offsets {
                            if let Some(i) = open.ck.index_of(a) {
                                open.mark(i);
                            }
                        }
                    }
                    None if self.orphans.len() < ORPHAN_ACKS_MAX => {
                        let due =
                            msg.property(keys::TIMER_DELIVER_MS).and_then(|t| t.parse().ok()).unwrap_or_else(now_ms);
                        self.orphans.entry(key).or_insert_with(|| (Vec::new(), due)).0.extend(offsets);
                    }
                    None => {}
                }
            }
            other => debug!(revive_qid = self.qid, offset, tag = ?other, "revive record of unknown tag skipped"),
        }
    }

    /// Revives the open checkpoints due before `safe_before`, oldest first. False when a put
    /// failed (the checkpoint stays open and is tried again).
    async fn revive_due(&mut self, safe_before: i64) -> bool {
        loop {
            let Some((&ro, open)) = self.open.iter_mut().next() else { return true };
            if open.ck.revive_time() >= safe_before {
                return true;
            }
            if !revive_checkpoint(&self.broker, self.qid, open).await {
                return false;
            }
            if self.by_key.get(&open.key) == Some(&ro) {
                self.by_key.remove(&open.key);
            }
            self.open.remove(&ro);
        }
    }

    fn commit_progress(&mut self) {
        let done_through = self.open.keys().next().map_or(self.next - 1, |ro| ro - 1);
        if done_through > self.committed {
            self.committed = done_through;
            self.broker.offsets().commit_offset("PopRevive", REVIVE_GROUP, &self.topic, self.qid, done_through);
        }
    }
}

/// The topic a checkpoint's messages belong to: the checkpoint's topic, or the original of a
/// pop retry topic.
fn original_topic(ck_topic: &str, group: &str) -> String {
    if let Some(rest) = ck_topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
        for sep in ['_', '+'] {
            if let Some(original) = rest.strip_prefix(group).and_then(|r| r.strip_prefix(sep)) {
                return original.to_owned();
            }
        }
    }
    ck_topic.to_owned()
}

/// Puts back every message of `open` not acknowledged: the originals read in one range, the
/// copies stored in one batch per destination (retry topic, dead-letter topic). False when a
/// put failed (nothing of that batch is marked done; it is tried again).
async fn revive_checkpoint(broker: &Broker, revive_qid: i32, open: &mut OpenCk) -> bool {
    let ck = open.ck.clone();
    let (Some(ck_topic), Some(group)) = (ck.topic.as_deref(), ck.cid.as_deref()) else { return true };
    let original = original_topic(ck_topic, group);
    let Some(group_config) = broker.groups().find(group, false) else {
        debug!(group, "checkpoint of a deleted group dropped");
        return true;
    };
    if broker.topics().select(&original).is_none() || broker.topics().select(ck_topic).is_none() {
        debug!(topic = ck_topic, "checkpoint of a deleted topic dropped");
        return true;
    }
    let todo: Vec<(usize, i64)> =
        (0..ck.num.max(0) as usize).filter(|i| !open.is_done(*i)).map(|i| (i, ck.queue_offset_of(i))).collect();
    let (Some(&(_, first)), Some(&(_, last))) = (todo.first(), todo.last()) else { return true };
    let store = &broker.store;
    let mut found: HashMap<i64, bytes::Bytes> = HashMap::new();
    let span = usize::try_from(last - first + 1).unwrap_or(usize::MAX);
    if span <= REVIVE_RANGE_MAX {
        let r = store.get_message(ck_topic, ck.queue_id, first, span, crate::config::PULL_BODY_BYTES_MAX, None);
        found.extend(r.queue_offsets.into_iter().zip(r.messages));
    }
    let mut retry = Vec::new();
    let mut dead = Vec::new();
    for (i, offset) in todo {
        let record = match found.remove(&offset) {
            Some(r) => Some(r),
            // Beyond what one read returned (a sparse or very large range): read it alone.
            None => {
                let r = store.get_message(ck_topic, ck.queue_id, offset, 1, crate::config::PULL_BODY_BYTES_MAX, None);
                r.queue_offsets.first().filter(|o| **o == offset).and(r.messages.into_iter().next())
            }
        };
        let Some(record) = record else {
            warn!(topic = ck_topic, queue_id = ck.queue_id, offset, "popped message no longer stored; not revived");
            open.mark(i);
            broker.pop.inflight.sub(ck_topic, group, ck.queue_id, 1);
            continue;
        };
        let Ok((msg, _)) = StoredMessage::decode_shared(&record) else {
            warn!(topic = ck_topic, queue_id = ck.queue_id, offset, "popped message unreadable; not revived");
            open.mark(i);
            continue;
        };
        if msg.reconsume_times >= group_config.retry_max_times {
            dead.push((i, msg));
        } else {
            retry.push((i, msg));
        }
    }
    let lateness = now_ms() - ck.revive_time();
    for (to_dlq, batch) in [(false, retry), (true, dead)] {
        if batch.is_empty() {
            continue;
        }
        let stored = if to_dlq {
            put_dead_letters(broker, &batch, &original, group).await
        } else {
            put_retries(broker, &batch, ck_topic, &original, group, ck.pop_time).await
        };
        if !stored {
            return false;
        }
        for (i, _) in &batch {
            open.mark(*i);
        }
        broker.pop.inflight.sub(ck_topic, group, ck.queue_id, batch.len() as i64);
        if broker.config.enable_pop_log {
            info!(
                revive_qid,
                topic = ck_topic,
                group,
                queue_id = ck.queue_id,
                messages = batch.len(),
                to_dlq,
                lateness_ms = lateness,
                "revived"
            );
        }
    }
    broker.pop.hold.wake_group(&original, group);
    true
}

async fn put_retries(
    broker: &Broker,
    batch: &[(usize, StoredMessage)],
    ck_topic: &str,
    original: &str,
    group: &str,
    pop_time: i64,
) -> bool {
    let retry = if ck_topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        ck_topic.to_owned()
    } else {
        pop::pop_retry_topic(original, group, broker.config.enable_retry_topic_v2)
    };
    match broker.topics().create_topic_in_send_back(&retry, 1, 6, 0) {
        Ok(ensured) => {
            if broker.on_topic_ensured(&ensured) && broker.offsets().query_offset(group, &retry, 0).is_none() {
                broker.offsets().commit_offset("initPopRetryOffset", group, &retry, 0, 0);
            }
        }
        Err(e) => {
            warn!(topic = %retry, error = %e, "pop retry topic not created; revive retried");
            return false;
        }
    }
    let copies = batch
        .iter()
        .map(|(_, msg)| {
            let mut props = msg.properties_map();
            if msg.reconsume_times == 0 || !props.contains_key(keys::FIRST_POP_TIME) {
                props.insert(keys::FIRST_POP_TIME, pop_time.to_string());
            }
            StoredMessage {
                reconsume_times: msg.reconsume_times + 1,
                born_host: broker.store_host,
                ..broker.stored_copy(msg, retry.clone(), 0, &props)
            }
        })
        .collect();
    let (stored, status) = put(broker, copies, &retry).await;
    broker.pop.metrics.retried(original, group, status, batch.len() as u64);
    stored
}

async fn put_dead_letters(broker: &Broker, batch: &[(usize, StoredMessage)], original: &str, group: &str) -> bool {
    let dlq = dlq_topic(group);
    match broker.topics().create_topic_in_send_back(&dlq, crate::service::send_back::DLQ_NUMS_PER_GROUP, 6, 0) {
        Ok(ensured) => {
            broker.on_topic_ensured(&ensured);
        }
        Err(e) => {
            warn!(topic = %dlq, error = %e, "dead-letter topic not created; revive retried");
            return false;
        }
    }
    let copies = batch
        .iter()
        .map(|(_, msg)| {
            let mut props = msg.properties_map();
            props.insert(keys::DLQ_ORIGIN_TOPIC, original);
            if let Some(id) = msg.property(keys::UNIQ_KEY).map(str::to_owned) {
                props.insert(keys::DLQ_ORIGIN_MESSAGE_ID, id);
            }
            StoredMessage {
                reconsume_times: msg.reconsume_times + 1,
                born_host: broker.store_host,
                ..broker.stored_copy(msg, dlq.clone(), 0, &props)
            }
        })
        .collect();
    info!(group, topic = original, messages = batch.len(), "popped messages moved to the dead-letter topic");
    let (stored, _) = put(broker, copies, &dlq).await;
    if stored {
        broker.metrics.dead_lettered(original, group, batch.len() as u64);
    }
    stored
}

/// Stores the copies (one topic queue) in one append: whether they are stored, and the
/// store's status in Java's name.
async fn put(broker: &Broker, msgs: Vec<StoredMessage>, topic: &str) -> (bool, &'static str) {
    let n = msgs.len() as u64;
    // Flushed as the store flushes (as Java's revive put): the checkpoint stays open until then.
    let result = broker.store.put_messages(msgs).await;
    let stored = match result.status {
        PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout => {
            broker.stats.topic_put_nums.count(topic, n);
            true
        }
        status => {
            warn!(topic, ?status, remark = ?result.remark, "revived messages not stored; retried");
            false
        }
    };
    (stored, result.status.java_name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn original_topics_of_retry_topics() {
        assert_eq!(original_topic("%RETRY%G_T", "G"), "T");
        assert_eq!(original_topic("%RETRY%G+T", "G"), "T");
        assert_eq!(original_topic("%RETRY%G_a_b", "G"), "a_b");
        assert_eq!(original_topic("%RETRY%G_x_T", "G_x"), "T");
        assert_eq!(original_topic("T", "G"), "T");
    }
}
