//! What brokers may ask of a push consumer for an admin tool: an offset reset
//! (RESET_CONSUMER_CLIENT_OFFSET) and its running info (GET_CONSUMER_RUNNING_INFO).
//! Java: `MQClientInstance#resetOffset`, `DefaultMQPushConsumerImpl#consumerRunningInfo`,
//! `ProcessQueue#fillProcessQueueInfo`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ferromq_protocol::body::{
    ConsumeType, ConsumerRunningInfo, MessageQueue, ProcessQueueInfo, PROP_CONSUMER_START_TIMESTAMP,
    PROP_CONSUME_ORDERLY, PROP_THREADPOOL_CORE_SIZE,
};
use tokio::time::Instant;
use tracing::{info, warn};

use super::orderly::{lock_held, LOCK_MAX_LIVE, REMOVE_WAIT_FOR_CONSUME};
use super::{Inner, QueueState};
use crate::broker_requests::{compact_time, ConsumerControl, ControlFuture};
use crate::client_instance::lock;
use crate::consumer_stats::epoch_ms;

const MIB: usize = 1024 * 1024;

impl ConsumerControl for Inner {
    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumePassively
    }

    fn running_info(&self) -> ConsumerRunningInfo {
        let (now, now_ms) = (Instant::now(), epoch_ms());
        let st = lock(&self.state);
        let subscription_set = st.subscriptions.values().cloned().collect();
        let status_table = st
            .subscriptions
            .keys()
            .map(|topic| (topic.clone(), self.stats.status(topic, std::time::Instant::now())))
            .collect();
        let mq_table = st.queues.iter().map(|(mq, q)| (mq.clone(), queue_info(q, now, now_ms))).collect();
        drop(st);
        ConsumerRunningInfo {
            mq_table,
            properties: self.properties(),
            status_table,
            subscription_set,
            ..ConsumerRunningInfo::default()
        }
    }

    fn task_dump(&self) -> String {
        let mut out = String::new();
        let permits_free = self.consume_permits.available_permits();
        let st = lock(&self.state);
        let _ = writeln!(
            out,
            "push consumer {}: running={}, orderly={}, queues={}, listener calls running={}/{}",
            self.config.group,
            self.running.load(Ordering::Acquire),
            self.orderly(),
            st.queues.len(),
            self.config.consume_thread_max.max(1).saturating_sub(permits_free),
            self.config.consume_thread_max.max(1),
        );
        let queues: BTreeMap<&MessageQueue, &QueueState> = st.queues.iter().collect();
        for (mq, q) in queues {
            let _ = writeln!(
                out,
                "queue {} {} {}: pulled up to {:?}, in flight {}, consumed offset {:?}",
                mq.topic,
                mq.broker_name,
                mq.queue_id,
                q.max_pulled,
                q.in_flight.len(),
                q.consumed.get(),
            );
        }
        out
    }

    fn reset_offset(self: Arc<Self>, topic: String, offsets: BTreeMap<MessageQueue, i64>) -> ControlFuture {
        Box::pin(async move { self.reset_offsets(&topic, &offsets).await })
    }
}

impl Inner {
    /// The settings under Java's `DefaultMQPushConsumer` field names and the consumer's
    /// `PROP_*` keys.
    fn properties(&self) -> BTreeMap<String, String> {
        let c = &self.config;
        let entries = [
            ("consumerGroup", c.group.clone()),
            ("messageModel", c.message_model.as_str().to_owned()),
            ("consumeFromWhere", c.consume_from_where.as_str().to_owned()),
            ("consumeTimestamp", compact_time(c.consume_timestamp_ms)),
            ("allocateMessageQueueStrategy", c.allocate_strategy.name().to_owned()),
            ("consumeThreadMax", c.consume_thread_max.to_string()),
            ("consumeMessageBatchMaxSize", c.consume_message_batch_max_size.to_string()),
            ("pullBatchSize", c.pull_batch_size.to_string()),
            ("pullThresholdForQueue", c.pull_threshold_for_queue.to_string()),
            ("pullThresholdSizeForQueue", c.pull_threshold_size_for_queue.to_string()),
            ("consumeConcurrentlyMaxSpan", c.consume_concurrently_max_span.to_string()),
            ("maxReconsumeTimes", c.max_reconsume_times.to_string()),
            ("persistConsumerOffsetInterval", c.persist_consumer_offset_interval.as_millis().to_string()),
            ("suspendCurrentQueueTimeMillis", c.suspend_current_queue_time.as_millis().to_string()),
            ("awaitTerminationMillisWhenShutdown", c.await_termination_when_shutdown.as_millis().to_string()),
            (PROP_CONSUME_ORDERLY, self.orderly().to_string()),
            (PROP_THREADPOOL_CORE_SIZE, c.consume_thread_max.to_string()),
            (PROP_CONSUMER_START_TIMESTAMP, self.start_ms.load(Ordering::Relaxed).to_string()),
        ];
        entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }

