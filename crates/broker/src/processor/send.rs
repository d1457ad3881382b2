//! SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320). Java:
//! `SendMessageProcessor`, `AbstractSendMessageProcessor#msgCheck`.

use bytes::Bytes;
use ferromq_protocol::body::{perm, TopicConfig, TopicFilterType};
use ferromq_protocol::header::{SendMessageRequestHeader, SendMessageResponseHeader};
use ferromq_protocol::message::{decode_batch, keys, sysflag, MessageProperties, StoredMessage};
use ferromq_protocol::{response_code, version, RemotingCommand};
use ferromq_remoting::Connection;
use ferromq_store::{PutMessageResult, PutMessageStatus};
use tracing::{debug, info};

use crate::broker::{now_ms, Broker};
use crate::metadata::{dlq_topic, is_not_allowed_send_topic, validate_topic, RETRY_GROUP_TOPIC_PREFIX};
use crate::processor::failure;
use crate::processor::send_back::DLQ_NUMS_PER_GROUP;
use crate::stats::clock_ms;
use crate::timer::HookRefusal;
use crate::transaction;

/// Remark of a send refused because too many sends are already waiting for the store.
pub(crate) const BUSY_REMARK: &str = "[REJECTREQUEST]system busy, start flow control for a while";

impl Broker {
    /// What a request that stores a message (send or reply) starts with: its send header, a
    /// place among the bounded sends (held while the permit lives), the topic it may write to
    /// (auto-created if need be) and the queue, picked when the header leaves it negative. The
    /// error is the answer to give.
    pub(super) fn admit_send(
        &self,
        conn: &Connection,
        req: &RemotingCommand,
    ) -> Result<AdmittedSend<'_>, Box<RemotingCommand>> {
        let header = SendMessageRequestHeader::decode_for(req.code, &req.ext_fields)
            .map_err(|e| Box::new(failure(req, response_code::SYSTEM_ERROR, e.to_string())))?;
        // Bounded work: past the limit a send is refused at once rather than queued.
        let permit = self
            .send_permits
            .try_acquire()
            .map_err(|_| Box::new(failure(req, response_code::SYSTEM_BUSY, BUSY_REMARK)))?;
        let topic = self.check_send(conn, req, &header)?;
        let queue_id = if header.queue_id < 0 { pick_queue(topic.write_queue_nums) } else { header.queue_id };
        Ok(AdmittedSend { header, topic, queue_id, permit })
    }

    /// MESSAGE_ILLEGAL for a single message whose body is over `maxMessageSize`.
    pub(super) fn check_body_size(&self, req: &RemotingCommand) -> Result<(), Box<RemotingCommand>> {
        let max = self.store.max_message_size();
        if req.body.len() as u64 > max {
            return Err(Box::new(failure(
                req,
                response_code::MESSAGE_ILLEGAL,
                format!("the message body size over max value, MAX: {max}"),
            )));
        }
        Ok(())
    }

    /// The fields every send answer carries (Java's `MSG_REGION` and `TRACE_ON`).
    pub(super) fn add_send_answer_fields(&self, response: &mut RemotingCommand) {
        response.ext_fields.insert("MSG_REGION".into(), &self.config.region_id);
        response.ext_fields.insert("TRACE_ON".into(), if self.config.trace_on { "true" } else { "false" });
    }

    /// Serves the three send codes.
    pub(crate) async fn send(&self, conn: Connection, req: RemotingCommand) -> RemotingCommand {
        let AdmittedSend { header, topic: topic_config, queue_id, permit: _permit } = match self.admit_send(&conn, &req)
        {
            Ok(admitted) => admitted,
            Err(response) => return *response,
        };
        let mut sys_flag = header.sys_flag;
        if topic_config.topic_filter_type == TopicFilterType::MultiTag {
            sys_flag |= sysflag::MULTI_TAGS_FLAG;
        }
        // As Java, the header's batch flag (V2 key `m`) decides, not the request code.
        let batch = header.batch == Some(true);
        if sysflag::transaction_value(sys_flag) == sysflag::TRANSACTION_PREPARED_TYPE {
            if self.config.reject_transaction_message {
                return failure(
                    &req,
                    response_code::NO_PERMISSION,
                    format!("the broker[{}] sending transaction message is forbidden", self.config.broker_ip1),
                );
            }
            if batch {
                return failure(&req, response_code::MESSAGE_ILLEGAL, "batch messages cannot be transactional");
            }
        }
        let target = match self.retry_or_dead_letter(&req, &header, queue_id) {
            Ok(t) => t,
            Err(response) => return *response,
        };
        let mut transaction_id = None;
        let mut recall_handle = None;
        let result = if batch {
            match self.build_batch(&conn, &req, &header, &target, sys_flag) {
                Ok(msgs) => self.store.put_messages(msgs).await,
                Err(response) => return *response,
            }
        } else {
            if let Err(response) = self.check_body_size(&req) {
                return *response;
            }
            let built = match self.build_message(
                &conn,
                &header,
                &target,
                sys_flag,
                header.properties.as_deref().unwrap_or(""),
                req.body.clone(),
                header.flag,
                true,
            ) {
                Ok(b) => b,
                Err((code, remark)) => return failure(&req, code, remark),
            };
            // The UNIQ_KEY travels back as the transaction id (5.x).
            transaction_id = Some(built.uniq);
            recall_handle = built.recall_handle;
            self.store.put_message(built.msg).await
        };
        if let Some(append) = result.append.as_ref().filter(|_| result.status == PutMessageStatus::PutOk) {
            self.stats.topic_put_nums.add(&header.topic, append.msg_num as u64, clock_ms());
        }
        let replicas = self.wait_for_replicas(&result, header.properties.as_deref()).await;
        let mut response = self.send_response(&req, queue_id, result, transaction_id, recall_handle);
        if let Some((code, remark)) = replicas {
            // Stored, but not replicated as asked: the answer keeps the message id (Java sets
            // these codes with the send header filled in).
            response.code = code;
            response.remark = Some(remark);
        }
        response
    }

    /// Java `msgCheck`: permissions, topic name, topic existence (auto-creating it), queue id.
    fn check_send(
        &self,
        conn: &Connection,
        req: &RemotingCommand,
        header: &SendMessageRequestHeader,
    ) -> Result<TopicConfig, Box<RemotingCommand>> {
        let fail = |code, remark: String| Err(Box::new(failure(req, code, remark)));
        if self.is_slave() {
            return fail(
                response_code::SERVICE_NOT_AVAILABLE,
                "the broker is a slave and does not accept messages".into(),
            );
        }
        if !perm::is_writeable(self.permission()) {
            return fail(
                response_code::NO_PERMISSION,
                format!("the broker[{}] sending message is forbidden", self.config.broker_ip1),
            );
        }
        if let Err(remark) = validate_topic(&header.topic) {
            return fail(response_code::INVALID_PARAMETER, remark);
        }
        if is_not_allowed_send_topic(&header.topic) {
            return fail(
                response_code::NO_PERMISSION,
                format!("Sending message to topic[{}] is forbidden.", header.topic),
            );
        }
        let mut config = self.topics().select(&header.topic);
        if config.is_none() {
            debug!(topic = %header.topic, remote_addr = %conn.remote_addr(), "the topic does not exist; creating it from the default topic");
            let remote = conn.remote_addr().to_string();
            config = match self.topics().create_topic_in_send_message(
                &header.topic,
                &header.default_topic,
                &remote,
                header.default_topic_queue_nums,
                0,
            ) {
                Ok(c) => c,
                Err(e) => return fail(response_code::SYSTEM_ERROR, format!("topic creation failed: {e}")),
            };
            if config.is_none() && header.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
                config = self
                    .topics()
                    .create_topic_in_send_back(&header.topic, 1, perm::PERM_WRITE | perm::PERM_READ, 0)
                    .ok();
            }
            if let Some(created) = &config {
                self.on_topic_created(created);
            }
        }
        let Some(config) = config else {
            return fail(
                response_code::TOPIC_NOT_EXIST,
                format!("topic[{}] not exist, apply first please!", header.topic),
            );
        };
        if !perm::is_writeable(config.perm) {
            return fail(
                response_code::NO_PERMISSION,
                format!("the topic[{}] sending message is forbidden", header.topic),
            );
        }
        let valid = config.write_queue_nums.max(config.read_queue_nums);
        if header.queue_id >= valid {
            return fail(
                response_code::INVALID_PARAMETER,
                format!(
                    "request queueId[{}] is illegal, topic {} has {} queues, Producer: {}",
                    header.queue_id,
                    header.topic,
                    valid,
                    conn.remote_addr()
                ),
            );
        }
        Ok(config)
    }

    /// One stored message from a send: the broker adds CLUSTER and, if the producer did not
    /// set one, UNIQ_KEY; a half message goes to the half queue; with `hooks`, a delivery time
    /// sends it to the timer wheel and a DELAY level to the schedule queue of its level.
    #[allow(clippy::too_many_arguments)]
    fn build_message(
        &self,
        conn: &Connection,
        header: &SendMessageRequestHeader,
        target: &SendTarget,
        sys_flag: i32,
        properties: &str,
        body: Bytes,
        flag: i32,
        hooks: bool,
    ) -> Result<BuiltMessage, HookRefusal> {
        let mut props = MessageProperties::decode(properties);
        let (mut topic, mut queue_id) = (target.topic.clone(), target.queue_id);
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
            born_timestamp_ms: header.born_timestamp,
            born_host: conn.remote_addr(),
            store_host: self.store_host,
            reconsume_times: header.reconsume_times.unwrap_or(0),
            ..StoredMessage::default()
        };
        Ok(BuiltMessage { msg, uniq, recall_handle })
    }

    fn build_batch(
        &self,
        conn: &Connection,
        req: &RemotingCommand,
        header: &SendMessageRequestHeader,
        target: &SendTarget,
        sys_flag: i32,
    ) -> Result<Vec<StoredMessage>, Box<RemotingCommand>> {
        let fail = |code, remark: String| Err(Box::new(failure(req, code, remark)));
        if header.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            return fail(
                response_code::MESSAGE_ILLEGAL,
                format!("batch request does not support retry group {}", header.topic),
            );
        }
        // The whole batch counts against maxMessageSize, as in Java's batch encoder (a Java
        // producer checks it before sending).
        let max = self.store.max_message_size();
        if req.body.len() as u64 > max {
            return fail(
                response_code::MESSAGE_ILLEGAL,
                format!("the batch body size {} over max value, MAX: {max}", req.body.len()),
            );
        }
        let entries = match decode_batch(&req.body) {
            Ok(e) if !e.is_empty() => e,
            Ok(_) => return fail(response_code::MESSAGE_ILLEGAL, "the batch is empty".into()),
            Err(e) => return fail(response_code::MESSAGE_ILLEGAL, format!("malformed batch body: {e}")),
        };
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            if entry.body.len() as u64 > max {
                return fail(
                    response_code::MESSAGE_ILLEGAL,
                    format!("the message body size over max value, MAX: {max}"),
                );
            }
            let props = MessageProperties::decode(&entry.properties);
            if props.get(keys::DELAY).is_some_and(|d| d != "0") {
                return fail(response_code::MESSAGE_ILLEGAL, "batch messages cannot be delayed".into());
            }
            // No delivery-time hooks for batches (their DELAY is refused above), as in Java.
            match self.build_message(conn, header, target, sys_flag, &entry.properties, entry.body, entry.flag, false) {
                Ok(built) => out.push(built.msg),
                Err((code, remark)) => return fail(code, remark),
            }
        }
        Ok(out)
    }

    /// Java `handleRetryAndDLQ`: a message a consumer sends itself to `%RETRY%<group>` (the
    /// client's fallback when CONSUMER_SEND_MSG_BACK fails) goes to the group's dead-letter
    /// topic once its reconsume times exceed the group's maximum, or at once while the group
    /// holds orderly queue locks.
    fn retry_or_dead_letter(
        &self,
        req: &RemotingCommand,
        header: &SendMessageRequestHeader,
        queue_id: i32,
    ) -> Result<SendTarget, Box<RemotingCommand>> {
        let plain = SendTarget { topic: header.topic.clone(), queue_id, dead_letter: false };
        let Some(group) = header.topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) else { return Ok(plain) };
        let Some(config) = self.groups().find(group, self.config.auto_create_subscription_group) else {
            return Err(Box::new(failure(
                req,
                response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
                format!("subscription group not exist, {group}"),
            )));
        };
        let mut max_reconsume = config.retry_max_times;
        if req.version >= version::V3_4_9 {
            if let Some(m) = header.max_reconsume_times {
                max_reconsume = m;
            }
        }
        let reconsume = header.reconsume_times.unwrap_or(0);
        let locked = !self.locks.is_lock_all_expired(group, now_ms());
        if reconsume <= max_reconsume && !locked {
            return Ok(plain);
        }
        let dlq = dlq_topic(group);
        let created =
            self.topics().create_topic_in_send_back(&dlq, DLQ_NUMS_PER_GROUP, perm::PERM_WRITE | perm::PERM_READ, 0);
        match created {
            Ok(c) => self.on_topic_created(&c),
            Err(e) => {
                return Err(Box::new(failure(req, response_code::SYSTEM_ERROR, format!("topic[{dlq}] not exist: {e}"))))
            }
        }
        info!(
            group,
            reconsume_times = reconsume,
            max_reconsume_times = max_reconsume,
            orderly_locks = locked,
            "retry message sent to the dead-letter queue"
        );
        Ok(SendTarget { topic: dlq, queue_id: 0, dead_letter: true })
    }

    fn send_response(
        &self,
        req: &RemotingCommand,
        queue_id: i32,
        result: PutMessageResult,
        transaction_id: Option<String>,
        recall_handle: Option<String>,
    ) -> RemotingCommand {
        let code = match result.status {
            PutMessageStatus::PutOk => response_code::SUCCESS,
            PutMessageStatus::FlushDiskTimeout => response_code::FLUSH_DISK_TIMEOUT,
            PutMessageStatus::MessageIllegal | PutMessageStatus::PropertiesSizeExceeded => {
                response_code::MESSAGE_ILLEGAL
            }
            PutMessageStatus::ServiceNotAvailable => response_code::SERVICE_NOT_AVAILABLE,
            PutMessageStatus::CreateMappedFileFailed
            | PutMessageStatus::FlushFailed
            | PutMessageStatus::UnknownError => response_code::SYSTEM_ERROR,
        };
        let Some(append) = result.append else {
            let remark = result.remark.unwrap_or_else(|| format!("{:?}", result.status));
            debug!(status = ?result.status, remark = %remark, "send refused by the store");
            return failure(req, code, remark);
        };
        let mut response =
            RemotingCommand::response_to(req, code, result.remark).with_header(&SendMessageResponseHeader {
                msg_id: append.msg_id,
                queue_id,
                queue_offset: append.logics_offset,
                transaction_id,
                batch_uniq_id: None,
                recall_handle,
            });
        self.add_send_answer_fields(&mut response);
        response
    }
}

/// A request admitted to store a message: see [`Broker::admit_send`].
pub(super) struct AdmittedSend<'a> {
    pub(super) header: SendMessageRequestHeader,
    pub(super) topic: TopicConfig,
    pub(super) queue_id: i32,
    pub(super) permit: tokio::sync::SemaphorePermit<'a>,
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
struct SendTarget {
    topic: String,
    queue_id: i32,
    dead_letter: bool,
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
