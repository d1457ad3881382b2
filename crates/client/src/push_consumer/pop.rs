//! The push consumer's POP mode (Java's `setClientRebalance(false)`): the broker assigns the
//! queues (QUERY_ASSIGNMENT); queues it hands out as POP are popped, their messages given to
//! the listener and acknowledged on success, or made visible again later on failure (after a
//! growing delay, Java's `popDelayLevel`); queues it hands out as PULL go through the usual
//! pull path. Offsets of popped queues live on the broker. Java: `RebalanceImpl` with
//! `clientRebalance=false`, `DefaultMQPushConsumerImpl#popMessage`,
//! `ConsumeMessagePopConcurrentlyService`.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ferromq_protocol::body::{
    ConsumeFromWhere, JsonBody, MessageQueue, MessageQueueAssignment, QueryAssignmentRequestBody,
    QueryAssignmentResponseBody, MASTER_ID,
};
use ferromq_protocol::header::PopMessageRequestHeader;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use tokio::task::JoinSet;
use tracing::{debug, warn};

use super::{ConsumeStatus, Inner, PULL_DELAY_ON_EXCEPTION};
use crate::client_instance::lock;
use crate::consumer_stats::epoch_ms;
use crate::simple_consumer::{ack_received, change_invisible, decode_pop_response, ReceivedMessage};

/// How long a pop may wait at the broker (Java: `BROKER_SUSPEND_MAX_TIME_MILLIS` of pops).
const POP_POLL: Duration = Duration::from_secs(15);
/// Java's `popDelayLevel`: how long a message whose consumption failed stays invisible, by
/// reconsume times.
const POP_DELAY_LEVEL_S: [u64; 16] = [10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200];

/// A popped queue's task.
#[derive(Debug)]
pub(super) struct PopQueue {
    epoch: u64,
    task: tokio::task::AbortHandle,
}

impl Inner {
    /// Whether the broker assigns this consumer's queues.
    pub(super) fn server_assigns(&self) -> bool {
        !self.config.client_rebalance && !self.broadcasting() && !self.orderly()
    }

    /// QUERY_ASSIGNMENT for `topic` at a broker of the topic; `None` keeps the current
    /// assignment (no broker, a refusal, or the broker's "no answer").
    pub(super) async fn query_assignment(&self, topic: &str) -> Option<BTreeSet<MessageQueueAssignment>> {
        let (_, addr) = match self.calls().rebalance_inputs(topic).await {
            Ok(inputs) => inputs,
            Err(e) => {
                debug!(topic, error = %e, "query assignment: no route");
                return None;
            }
        };
        let addr = addr?;
        let body = QueryAssignmentRequestBody {
            client_id: self.instance.client_id().to_owned(),
            consumer_group: self.config.group.clone(),
            message_model: self.config.message_model,
            strategy_name: self.config.allocate_strategy.name().to_owned(),
            topic: topic.to_owned(),
        };
        let req = RemotingCommand::request(request_code::QUERY_ASSIGNMENT).with_body(body.encode());
        match self.instance.remoting().invoke(&addr, req, self.instance.config().mq_client_api_timeout).await {
            Ok(r) if r.code == response_code::SUCCESS => match QueryAssignmentResponseBody::decode(&r.body) {
                Ok(b) => b.message_queue_assignments,
                Err(e) => {
                    warn!(topic, broker = %addr, error = %e, "query assignment: bad answer");
                    None
                }
            },
            Ok(r) => {
                warn!(topic, broker = %addr, code = r.code, remark = ?r.remark, "query assignment refused");
                None
            }
            Err(e) => {
                debug!(topic, broker = %addr, error = %e, "query assignment failed");
                None
            }
        }
    }

    /// Makes `wanted` the popped queues: removed ones stop, new ones start.
    pub(super) fn set_pop_assignment(self: &Arc<Self>, wanted: BTreeSet<MessageQueue>) {
        let mut st = lock(&self.state);
        st.pop_queues.retain(|mq, q| {
            let keep = wanted.contains(mq);
            if !keep {
                q.task.abort();
            }
            keep
        });
        for mq in wanted {
            if st.pop_queues.contains_key(&mq) {
                continue;
            }
            st.next_epoch += 1;
            let epoch = st.next_epoch;
            let task = {
                let mut pulls = lock(&self.pulls);
                while pulls.try_join_next().is_some() {}
                pulls.spawn(self.clone().pop_loop(mq.clone(), epoch))
            };
            st.pop_queues.insert(mq, PopQueue { epoch, task });
        }
    }

    fn pop_assigned(&self, mq: &MessageQueue, epoch: u64) -> bool {
        self.running.load(Ordering::Acquire) && lock(&self.state).pop_queues.get(mq).is_some_and(|q| q.epoch == epoch)
    }

