//! Messages with a delivery time: the put hooks that send a message to the timer wheel or to
//! its delay-level queue, and RECALL_MESSAGE (370), which cancels a pending timer message by
//! the recall handle its send returned; GET_TIMER_CHECK_POINT (60), the wheel's progress, which
//! a replica adopts (slave sync) so that a promoted replica does not deliver again what its
//! master delivered. The wheel itself is `ferromq-timer`. Java:
//! `HookUtils#handleScheduleMessage`, `SendMessageProcessor#attachRecallHandle`,
//! `RecallMessageProcessor`, `AdminBrokerProcessor#getTimerCheckPoint`.

use ferromq_protocol::body::perm;
use ferromq_protocol::header::{RecallMessageRequestHeader, RecallMessageResponseHeader};
use ferromq_protocol::message::{keys, MessageProperties};
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::Connection;
use ferromq_store::{PutMessageStatus, StoreConfig};
use ferromq_timer::recall::{check_recall, delete_marker, recall_handle_for_send};
use ferromq_timer::{timer_transform, TimerCheckpoint, TimerConfig, TimerDecision, TimerError, TimerRefusal};
use tracing::info;

use crate::broker::{now_ms, Broker};
use crate::processor::{failure, success};
use crate::schedule;

/// The wheel's settings from the store's `broker.conf` keys.
pub(crate) fn timer_config(store: &StoreConfig) -> TimerConfig {
    TimerConfig {
        timer_wheel_enable: store.timer_wheel_enable,
        timer_precision_ms: store.timer_precision_ms,
        timer_roll_window_slot: store.timer_roll_window_slot,
        timer_max_delay_sec: store.timer_max_delay_sec,
        timer_flush_interval_ms: store.timer_flush_interval_ms,
        mapped_file_size_timer_log: usize::try_from(store.mapped_file_size_timer_log).unwrap_or(usize::MAX),
        timer_enable_retry_until_success: store.timer_enable_retry_until_success,
        timer_congest_num_each_slot: store.timer_congest_num_each_slot,
        ..TimerConfig::default()
    }
}

/// A put refused by a hook: RocketMQ's response code and remark.
pub(crate) type HookRefusal = (i32, String);

impl Broker {
    /// Where a plain or committed message is stored: the timer wheel when it carries a
    /// delivery time (TIMER_DELIVER_MS / TIMER_DELAY_MS / TIMER_DELAY_SEC), the schedule queue
    /// of its level when it carries DELAY (which wins), else unchanged. Returns the recall
    /// handle of a message sent to the wheel.
    pub(crate) fn route_delivery_time(
        &self,
        topic: &mut String,
        queue_id: &mut i32,
        props: &mut MessageProperties,
    ) -> Result<Option<String>, HookRefusal> {
        if self.route_to_wheel_or_level(topic, queue_id, props)? {
            return Ok(recall_handle_for_send(props, &self.config.broker_name));
        }
        Ok(None)
    }

    /// [`Broker::route_delivery_time`] without the recall handle (the broker's own records,
    /// which nobody recalls): true when the message went to the wheel.
    pub(crate) fn route_to_wheel_or_level(
        &self,
        topic: &mut String,
        queue_id: &mut i32,
        props: &mut MessageProperties,
    ) -> Result<bool, HookRefusal> {
        match timer_transform(props, topic, queue_id, now_ms, &self.timer_config) {
            Ok(TimerDecision::Wheel { timer_out_ms }) => {
                if self.timer().is_some_and(|t| t.is_reject(timer_out_ms)) {
                    let each = i64::from(self.timer_config.timer_congest_num_each_slot);
                    return Err((
                        response_code::SYSTEM_ERROR,
                        format!(
                            "timer message is under flow control, max num limit is {} or the current value is greater than {each} and less than {}, trigger random flow control",
                            each * 2,
                            each * 2
                        ),
                    ));
                }
                return Ok(true);
            }
            Ok(_) => {}
            Err(TimerRefusal::NotEnabled) => {
                return Err((
                    response_code::SYSTEM_ERROR,
                    format!("accurate timer message is not enabled, timerWheelEnable is {}", self.timer_config.timer_wheel_enable),
                ))
            }
            // Illegal, and any refusal a later version adds.
            Err(_) => {
                return Err((
                    response_code::MESSAGE_ILLEGAL,
                    format!(
                        "timer message illegal, the delay time should not be bigger than the max delay {}ms; or if set del msg, the delay time should be bigger than the current time",
                        u64::from(self.timer_config.timer_max_delay_sec) * 1000
                    ),
                ))
            }
        }
        schedule::to_schedule_queue(topic, queue_id, props, &self.store.config().message_delay_level);
        Ok(false)
    }

