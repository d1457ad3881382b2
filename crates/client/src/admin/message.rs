//! Message calls for tools: send one message, pull a batch, find messages by key, unique key
//! or offset message id. Java: `MQClientAPIImpl#sendMessage`, `#pullMessage`,
//! `MQAdminImpl#queryMessage`, `#viewMessage`.

use std::time::{SystemTime, UNIX_EPOCH};

use ferromq_protocol::body::MessageQueue;
use ferromq_protocol::header::{
    pull_sys_flag, PullMessageRequestHeader, PullMessageResponseHeader, QueryMessageRequestHeader,
    SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader, ViewMessageRequestHeader,
    UNIQUE_KEY_QUERY,
};
use ferromq_protocol::message::{decode_offset_msg_id, keys, MessageProperties, StoredMessage, UniqIdGenerator};
use ferromq_protocol::{request_code, response_code, RemotingCommand};

use crate::admin::client::{check, code_name, decode_header, AdminClient};
use crate::admin::error::AdminError;

/// Producer group of messages sent by the admin tool.
pub const TOOLS_PRODUCER_GROUP: &str = "TOOLS_PRODUCER";
/// Consumer group tools pull with when none is given (Java: `MixAll.TOOLS_CONSUMER_GROUP`).
pub const TOOLS_CONSUMER_GROUP: &str = "TOOLS_CONSUMER";
/// Upper bound of messages one key query returns (Java: `defaultQueryMaxNum` is 32; tools ask 64).
const QUERY_MAX_NUM_LIMIT: i32 = 64;

/// What SEND_MESSAGE_V2 answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendResult {
    /// The unique message id the client assigned (UNIQ_KEY).
    pub msg_id: String,
    /// The offset message id the broker assigned (store host and commit-log offset).
    pub offset_msg_id: String,
    /// Broker group that stored the message.
    pub broker_name: String,
    /// Queue id.
    pub queue_id: i32,
    /// Offset in the queue.
    pub queue_offset: i64,
}

/// How a pull ended. Java: `PullStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullStatus {
    /// Messages were returned.
    Found,
    /// Nothing at or after the offset yet.
    NoNewMessage,
    /// Messages exist but none matched the filter.
    NoMatchedMessage,
    /// The offset is outside the queue.
    OffsetIllegal,
}

/// What PULL_MESSAGE answered.
#[derive(Debug, Clone)]
pub struct PullResult {
    /// How the pull ended.
    pub status: PullStatus,
    /// Offset to pull from next.
    pub next_begin_offset: i64,
    /// Queue's minimum offset.
    pub min_offset: i64,
    /// Queue's maximum offset (after its last message).
    pub max_offset: i64,
    /// The messages, in queue order.
    pub messages: Vec<StoredMessage>,
}

