//! A tonic client of the proxy's MessagingService, as the gRPC tests drive it: connection,
//! request metadata, Telemetry's Settings exchange, and the settings and ids 5.x clients send.

#![allow(dead_code)] // each test file uses its own part

use std::time::{Duration, Instant};

use ferromq_proxy::pb::messaging_service_client::MessagingServiceClient;
use ferromq_proxy::pb::{self, telemetry_command::Command as Tc, ClientType, Code};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::transport::Channel;

pub type Client = MessagingServiceClient<Channel>;

/// How long one RPC of a test may take.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(20);

/// A client of the gRPC port at `addr`, retrying while the port is not yet accepting.
pub async fn connect(addr: &str) -> Client {
    let url = format!("http://{addr}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(c) = Channel::from_shared(url.clone()).unwrap().connect().await {
            return MessagingServiceClient::new(c);
        }
        assert!(Instant::now() < deadline, "gRPC port {addr} never accepted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A request with the metadata a 5.x Rust client sends.
pub fn req<T>(client_id: &str, body: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(body);
    r.metadata_mut().insert("x-mq-client-id", client_id.parse().unwrap());
    r.metadata_mut().insert("x-mq-language", "RUST".parse().unwrap());
    r.metadata_mut().insert("x-mq-client-version", "5.0.0".parse().unwrap());
    r.set_timeout(Duration::from_secs(30));
    r
}

pub fn res(name: &str) -> Option<pb::Resource> {
    Some(pb::Resource { resource_namespace: String::new(), name: name.to_owned() })
}

/// A response status's code (UNSPECIFIED when there is none).
pub fn code(s: &Option<pb::Status>) -> Code {
    s.as_ref().map_or(Code::Unspecified, |s| Code::try_from(s.code).unwrap_or(Code::Unspecified))
}

/// An open Telemetry stream: the server's Settings answer, our sender, the server's commands.
pub type Telemetry = (pb::Settings, mpsc::Sender<pb::TelemetryCommand>, tonic::Streaming<pb::TelemetryCommand>);

/// Opens Telemetry and exchanges `settings`, as every 5.x client does first.
pub async fn telemetry(client: &mut Client, client_id: &str, settings: pb::Settings) -> Telemetry {
    let (tx, rx) = mpsc::channel(8);
    tx.send(pb::TelemetryCommand { status: None, command: Some(Tc::Settings(settings)) }).await.unwrap();
    let mut r = tonic::Request::new(ReceiverStream::new(rx));
    r.metadata_mut().insert("x-mq-client-id", client_id.parse().unwrap());
    r.metadata_mut().insert("x-mq-language", "RUST".parse().unwrap());
    r.metadata_mut().insert("x-mq-client-version", "5.0.0".parse().unwrap());
    let mut inbound = tokio::time::timeout(RPC_TIMEOUT, client.telemetry(r))
        .await
        .expect("telemetry opens in time")
        .expect("telemetry opens")
        .into_inner();
    let first = tokio::time::timeout(RPC_TIMEOUT, inbound.next()).await.expect("settings in time");
    let cmd = first.expect("an answer").expect("not an error");
    assert_eq!(code(&cmd.status), Code::Ok, "{cmd:?}");
    let Some(Tc::Settings(s)) = cmd.command else { panic!("expected settings, got {cmd:?}") };
    (s, tx, inbound)
}

pub fn producer_settings(topics: &[&str]) -> pb::Settings {
    pb::Settings {
        client_type: Some(ClientType::Producer as i32),
        request_timeout: Some(prost_types::Duration { seconds: 3, nanos: 0 }),
        pub_sub: Some(pb::settings::PubSub::Publishing(pb::Publishing {
            topics: topics.iter().map(|t| res(t).unwrap()).collect(),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// A consumer of `group` subscribing every message of `topic`.
pub fn consumer_settings(kind: ClientType, group: &str, topic: &str) -> pb::Settings {
    pb::Settings {
        client_type: Some(kind as i32),
        pub_sub: Some(pb::settings::PubSub::Subscription(pb::Subscription {
            group: res(group),
            subscriptions: vec![pb::SubscriptionEntry {
                topic: res(topic),
                expression: Some(pb::FilterExpression { r#type: pb::FilterType::Tag as i32, expression: "*".into() }),
            }],
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The AckMessage entry of a received message (its id and receipt handle).
pub fn ack_entry(m: &pb::Message) -> pb::AckMessageEntry {
    let s = m.system_properties.as_ref().expect("system properties");
    pb::AckMessageEntry {
        message_id: s.message_id.clone(),
        receipt_handle: s.receipt_handle.clone().expect("a received message has a receipt handle"),
        lite_topic: None,
    }
}

/// A message id as 5.x clients make them (34 upper-case hex digits, version 01), unique per
/// process and `n`.
pub fn message_id(n: usize) -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    format!("01{:012X}{:04X}{:08X}{:08X}", 0x0242_AC11_0002u64, std::process::id() & 0xFFFF, secs & 0xFFFF_FFFF, n)
}
