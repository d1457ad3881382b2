//! Acknowledging popped messages and changing their invisible time (the service's
//! [`ack`](crate::service::Service::ack) and
//! [`change_invisible_time`](crate::service::Service::change_invisible_time)), and
//! BATCH_ACK_MESSAGE (200151). A non-FIFO ack is an `ack` record in the checkpoint's revive
//! queue, due at the checkpoint's deadline, where revive matches it; a FIFO ack marks the
//! offset in the order info and moves the consumer offset. Changing the invisible time writes
//! a new one-message checkpoint first, then acks the old one: a crash between the two
//! duplicates the message, never loses it. Java: `AckMessageProcessor`,
//! `ChangeInvisibleTimeProcessor`.

use ferromq_protocol::body::{AckMsg, BatchAck, BatchAckMessageRequestBody, JsonBody, PopCheckPoint};
use ferromq_protocol::pop::{ExtraInfo, RetryFlag, POP_ORDER_REVIVE_QUEUE};
use ferromq_protocol::{response_code, RemotingCommand};
use tracing::{info, warn};

use crate::broker::{now_ms, Broker};
use crate::pop::order_info::Commit;
use crate::processor::{failure, success};
use crate::service::{AckRequest, Caller, ChangeInvisibleRequest, InvisibleChanged, ServiceError};

impl Broker {
    /// The topic and queue checks ACK and CHANGE_INVISIBLETIME share: the topic exists, the
    /// queue is one of its read queues (MESSAGE_ILLEGAL otherwise, as Java answers).
    fn check_ack_queue(&self, caller: &Caller, topic: &str, queue_id: i32) -> Result<(), ServiceError> {
        let Some(config) = self.topics().select(topic) else {
            return Err(ServiceError::TopicNotExist(format!("topic[{topic}] not exist, apply first please!")));
        };
        if queue_id < 0 || queue_id >= config.read_queue_nums {
            return Err(ServiceError::MessageIllegal(format!(
                "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                config.read_queue_nums, caller.remote_addr
            )));
        }
        Ok(())
    }

    /// An extra info's revive queue must be one this broker writes (or the FIFO marker).
    fn check_revive_qid(&self, info: &ExtraInfo, text: &str) -> Result<(), ServiceError> {
        if info.is_order() || (0..self.config.revive_queue_num).contains(&info.revive_qid) {
            return Ok(());
        }
        Err(ServiceError::InvalidParameter(format!(
            "extraInfo {text:?} names revive queue {} but the broker has {} (reviveQueueNum)",
            info.revive_qid, self.config.revive_queue_num
        )))
    }

