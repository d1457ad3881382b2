//! ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151) and CHANGE_MESSAGE_INVISIBLETIME
//! (200053). A non-FIFO ack is an `ack` record in the checkpoint's revive queue, due at the
//! checkpoint's deadline, where revive matches it; a FIFO ack marks the offset in the order
//! info and moves the consumer offset. Changing the invisible time writes a new one-message
//! checkpoint first, then acks the old one: a crash between the two duplicates the message,
//! never loses it. Java: `AckMessageProcessor`, `ChangeInvisibleTimeProcessor`.

use ferromq_protocol::body::{AckMsg, BatchAck, BatchAckMessageRequestBody, JsonBody, PopCheckPoint};
use ferromq_protocol::header::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
};
use ferromq_protocol::pop::{ExtraInfo, RetryFlag, POP_ORDER_REVIVE_QUEUE};
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::Connection;
use tracing::{info, warn};

use crate::broker::{now_ms, Broker};
use crate::pop::order_info::Commit;
use crate::processor::{failure, success};

impl Broker {
    /// The topic and queue checks ACK and CHANGE_INVISIBLETIME share: the topic exists, the
    /// queue is one of its read queues (MESSAGE_ILLEGAL otherwise, as Java answers).
    fn check_ack_queue(
        &self,
        req: &RemotingCommand,
        conn: &Connection,
        topic: &str,
        queue_id: i32,
    ) -> Result<(), Box<RemotingCommand>> {
        let Some(config) = self.topics().select(topic) else {
            return Err(Box::new(failure(
                req,
                response_code::TOPIC_NOT_EXIST,
                format!("topic[{topic}] not exist, apply first please!"),
            )));
        };
        if queue_id < 0 || queue_id >= config.read_queue_nums {
            return Err(Box::new(failure(
                req,
                response_code::MESSAGE_ILLEGAL,
                format!(
                    "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                    config.read_queue_nums,
                    conn.remote_addr()
                ),
            )));
        }
        Ok(())
    }

    /// An extra info's revive queue must be one this broker writes (or the FIFO marker).
    fn check_revive_qid(
        &self,
        req: &RemotingCommand,
        info: &ExtraInfo,
        text: &str,
    ) -> Result<(), Box<RemotingCommand>> {
        if info.is_order() || (0..self.config.revive_queue_num).contains(&info.revive_qid) {
            return Ok(());
        }
        Err(Box::new(failure(
            req,
            response_code::INVALID_PARAMETER,
            format!(
                "extraInfo {text:?} names revive queue {} but the broker has {} (reviveQueueNum)",
                info.revive_qid, self.config.revive_queue_num
            ),
        )))
    }

