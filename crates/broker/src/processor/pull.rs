//! PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361), with long polling. Java:
//! `PullMessageProcessor`.

use std::time::{Duration, Instant};

use ferromq_protocol::body::{perm, MessageModel, SubscriptionData};
use ferromq_protocol::header::{forbidden_type, pull_sys_flag, PullMessageRequestHeader, PullMessageResponseHeader};
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::Connection;
use ferromq_store::GetMessageStatus;
use tracing::debug;

use crate::broker::Broker;
use crate::filter::{self, PullFilter, EXPRESSION_TYPE_TAG};
use crate::long_polling::HeldPull;
use crate::processor::failure;
use crate::service::send::BUSY_REMARK;
use crate::stats::BrokerStats;

/// Largest number of messages one pull returns, whatever the client asks.
const MAX_PULL_MSG_NUMS: i32 = 1000;
/// How long a pull that found nothing waits for dispatch to reach what was stored before it
/// arrived (normally well under a millisecond).
const DISPATCH_CATCH_UP_MAX: Duration = Duration::from_millis(500);

/// Byte budget of one pull when the client does not say (the store applies its own limits).
const DEFAULT_MAX_PULL_BYTES: usize = 8 * 1024 * 1024;

/// CommitLog offsets read when a pull or pop arrived: what had been stored (acknowledged)
/// and how far dispatch to the consume queues had got.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arrival {
    stored: i64,
    dispatched: i64,
}

impl Arrival {
    /// Whether a message acknowledged before the read arrived could still have been on its way
    /// to its consume queue when the read looked.
    fn dispatch_behind(self) -> bool {
        self.dispatched < self.stored
    }
}

/// Outcome of processing a pull once.
pub(crate) enum PullOutcome {
    /// Answer now.
    Respond(RemotingCommand),
    /// Nothing yet: park until a message arrives or the suspend time runs out.
    Park { topic: String, queue_id: i32, pull_from: i64, suspend: Duration, tag_codes: Option<Vec<i64>> },
}

impl Broker {
    /// Serves a pull: answers at once, or parks it and answers later on `conn`.
    pub(crate) async fn pull(&self, conn: Connection, req: RemotingCommand) -> Option<RemotingCommand> {
        // A static topic's logic queue: read here through its physical queue (answered in
        // logic terms), or answered already (forwarded to an older item's broker, refused).
        let (req, logic) = match self.route_static_pull(&req).await {
            Ok(None) => (req, None),
            Ok(Some((physical, mapping))) => (physical, Some(Box::new(mapping))),
            Err(answer) => return Some(answer),
        };
        let answer = |r: RemotingCommand| match &logic {
            Some(mapping) => self.rewrite_pull_answer(mapping, r),
            None => r,
        };
        // What was acknowledged before this pull arrived is what it may expect to see.
        let arrival = self.arrival();
        // An older item of a logic queue gets no new messages: its end moves the reader on
        // to the next item at once instead of waiting.
        let allow_suspend = logic.as_ref().is_none_or(|m| m.reads_leader());
        match self.process_pull(&conn, &req, allow_suspend) {
            PullOutcome::Respond(r) if r.code == response_code::PULL_NOT_FOUND => {
                // Nothing yet, but dispatch had not reached what was stored before the pull
                // arrived (the message a producer was just told SEND_OK for, on its way to the
                // consume queue): wait for it, a bounded moment, and look once more, so a send
                // then a pull reads its own write.
                if self.caught_up_since(arrival).await {
                    if let PullOutcome::Respond(again) = self.process_pull(&conn, &req, false) {
                        return Some(answer(again));
                    }
                }
                Some(answer(r))
            }
            PullOutcome::Respond(r) => Some(answer(r)),
            PullOutcome::Park { topic, queue_id, pull_from, suspend, tag_codes } => {
                let held = HeldPull {
                    conn: conn.clone(),
                    request: req.clone(),
                    pull_from,
                    deadline: Instant::now() + suspend,
                    tag_codes,
                    logic,
                };
                if let Err(held) = self.pull_hold.park(&topic, queue_id, held) {
                    return Some(failure(&held.request, response_code::SYSTEM_BUSY, BUSY_REMARK));
                }
                // A message may have arrived between the read and the park.
                self.pull_hold.recheck(&topic, queue_id, self.store.max_offset_in_queue(&topic, queue_id));
                None
            }
        }
    }

    /// What had been stored and dispatched when a read arrived (see [`Arrival`]).
    pub(crate) fn arrival(&self) -> Arrival {
        // Stored first: dispatch read afterwards can only be further on, so "dispatched at
        // least as far as stored" still means the read's look sees every stored message.
        let stored = self.store.max_phy_offset();
        Arrival { stored, dispatched: self.store.dispatched_phy_offset() }
    }

