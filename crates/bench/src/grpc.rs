//! gRPC load for the 5.x proxy: `ferromq bench grpc-produce` sends with SendMessage from a
//! number of concurrent callers (one in flight each, as a 5.x producer sends synchronously),
//! and `ferromq bench grpc-receive` receives (batch 32) and acknowledges every message, as a
//! SimpleConsumer does; both report rates and latency percentiles comparable with `bench
//! produce` and `bench pop` over remoting. Plaintext HTTP/2: Telemetry and ReceiveMessage on a
//! tonic channel, the unary SendMessage and AckMessage calls on a connection of their own that
//! writes queued calls together ([`crate::unary`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferromq_proxy::pb::messaging_service_client::MessagingServiceClient;
use ferromq_proxy::pb::{self, telemetry_command::Command, ClientType, Code};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tonic::transport::Channel;

use crate::histogram::{Histogram, LatencySummary};
use crate::unary::UnaryClient;

const SEND_MESSAGE: &str = "/apache.rocketmq.v2.MessagingService/SendMessage";
const ACK_MESSAGE: &str = "/apache.rocketmq.v2.MessagingService/AckMessage";
use crate::BenchError;

/// What a gRPC run measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GrpcResult {
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// Messages sent and acknowledged OK (produce) or received and acked OK (receive).
    pub ok: u64,
    /// Failed calls.
    pub failed: u64,
    /// `ok` per second.
    pub msgs_per_s: f64,
    /// Per-call latency, µs (one SendMessage, or one ReceiveMessage with its acks).
    pub latency_us: LatencySummary,
    /// The first failure seen.
    pub first_error: Option<String>,
}

