//! ACL 2.0 on the cluster proxy as real processes: `ferromq namesrv`, a broker with
//! `authenticationEnabled`, `authorizationEnabled`, `initAuthenticationUser` and
//! `innerClientAuthenticationCredentials`, and `ferromq proxy` whose `rmq-proxy.json` turns
//! ACL 2.0 on with Java's `Proxy*MetadataProvider` classes, the broker's inner user as its own
//! credentials and a one-second refresh of the users and ACLs it copies from the broker.
//!
//! - gRPC: a user is allowed on its topic and refused (UNAUTHORIZED, Java's remark) on another;
//!   a wrong password and a call without credentials are refused; Telemetry Settings naming a
//!   topic the user may not publish to, or a group it may not subscribe as, are answered with
//!   UNAUTHORIZED and the stream ends; a user created with the admin CLI on the broker after the
//!   proxy started becomes usable through the proxy after the refresh.
//! - The remoting port: our Rust client produces through it as an allowed user and is refused
//!   (NO_PERMISSION, Java's remark) on another topic, without credentials and with a wrong
//!   password; a raw PULL naming a group the user may not use is refused by the proxy itself.
//! - The proxy relays remoting requests under its own user: a request code the proxy's
//!   `authorizationWhitelist` skips reaches the broker signed by the proxy's SUPER user, and is
//!   served, where the same request signed by the client is refused by the broker.
//!
//! Every wait is a bounded poll. `FERROMQ_TEST_LOGS=1` shows the servers' output.

#![cfg(unix)]

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ferromq_client::{ClientConfig, Message, Producer, ProducerConfig, SessionCredentials};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_proxy::pb::{self, telemetry_command::Command as Tc, ClientType, Code};
use ferromq_remoting::RemotingClient;
use ferromq_testkit::{free_port, pull_request, ChildProcess};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

mod common;
use common::cluster::{
    port_away_from, spawn_listening, start_brokers, start_namesrv, start_on_free_port, tail, Broker,
};
use common::grpc::{code, connect, consumer_settings, message_id, producer_settings, res, Client, RPC_TIMEOUT};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
const ROOT: (&str, &str) = ("rocketmq", "12345678");
/// The broker's inner user (SUPER there), which the proxy signs its own requests with.
const INNER: (&str, &str) = ("proxy-inner", "proxy-inner-secret");
const ALICE: (&str, &str) = ("alice", "alice-secret");
const BOB: (&str, &str) = ("bob", "bob-secret");
const CAROL: (&str, &str) = ("carol", "carol-secret");
/// How long a poll waits for the proxy to see a change.
const WAIT: Duration = Duration::from_secs(30);
const RPC: Duration = Duration::from_secs(10);

