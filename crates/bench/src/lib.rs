//! `ferromq bench`: a load generator that speaks only the RocketMQ remoting protocol, so it can
//! load any RocketMQ broker (FerroMQ's, Apache RocketMQ's, or another implementation).
//!
//! * `produce`: `in_flight` sender tasks over a few connections, each with one request
//!   outstanding, send SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE with `m=true`) round-robin
//!   over the topic's write queues of one master broker.
//! * `consume`: one long-polling PULL_MESSAGE loop per read queue, from the queues' max offset
//!   (or 0); end-to-end latency is receive time minus the message's born timestamp.
//! * `e2e`: both at once.
//!
//! Everything is bounded: run time, message count, requests in flight, message and batch size.
//! The route comes from GET_ROUTEINFO_BY_TOPIC on the name server; a missing topic is created
//! with UPDATE_AND_CREATE_TOPIC on the broker serving TBW102.

pub mod grpc;
pub mod histogram;
pub mod pop;
pub mod report;
pub mod unary;
pub mod visibility;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferromq_protocol::body::perm::PERM_READ_WRITE;
use ferromq_protocol::body::{JsonBody, TopicRouteData};
use ferromq_protocol::header::{
    pull_sys_flag, CreateTopicRequestHeader, GetMaxOffsetRequestHeader, GetRouteInfoRequestHeader,
    OffsetResponseHeader, PullMessageRequestHeader, PullMessageResponseHeader, SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
};
use ferromq_protocol::message::{encode_batch, keys, BatchEntry, MessageProperties, StoredMessage};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};

use crate::histogram::Histogram;
use crate::report::{ConsumeResult, Environment, ProduceResult, Report, RunConfig};

/// Upper bounds on the options.
pub mod limits {
    /// Requests in flight.
    pub const MAX_IN_FLIGHT: u32 = 1024;
    /// Connections.
    pub const MAX_CONNECTIONS: u32 = 64;
    /// Body bytes of one message, and of one batch request (the broker's default
    /// `maxMessageSize`).
    pub const MAX_REQUEST_BYTES: u32 = 4 * 1024 * 1024;
    /// Messages per batch.
    pub const MAX_BATCH: u32 = 1024;
    /// Run time in seconds.
    pub const MAX_DURATION_S: u64 = 24 * 3600;
    /// Queues when creating a topic.
    pub const MAX_QUEUES: u32 = 1024;
}

/// The default topic brokers auto-create from (Java: `TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`).
pub(crate) const TBW102: &str = "TBW102";

/// Errors that stop a run before it measures anything.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// An option is out of range.
    #[error("invalid option: {0}")]
    Invalid(String),
    /// The route or the topic could not be set up.
    #[error("setup failed: {0}")]
    Setup(String),
}

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Send only.
    Produce,
    /// Pull only.
    Consume,
    /// Send and pull at once.
    E2e,
    /// Pop (queue id -1, 32 per request) and acknowledge every message.
    Pop,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Produce => "produce",
            Mode::Consume => "consume",
            Mode::E2e => "e2e",
            Mode::Pop => "pop",
        }
    }
}

