//! `Producer`: sends messages to a topic's queues with retries, fault avoidance, compression
//! and batching. Java: `DefaultMQProducer` / `DefaultMQProducerImpl`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferromq_protocol::body::MessageQueue;
use ferromq_protocol::header::{SendMessageRequestHeader, SendMessageRequestHeaderV2};
use ferromq_protocol::message::{encode_batch, java_string_hash, keys, sysflag, BatchEntry, UniqIdGenerator};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use tracing::{debug, warn};

use crate::client_instance::{ClientConfig, ClientInstance};
use crate::error::ClientError;
use crate::fault::FaultTable;
use crate::message::Message;
use crate::publish_info::PublishInfo;
use crate::send_result::{process_send_response, SendResult};
use crate::validators::check_message;

/// Template topic for auto-creation. Java: `TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`.
pub const CREATE_TOPIC_KEY: &str = "TBW102";

/// zlib level of compressed bodies. Java: `compressLevel` default 5.
const COMPRESS_LEVEL: u32 = 5;

/// Broker codes after which a sync send tries another queue. Java: the list in
/// `DefaultMQProducerImpl#sendDefaultImpl` (`retryResponseCodes`).
const RETRY_CODES: &[i32] = &[
    response_code::TOPIC_NOT_EXIST,
    response_code::SERVICE_NOT_AVAILABLE,
    response_code::SYSTEM_ERROR,
    response_code::SYSTEM_BUSY,
    response_code::NO_PERMISSION,
];

/// Producer settings. Java: `DefaultMQProducer`'s fields, with its defaults.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// Producer group.
    pub group: String,
    /// Template topic sent for auto-creation (`createTopicKey`, `TBW102`).
    pub create_topic_key: String,
    /// Queues of an auto-created topic (`defaultTopicQueueNums`, 4).
    pub default_topic_queue_nums: i32,
    /// Send timeout (`sendMsgTimeout`, 3 s).
    pub send_msg_timeout: Duration,
    /// Bodies over this many bytes are zlib-compressed (`compressMsgBodyOverHowmuch`, 4096).
    pub compress_msg_body_over_howmuch: usize,
    /// Extra attempts of a failed sync send (`retryTimesWhenSendFailed`, 2).
    pub retry_times_when_send_failed: u32,
    /// Retry on another broker when stored but not durable (`retryAnotherBrokerWhenNotStoreOK`).
    pub retry_another_broker_when_not_store_ok: bool,
    /// Largest body (`maxMessageSize`, 4 MiB).
    pub max_message_size: usize,
    /// Skip brokers that recently failed or were slow (`sendLatencyFaultEnable`, false).
    pub send_latency_fault_enable: bool,
    /// Record a `Pub` trace of every sync send in the trace topic (`enableMsgTrace`, false).
    /// The broker must serve the topic (`traceTopicEnable=true`; on in `ferromq standalone`).
    pub enable_msg_trace: bool,
    /// The trace topic (`customizedTraceTopic`); `None`: `RMQ_SYS_TRACE_TOPIC`.
    pub trace_topic: Option<String>,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            group: "DEFAULT_PRODUCER".to_owned(),
            create_topic_key: CREATE_TOPIC_KEY.to_owned(),
            default_topic_queue_nums: 4,
            send_msg_timeout: Duration::from_millis(3_000),
            compress_msg_body_over_howmuch: 4_096,
            retry_times_when_send_failed: 2,
            retry_another_broker_when_not_store_ok: false,
            max_message_size: 4 * 1024 * 1024,
            send_latency_fault_enable: false,
            enable_msg_trace: false,
            trace_topic: None,
        }
    }
}

/// How a send is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Sync,
    Oneway,
}

/// A message ready for the wire.
struct Prepared {
    topic: String,
    body: Bytes,
    flag: i32,
    sys_flag: i32,
    properties: String,
    msg_id: String,
    batch: bool,
    /// A traced batch's messages, in batch order (empty otherwise).
    traced_parts: Vec<TracedPart>,
}

