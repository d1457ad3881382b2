//! Requests the proxy relays to a broker: which broker (the `bname` a 5.x client sends, else
//! the one broker group that can hold the request), and the relay itself.
//!
//! Java's proxy refuses a request without `bname` (VERSION_NOT_SUPPORTED), so it serves 5.x
//! remoting clients only. 4.x clients never send it; FerroMQ serves them whenever the broker is
//! unambiguous and refuses only the ambiguous requests, with a remark that names the topic, the
//! broker groups and the fix (ADR 0014).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferromq_protocol::body::{JsonBody, LockBatchRequestBody};
use ferromq_protocol::message::{find_property, keys, sysflag};
use ferromq_protocol::pop::ExtraInfo;
use ferromq_protocol::topic_validator::is_retry_or_dlq_topic;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::Connection;
use tracing::{debug, warn};

use crate::brokers::TopicMessageType;
use crate::convert::check_message_type;
use crate::pb::Code;
use crate::proxy::{Proxy, TransactionData};
use crate::status::ProxyError;

/// Extra time a relayed PULL waits beyond its long-polling time (Java: 10 s).
pub const PULL_EXTRA_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a relayed long poll may hold the proxy's call to a broker.
pub const LONG_POLL_TIMEOUT_MAX: Duration = Duration::from_secs(120);

/// A request the proxy answers itself with an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The remoting response code.
    pub code: i32,
    /// The remark.
    pub remark: String,
}

impl Refusal {
    fn new(code: i32, remark: impl Into<String>) -> Self {
        Refusal { code, remark: remark.into() }
    }

    /// The answer to `req`.
    pub fn answer(&self, req: &RemotingCommand) -> RemotingCommand {
        RemotingCommand::response_to(req, self.code, self.remark.clone())
    }

    fn from_proxy(e: &ProxyError) -> Self {
        let code = match e.code {
            Code::TopicNotFound => response_code::TOPIC_NOT_EXIST,
            Code::TooManyRequests => response_code::SYSTEM_BUSY,
            _ => response_code::SYSTEM_ERROR,
        };
        Refusal::new(code, e.message.clone())
    }
}

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The broker group.
    pub broker_name: String,
    /// Its master's address.
    pub addr: String,
}

fn non_empty(v: Option<&str>) -> Option<&str> {
    v.filter(|s| !s.trim().is_empty())
}

/// The broker name a request names: `bname` (5.x), or `n` of SEND_MESSAGE_V2 and the batch
/// send.
pub fn named_broker(req: &RemotingCommand) -> Option<&str> {
    non_empty(req.ext("bname")).or_else(|| match req.code {
        request_code::SEND_MESSAGE_V2 | request_code::SEND_BATCH_MESSAGE => non_empty(req.ext("n")),
        _ => None,
    })
}

/// The topic a request is about.
pub fn topic_of(req: &RemotingCommand) -> Option<&str> {
    let key = match req.code {
        request_code::SEND_MESSAGE_V2 | request_code::SEND_BATCH_MESSAGE => "b",
        request_code::CONSUMER_SEND_MSG_BACK => "originTopic",
        _ => "topic",
    };
    non_empty(req.ext(key))
}

/// The master of broker group `broker_name`: from `topic`'s route when given, else (or when
/// that route does not name it) from the route of the topic every broker registers under its
/// own name.
async fn master_of(p: &Proxy, topic: Option<&str>, broker_name: &str) -> Result<Target, Refusal> {
    if let Some(topic) = topic {
        if let Ok(addr) = p.brokers.master_addr(topic, broker_name).await {
            return Ok(Target { broker_name: broker_name.to_owned(), addr });
        }
    }
    match p.brokers.master_addr(broker_name, broker_name).await {
        Ok(addr) => Ok(Target { broker_name: broker_name.to_owned(), addr }),
        Err(e) if e.code == Code::TopicNotFound || e.code == Code::BadRequest => Err(Refusal::new(
            response_code::SYSTEM_ERROR,
            format!("broker {broker_name} is not known to the name servers or has no master"),
        )),
        Err(e) => Err(Refusal::from_proxy(&e)),
    }
}

