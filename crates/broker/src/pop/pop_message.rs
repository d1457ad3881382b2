//! POP_MESSAGE (200050) and PEEK_MESSAGE (200052). A pop reads up to 32 messages from one
//! queue or, with queue id -1, across the topic's queues (and, one time in five, the group's
//! pop retry topic first), writes one checkpoint per queue read, moves the group's offsets past
//! what it read and answers; the checkpoint brings back whatever is not acknowledged within the
//! invisible time. A FIFO pop writes no checkpoint: it records the batch in the order info and
//! blocks the queue instead. Nothing to pop: the request parks (long polling) for its poll
//! time. Java: `PopMessageProcessor`, `PeekMessageProcessor`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferromq_protocol::body::{perm, PopCheckPoint, TopicConfig};
use ferromq_protocol::header::{PeekMessageRequestHeader, PopMessageRequestHeader, PopMessageResponseHeader};
use ferromq_protocol::message::{keys, StoredMessage};
use ferromq_protocol::pop::{
    self, append_msg_offset_info, append_offset_order_count_info, append_queue_order_count_info,
    append_start_offset_info, ExtraInfo, RetryFlag, POP_MAX_MSG_NUMS, POP_ORDER_REVIVE_QUEUE,
};
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::Connection;
use ferromq_store::GetMessageStatus;
use tracing::{debug, info, warn};

use crate::broker::{now_ms, Broker};
use crate::filter::{self, PullFilter, EXPRESSION_TYPE_TAG};
use crate::pop::hold::{HeldPop, PollKind, Release, Waiter};
use crate::pop::lock_key;
use crate::processor::failure;
use crate::service::{Caller, PopRequest, PopStatus, Popped, ServiceError};
use crate::stats::BrokerStats;

/// A request that reached the broker this long after its poll time ended is answered
/// POLLING_TIMEOUT at once (Java: 500 ms).
const EXPIRED_IN_TRANSIT_MS: i64 = 500;
/// A request with less poll time left than this is not parked (Java: 50 ms).
const PARK_MIN_LEFT_MS: i64 = 50;

/// Outcome of processing a pop once.
pub(crate) enum PopOutcome {
    /// Answer now.
    Answer(Result<Popped, ServiceError>),
    /// Parked: its waiter is told when it is released.
    Parked,
}

/// The consumer init mode MAX (`ConsumeInitMode.MAX`).
const INIT_MODE_MAX: i32 = 1;

/// What one pop collected so far.
struct Collected {
    messages: Vec<Bytes>,
    bytes: usize,
    rest_num: i64,
    start_offset_info: String,
    msg_offset_info: String,
    order_count_info: String,
    /// FIFO: the earliest time a queue skipped as blocked unblocks.
    unblocks_at: Option<i64>,
}

/// The fixed parts of one pop.
struct PopContext<'a> {
    h: &'a PopMessageRequestHeader,
    filter: PullFilter,
    pop_time: i64,
    revive_qid: i32,
    order: bool,
}