    /// Pops `mq` (usually queue id -1: every queue of its broker) and consumes what comes
    /// until the queue leaves the assignment.
    async fn pop_loop(self: Arc<Self>, mq: MessageQueue, epoch: u64) {
        debug!(topic = %mq.topic, broker = %mq.broker_name, queue_id = mq.queue_id, "pops start");
        while self.pop_assigned(&mq, epoch) {
            let Some(sub) = lock(&self.state).subscriptions.get(&mq.topic).cloned() else { return };
            let Some(found) = self.instance.find_broker_in_subscribe(&mq.broker_name, MASTER_ID, true) else {
                let _ = self.instance.refresh_route(&mq.topic).await;
                tokio::time::sleep(PULL_DELAY_ON_EXCEPTION).await;
                continue;
            };
            let header = PopMessageRequestHeader {
                consumer_group: self.config.group.clone(),
                topic: mq.topic.clone(),
                queue_id: mq.queue_id,
                max_msg_nums: self.config.pop_batch_nums.clamp(1, 32),
                invisible_time: self.config.pop_invisible_time.as_millis() as i64,
                poll_time: POP_POLL.as_millis() as i64,
                born_time: epoch_ms(),
                init_mode: i32::from(self.config.consume_from_where != ConsumeFromWhere::ConsumeFromFirstOffset),
                exp_type: Some(sub.expression_type.clone()),
                exp: Some(sub.sub_string.clone()),
                order: Some(false),
                attempt_id: None,
                broker_name: Some(mq.broker_name.clone()),
            };
            let req = RemotingCommand::request(request_code::POP_MESSAGE).with_header(&header);
            let timeout = POP_POLL + Duration::from_secs(10);
            let resp = match self.instance.remoting().invoke(&found.addr, req, timeout).await {
                Ok(r) => r,
                Err(e) => {
                    debug!(topic = %mq.topic, broker = %found.addr, error = %e, "pop failed");
                    tokio::time::sleep(PULL_DELAY_ON_EXCEPTION).await;
                    continue;
                }
            };
            match resp.code {
                response_code::SUCCESS => {}
                response_code::POLLING_TIMEOUT | response_code::POLLING_FULL | response_code::PULL_NOT_FOUND => {
                    continue
                }
                code => {
                    warn!(topic = %mq.topic, broker = %found.addr, code, remark = ?resp.remark, "pop refused");
                    tokio::time::sleep(PULL_DELAY_ON_EXCEPTION).await;
                    continue;
                }
            }
            let msgs = match decode_pop_response(&mq.topic, &mq.broker_name, &found.addr, &resp) {
                Ok(m) => m,
                Err(e) => {
                    warn!(topic = %mq.topic, error = %e, "pop answer unreadable");
                    continue;
                }
            };
            let (wanted, collided): (Vec<ReceivedMessage>, Vec<ReceivedMessage>) = msgs.into_iter().partition(|m| {
                !sub.is_tag_type()
                    || sub.tags_set.is_empty()
                    || m.message.tags().is_some_and(|t| sub.tags_set.contains(t))
            });
            for m in &collided {
                // Matched by tag hash only: not for this consumer; acknowledged, not consumed.
                let _ = ack_received(&self.instance, &self.config.group, m).await;
            }
            self.consume_popped(&mq, wanted).await;
        }
    }

    /// Listener calls of `consume_message_batch_max_size`, bounded by `consume_thread_max`;
    /// each message is then acknowledged or, on failure, made visible again later. Returns
    /// when every call is done, so at most one pop's messages are in flight per queue.
    async fn consume_popped(self: &Arc<Self>, mq: &MessageQueue, msgs: Vec<ReceivedMessage>) {
        let size = self.config.consume_message_batch_max_size.max(1);
        let mut calls = JoinSet::new();
        let mut msgs = msgs;
        while !msgs.is_empty() {
            let rest = msgs.split_off(size.min(msgs.len()));
            let chunk = std::mem::replace(&mut msgs, rest);
            let inner = self.clone();
            let mq = mq.clone();
            calls.spawn(async move { inner.consume_chunk(&mq, chunk).await });
        }
        while calls.join_next().await.is_some() {}
    }

    async fn consume_chunk(&self, mq: &MessageQueue, mut chunk: Vec<ReceivedMessage>) {
        let Some(listener) = lock(&self.listener).clone() else { return };
        let status = {
            let Ok(_permit) = self.consume_permits.clone().acquire_owned().await else { return };
            let batch: Vec<crate::MessageExt> = chunk
                .iter()
                .map(|m| {
                    let mut e = m.message.clone();
                    e.stored.reconsume_times = m.reconsume_times;
                    e
                })
                .collect();
            let msgs = batch.clone();
            self.call_listener(mq, &msgs, move || listener(&batch), |s| *s == ConsumeStatus::ConsumeSuccess)
                .await
                .unwrap_or(ConsumeStatus::ReconsumeLater)
        };
        for m in &mut chunk {
            let result = if status == ConsumeStatus::ConsumeSuccess {
                ack_received(&self.instance, &self.config.group, m).await
            } else {
                let level = usize::try_from(m.reconsume_times).unwrap_or(0).min(POP_DELAY_LEVEL_S.len() - 1);
                let delay = Duration::from_secs(POP_DELAY_LEVEL_S[level]).min(self.config.pop_retry_delay_max);
                change_invisible(&self.instance, &self.config.group, m, delay).await
            };
            if let Err(e) = result {
                // The message comes back when its invisible time ends: nothing is lost.
                warn!(topic = %mq.topic, queue_offset = m.message.queue_offset(), error = %e, "ack or nack of a popped message failed");
            }
        }
    }
}
