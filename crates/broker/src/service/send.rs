//! Storing what producers send: admission, Java's `msgCheck` (permissions, topic name and
//! existence with auto-create, queue id), the queue pick, retry/DLQ redirection, the message
//! built (CLUSTER, UNIQ_KEY, half queue, delivery time), the put and the replica wait. Java:
//! `SendMessageProcessor`, `AbstractSendMessageProcessor#msgCheck`.

use bytes::Bytes;
use ferromq_protocol::body::{perm, TopicConfig, TopicFilterType};
use ferromq_protocol::message::{keys, sysflag, MessageProperties, StoredMessage};
use ferromq_protocol::version;
use ferromq_store::PutMessageStatus;
use std::borrow::Cow;
use tracing::{debug, info};

use super::{Caller, Service, ServiceError};
use crate::broker::{now_ms, Broker};
use crate::ha::WriteRole;
use crate::metadata::{dlq_topic, is_not_allowed_send_topic, validate_topic, RETRY_GROUP_TOPIC_PREFIX};
use crate::service::send_back::DLQ_NUMS_PER_GROUP;
use crate::transaction;

/// Remark of a send refused because too many sends are already waiting for the store.
pub(crate) const BUSY_REMARK: &str = "[REJECTREQUEST]system busy, start flow control for a while";

/// A send: one message or a batch, to one topic and queue.
#[derive(Debug, Clone)]
pub struct SendRequest {
    /// The producer group (logs; the broker keeps no state per group for a send).
    pub producer_group: String,
    /// The topic written to.
    pub topic: String,
    /// The queue; `None` lets the broker pick one.
    pub queue_id: Option<i32>,
    /// RocketMQ's message sys flag (transaction type, compression, ...).
    pub sys_flag: i32,
    /// When the producer made the message.
    pub born_timestamp_ms: i64,
    /// How often the message was consumed before (sends to `%RETRY%` topics).
    pub reconsume_times: i32,
    /// The producer's maximum reconsume times, honoured from clients of V3_4_9 on.
    pub max_reconsume_times: Option<i32>,
    /// Create the topic from a default topic when it does not exist (and the broker's
    /// `autoCreateTopicEnable` allows it).
    pub auto_create: Option<AutoCreate>,
    /// The message or messages.
    pub body: SendBody,
}

/// What a send stores.
#[derive(Debug, Clone)]
pub enum SendBody {
    /// One message.
    One(BatchMessage),
    /// Several messages stored together, with the batch's own properties (WAIT).
    Batch {
        /// The messages, in order.
        messages: Vec<BatchMessage>,
        /// Properties of the batch as a whole.
        properties: MessageProperties,
    },
}

/// One message of a send.
#[derive(Debug, Clone, Default)]
pub struct BatchMessage {
    /// Its body.
    pub body: Bytes,
    /// Its properties.
    pub properties: MessageProperties,
    /// Its flag (an application value RocketMQ carries).
    pub flag: i32,
}

/// The topic a missing topic is created from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoCreate {
    /// The default topic (`TBW102`) whose permission allows the creation.
    pub default_topic: String,
    /// Queues of the new topic.
    pub queue_nums: i32,
}

/// How a stored send ended (Java's `SendStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendStatus {
    /// Stored (and flushed and replicated as configured).
    Ok,
    /// Stored, but the synchronous flush timed out.
    FlushDiskTimeout,
    /// Stored, but the replicas did not acknowledge in time.
    FlushSlaveTimeout,
    /// Stored, but no replica is available.
    SlaveNotAvailable,
}

/// A stored send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendReceipt {
    /// How it ended.
    pub status: SendStatus,
    /// Why it is not [`SendStatus::Ok`], for the answer's remark.
    pub remark: Option<String>,
    /// The offset message ids (comma-separated for a batch).
    pub msg_id: String,
    /// The queue written to.
    pub queue_id: i32,
    /// The first message's offset in that queue.
    pub queue_offset: i64,
    /// The UNIQ_KEY of a single message, which 5.x uses as the transaction id.
    pub transaction_id: Option<String>,
    /// The recall handle of a message sent to the timer wheel.
    pub recall_handle: Option<String>,
}