impl Broker {
    /// Processes a pop once. With `waiter` and `allow_park` (false when an expired parked
    /// pop is answered), a pop that finds nothing parks for what is left of its poll time and
    /// the waiter is told of its release.
    pub(crate) async fn pop_once(
        self: &Arc<Self>,
        caller: &Caller,
        mut h: PopMessageRequestHeader,
        allow_park: bool,
        waiter: Option<impl FnOnce() -> Waiter>,
    ) -> PopOutcome {
        let refuse = |e: ServiceError| PopOutcome::Answer(Err(e));
        let now = now_ms();
        if h.born_time <= 0 {
            h.born_time = now;
        }
        let ip = &self.config.broker_ip1;
        if now - h.born_time - h.poll_time > EXPIRED_IN_TRANSIT_MS {
            return refuse(ServiceError::Other {
                code: response_code::POLLING_TIMEOUT,
                remark: format!("the broker[{ip}] pop message is timeout too much"),
            });
        }
        if self.is_slave() {
            return refuse(ServiceError::System(format!(
                "the broker[{ip}] is a slave: pop from its master (slaves keep no pop state)"
            )));
        }
        if !perm::is_readable(self.permission()) {
            return refuse(ServiceError::Forbidden(format!("the broker[{ip}] pop message is forbidden")));
        }
        if h.max_msg_nums > POP_MAX_MSG_NUMS {
            return refuse(ServiceError::InvalidParameter(format!(
                "the broker[{ip}] pop message's num is greater than {POP_MAX_MSG_NUMS}"
            )));
        }
        if h.max_msg_nums < 1 {
            return refuse(ServiceError::InvalidParameter(format!(
                "the broker[{ip}] pop message's num must be at least 1, got {}",
                h.max_msg_nums
            )));
        }
        if h.invisible_time < 0 {
            return refuse(ServiceError::InvalidParameter(format!(
                "invisibleTime must not be negative, got {}",
                h.invisible_time
            )));
        }
        if self.timer().is_none() {
            return refuse(ServiceError::System(format!(
                "the broker[{ip}] pop message is forbidden because timerWheelEnable is false"
            )));
        }
        let topic = match self.check_pop_target_of(caller, &h.topic, &h.consumer_group, h.queue_id) {
            Ok(t) => t,
            Err(e) => return refuse(e),
        };
        if h.queue_id < 0 {
            h.queue_id = -1;
        }
        let filter = match filter_of(self, &h) {
            Ok(f) => f,
            Err((code, remark)) => return refuse(ServiceError::from_code(code, remark)),
        };
        let order = h.order.unwrap_or(false);
        let ctx = PopContext {
            h: &h,
            filter,
            pop_time: now,
            revive_qid: if order {
                POP_ORDER_REVIVE_QUEUE
            } else {
                self.pop.next_revive_qid(self.config.revive_queue_num)
            },
            order,
        };
        let dispatched_before = self.store.dispatched_phy_offset();
        let collected = self.pop_collect(&ctx, &topic).await;
        let popped = |status, messages| Popped {
            status,
            pop_time: ctx.pop_time,
            invisible_time: h.invisible_time,
            revive_qid: ctx.revive_qid,
            rest_num: collected.rest_num,
            start_offset_info: Some(collected.start_offset_info.clone()).filter(|s| !s.is_empty()),
            msg_offset_info: Some(collected.msg_offset_info.clone()).filter(|s| !s.is_empty()),
            order_count_info: Some(collected.order_count_info.clone()).filter(|s| !s.is_empty()),
            messages,
        };
        if collected.rest_num > 0 {
            // Others parked on this topic may take what this pop left.
            self.pop.hold.wake_group(&h.topic, &h.consumer_group);
        }
        if !collected.messages.is_empty() {
            let key = BrokerStats::group_key(&h.topic, &h.consumer_group);
            let count = collected.messages.len() as u64;
            self.stats.group_get_nums.count(&key, count);
            let bytes: usize = collected.messages.iter().map(|m| m.len()).sum();
            self.metrics.message_out(&key, count, bytes as u64);
            if self.config.enable_pop_log {
                info!(topic = %h.topic, group = %h.consumer_group, queue_id = h.queue_id, found = collected.messages.len(), revive_qid = ctx.revive_qid, pop_time = ctx.pop_time, "pop");
            }
            return PopOutcome::Answer(Ok(popped(PopStatus::Found, collected.messages.clone())));
        }
        let left_ms = h.born_time + h.poll_time - now_ms();
        let waiter = match waiter {
            Some(w) if allow_park && h.poll_time > 0 && left_ms > PARK_MIN_LEFT_MS => w,
            _ => return PopOutcome::Answer(Ok(popped(PopStatus::PollingTimeout, Vec::new()))),
        };
        let id = self.pop.hold.next_id();
        let held = HeldPop {
            id,
            kind: PollKind::Pop,
            waiter: waiter(),
            queue_id: h.queue_id,
            deadline: Instant::now() + Duration::from_millis(left_ms as u64),
            tag_codes: ctx.filter.tag_codes(),
        };
        if self.pop.hold.park(&h.topic, &h.consumer_group, held).is_err() {
            return PopOutcome::Answer(Ok(popped(PopStatus::PollingFull, Vec::new())));
        }
        debug!(topic = %h.topic, group = %h.consumer_group, queue_id = h.queue_id, left_ms, "pop parked");
        if let (Some(at), true) = (collected.unblocks_at, self.config.enable_notify_after_pop_order_lock_release) {
            // A blocked FIFO queue unblocks when its batch's invisible time ends: wake the pop
            // then (Java: `ConsumerOrderInfoLockManager`).
            let wait = Duration::from_millis((at - now_ms()).clamp(0, left_ms) as u64);
            let b = Arc::downgrade(self);
            let (topic, group) = (h.topic.clone(), h.consumer_group.clone());
            tokio::spawn(async move {
                tokio::time::sleep(wait).await;
                if let Some(b) = b.upgrade() {
                    b.pop.hold.wake_id(&topic, &group, id);
                }
            });
        }
        // Something dispatched between the read and the park would wake nobody: look again.
        if self.store.dispatched_phy_offset() != dispatched_before {
            self.pop.hold.wake_id(&h.topic, &h.consumer_group, id);
        }
        PopOutcome::Parked
    }