/// What a message's `Pub` trace record needs of it.
#[derive(Debug, Clone)]
struct TracedPart {
    msg_id: String,
    tags: Option<String>,
    keys: Option<String>,
    body_length: usize,
    msg_type: i32,
}

/// A message producer. Create, [`start`](Producer::start), send, [`shutdown`](Producer::shutdown).
#[derive(Debug)]
pub struct Producer {
    config: ProducerConfig,
    instance: Arc<ClientInstance>,
    owns_instance: bool,
    ids: UniqIdGenerator,
    faults: FaultTable,
    running: AtomicBool,
    /// With `enable_msg_trace`, from `start` on.
    tracer: std::sync::OnceLock<Arc<crate::trace::TraceDispatcher>>,
}

/// A selector that keeps every message with the same `key` on one queue.
/// Java: `SelectMessageQueueByHash`.
pub fn select_by_hash(key: &str) -> impl Fn(&[MessageQueue], &Message) -> usize + '_ {
    move |mqs, _| (java_string_hash(key) % mqs.len().max(1) as i32).unsigned_abs() as usize
}

impl Producer {
    /// A producer with its own client instance.
    pub fn new(config: ProducerConfig, client: ClientConfig) -> Self {
        let instance = ClientInstance::new(client);
        let mut p = Self::with_instance(config, instance);
        p.owns_instance = true;
        p
    }

