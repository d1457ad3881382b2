//! What brokers may ask of a lite pull consumer for an admin tool: an offset reset
//! (RESET_CONSUMER_CLIENT_OFFSET), done as a seek of each named queue and a commit, and its
//! running info (GET_CONSUMER_RUNNING_INFO).
//! Java: `DefaultLitePullConsumerImpl#consumerRunningInfo`. (Java's `MQClientInstance#resetOffset`
//! only serves push consumers; a Java lite consumer learns of a 5.x server-side reset from its
//! next pull. Seeking here moves it at once, and also against a 4.x broker.)

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ferromq_protocol::body::{
    ConsumeType, ConsumerRunningInfo, MessageModel, MessageQueue, ProcessQueueInfo, PROP_CONSUMER_START_TIMESTAMP,
};
use tracing::{info, warn};

use super::{Inner, State};
use crate::broker_requests::{compact_time, ConsumerControl, ControlFuture};
use crate::client_instance::lock;
use crate::consumer_calls::Committed;

impl ConsumerControl for Inner {
    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumeActively
    }

    fn running_info(&self) -> ConsumerRunningInfo {
        let subscription_set = self.subscription().into_iter().collect();
        let st = lock(&self.state);
        let mq_table = st.queues.keys().map(|mq| (mq.clone(), queue_info(&st, mq))).collect();
        drop(st);
        ConsumerRunningInfo {
            mq_table,
            properties: self.properties(),
            subscription_set,
            ..ConsumerRunningInfo::default()
        }
    }

    fn task_dump(&self) -> String {
        let mut out = String::new();
        let st = lock(&self.state);
        let _ = writeln!(
            out,
            "lite pull consumer {}: running={}, queues={}, batches buffered={}",
            self.config.group,
            self.running.load(Ordering::Acquire),
            st.queues.len(),
            st.buffer.len(),
        );
        let queues: BTreeMap<&MessageQueue, _> = st.queues.iter().collect();
        for (mq, q) in queues {
            let _ = writeln!(
                out,
                "queue {} {} {}: buffered {}, consumed offset {:?}, pulling {}",
                mq.topic,
                mq.broker_name,
                mq.queue_id,
                q.buffered,
                q.consumed.get(),
                q.task.is_some(),
            );
        }
        out
    }

    fn reset_offset(self: Arc<Self>, topic: String, offsets: BTreeMap<MessageQueue, i64>) -> ControlFuture {
        Box::pin(async move { self.reset_offsets(&topic, &offsets).await })
    }
}

impl Inner {
    /// The settings under Java's `DefaultLitePullConsumer` field names and the start time.
    fn properties(&self) -> BTreeMap<String, String> {
        let c = &self.config;
        let entries = [
            ("consumerGroup", c.group.clone()),
            ("messageModel", MessageModel::Clustering.as_str().to_owned()),
            ("consumeFromWhere", c.consume_from_where.as_str().to_owned()),
            ("consumeTimestamp", compact_time(c.consume_timestamp_ms)),
            ("allocateMessageQueueStrategy", c.allocate_strategy.name().to_owned()),
            ("autoCommit", c.auto_commit.to_string()),
            ("autoCommitIntervalMillis", c.auto_commit_interval.as_millis().to_string()),
            ("pullBatchSize", c.pull_batch_size.to_string()),
            ("pullThresholdForQueue", c.pull_threshold_for_queue.to_string()),
            ("brokerSuspendMaxTimeMillis", c.broker_suspend_max.as_millis().to_string()),
            ("consumerTimeoutMillisWhenSuspend", c.consumer_timeout_when_suspend.as_millis().to_string()),
            (PROP_CONSUMER_START_TIMESTAMP, self.start_ms.load(Ordering::Relaxed).to_string()),
        ];
        entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }

    /// Seeks every named assigned queue of `topic` to its new offset (buffered messages of the
    /// queue are dropped, its pulls restart there) and commits the offsets.
    async fn reset_offsets(self: &Arc<Self>, topic: &str, offsets: &BTreeMap<MessageQueue, i64>) {
        if !self.running.load(Ordering::Acquire) {
            return;
        }
        let _commits = self.commits.lock().await;
        let mut moved = Vec::new();
        for (mq, offset) in offsets.iter().filter(|(mq, _)| mq.topic == topic) {
            if self.seek(mq, *offset) {
                moved.push((mq, *offset));
            }
        }
        if moved.is_empty() {
            info!(consumer_group = %self.config.group, topic, "offset reset names no queue assigned here");
            return;
        }
        for (mq, offset) in moved {
            match self.update_offset(mq, offset).await {
                Ok(committed) => {
                    // One that went to a slave stays unsaved, for the master once it is back.
                    if committed == Committed::ToMaster {
                        if let Some(q) = lock(&self.state).queues.get_mut(mq) {
                            q.consumed.saved(offset);
                        }
                    }
                    info!(consumer_group = %self.config.group, topic = %mq.topic, queue_id = mq.queue_id,
                        queue_offset = offset, "consumer offset reset");
                }
                Err(e) => warn!(consumer_group = %self.config.group, topic = %mq.topic, queue_id = mq.queue_id,
                    error = %e, "commit of a reset offset failed"),
            }
        }
    }
}

/// A queue's state as Java's `ProcessQueueInfo` shows it: the buffered messages are the
/// cached ones.
fn queue_info(st: &State, mq: &MessageQueue) -> ProcessQueueInfo {
    let Some(q) = st.queues.get(mq) else { return ProcessQueueInfo::default() };
    let mut offsets = st.buffer.iter().filter(|b| &b.mq == mq && b.epoch == q.epoch).flat_map(|b| &b.msgs);
    let (mut min, mut max, mut count, mut bytes) = (0, 0, 0usize, 0usize);
    if let Some(first) = offsets.next() {
        (min, max, count, bytes) = (first.queue_offset(), first.queue_offset(), 1, first.body().len());
        for m in offsets {
            min = min.min(m.queue_offset());
            max = max.max(m.queue_offset());
            count += 1;
            bytes += m.body().len();
        }
    }
    ProcessQueueInfo {
        cached_msg_count: i32::try_from(count).unwrap_or(i32::MAX),
        cached_msg_max_offset: max,
        cached_msg_min_offset: min,
        cached_msg_size_in_mib: i32::try_from(bytes / (1024 * 1024)).unwrap_or(i32::MAX),
        commit_offset: q.consumed.get().unwrap_or(-1),
        last_consume_timestamp: q.last_consume_ms,
        last_pull_timestamp: q.last_pull_ms,
        ..ProcessQueueInfo::default()
    }
}