    /// A pop's first attempt, the same for both protocols: processed (parking it with
    /// `waiter` when nothing is found); when it found nothing and did not park, a message
    /// stored before the pop arrived may still be on its way to its consume queue, so it waits
    /// for that dispatch and looks once more.
    pub(crate) async fn pop_arrived(
        self: &Arc<Self>,
        caller: &Caller,
        h: PopMessageRequestHeader,
        waiter: impl FnOnce() -> Waiter,
    ) -> PopOutcome {
        let arrival = self.arrival();
        match self.pop_once(caller, h.clone(), true, Some(waiter)).await {
            PopOutcome::Answer(answer) if is_polling_timeout(&answer) => {
                if self.caught_up_since(arrival).await {
                    if let again @ PopOutcome::Answer(_) = self.pop_once(caller, h, false, None::<fn() -> Waiter>).await
                    {
                        return again;
                    }
                }
                PopOutcome::Answer(answer)
            }
            outcome => outcome,
        }
    }

    /// A service pop: processed, parked while nothing is found and poll time is left (woken
    /// by an arrival, processed again), answered when found or when the poll time ran out.
    pub(crate) async fn pop_awaiting(
        self: &Arc<Self>,
        caller: &Caller,
        req: &PopRequest,
    ) -> Result<Popped, ServiceError> {
        let mut h = req.to_header();
        if h.born_time <= 0 {
            h.born_time = now_ms();
        }
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let mut outcome = self.pop_arrived(caller, h.clone(), move || Waiter::Local(tx)).await;
        loop {
            match outcome {
                PopOutcome::Answer(answer) => return answer,
                PopOutcome::Parked => {
                    // Dropping this future drops `rx`; the hold then forgets the request.
                    let allow_park = matches!(rx.await, Ok(Release::Arrived));
                    let (tx, next_rx) = tokio::sync::oneshot::channel();
                    rx = next_rx;
                    outcome = self.pop_once(caller, h.clone(), allow_park, Some(move || Waiter::Local(tx))).await;
                }
            }
        }
    }

    /// PEEK, NOTIFICATION and POLLING_INFO: the broker readable (Java's "peeking" remark), then
    /// [`Broker::check_pop_target`].
    pub(crate) fn check_peek_target(
        &self,
        req: &RemotingCommand,
        conn: &Connection,
        topic: &str,
        group: &str,
        queue_id: i32,
    ) -> Result<TopicConfig, Box<RemotingCommand>> {
        if !perm::is_readable(self.permission()) {
            return Err(Box::new(failure(
                req,
                response_code::NO_PERMISSION,
                format!("the broker[{}] peeking message is forbidden", self.config.broker_ip1),
            )));
        }
        self.check_pop_target(req, conn, topic, group, queue_id)
    }

    /// The checks POP, PEEK, NOTIFICATION and POLLING_INFO share (as a remoting answer).
    pub(crate) fn check_pop_target(
        &self,
        req: &RemotingCommand,
        conn: &Connection,
        topic: &str,
        group: &str,
        queue_id: i32,
    ) -> Result<TopicConfig, Box<RemotingCommand>> {
        self.check_pop_target_of(&crate::processor::send::caller_of(conn, req), topic, group, queue_id)
            .map_err(|e| Box::new(crate::processor::service_failure(req, &e)))
    }