/// Options of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// What to run.
    pub mode: Mode,
    /// Name server address (`host:port`); used unless `broker` is set.
    pub namesrv: Option<String>,
    /// Broker address, skipping the name server (then `queues` gives the queue count).
    pub broker: Option<String>,
    /// Topic.
    pub topic: String,
    /// Sender tasks, each with one request in flight.
    pub in_flight: u32,
    /// Connections to the broker (senders share them round-robin).
    pub connections: u32,
    /// Body size in bytes.
    pub message_size: u32,
    /// Attach a KEYS property to every message.
    pub keys: bool,
    /// Dispatch every message to this many light queues (`INNER_MULTI_DISPATCH`; the broker
    /// needs `enableLmq` and `enableMultiDispatch`). 0: none.
    pub lmq_fanout: u32,
    /// The light queues targets are drawn from, in turn (`%LMQ%ferro-bench-<n>`), so a run
    /// of `count` messages creates up to `count * lmq_fanout` of them.
    pub lmq_queues: u64,
    /// Messages per request (1: SEND_MESSAGE_V2, more: SEND_BATCH_MESSAGE).
    pub batch: u32,
    /// Send oneway (no response; "acked" means written).
    pub oneway: bool,
    /// Stop after this many messages (0: only the time limit).
    pub count: u64,
    /// Time limit.
    pub duration: Duration,
    /// Consume from offset 0 instead of the queues' max.
    pub from_start: bool,
    /// Consumer group for pulls.
    pub group: String,
    /// Queues when creating the topic, or when the route is unknown (`broker` set).
    pub queues: u32,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Print a progress line on stderr every second.
    pub progress: bool,
    /// Pop mode: acknowledge each pop's messages with one BATCH_ACK_MESSAGE instead of one
    /// ACK_MESSAGE per message.
    pub pop_batch_ack: bool,
    /// Connect with TLS (to name server and broker) as this says; `None`: plaintext.
    pub tls: Option<ferromq_remoting::tls::ClientTls>,
    /// Sign every request with these (brokers with ACL on); `None`: unsigned.
    pub credentials: Option<ferromq_protocol::signature::SessionCredentials>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::Produce,
            namesrv: Some("127.0.0.1:9876".into()),
            broker: None,
            topic: "FerroBench".into(),
            in_flight: 64,
            connections: 4,
            message_size: 128,
            keys: false,
            lmq_fanout: 0,
            lmq_queues: 1000,
            batch: 1,
            oneway: false,
            count: 0,
            duration: Duration::from_secs(10),
            from_start: false,
            group: "ferro_bench_consumer".into(),
            queues: 8,
            timeout: Duration::from_secs(3),
            progress: true,
            pop_batch_ack: false,
            tls: None,
            credentials: None,
        }
    }
}

impl Options {
    /// The transport settings of the run's connections.
    pub fn client_config(&self) -> ClientConfig {
        ClientConfig::default().with_tls(self.tls.clone()).with_credentials(self.credentials.clone())
    }

    /// Checks every bound.
    ///
    /// # Errors
    /// [`BenchError::Invalid`] naming the first option out of range.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Invalid(m));
        if self.namesrv.is_none() && self.broker.is_none() {
            return bad("give a name server (-n) or a broker (--broker)".into());
        }
        if self.in_flight == 0 || self.in_flight > limits::MAX_IN_FLIGHT {
            return bad(format!("-w must be 1..={}", limits::MAX_IN_FLIGHT));
        }
        if self.connections == 0 || self.connections > limits::MAX_CONNECTIONS {
            return bad(format!("--connections must be 1..={}", limits::MAX_CONNECTIONS));
        }
        if self.batch == 0 || self.batch > limits::MAX_BATCH {
            return bad(format!("-b must be 1..={}", limits::MAX_BATCH));
        }
        if u64::from(self.message_size) * u64::from(self.batch) > u64::from(limits::MAX_REQUEST_BYTES) {
            return bad(format!("-s times -b must be at most {} bytes", limits::MAX_REQUEST_BYTES));
        }
        if self.duration.is_zero() || self.duration.as_secs() > limits::MAX_DURATION_S {
            return bad(format!("--duration must be 1..={} s", limits::MAX_DURATION_S));
        }
        if self.queues == 0 || self.queues > limits::MAX_QUEUES {
            return bad(format!("--queues must be 1..={}", limits::MAX_QUEUES));
        }
        if self.topic.is_empty() || self.topic.len() > 127 {
            return bad("-t must be 1..=127 bytes".into());
        }
        if self.timeout.is_zero() || self.timeout > Duration::from_secs(60) {
            return bad("--timeout-ms must be 1..=60000".into());
        }
        Ok(())
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The broker and queues a run uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The master broker's address.
    pub broker_addr: String,
    /// Its broker name.
    pub broker_name: Option<String>,
    /// Write queues of the topic on that broker.
    pub write_queues: u32,
    /// Read queues of the topic on that broker.
    pub read_queues: u32,
}