impl AdminClient {
    /// SEND_MESSAGE_V2: stores one message on queue `queue_id` of the broker at `addr`.
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    #[allow(clippy::too_many_arguments)] // Java's tool passes each of these separately too.
    pub async fn send_message(
        &self,
        addr: &str,
        broker_name: &str,
        topic: &str,
        queue_id: i32,
        body: &[u8],
        tags: Option<&str>,
        msg_keys: Option<&str>,
    ) -> Result<SendResult, AdminError> {
        let msg_id = UniqIdGenerator::without_ip().next_id();
        let mut props = MessageProperties::new();
        if let Some(tags) = tags.filter(|t| !t.is_empty()) {
            props.insert(keys::TAGS, tags);
        }
        if let Some(k) = msg_keys.filter(|k| !k.is_empty()) {
            props.insert(keys::KEYS, k);
        }
        props.insert(keys::UNIQ_KEY, msg_id.clone());
        props.insert(keys::WAIT, "true");
        let header: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
            producer_group: TOOLS_PRODUCER_GROUP.to_owned(),
            topic: topic.to_owned(),
            default_topic: "TBW102".to_owned(),
            default_topic_queue_nums: 4,
            queue_id,
            sys_flag: 0,
            born_timestamp: now_ms(),
            flag: 0,
            properties: Some(props.encode()),
            reconsume_times: Some(0),
            unit_mode: Some(false),
            batch: Some(false),
            max_reconsume_times: None,
            broker_name: Some(broker_name.to_owned()),
        }
        .into();
        let mut request =
            RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&header).with_body(body.to_vec());
        // A physical queue id, also on a static topic.
        request.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("lo"), "false");
        let name = code_name(request.code);
        let response = self.call_ok(addr, request).await?;
        let h: SendMessageResponseHeader = decode_header(addr, name, &response)?;
        Ok(SendResult {
            msg_id,
            offset_msg_id: h.msg_id,
            broker_name: broker_name.to_owned(),
            queue_id: h.queue_id,
            queue_offset: h.queue_offset,
        })
    }

    /// PULL_MESSAGE: up to `max_nums` messages of one queue from `offset`, without parking
    /// and without committing an offset.
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    pub async fn pull_message(
        &self,
        addr: &str,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_nums: i32,
    ) -> Result<PullResult, AdminError> {
        let mq = MessageQueue { topic: topic.to_owned(), broker_name: String::new(), queue_id };
        self.pull_message_by_tag(addr, group, &mq, "*", offset, max_nums).await
    }

    /// PULL_MESSAGE with a tag expression (`TagA || TagB`, `*`): as
    /// [`pull_message`](Self::pull_message), and like a Java client, messages whose tag is
    /// not in the expression are dropped after the broker's tag-hash filter (hashes collide).
    /// Java: `DefaultMQPullConsumer#pull(mq, subExpression, offset, maxNums)`.
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    pub async fn pull_message_by_tag(
        &self,
        addr: &str,
        group: &str,
        mq: &MessageQueue,
        expression: &str,
        offset: i64,
        max_nums: i32,
    ) -> Result<PullResult, AdminError> {
        let expression = if expression.trim().is_empty() { "*" } else { expression.trim() };
        let header = PullMessageRequestHeader {
            consumer_group: group.to_owned(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            queue_offset: offset,
            max_msg_nums: max_nums,
            sys_flag: pull_sys_flag::SUBSCRIPTION,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some(expression.to_owned()),
            sub_version: 0,
            expression_type: Some("TAG".to_owned()),
            broker_name: (!mq.broker_name.is_empty()).then(|| mq.broker_name.clone()),
            ..PullMessageRequestHeader::default()
        };
        let request = RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&header);
        let name = code_name(request.code);
        let response = self.call(addr, request).await?;
        let response = check(
            addr,
            name,
            response,
            &[
                response_code::SUCCESS,
                response_code::PULL_NOT_FOUND,
                response_code::PULL_RETRY_IMMEDIATELY,
                response_code::PULL_OFFSET_MOVED,
            ],
        )?;
        let h: PullMessageResponseHeader = decode_header(addr, name, &response)?;
        let (status, messages) = match response.code {
            response_code::SUCCESS => {
                let mut messages = decode_messages(addr, name, &response.body)?;
                let tags = tag_set(expression);
                if !tags.is_empty() {
                    messages.retain(|m| m.property(keys::TAGS).is_some_and(|t| tags.contains(&t)));
                }
                (PullStatus::Found, messages)
            }
            response_code::PULL_NOT_FOUND => (PullStatus::NoNewMessage, Vec::new()),
            response_code::PULL_RETRY_IMMEDIATELY => (PullStatus::NoMatchedMessage, Vec::new()),
            _ => (PullStatus::OffsetIllegal, Vec::new()),
        };
        Ok(PullResult {
            status,
            next_begin_offset: h.next_begin_offset,
            min_offset: h.min_offset,
            max_offset: h.max_offset,
            messages,
        })
    }

    /// QUERY_MESSAGE on the broker at `addr`: messages of `topic` indexed under `key` and
    /// stored within `[begin_ms, end_ms]`. With `unique_key`, `key` is a UNIQ_KEY message id.
    /// None found is an empty list.
    ///
    /// # Errors
    /// Transport failures and undecodable records, naming `addr`.
    pub async fn query_message(
        &self,
        addr: &str,
        topic: &str,
        key: &str,
        max_num: i32,
        (begin_ms, end_ms): (i64, i64),
        unique_key: bool,
    ) -> Result<Vec<StoredMessage>, AdminError> {
        let header = QueryMessageRequestHeader {
            topic: topic.to_owned(),
            key: key.to_owned(),
            max_num: max_num.clamp(1, QUERY_MAX_NUM_LIMIT),
            begin_timestamp: begin_ms,
            end_timestamp: end_ms,
        };
        let mut request = RemotingCommand::request(request_code::QUERY_MESSAGE).with_header(&header);
        if unique_key {
            request.ext_fields.insert(UNIQUE_KEY_QUERY.into(), "true");
        }
        let name = code_name(request.code);
        let response = self.call(addr, request).await?;
        let response = check(addr, name, response, &[response_code::SUCCESS, response_code::QUERY_NOT_FOUND])?;
        if response.code == response_code::QUERY_NOT_FOUND {
            return Ok(Vec::new());
        }
        let found = decode_messages(addr, name, &response.body)?;
        // The index is a hash: keep only messages that really carry the key (Java does too).
        Ok(found
            .into_iter()
            .filter(|m| {
                if unique_key {
                    m.property(keys::UNIQ_KEY) == Some(key)
                } else {
                    m.property(keys::KEYS).is_some_and(|ks| ks.split(keys::KEY_SEPARATOR).any(|k| k == key))
                }
            })
            .collect())
    }

    /// The trace messages of `trace_topic` indexed under `msg_id` (clients key each trace
    /// message by the ids it traces) on every broker of the trace topic, with the address of
    /// the broker that holds each, oldest first (the index answers in no useful order).
    /// Decoding the records is `ferromq_protocol::trace_view`'s job.
    ///
    /// # Errors
    /// No route for the trace topic (traceTopicEnable off), or a broker's failure.
    pub async fn trace_messages(
        &self,
        trace_topic: &str,
        msg_id: &str,
        max_num: i32,
        range: (i64, i64),
    ) -> Result<Vec<(String, StoredMessage)>, AdminError> {
        let mut found = Vec::new();
        for (_, addr) in self.route_brokers(trace_topic).await? {
            let messages = self.query_message(&addr, trace_topic, msg_id, max_num, range, false).await?;
            found.extend(messages.into_iter().map(|m| (addr.clone(), m)));
        }
        found.sort_by_key(|(_, m)| (m.store_timestamp_ms, m.physical_offset));
        Ok(found)
    }

    /// VIEW_MESSAGE_BY_ID: the message at commit-log `offset` of the broker at `addr`.
    ///
    /// # Errors
    /// The broker's refusal (no message there) or a transport failure, naming `addr`.
    pub async fn view_message(&self, addr: &str, offset: i64) -> Result<StoredMessage, AdminError> {
        let header = ViewMessageRequestHeader { topic: None, offset };
        let request = RemotingCommand::request(request_code::VIEW_MESSAGE_BY_ID).with_header(&header);
        let name = code_name(request.code);
        let response = self.call_ok(addr, request).await?;
        let (message, _) = StoredMessage::decode_shared(&response.body).map_err(|source| AdminError::Message {
            addr: addr.to_owned(),
            request: name,
            source,
        })?;
        Ok(message)
    }

    /// Looks a message up by its offset message id: decodes the broker address and commit-log
    /// offset from `id`, then asks that broker. Returns the address asked and the message.
    ///
    /// # Errors
    /// [`AdminError::MessageId`] for an id that is not an offset message id; otherwise as
    /// [`view_message`](Self::view_message).
    pub async fn view_message_by_offset_id(&self, id: &str) -> Result<(String, StoredMessage), AdminError> {
        let (host, offset) =
            decode_offset_msg_id(id).map_err(|source| AdminError::MessageId { id: id.to_owned(), source })?;
        let addr = host.to_string();
        let message = self.view_message(&addr, offset).await?;
        Ok((addr, message))
    }

    /// CONSUME_MESSAGE_DIRECTLY: the broker at `addr` hands the message stored at offset id
    /// `msg_id` to consumer `client_id` of `group`, which consumes it and reports how; returns
    /// that report (Java's `ConsumeMessageDirectlyResult` as JSON).
    ///
    /// # Errors
    /// The broker's refusal (the client is not online, too old or too slow) and transport
    /// failures, naming `addr`.
    pub async fn consume_message_directly(
        &self,
        addr: &str,
        group: &str,
        client_id: &str,
        topic: &str,
        msg_id: &str,
    ) -> Result<String, AdminError> {
        let mut request = RemotingCommand::request(request_code::CONSUME_MESSAGE_DIRECTLY);
        request.ext_fields.insert("consumerGroup".into(), group);
        request.ext_fields.insert("clientId".into(), client_id);
        request.ext_fields.insert("topic".into(), topic);
        request.ext_fields.insert("msgId".into(), msg_id);
        let response = self.call_ok(addr, request).await?;
        Ok(String::from_utf8_lossy(&response.body).into_owned())
    }
}

fn decode_messages(addr: &str, name: &'static str, body: &bytes::Bytes) -> Result<Vec<StoredMessage>, AdminError> {
    StoredMessage::iter_shared(body.clone()).collect::<Result<Vec<_>, _>>().map_err(|source| AdminError::Message {
        addr: addr.to_owned(),
        request: name,
        source,
    })
}

/// The tags of a tag expression; empty for `*` (every message). Java: `FilterAPI#buildSubscriptionData`.
fn tag_set(expression: &str) -> Vec<&str> {
    if expression.trim() == "*" {
        return Vec::new();
    }
    expression.split("||").map(str::trim).filter(|t| !t.is_empty()).collect()
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