/// The one broker group serving `topic`; VERSION_NOT_SUPPORTED when several do.
async fn only_broker_of(p: &Proxy, req: &RemotingCommand, topic: &str) -> Result<Target, Refusal> {
    let route = p.brokers.route(topic).await.map_err(|e| {
        if e.code == Code::TopicNotFound {
            Refusal::new(
                response_code::TOPIC_NOT_EXIST,
                format!("No topic route info in name server for the topic: {topic}"),
            )
        } else {
            Refusal::from_proxy(&e)
        }
    })?;
    let mut names: Vec<&str> = route.queue_datas.iter().map(|q| q.broker_name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    match names.as_slice() {
        [one] => master_of(p, Some(topic), one).await,
        [] => Err(Refusal::new(response_code::SYSTEM_ERROR, format!("no broker serves topic {topic}"))),
        many => Err(Refusal::new(
            response_code::VERSION_NOT_SUPPORTED,
            format!(
                "Request doesn't have field bname: request code {} for topic {topic} could go to any of the broker \
                 groups {} behind this proxy. Use a RocketMQ 5.x client (it names the broker group), or connect \
                 this client to the name server and brokers directly",
                req.code,
                many.join(", ")
            ),
        )),
    }
}

/// The broker a relayed request goes to.
///
/// # Errors
/// The [`Refusal`] to answer: an unknown topic or broker, or VERSION_NOT_SUPPORTED for a
/// request that names no broker and could go to several.
pub async fn resolve(p: &Proxy, req: &RemotingCommand) -> Result<Target, Refusal> {
    let topic = topic_of(req);
    if let Some(name) = named_broker(req) {
        return master_of(p, topic, name).await;
    }
    match req.code {
        // The receipt handle names its broker.
        request_code::ACK_MESSAGE | request_code::CHANGE_MESSAGE_INVISIBLETIME => {
            let text = req.ext("extraInfo").unwrap_or_default();
            let info = ExtraInfo::parse(text)
                .map_err(|e| Refusal::new(response_code::ILLEGAL_OPERATION, format!("malformed extraInfo: {e}")))?;
            return master_of(p, topic, &info.broker_name).await;
        }
        request_code::LOCK_BATCH_MQ | request_code::UNLOCK_BATCH_MQ => {
            let body = LockBatchRequestBody::decode(&req.body)
                .map_err(|e| Refusal::new(response_code::SYSTEM_ERROR, format!("malformed lock request: {e}")))?;
            let mq = body
                .mq_set
                .iter()
                .next()
                .ok_or_else(|| Refusal::new(response_code::SYSTEM_ERROR, "lock request without queues"))?;
            return master_of(p, Some(&mq.topic), &mq.broker_name).await;
        }
        request_code::END_TRANSACTION => return end_transaction_target(p, req).await,
        _ => {}
    }
    match topic {
        Some(topic) => only_broker_of(p, req, topic).await,
        None => Err(Refusal::new(
            response_code::VERSION_NOT_SUPPORTED,
            format!("Request doesn't have field bname: request code {} names neither a broker nor a topic", req.code),
        )),
    }
}

/// END_TRANSACTION without `bname`: the broker the proxy relayed the half message to, or that
/// asked the producer to check it.
async fn end_transaction_target(p: &Proxy, req: &RemotingCommand) -> Result<Target, Refusal> {
    let group = req.ext("producerGroup").unwrap_or_default();
    let ids = [req.ext("transactionId"), req.ext("msgId")];
    for id in ids.into_iter().flatten().filter(|s| !s.is_empty()) {
        if let Some(data) = p.transactions.take(group, id) {
            return master_of(p, None, &data.broker_name).await;
        }
    }
    Err(Refusal::new(
        response_code::VERSION_NOT_SUPPORTED,
        format!(
            "Request doesn't have field bname: END_TRANSACTION of producer group {group}, transaction {}, was not \
             sent or checked through this proxy, so its broker is unknown",
            req.ext("transactionId").or(req.ext("msgId")).unwrap_or("(none)")
        ),
    ))
}

/// How long the proxy waits for the broker's answer to `req`.
pub fn timeout_of(p: &Proxy, req: &RemotingCommand) -> Duration {
    let base = p.brokers.timeout();
    let ms = |key| req.ext(key).and_then(|v| v.parse::<u64>().ok()).map(Duration::from_millis);
    let t = match req.code {
        request_code::PULL_MESSAGE | request_code::LITE_PULL_MESSAGE => {
            ms("suspendTimeoutMillis").map_or(base, |t| t + PULL_EXTRA_TIMEOUT)
        }
        request_code::POP_MESSAGE => ms("pollTime").map_or(base, |t| t + base),
        _ => base,
    };
    t.min(LONG_POLL_TIMEOUT_MAX)
}

/// Relays `req` from the client on `conn` to its broker and returns the broker's answer
/// (`None` for a oneway request). The proxy's ACL 2.0 has let it through already
/// (`super::gate`); the broker connection signs it as the proxy when the proxy has
/// `innerClientAuthenticationCredentials`, replacing the client's signature.
pub async fn relay(p: &Arc<Proxy>, conn: &Connection, req: RemotingCommand) -> Option<RemotingCommand> {
    if let Some(refusal) = message_type_refusal(p, &req).await {
        return (!req.is_oneway()).then(|| refusal.answer(&req));
    }
    let target = match resolve(p, &req).await {
        Ok(t) => t,
        Err(refusal) => {
            if req.is_oneway() {
                warn!(
                    client = %conn.remote_addr(),
                    code = req.code,
                    remark = %refusal.remark,
                    "oneway request through the proxy's remoting port dropped"
                );
                return None;
            }
            return Some(refusal.answer(&req));
        }
    };
    // The broker learns the client (its producer and consumer groups) before its first request.
    super::local::introduce(p, conn, &target.addr).await;
    if req.is_oneway() {
        let mut forwarded = req;
        forwarded.flag &= !ferromq_protocol::FLAG_RESPONSE;
        if let Err(e) = p.brokers.invoke_oneway(&target.addr, forwarded).await {
            warn!(broker = %target.broker_name, addr = %target.addr, error = %e, "oneway relay to the broker failed");
        }
        return None;
    }
    let timeout = timeout_of(p, &req);
    let started = Instant::now();
    let sent = TransactionalSend::of(&req);
    let (code, opaque) = (req.code, req.opaque);
    let mut forwarded = req;
    forwarded.flag = 0;
    let long_poll =
        matches!(code, request_code::PULL_MESSAGE | request_code::LITE_PULL_MESSAGE | request_code::POP_MESSAGE);
    let relayed = p.brokers.invoke(&target.addr, forwarded, Some(timeout));
    let answered = if long_poll {
        // A long poll may wait at its broker for tens of seconds; a stopping proxy answers it at
        // once, so the client pulls again (elsewhere, once this proxy is gone) instead of the
        // proxy's exit waiting out its connection drain. What the broker answers later is
        // dropped: a pull holds no state there, and a POP's messages come back after their
        // invisible time.
        tokio::select! {
            r = relayed => r,
            () = p.stopped() => {
                return Some(
                    RemotingCommand::response(response_code::SYSTEM_BUSY, "the proxy is shutting down; try again".to_owned())
                        .with_opaque(opaque),
                );
            }
        }
    } else {
        relayed.await
    };
    match answered {
        Ok(resp) => {
            if let Some(send) = sent.filter(|_| resp.code == response_code::SUCCESS) {
                send.remember(p, &target, &resp);
            }
            Some(resp)
        }
        Err(e) => {
            debug!(broker = %target.broker_name, code, elapsed_ms = started.elapsed().as_millis() as u64, error = %e, "relay failed");
            Some(
                RemotingCommand::response(
                    response_code::SYSTEM_ERROR,
                    format!(
                        "broker {} ({}) did not answer through the proxy: {}",
                        target.broker_name, target.addr, e.message
                    ),
                )
                .with_opaque(opaque),
            )
        }
    }
}

/// The type of a message by its properties, as Java's proxy reads it
/// (`TopicMessageType.parseFromMessageProperty`): a transaction half, then any delay key, then a
/// message group, else normal.
fn message_type_of(properties: &str) -> TopicMessageType {
    if find_property(properties, keys::TRAN_MSG) == Some("true") {
        TopicMessageType::Transaction
    } else if [keys::DELAY, keys::TIMER_DELIVER_MS, keys::TIMER_DELAY_SEC, keys::TIMER_DELAY_MS]
        .iter()
        .any(|k| find_property(properties, k).is_some())
    {
        TopicMessageType::Delay
    } else if find_property(properties, keys::SHARDING_KEY).is_some() {
        TopicMessageType::Fifo
    } else {
        TopicMessageType::Normal
    }
}

/// A send whose message type its topic's `message.type` does not take (`enableTopicMessageTypeCheck`,
/// as Java's proxy checks remoting sends; retry and DLQ topics and transferred messages are not
/// checked): MESSAGE_ILLEGAL with Java's remark.
async fn message_type_refusal(p: &Proxy, req: &RemotingCommand) -> Option<Refusal> {
    let (topic, properties) = match req.code {
        request_code::SEND_MESSAGE => (req.ext("topic"), req.ext("properties")),
        request_code::SEND_MESSAGE_V2 | request_code::SEND_BATCH_MESSAGE => (req.ext("b"), req.ext("i")),
        _ => return None,
    };
    let (topic, properties) = (topic?, properties.unwrap_or_default());
    if !p.config.enable_topic_message_type_check
        || find_property(properties, keys::TRANSFER_FLAG).is_some()
        || is_retry_or_dlq_topic(topic)
    {
        return None;
    }
    let topic_type = p.brokers.topic_message_type(topic).await;
    let refused = check_message_type(topic_type, message_type_of(properties)).err()?;
    Some(Refusal::new(response_code::MESSAGE_ILLEGAL, refused.message))
}

/// A half message being sent: remembered so the producer's END_TRANSACTION finds its broker.
struct TransactionalSend {
    group: String,
    uniq_key: Option<String>,
}

impl TransactionalSend {
    fn of(req: &RemotingCommand) -> Option<TransactionalSend> {
        let (group, flag, properties) = match req.code {
            request_code::SEND_MESSAGE => (req.ext("producerGroup"), req.ext("sysFlag"), req.ext("properties")),
            request_code::SEND_MESSAGE_V2 => (req.ext("a"), req.ext("e"), req.ext("i")),
            _ => return None,
        };
        let flag: i32 = flag?.parse().ok()?;
        let properties = properties.unwrap_or_default();
        let prepared =
            flag & sysflag::TRANSACTION_PREPARED_TYPE != 0 || find_property(properties, keys::TRAN_MSG) == Some("true");
        prepared.then(|| TransactionalSend {
            group: group.unwrap_or_default().to_owned(),
            uniq_key: find_property(properties, keys::UNIQ_KEY).map(str::to_owned),
        })
    }

    fn remember(self, p: &Proxy, target: &Target, resp: &RemotingCommand) {
        let mut ids: Vec<String> =
            resp.ext("transactionId").filter(|s| !s.is_empty()).map(str::to_owned).into_iter().collect();
        if let Some(k) = self.uniq_key {
            if !ids.contains(&k) {
                ids.push(k);
            }
        }
        let expires = Instant::now() + p.transaction_data_ttl();
        for id in ids {
            let data = TransactionData {
                broker_name: target.broker_name.clone(),
                tran_state_table_offset: resp.ext("queueOffset").and_then(|v| v.parse().ok()).unwrap_or_default(),
                commit_log_offset: 0,
                message_id: id.clone(),
                expires,
            };
            if !p.remember_transaction(&self.group, &id, data) {
                warn!(group = %self.group, "transaction table full (transactionDataMaxTotal); its END_TRANSACTION needs bname");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_types_by_properties_in_javas_order() {
        let props =
            |pairs: &[(&str, &str)]| -> String { pairs.iter().map(|(k, v)| format!("{k}\u{1}{v}\u{2}")).collect() };
        assert_eq!(message_type_of(""), TopicMessageType::Normal);
        assert_eq!(message_type_of(&props(&[(keys::TAGS, "a")])), TopicMessageType::Normal);
        assert_eq!(message_type_of(&props(&[(keys::SHARDING_KEY, "g")])), TopicMessageType::Fifo);
        // Any delay key counts, even level 0, and wins over a message group.
        assert_eq!(message_type_of(&props(&[(keys::DELAY, "0")])), TopicMessageType::Delay);
        assert_eq!(
            message_type_of(&props(&[(keys::SHARDING_KEY, "g"), (keys::TIMER_DELAY_SEC, "5")])),
            TopicMessageType::Delay
        );
        assert_eq!(message_type_of(&props(&[(keys::TIMER_DELIVER_MS, "1")])), TopicMessageType::Delay);
        assert_eq!(message_type_of(&props(&[(keys::TIMER_DELAY_MS, "1")])), TopicMessageType::Delay);
        // START_DELIVER_TIME is not one of Java's four.
        assert_eq!(message_type_of(&props(&[(keys::START_DELIVER_TIME, "1")])), TopicMessageType::Normal);
        assert_eq!(
            message_type_of(&props(&[(keys::TRAN_MSG, "true"), (keys::DELAY, "2")])),
            TopicMessageType::Transaction
        );
        assert_eq!(message_type_of(&props(&[(keys::TRAN_MSG, "false")])), TopicMessageType::Normal);
    }

    #[test]
    fn broker_and_topic_fields_by_request_code() {
        let mut v2 = RemotingCommand::request(request_code::SEND_MESSAGE_V2);
        v2.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("b"), "T");
        v2.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("n"), "broker-a");
        assert_eq!((named_broker(&v2), topic_of(&v2)), (Some("broker-a"), Some("T")));

        let mut pull = RemotingCommand::request(request_code::PULL_MESSAGE);
        pull.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("topic"), "T");
        pull.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("n"), "ignored");
        assert_eq!((named_broker(&pull), topic_of(&pull)), (None, Some("T")));
        pull.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("bname"), " ");
        assert_eq!(named_broker(&pull), None, "a blank bname names nothing");
        pull.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("bname"), "broker-b");
        assert_eq!(named_broker(&pull), Some("broker-b"));

        let mut back = RemotingCommand::request(request_code::CONSUMER_SEND_MSG_BACK);
        back.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("originTopic"), "O");
        assert_eq!(topic_of(&back), Some("O"));
    }

    #[test]
    fn half_messages_are_recognised_by_flag_or_property() {
        let mut v2 = RemotingCommand::request(request_code::SEND_MESSAGE_V2);
        v2.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("a"), "PG");
        v2.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("e"), "4");
        v2.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("i"), "UNIQ_KEY\u{1}ABC\u{2}");
        let send = TransactionalSend::of(&v2).expect("a half message");
        assert_eq!((send.group.as_str(), send.uniq_key.as_deref()), ("PG", Some("ABC")));
        v2.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("e"), "0");
        assert!(TransactionalSend::of(&v2).is_none());
        v2.ext_fields
            .insert(ferromq_protocol::ext_fields::intern_key("i"), "TRAN_MSG\u{1}true\u{2}UNIQ_KEY\u{1}X\u{2}");
        assert!(TransactionalSend::of(&v2).is_some());
    }
}