impl Service {
    /// Stores a send. Checks come first and the store append is the first await, so a caller
    /// dropping the future loses at most the answer, as a lost network reply would.
    ///
    /// # Errors
    /// The refusal: busy, slave, permissions, topic or group missing, bad queue, illegal
    /// message, store failure.
    pub async fn send(&self, caller: &Caller, req: SendRequest) -> Result<SendReceipt, ServiceError> {
        self.broker.send_message(caller, req).await
    }
}

/// What a send needs of its topic's config, read under the table's lock (cloning the whole
/// config, name and attributes, for five fields cost ~1.5 % of a send's CPU).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendTopic {
    perm: i32,
    write_queue_nums: i32,
    read_queue_nums: i32,
    multi_tag: bool,
    compaction: bool,
}

impl SendTopic {
    fn of(config: &TopicConfig) -> SendTopic {
        SendTopic {
            perm: config.perm,
            write_queue_nums: config.write_queue_nums,
            read_queue_nums: config.read_queue_nums,
            multi_tag: config.topic_filter_type == TopicFilterType::MultiTag,
            compaction: crate::metadata::is_compaction_topic(config),
        }
    }
}

/// A send admitted to the store: what it needs of its topic's config, the queue and its
/// place among the bounded sends (held while the permit lives).
pub(crate) struct Admitted<'a> {
    pub(crate) topic: SendTopic,
    /// The topic was created by this send: its answer waits for the name servers to list it.
    pub(crate) created: bool,
    pub(crate) queue_id: i32,
    pub(crate) permit: tokio::sync::SemaphorePermit<'a>,
    /// The role the send was admitted under: its answer waits for the replicas this role
    /// owes, even if the role changes while the message is stored.
    pub(crate) role: WriteRole,
}