    /// The checks POP, PEEK, NOTIFICATION and POLLING_INFO share, in Java's order: topic,
    /// its permission, the queue id, the group and its permission. Returns the topic config
    /// (the group is checked, not returned).
    pub(crate) fn check_pop_target_of(
        &self,
        caller: &Caller,
        topic: &str,
        group: &str,
        queue_id: i32,
    ) -> Result<TopicConfig, ServiceError> {
        let Some(config) = self.topics().select(topic) else {
            return Err(ServiceError::TopicNotExist(format!("topic[{topic}] not exist, apply first please!")));
        };
        if !perm::is_readable(config.perm) {
            return Err(ServiceError::Forbidden(format!("the topic[{topic}] peeking message is forbidden")));
        }
        if queue_id >= config.read_queue_nums {
            return Err(ServiceError::InvalidParameter(format!(
                "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                config.read_queue_nums, caller.remote_addr
            )));
        }
        let Some(group_config) = self.groups().find(group, self.config.auto_create_subscription_group) else {
            return Err(ServiceError::GroupNotExist(format!("subscription group [{group}] does not exist")));
        };
        if !group_config.consume_enable {
            return Err(ServiceError::Forbidden(format!("subscription group no permission, {group}")));
        }
        Ok(config)
    }

    /// Reads the retry topic and the topic's queues in Java's order until `maxMsgNums`.
    async fn pop_collect(&self, ctx: &PopContext<'_>, topic: &TopicConfig) -> Collected {
        let h = ctx.h;
        let mut out = Collected {
            messages: Vec::new(),
            bytes: 0,
            rest_num: 0,
            start_offset_info: String::new(),
            msg_offset_info: String::new(),
            order_count_info: String::new(),
            unblocks_at: None,
        };
        let random_q = self.pop.random_percent();
        let retry_topic = self.retry_topic_to_read(&h.topic, &h.consumer_group, random_q);
        let retry_first = !ctx.order && random_q < self.config.pop_from_retry_probability;
        let want = h.max_msg_nums as usize;
        if retry_first {
            self.pop_retry_topic(ctx, &retry_topic, &mut out).await;
        }
        if h.queue_id < 0 {
            let n = topic.read_queue_nums.max(0) as u32;
            for i in 0..n {
                if out.messages.len() >= want {
                    break;
                }
                let qid = ((random_q + i) % n) as i32;
                self.pop_queue(ctx, &h.topic, qid, false, &mut out).await;
            }
        } else {
            self.pop_queue(ctx, &h.topic, h.queue_id, false, &mut out).await;
        }
        if !ctx.order && !retry_first && out.messages.len() < want {
            self.pop_retry_topic(ctx, &retry_topic, &mut out).await;
        }
        out
    }

    /// The pop retry topic this pop reads: V2 when on (V1 every other time while V1 is still
    /// drained), else V1.
    fn retry_topic_to_read(&self, topic: &str, group: &str, random_q: u32) -> String {
        let v2 = self.config.enable_retry_topic_v2
            && !(self.config.retrieve_message_from_pop_retry_topic_v1 && random_q.is_multiple_of(2));
        pop::pop_retry_topic(topic, group, v2)
    }

    async fn pop_retry_topic(&self, ctx: &PopContext<'_>, retry_topic: &str, out: &mut Collected) {
        let Some(config) = self.topics().select(retry_topic) else { return };
        for qid in 0..config.read_queue_nums {
            if out.messages.len() >= ctx.h.max_msg_nums as usize {
                break;
            }
            self.pop_queue(ctx, retry_topic, qid, true, out).await;
        }
    }

    /// Where a pop of `topic`/`queue_id` starts: the group's offset, else (first time) the
    /// init mode's, committed at once.
    fn pop_start_offset(&self, group: &str, topic: &str, queue_id: i32, init_mode: i32, is_retry: bool) -> i64 {
        if let Some(reset) = self.offsets().take_reset_offset(group, topic, queue_id) {
            self.pop.order.clear_block(topic, group, queue_id);
            if let Some(buffer) = &self.pop.buffer {
                buffer.reset_queue(&lock_key(topic, group, queue_id));
            }
            self.offsets().commit_offset("ResetOffset", group, topic, queue_id, reset);
            return reset;
        }
        if let Some(offset) = self.offsets().query_offset(group, topic, queue_id).filter(|o| *o >= 0) {
            return offset;
        }
        let min = self.store.min_offset_in_queue(topic, queue_id);
        let offset = if init_mode == INIT_MODE_MAX && !is_retry {
            let max = self.store.max_offset_in_queue(topic, queue_id);
            if self.config.init_pop_offset_by_check_msg_in_mem
                && min <= 0
                && self.store.check_in_mem_by_consume_offset(topic, queue_id, 0)
            {
                0
            } else {
                (max - 1).max(0)
            }
        } else {
            min
        };
        self.offsets().commit_offset("CONSUME_INIT", group, topic, queue_id, offset);
        offset
    }