async fn route(
    client: &RemotingClient,
    namesrv: &str,
    topic: &str,
    timeout: Duration,
) -> Result<Option<TopicRouteData>, String> {
    let h = GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: Some(true) };
    let req = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(&h);
    let resp = client.invoke(namesrv, req, timeout).await.map_err(|e| format!("name server {namesrv}: {e}"))?;
    match resp.code {
        response_code::SUCCESS => {
            TopicRouteData::decode(&resp.body).map(Some).map_err(|e| format!("route of {topic}: {e}"))
        }
        response_code::TOPIC_NOT_EXIST => Ok(None),
        // A broker answers a name-server request so.
        response_code::REQUEST_CODE_NOT_SUPPORTED => Err(format!(
            "{namesrv} does not serve routes: -n wants a name server (port 9876 by default), and this looks like \
             a broker; give -n the name server, or --broker {namesrv} to send to this broker directly"
        )),
        c => Err(format!("route of {topic}: code {c} {}", resp.remark.unwrap_or_default())),
    }
}

/// The first broker group with a master, and the topic's queues on it.
fn target_of(route: &TopicRouteData) -> Option<Target> {
    route.broker_datas.iter().find_map(|b| {
        let addr = b.master_addr()?;
        let q = route.queue_datas.iter().find(|q| q.broker_name == b.broker_name)?;
        Some(Target {
            broker_addr: addr.to_string(),
            broker_name: Some(b.broker_name.clone()),
            write_queues: q.write_queue_nums.max(0) as u32,
            read_queues: q.read_queue_nums.max(0) as u32,
        })
    })
}