impl Broker {
    /// A place among the bounded sends, the topic's config (auto-created if need be) and the
    /// queue (picked when `queue_id` is `None`).
    pub(crate) fn admit(
        &self,
        caller: &Caller,
        topic: &str,
        queue_id: Option<i32>,
        auto_create: Option<&AutoCreate>,
    ) -> Result<Admitted<'_>, ServiceError> {
        // Bounded work: past the limit a send is refused at once rather than queued.
        let permit = self.send_permits.try_acquire().map_err(|_| ServiceError::Busy(BUSY_REMARK.into()))?;
        let role = self.write_role();
        let (config, created) = self.check_send(&role, caller, topic, queue_id, auto_create)?;
        let queue_id = queue_id.unwrap_or_else(|| pick_queue(config.write_queue_nums));
        let queue_id = self.written_static_queue(topic, queue_id)?;
        Ok(Admitted { topic: config, created, queue_id, permit, role })
    }

    /// On a static topic, the physical queue a send may go to: `queue_id` when it leads a
    /// logic queue, else (it moved to another broker) one this broker still leads, so nothing
    /// is stored where logic readers no longer look; NO_PERMISSION when it leads none (4.x
    /// producers retry that elsewhere). Logic sends arrive here on their leader already.
    fn written_static_queue(&self, topic: &str, queue_id: i32) -> Result<i32, ServiceError> {
        if self.mappings().is_empty() {
            return Ok(queue_id);
        }
        let Some(detail) = self.mappings().get(topic) else { return Ok(queue_id) };
        if detail.global_led_by(queue_id).is_some() {
            return Ok(queue_id);
        }
        let written: Vec<i32> = detail.leader_id_map().into_values().collect();
        if written.is_empty() {
            return Err(ServiceError::Forbidden(format!(
                "no queue of static topic {topic} is written on broker {} any more: its queues moved to other brokers",
                detail.bname
            )));
        }
        let pick = written[queue_id.max(0) as usize % written.len()];
        tracing::debug!(%topic, from = queue_id, to = pick, "send to a moved static topic queue goes to a written one");
        Ok(pick)
    }

    /// MESSAGE_ILLEGAL for a body over `maxMessageSize`.
    pub(crate) fn check_body_size(&self, len: usize) -> Result<(), ServiceError> {
        let max = self.store.max_message_size();
        if len as u64 > max {
            return Err(ServiceError::MessageIllegal(format!("the message body size over max value, MAX: {max}")));
        }
        Ok(())
    }

    pub(crate) async fn send_message(&self, caller: &Caller, req: SendRequest) -> Result<SendReceipt, ServiceError> {
        let Admitted { topic: topic_config, created, queue_id, permit: _permit, role } =
            self.admit(caller, &req.topic, req.queue_id, req.auto_create.as_ref())?;
        let mut sys_flag = req.sys_flag;
        if topic_config.multi_tag {
            sys_flag |= sysflag::MULTI_TAGS_FLAG;
        }
        let batch = matches!(req.body, SendBody::Batch { .. });
        if topic_config.compaction {
            // Compaction keeps the newest message per key: a message without one could never
            // be compacted. Java checks single sends only; a batch is checked too here.
            let keyless = |p: &MessageProperties| p.get(keys::KEYS).is_none_or(|k| k.trim().is_empty());
            let missing = match &req.body {
                SendBody::One(m) => keyless(&m.properties),
                SendBody::Batch { messages, .. } => messages.iter().any(|m| keyless(&m.properties)),
            };
            if missing {
                return Err(ServiceError::MessageIllegal("Required message key is missing".into()));
            }
        }
        if sysflag::transaction_value(sys_flag) == sysflag::TRANSACTION_PREPARED_TYPE {
            if self.config.reject_transaction_message {
                return Err(ServiceError::Forbidden(format!(
                    "the broker[{}] sending transaction message is forbidden",
                    self.config.broker_ip1
                )));
            }
            if batch {
                return Err(ServiceError::MessageIllegal("batch messages cannot be transactional".into()));
            }
        }
        let target = self.retry_or_dead_letter(caller, &req, &req.topic, queue_id)?;
        // What `/metrics` counts of this send: its type and body size, or a batch's sizes.
        let (message_type, single_size, batch_sizes) = match &req.body {
            SendBody::One(m) => (crate::metrics::message_type(sys_flag, &m.properties), m.body.len(), None),
            SendBody::Batch { messages, properties } => (
                crate::metrics::message_type(sys_flag, messages.first().map_or(properties, |m| &m.properties)),
                0,
                Some(messages.iter().map(|m| m.body.len()).collect::<Vec<_>>()),
            ),
        };
        let mut transaction_id = None;
        let mut recall_handle = None;
        let (result, waits) = match req.body {
            SendBody::Batch { messages, properties } => {
                let waits = waits_for_store(&properties);
                let msgs = self.build_batch(
                    caller,
                    &req.topic,
                    req.born_timestamp_ms,
                    req.reconsume_times,
                    &target,
                    sys_flag,
                    messages,
                )?;
                (self.store.put_messages(msgs).await, waits)
            }
            SendBody::One(m) => {
                self.check_body_size(m.body.len())?;
                let waits = waits_for_store(&m.properties);
                let built = self
                    .build_message(caller, req.born_timestamp_ms, req.reconsume_times, &target, sys_flag, m, true)
                    .map_err(|(code, remark)| ServiceError::from_code(code, remark))?;
                // The UNIQ_KEY travels back as the transaction id (5.x).
                transaction_id = Some(built.uniq);
                recall_handle = built.recall_handle;
                (self.store.put_message(built.msg).await, waits)
            }
        };
        self.created_topic_routable(created || target.created).await;
        let status = match result.status {
            PutMessageStatus::PutOk => SendStatus::Ok,
            PutMessageStatus::FlushDiskTimeout => SendStatus::FlushDiskTimeout,
            other => return Err(store_refusal(other, result.remark)),
        };
        let Some(append) = result.append.as_ref() else {
            return Err(store_refusal(result.status, result.remark));
        };
        if sysflag::transaction_value(sys_flag) == sysflag::TRANSACTION_PREPARED_TYPE {
            self.half_messages.prepared(&req.topic);
        }
        if status == SendStatus::Ok {
            self.stats.topic_put_nums.count(&req.topic, append.msg_num as u64);
            match batch_sizes {
                Some(sizes) => self.metrics.messages_stored(&req.topic, message_type, sizes.into_iter()),
                None => self.metrics.messages_stored(&req.topic, message_type, std::iter::once(single_size)),
            }
        }
        let mut receipt = SendReceipt {
            status,
            remark: result.remark.clone(),
            msg_id: append.msg_id.clone(),
            queue_id,
            queue_offset: append.logics_offset,
            transaction_id,
            recall_handle,
        };
        if waits {
            if let Some((code, remark)) = self.wait_for_replicas(&role, &result).await {
                // Stored, but not replicated as asked: the receipt keeps the message id.
                receipt.status = match code {
                    ferromq_protocol::response_code::FLUSH_SLAVE_TIMEOUT => SendStatus::FlushSlaveTimeout,
                    ferromq_protocol::response_code::SLAVE_NOT_AVAILABLE => SendStatus::SlaveNotAvailable,
                    // The replica service shut down or refused: the message is stored, but
                    // the send must not look replicated.
                    _ => return Err(ServiceError::from_code(code, remark)),
                };
                receipt.remark = Some(remark);
            }
        }
        Ok(receipt)
    }

    /// Java `msgCheck`: permissions, topic name, topic existence (auto-creating it), queue id.
    /// The config, and whether this call created the topic.
    fn check_send(
        &self,
        role: &WriteRole,
        caller: &Caller,
        topic: &str,
        queue_id: Option<i32>,
        auto_create: Option<&AutoCreate>,
    ) -> Result<(SendTopic, bool), ServiceError> {
        if role.broker_role == crate::config::BrokerRole::Slave {
            return Err(ServiceError::NotAvailable("the broker is a slave and does not accept messages".into()));
        }
        if !perm::is_writeable(self.permission()) {
            return Err(ServiceError::Forbidden(format!(
                "the broker[{}] sending message is forbidden",
                self.config.broker_ip1
            )));
        }
        validate_topic(topic).map_err(ServiceError::InvalidParameter)?;
        if is_not_allowed_send_topic(topic) {
            return Err(ServiceError::Forbidden(format!("Sending message to topic[{topic}] is forbidden.")));
        }
        let mut config = self.topics().select_with(topic, SendTopic::of);
        let mut created = false;
        if config.is_none() {
            let remote = caller.remote_addr.to_string();
            let mut ensured = None;
            if let Some(auto) = auto_create {
                debug!(topic, remote_addr = %remote, "the topic does not exist; creating it from the default topic");
                ensured = self
                    .topics()
                    .create_topic_in_send_message(topic, &auto.default_topic, &remote, auto.queue_nums, 0)
                    .map_err(|e| ServiceError::System(format!("topic creation failed: {e}")))?;
            }
            if ensured.is_none() && topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
                ensured = self.topics().create_topic_in_send_back(topic, 1, perm::PERM_WRITE | perm::PERM_READ, 0).ok();
            }
            if let Some(ensured) = ensured {
                // A concurrent send may have created it first: that one registers it.
                created = self.on_topic_ensured(&ensured);
                config = Some(SendTopic::of(&ensured.config));
            }
        }
        let Some(config) = config else {
            return Err(ServiceError::TopicNotExist(format!("topic[{topic}] not exist, apply first please!")));
        };
        if !perm::is_writeable(config.perm) {
            return Err(ServiceError::Forbidden(format!("the topic[{topic}] sending message is forbidden")));
        }
        let valid = config.write_queue_nums.max(config.read_queue_nums);
        if let Some(q) = queue_id.filter(|q| *q >= valid) {
            return Err(ServiceError::InvalidParameter(format!(
                "request queueId[{q}] is illegal, topic {topic} has {valid} queues, Producer: {}",
                caller.remote_addr
            )));
        }
        Ok((config, created))
    }

    /// One stored message from a send: the broker adds CLUSTER and, if the producer did not
    /// set one, UNIQ_KEY; a half message goes to the half queue; with `hooks`, a delivery time
    /// sends it to the timer wheel and a DELAY level to the schedule queue of its level.
    #[allow(clippy::too_many_arguments)]
    fn build_message(
        &self,
        caller: &Caller,
        born_timestamp_ms: i64,
        reconsume_times: i32,
        target: &SendTarget<'_>,
        sys_flag: i32,
        message: BatchMessage,
        hooks: bool,
    ) -> Result<BuiltMessage, crate::timer::HookRefusal> {
        let BatchMessage { body, properties: mut props, flag } = message;
        let (mut topic, mut queue_id) = (target.topic.clone().into_owned(), target.queue_id);
        props.insert(keys::CLUSTER, self.config.broker_cluster_name.as_str());
        let uniq = match props.get(keys::UNIQ_KEY) {
            Some(u) => u.to_owned(),
            None => {
                let u = self.uniq_ids.next_id();
                props.insert(keys::UNIQ_KEY, u.as_str());
                u
            }
        };
        if target.dead_letter {
            // Java marks a message it moves to the DLQ so that it is not delayed (-1 here; a
            // send-back to the DLQ writes 0).
            props.insert(keys::DELAY, "-1");
        }
        let mut sys_flag = sys_flag;
        let mut recall_handle = None;
        match sysflag::transaction_value(sys_flag) {
            sysflag::TRANSACTION_PREPARED_TYPE => {
                // A half message: delayed (if at all) only once committed.
                sys_flag = transaction::to_half_queue(&mut topic, &mut queue_id, &mut props, sys_flag);
            }
            sysflag::TRANSACTION_NOT_TYPE | sysflag::TRANSACTION_COMMIT_TYPE if hooks => {
                recall_handle = self.route_delivery_time(&mut topic, &mut queue_id, &mut props)?;
            }
            _ => {}
        }
        let msg = StoredMessage {
            topic,
            queue_id,
            flag,
            body,
            properties: props.encode(),
            sys_flag,
            born_timestamp_ms,
            born_host: caller.remote_addr,
            store_host: self.store_host,
            reconsume_times,
            ..StoredMessage::default()
        };
        Ok(BuiltMessage { msg, uniq, recall_handle })
    }

    #[allow(clippy::too_many_arguments)]
    fn build_batch(
        &self,
        caller: &Caller,
        topic: &str,
        born_timestamp_ms: i64,
        reconsume_times: i32,
        target: &SendTarget<'_>,
        sys_flag: i32,
        messages: Vec<BatchMessage>,
    ) -> Result<Vec<StoredMessage>, ServiceError> {
        if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            return Err(ServiceError::MessageIllegal(format!("batch request does not support retry group {topic}")));
        }
        if messages.is_empty() {
            return Err(ServiceError::MessageIllegal("the batch is empty".into()));
        }
        // The whole batch counts against maxMessageSize, as in Java's batch encoder.
        let max = self.store.max_message_size();
        let total: usize = messages.iter().map(|m| m.body.len() + m.properties.encoded_len()).sum();
        if total as u64 > max {
            return Err(ServiceError::MessageIllegal(format!(
                "the batch body size {total} over max value, MAX: {max}"
            )));
        }
        let mut out = Vec::with_capacity(messages.len());
        for m in messages {
            self.check_body_size(m.body.len())?;
            if m.properties.get(keys::DELAY).is_some_and(|d| d != "0") {
                return Err(ServiceError::MessageIllegal("batch messages cannot be delayed".into()));
            }
            // No delivery-time hooks for batches (their DELAY is refused above), as in Java.
            let built = self
                .build_message(caller, born_timestamp_ms, reconsume_times, target, sys_flag, m, false)
                .map_err(|(code, remark)| ServiceError::from_code(code, remark))?;
            out.push(built.msg);
        }
        Ok(out)
    }

    /// Java `handleRetryAndDLQ`: a message a consumer sends itself to `%RETRY%<group>` (the
    /// client's fallback when CONSUMER_SEND_MSG_BACK fails) goes to the group's dead-letter
    /// topic once its reconsume times exceed the group's maximum, or at once while the group
    /// holds orderly queue locks.
    fn retry_or_dead_letter<'r>(
        &self,
        caller: &Caller,
        req: &SendRequest,
        topic: &'r str,
        queue_id: i32,
    ) -> Result<SendTarget<'r>, ServiceError> {
        let plain = SendTarget { topic: Cow::Borrowed(topic), queue_id, dead_letter: false, created: false };
        let Some(group) = req.topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) else { return Ok(plain) };
        let Some(config) = self.groups().find(group, self.config.auto_create_subscription_group) else {
            return Err(ServiceError::GroupNotExist(format!("subscription group not exist, {group}")));
        };
        let mut max_reconsume = config.retry_max_times;
        if caller.client_version >= version::V3_4_9 {
            if let Some(m) = req.max_reconsume_times {
                max_reconsume = m;
            }
        }
        let reconsume = req.reconsume_times;
        let locked = !self.locks.is_lock_all_expired(group, now_ms());
        if reconsume <= max_reconsume && !locked {
            return Ok(plain);
        }
        let dlq = dlq_topic(group);
        // Registered only when new: every message bound for an existing dead-letter queue
        // would otherwise send the topic to the name servers again.
        let created = match self.topics().create_topic_in_send_back(
            &dlq,
            DLQ_NUMS_PER_GROUP,
            perm::PERM_WRITE | perm::PERM_READ,
            0,
        ) {
            Ok(ensured) => self.on_topic_ensured(&ensured),
            Err(e) => return Err(ServiceError::System(format!("topic[{dlq}] not exist: {e}"))),
        };
        info!(
            group,
            reconsume_times = reconsume,
            max_reconsume_times = max_reconsume,
            orderly_locks = locked,
            "retry message sent to the dead-letter queue"
        );
        Ok(SendTarget { topic: Cow::Owned(dlq), queue_id: 0, dead_letter: true, created })
    }
}