    /// A producer sharing `instance` with other clients.
    pub fn with_instance(config: ProducerConfig, instance: Arc<ClientInstance>) -> Self {
        let ip = instance.config().client_ip.parse().ok();
        let ids = ip.map_or_else(UniqIdGenerator::without_ip, UniqIdGenerator::new);
        Producer {
            config,
            instance,
            owns_instance: false,
            ids,
            faults: FaultTable::default(),
            running: false.into(),
            tracer: std::sync::OnceLock::new(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &ProducerConfig {
        &self.config
    }

    /// The shared client instance.
    pub fn instance(&self) -> &Arc<ClientInstance> {
        &self.instance
    }

    /// The trace dispatcher, with `enable_msg_trace` once started.
    pub(crate) fn tracer(&self) -> Option<&Arc<crate::trace::TraceDispatcher>> {
        self.tracer.get()
    }

    /// Registers the group and starts heartbeats.
    ///
    /// # Errors
    /// [`ClientError::Validation`] if the group is already registered in this instance.
    pub async fn start(&self) -> Result<(), ClientError> {
        if !self.instance.register_producer(&self.config.group) {
            return Err(ClientError::Validation {
                topic: String::new(),
                reason: format!("The producer group[{}] has been created before", self.config.group),
            });
        }
        self.running.store(true, Ordering::Release);
        if self.config.enable_msg_trace && self.tracer.get().is_none() {
            let tracer = crate::trace::TraceDispatcher::start(
                self.instance.config(),
                &self.config.group,
                "PRODUCE",
                self.config.trace_topic.as_deref(),
            );
            let _ = self.tracer.set(tracer);
        }
        self.instance.heartbeat_all().await;
        Ok(())
    }

    /// Unregisters from the brokers and, if the instance is this producer's own, shuts it down.
    pub async fn shutdown(&self) {
        if self.running.swap(false, Ordering::AcqRel) {
            self.instance.unregister_producer(&self.config.group).await;
        }
        if let Some(tracer) = self.tracer.get() {
            tracer.shutdown().await;
        }
        if self.owns_instance {
            self.instance.shutdown().await;
        }
    }

    /// Sends and waits for the broker, retrying on other queues on failure.
    ///
    /// # Errors
    /// Validation, route, broker, transport and timeout errors.
    pub async fn send(&self, msg: Message) -> Result<SendResult, ClientError> {
        let prepared = self.prepare(msg)?;
        self.send_default(prepared, Mode::Sync).await.map(|r| r.expect("sync sends return a result"))
    }

    /// Sends without waiting for a response; no retry.
    ///
    /// # Errors
    /// Validation, route and transport errors.
    pub async fn send_oneway(&self, msg: Message) -> Result<(), ClientError> {
        let prepared = self.prepare(msg)?;
        self.send_default(prepared, Mode::Oneway).await.map(|_| ())
    }

    /// Sends to one queue; no retry.
    ///
    /// # Errors
    /// As [`Producer::send`].
    pub async fn send_to_queue(&self, msg: Message, mq: &MessageQueue) -> Result<SendResult, ClientError> {
        let prepared = self.prepare(msg)?;
        if prepared.topic != mq.topic {
            return Err(ClientError::Validation {
                topic: prepared.topic,
                reason: format!("message's topic not equal mq's topic {}", mq.topic),
            });
        }
        self.instance.publish_info(&mq.topic).await?;
        let r = self.send_kernel(&prepared, mq, Mode::Sync, self.config.send_msg_timeout).await?;
        Ok(r.expect("sync sends return a result"))
    }

    /// Sends to the queue `selector` picks from the topic's writable queues; no retry.
    ///
    /// # Errors
    /// As [`Producer::send`], and [`ClientError::BadSelector`].
    pub async fn send_with_selector(
        &self,
        msg: Message,
        selector: impl Fn(&[MessageQueue], &Message) -> usize,
    ) -> Result<SendResult, ClientError> {
        check_message(&msg, self.config.max_message_size)?;
        self.ensure_running()?;
        let info = self.find_publish_info(&msg.topic).await?;
        let index = selector(&info.queues, &msg);
        let mq = info.queues.get(index).cloned().ok_or_else(|| ClientError::BadSelector {
            topic: msg.topic.clone(),
            index,
            queue_count: info.queues.len(),
        })?;
        let prepared = self.prepare(msg)?;
        let r = self.send_kernel(&prepared, &mq, Mode::Sync, self.config.send_msg_timeout).await?;
        Ok(r.expect("sync sends return a result"))
    }

    /// Sends messages of one topic as one SEND_BATCH_MESSAGE, with retries like
    /// [`Producer::send`]. Bodies are not compressed.
    ///
    /// # Errors
    /// As [`Producer::send`]; validation if topics differ, a message is delayed, or the list
    /// is empty.
    pub async fn send_batch(&self, msgs: Vec<Message>) -> Result<SendResult, ClientError> {
        let prepared = self.prepare_batch(msgs)?;
        self.send_default(prepared, Mode::Sync).await.map(|r| r.expect("sync sends return a result"))
    }

    fn ensure_running(&self) -> Result<(), ClientError> {
        if self.running.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(ClientError::NotRunning { group: self.config.group.clone() })
        }
    }

    /// The message's UNIQ_KEY, set to a new id first if it has none.
    pub(crate) fn ensure_uniq_key(&self, msg: &mut Message) -> String {
        match msg.uniq_id() {
            Some(id) => id.to_owned(),
            None => {
                let id = self.ids.next_id();
                msg.properties.insert(keys::UNIQ_KEY, id.clone());
                id
            }
        }
    }

    /// Validates, sets UNIQ_KEY and compresses; `TRAN_MSG=true` makes it a prepared (half)
    /// message. Java: the start of `sendKernelImpl`.
    fn prepare(&self, mut msg: Message) -> Result<Prepared, ClientError> {
        check_message(&msg, self.config.max_message_size)?;
        self.ensure_running()?;
        let msg_id = self.ensure_uniq_key(&mut msg);
        let mut sys_flag = 0;
        if is_prepared(&msg) {
            sys_flag |= sysflag::TRANSACTION_PREPARED_TYPE;
        }
        let mut body = msg.body;
        if body.len() > self.config.compress_msg_body_over_howmuch {
            body = compress(&body)?;
            sys_flag |= sysflag::COMPRESSED_FLAG;
        }
        Ok(Prepared {
            topic: msg.topic,
            body,
            flag: msg.flag,
            sys_flag,
            properties: msg.properties.encode(),
            msg_id,
            batch: false,
            traced_parts: Vec::new(),
        })
    }

    /// Java: `DefaultMQProducer#batch` + `MessageBatch#generateFromList`.
    fn prepare_batch(&self, msgs: Vec<Message>) -> Result<Prepared, ClientError> {
        let Some(first) = msgs.first() else {
            return Err(ClientError::Validation { topic: String::new(), reason: "the batch is empty".into() });
        };
        let topic = first.topic.clone();
        let mut entries = Vec::with_capacity(msgs.len());
        let mut ids = Vec::with_capacity(msgs.len());
        let traced = self.tracer.get().is_some();
        let mut traced_parts = Vec::new();
        for mut msg in msgs {
            check_message(&msg, self.config.max_message_size)?;
            if msg.topic != topic {
                return Err(ClientError::Validation {
                    topic,
                    reason: "The topic of the messages in one batch should be the same".into(),
                });
            }
            if msg.property(keys::DELAY).is_some() {
                return Err(ClientError::Validation {
                    topic,
                    reason: "TimeDelayLevel is not supported for batching".into(),
                });
            }
            // The broker refuses prepared batches; a batch never carries the prepared flag,
            // so the half messages would be stored as plain ones instead.
            if is_prepared(&msg) {
                return Err(ClientError::Validation { topic, reason: "batch messages cannot be transactional".into() });
            }
            let id = self.ensure_uniq_key(&mut msg);
            if traced {
                traced_parts.push(TracedPart {
                    msg_id: id.clone(),
                    tags: msg.tags().map(str::to_owned),
                    keys: msg.keys().map(str::to_owned),
                    body_length: msg.body.len(),
                    msg_type: crate::trace::pub_msg_type(&msg.properties),
                });
            }
            ids.push(id);
            entries.push(BatchEntry { flag: msg.flag, body: msg.body, properties: msg.properties.encode() });
        }
        self.ensure_running()?;
        let body = encode_batch(&entries)
            .map_err(|e| ClientError::Validation { topic: topic.clone(), reason: e.to_string() })?
            .freeze();
        if body.len() > self.config.max_message_size {
            return Err(ClientError::Validation {
                topic,
                reason: format!("the message body size over max value, MAX: {}", self.config.max_message_size),
            });
        }
        let mut props = ferromq_protocol::message::MessageProperties::new();
        props.insert(keys::UNIQ_KEY, self.ids.next_id());
        Ok(Prepared {
            topic,
            body,
            flag: 0,
            sys_flag: 0,
            properties: props.encode(),
            msg_id: ids.join(","),
            batch: true,
            traced_parts,
        })
    }

    /// The topic's publish info; an unknown topic is tried through the template topic's route
    /// so the broker can auto-create it. Java: `tryToFindTopicPublishInfo`.
    async fn find_publish_info(&self, topic: &str) -> Result<Arc<PublishInfo>, ClientError> {
        match self.instance.publish_info(topic).await {
            Ok(info) if info.is_ok() => return Ok(info),
            Ok(_) | Err(ClientError::RouteNotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let mut route = match self.instance.fetch_route(&self.config.create_topic_key).await {
            Ok(route) => route,
            Err(ClientError::RouteNotFound { .. }) => return Err(ClientError::RouteNotFound { topic: topic.into() }),
            Err(e) => return Err(e),
        };
        for qd in &mut route.queue_datas {
            let n = qd.read_queue_nums.min(self.config.default_topic_queue_nums);
            qd.read_queue_nums = n;
            qd.write_queue_nums = n;
        }
        let info = self.instance.install_route(topic, &route);
        if info.is_ok() {
            Ok(info)
        } else {
            Err(ClientError::RouteNotFound { topic: topic.into() })
        }
    }

    fn select_queue<'a>(&self, info: &'a PublishInfo, last_broker: Option<&str>) -> Option<&'a MessageQueue> {
        if self.config.send_latency_fault_enable {
            let pick = info.select_where(|mq| {
                self.faults.is_available(&mq.broker_name) && last_broker.is_none_or(|b| b != mq.broker_name)
            });
            if let Some(mq) = pick.or_else(|| info.select_where(|mq| self.faults.is_available(&mq.broker_name))) {
                return Some(mq);
            }
        }
        info.select(last_broker)
    }

    /// Java: `DefaultMQProducerImpl#sendDefaultImpl`.
    async fn send_default(&self, prepared: Prepared, mode: Mode) -> Result<Option<SendResult>, ClientError> {
        let started = Instant::now();
        let timeout = self.config.send_msg_timeout;
        let mut info = self.find_publish_info(&prepared.topic).await?;
        let attempts = if mode == Mode::Sync { 1 + self.config.retry_times_when_send_failed } else { 1 };
        let mut last_broker: Option<String> = None;
        let mut last_err = None;
        for attempt in 0..attempts {
            let Some(mq) = self.select_queue(&info, last_broker.as_deref()).cloned() else { break };
            let left = timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(ClientError::Timeout { topic: prepared.topic, timeout });
            }
            let call_started = Instant::now();
            let result = self.send_kernel(&prepared, &mq, mode, left).await;
            let isolation = result.is_err();
            self.faults.update(&mq.broker_name, call_started.elapsed(), isolation);
            match result {
                Ok(Some(r))
                    if r.status != crate::SendStatus::SendOk && self.config.retry_another_broker_when_not_store_ok =>
                {
                    last_err = None;
                    last_broker = Some(mq.broker_name.clone());
                    if attempt + 1 == attempts {
                        return Ok(Some(r));
                    }
                }
                Ok(r) => return Ok(r),
                Err(e) if retriable(&e) => {
                    warn!(topic = %prepared.topic, broker_name = %mq.broker_name, attempt, error = %e, "send failed, retrying");
                    last_broker = Some(mq.broker_name.clone());
                    last_err = Some(e);
                    // Java refreshes routes on its timer; refreshing now finds a failed
                    // broker's removal sooner.
                    match self.instance.refresh_route(&prepared.topic).await {
                        Ok(fresh) if fresh.is_ok() => info = fresh,
                        Ok(_) | Err(_) => debug!(topic = %prepared.topic, "route refresh after failure gave nothing"),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(last_err.unwrap_or(ClientError::RouteNotFound { topic: prepared.topic }))
    }

    /// One request to one queue's master. Java: `sendKernelImpl` + `MQClientAPIImpl#sendMessage`.
    async fn send_kernel(
        &self,
        prepared: &Prepared,
        mq: &MessageQueue,
        mode: Mode,
        timeout: Duration,
    ) -> Result<Option<SendResult>, ClientError> {
        // A static topic's logic queue goes to the broker leading it now.
        let master = |instance: &ClientInstance| instance.broker_name_of(mq).and_then(|b| instance.master_addr(&b));
        let addr = match master(&self.instance) {
            Some(addr) => addr,
            None => {
                self.instance.refresh_route(&mq.topic).await?;
                master(&self.instance).ok_or_else(|| ClientError::BrokerNotFound {
                    topic: mq.topic.clone(),
                    broker_name: mq.broker_name.clone(),
                })?
            }
        };
        let header: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
            producer_group: self.config.group.clone(),
            topic: mq.topic.clone(),
            default_topic: self.config.create_topic_key.clone(),
            default_topic_queue_nums: self.config.default_topic_queue_nums,
            queue_id: mq.queue_id,
            sys_flag: prepared.sys_flag,
            born_timestamp: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64),
            flag: prepared.flag,
            properties: Some(prepared.properties.clone()),
            reconsume_times: Some(0),
            unit_mode: Some(false),
            batch: Some(prepared.batch),
            max_reconsume_times: None,
            broker_name: Some(mq.broker_name.clone()),
        }
        .into();
        let code = if prepared.batch { request_code::SEND_BATCH_MESSAGE } else { request_code::SEND_MESSAGE_V2 };
        let mut req = RemotingCommand::request(code).with_header(&header).with_body(prepared.body.clone());
        // A queue from the route's queueDatas is a physical one, also on a static topic; a
        // static topic's logic queue is resolved by its broker.
        if !crate::publish_info::is_logic_queue(mq) {
            req.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("lo"), "false");
        }
        let remoting_err = |source| ClientError::Remoting { topic: mq.topic.clone(), addr: addr.clone(), source };
        match mode {
            Mode::Oneway => {
                self.instance.remoting().invoke_oneway(&addr, req.into_oneway()).await.map_err(remoting_err)?;
                Ok(None)
            }
            Mode::Sync => {
                let started = (SystemTime::now(), Instant::now());
                let resp = self.instance.remoting().invoke(&addr, req, timeout).await.map_err(remoting_err)?;
                let result = process_send_response(&resp, &addr, mq, prepared.msg_id.clone())?;
                if let Some(tracer) = self.tracer.get() {
                    self.trace_send(tracer, prepared, &addr, &result, started);
                }
                Ok(Some(result))
            }
        }
    }
}

impl Producer {
    /// The `Pub` trace records of a sync send that got `result` (Java:
    /// `SendMessageTraceHookImpl`): one, or one per message of a batch with its own id and
    /// offset id (Java writes a batch as one record under the joined ids, which no id search
    /// finds; see docs/decisions/0023).
    fn trace_send(
        &self,
        tracer: &crate::trace::TraceDispatcher,
        prepared: &Prepared,
        addr: &str,
        result: &SendResult,
        (at, started): (SystemTime, Instant),
    ) {
        let single;
        let parts = if prepared.batch {
            &prepared.traced_parts[..]
        } else {
            let props = ferromq_protocol::message::MessageProperties::decode(&prepared.properties);
            single = [TracedPart {
                msg_id: result.msg_id.clone(),
                tags: props.get(keys::TAGS).map(str::to_owned),
                keys: props.get(keys::KEYS).map(str::to_owned),
                body_length: prepared.body.len(),
                msg_type: crate::trace::pub_msg_type(&props),
            }];
            &single[..]
        };
        let mut offset_ids = result.offset_msg_id.split(',');
        let timestamp = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let cost_time = started.elapsed().as_millis() as i64;
        for part in parts {
            tracer.append(ferromq_protocol::trace::TraceRecord::Pub(ferromq_protocol::trace::Pub {
                timestamp,
                region_id: result.region_id.clone(),
                group: self.config.group.clone(),
                topic: prepared.topic.clone(),
                msg_id: part.msg_id.clone(),
                tags: part.tags.clone(),
                keys: part.keys.clone(),
                store_host: addr.to_owned(),
                body_length: part.body_length as i64,
                cost_time,
                msg_type: part.msg_type,
                offset_msg_id: offset_ids.next().unwrap_or_default().to_owned(),
                success: result.status == crate::SendStatus::SendOk,
            }));
        }
    }
}

/// Whether `msg` is a transactional half message (`TRAN_MSG` parses as true, as Java's
/// `Boolean.parseBoolean` reads it).
fn is_prepared(msg: &Message) -> bool {
    msg.property(keys::TRAN_MSG).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Whether a sync send should try another queue after `e`.
fn retriable(e: &ClientError) -> bool {
    match e {
        ClientError::Remoting { .. } | ClientError::BrokerNotFound { .. } => true,
        ClientError::Broker { code, .. } => RETRY_CODES.contains(code),
        _ => false,
    }
}

fn compress(body: &[u8]) -> Result<Bytes, ClientError> {
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(COMPRESS_LEVEL));
    enc.write_all(body).map_err(ClientError::Compress)?;
    enc.finish().map(Bytes::from).map_err(ClientError::Compress)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_selector_is_stable_and_in_range() {
        let mqs: Vec<_> = (0..4).map(|q| MessageQueue::new("T", "b", q)).collect();
        let m = Message::new("T", "x");
        let a = select_by_hash("order-42")(&mqs, &m);
        assert_eq!(a, select_by_hash("order-42")(&mqs, &m));
        assert!(a < 4);
        assert_eq!(select_by_hash("k")(&[], &m), 0);
    }

    #[test]
    fn compression_round_trips_through_zlib() {
        let body = vec![7u8; 10_000];
        let z = compress(&body).unwrap();
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(&z[..]), &mut out).unwrap();
        assert_eq!(out, body);
    }
}
