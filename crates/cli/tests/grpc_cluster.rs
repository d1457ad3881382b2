//! The gRPC proxy in cluster mode as real processes: `ferromq namesrv`, two broker groups
//! (`ferromq broker`, broker-a and broker-b) and `ferromq proxy -n .. -c proxy.json` in front
//! of them, driven by a tonic client as the 5.x SDKs drive a proxy.
//!
//! Routes name both brokers' queues at the proxy's address; sends spread over both brokers and
//! a simple consumer receives and acks them all (the proxy with `enableBatchAck`: each AckMessage
//! becomes BATCH_ACK_MESSAGE to the handle's broker). Then broker-b is killed (SIGKILL) while the
//! consumer holds unacknowledged messages: sends (with the one retry a 5.x client makes) must
//! still succeed on broker-a, the consumer keeps receiving broker-a's messages, and once
//! broker-b is restarted on its own store every message whose send was acknowledged is
//! received, broker-b's included. The proxy serves throughout. Every wait is bounded.
//!
//! The proxy caches routes (`topicRouteServiceCacheRefreshSeconds`, 20 s). So that the kill
//! does not fall, by chance, just before a refresh (which would hide whether sends avoid a dead
//! broker), broker-a's queue count is changed first and broker-b is killed as soon as
//! QueryRoute shows the change: the proxy has just re-read the route, and its cached route
//! names broker-b, dead, for most of the next 20 s.
//!
//! The behavioural checks are collected and reported together at the end, so one failure does
//! not hide the others. `FERROMQ_TEST_LOGS=1` shows the servers' output (`RUST_LOG` too).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::process::Command;
use std::time::{Duration, Instant};

use ferromq_protocol::body::{JsonBody, TopicRouteData};
use ferromq_protocol::header::GetRouteInfoRequestHeader;
use ferromq_protocol::pop::ExtraInfo;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_proxy::pb::{self, ClientType, Code};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{free_port, ChildProcess};
use tokio_stream::StreamExt;

mod common;
use common::cluster::{
    port_away_from, spawn_listening, start_brokers, start_namesrv, start_on_free_port, tail, Broker,
};
use common::grpc::{
    ack_entry, code, connect, consumer_settings, message_id, producer_settings, req, res, telemetry, Client, Telemetry,
    RPC_TIMEOUT,
};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
const TOPIC: &str = "GrpcClusterT";
const GROUP: &str = "GrpcClusterG";
const BROKER_A: &str = "broker-a";
const BROKER_B: &str = "broker-b";
/// Messages of the first round (spread over both brokers).
const FIRST: usize = 16;
/// broker-a's queue count after it grows, before the fault.
const GROWN: usize = 6;
/// Messages sent before the fault, some of them held unacknowledged when broker-b dies.
const BEFORE_FAULT: usize = 16;
/// Messages sent while broker-b is down, and the pause between two of them.
const DURING_FAULT: usize = 30;
const SEND_PAUSE: Duration = Duration::from_millis(200);
/// Sends made after the kill before the consumer receives again (more than one per queue).
const SENDS_BEFORE_RECEIVING: usize = 12;
/// The invisible time of every receive (the proxy's minimum, minInvisibleTimeMillsForRecv).
const INVISIBLE_S: i64 = 10;
/// The bound of one unary RPC, and of one receive (5 s of long polling and the answer).
const RECEIVE_TIMEOUT: Duration = Duration::from_secs(25);