    /// Pops from one queue into `out`.
    async fn pop_queue(&self, ctx: &PopContext<'_>, topic: &str, queue_id: i32, is_retry: bool, out: &mut Collected) {
        let h = ctx.h;
        let group = h.consumer_group.as_str();
        let want = h.max_msg_nums as usize - out.messages.len().min(h.max_msg_nums as usize);
        let max_offset = self.store.max_offset_in_queue(topic, queue_id);
        let key = lock_key(topic, group, queue_id);
        let Some(_lock) = self.pop.queue_locks.try_lock(key.clone()) else {
            let committed = self.offsets().query_offset(group, topic, queue_id).unwrap_or(0);
            out.rest_num += (max_offset - committed).max(0);
            return;
        };
        if want == 0 {
            let committed = self.offsets().query_offset(group, topic, queue_id).unwrap_or(0);
            out.rest_num += (max_offset - committed).max(0);
            return;
        }
        if self.config.enable_pop_message_threshold
            && self.pop.inflight.get(topic, group, queue_id) >= self.config.pop_inflight_message_threshold
        {
            let committed = self.offsets().query_offset(group, topic, queue_id).unwrap_or(0);
            out.rest_num += (max_offset - committed).max(0);
            return;
        }
        let mut offset = self.pop_start_offset(group, topic, queue_id, h.init_mode, is_retry);
        if let Some(latest) = self.pop.buffer.as_ref().and_then(|b| b.latest_offset(&key)) {
            // Popped already, its checkpoint still buffered: the offset is not committed yet.
            offset = offset.max(latest);
        }
        if ctx.order && self.pop.order.needs_block(topic, group, queue_id, h.attempt_id.as_deref(), ctx.pop_time) {
            out.rest_num += (max_offset - offset).max(0);
            if let Some(at) = self.pop.order.block_ends_at(topic, group, queue_id) {
                out.unblocks_at = Some(out.unblocks_at.map_or(at, |u| u.min(at)));
            }
            return;
        }
        // Retried messages were filtered when first popped.
        let all = PullFilter::Tags(None);
        let filter = if is_retry { &all } else { &ctx.filter };
        let budget = crate::config::PULL_BODY_BYTES_MAX.saturating_sub(out.bytes).max(1);
        let mut result = self.store.get_message(topic, queue_id, offset, want, budget, Some(filter));
        if matches!(
            result.status,
            GetMessageStatus::OffsetTooSmall
                | GetMessageStatus::OffsetOverflowBadly
                | GetMessageStatus::OffsetFoundNull
        ) && result.next_begin_offset != offset
        {
            // The group's offset is outside the queue (retention, a reset): move it in and
            // read once more from there.
            warn!(topic, group, queue_id, from = offset, to = result.next_begin_offset, status = ?result.status, "pop offset corrected");
            offset = result.next_begin_offset;
            self.commit_pop_offset(topic, group, queue_id, offset);
            result = self.store.get_message(topic, queue_id, offset, want, budget, Some(filter));
        }
        out.rest_num += (result.max_offset - result.next_begin_offset).max(0);
        if result.messages.is_empty() {
            // Filtered-out or removed messages: the offset moves past them, no checkpoint.
            if result.next_begin_offset > offset
                && matches!(
                    result.status,
                    GetMessageStatus::NoMatchedMessage
                        | GetMessageStatus::OffsetFoundNull
                        | GetMessageStatus::MessageWasRemoving
                        | GetMessageStatus::NoMatchedLogicQueue
                )
            {
                self.commit_pop_offset(topic, group, queue_id, result.next_begin_offset);
            }
            return;
        }
        let offsets = result.queue_offsets.clone();
        let first = offsets[0];
        if ctx.order {
            let counts = self.pop.order.update(
                h.attempt_id.as_deref(),
                topic,
                group,
                queue_id,
                ctx.pop_time,
                h.invisible_time,
                &offsets,
            );
            // The offset passes a message only once it is acknowledged.
            self.offsets().commit_offset("PopOrder", group, topic, queue_id, first);
            for (o, c) in offsets.iter().zip(&counts) {
                append_offset_order_count_info(&mut out.order_count_info, topic, queue_id, *o, *c);
            }
            append_queue_order_count_info(
                &mut out.order_count_info,
                topic,
                queue_id,
                counts.iter().copied().min().unwrap_or(0),
            );
        } else {
            let ck = PopCheckPoint {
                broker_name: Some(self.config.broker_name.clone()),
                cid: Some(group.to_owned()),
                queue_offset_diff: offsets.iter().map(|o| (o - first) as i32).collect(),
                invisible_time: h.invisible_time,
                num: offsets.len() as i32,
                pop_time: ctx.pop_time,
                queue_id,
                start_offset: first,
                topic: Some(topic.to_owned()),
                ..PopCheckPoint::default()
            };
            let buffered = self
                .pop
                .buffer
                .as_ref()
                .is_some_and(|b| b.add(&key, ck.clone(), ctx.revive_qid, result.next_begin_offset));
            if !buffered {
                if let Err(e) = self.put_checkpoint(&ck, ctx.revive_qid).await {
                    // Without its checkpoint nothing would bring these back: leave them for the
                    // next pop (the offset stays).
                    warn!(topic, group, queue_id, start_offset = first, error = %e, "pop checkpoint not stored; messages left in the queue");
                    return;
                }
                self.commit_pop_offset(topic, group, queue_id, result.next_begin_offset);
            }
            self.pop.inflight.add(topic, group, queue_id, offsets.len() as i64);
        }
        append_start_offset_info(&mut out.start_offset_info, topic, queue_id, first);
        append_msg_offset_info(&mut out.msg_offset_info, topic, queue_id, &offsets);
        for (record, queue_offset) in result.messages.into_iter().zip(offsets) {
            let record = if is_retry && !self.config.pop_response_return_actual_retry_topic {
                match self.as_original_topic(&record, topic, &h.topic, ctx, queue_id, first, queue_offset) {
                    Some(r) => r,
                    None => record,
                }
            } else {
                record
            };
            out.bytes += record.len();
            out.messages.push(record);
        }
    }

