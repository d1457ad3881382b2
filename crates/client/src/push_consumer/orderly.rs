//! Orderly consumption: each queue is locked on its broker (LOCK_BATCH_MQ) before it is
//! pulled, the locks are renewed periodically, and one task per queue hands its messages to
//! the listener strictly in queue order, only while the lock is held.
//! Java: `ConsumeMessageOrderlyService`, `RebalanceImpl#lock` / `lockAll` / `unlock`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ferromq_protocol::body::{MessageModel, MessageQueue};
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::{restore_retry_topic, Inner, PushConsumer, QueueState};
use crate::client_instance::lock;
use crate::consumer_calls::retry_topic;
use crate::message_ext::MessageExt;

/// How long a lock counts as held after it was taken or renewed, client side.
/// Java: `ProcessQueue.REBALANCE_LOCK_MAX_LIVE_TIME` (30 s).
pub(super) const LOCK_MAX_LIVE: Duration = Duration::from_secs(30);

/// How long a queue's consuming task sleeps when it has nothing to do before looking again.
const IDLE_RECHECK: Duration = Duration::from_millis(100);

/// How long the removal of a queue waits for its running listener call before giving up the
/// unlock (the broker lease then expires). Java: `removeUnnecessaryMessageQueue`'s 1 s `tryLock`.
pub(super) const REMOVE_WAIT_FOR_CONSUME: Duration = Duration::from_secs(1);

/// What an orderly listener says about the messages it was given.
/// Java: `ConsumeOrderlyStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConsumeOrderlyStatus {
    /// Consumed; the queue moves on.
    Success,
    /// Not consumed; the queue stops for `suspend_current_queue_time` and the same messages
    /// come again (after `max_reconsume_times`, they go to the dead-letter topic).
    SuspendCurrentQueueAMoment,
}

/// An orderly listener. Java: `MessageListenerOrderly`. Called with the messages of one queue
/// in queue order, never concurrently for one queue; it runs on tokio's blocking pool, and a
/// panic counts as [`ConsumeOrderlyStatus::SuspendCurrentQueueAMoment`].
pub type MessageListenerOrderly = Arc<dyn Fn(&[MessageExt]) -> ConsumeOrderlyStatus + Send + Sync>;

impl PushConsumer {
    /// Sets an orderly listener instead of a concurrent one: queues are locked on their
    /// brokers and consumed one listener call at a time, in order.
    pub fn register_listener_orderly<F>(&self, listener: F)
    where
        F: Fn(&[MessageExt]) -> ConsumeOrderlyStatus + Send + Sync + 'static,
    {
        *lock(&self.inner.orderly_listener) = Some(Arc::new(listener));
    }
}

/// Whether the queue's broker lock is known held now.
pub(super) fn lock_held(q: &QueueState) -> bool {
    q.locked_until.is_some_and(|t| t > Instant::now())
}

/// Queues grouped by broker name.
fn by_broker(mqs: impl IntoIterator<Item = MessageQueue>) -> BTreeMap<String, BTreeSet<MessageQueue>> {
    let mut out: BTreeMap<String, BTreeSet<MessageQueue>> = BTreeMap::new();
    for mq in mqs {
        out.entry(mq.broker_name.clone()).or_default().insert(mq);
    }
    out
}

impl Inner {
    pub(super) fn orderly(&self) -> bool {
        lock(&self.orderly_listener).is_some()
    }

    /// Orderly clustering consumers lock their queues; broadcasting ones do not (Java).
    pub(super) fn needs_locks(&self) -> bool {
        self.orderly() && self.config.message_model == MessageModel::Clustering
    }

