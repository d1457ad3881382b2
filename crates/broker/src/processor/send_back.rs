//! CONSUMER_SEND_MSG_BACK (36): a consumer gives a message back after failing to consume it;
//! the broker stores it again in the group's retry topic, or in its dead-letter topic after
//! `maxReconsumeTimes` (or when asked to with a negative delay level). Java:
//! `SendMessageProcessor#consumerSendMsgBack`.

use ferromq_protocol::body::perm;
use ferromq_protocol::header::ConsumerSendMsgBackRequestHeader;
use ferromq_protocol::message::{create_offset_msg_id, keys, MessageProperties, StoredMessage};
use ferromq_protocol::{response_code, version, RemotingCommand};
use ferromq_remoting::Connection;
use ferromq_store::PutMessageStatus;
use tracing::info;

use crate::broker::Broker;
use crate::metadata::{dlq_topic, retry_topic};
use crate::processor::{failure, success};
use crate::schedule;

/// Queues of a dead-letter topic (Java: `DLQ_NUMS_PER_GROUP`).
pub(crate) const DLQ_NUMS_PER_GROUP: i32 = 1;

impl Broker {
    pub(crate) async fn consumer_send_msg_back(&self, conn: Connection, req: RemotingCommand) -> RemotingCommand {
        let h: ConsumerSendMsgBackRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return failure(&req, response_code::SYSTEM_ERROR, e.to_string()),
        };
        // A slave's CommitLog is the master's copy: it stores nothing of its own.
        if self.is_slave() {
            return failure(
                &req,
                response_code::SYSTEM_ERROR,
                format!("no master available along with {}", self.config.broker_ip1),
            );
        }
        let Some(group) = self.groups().find(&h.group, self.config.auto_create_subscription_group) else {
            return failure(
                &req,
                response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
                format!("subscription group not exist, {}", h.group),
            );
        };
        if !perm::is_writeable(self.permission()) {
            return failure(
                &req,
                response_code::NO_PERMISSION,
                format!("the broker[{}] sending message is forbidden", self.config.broker_ip1),
            );
        }
        if group.retry_queue_nums <= 0 {
            // The group keeps no retries: the message is dropped, as RocketMQ does.
            return success(&req);
        }
        let Some(bytes) = self.store.look_message_by_offset(h.offset) else {
            return failure(&req, response_code::SYSTEM_ERROR, format!("look message by offset failed, {}", h.offset));
        };
        let original = match StoredMessage::decode_shared(&bytes) {
            Ok((m, _)) => m,
            Err(e) => {
                return failure(
                    &req,
                    response_code::SYSTEM_ERROR,
                    format!("look message by offset failed, {}: {e}", h.offset),
                )
            }
        };
        let mut max_reconsume = group.retry_max_times;
        if req.version >= version::V3_4_9 {
            if let Some(m) = h.max_reconsume_times {
                max_reconsume = m;
            }
        }
        let to_dlq = original.reconsume_times >= max_reconsume || h.delay_level < 0;
        let (topic, queue_nums, topic_perm) = if to_dlq {
            // Readable, so the dead letters can be consumed (Java since 4.9.4; older brokers
            // made it write-only).
            (dlq_topic(&h.group), DLQ_NUMS_PER_GROUP, perm::PERM_WRITE | perm::PERM_READ)
        } else {
            (retry_topic(&h.group), group.retry_queue_nums, perm::PERM_WRITE | perm::PERM_READ)
        };
        let topic_config = match self.topics().create_topic_in_send_back(&topic, queue_nums, topic_perm, 0) {
            Ok(c) => c,
            Err(e) => return failure(&req, response_code::SYSTEM_ERROR, format!("topic[{topic}] not exist: {e}")),
        };
        self.on_topic_created(&topic_config);
        if !to_dlq && !perm::is_writeable(topic_config.perm) {
            return failure(
                &req,
                response_code::NO_PERMISSION,
                format!("the topic[{topic}] sending message is forbidden"),
            );
        }
        let mut props = MessageProperties::decode(&original.properties);
        if props.get(keys::RETRY_TOPIC).is_none() {
            props.insert(keys::RETRY_TOPIC, original.topic.as_str());
        }
        // The first attempt's id, else the original's offset message id (as Java; the
        // header's originMsgId, which clients fill with the UNIQ_KEY, is not it).
        let origin = props
            .get(keys::ORIGIN_MESSAGE_ID)
            .filter(|id| !id.trim().is_empty())
            .map(str::to_owned)
            .unwrap_or_else(|| create_offset_msg_id(original.store_host, original.physical_offset));
        props.insert(keys::ORIGIN_MESSAGE_ID, origin);
        // The retry is not flushed before the answer: the original is already durable.
        props.insert(keys::WAIT, "false");
        let mut stored_topic = topic.clone();
        let mut queue_id = (original.physical_offset.rem_euclid(i64::from(queue_nums.max(1)))) as i32;
        if to_dlq {
            props.insert(keys::DLQ_ORIGIN_TOPIC, original.topic.as_str());
            // Delivered at once (Java sets delay level 0).
            props.insert(keys::DELAY, "0");
        } else {
            // The retry waits in the schedule queue of its level: the header's, or one more
            // step of the 10s, 30s, 1m ... schedule for each earlier attempt.
            let level = if h.delay_level > 0 { h.delay_level } else { 3 + original.reconsume_times };
            props.insert(keys::DELAY, level.to_string());
            schedule::to_schedule_queue(
                &mut stored_topic,
                &mut queue_id,
                &mut props,
                &self.store.config().message_delay_level,
            );
        }
        let retry = StoredMessage {
            reconsume_times: original.reconsume_times + 1,
            ..self.stored_copy(&original, stored_topic, queue_id, &props)
        };
        let result = self.store.put_message(retry).await;
        match result.status {
            PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout => {
                info!(group = %h.group, topic = %topic, reconsume_times = original.reconsume_times + 1, remote_addr = %conn.remote_addr(), "message sent back");
                success(&req)
            }
            status => {
                failure(&req, response_code::SYSTEM_ERROR, result.remark.unwrap_or_else(|| format!("{status:?}")))
            }
        }
    }
}
