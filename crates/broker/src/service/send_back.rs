//! Giving a message back (the service's `send_back`; CONSUMER_SEND_MSG_BACK (36) over
//! remoting, ForwardMessageToDeadLetterQueue over gRPC): a consumer that failed to consume a
//! message has the broker store it again in the group's retry topic, or in its dead-letter
//! topic after `maxReconsumeTimes` (or when asked to with a negative delay level). Java:
//! `SendMessageProcessor#consumerSendMsgBack`.

use ferromq_protocol::body::perm;
use ferromq_protocol::message::{create_offset_msg_id, keys, MessageProperties, StoredMessage};
use ferromq_protocol::version;
use ferromq_store::PutMessageStatus;
use tracing::info;

use crate::broker::Broker;
use crate::metadata::{dlq_topic, retry_topic};
use crate::schedule;
use crate::service::{Caller, Service, ServiceError};

/// Queues of a dead-letter topic (Java: `DLQ_NUMS_PER_GROUP`).
pub(crate) const DLQ_NUMS_PER_GROUP: i32 = 1;

/// A message given back by its consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendBackRequest {
    /// The consumer group.
    pub group: String,
    /// The message's CommitLog offset.
    pub offset: i64,
    /// The retry's delay level: 0 the next step of the retry schedule, > 0 that level,
    /// < 0 straight to the dead-letter topic.
    pub delay_level: i32,
    /// The consumer's maximum reconsume times (from clients of V3_4_9 on).
    pub max_reconsume_times: Option<i32>,
}

/// What became of a message given back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SentBack {
    /// Stored again in `topic` (the retry or the dead-letter topic).
    Stored {
        /// Where.
        topic: String,
        /// Whether that is the dead-letter topic.
        dead_letter: bool,
    },
    /// The group keeps no retries (`retryQueueNums` 0): dropped, as RocketMQ does.
    Dropped,
}

impl Service {
    /// Stores a message again for its group: in the retry topic, or the dead-letter topic.
    ///
    /// # Errors
    /// A slave; the group missing; the broker or the retry topic not writable; the message not
    /// found at its offset; the store refusing it.
    pub async fn send_back(&self, caller: &Caller, req: &SendBackRequest) -> Result<SentBack, ServiceError> {
        self.broker.send_back_of(caller, req).await
    }
}

impl Broker {
    pub(crate) async fn send_back_of(&self, caller: &Caller, h: &SendBackRequest) -> Result<SentBack, ServiceError> {
        // A slave's CommitLog is the master's copy: it stores nothing of its own.
        if self.is_slave() {
            return Err(ServiceError::System(format!("no master available along with {}", self.config.broker_ip1)));
        }
        let Some(group) = self.groups().find(&h.group, self.config.auto_create_subscription_group) else {
            return Err(ServiceError::GroupNotExist(format!("subscription group not exist, {}", h.group)));
        };
        if !perm::is_writeable(self.permission()) {
            return Err(ServiceError::Forbidden(format!(
                "the broker[{}] sending message is forbidden",
                self.config.broker_ip1
            )));
        }
        if group.retry_queue_nums <= 0 {
            // The group keeps no retries: the message is dropped, as RocketMQ does.
            return Ok(SentBack::Dropped);
        }
        let Some(bytes) = self.store.look_message_by_offset(h.offset) else {
            return Err(ServiceError::System(format!("look message by offset failed, {}", h.offset)));
        };
        let original = StoredMessage::decode_shared(&bytes)
            .map(|(m, _)| m)
            .map_err(|e| ServiceError::System(format!("look message by offset failed, {}: {e}", h.offset)))?;
        let mut max_reconsume = group.retry_max_times;
        if caller.client_version >= version::V3_4_9 {
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
        // Registered only when new: every message sent back would otherwise send the topic to
        // the name servers again.
        let ensured = self
            .topics()
            .create_topic_in_send_back(&topic, queue_nums, topic_perm, 0)
            .map_err(|e| ServiceError::System(format!("topic[{topic}] not exist: {e}")))?;
        let created = self.on_topic_ensured(&ensured);
        let topic_config = ensured.config;
        if !to_dlq && !perm::is_writeable(topic_config.perm) {
            return Err(ServiceError::Forbidden(format!("the topic[{topic}] sending message is forbidden")));
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
        self.created_topic_routable(created).await;
        match result.status {
            PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout => {
                info!(group = %h.group, topic = %topic, reconsume_times = original.reconsume_times + 1, remote_addr = %caller.remote_addr, "message sent back");
                if to_dlq {
                    // The topic the group consumed it from (a retry's original topic).
                    let from = props.get(keys::RETRY_TOPIC).unwrap_or(original.topic.as_str());
                    self.metrics.dead_lettered(from, &h.group, 1);
                }
                Ok(SentBack::Stored { topic, dead_letter: to_dlq })
            }
            status => Err(ServiceError::System(result.remark.unwrap_or_else(|| format!("{status:?}")))),
        }
    }
}