    /// Acknowledges one popped message.
    pub(crate) async fn ack(&self, caller: &Caller, h: &AckRequest) -> Result<(), ServiceError> {
        if self.is_slave() {
            return Err(ServiceError::System("the broker is a slave: ack to its master".into()));
        }
        self.check_ack_queue(caller, &h.topic, h.queue_id)?;
        let (min, max) = self.queue_bounds(&h.topic, h.queue_id);
        if h.offset < min || h.offset > max {
            return Err(ServiceError::Other {
                code: response_code::NO_MESSAGE,
                remark: format!(
                    "offset is illegal, key:{}@{}, commit:{}, store:{min}~{max}",
                    h.topic, h.queue_id, h.offset
                ),
            });
        }
        let info = ExtraInfo::parse(&h.extra_info).map_err(|e| ServiceError::InvalidParameter(e.to_string()))?;
        self.check_revive_qid(&info, &h.extra_info)?;
        if info.is_order() {
            return self.ack_orderly(&h.topic, &h.consumer_group, h.queue_id, h.offset, info.pop_time);
        }
        let ack = ack_record(&h.topic, &h.consumer_group, h.queue_id, &info, h.offset);
        if self.ack_in_buffer(&ack, h.offset) {
            self.pop.inflight.sub(&h.topic, &h.consumer_group, h.queue_id, 1);
            return Ok(());
        }
        let (done, stored) = tokio::sync::oneshot::channel();
        let pending = crate::pop::ack_merge::PendingAck {
            ack,
            revive_qid: info.revive_qid,
            deliver_ms: info.next_visible_time(),
            done,
        };
        if self.pop.acks.try_send(pending).is_err() {
            return Err(ServiceError::Busy("[REJECTREQUEST]system busy: too many acks waiting to be stored".into()));
        }
        let stored = stored.await.unwrap_or_else(|_| Err("the broker is shutting down".to_owned()));
        match stored {
            Ok(()) => {
                self.pop.inflight.sub(&h.topic, &h.consumer_group, h.queue_id, 1);
                if self.config.enable_pop_log {
                    info!(topic = %h.topic, group = %h.consumer_group, queue_id = h.queue_id, offset = h.offset, revive_qid = info.revive_qid, "ack");
                }
                Ok(())
            }
            // Java answers SUCCESS whatever the store said; the client is told instead, so it
            // can ack again (the message would otherwise come back).
            Err(e) => Err(ServiceError::System(e)),
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
        topic: &str,
        group: &str,
        queue_id: i32,
        offset: i64,
        pop_time: i64,
    ) -> Result<(), ServiceError> {
        // The order info's own lock makes mark-and-next one step.
        let result = self.pop.order.commit_and_next(topic, group, queue_id, offset, pop_time);
        let answer = match result {
            Commit::Unknown => Err(ServiceError::MessageIllegal(format!(
                "offset is illegal, key:{topic}@{group}@{queue_id}, commit:{offset}: no FIFO batch holds it"
            ))),
            Commit::StalePopTime => Ok(()),
            Commit::Next(next) => {
                let old = self.offsets().query_offset(group, topic, queue_id).unwrap_or(-1);
                if next > old {
                    self.offsets().commit_offset("AckOrderly", group, topic, queue_id, next);
                }
                Ok(())
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
                let _ = self.ack_orderly(&topic, &ack.consumer_group, ack.queue_id, o, ack.pop_time);
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

    /// Changes the invisible time of one popped message.
    pub(crate) async fn change_invisible(
        &self,
        caller: &Caller,
        h: &ChangeInvisibleRequest,
    ) -> Result<InvisibleChanged, ServiceError> {
        if self.is_slave() {
            return Err(ServiceError::System("the broker is a slave: change invisible time at its master".into()));
        }
        self.check_ack_queue(caller, &h.topic, h.queue_id)?;
        let (min, max) = self.queue_bounds(&h.topic, h.queue_id);
        if h.offset < min || h.offset >= max {
            return Err(ServiceError::Other {
                code: response_code::NO_MESSAGE,
                remark: format!(
                    "offset is illegal, key:{}@{}, commit:{}, store:{min}~{max}",
                    h.topic, h.queue_id, h.offset
                ),
            });
        }
        if h.invisible_time < 0 {
            return Err(ServiceError::InvalidParameter(format!(
                "invisibleTime must not be negative, got {}",
                h.invisible_time
            )));
        }
        let info = ExtraInfo::parse(&h.extra_info).map_err(|e| ServiceError::InvalidParameter(e.to_string()))?;
        self.check_revive_qid(&info, &h.extra_info)?;
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
                Some(pop_time) => Ok(InvisibleChanged {
                    pop_time,
                    invisible_time: next_visible - pop_time,
                    revive_qid: POP_ORDER_REVIVE_QUEUE,
                }),
                None => Err(ServiceError::MessageIllegal(format!(
                    "no FIFO batch of {}@{} popped at {} holds offset {}",
                    h.topic, h.queue_id, info.pop_time, h.offset
                ))),
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
        self.put_checkpoint(&ck, info.revive_qid).await.map_err(|e| ServiceError::System(e.to_string()))?;
        let ack = ack_record(&h.topic, &h.consumer_group, h.queue_id, &info, h.offset);
        let merged = self.ack_in_buffer(&ack, h.offset);
        if !merged {
            // On failure the new checkpoint is stored: the message comes back at the new time
            // and, its old checkpoint unacknowledged, at the old one too.
            self.put_ack(&ack, info.revive_qid, info.next_visible_time())
                .await
                .map_err(|e| ServiceError::System(e.to_string()))?;
        }
        Ok(InvisibleChanged { pop_time: now, invisible_time: h.invisible_time, revive_qid: info.revive_qid })
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