struct Cluster {
    dir: tempfile::TempDir,
    namesrv: String,
    _namesrv_process: ChildProcess,
    brokers: [Broker; 2],
    proxy: ChildProcess,
    grpc_port: u16,
    remoting: RemotingClient,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().to_owned();
        let (namesrv_process, ns_port) = start_namesrv(&path);
        let namesrv = format!("127.0.0.1:{ns_port}");
        let mut taken = vec![ns_port];
        let brokers = start_brokers(&path, &namesrv, [BROKER_A, BROKER_B], "", &mut taken);
        let (proxy, grpc_port) = start_on_free_port(
            || port_away_from(&taken, free_port),
            |port| {
                // gRPC only: remotingListenPort 0; on loopback only (bindAddress).
                let json = format!(
                    "{{\n  \"rocketMQClusterName\": \"DefaultCluster\",\n  \"grpcServerPort\": {port},\n  \
                     \"remotingListenPort\": 0,\n  \"tls.server.mode\": \"disabled\",\n  \"enableBatchAck\": true,\n  \
                     \"bindAddress\": \"127.0.0.1\"\n}}\n"
                );
                let conf = path.join("rmq-proxy.json");
                spawn_listening(&["proxy", "-n", &namesrv], &conf, &json, &path.join("proxy.log"), port)
            },
        );
        Cluster {
            dir,
            namesrv,
            _namesrv_process: namesrv_process,
            brokers,
            proxy,
            grpc_port,
            remoting: RemotingClient::new(ClientConfig::default()),
        }
    }

    fn grpc_addr(&self) -> String {
        format!("127.0.0.1:{}", self.grpc_port)
    }

    fn broker_b(&mut self) -> &mut Broker {
        &mut self.brokers[1]
    }

    fn proxy_running(&mut self) -> bool {
        matches!(self.proxy.0.try_wait(), Ok(None))
    }

    /// The tails of the servers' logs, for failure messages.
    fn logs(&self) -> String {
        ["namesrv", BROKER_A, BROKER_B, "proxy"]
            .iter()
            .map(|name| format!("--- {name}.log:\n{}\n", tail(&self.dir.path().join(format!("{name}.log")), 30)))
            .collect()
    }

    /// The name server's route of `topic`, if it has one.
    async fn namesrv_route(&self, topic: &str) -> Option<TopicRouteData> {
        let req = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)
            .with_header(&GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: Some(true) });
        let r = self.remoting.invoke(&self.namesrv, req, Duration::from_secs(3)).await.ok()?;
        (r.code == response_code::SUCCESS).then(|| TopicRouteData::decode(&r.body).ok()).flatten()
    }

    /// Waits until the name server routes `topic` to exactly the masters `want`.
    async fn wait_namesrv_route(&self, topic: &str, want: &[&str], timeout: Duration) {
        let want: BTreeSet<String> = want.iter().map(|s| (*s).to_owned()).collect();
        let deadline = Instant::now() + timeout;
        loop {
            let have: BTreeSet<String> = self
                .namesrv_route(topic)
                .await
                .map(|r| {
                    r.broker_datas.iter().filter(|b| b.master_addr().is_some()).map(|b| b.broker_name.clone()).collect()
                })
                .unwrap_or_default();
            if have == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the name server routes {topic} to {have:?}, not {want:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `admin updateTopic -c DefaultCluster`, repeated until both brokers have created the
    /// topic (each one that has registered is addressed; the command is idempotent).
    fn create_topic(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = Command::new(BIN)
                .args(["admin", "updateTopic", "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4"])
                .args(["-a", "+message.type=NORMAL", "-n", &self.namesrv])
                .output()
                .expect("admin runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let created =
                stdout.lines().filter(|l| l.starts_with("create topic to") && l.ends_with("success.")).count();
            if out.status.success() && created == 2 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "updateTopic never reached both brokers: {stdout}{}\n{}",
                String::from_utf8_lossy(&out.stderr),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// `admin updateTopic -b broker-a`: the topic gets `queues` read and write queues there.
    fn grow_topic_on_broker_a(&self, queues: usize) {
        let n = queues.to_string();
        let broker = self.brokers[0].addr();
        let out = Command::new(BIN)
            .args(["admin", "updateTopic", "-b", &broker, "-t", TOPIC, "-r", &n, "-w", &n, "-n", &self.namesrv])
            .output()
            .expect("admin runs");
        assert!(out.status.success(), "updateTopic -b {broker}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

// ------------------------------------------------------------------------------- gRPC calls

async fn bounded<T, E: std::fmt::Display>(
    what: &str,
    limit: Duration,
    call: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: no answer within {limit:?}")),
    }
}

fn describe(s: &Option<pb::Status>) -> String {
    s.as_ref().map_or_else(|| "no status".to_owned(), |s| format!("{:?} {:?}", code(&Some(s.clone())), s.message))
}

fn endpoints(host: &str, port: u16) -> pb::Endpoints {
    pb::Endpoints {
        scheme: pb::AddressScheme::IPv4 as i32,
        addresses: vec![pb::Address { host: host.to_owned(), port: i32::from(port) }],
    }
}

fn body_of(n: usize) -> Vec<u8> {
    format!("grpc-cluster-{n}").into_bytes()
}

fn message(id: &str, n: usize) -> pb::Message {
    pb::Message {
        topic: res(TOPIC),
        user_properties: [("seq".to_owned(), n.to_string())].into(),
        system_properties: Some(pb::SystemProperties {
            tag: Some("TagA".into()),
            keys: vec![format!("key-{n}")],
            message_id: id.to_owned(),
            body_encoding: pb::Encoding::Identity as i32,
            message_type: pb::MessageType::Normal as i32,
            born_timestamp: Some(prost_types::Timestamp { seconds: 1_700_000_000, nanos: 0 }),
            born_host: "127.0.0.1".into(),
            ..Default::default()
        }),
        body: body_of(n),
    }
}

/// One SendMessage of one message; the entry if the proxy answered OK.
async fn send_once(client: &mut Client, id: &str, n: usize) -> Result<pb::SendResultEntry, String> {
    let request = req("gc-producer", pb::SendMessageRequest { messages: vec![message(id, n)] });
    let r = bounded("SendMessage", RPC_TIMEOUT, client.send_message(request)).await?.into_inner();
    match (code(&r.status), r.entries.first()) {
        (Code::Ok, Some(e)) if code(&e.status) == Code::Ok => Ok(e.clone()),
        _ => Err(describe(&r.status)),
    }
}

/// A send as a 5.x client makes it: a failed attempt is tried once more. The errors of the
/// failed attempts come with the outcome.
async fn send_retrying(client: &mut Client, id: &str, n: usize) -> (Result<pb::SendResultEntry, String>, Vec<String>) {
    let mut errors = Vec::new();
    for _ in 0..2 {
        match send_once(client, id, n).await {
            Ok(e) => return (Ok(e), errors),
            Err(e) => errors.push(e),
        }
    }
    (Err(errors.last().cloned().unwrap_or_default()), errors)
}

async fn query_route(client: &mut Client, e: &pb::Endpoints) -> Result<Vec<pb::MessageQueue>, String> {
    let request = req("gc-route", pb::QueryRouteRequest { topic: res(TOPIC), endpoints: Some(e.clone()) });
    let r = bounded("QueryRoute", RPC_TIMEOUT, client.query_route(request)).await?.into_inner();
    if code(&r.status) != Code::Ok {
        return Err(describe(&r.status));
    }
    Ok(r.message_queues)
}

fn broker_of_queue(q: &pb::MessageQueue) -> &str {
    q.broker.as_ref().map_or("", |b| b.name.as_str())
}

/// Waits until QueryRoute answers exactly `want` (broker name, queue count); the last answer
/// as the error otherwise.
async fn wait_proxy_route(
    client: &mut Client,
    e: &pb::Endpoints,
    want: &[(&str, usize)],
    deadline: Instant,
) -> Result<Vec<pb::MessageQueue>, String> {
    loop {
        let last = match query_route(client, e).await {
            Ok(queues) => {
                let mut per: BTreeMap<&str, usize> = BTreeMap::new();
                for q in &queues {
                    *per.entry(broker_of_queue(q)).or_default() += 1;
                }
                if per.iter().map(|(b, n)| (*b, *n)).eq(want.iter().copied()) {
                    return Ok(queues);
                }
                format!("queues per broker {per:?}")
            }
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(last);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// -------------------------------------------------------------------------------- consumer

/// A received and acknowledged message.
#[derive(Debug, Clone)]
struct Acked {
    broker: String,
    store_host: String,
    body: Vec<u8>,
    phase: &'static str,
}

/// A simple consumer as the 5.x SDK runs one: Telemetry settings, QueryAssignment, then
/// ReceiveMessage from each assigned broker in turn, acking what it processed.
struct Consumer {
    client: Client,
    id: String,
    endpoints: pb::Endpoints,
    _telemetry: Telemetry,
    acked: BTreeMap<String, Acked>,
    /// Received, not acknowledged (yet).
    pending: Vec<pb::Message>,
    deliveries: usize,
    receive_errors: BTreeMap<String, usize>,
    ack_errors: Vec<String>,
}

fn message_broker(m: &pb::Message) -> String {
    let handle = m.system_properties.as_ref().and_then(|s| s.receipt_handle.as_deref()).unwrap_or_default();
    ExtraInfo::parse(handle).map(|h| h.broker_name).unwrap_or_else(|e| format!("(bad receipt handle: {e:?})"))
}

fn id_of(m: &pb::Message) -> String {
    m.system_properties.as_ref().map(|s| s.message_id.clone()).unwrap_or_default()
}

impl Consumer {
    async fn new(client: &Client, id: &str, endpoints: pb::Endpoints) -> Consumer {
        let mut client = client.clone();
        let telemetry = telemetry(&mut client, id, consumer_settings(ClientType::SimpleConsumer, GROUP, TOPIC)).await;
        Consumer {
            client,
            id: id.to_owned(),
            endpoints,
            _telemetry: telemetry,
            acked: BTreeMap::new(),
            pending: Vec::new(),
            deliveries: 0,
            receive_errors: BTreeMap::new(),
            ack_errors: Vec::new(),
        }
    }

    async fn assignments(&mut self) -> Result<Vec<pb::MessageQueue>, String> {
        let heartbeat = pb::HeartbeatRequest { group: res(GROUP), client_type: ClientType::SimpleConsumer as i32 };
        let _ = bounded("Heartbeat", RPC_TIMEOUT, self.client.heartbeat(req(&self.id, heartbeat))).await;
        let request = pb::QueryAssignmentRequest {
            topic: res(TOPIC),
            group: res(GROUP),
            endpoints: Some(self.endpoints.clone()),
        };
        let r = bounded("QueryAssignment", RPC_TIMEOUT, self.client.query_assignment(req(&self.id, request)))
            .await?
            .into_inner();
        if code(&r.status) != Code::Ok {
            return Err(describe(&r.status));
        }
        Ok(r.assignments.into_iter().filter_map(|a| a.message_queue).collect())
    }

    /// One ReceiveMessage from the assignment's broker; MESSAGE_NOT_FOUND is no message.
    async fn receive(&mut self, queue: &pb::MessageQueue, batch: i32) -> Result<Vec<pb::Message>, String> {
        let request = pb::ReceiveMessageRequest {
            group: res(GROUP),
            message_queue: Some(queue.clone()),
            filter_expression: Some(pb::FilterExpression {
                r#type: pb::FilterType::Tag as i32,
                expression: "*".into(),
            }),
            batch_size: batch,
            invisible_duration: Some(prost_types::Duration { seconds: INVISIBLE_S, nanos: 0 }),
            auto_renew: false,
            long_polling_timeout: Some(prost_types::Duration { seconds: 5, nanos: 0 }),
            attempt_id: None,
        };
        let client = &mut self.client;
        let id = &self.id;
        let call = async move {
            let mut stream = client.receive_message(req(id, request)).await?.into_inner();
            let mut msgs = Vec::new();
            let mut status = None;
            while let Some(frame) = stream.next().await {
                match frame?.content {
                    Some(pb::receive_message_response::Content::Status(s)) => status = Some(s),
                    Some(pb::receive_message_response::Content::Message(m)) => msgs.push(m),
                    _ => {}
                }
            }
            Ok::<_, tonic::Status>((status, msgs))
        };
        let (status, msgs) = bounded("ReceiveMessage", RECEIVE_TIMEOUT, call).await?;
        match code(&status) {
            Code::Ok | Code::MessageNotFound => Ok(msgs),
            _ => Err(describe(&status)),
        }
    }

    /// Acks `msgs`; the ones acknowledged are recorded under `phase`, the others returned.
    async fn ack(&mut self, msgs: Vec<pb::Message>, phase: &'static str) -> Vec<(pb::Message, String)> {
        if msgs.is_empty() {
            return Vec::new();
        }
        let entries = msgs.iter().map(ack_entry).collect();
        let request = pb::AckMessageRequest { group: res(GROUP), topic: res(TOPIC), entries };
        let answer = bounded("AckMessage", RPC_TIMEOUT, self.client.ack_message(req(&self.id, request))).await;
        let mut failed = Vec::new();
        for (i, m) in msgs.into_iter().enumerate() {
            let outcome = match &answer {
                Ok(r) => match r.get_ref().entries.get(i) {
                    Some(e) if code(&e.status) == Code::Ok => Ok(()),
                    Some(e) => Err(describe(&e.status)),
                    None => Err(format!("no ack entry ({})", describe(&r.get_ref().status))),
                },
                Err(e) => Err(e.clone()),
            };
            match outcome {
                Ok(()) => {
                    let s = m.system_properties.as_ref().unwrap();
                    self.acked.entry(s.message_id.clone()).or_insert_with(|| Acked {
                        broker: message_broker(&m),
                        store_host: s.store_host.clone(),
                        body: m.body.clone(),
                        phase,
                    });
                }
                Err(e) => failed.push((m, e)),
            }
        }
        failed
    }

    /// One pass over the assignments: a receive from each broker; what arrives is acked (or
    /// kept pending with `ack = false`). Returns the messages received per broker, or the
    /// receive's error.
    async fn round(
        &mut self,
        batch: i32,
        ack: bool,
        phase: &'static str,
    ) -> BTreeMap<String, Result<Vec<pb::Message>, String>> {
        let mut out = BTreeMap::new();
        let queues = match self.assignments().await {
            Ok(q) => q,
            Err(e) => {
                *self.receive_errors.entry(format!("QueryAssignment: {e}")).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
                return out;
            }
        };
        for q in queues {
            let broker = broker_of_queue(&q).to_owned();
            match self.receive(&q, batch).await {
                Ok(msgs) => {
                    self.deliveries += msgs.len();
                    if ack {
                        for (m, e) in self.ack(msgs.clone(), phase).await {
                            self.ack_errors.push(format!("{phase}: ack of {} ({}) failed: {e}", id_of(&m), broker));
                        }
                    } else {
                        self.pending.extend(msgs.iter().cloned());
                    }
                    out.insert(broker, Ok(msgs));
                }
                Err(e) => {
                    *self.receive_errors.entry(format!("{phase}: {broker}: {e}")).or_default() += 1;
                    out.insert(broker, Err(e));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        out
    }

    /// Receives and acks until every id of `want` is acked; the ids still missing otherwise.
    async fn drain(&mut self, want: &BTreeSet<String>, phase: &'static str, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let missing: Vec<String> = want.iter().filter(|id| !self.acked.contains_key(*id)).cloned().collect();
            if missing.is_empty() || Instant::now() >= deadline {
                return missing;
            }
            self.round(16, true, phase).await;
        }
    }
}

// ------------------------------------------------------------------------------------ test

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_proxy_serves_two_brokers_and_loses_no_acknowledged_message_when_one_is_killed() {
    let mut cluster = Cluster::start();
    let mut problems: Vec<String> = Vec::new();
    let started = Instant::now();
    // bindAddress=127.0.0.1: another loopback address finds no gRPC port.
    assert!(
        tokio::net::TcpStream::connect(format!("127.0.0.2:{}", cluster.grpc_port)).await.is_err(),
        "the proxy listens beyond its bindAddress"
    );

    // Both brokers create the topic and the name server routes it to both.
    cluster.create_topic();
    cluster.wait_namesrv_route(TOPIC, &[BROKER_A, BROKER_B], Duration::from_secs(30)).await;
    let a_addr = cluster.brokers[0].addr();
    let b_addr = cluster.brokers[1].addr();

    // QueryRoute: 4 READ_WRITE queues of each broker, at the address the client used, with
    // the proxy's grpcServerPort whatever port the request names.
    let mut client = connect(&cluster.grpc_addr()).await;
    let used = endpoints("127.0.0.1", cluster.grpc_port);
    let queues = wait_proxy_route(&mut client, &used, &[(BROKER_A, 4), (BROKER_B, 4)], Instant::now() + RPC_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("QueryRoute never named 4 queues of each broker: {e}"));
    assert_eq!(queues.len(), 8);
    for q in &queues {
        let b = q.broker.as_ref().expect("a broker");
        assert_eq!(b.id, 0, "{q:?}");
        assert_eq!(b.endpoints.as_ref(), Some(&used), "endpoints are the proxy's address: {q:?}");
        assert_eq!(q.permission, pb::Permission::ReadWrite as i32, "{q:?}");
        assert_eq!(q.accept_message_types, vec![pb::MessageType::Normal as i32], "{q:?}");
        assert_eq!(q.topic.as_ref().map(|t| t.name.as_str()), Some(TOPIC));
    }
    let other_port = query_route(&mut client, &endpoints("127.0.0.1", 9)).await.expect("QueryRoute");
    assert_eq!(other_port.len(), 8);
    for q in &other_port {
        let e = q.broker.as_ref().and_then(|b| b.endpoints.as_ref()).expect("endpoints");
        assert_eq!(e, &used, "the port handed out is grpcServerPort, not the request's: {q:?}");
    }

    // A producer sends FIRST messages; they spread over both brokers.
    let mut producer = client.clone();
    let _producer_telemetry = telemetry(&mut producer, "gc-producer", producer_settings(&[TOPIC])).await;
    let mut sent: BTreeMap<String, usize> = BTreeMap::new(); // id -> n, every send answered OK
    for n in 0..FIRST {
        let id = message_id(n);
        match send_once(&mut producer, &id, n).await {
            Ok(e) => {
                assert_eq!(e.message_id, id);
                sent.insert(id, n);
            }
            Err(e) => problems.push(format!("send {n} before the fault failed: {e}")),
        }
    }
    // A simple consumer receives and acks them all.
    let mut consumer = Consumer::new(&client, "gc-consumer", used.clone()).await;
    let first_ids: BTreeSet<String> = sent.keys().cloned().collect();
    let missing = consumer.drain(&first_ids, "first", Duration::from_secs(60)).await;
    if !missing.is_empty() {
        problems.push(format!("first round: {} of {} messages never received and acked", missing.len(), FIRST));
    }
    let mut per_broker: BTreeMap<String, usize> = BTreeMap::new();
    for a in consumer.acked.values() {
        *per_broker.entry(a.broker.clone()).or_default() += 1;
    }
    if per_broker.get(BROKER_A).copied().unwrap_or(0) == 0 || per_broker.get(BROKER_B).copied().unwrap_or(0) == 0 {
        problems.push(format!("the first round did not spread over both brokers: {per_broker:?}"));
    }
    for (id, a) in &consumer.acked {
        let want_host = if a.broker == BROKER_A { &a_addr } else { &b_addr };
        if sent.get(id).map(|n| body_of(*n)) != Some(a.body.clone()) || &a.store_host != want_host {
            problems.push(format!("message {id} came back as {a:?}"));
        }
    }
    println!("first round: {} sent, acked per broker {per_broker:?}", sent.len());

    // broker-a grows to GROWN queues. Seeing that in QueryRoute tells the moment the proxy
    // has re-read the route (it caches routes for topicRouteServiceCacheRefreshSeconds, 20 s):
    // broker-b dies right after, so the proxy's route names it, dead, for most of that time.
    // Sends must not depend on a route refresh to avoid a dead broker.
    cluster.grow_topic_on_broker_a(GROWN);
    let grown = Instant::now();
    if let Err(e) =
        wait_proxy_route(&mut client, &used, &[(BROKER_A, GROWN), (BROKER_B, 4)], grown + Duration::from_secs(60)).await
    {
        panic!("60 s after broker-a grew to {GROWN} queues QueryRoute answers {e}");
    }
    let refreshed = Instant::now();
    println!("the proxy re-read the route {:.1?} after broker-a grew", refreshed - grown);

    // More messages; the consumer is mid-way: it has received some from each broker and
    // acked only one of each when broker-b dies.
    for n in FIRST..FIRST + BEFORE_FAULT {
        let id = message_id(n);
        match send_once(&mut producer, &id, n).await {
            Ok(_) => {
                sent.insert(id, n);
            }
            Err(e) => problems.push(format!("send {n} before the fault failed: {e}")),
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while [BROKER_A, BROKER_B].iter().any(|b| !consumer.pending.iter().any(|m| message_broker(m) == *b)) {
        assert!(Instant::now() < deadline, "never held messages of both brokers: {:?}", consumer.pending.len());
        consumer.round(4, false, "before the fault").await;
    }
    let mut held = std::mem::take(&mut consumer.pending);
    for b in [BROKER_A, BROKER_B] {
        if let Some(i) = held.iter().position(|m| message_broker(m) == b) {
            let m = held.remove(i);
            for (m, e) in consumer.ack(vec![m], "before the fault").await {
                problems.push(format!("ack of {} before the fault failed: {e}", id_of(&m)));
            }
        }
    }
    let held_b: Vec<String> = held.iter().filter(|m| message_broker(m) == BROKER_B).map(id_of).collect();
    println!(
        "mid-way: {} acked, {} held unacknowledged ({} of them on broker-b)",
        consumer.acked.len(),
        held.len(),
        held_b.len()
    );

    // SIGKILL broker-b.
    cluster.broker_b().kill();
    let killed = Instant::now();
    println!("broker-b killed {:.1?} after the proxy re-read the route", killed - refreshed);

    // The held broker-a messages can still be acked; broker-b's cannot (they come back later).
    let held_a: Vec<pb::Message> = held.iter().filter(|m| message_broker(m) == BROKER_A).cloned().collect();
    for (m, e) in consumer.ack(held_a, "during the fault").await {
        problems.push(format!("ack of broker-a's {} failed while broker-b was down: {e}", id_of(&m)));
    }
    let held_b_msgs: Vec<pb::Message> = held.into_iter().filter(|m| message_broker(m) == BROKER_B).collect();
    let late_b_acks = consumer.ack(held_b_msgs, "during the fault").await;
    println!(
        "acks of broker-b's held messages while it is down: {:?}",
        late_b_acks.iter().map(|x| &x.1).collect::<Vec<_>>()
    );

    // The producer keeps sending, retrying a failed send once, while the consumer receives.
    // The consumer starts receiving once a round of sends has gone by, so the sends meet the
    // dead broker first (a failed receive would also teach the proxy that broker-b is gone).
    let mut fault_producer = producer.clone();
    let sends_made = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let made = sends_made.clone();
    let mut sender = Some(tokio::spawn(async move {
        let mut outcomes = Vec::new();
        for n in FIRST + BEFORE_FAULT..FIRST + BEFORE_FAULT + DURING_FAULT {
            let id = message_id(n);
            let at = killed.elapsed();
            let (outcome, errors) = send_retrying(&mut fault_producer, &id, n).await;
            outcomes.push((id, n, at, outcome, errors));
            made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tokio::time::sleep(SEND_PAUSE).await;
        }
        outcomes
    }));
    let deadline = Instant::now() + Duration::from_secs(60);
    while sends_made.load(std::sync::atomic::Ordering::Relaxed) < SENDS_BEFORE_RECEIVING
        && sender.as_ref().is_some_and(|h| !h.is_finished())
    {
        assert!(Instant::now() < deadline, "{SENDS_BEFORE_RECEIVING} sends took over 60 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Receive until the producer is done and broker-a has nothing more (two empty receives in
    // a row, both started after the last send).
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut empty_a_after_sends = 0;
    let mut outcomes = None;
    while Instant::now() < deadline {
        if let Some(done) = sender.take_if(|h| h.is_finished()) {
            outcomes = Some(done.await.expect("the sender task"));
        }
        let round = consumer.round(16, true, "during the fault").await;
        if let Some(Ok(msgs)) = round.get(BROKER_A) {
            if outcomes.is_some() && msgs.is_empty() {
                empty_a_after_sends += 1;
            } else {
                empty_a_after_sends = 0;
            }
        }
        if let Some(Ok(msgs)) = round.get(BROKER_B) {
            if !msgs.is_empty() {
                problems.push(format!("{} messages received from broker-b while it was dead", msgs.len()));
            }
        }
        if empty_a_after_sends >= 2 {
            break;
        }
    }
    let outcomes = match outcomes {
        Some(o) => o,
        None => panic!("the producer did not finish {DURING_FAULT} sends within 90 s of the kill"),
    };
    let mut retried_ok = 0;
    let mut failed_sends = Vec::new();
    for (id, n, at, outcome, errors) in &outcomes {
        match outcome {
            Ok(e) => {
                assert_eq!(&e.message_id, id);
                retried_ok += usize::from(!errors.is_empty());
                sent.insert(id.clone(), *n);
            }
            Err(_) => failed_sends.push(format!("send {n} at {at:.1?} after the kill: {errors:?}")),
        }
    }
    if !failed_sends.is_empty() {
        problems.push(format!(
            "{} of {DURING_FAULT} sends failed twice while broker-b was down (broker-a was up): {failed_sends:#?}",
            failed_sends.len()
        ));
    }
    let acked_during_fault = consumer.acked.values().filter(|a| a.phase == "during the fault").count();
    for (id, a) in &consumer.acked {
        if a.phase == "during the fault" && a.broker != BROKER_A {
            problems.push(format!("{id} was acked on {} while broker-b was down", a.broker));
        }
    }
    println!(
        "during the fault: {} sends OK ({retried_ok} after a retry), {} failed; {acked_during_fault} acked; \
         receive errors {:?}",
        outcomes.len() - failed_sends.len(),
        failed_sends.len(),
        consumer.receive_errors
    );
    // The proxy serves, and its routes drop broker-b.
    if !cluster.proxy_running() {
        problems.push("the proxy exited while broker-b was down".into());
    }
    match wait_proxy_route(&mut client, &used, &[(BROKER_A, GROWN)], killed + Duration::from_secs(40)).await {
        Ok(_) => println!("QueryRoute names only broker-a (checked {:.1?} after the kill)", killed.elapsed()),
        Err(e) => problems.push(format!("40 s after the kill QueryRoute still answers {e}")),
    }
    if !cluster.brokers[0].running() {
        problems.push("broker-a exited".into());
    }

    // Restart broker-b on its store: its acknowledged messages are received too, nothing
    // acknowledged is lost, and nothing of broker-a was left behind during the fault.
    let downtime = killed.elapsed();
    cluster.broker_b().start();
    cluster.wait_namesrv_route(TOPIC, &[BROKER_A, BROKER_B], Duration::from_secs(30)).await;
    let restarted = Instant::now();
    let all: BTreeSet<String> = sent.keys().cloned().collect();
    let missing = consumer.drain(&all, "after the restart", Duration::from_secs(120)).await;
    if !missing.is_empty() {
        let detail: Vec<String> = missing.iter().map(|id| format!("{id} (message {})", sent[id])).collect();
        problems.push(format!(
            "{} of {} acknowledged sends were never received and acked, 120 s after broker-b's restart: {detail:?}",
            missing.len(),
            sent.len()
        ));
    }
    for (id, a) in &consumer.acked {
        if a.phase == "after the restart" && a.broker == BROKER_A {
            problems.push(format!("broker-a's {id} was received only after broker-b came back"));
        }
        match sent.get(id) {
            Some(n) if body_of(*n) == a.body => {}
            _ => problems.push(format!("received {id} that was not sent so: {a:?}")),
        }
    }
    for id in &held_b {
        if !consumer.acked.contains_key(id) {
            problems.push(format!("broker-b's {id}, held unacknowledged at the kill, never came back"));
        }
    }
    let after_restart = consumer.acked.values().filter(|a| a.phase == "after the restart").count();
    println!(
        "after the restart: {after_restart} acked within {:.1?}; {} deliveries for {} messages",
        restarted.elapsed(),
        consumer.deliveries,
        consumer.acked.len()
    );
    let both = [(BROKER_A, GROWN), (BROKER_B, 4)];
    match wait_proxy_route(&mut client, &used, &both, Instant::now() + Duration::from_secs(40)).await {
        Ok(_) => {}
        Err(e) => problems.push(format!("40 s after broker-b's restart QueryRoute answers {e}")),
    }
    if !cluster.proxy_running() {
        problems.push("the proxy exited".into());
    }
    if !consumer.ack_errors.is_empty() {
        problems.push(format!("acks that failed: {:#?}", consumer.ack_errors));
    }
    println!("broker-b was down {downtime:.1?}; the test took {:.1?}", started.elapsed());
    cluster.remoting.shutdown().await;
    assert!(problems.is_empty(), "{} problems:\n{}\n{}", problems.len(), problems.join("\n"), cluster.logs());
}