    /// After a read that found nothing: whether a second look may find more, having waited
    /// (at most [`DISPATCH_CATCH_UP_MAX`]) for dispatch to reach what was stored when the read
    /// arrived. False at once when dispatch was there already at arrival: the first look saw
    /// everything. Dispatch may finish between the look and this call, so the answer depends
    /// on the arrival, not on where dispatch is now.
    pub(crate) async fn caught_up_since(&self, arrival: Arrival) -> bool {
        if !arrival.dispatch_behind() {
            return false;
        }
        self.wait_dispatched(arrival.stored).await;
        true
    }

    /// Waits (at most [`DISPATCH_CATCH_UP_MAX`]) until dispatch has passed `offset`. Also
    /// used by the revive service.
    pub(crate) async fn wait_dispatched(&self, offset: i64) {
        let deadline = tokio::time::Instant::now() + DISPATCH_CATCH_UP_MAX;
        while self.store.dispatched_phy_offset() < offset && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Processes a pull once; `allow_suspend` is false when a parked pull is re-run.
    pub(crate) fn process_pull(&self, conn: &Connection, req: &RemotingCommand, allow_suspend: bool) -> PullOutcome {
        let respond = |code, remark: String| PullOutcome::Respond(failure(req, code, remark));
        // NO_PERMISSION says why in the header's `forbiddenType` (Java's `ForbiddenType`).
        let forbidden = |forbidden_type: i32, remark: String| {
            let mut response = failure(req, response_code::NO_PERMISSION, remark);
            response.ext_fields.insert("forbiddenType".into(), &forbidden_type.to_string());
            PullOutcome::Respond(response)
        };
        let h: PullMessageRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return respond(response_code::SYSTEM_ERROR, e.to_string()),
        };
        if self.is_slave() && !self.config.slave_read_enable {
            // Java's PullMessageProcessor#rejectRequest: a slave serves reads only with
            // slaveReadEnable.
            return respond(response_code::SYSTEM_BUSY, BUSY_REMARK.to_owned());
        }
        if !perm::is_readable(self.permission()) {
            return forbidden(
                forbidden_type::BROKER_FORBIDDEN,
                format!("the broker[{}] pulling message is forbidden", self.config.broker_ip1),
            );
        }
        let Some(group) = self.groups().find(&h.consumer_group, self.config.auto_create_subscription_group) else {
            return respond(
                response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
                format!("subscription group [{}] does not exist", h.consumer_group),
            );
        };
        if !group.consume_enable {
            return forbidden(
                forbidden_type::GROUP_FORBIDDEN,
                format!("subscription group no permission, {}", h.consumer_group),
            );
        }
        let Some(topic) = self.topics().select(&h.topic) else {
            return respond(
                response_code::TOPIC_NOT_EXIST,
                format!("topic[{}] not exist, apply first please!", h.topic),
            );
        };
        if !perm::is_readable(topic.perm) {
            return forbidden(
                forbidden_type::TOPIC_FORBIDDEN,
                format!("the topic[{}] pulling message is forbidden", h.topic),
            );
        }
        if h.queue_id < 0 || h.queue_id >= topic.read_queue_nums {
            // Java 5's code (4.x answered SYSTEM_ERROR), as for an illegal queue on send.
            return respond(
                response_code::INVALID_PARAMETER,
                format!(
                    "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                    h.queue_id,
                    h.topic,
                    topic.read_queue_nums,
                    conn.remote_addr()
                ),
            );
        }
        let has_subscription = h.sys_flag & pull_sys_flag::SUBSCRIPTION != 0;
        let filter = if has_subscription {
            let sub_string = h.subscription.clone().unwrap_or_else(|| "*".to_owned());
            let expression_type = h.expression_type.as_deref().filter(|t| !t.is_empty());
            if filter::is_tag_type(expression_type) {
                PullFilter::tags(&sub_string)
            } else {
                let expression_type = expression_type.unwrap_or(EXPRESSION_TYPE_TAG);
                if !self.config.enable_property_filter {
                    self.warn_property_filter_off(&h.consumer_group, expression_type);
                    return respond(
                        response_code::SYSTEM_ERROR,
                        format!("The broker does not support consumer to filter message by {expression_type}"),
                    );
                }
                match filter::build(&sub_string, expression_type, h.sub_version) {
                    Ok(data) => PullFilter::Sql(std::sync::Arc::new(data), self.consumer_filters.bloom()),
                    Err(e) => {
                        return respond(
                            response_code::SUBSCRIPTION_PARSE_FAILED,
                            format!(
                                "parse the consumer's subscription[{sub_string}] failed, group: {}: {e}",
                                h.consumer_group
                            ),
                        )
                    }
                }
            }
        } else {
            let Some(online) = self.consumers.group(&h.consumer_group) else {
                return respond(
                    response_code::SUBSCRIPTION_NOT_EXIST,
                    format!("the consumer's group info not exist, group: {}", h.consumer_group),
                );
            };
            if !group.consume_broadcast_enable && online.message_model == MessageModel::Broadcasting {
                return forbidden(
                    forbidden_type::BROADCASTING_DISABLE_FORBIDDEN,
                    format!("the consumer group[{}] can not consume by broadcast way", h.consumer_group),
                );
            }
            if self.groups().is_forbidden(&h.consumer_group, &h.topic, perm::INDEX_PERM_READ) {
                return forbidden(
                    forbidden_type::SUBSCRIPTION_FORBIDDEN,
                    format!("the consumer group[{}] is forbidden for topic[{}]", h.consumer_group, h.topic),
                );
            }
            let Some(sub): Option<SubscriptionData> = self.consumers.find_subscription(&h.consumer_group, &h.topic)
            else {
                return respond(
                    response_code::SUBSCRIPTION_NOT_EXIST,
                    format!("the consumer's subscription not exist, group: {}", h.consumer_group),
                );
            };
            if sub.sub_version < h.sub_version {
                return respond(
                    response_code::SUBSCRIPTION_NOT_LATEST,
                    "the consumer's subscription not latest".into(),
                );
            }
            if filter::is_tag_type(Some(sub.expression_type.as_str())) {
                PullFilter::tags(&sub.sub_string)
            } else {
                if !self.config.enable_property_filter {
                    self.warn_property_filter_off(&h.consumer_group, &sub.expression_type);
                    return respond(
                        response_code::SYSTEM_ERROR,
                        format!("The broker does not support consumer to filter message by {}", sub.expression_type),
                    );
                }
                let Some(data) = self.consumer_filters.get(&h.topic, &h.consumer_group) else {
                    return respond(
                        response_code::FILTER_DATA_NOT_EXIST,
                        "The broker's consumer filter data is not exist!Your expression may be wrong!".into(),
                    );
                };
                if data.client_version < h.sub_version {
                    return respond(
                        response_code::FILTER_DATA_NOT_LATEST,
                        "the consumer's consumer filter data not latest".into(),
                    );
                }
                PullFilter::Sql(data, self.consumer_filters.bloom())
            }
        };
        // A server-side offset reset (INVOKE_BROKER_TO_RESET_OFFSET) is handed to the next pull
        // of the queue, which moves the consumer there (Java: `useServerSideResetOffset`).
        if let Some(reset) = self.offsets().take_reset_offset(&h.consumer_group, &h.topic, h.queue_id) {
            let response =
                RemotingCommand::response_to(req, response_code::PULL_OFFSET_MOVED, Some("OFFSET_RESET".to_owned()))
                    .with_header(&PullMessageResponseHeader {
                        suggest_which_broker_id: 0,
                        next_begin_offset: reset,
                        min_offset: self.store.min_offset_in_queue(&h.topic, h.queue_id),
                        max_offset: self.store.max_offset_in_queue(&h.topic, h.queue_id),
                        offset_delta: None,
                        topic_sys_flag: Some(topic.topic_sys_flag),
                        group_sys_flag: Some(group.group_sys_flag),
                        forbidden_type: None,
                    });
            return PullOutcome::Respond(response);
        }
        let max_nums = h.max_msg_nums.clamp(1, MAX_PULL_MSG_NUMS) as usize;
        // Whatever the client asks, the answer must fit one frame: a batch stops short of it
        // (the first message is always taken, and `maxMessageSize` keeps one within it).
        let max_bytes = h
            .max_msg_bytes
            .filter(|b| *b > 0)
            .map_or(DEFAULT_MAX_PULL_BYTES, |b| b as usize)
            .min(crate::config::PULL_BODY_BYTES_MAX);
        let mut result =
            self.store.get_message(&h.topic, h.queue_id, h.queue_offset, max_nums, max_bytes, Some(&filter));
        // Java: a slave does not correct a consumer's offset from its own, possibly lagging,
        // queue unless `offsetCheckInSlave`: the pull keeps its offset and is retried.
        let keep_offset = self.is_slave() && !self.store.config().offset_check_in_slave;
        if keep_offset
            && matches!(
                result.status,
                GetMessageStatus::NoMessageInQueue
                    | GetMessageStatus::NoMatchedLogicQueue
                    | GetMessageStatus::OffsetTooSmall
                    | GetMessageStatus::OffsetOverflowBadly
            )
        {
            result.next_begin_offset = h.queue_offset;
        }
        let tag_codes = filter.tag_codes();

        let (mut code, mut suggest) = match result.status {
            GetMessageStatus::Found => (response_code::SUCCESS, 0),
            GetMessageStatus::NoMatchedMessage | GetMessageStatus::MessageWasRemoving => {
                (response_code::PULL_RETRY_IMMEDIATELY, 0)
            }
            GetMessageStatus::NoMessageInQueue | GetMessageStatus::NoMatchedLogicQueue => {
                if h.queue_offset != 0 {
                    (response_code::PULL_OFFSET_MOVED, 0)
                } else {
                    (response_code::PULL_NOT_FOUND, 0)
                }
            }
            GetMessageStatus::OffsetFoundNull | GetMessageStatus::OffsetOverflowOne => {
                (response_code::PULL_NOT_FOUND, 0)
            }
            GetMessageStatus::OffsetOverflowBadly | GetMessageStatus::OffsetTooSmall => {
                (response_code::PULL_OFFSET_MOVED, 0)
            }
        };
        // Java: with slave reads on, cold reads go to the group's slow-consumer broker and
        // the rest to the group's own broker id; otherwise always to the master. A slave whose
        // master is alive sends warm readers back to it, without parking their pulls.
        if self.config.slave_read_enable {
            suggest = if result.suggest_pulling_from_slave {
                group.which_broker_when_consume_slowly
            } else {
                group.broker_id
            };
        }
        if self.role().broker_id != 0 && !result.suggest_pulling_from_slave && self.master_addr().is_some() {
            suggest = 0;
            if result.status != GetMessageStatus::Found {
                code = response_code::PULL_RETRY_IMMEDIATELY;
            }
        }
        if keep_offset && code == response_code::PULL_OFFSET_MOVED {
            code = response_code::PULL_RETRY_IMMEDIATELY;
            suggest = group.broker_id;
        }
        // The consumer's committed offset rides along on pulls.
        if h.sys_flag & pull_sys_flag::COMMIT_OFFSET != 0
            && h.commit_offset >= 0
            && !self.is_slave()
            && !self.offsets().has_offset_reset(&h.consumer_group, &h.topic, h.queue_id)
        {
            self.offsets().commit_offset(
                &conn.remote_addr().to_string(),
                &h.consumer_group,
                &h.topic,
                h.queue_id,
                h.commit_offset,
            );
        }
        if code == response_code::PULL_NOT_FOUND && allow_suspend && h.sys_flag & pull_sys_flag::SUSPEND != 0 {
            let suspend = if self.config.long_polling_enable {
                Duration::from_millis(h.suspend_timeout_millis.max(0) as u64)
            } else {
                Duration::from_millis(self.config.short_polling_time_mills)
            };
            debug!(topic = %h.topic, queue_id = h.queue_id, queue_offset = h.queue_offset, "pull parked");
            return PullOutcome::Park {
                topic: h.topic,
                queue_id: h.queue_id,
                pull_from: h.queue_offset,
                suspend,
                tag_codes,
            };
        }
        let mut response = RemotingCommand::response_to(req, code, Some(result.status.name().to_owned())).with_header(
            &PullMessageResponseHeader {
                suggest_which_broker_id: suggest,
                next_begin_offset: result.next_begin_offset,
                min_offset: result.min_offset,
                max_offset: result.max_offset,
                offset_delta: None,
                topic_sys_flag: Some(topic.topic_sys_flag),
                group_sys_flag: Some(group.group_sys_flag),
                forbidden_type: None,
            },
        );
        if code == response_code::SUCCESS {
            let key = BrokerStats::group_key(&h.topic, &h.consumer_group);
            self.pull_offsets.commit(&key, h.queue_id, result.next_begin_offset);
            let count = result.messages.len() as u64;
            self.stats.group_get_nums.count(&key, count);
            self.metrics.message_out(&key, count, result.total_bytes() as u64);
            // The stored records as they are (slices of the mapped CommitLog): the connection
            // writes them with vectored writes, no copy into one body.
            response = response.with_body_parts(result.messages);
        }
        PullOutcome::Respond(response)
    }
}

#[cfg(test)]
mod tests {
    use super::Arrival;

    /// The second look depends on dispatch at arrival: a dispatch that finished between the
    /// first look and the check (the race a pull after SEND_OK lost now and then) still gets
    /// a second look, and a read that arrived with dispatch caught up does not wait.
    #[test]
    fn a_read_looks_again_when_dispatch_was_behind_at_its_arrival() {
        assert!(Arrival { stored: 2616, dispatched: 2414 }.dispatch_behind());
        assert!(!Arrival { stored: 2616, dispatched: 2616 }.dispatch_behind());
    }
}