    /// ACK_MESSAGE.
    pub(crate) async fn ack_message(&self, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
        let h: AckMessageRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, e.to_string()),
        };
        if self.is_slave() {
            return failure(req, response_code::SYSTEM_ERROR, "the broker is a slave: ack to its master");
        }
        if let Err(r) = self.check_ack_queue(req, conn, &h.topic, h.queue_id) {
            return *r;
        }
        let (min, max) = self.queue_bounds(&h.topic, h.queue_id);
        if h.offset < min || h.offset > max {
            return failure(
                req,
                response_code::NO_MESSAGE,
                format!("offset is illegal, key:{}@{}, commit:{}, store:{min}~{max}", h.topic, h.queue_id, h.offset),
            );
        }
        let info = match ExtraInfo::parse(&h.extra_info) {
            Ok(i) => i,
            Err(e) => return failure(req, response_code::INVALID_PARAMETER, e.to_string()),
        };
        if let Err(r) = self.check_revive_qid(req, &info, &h.extra_info) {
            return *r;
        }
        if info.is_order() {
            return self.ack_orderly(req, &h.topic, &h.consumer_group, h.queue_id, h.offset, info.pop_time);
        }
        let ack = ack_record(&h.topic, &h.consumer_group, h.queue_id, &info, h.offset);
        if self.ack_in_buffer(&ack, h.offset) {
            self.pop.inflight.sub(&h.topic, &h.consumer_group, h.queue_id, 1);
            return success(req);
        }
        let (done, stored) = tokio::sync::oneshot::channel();
        let pending = crate::pop::ack_merge::PendingAck {
            ack,
            revive_qid: info.revive_qid,
            deliver_ms: info.next_visible_time(),
            done,
        };
        if self.pop.acks.try_send(pending).is_err() {
            return failure(
                req,
                response_code::SYSTEM_BUSY,
                "[REJECTREQUEST]system busy: too many acks waiting to be stored",
            );
        }
        let stored = stored.await.unwrap_or_else(|_| Err("the broker is shutting down".to_owned()));
        match stored {
            Ok(()) => {
                self.pop.inflight.sub(&h.topic, &h.consumer_group, h.queue_id, 1);
                if self.config.enable_pop_log {
                    info!(topic = %h.topic, group = %h.consumer_group, queue_id = h.queue_id, offset = h.offset, revive_qid = info.revive_qid, "ack");
                }
                success(req)
            }
            // Java answers SUCCESS whatever the store said; the client is told instead, so it
            // can ack again (the message would otherwise come back).
            Err(e) => failure(req, response_code::SYSTEM_ERROR, e),
        }
    }

    /// Marks `offset` acknowledged in its buffered checkpoint; false when the checkpoint is not
    /// buffered (the ack is then written as a record).
    fn ack_in_buffer(&self, ack: &AckMsg, offset: i64) -> bool {
        let Some(buffer) = &self.pop.buffer else { return false };
        let key = crate::pop::ck_buffer::ck_key(
            ack.topic.as_deref().unwrap_or_default(),
            ack.consumer_group.as_deref().unwrap_or_default(),
            ack.queue_id,
            ack.start_offset,
            ack.pop_time,
            ack.broker_name.as_deref().unwrap_or_default(),
        );
        let (outcome, released) = buffer.ack(&key, offset);
        self.commit_released(released);
        outcome == crate::pop::ck_buffer::AckOutcome::Merged
    }

    /// (min, max) offsets of a queue.
    fn queue_bounds(&self, topic: &str, queue_id: i32) -> (i64, i64) {
        (self.store.min_offset_in_queue(topic, queue_id), self.store.max_offset_in_queue(topic, queue_id))
    }

    /// The FIFO ack: marks the offset, moves the consumer offset to the first unacknowledged
    /// one, and wakes a parked pop when the queue unblocked.
    fn ack_orderly(
        &self,
        req: &RemotingCommand,
        topic: &str,
        group: &str,
        queue_id: i32,
        offset: i64,
        pop_time: i64,
    ) -> RemotingCommand {
        // The order info's own lock makes mark-and-next one step.
        let result = self.pop.order.commit_and_next(topic, group, queue_id, offset, pop_time);
        let answer = match result {
            Commit::Unknown => failure(
                req,
                response_code::MESSAGE_ILLEGAL,
                format!("offset is illegal, key:{topic}@{group}@{queue_id}, commit:{offset}: no FIFO batch holds it"),
            ),
            Commit::StalePopTime => success(req),
            Commit::Next(next) => {
                let old = self.offsets().query_offset(group, topic, queue_id).unwrap_or(-1);
                if next > old {
                    self.offsets().commit_offset("AckOrderly", group, topic, queue_id, next);
                }
                success(req)
            }
        };
        if matches!(result, Commit::Next(_))
            && self.config.enable_notify_after_pop_order_lock_release
            && !self.pop.order.needs_block(topic, group, queue_id, None, now_ms())
        {
            self.pop.hold.wake_group(topic, group);
        }
        answer
    }

    /// BATCH_ACK_MESSAGE.
    pub(crate) async fn batch_ack_message(&self, req: &RemotingCommand) -> RemotingCommand {
        if self.is_slave() {
            return failure(req, response_code::SYSTEM_ERROR, "the broker is a slave: ack to its master");
        }
        let body = match BatchAckMessageRequestBody::decode(&req.body) {
            Ok(b) => b,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("bad BatchAckMessageRequestBody: {e}")),
        };
        if body.acks.is_empty() {
            return failure(req, response_code::NO_MESSAGE, "no acks in the request");
        }
        let broker_name = body.broker_name.clone().unwrap_or_else(|| self.config.broker_name.clone());
        for ack in &body.acks {
            if let Err(remark) = self.batch_ack_one(req, ack, &broker_name).await {
                return *remark;
            }
        }
        success(req)
    }

    async fn batch_ack_one(
        &self,
        req: &RemotingCommand,
        ack: &BatchAck,
        broker_name: &str,
    ) -> Result<(), Box<RemotingCommand>> {
        let Some(flag) = RetryFlag::parse(&ack.retry) else {
            return Err(Box::new(failure(
                req,
                response_code::INVALID_PARAMETER,
                format!("batch ack of topic {} has retry flag {:?}; expected 0, 1 or 2", ack.topic, ack.retry),
            )));
        };
        let topic = flag.real_topic(&ack.topic, &ack.consumer_group);
        let Some(indexes) = ack.acked_indexes() else {
            return Err(Box::new(failure(
                req,
                response_code::INVALID_PARAMETER,
                format!("batch ack of topic {} has a bit set that is not base64: {:?}", ack.topic, ack.bit_set),
            )));
        };
        if self.topics().select(&topic).is_none() {
            warn!(topic = %topic, group = %ack.consumer_group, "batch ack for an unknown topic ignored");
            return Ok(());
        }
        let is_order = ack.revive_queue_id == POP_ORDER_REVIVE_QUEUE;
        if !is_order && !(0..self.config.revive_queue_num).contains(&ack.revive_queue_id) {
            return Err(Box::new(failure(
                req,
                response_code::INVALID_PARAMETER,
                format!(
                    "batch ack names revive queue {} but the broker has {}",
                    ack.revive_queue_id, self.config.revive_queue_num
                ),
            )));
        }
        let (min, max) = self.queue_bounds(&topic, ack.queue_id);
        let mut offsets: Vec<i64> =
            indexes.into_iter().map(|i| ack.start_offset + i64::from(i)).filter(|o| (min..=max).contains(o)).collect();
        let mut record = AckMsg {
            ack_offset: -1,
            ack_offset_list: None,
            broker_name: Some(broker_name.to_owned()),
            consumer_group: Some(ack.consumer_group.clone()),
            pop_time: ack.pop_time,
            queue_id: ack.queue_id,
            start_offset: ack.start_offset,
            topic: Some(topic.clone()),
        };
        if !is_order {
            let before = offsets.len();
            offsets.retain(|o| !self.ack_in_buffer(&record, *o));
            self.pop.inflight.sub(&topic, &ack.consumer_group, ack.queue_id, (before - offsets.len()) as i64);
        }
        if is_order {
            for o in offsets {
                let _ = self.ack_orderly(req, &topic, &ack.consumer_group, ack.queue_id, o, ack.pop_time);
            }
            return Ok(());
        }
        if offsets.is_empty() {
            return Ok(());
        }
        let n = offsets.len() as i64;
        record.ack_offset_list = Some(offsets);
        match self.put_ack(&record, ack.revive_queue_id, ack.pop_time.saturating_add(ack.invisible_time)).await {
            Ok(()) => {
                self.pop.inflight.sub(&topic, &ack.consumer_group, ack.queue_id, n);
                Ok(())
            }
            Err(e) => Err(Box::new(failure(req, response_code::SYSTEM_ERROR, e.to_string()))),
        }
    }

    /// CHANGE_MESSAGE_INVISIBLETIME.
    pub(crate) async fn change_invisible_time(&self, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
        let h: ChangeInvisibleTimeRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, e.to_string()),
        };
        if self.is_slave() {
            return failure(
                req,
                response_code::SYSTEM_ERROR,
                "the broker is a slave: change invisible time at its master",
            );
        }
        if let Err(r) = self.check_ack_queue(req, conn, &h.topic, h.queue_id) {
            return *r;
        }
        let (min, max) = self.queue_bounds(&h.topic, h.queue_id);
        if h.offset < min || h.offset >= max {
            return failure(
                req,
                response_code::NO_MESSAGE,
                format!("offset is illegal, key:{}@{}, commit:{}, store:{min}~{max}", h.topic, h.queue_id, h.offset),
            );
        }
        if h.invisible_time < 0 {
            return failure(
                req,
                response_code::INVALID_PARAMETER,
                format!("invisibleTime must not be negative, got {}", h.invisible_time),
            );
        }
        let info = match ExtraInfo::parse(&h.extra_info) {
            Ok(i) => i,
            Err(e) => return failure(req, response_code::INVALID_PARAMETER, e.to_string()),
        };
        if let Err(r) = self.check_revive_qid(req, &info, &h.extra_info) {
            return *r;
        }
        let now = now_ms();
        if info.is_order() {
            let next_visible = now.saturating_add(h.invisible_time);
            return match self.pop.order.update_next_visible_time(
                &h.topic,
                &h.consumer_group,
                h.queue_id,
                h.offset,
                info.pop_time,
                next_visible,
            ) {
                Some(pop_time) => success(req).with_header(&ChangeInvisibleTimeResponseHeader {
                    pop_time,
                    invisible_time: next_visible - pop_time,
                    revive_qid: POP_ORDER_REVIVE_QUEUE,
                }),
                None => failure(
                    req,
                    response_code::MESSAGE_ILLEGAL,
                    format!(
                        "no FIFO batch of {}@{} popped at {} holds offset {}",
                        h.topic, h.queue_id, info.pop_time, h.offset
                    ),
                ),
            };
        }
        let ck = PopCheckPoint {
            broker_name: Some(info.broker_name.clone()),
            cid: Some(h.consumer_group.clone()),
            queue_offset_diff: vec![0],
            invisible_time: h.invisible_time,
            num: 1,
            pop_time: now,
            queue_id: h.queue_id,
            start_offset: h.offset,
            topic: Some(h.topic.clone()),
            ..PopCheckPoint::default()
        };
        if let Err(e) = self.put_checkpoint(&ck, info.revive_qid).await {
            return failure(req, response_code::SYSTEM_ERROR, e.to_string());
        }
        let ack = ack_record(&h.topic, &h.consumer_group, h.queue_id, &info, h.offset);
        let merged = self.ack_in_buffer(&ack, h.offset);
        if !merged {
            if let Err(e) = self.put_ack(&ack, info.revive_qid, info.next_visible_time()).await {
                // The new checkpoint is stored: the message comes back at the new time and, its
                // old checkpoint unacknowledged, at the old one too.
                return failure(req, response_code::SYSTEM_ERROR, e.to_string());
            }
        }
        success(req).with_header(&ChangeInvisibleTimeResponseHeader {
            pop_time: now,
            invisible_time: h.invisible_time,
            revive_qid: info.revive_qid,
        })
    }
}

/// The ack record of `offset`, popped as `info` says from `topic`/`queue_id` by `group`.
fn ack_record(topic: &str, group: &str, queue_id: i32, info: &ExtraInfo, offset: i64) -> AckMsg {
    AckMsg {
        ack_offset: offset,
        ack_offset_list: None,
        broker_name: Some(info.broker_name.clone()),
        consumer_group: Some(group.to_owned()),
        pop_time: info.pop_time,
        queue_id,
        start_offset: info.ck_queue_offset,
        topic: Some(topic.to_owned()),
    }
}