    /// A record of a pop retry topic as the client gets it: under the original topic, with a
    /// POP_CK naming the retry topic (so its ack goes there). Java: `PopMessageProcessor`'s
    /// retry-message rewrite.
    #[allow(clippy::too_many_arguments)]
    fn as_original_topic(
        &self,
        record: &Bytes,
        retry_topic: &str,
        original: &str,
        ctx: &PopContext<'_>,
        queue_id: i32,
        ck_offset: i64,
        queue_offset: i64,
    ) -> Option<Bytes> {
        let (mut msg, _) = StoredMessage::decode_shared(record).ok()?;
        let mut props = msg.properties_map();
        if !props.contains_key(keys::POP_CK) {
            let info = ExtraInfo {
                ck_queue_offset: ck_offset,
                pop_time: ctx.pop_time,
                invisible_time: ctx.h.invisible_time,
                revive_qid: ctx.revive_qid,
                retry_flag: RetryFlag::of_topic(retry_topic),
                broker_name: self.config.broker_name.clone(),
                queue_id: Some(queue_id),
                queue_offset: Some(queue_offset),
                commit_log_offset: None,
            };
            props.insert(keys::POP_CK, info.render());
        }
        msg.set_properties(&props);
        msg.topic = original.to_owned();
        Some(msg.encode().ok()?.freeze())
    }