    /// Keeps the queues of `wanted` already assigned, and the new ones this client could lock.
    /// Java: `updateProcessQueueTableInRebalance` (`if (isOrder && !this.lock(mq)) continue`).
    pub(super) async fn lock_new(&self, wanted: BTreeSet<MessageQueue>) -> BTreeSet<MessageQueue> {
        let fresh: Vec<MessageQueue> = {
            let st = lock(&self.state);
            wanted.iter().filter(|mq| !st.queues.contains_key(*mq)).cloned().collect()
        };
        let mut kept = wanted;
        for (broker_name, mqs) in by_broker(fresh) {
            let locked = match self.calls().lock_batch(&mqs).await {
                Ok(locked) => locked,
                Err(e) => {
                    warn!(broker_name = %broker_name, error = %e, "lock of new queues failed");
                    BTreeSet::new()
                }
            };
            for mq in mqs.difference(&locked) {
                debug!(topic = %mq.topic, queue_id = mq.queue_id, "queue locked by another consumer");
                kept.remove(mq);
            }
        }
        kept
    }

    /// Renews the locks of every assigned queue; a queue the broker refuses stops being
    /// consumed until a later renewal succeeds. Java: `RebalanceImpl#lockAll`.
    pub(super) async fn lock_all(&self) {
        let mqs: Vec<MessageQueue> = lock(&self.state).queues.keys().cloned().collect();
        for (broker_name, mqs) in by_broker(mqs) {
            let locked = match self.calls().lock_batch(&mqs).await {
                Ok(locked) => locked,
                Err(e) => {
                    warn!(broker_name = %broker_name, error = %e, "lock renewal failed");
                    continue;
                }
            };
            let until = Instant::now() + LOCK_MAX_LIVE;
            let mut st = lock(&self.state);
            for mq in &mqs {
                if let Some(q) = st.queues.get_mut(mq) {
                    if locked.contains(mq) {
                        q.locked_until = Some(until);
                        q.wake.notify_one();
                    } else {
                        warn!(topic = %mq.topic, queue_id = mq.queue_id, "queue lock lost");
                        q.locked_until = None;
                    }
                }
            }
        }
    }

    /// UNLOCK_BATCH_MQ of `mqs`. Java: `RebalanceImpl#unlockAll`.
    pub(super) async fn unlock_queues(&self, mqs: Vec<MessageQueue>) {
        for (broker_name, mqs) in by_broker(mqs) {
            if let Err(e) = self.calls().unlock_batch(&mqs).await {
                warn!(broker_name = %broker_name, error = %e, "unlock failed");
            }
        }
    }

    /// Unlocks queues removed by a rebalance once their running listener call (if any) ended;
    /// a queue still busy after [`REMOVE_WAIT_FOR_CONSUME`] keeps its broker lease until it
    /// expires. Java: `RebalancePushImpl#removeUnnecessaryMessageQueue`.
    pub(super) async fn unlock_removed(&self, gone: Vec<(MessageQueue, Arc<tokio::sync::Mutex<()>>)>) {
        let mut free = Vec::new();
        for (mq, consuming) in gone {
            match tokio::time::timeout(REMOVE_WAIT_FOR_CONSUME, consuming.lock()).await {
                Ok(_guard) => free.push(mq),
                Err(_) => warn!(topic = %mq.topic, queue_id = mq.queue_id, "queue busy, left locked until expiry"),
            }
        }
        self.unlock_queues(free).await;
    }

    /// The next messages of the queue to consume, if it is still assigned at `epoch`;
    /// empty while the lock is not held or nothing is pending.
    fn next_batch(&self, mq: &MessageQueue, epoch: u64) -> Option<Vec<MessageExt>> {
        let st = lock(&self.state);
        let q = st.queues.get(mq).filter(|q| q.epoch == epoch)?;
        if self.needs_locks() && !lock_held(q) {
            return Some(Vec::new());
        }
        let size = self.config.consume_message_batch_max_size.max(1);
        Some(q.pending.values().take(size).cloned().collect())
    }

    /// Removes consumed messages of the queue at `epoch`.
    fn finish(&self, mq: &MessageQueue, epoch: u64, offsets: &[i64]) {
        if let Some(q) = lock(&self.state).queues.get_mut(mq).filter(|q| q.epoch == epoch) {
            q.last_consume_ms = crate::consumer_stats::epoch_ms();
            for o in offsets {
                q.pending.remove(o);
            }
            q.remove(offsets.iter().copied());
        }
    }