/// Whether a send's properties ask to wait for the store (WAIT is absent or not "false").
fn waits_for_store(properties: &MessageProperties) -> bool {
    properties.get(keys::WAIT) != Some("false")
}

/// The refusal for a put the store did not take.
fn store_refusal(status: PutMessageStatus, remark: Option<String>) -> ServiceError {
    let remark = remark.unwrap_or_else(|| format!("{status:?}"));
    debug!(status = ?status, remark = %remark, "send refused by the store");
    match status {
        PutMessageStatus::MessageIllegal | PutMessageStatus::PropertiesSizeExceeded => {
            ServiceError::MessageIllegal(remark)
        }
        PutMessageStatus::ServiceNotAvailable => ServiceError::NotAvailable(remark),
        PutMessageStatus::FlushDiskTimeout => {
            ServiceError::Other { code: ferromq_protocol::response_code::FLUSH_DISK_TIMEOUT, remark }
        }
        PutMessageStatus::PutOk
        | PutMessageStatus::CreateMappedFileFailed
        | PutMessageStatus::FlushFailed
        | PutMessageStatus::UnknownError
        | PutMessageStatus::LmqConsumeQueueNumExceeded => ServiceError::System(remark),
    }
}

/// A message built from a send, its UNIQ_KEY and, for a timer message, its recall handle.
#[derive(Debug)]
struct BuiltMessage {
    msg: StoredMessage,
    uniq: String,
    recall_handle: Option<String>,
}

/// Where a sent message is stored (before a DELAY level moves it to the schedule topic).
#[derive(Debug)]
struct SendTarget<'a> {
    /// The request's topic (borrowed), or the dead-letter topic it is diverted to.
    topic: Cow<'a, str>,
    queue_id: i32,
    dead_letter: bool,
    /// The dead-letter topic was created by this send.
    created: bool,
}

/// A queue for a send that did not choose one.
fn pick_queue(write_queue_nums: i32) -> i32 {
    if write_queue_nums <= 0 {
        return 0;
    }
    // Spread sends without a random-number dependency: nanoseconds of the clock.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    (nanos % write_queue_nums as u32) as i32
}