    /// PEEK_MESSAGE: reads from the group's offsets without hiding or moving anything.
    pub(crate) fn peek_message(&self, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
        let h: PeekMessageRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, e.to_string()),
        };
        let topic = match self.check_peek_target(req, conn, &h.topic, &h.consumer_group, h.queue_id) {
            Ok(t) => t,
            Err(r) => return *r,
        };
        let want = h.max_msg_nums.clamp(1, POP_MAX_MSG_NUMS) as usize;
        let random_q = self.pop.random_percent();
        let mut messages: Vec<Bytes> = Vec::new();
        let mut rest = 0;
        let mut peek = |topic_name: &str, qid: i32, messages: &mut Vec<Bytes>| {
            if messages.len() >= want {
                return;
            }
            let offset = self
                .offsets()
                .query_offset(&h.consumer_group, topic_name, qid)
                .filter(|o| *o >= 0)
                .unwrap_or_else(|| self.store.min_offset_in_queue(topic_name, qid));
            let r = self.store.get_message(
                topic_name,
                qid,
                offset,
                want - messages.len(),
                crate::config::PULL_BODY_BYTES_MAX,
                None,
            );
            rest += (r.max_offset - r.next_begin_offset).max(0);
            messages.extend(r.messages);
        };
        if random_q < self.config.pop_from_retry_probability {
            let retry = self.retry_topic_to_read(&h.topic, &h.consumer_group, random_q);
            if let Some(c) = self.topics().select(&retry) {
                for qid in 0..c.read_queue_nums {
                    peek(&retry, qid, &mut messages);
                }
            }
        }
        if h.queue_id < 0 {
            let n = topic.read_queue_nums.max(0) as u32;
            for i in 0..n {
                peek(&h.topic, ((random_q + i) % n.max(1)) as i32, &mut messages);
            }
        } else {
            peek(&h.topic, h.queue_id, &mut messages);
        }
        let header = PopMessageResponseHeader { rest_num: rest, ..PopMessageResponseHeader::default() };
        if messages.is_empty() {
            return RemotingCommand::response_to(
                req,
                response_code::PULL_NOT_FOUND,
                Some("NO_MESSAGE_IN_QUEUE".into()),
            )
            .with_header(&header);
        }
        RemotingCommand::response_to(req, response_code::SUCCESS, Some("FOUND".into()))
            .with_header(&header)
            .with_body_parts(messages)
    }
}

/// The pop's filter from `exp` / `expType`.
fn filter_of(broker: &Broker, h: &PopMessageRequestHeader) -> Result<PullFilter, (i32, String)> {
    let exp = h.exp.as_deref().map(str::trim).filter(|e| !e.is_empty()).unwrap_or("*");
    let exp_type = h.exp_type.as_deref().filter(|t| !t.is_empty());
    if filter::is_tag_type(exp_type) {
        return Ok(PullFilter::tags(exp));
    }
    let exp_type = exp_type.unwrap_or(EXPRESSION_TYPE_TAG);
    if !broker.config.enable_property_filter {
        broker.warn_property_filter_off(&h.consumer_group, exp_type);
        return Err((
            response_code::SYSTEM_ERROR,
            format!("The broker does not support consumer to filter message by {exp_type}"),
        ));
    }
    match filter::build(exp, exp_type, 0) {
        Ok(data) => Ok(PullFilter::Sql(Arc::new(data), broker.consumer_filters.bloom())),
        Err(e) => Err((
            response_code::SUBSCRIPTION_PARSE_FAILED,
            format!("parse the consumer's subscription failed: [{exp}] {e}"),
        )),
    }
}

/// Whether a pop's answer is "nothing found in the poll time" (either form).
pub(crate) fn is_polling_timeout(answer: &Result<Popped, ServiceError>) -> bool {
    match answer {
        Ok(p) => p.status == PopStatus::PollingTimeout,
        Err(e) => e.remoting_code() == response_code::POLLING_TIMEOUT,
    }
}

impl PopRequest {
    /// The request as the pop reads it (the remoting header's fields).
    pub(crate) fn to_header(&self) -> PopMessageRequestHeader {
        PopMessageRequestHeader {
            consumer_group: self.consumer_group.clone(),
            topic: self.topic.clone(),
            queue_id: self.queue_id.unwrap_or(-1),
            max_msg_nums: self.max_msg_nums,
            invisible_time: self.invisible_time_ms,
            poll_time: self.poll_time_ms,
            born_time: self.born_time_ms,
            init_mode: self.init_mode,
            exp_type: self.expression_type.clone(),
            exp: self.expression.clone(),
            order: Some(self.order),
            attempt_id: self.attempt_id.clone(),
            broker_name: None,
        }
    }
}