impl GrpcResult {
    /// The result as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// Options of a gRPC run.
#[derive(Debug, Clone)]
pub struct GrpcOptions {
    /// `host:port` of the proxy.
    pub endpoint: String,
    /// Topic (created beforehand, message type NORMAL).
    pub topic: String,
    /// Consumer group (receive).
    pub group: String,
    /// Concurrent callers.
    pub concurrency: u32,
    /// HTTP/2 connections for the unary calls; callers are spread over them in turn.
    pub connections: u32,
    /// Body size, bytes.
    pub body_bytes: usize,
    /// Stop after this long.
    pub duration: Duration,
    /// Stop after this many messages (0: time only).
    pub count: u64,
}

fn client_id(kind: &str) -> String {
    format!("ferro-bench-{kind}@{}", std::process::id())
}

fn req<T>(client_id: &str, body: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(body);
    if let Ok(v) = client_id.parse() {
        r.metadata_mut().insert("x-mq-client-id", v);
    }
    r.set_timeout(Duration::from_secs(30));
    r
}

fn resource(name: &str) -> Option<pb::Resource> {
    Some(pb::Resource { resource_namespace: String::new(), name: name.to_owned() })
}

async fn connect(endpoint: &str) -> Result<MessagingServiceClient<Channel>, BenchError> {
    let channel = Channel::from_shared(format!("http://{endpoint}"))
        .map_err(|e| BenchError::Setup(format!("bad endpoint {endpoint}: {e}")))?
        .connect()
        .await
        .map_err(|e| BenchError::Setup(format!("cannot reach the gRPC proxy at {endpoint}: {e}")))?;
    Ok(MessagingServiceClient::new(channel).max_decoding_message_size(64 << 20))
}

/// Opens Telemetry with `settings`; the returned sender keeps the stream open.
async fn open_telemetry(
    c: &mut MessagingServiceClient<Channel>,
    client_id: &str,
    settings: pb::Settings,
) -> Result<mpsc::Sender<pb::TelemetryCommand>, BenchError> {
    let (tx, rx) = mpsc::channel(4);
    let _ = tx.send(pb::TelemetryCommand { status: None, command: Some(Command::Settings(settings)) }).await;
    let mut r = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    if let Ok(v) = client_id.parse() {
        r.metadata_mut().insert("x-mq-client-id", v);
    }
    let mut inbound = c.telemetry(r).await.map_err(|e| BenchError::Setup(format!("telemetry: {e}")))?.into_inner();
    match inbound.next().await {
        Some(Ok(cmd)) if cmd.status.as_ref().is_some_and(|s| s.code == Code::Ok as i32) => Ok(tx),
        other => Err(BenchError::Setup(format!("the proxy refused the settings: {other:?}"))),
    }
}

struct Shared {
    ok: AtomicU64,
    failed: AtomicU64,
    stop: AtomicBool,
    first_error: std::sync::Mutex<Option<String>>,
}

impl Shared {
    fn fail(&self, e: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut f = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
        f.get_or_insert(e);
    }
}

fn finish(started: Instant, shared: &Shared, hist: &Histogram) -> GrpcResult {
    let elapsed = started.elapsed();
    let ok = shared.ok.load(Ordering::Relaxed);
    GrpcResult {
        elapsed_s: elapsed.as_secs_f64(),
        ok,
        failed: shared.failed.load(Ordering::Relaxed),
        msgs_per_s: crate::report::per_second(ok, elapsed),
        latency_us: hist.summary(),
        first_error: shared.first_error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
    }
}

/// The unary-call connections of a run (at least one), all as client `id`.
async fn unary_connections(opts: &GrpcOptions, id: &str) -> Result<Vec<UnaryClient>, BenchError> {
    let mut all = Vec::new();
    for _ in 0..opts.connections.max(1) {
        all.push(UnaryClient::connect(&opts.endpoint, id).await?);
    }
    Ok(all)
}

/// `bench grpc-produce`.
///
/// # Errors
/// [`BenchError`] when the proxy cannot be reached or refuses the producer.
pub async fn produce(opts: &GrpcOptions) -> Result<GrpcResult, BenchError> {
    let id = client_id("producer");
    let mut c = connect(&opts.endpoint).await?;
    let settings = pb::Settings {
        client_type: Some(ClientType::Producer as i32),
        pub_sub: Some(pb::settings::PubSub::Publishing(pb::Publishing {
            topics: vec![resource(&opts.topic).unwrap_or_default()],
            ..Default::default()
        })),
        ..Default::default()
    };
    let _telemetry = open_telemetry(&mut c, &id, settings).await?;
    let unary = unary_connections(opts, &id).await?;
    let shared = Arc::new(Shared {
        ok: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        first_error: Default::default(),
    });
    let body = vec![b'x'; opts.body_bytes];
    let started = Instant::now();
    let deadline = started + opts.duration;
    let seq = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..opts.concurrency.max(1) as usize {
        let (c, shared, body, seq, id, topic, count) = (
            unary[i % unary.len()].clone(),
            shared.clone(),
            body.clone(),
            seq.clone(),
            id.clone(),
            opts.topic.clone(),
            opts.count,
        );
        tasks.spawn(async move {
            let mut hist = Histogram::new();
            while !shared.stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                let n = seq.fetch_add(1, Ordering::Relaxed);
                if count > 0 && n >= count {
                    break;
                }
                let m = pb::Message {
                    topic: resource(&topic),
                    user_properties: Default::default(),
                    system_properties: Some(pb::SystemProperties {
                        message_id: format!("{id}-{n}"),
                        message_type: pb::MessageType::Normal as i32,
                        ..Default::default()
                    }),
                    body: body.clone(),
                };
                let t = Instant::now();
                let sent: Result<pb::SendMessageResponse, String> =
                    c.call(SEND_MESSAGE, &pb::SendMessageRequest { messages: vec![m] }).await;
                match sent {
                    Ok(r) if r.status.as_ref().is_some_and(|s| s.code == Code::Ok as i32) => {
                        hist.record(t.elapsed().as_micros() as u64);
                        shared.ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(r) => shared.fail(format!("{:?}", r.status)),
                    Err(e) => shared.fail(e),
                }
            }
            hist
        });
    }
    let mut hist = Histogram::new();
    while let Some(h) = tasks.join_next().await {
        if let Ok(h) = h {
            hist.merge(&h);
        }
    }
    Ok(finish(started, &shared, &hist))
}

/// `bench grpc-receive`.
///
/// # Errors
/// [`BenchError`] when the proxy cannot be reached or refuses the consumer.
pub async fn receive(opts: &GrpcOptions) -> Result<GrpcResult, BenchError> {
    let id = client_id("consumer");
    let mut c = connect(&opts.endpoint).await?;
    let settings = pb::Settings {
        client_type: Some(ClientType::SimpleConsumer as i32),
        pub_sub: Some(pb::settings::PubSub::Subscription(pb::Subscription {
            group: resource(&opts.group),
            subscriptions: vec![pb::SubscriptionEntry {
                topic: resource(&opts.topic),
                expression: Some(pb::FilterExpression { r#type: pb::FilterType::Tag as i32, expression: "*".into() }),
            }],
            ..Default::default()
        })),
        ..Default::default()
    };
    let _telemetry = open_telemetry(&mut c, &id, settings).await?;
    let unary = unary_connections(opts, &id).await?;
    let shared = Arc::new(Shared {
        ok: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        first_error: Default::default(),
    });
    let started = Instant::now();
    let deadline = started + opts.duration;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..opts.concurrency.max(1) as usize {
        let (mut c, unary, shared, id, topic, group, count) = (
            c.clone(),
            unary[i % unary.len()].clone(),
            shared.clone(),
            id.clone(),
            opts.topic.clone(),
            opts.group.clone(),
            opts.count,
        );
        tasks.spawn(async move {
            let mut hist = Histogram::new();
            let mut empty = 0;
            while Instant::now() < deadline && (count == 0 || shared.ok.load(Ordering::Relaxed) < count) && empty < 3 {
                let t = Instant::now();
                let r = pb::ReceiveMessageRequest {
                    group: resource(&group),
                    message_queue: Some(pb::MessageQueue { topic: resource(&topic), id: -1, ..Default::default() }),
                    filter_expression: Some(pb::FilterExpression {
                        r#type: pb::FilterType::Tag as i32,
                        expression: "*".into(),
                    }),
                    batch_size: 32,
                    invisible_duration: Some(prost_types::Duration { seconds: 60, nanos: 0 }),
                    auto_renew: false,
                    long_polling_timeout: Some(prost_types::Duration { seconds: 5, nanos: 0 }),
                    attempt_id: None,
                };
                let mut stream = match c.receive_message(req(&id, r)).await {
                    Ok(s) => s.into_inner(),
                    Err(e) => {
                        shared.fail(e.to_string());
                        continue;
                    }
                };
                let mut entries = Vec::new();
                while let Some(frame) = stream.next().await {
                    if let Ok(pb::ReceiveMessageResponse {
                        content: Some(pb::receive_message_response::Content::Message(m)),
                    }) = frame
                    {
                        let s = m.system_properties.unwrap_or_default();
                        entries.push(pb::AckMessageEntry {
                            message_id: s.message_id,
                            receipt_handle: s.receipt_handle.unwrap_or_default(),
                            lite_topic: None,
                        });
                    }
                }
                if entries.is_empty() {
                    empty += 1;
                    continue;
                }
                empty = 0;
                // As a SimpleConsumer does: one AckMessage per message.
                for e in entries {
                    let a =
                        pb::AckMessageRequest { group: resource(&group), topic: resource(&topic), entries: vec![e] };
                    let acked: Result<pb::AckMessageResponse, String> = unary.call(ACK_MESSAGE, &a).await;
                    match acked {
                        Ok(r) if r.status.as_ref().is_some_and(|s| s.code == Code::Ok as i32) => {
                            shared.ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(r) => shared.fail(format!("{:?}", r.status)),
                        Err(e) => shared.fail(e),
                    }
                }
                hist.record(t.elapsed().as_micros() as u64);
            }
            hist
        });
    }
    let mut hist = Histogram::new();
    while let Some(h) = tasks.join_next().await {
        if let Ok(h) = h {
            hist.merge(&h);
        }
    }
    Ok(finish(started, &shared, &hist))
}