/// Finds the master broker and queues of the topic, creating the topic (on the broker that
/// serves TBW102) if the name server does not know it.
///
/// # Errors
/// [`BenchError::Setup`] when no broker can be found or the topic cannot be created.
pub async fn resolve(client: &RemotingClient, opts: &Options) -> Result<Target, BenchError> {
    let setup = BenchError::Setup;
    let Some(namesrv) = opts.namesrv.as_deref().filter(|_| opts.broker.is_none()) else {
        let addr = opts.broker.clone().unwrap_or_default();
        return Ok(Target {
            broker_addr: addr,
            broker_name: None,
            write_queues: opts.queues,
            read_queues: opts.queues,
        });
    };
    if let Some(t) =
        route(client, namesrv, &opts.topic, opts.timeout).await.map_err(setup)?.as_ref().and_then(target_of)
    {
        if t.write_queues > 0 {
            return Ok(t);
        }
    }
    let default = route(client, namesrv, TBW102, opts.timeout)
        .await
        .map_err(setup)?
        .as_ref()
        .and_then(target_of)
        .ok_or_else(|| setup(format!("topic {} does not exist and no broker serves {TBW102}", opts.topic)))?;
    let h = CreateTopicRequestHeader {
        topic: opts.topic.clone(),
        default_topic: TBW102.into(),
        read_queue_nums: opts.queues as i32,
        write_queue_nums: opts.queues as i32,
        perm: PERM_READ_WRITE,
        topic_filter_type: "SINGLE_TAG".into(),
        ..Default::default()
    };
    let req = RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC).with_header(&h);
    let resp = client
        .invoke(&default.broker_addr, req, opts.timeout)
        .await
        .map_err(|e| setup(format!("create topic on {}: {e}", default.broker_addr)))?;
    if resp.code != response_code::SUCCESS {
        return Err(setup(format!("create topic: code {} {}", resp.code, resp.remark.unwrap_or_default())));
    }
    // The broker registers the new topic with the name server; wait a little for the route.
    for _ in 0..20 {
        if let Ok(Some(t)) =
            route(client, namesrv, &opts.topic, opts.timeout).await.map(|r| r.as_ref().and_then(target_of))
        {
            if t.write_queues > 0 {
                return Ok(t);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Target { write_queues: opts.queues, read_queues: opts.queues, ..default })
}

/// Live counters shared by the tasks and the progress line.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    issued: AtomicU64,
    acked: AtomicU64,
    failed: AtomicU64,
    pub(crate) consumed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Counters {
    pub(crate) fn error(&self, e: String) {
        let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
        if first.is_none() {
            *first = Some(e);
        }
    }

    fn take_error(&self) -> Option<String> {
        self.first_error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Takes up to `want` messages from the count budget; 0 when it is spent.
fn take_budget(issued: &AtomicU64, limit: u64, want: u64) -> u64 {
    let before = issued.fetch_add(want, Ordering::Relaxed);
    if limit == 0 {
        want
    } else {
        want.min(limit.saturating_sub(before))
    }
}

struct Sender {
    client: Arc<RemotingClient>,
    target: Arc<Target>,
    opts: Arc<Options>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    body: Bytes,
    index: u32,
}

#[derive(Debug, Default)]
struct SenderResult {
    sent: u64,
    acked: u64,
    failed: u64,
    requests: u64,
    bytes: u64,
    latency: Histogram,
}

fn properties(opts: &Options, seq: u64, index: u32) -> String {
    let mut p = MessageProperties::new();
    if opts.keys {
        p.insert(keys::KEYS, format!("ferro-bench-{index}-{seq}"));
    }
    if opts.lmq_fanout > 0 {
        p.insert(keys::INNER_MULTI_DISPATCH, light_queue_targets(opts, seq, index));
    }
    p.insert(keys::WAIT, "true");
    p.encode()
}

/// `lmq_fanout` light queue names for message `seq` of sender `index`: consecutive names of
/// the pool, each message starting where the sender's previous one stopped (senders start
/// spread over the pool), so every queue of the pool is used before any is used twice by one
/// sender.
fn light_queue_targets(opts: &Options, seq: u64, index: u32) -> String {
    let pool = opts.lmq_queues.max(u64::from(opts.lmq_fanout)).max(1);
    let fanout = u64::from(opts.lmq_fanout);
    let start = (seq * fanout + u64::from(index) * (pool / u64::from(opts.in_flight.max(1)))) % pool;
    let mut names = String::with_capacity(opts.lmq_fanout as usize * 24);
    for i in 0..fanout {
        if i > 0 {
            names.push(',');
        }
        names.push_str("%LMQ%ferro-bench-");
        names.push_str(&((start + i) % pool).to_string());
    }
    names
}

impl Sender {
    async fn run(self) -> SenderResult {
        let mut r = SenderResult::default();
        let opts = &self.opts;
        let queues = self.target.write_queues.max(1);
        let mut seq = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            let n = take_budget(&self.counters.issued, opts.count, u64::from(opts.batch));
            if n == 0 {
                break;
            }
            let queue_id = ((u64::from(self.index) + r.requests) % u64::from(queues)) as i32;
            let mut header = SendMessageRequestHeader {
                producer_group: "ferro_bench_producer".into(),
                topic: opts.topic.clone(),
                default_topic: TBW102.into(),
                default_topic_queue_nums: opts.queues as i32,
                queue_id,
                born_timestamp: now_ms() as i64,
                broker_name: self.target.broker_name.clone(),
                ..Default::default()
            };
            let req = if opts.batch == 1 {
                header.properties = Some(properties(opts, seq, self.index));
                seq += 1;
                let h: SendMessageRequestHeaderV2 = header.into();
                RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&h).with_body(self.body.clone())
            } else {
                let entries: Vec<BatchEntry> = (0..n)
                    .map(|_| {
                        seq += 1;
                        BatchEntry { flag: 0, body: self.body.clone(), properties: properties(opts, seq, self.index) }
                    })
                    .collect();
                let body = match encode_batch(&entries) {
                    Ok(b) => b.freeze(),
                    Err(e) => {
                        self.counters.error(format!("encode batch: {e}"));
                        r.sent += n;
                        r.failed += n;
                        self.counters.failed.fetch_add(n, Ordering::Relaxed);
                        break;
                    }
                };
                header.batch = Some(true);
                let h: SendMessageRequestHeaderV2 = header.into();
                RemotingCommand::request(request_code::SEND_BATCH_MESSAGE).with_header(&h).with_body(body)
            };
            let addr = &self.target.broker_addr;
            let started = Instant::now();
            let outcome = if opts.oneway {
                self.client.invoke_oneway(addr, req).await.map_err(|e| e.to_string())
            } else {
                match self.client.invoke(addr, req, opts.timeout).await {
                    Ok(resp) if resp.code == response_code::SUCCESS => Ok(()),
                    Ok(resp) => Err(format!("send: code {} {}", resp.code, resp.remark.unwrap_or_default())),
                    Err(e) => Err(format!("send: {e}")),
                }
            };
            let latency = started.elapsed();
            r.requests += 1;
            r.sent += n;
            match outcome {
                Ok(()) => {
                    r.latency.record(latency.as_micros() as u64);
                    r.acked += n;
                    r.bytes += n * self.body.len() as u64;
                    self.counters.acked.fetch_add(n, Ordering::Relaxed);
                }
                Err(e) => {
                    r.failed += n;
                    self.counters.failed.fetch_add(n, Ordering::Relaxed);
                    self.counters.error(e);
                    // Do not spin on a dead broker.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
        r
    }
}

async fn produce(
    clients: &[Arc<RemotingClient>],
    target: Arc<Target>,
    opts: Arc<Options>,
    counters: Arc<Counters>,
) -> ProduceResult {
    let stop = Arc::new(AtomicBool::new(false));
    let body = Bytes::from(vec![b'x'; opts.message_size as usize]);
    let mut tasks = tokio::task::JoinSet::new();
    let started = Instant::now();
    for index in 0..opts.in_flight {
        let s = Sender {
            client: clients[index as usize % clients.len()].clone(),
            target: target.clone(),
            opts: opts.clone(),
            counters: counters.clone(),
            stop: stop.clone(),
            body: body.clone(),
            index,
        };
        tasks.spawn(s.run());
    }
    let mut results = Vec::new();
    let deadline = tokio::time::sleep(opts.duration);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            joined = tasks.join_next() => match joined {
                Some(r) => results.push(r),
                None => break,
            },
            () = &mut deadline, if !stop.load(Ordering::Relaxed) => stop.store(true, Ordering::Relaxed),
        }
    }
    let elapsed = started.elapsed();
    let mut total = SenderResult::default();
    for r in results {
        match r {
            Ok(r) => {
                total.sent += r.sent;
                total.acked += r.acked;
                total.failed += r.failed;
                total.requests += r.requests;
                total.bytes += r.bytes;
                total.latency.merge(&r.latency);
            }
            Err(e) => counters.error(format!("sender task: {e}")),
        }
    }
    ProduceResult::new(
        elapsed,
        total.sent,
        total.acked,
        total.failed,
        total.requests,
        total.bytes,
        &total.latency,
        counters.take_error(),
    )
}

#[derive(Debug, Default)]
pub(crate) struct PullerResult {
    pub(crate) consumed: u64,
    pub(crate) bytes: u64,
    pub(crate) errors: u64,
    pub(crate) latency: Histogram,
    /// When the last message arrived.
    pub(crate) last_received: Option<Instant>,
}

async fn max_offset(client: &RemotingClient, target: &Target, opts: &Options, queue_id: i32) -> Result<i64, String> {
    let h = GetMaxOffsetRequestHeader {
        topic: opts.topic.clone(),
        queue_id,
        broker_name: target.broker_name.clone(),
        lo: ferromq_protocol::body::static_topic::PHYSICAL_QUEUE,
        ..Default::default()
    };
    let req = RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&h);
    let resp = client.invoke(&target.broker_addr, req, opts.timeout).await.map_err(|e| format!("max offset: {e}"))?;
    if resp.code != response_code::SUCCESS {
        return Err(format!("max offset of queue {queue_id}: code {} {}", resp.code, resp.remark.unwrap_or_default()));
    }
    resp.decode_header::<OffsetResponseHeader>().map(|h| h.offset).map_err(|e| format!("max offset: {e}"))
}

#[allow(clippy::too_many_arguments)]
async fn pull_queue(
    client: Arc<RemotingClient>,
    target: Arc<Target>,
    opts: Arc<Options>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    queue_id: i32,
    mut offset: i64,
) -> PullerResult {
    let mut r = PullerResult::default();
    while !stop.load(Ordering::Relaxed) {
        let h = PullMessageRequestHeader {
            consumer_group: opts.group.clone(),
            topic: opts.topic.clone(),
            queue_id,
            queue_offset: offset,
            max_msg_nums: 32,
            // SUBSCRIPTION: the broker takes the expression from the request, so no consumer
            // heartbeat is needed.
            sys_flag: pull_sys_flag::SUSPEND | pull_sys_flag::SUBSCRIPTION,
            subscription: Some("*".into()),
            expression_type: Some("TAG".into()),
            commit_offset: 0,
            suspend_timeout_millis: 500,
            sub_version: 0,
            broker_name: target.broker_name.clone(),
            lo: ferromq_protocol::body::static_topic::PHYSICAL_QUEUE,
            ..Default::default()
        };
        let req = RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&h);
        let resp = match client.invoke(&target.broker_addr, req, opts.timeout + Duration::from_millis(500)).await {
            Ok(resp) => resp,
            Err(e) => {
                r.errors += 1;
                counters.error(format!("pull queue {queue_id}: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let next = resp.decode_header::<PullMessageResponseHeader>().map(|h| h.next_begin_offset);
        match resp.code {
            response_code::SUCCESS => {
                let now = now_ms() as i64;
                match StoredMessage::decode_all(&resp.body) {
                    Ok(msgs) => {
                        let mut n = 0u64;
                        for m in &msgs {
                            n += 1;
                            r.bytes += m.body.len() as u64;
                            r.latency.record(now.saturating_sub(m.born_timestamp_ms).max(0) as u64);
                            offset = offset.max(m.queue_offset + 1);
                        }
                        r.consumed += n;
                        if n > 0 {
                            r.last_received = Some(Instant::now());
                        }
                        counters.consumed.fetch_add(n, Ordering::Relaxed);
                    }
                    Err(e) => {
                        r.errors += 1;
                        counters.error(format!("pull queue {queue_id}: bad body: {e}"));
                    }
                }
                if let Ok(next) = next {
                    offset = offset.max(next);
                }
            }
            response_code::PULL_NOT_FOUND
            | response_code::PULL_RETRY_IMMEDIATELY
            | response_code::PULL_OFFSET_MOVED => {
                if let Ok(next) = next {
                    offset = next;
                }
                if resp.code != response_code::PULL_NOT_FOUND {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            c => {
                r.errors += 1;
                counters.error(format!("pull queue {queue_id}: code {c} {}", resp.remark.unwrap_or_default()));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        if opts.count > 0 && counters.consumed.load(Ordering::Relaxed) >= opts.count {
            stop.store(true, Ordering::Relaxed);
        }
    }
    r
}

/// Pulls every read queue until `deadline` fires and, if `producer_done` is given, the
/// producer has finished and everything it acked has arrived (or a 5 s grace has passed).
async fn consume(
    clients: &[Arc<RemotingClient>],
    target: Arc<Target>,
    opts: Arc<Options>,
    counters: Arc<Counters>,
    producer_done: Option<Arc<AtomicBool>>,
) -> ConsumeResult {
    let queues = target.read_queues.max(1);
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    let mut pull_errors = 0;
    if opts.mode == Mode::Pop {
        // Pops are not per queue: `in_flight` poppers, each with one pop (and its acks) out.
        for w in 0..opts.in_flight as usize {
            let client = clients[w % clients.len()].clone();
            tasks.spawn(pop::pop_worker(client, target.clone(), opts.clone(), counters.clone(), stop.clone()));
        }
    }
    for q in (0..queues as i32).filter(|_| opts.mode != Mode::Pop) {
        let client = clients[q as usize % clients.len()].clone();
        let start = if opts.from_start {
            0
        } else {
            match max_offset(&client, &target, &opts, q).await {
                Ok(o) => o,
                Err(e) => {
                    // A topic that was just created may not have the queue yet.
                    counters.error(e);
                    pull_errors += 1;
                    0
                }
            }
        };
        tasks.spawn(pull_queue(client, target.clone(), opts.clone(), counters.clone(), stop.clone(), q, start));
    }
    let started = Instant::now();
    let hard_limit = opts.duration + if producer_done.is_some() { Duration::from_secs(5) } else { Duration::ZERO };
    while !stop.load(Ordering::Relaxed) && started.elapsed() < hard_limit {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if let Some(done) = &producer_done {
            if done.load(Ordering::Relaxed)
                && counters.consumed.load(Ordering::Relaxed) >= counters.acked.load(Ordering::Relaxed)
            {
                break;
            }
        } else if started.elapsed() >= opts.duration {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = PullerResult { errors: pull_errors, ..Default::default() };
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(r) => {
                total.consumed += r.consumed;
                total.bytes += r.bytes;
                total.errors += r.errors;
                total.latency.merge(&r.latency);
                total.last_received = total.last_received.max(r.last_received);
            }
            Err(e) => counters.error(format!("puller task: {e}")),
        }
    }
    // The rate counts the time messages were arriving: a backlog drained in 2 s of a 10 s
    // run is read at its real speed, not at a fifth of it.
    let elapsed = match (producer_done.is_some(), total.last_received) {
        (false, Some(last)) => last.duration_since(started).max(Duration::from_millis(1)),
        _ => started.elapsed(),
    };
    ConsumeResult {
        elapsed_s: elapsed.as_secs_f64(),
        queues,
        consumed: total.consumed,
        bytes: total.bytes,
        pull_errors: total.errors,
        msgs_per_s: report::per_second(total.consumed, elapsed),
        mb_per_s: report::mb_per_second(total.bytes, elapsed),
        e2e_latency_ms: total.latency.summary(),
        first_error: counters.take_error(),
    }
}

async fn progress(counters: Arc<Counters>, done: Arc<AtomicBool>) {
    let started = Instant::now();
    let (mut last_acked, mut last_consumed) = (0, 0);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let mut printed = false;
    while !done.load(Ordering::Relaxed) {
        tick.tick().await;
        if done.load(Ordering::Relaxed) {
            break;
        }
        let acked = counters.acked.load(Ordering::Relaxed);
        let failed = counters.failed.load(Ordering::Relaxed);
        let consumed = counters.consumed.load(Ordering::Relaxed);
        eprint!(
            "\r[{:>4}s] acked {acked} ({}/s) failed {failed} consumed {consumed} ({}/s)   ",
            started.elapsed().as_secs(),
            acked - last_acked,
            consumed - last_consumed
        );
        printed = true;
        (last_acked, last_consumed) = (acked, consumed);
    }
    if printed {
        eprintln!();
    }
}

/// Runs a benchmark and returns its report.
///
/// # Errors
/// Invalid options, or no broker/topic could be set up. Failures during the run are counted
/// in the report instead.
pub async fn run(opts: Options, command_line: Vec<String>) -> Result<Report, BenchError> {
    opts.validate()?;
    let environment = Environment::collect(command_line);
    let clients: Vec<Arc<RemotingClient>> =
        (0..opts.connections).map(|_| Arc::new(RemotingClient::new(opts.client_config()))).collect();
    let result = run_with(&clients, opts, environment).await;
    for c in clients {
        c.shutdown().await;
    }
    result
}

async fn run_with(
    clients: &[Arc<RemotingClient>],
    opts: Options,
    environment: Environment,
) -> Result<Report, BenchError> {
    let target = Arc::new(resolve(&clients[0], &opts).await?);
    if target.write_queues == 0 && !matches!(opts.mode, Mode::Consume | Mode::Pop) {
        return Err(BenchError::Setup(format!("topic {} has no write queues", opts.topic)));
    }
    let config = RunConfig {
        mode: opts.mode.name().into(),
        namesrv: opts.namesrv.clone().filter(|_| opts.broker.is_none()),
        broker: target.broker_addr.clone(),
        topic: opts.topic.clone(),
        queues: target.write_queues,
        in_flight: opts.in_flight,
        connections: opts.connections,
        message_size: opts.message_size,
        batch: opts.batch,
        keys: opts.keys,
        lmq_fanout: opts.lmq_fanout,
        lmq_queues: if opts.lmq_fanout > 0 { opts.lmq_queues } else { 0 },
        oneway: opts.oneway,
        count_limit: opts.count,
        duration_s: opts.duration.as_secs(),
        from_start: opts.from_start,
        tls: opts.tls.is_some(),
    };
    let opts = Arc::new(opts);
    let counters = Arc::new(Counters::default());
    let done = Arc::new(AtomicBool::new(false));
    let progress_task = opts.progress.then(|| tokio::spawn(progress(counters.clone(), done.clone())));
    let (produce_result, consume_result) = match opts.mode {
        Mode::Produce => (Some(produce(clients, target, opts.clone(), counters).await), None),
        Mode::Consume | Mode::Pop => (None, Some(consume(clients, target, opts.clone(), counters, None).await)),
        Mode::E2e => {
            let producer_done = Arc::new(AtomicBool::new(false));
            let consumer = tokio::spawn({
                let clients = clients.to_vec();
                let (target, opts, counters, producer_done) =
                    (target.clone(), opts.clone(), counters.clone(), producer_done.clone());
                async move { consume(&clients, target, opts, counters, Some(producer_done)).await }
            });
            // Let the pullers read their start offsets before sending.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let p = produce(clients, target, opts.clone(), counters.clone()).await;
            producer_done.store(true, Ordering::Relaxed);
            let c = consumer.await.map_err(|e| BenchError::Setup(format!("consumer task: {e}")))?;
            (Some(p), Some(c))
        }
    };
    done.store(true, Ordering::Relaxed);
    if let Some(t) = progress_task {
        let _ = t.await;
    }
    Ok(Report { tool: "ferromq bench".into(), environment, config, produce: produce_result, consume: consume_result })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_exact_at_the_limit() {
        let issued = AtomicU64::new(0);
        assert_eq!(take_budget(&issued, 70, 32), 32);
        assert_eq!(take_budget(&issued, 70, 32), 32);
        assert_eq!(take_budget(&issued, 70, 32), 6);
        assert_eq!(take_budget(&issued, 70, 32), 0);
        let unlimited = AtomicU64::new(0);
        assert_eq!(take_budget(&unlimited, 0, 5), 5);
    }

    #[test]
    fn options_are_bounded() {
        assert!(Options::default().validate().is_ok());
        let bad = [
            Options { in_flight: 0, ..Options::default() },
            Options { in_flight: limits::MAX_IN_FLIGHT + 1, ..Options::default() },
            Options { batch: 0, ..Options::default() },
            Options { message_size: 1 << 20, batch: 8, ..Options::default() },
            Options { duration: Duration::ZERO, ..Options::default() },
            Options { namesrv: None, broker: None, ..Options::default() },
            Options { topic: String::new(), ..Options::default() },
        ];
        for o in bad {
            assert!(o.validate().is_err(), "{o:?}");
        }
    }

    #[test]
    fn target_prefers_a_master_with_queues() {
        let json = br#"{"brokerDatas":[{"brokerAddrs":{"1":"10.0.0.2:10911"},"brokerName":"b"},
            {"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"a","cluster":"c"}],
            "queueDatas":[{"brokerName":"a","perm":6,"readQueueNums":4,"writeQueueNums":8,"topicSysFlag":0}]}"#;
        let route = TopicRouteData::decode(json).unwrap();
        let t = target_of(&route).unwrap();
        assert_eq!(t.broker_addr, "10.0.0.1:10911");
        assert_eq!((t.write_queues, t.read_queues), (8, 4));
    }
}