    /// RECALL_MESSAGE: checks the handle and stores a delete marker that lands in the
    /// message's timer slot, so the wheel drops it there.
    pub(crate) async fn recall_message(&self, conn: Connection, req: RemotingCommand) -> RemotingCommand {
        let h: RecallMessageRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return failure(&req, response_code::SYSTEM_ERROR, e.to_string()),
        };
        if !self.config.recall_message_enable {
            return failure(&req, response_code::NO_PERMISSION, "recall failed, operation is forbidden");
        }
        if self.is_slave() {
            return failure(&req, response_code::SLAVE_NOT_AVAILABLE, "recall failed, broker service not available");
        }
        if !perm::is_writeable(self.permission()) && !self.config.allow_recall_when_broker_not_writeable {
            return failure(&req, response_code::SERVICE_NOT_AVAILABLE, "recall failed, broker service not available");
        }
        if self.topics().select(&h.topic).is_none() {
            return failure(
                &req,
                response_code::TOPIC_NOT_EXIST,
                format!("recall failed, the topic[{}] not exist", h.topic),
            );
        }
        let handle =
            match check_recall(&h.recall_handle, &h.topic, &self.config.broker_name, now_ms(), &self.timer_config) {
                Ok(handle) => handle,
                Err(refusal) => return failure(&req, response_code::ILLEGAL_OPERATION, refusal.to_string()),
            };
        let mut marker = delete_marker(&handle, h.producer_group.as_deref().unwrap_or(""), now_ms());
        marker.born_host = conn.remote_addr();
        marker.store_host = self.store_host;
        let mut props = MessageProperties::decode(&marker.properties);
        props.insert(keys::WAIT, "false");
        if let Err((code, remark)) = self.route_delivery_time(&mut marker.topic, &mut marker.queue_id, &mut props) {
            return failure(&req, code, remark);
        }
        marker.properties = props.encode();
        let topic = marker.topic.clone();
        let result = self.store.put_message(marker).await;
        match result.status {
            PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout => {
                if let Some(append) = &result.append {
                    self.stats.topic_put_nums.count(&topic, append.msg_num as u64);
                }
                info!(topic = %h.topic, msg_id = %handle.message_id, remote_addr = %conn.remote_addr(), "timer message recalled");
                RemotingCommand::response_to(&req, response_code::SUCCESS, None)
                    .with_header(&RecallMessageResponseHeader { msg_id: Some(handle.message_id) })
            }
            _ => failure(&req, response_code::SYSTEM_ERROR, "recall failed, execute error"),
        }
    }
}

impl Broker {
    /// GET_TIMER_CHECK_POINT (60): the running wheel's last written checkpoint (56 bytes);
    /// SYSTEM_ERROR with Java's remark where no wheel runs (a replica, or the wheel off).
    pub(crate) fn get_timer_check_point(&self, req: &RemotingCommand) -> RemotingCommand {
        match self.timer() {
            Some(timer) => success(req).with_body(timer.checkpoint().encode().to_vec()),
            None => failure(req, response_code::SYSTEM_ERROR, "The checkpoint is null"),
        }
    }

    /// Makes `master`'s progress the starting point of this broker's wheel, should it become
    /// master; `Ok(false)` when nothing changed or this broker runs a wheel itself (it is
    /// master, or was until a moment ago). Blocks: under the lock the wheel opens under, so a
    /// promotion never opens files being replaced.
    pub(crate) fn adopt_timer_progress(&self, master: &TimerCheckpoint) -> Result<bool, TimerError> {
        let _files = self.timer_files.blocking_lock();
        if !self.is_slave() || self.timer().is_some() {
            return Ok(false);
        }
        ferromq_timer::adopt_master_progress(&self.store.config().store_path_root_dir, master)
    }
}