struct Cluster {
    dir: tempfile::TempDir,
    namesrv: String,
    _namesrv_process: ChildProcess,
    broker: Broker,
    _proxy: ChildProcess,
    grpc_addr: String,
    remoting_addr: String,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().to_owned();
        let (namesrv_process, ns_port) = start_namesrv(&path);
        let namesrv = format!("127.0.0.1:{ns_port}");
        let mut taken = vec![ns_port];
        let conf = format!(
            "authenticationEnabled=true\nauthorizationEnabled=true\n\
             initAuthenticationUser={{\"username\":\"{}\",\"password\":\"{}\"}}\n\
             innerClientAuthenticationCredentials={{\"accessKey\":\"{}\",\"secretKey\":\"{}\"}}\n",
            ROOT.0, ROOT.1, INNER.0, INNER.1
        );
        let [broker] = start_brokers(&path, &namesrv, ["broker-a"], &conf, &mut taken);
        let remoting_port = port_away_from(&taken, free_port);
        taken.push(remoting_port);
        let (proxy, grpc_port) = start_on_free_port(
            || port_away_from(&taken, free_port),
            |port| {
                // QUERY_CONSUMER_OFFSET is not authorized by the proxy (see the last check).
                let json = format!(
                    r#"{{
  "rocketMQClusterName": "DefaultCluster",
  "grpcServerPort": {port},
  "remotingListenPort": {remoting_port},
  "tls.server.mode": "disabled",
  "authenticationEnabled": true,
  "authorizationEnabled": true,
  "authenticationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider",
  "authorizationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider",
  "innerClientAuthenticationCredentials": "{{\"accessKey\":\"{}\",\"secretKey\":\"{}\"}}",
  "authorizationWhitelist": "{}",
  "userCacheRefreshSecond": 1,
  "aclCacheRefreshSecond": 1
}}
"#,
                    INNER.0,
                    INNER.1,
                    request_code::QUERY_CONSUMER_OFFSET
                );
                spawn_listening(
                    &["proxy", "-n", &namesrv],
                    &path.join("rmq-proxy.json"),
                    &json,
                    &path.join("proxy.log"),
                    port,
                )
            },
        );
        let remoting_addr = format!("127.0.0.1:{remoting_port}");
        let deadline = Instant::now() + WAIT;
        while std::net::TcpStream::connect(&remoting_addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "the proxy's remoting port does not listen:\n{}",
                tail(&path.join("proxy.log"), 30)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Cluster {
            dir,
            namesrv,
            _namesrv_process: namesrv_process,
            broker,
            _proxy: proxy,
            grpc_addr: format!("127.0.0.1:{grpc_port}"),
            remoting_addr,
        }
    }

    fn logs(&self) -> String {
        ["namesrv", "broker-a", "proxy"]
            .iter()
            .map(|name| format!("--- {name}.log:\n{}\n", tail(&self.dir.path().join(format!("{name}.log")), 30)))
            .collect()
    }

    fn admin(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("admin")
            .args(["--accessKey", ROOT.0, "--secretKey", ROOT.1])
            .args(args)
            .args(["-n", &self.namesrv])
            .env("RUST_LOG", "warn")
            .env_remove("ROCKETMQ_HOME")
            .output()
            .expect("run ferromq admin")
    }

    /// `ferromq admin <args> -b <broker>` as the broker's first SUPER user; must succeed.
    fn admin_ok(&self, args: &[&str]) {
        let mut all = args.to_vec();
        let addr = self.broker.addr();
        all.extend(["-b", addr.as_str()]);
        let out = self.admin(&all);
        assert!(
            out.status.success(),
            "admin {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A producer of the Rust client whose name server is the proxy's remoting port.
    fn remoting_producer(&self, instance: &str, creds: Option<(&str, &str)>) -> Producer {
        let config = ClientConfig {
            client_ip: "127.0.0.1".to_owned(),
            instance_name: instance.to_owned(),
            credentials: creds.map(|(ak, sk)| SessionCredentials::new(ak, sk)),
            ..ClientConfig::with_namesrv(&self.remoting_addr)
        };
        Producer::new(ProducerConfig { group: "ProxyAclPG".to_owned(), ..ProducerConfig::default() }, config)
    }

    /// `request` signed as `creds` sent to `addr`; the answer's code and remark.
    async fn raw(&self, addr: &str, creds: (&str, &str), request: RemotingCommand) -> (i32, String) {
        let config =
            ferromq_remoting::ClientConfig::default().with_credentials(Some(SessionCredentials::new(creds.0, creds.1)));
        let client = RemotingClient::new(config);
        let answer = client
            .invoke(addr, request, RPC)
            .await
            .unwrap_or_else(|e| panic!("{addr} did not answer: {e}\n{}", self.logs()));
        client.shutdown().await;
        (answer.code, answer.remark.unwrap_or_default())
    }
}

/// A 5.x client's request with `authorization` and `x-mq-date-time` as the Java client signs.
fn signed<T>(client_id: &str, body: T, creds: Option<(&str, &str)>) -> tonic::Request<T> {
    let mut r = common::grpc::req(client_id, body);
    sign(r.metadata_mut(), creds);
    r
}

fn sign(metadata: &mut tonic::metadata::MetadataMap, creds: Option<(&str, &str)>) {
    if let Some((ak, sk)) = creds {
        let date = "20260112T094500Z";
        let sig = ferromq_protocol::signature::sign_hex(sk.as_bytes(), date.as_bytes());
        let value = format!("MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}");
        metadata.insert("x-mq-date-time", date.parse().expect("ascii"));
        metadata.insert("authorization", value.parse().expect("ascii"));
    }
}

fn status_text(s: &Option<pb::Status>) -> String {
    s.as_ref()
        .map(|s| format!("{:?}: {}", Code::try_from(s.code).unwrap_or(Code::Unspecified), s.message))
        .unwrap_or_default()
}

async fn query_route(c: &mut Client, topic: &str, creds: Option<(&str, &str)>) -> Option<pb::Status> {
    let r = c.query_route(signed("acl-route", pb::QueryRouteRequest { topic: res(topic), endpoints: None }, creds));
    tokio::time::timeout(RPC_TIMEOUT, r).await.expect("QueryRoute in time").expect("answered").into_inner().status
}

async fn send(c: &mut Client, topic: &str, creds: Option<(&str, &str)>, n: usize) -> Option<pb::Status> {
    let message = pb::Message {
        topic: res(topic),
        system_properties: Some(pb::SystemProperties {
            message_id: message_id(n),
            body_encoding: pb::Encoding::Identity as i32,
            message_type: pb::MessageType::Normal as i32,
            ..Default::default()
        }),
        body: format!("acl-proxy-{n}").into_bytes(),
        ..Default::default()
    };
    let r = c.send_message(signed("acl-send", pb::SendMessageRequest { messages: vec![message] }, creds));
    tokio::time::timeout(RPC_TIMEOUT, r).await.expect("SendMessage in time").expect("answered").into_inner().status
}

/// Opens Telemetry signed as `creds` and sends `settings`: the server's first answer, and
/// whether the server ended the stream right after it.
async fn telemetry(
    c: &mut Client,
    client_id: &str,
    settings: pb::Settings,
    creds: (&str, &str),
) -> (pb::TelemetryCommand, bool) {
    let (tx, rx) = mpsc::channel(4);
    tx.send(pb::TelemetryCommand { status: None, command: Some(Tc::Settings(settings)) }).await.unwrap();
    let mut r = tonic::Request::new(ReceiverStream::new(rx));
    r.metadata_mut().insert("x-mq-client-id", client_id.parse().unwrap());
    r.metadata_mut().insert("x-mq-language", "RUST".parse().unwrap());
    sign(r.metadata_mut(), Some(creds));
    let mut inbound = tokio::time::timeout(RPC_TIMEOUT, c.telemetry(r))
        .await
        .expect("telemetry opens in time")
        .expect("telemetry opens")
        .into_inner();
    let first = tokio::time::timeout(RPC_TIMEOUT, inbound.next())
        .await
        .expect("an answer in time")
        .expect("an answer")
        .expect("not a stream error");
    // A refused stream ends at once; an accepted one stays open (the client keeps it), so
    // waiting a moment for its end tells them apart.
    let ended = matches!(tokio::time::timeout(Duration::from_secs(2), inbound.next()).await, Ok(None | Some(Err(_))));
    drop(tx);
    (first, ended)
}

/// Polls until `probe` is true, at most [`WAIT`].
async fn eventually<F, Fut>(c: &Cluster, what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        match probe().await {
            Ok(()) => return,
            Err(last) => assert!(Instant::now() < deadline, "{what} never happened; last: {last}\n{}", c.logs()),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_proxy_checks_its_clients_against_the_brokers_users_and_acls() {
    let c = Cluster::start();
    for t in ["orders", "payments"] {
        c.admin_ok(&["updateTopic", "-t", t, "-r", "4", "-w", "4", "-a", "+message.type=NORMAL"]);
    }
    c.admin_ok(&["createUser", "-u", ALICE.0, "-p", ALICE.1]);
    c.admin_ok(&["createAcl", "-s", "User:alice", "-r", "Topic:orders", "-a", "Pub", "-d", "Allow"]);
    c.admin_ok(&["createUser", "-u", BOB.0, "-p", BOB.1]);
    c.admin_ok(&["createAcl", "-s", "User:bob", "-r", "Topic:orders,Group:billing", "-a", "Sub", "-d", "Allow"]);

    // The proxy has read alice and her ACL, and the name server routes the topic.
    let mut g = connect(&c.grpc_addr).await;
    eventually(&c, "alice's QueryRoute through the proxy", || {
        let mut g = g.clone();
        async move {
            let s = query_route(&mut g, "orders", Some(ALICE)).await;
            if code(&s) == Code::Ok {
                Ok(())
            } else {
                Err(status_text(&s))
            }
        }
    })
    .await;

    // gRPC: authentication.
    let s = query_route(&mut g, "orders", None).await;
    assert_eq!((code(&s), status_text(&s)), (Code::Unauthorized, "Unauthorized: username cannot be null.".into()));
    let s = query_route(&mut g, "orders", Some((ALICE.0, "wrong"))).await;
    assert_eq!((code(&s), status_text(&s)), (Code::Unauthorized, "Unauthorized: check signature failed.".into()));
    let s = send(&mut g, "orders", None, 1).await;
    assert_eq!(code(&s), Code::Unauthorized, "{}", status_text(&s));

    // gRPC: authorization. The allowed send reaches the broker, which checks the proxy's
    // own signature (an unsigned proxy would be refused there).
    let s = send(&mut g, "orders", Some(ALICE), 2).await;
    assert_eq!(code(&s), Code::Ok, "{}\n{}", status_text(&s), c.logs());
    let s = send(&mut g, "payments", Some(ALICE), 3).await;
    assert_eq!(code(&s), Code::Unauthorized);
    let text = status_text(&s);
    assert!(text.contains("User:alice has no permission to access Topic:payments from 127.0.0.1"), "{text}");

    // Telemetry: Settings are authorized as what the client will do.
    let (first, ended) = telemetry(&mut g, "acl-producer-ok", producer_settings(&["orders"]), ALICE).await;
    assert_eq!(code(&first.status), Code::Ok, "{}", status_text(&first.status));
    assert!(matches!(first.command, Some(Tc::Settings(_))), "{first:?}");
    assert!(!ended, "an accepted telemetry stream stays open");
    let (first, ended) = telemetry(&mut g, "acl-producer-no", producer_settings(&["payments"]), ALICE).await;
    assert_eq!(code(&first.status), Code::Unauthorized, "{first:?}");
    assert!(status_text(&first.status).contains("User:alice has no permission to access Topic:payments"));
    assert!(first.command.is_none() && ended, "a refused Settings gets a status only, then the stream ends");
    let (first, _) =
        telemetry(&mut g, "acl-consumer-ok", consumer_settings(ClientType::SimpleConsumer, "billing", "orders"), BOB)
            .await;
    assert_eq!(code(&first.status), Code::Ok, "{}", status_text(&first.status));
    let (first, ended) =
        telemetry(&mut g, "acl-consumer-no", consumer_settings(ClientType::SimpleConsumer, "audit", "orders"), BOB)
            .await;
    assert_eq!(code(&first.status), Code::Unauthorized, "{first:?}");
    assert!(status_text(&first.status).contains("User:bob has no permission to access Group:audit"));
    assert!(ended);

    // A user created on the broker after the proxy started is usable after the refresh.
    let s = send(&mut g, "payments", Some(CAROL), 4).await;
    assert_eq!(status_text(&s), "Unauthorized: User:carol is not found.");
    c.admin_ok(&["createUser", "-u", CAROL.0, "-p", CAROL.1]);
    c.admin_ok(&["createAcl", "-s", "User:carol", "-r", "Topic:payments", "-a", "Pub", "-d", "Allow"]);
    let mut n = 100;
    eventually(&c, "carol's send through the proxy after the refresh", || {
        let mut g = g.clone();
        n += 1;
        let n = n;
        async move {
            let s = send(&mut g, "payments", Some(CAROL), n).await;
            if code(&s) == Code::Ok {
                Ok(())
            } else {
                Err(status_text(&s))
            }
        }
    })
    .await;

    // The remoting port: our client produces through the proxy as alice.
    let p = c.remoting_producer("acl-remoting-alice", Some(ALICE));
    p.start().await.unwrap_or_else(|e| panic!("producer start: {e}\n{}", c.logs()));
    p.send(Message::new("orders", b"remoting-ok".to_vec()))
        .await
        .unwrap_or_else(|e| panic!("alice's send through the remoting port: {e:#}\n{}", c.logs()));
    let e = format!("{:#}", p.send(Message::new("payments", b"remoting-no".to_vec())).await.expect_err("not alice's"));
    assert!(e.contains("User:alice has no permission to access Topic:payments from 127.0.0.1"), "{e}");
    p.shutdown().await;
    for (creds, expected) in [(None, "username cannot be null."), (Some((ALICE.0, "wrong")), "check signature failed.")]
    {
        let p = c.remoting_producer("acl-remoting-refused", creds);
        let outcome = match p.start().await {
            Ok(()) => p.send(Message::new("orders", b"refused".to_vec())).await.map(drop).map_err(|e| format!("{e:#}")),
            Err(e) => Err(e.to_string()),
        };
        p.shutdown().await;
        let e = outcome.expect_err("refused");
        assert!(e.contains(expected), "{creds:?}: {e}");
    }
    let mut pull = pull_request("orders", 0, 0, "*", 0);
    pull.ext_fields.insert("consumerGroup".into(), "audit");
    let (code_, remark) = c.raw(&c.remoting_addr, BOB, pull).await;
    assert_eq!(
        (code_, remark.as_str()),
        (
            response_code::NO_PERMISSION,
            "User:bob has no permission to access Group:audit from 127.0.0.1, no matched policies."
        )
    );

    // Relayed requests carry the proxy's user: QUERY_CONSUMER_OFFSET, which this proxy does
    // not authorize, is refused by the broker when bob signs it there, and served when the
    // proxy relays it.
    let query = || {
        let mut r = RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET);
        r.ext_fields.insert("consumerGroup".into(), "audit");
        r.ext_fields.insert("topic".into(), "orders");
        r.ext_fields.insert("queueId".into(), "0");
        r
    };
    let (direct, remark) = c.raw(&c.broker.addr(), BOB, query()).await;
    assert_eq!(direct, response_code::NO_PERMISSION, "the broker itself refuses bob: {remark}");
    let (relayed, remark) = c.raw(&c.remoting_addr, BOB, query()).await;
    assert_ne!(relayed, response_code::NO_PERMISSION, "relayed as the proxy's SUPER user: {remark}\n{}", c.logs());
}

/// Provider classes the cluster proxy has no stand-in for, and credentials that are not
/// `{"accessKey":..,"secretKey":..}`, stop it before it serves, every problem named.
#[test]
fn unusable_acl_settings_stop_the_proxy_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let json = format!(
        r#"{{"grpcServerPort": {port}, "remotingListenPort": 0, "tls.server.mode": "disabled",
  "authenticationEnabled": true,
  "authenticationMetadataProvider": "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
  "authorizationProvider": "com.example.MyAuthorizationProvider",
  "innerClientAuthenticationCredentials": "{{\"accessKey\":\"proxy-inner\"}}"}}
"#
    );
    let log = dir.path().join("proxy.log");
    let started =
        spawn_listening(&["proxy", "-n", "127.0.0.1:9"], &dir.path().join("rmq-proxy.json"), &json, &log, port);
    let Err(e) = started else { panic!("the proxy started with unusable ACL settings:\n{}", tail(&log, 20)) };
    assert!(e.contains("exited"), "{e}");
    for part in [
        "authenticationMetadataProvider=org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
        "org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider",
        "authorizationProvider=com.example.MyAuthorizationProvider",
        "innerClientAuthenticationCredentials",
    ] {
        assert!(e.contains(part), "the start error does not name {part}:\n{e}");
    }
}