    /// The consuming task of one queue: one listener call at a time, in queue order, while
    /// the queue is assigned and locked. Java: `ConsumeMessageOrderlyService.ConsumeRequest`.
    pub(super) async fn orderly_loop(
        self: Arc<Self>,
        mq: MessageQueue,
        epoch: u64,
        wake: Arc<Notify>,
        consuming: Arc<tokio::sync::Mutex<()>>,
    ) {
        let retry = retry_topic(&self.config.group);
        while self.running.load(Ordering::Acquire) {
            let Some(mut batch) = self.next_batch(&mq, epoch) else { return };
            if batch.is_empty() {
                let _ = tokio::time::timeout(IDLE_RECHECK, wake.notified()).await;
                continue;
            }
            let status = {
                let _consuming = consuming.lock().await;
                if self.next_batch(&mq, epoch).is_none() {
                    return;
                }
                for m in &mut batch {
                    restore_retry_topic(m, &retry);
                }
                self.call_orderly(&mq, batch.clone()).await
            };
            let offsets: Vec<i64> = batch.iter().map(MessageExt::queue_offset).collect();
            if status == ConsumeOrderlyStatus::Success || self.dead_letter_all(&mq, epoch, &batch).await {
                self.finish(&mq, epoch, &offsets);
            } else {
                tokio::time::sleep(self.config.suspend_current_queue_time).await;
            }
        }
    }

    async fn call_orderly(&self, mq: &MessageQueue, batch: Vec<MessageExt>) -> ConsumeOrderlyStatus {
        let Some(listener) = lock(&self.orderly_listener).clone() else {
            return ConsumeOrderlyStatus::SuspendCurrentQueueAMoment;
        };
        let Ok(_permit) = self.consume_permits.clone().acquire_owned().await else {
            return ConsumeOrderlyStatus::SuspendCurrentQueueAMoment;
        };
        let msgs = batch.clone();
        self.call_listener(mq, &msgs, move || listener(&batch), |s| *s == ConsumeOrderlyStatus::Success)
            .await
            .unwrap_or(ConsumeOrderlyStatus::SuspendCurrentQueueAMoment)
    }

    /// After a suspend: messages past `max_reconsume_times` go to the dead-letter topic
    /// (send-back with a negative delay level); the others count one more attempt. True if
    /// every message was sent back, so the batch counts as consumed.
    /// Java: `ConsumeMessageOrderlyService#checkReconsumeTimes` / `sendMessageBack`.
    async fn dead_letter_all(&self, mq: &MessageQueue, epoch: u64, batch: &[MessageExt]) -> bool {
        let max = self.config.max_reconsume_times;
        let mut suspend = Vec::new();
        for m in batch {
            if m.reconsume_times() >= max {
                match self.calls().send_back(m, max, -1).await {
                    Ok(()) => continue,
                    Err(e) => warn!(topic = %mq.topic, queue_id = mq.queue_id, queue_offset = m.queue_offset(),
                        error = %e, "send back to the dead-letter topic failed"),
                }
            }
            suspend.push(m.queue_offset());
        }
        if suspend.is_empty() {
            return true;
        }
        if let Some(q) = lock(&self.state).queues.get_mut(mq).filter(|q| q.epoch == epoch) {
            for o in &suspend {
                if let Some(m) = q.pending.get_mut(o) {
                    m.stored.reconsume_times += 1;
                }
            }
        }
        false
    }
}

/// Renews the queue locks every `lock_renew_interval`. Java: `lockMQPeriodically`.
pub(super) async fn lock_loop(inner: Arc<Inner>) {
    let every = inner.config.lock_renew_interval;
    let mut tick = tokio::time::interval_at(Instant::now() + every, every);
    loop {
        tick.tick().await;
        inner.lock_all().await;
    }
}