    /// Moves the named assigned queues of `topic` to their new offsets: their pulls stop and
    /// their pulled messages are dropped (a running listener call finishes, but no longer moves
    /// the offset), the new offsets are committed, and the queues start again, pulling from the
    /// committed offset. Java: `MQClientInstance#resetOffset`, which suspends the whole
    /// consumer and waits 10 s for in-flight work instead.
    async fn reset_offsets(self: &Arc<Self>, topic: &str, offsets: &BTreeMap<MessageQueue, i64>) {
        if !self.running.load(Ordering::Acquire) {
            return;
        }
        let _reassign = self.reassign.lock().await;
        let commits = self.commits.lock().await;
        let dropped: Vec<(MessageQueue, i64, Arc<tokio::sync::Mutex<()>>)> = {
            let mut st = lock(&self.state);
            let hit: Vec<(MessageQueue, i64)> = offsets
                .iter()
                .filter(|(mq, _)| mq.topic == topic && st.queues.contains_key(*mq))
                .map(|(mq, offset)| (mq.clone(), *offset))
                .collect();
            hit.into_iter()
                .map(|(mq, offset)| {
                    let q = st.queues.remove(&mq).expect("filtered on presence above");
                    q.task.abort();
                    (mq, offset, q.consuming)
                })
                .collect()
        };
        if dropped.is_empty() {
            info!(consumer_group = %self.config.group, topic, "offset reset names no queue assigned here");
            return;
        }
        if self.orderly() {
            // An orderly queue must not be consumed twice at once: let its listener call end.
            for (mq, _, consuming) in &dropped {
                if tokio::time::timeout(REMOVE_WAIT_FOR_CONSUME, consuming.lock()).await.is_err() {
                    warn!(topic = %mq.topic, queue_id = mq.queue_id, "offset reset: listener call still running");
                }
            }
        }
        for (mq, offset, _) in &dropped {
            match self.store_offset(mq, *offset).await {
                Ok(_) => info!(consumer_group = %self.config.group, topic = %mq.topic, queue_id = mq.queue_id,
                    queue_offset = offset, "consumer offset reset"),
                Err(e) => warn!(consumer_group = %self.config.group, topic = %mq.topic, queue_id = mq.queue_id,
                    error = %e, "commit of a reset offset failed"),
            }
        }
        self.persist_local();
        drop(commits);
        if !self.running.load(Ordering::Acquire) {
            return;
        }
        let mut wanted: BTreeSet<MessageQueue> = lock(&self.state).queues.keys().cloned().collect();
        wanted.extend(dropped.into_iter().map(|(mq, _, _)| mq));
        self.set_assignment(wanted).await;
    }
}

/// A queue's state as Java's `ProcessQueueInfo` shows it. Messages in flight are the cached
/// ones; the orderly "transaction" counts are not kept apart and read 0.
fn queue_info(q: &QueueState, now: Instant, now_ms: i64) -> ProcessQueueInfo {
    let first = q.in_flight.first_key_value().map_or(0, |(o, _)| *o);
    let last = q.in_flight.last_key_value().map_or(0, |(o, _)| *o);
    let last_lock_timestamp = q
        .locked_until
        .and_then(|until| until.checked_sub(LOCK_MAX_LIVE))
        .map_or(0, |taken| now_ms - i64::try_from(now.saturating_duration_since(taken).as_millis()).unwrap_or(0));
    ProcessQueueInfo {
        cached_msg_count: i32::try_from(q.in_flight.len()).unwrap_or(i32::MAX),
        cached_msg_max_offset: last,
        cached_msg_min_offset: first,
        cached_msg_size_in_mib: i32::try_from(q.in_flight_bytes / MIB).unwrap_or(i32::MAX),
        commit_offset: q.consumed.get().unwrap_or(-1),
        last_consume_timestamp: q.last_consume_ms,
        last_lock_timestamp,
        last_pull_timestamp: q.last_pull_ms,
        locked: lock_held(q),
        ..ProcessQueueInfo::default()
    }
}
