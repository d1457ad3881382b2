//! The cluster proxy's remoting port (`remotingListenPort`) as real processes: `ferromq namesrv`,
//! two broker groups and `ferromq proxy`, with remoting clients that know only the proxy (their
//! name server address is the proxy's remoting port, as with Java's proxy).
//!
//! - Routes name both broker groups at the proxy's address; unknown topics, malformed
//!   heartbeats and unsupported codes get RocketMQ's codes and the proxy keeps serving.
//! - A request without `bname` (a 4.x client) is served when its topic lives on one broker
//!   group and refused with VERSION_NOT_SUPPORTED, naming the groups, when it could go to two.
//! - The Rust client (5.x style: it names the broker) produces to a topic on both groups; a push
//!   consumer through the proxy (route, heartbeat, consumer list, offsets, PULL relayed)
//!   receives every message; a transactional message left UNKNOWN is committed by the
//!   check-back the broker sends through the proxy to the producer.
//! - The official C++ client (4.x; PyPI `rocketmq` through `compat/python/e2e.py`), which names
//!   no broker, produces and push-consumes on the one-group topic through the proxy.
//! - GET_CONSUMER_CONNECTION_LIST (mqadmin `consumerConnection`) answered by the proxy: its
//!   remoting and gRPC members, CONSUMER_NOT_ONLINE for a group with none.
//! - gRPC on the remoting port (`enableRemotingLocalProxyGrpc`): a SendMessage reaches the
//!   remoting push consumer; the gRPC consumers below connect there too.
//! - Two gRPC consumers of one group through the proxy: the first leaving does not unregister
//!   the group from the brokers (they know the proxy's clients by its connection).
//! - broker-b is SIGKILLed: sends carry on on broker-a, and every acknowledged message sent
//!   after the kill is consumed.
//!
//! Every wait is bounded. `FERROMQ_TEST_LOGS=1` shows the servers' output.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferromq_client::{
    ClientConfig, ConsumeFromWhere, ConsumeStatus, LocalTransactionState, Message, MessageExt, Producer,
    ProducerConfig, PushConsumer, PushConsumerConfig, SendStatus, TransactionListener, TransactionProducer,
};
use ferromq_protocol::body::{
    ConsumeType, ConsumerConnection, ConsumerListByGroupResponseBody, JsonBody, TopicRouteData,
};
use ferromq_protocol::header::{
    pull_sys_flag, GetConsumerConnectionListRequestHeader, GetConsumerListByGroupRequestHeader,
    GetRouteInfoRequestHeader, PullMessageRequestHeader,
};
use ferromq_protocol::{request_code, response_code, LanguageCode, RemotingCommand};
use ferromq_remoting::RemotingClient;
use ferromq_testkit::{free_port, send_request, ChildProcess};

mod common;
use common::cluster::{
    port_away_from, spawn_listening, start_brokers, start_namesrv, start_on_free_port, tail, Broker,
};
use common::e2e::{dir_tail, run_e2e};
use common::grpc::{code, connect, consumer_settings, req, res, telemetry};
use ferromq_proxy::pb::{self, ClientType, Code};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
/// On both broker groups.
const TWO: &str = "ProxyRemotingTwo";
/// On broker-a only.
const ONE: &str = "ProxyRemotingOne";
const GROUP: &str = "ProxyRemotingG";
const TX_GROUP: &str = "ProxyRemotingTxPG";
/// On broker-a only, never written: a pull there waits at the broker (long polling).
const IDLE: &str = "ProxyRemotingIdle";
/// On both broker groups, `message.type=TRANSACTION`.
const TX_TOPIC: &str = "ProxyRemotingTx";
const WAIT: Duration = Duration::from_secs(40);
const RPC: Duration = Duration::from_secs(5);

struct Cluster {
    dir: tempfile::TempDir,
    namesrv: String,
    _namesrv_process: ChildProcess,
    brokers: [Broker; 2],
    proxy: ChildProcess,
    /// The proxy's remoting port address.
    remoting_addr: String,
    client: RemotingClient,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().to_owned();
        let (namesrv_process, ns_port) = start_namesrv(&path);
        let namesrv = format!("127.0.0.1:{ns_port}");
        let mut taken = vec![ns_port];
        // Half messages are checked back a second after they were sent.
        let brokers = start_brokers(
            &path,
            &namesrv,
            ["broker-a", "broker-b"],
            "transactionCheckInterval=1000\ntransactionTimeOut=1000\n",
            &mut taken,
        );
        let remoting_port = port_away_from(&taken, free_port);
        taken.push(remoting_port);
        let (proxy, _grpc_port) = start_on_free_port(
            || port_away_from(&taken, free_port),
            |port| {
                let json = format!(
                    "{{\"grpcServerPort\": {port}, \"remotingListenPort\": {remoting_port}, \
                     \"tls.server.mode\": \"disabled\"}}\n"
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
        let deadline = Instant::now() + Duration::from_secs(10);
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
            brokers,
            proxy,
            remoting_addr,
            client: RemotingClient::new(ferromq_remoting::ClientConfig::default()),
        }
    }

    fn logs(&self) -> String {
        ["namesrv", "broker-a", "broker-b", "proxy"]
            .iter()
            .map(|name| format!("--- {name}.log:\n{}\n", tail(&self.dir.path().join(format!("{name}.log")), 30)))
            .collect()
    }

    /// `admin updateTopic -b <broker>` on each of `brokers`, then waits until the name server
    /// routes the topic to exactly those groups.
    async fn create_topic(&self, topic: &str, brokers: &[usize]) {
        self.create_topic_with(topic, brokers, &[]).await;
    }

    /// [`Cluster::create_topic`] with more `updateTopic` arguments (attributes).
    async fn create_topic_with(&self, topic: &str, brokers: &[usize], more: &[&str]) {
        for &i in brokers {
            let out = Command::new(BIN)
                .args(["admin", "updateTopic", "-b", &self.brokers[i].addr(), "-t", topic, "-r", "4", "-w", "4"])
                .args(more)
                .args(["-n", &self.namesrv])
                .output()
                .expect("admin runs");
            assert!(
                out.status.success(),
                "updateTopic {topic} on {}: {}{}",
                self.brokers[i].name,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let want: BTreeSet<&str> = brokers.iter().map(|&i| self.brokers[i].name).collect();
        let deadline = Instant::now() + WAIT;
        loop {
            let have: BTreeSet<String> = self
                .route_at(&self.namesrv, topic)
                .await
                .map(|r| r.broker_datas.iter().map(|b| b.broker_name.clone()).collect())
                .unwrap_or_default();
            if have.iter().map(String::as_str).collect::<BTreeSet<_>>() == want {
                return;
            }
            assert!(Instant::now() < deadline, "{topic} never routed to {want:?} (have {have:?})\n{}", self.logs());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// GET_CONSUMER_CONNECTION_LIST of `group`, asked of the proxy.
    async fn connection_list(&self, group: &str) -> RemotingCommand {
        self.call(
            RemotingCommand::request(request_code::GET_CONSUMER_CONNECTION_LIST)
                .with_header(&GetConsumerConnectionListRequestHeader { consumer_group: group.into() }),
        )
        .await
    }

    async fn call(&self, req: RemotingCommand) -> RemotingCommand {
        self.client
            .invoke(&self.remoting_addr, req, RPC)
            .await
            .unwrap_or_else(|e| panic!("proxy call: {e}\n{}", self.logs()))
    }

    async fn route_at(&self, addr: &str, topic: &str) -> Option<TopicRouteData> {
        let req = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)
            .with_header(&GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: Some(true) });
        let r = self.client.invoke(addr, req, RPC).await.ok()?;
        (r.code == response_code::SUCCESS).then(|| TopicRouteData::decode(&r.body).ok()).flatten()
    }

    /// GET_CONSUMER_LIST_BY_GROUP asked of the broker at `addr` directly (empty when it knows
    /// no consumer of the group).
    async fn broker_consumers(&self, addr: &str, group: &str) -> Vec<String> {
        let req = RemotingCommand::request(request_code::GET_CONSUMER_LIST_BY_GROUP)
            .with_header(&GetConsumerListByGroupRequestHeader { consumer_group: group.into() });
        let r = self.client.invoke(addr, req, RPC).await.unwrap_or_else(|e| panic!("broker {addr}: {e}"));
        if r.code != response_code::SUCCESS {
            return Vec::new();
        }
        ConsumerListByGroupResponseBody::decode(&r.body).map(|b| b.consumer_id_list).unwrap_or_default()
    }

    fn client_config(&self, instance: &str) -> ClientConfig {
        ClientConfig {
            client_ip: "127.0.0.1".to_owned(),
            instance_name: instance.to_owned(),
            ..ClientConfig::with_namesrv(&self.remoting_addr)
        }
    }
}

/// A normal message as a 5.x client sends it.
fn grpc_message(topic: &str, body: &str) -> pb::Message {
    pb::Message {
        topic: res(topic),
        user_properties: Default::default(),
        system_properties: Some(pb::SystemProperties {
            message_id: format!("01{:030X}", body.len()),
            body_encoding: pb::Encoding::Identity as i32,
            message_type: pb::MessageType::Normal as i32,
            born_timestamp: Some(prost_types::Timestamp { seconds: 1_700_000_000, nanos: 0 }),
            born_host: "127.0.0.1".into(),
            ..Default::default()
        }),
        body: body.as_bytes().to_vec(),
    }
}

fn text(m: &MessageExt) -> String {
    String::from_utf8_lossy(m.body()).into_owned()
}

type Seen = Arc<Mutex<BTreeSet<String>>>;

async fn wait_for_all(c: &Cluster, seen: &Seen, want: &BTreeSet<String>, what: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let missing: Vec<String> = want.difference(&seen.lock().unwrap()).cloned().collect();
        if missing.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: never consumed {missing:?}\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Leaves a half message UNKNOWN (bodies `check-`) and commits it when checked back.
struct CommitOnCheck {
    checked: Mutex<Vec<String>>,
}

impl TransactionListener for CommitOnCheck {
    type Arg = ();

    fn execute_local_transaction(&self, msg: &Message, _arg: &()) -> LocalTransactionState {
        if msg.body.starts_with(b"check-") {
            LocalTransactionState::Unknown
        } else {
            LocalTransactionState::CommitMessage
        }
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        self.checked.lock().unwrap().push(text(msg));
        LocalTransactionState::CommitMessage
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remoting_clients_through_the_cluster_proxy() {
    let mut c = Cluster::start();
    c.create_topic(TWO, &[0, 1]).await;
    c.create_topic(ONE, &[0]).await;
    c.create_topic(IDLE, &[0]).await;
    c.create_topic_with(TX_TOPIC, &[0, 1], &["-a", "+message.type=TRANSACTION"]).await;

    // Routes: both groups, every address the proxy's.
    let route =
        c.route_at(&c.remoting_addr, TWO).await.unwrap_or_else(|| panic!("no route through the proxy\n{}", c.logs()));
    let names: BTreeSet<&str> = route.broker_datas.iter().map(|b| b.broker_name.as_str()).collect();
    assert_eq!(names, BTreeSet::from(["broker-a", "broker-b"]));
    for b in &route.broker_datas {
        assert!(b.broker_addrs.values().all(|a| *a == c.remoting_addr), "addresses not rewritten: {b:?}");
    }
    assert_eq!(route.queue_datas.len(), 2);

    // The proxy's own refusals; it keeps serving after each.
    let unknown =
        c.call(RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(
            &GetRouteInfoRequestHeader { topic: "NoSuchTopicHere".into(), accept_standard_json_only: None },
        ))
        .await;
    assert_eq!(unknown.code, response_code::TOPIC_NOT_EXIST, "{:?}", unknown.remark);
    let garbage = c.call(RemotingCommand::request(request_code::HEART_BEAT).with_body(&b"{not json"[..])).await;
    assert_eq!(garbage.code, response_code::SYSTEM_ERROR, "{:?}", garbage.remark);
    let unsupported = c.call(RemotingCommand::request(request_code::GET_BROKER_CLUSTER_INFO)).await;
    assert_eq!(unsupported.code, response_code::REQUEST_CODE_NOT_SUPPORTED);

    // No bname (a 4.x client): one group serves, two are ambiguous.
    let one = c.call(send_request(ONE, 0, b"no-bname-one", &[])).await;
    assert_eq!(one.code, response_code::SUCCESS, "{:?}\n{}", one.remark, c.logs());
    let two = c.call(send_request(TWO, 0, b"no-bname-two", &[])).await;
    assert_eq!(two.code, response_code::VERSION_NOT_SUPPORTED, "{:?}", two.remark);
    let remark = two.remark.unwrap_or_default();
    assert!(remark.contains(TWO) && remark.contains("broker-a") && remark.contains("broker-b"), "{remark}");

    // A push consumer and producers that know only the proxy.
    let consumer = PushConsumer::new(
        PushConsumerConfig {
            group: GROUP.to_owned(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            rebalance_interval: Duration::from_millis(500),
            persist_consumer_offset_interval: Duration::from_millis(500),
            ..PushConsumerConfig::default()
        },
        c.client_config("proxy-consumer"),
    );
    consumer.subscribe(TWO, "*").await.unwrap();
    consumer.subscribe(TX_TOPIC, "*").await.unwrap();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    consumer.register_listener(move |msgs| {
        log.lock().unwrap().extend(msgs.iter().map(text));
        ConsumeStatus::ConsumeSuccess
    });
    consumer.start().await.unwrap_or_else(|e| panic!("consumer start: {e}\n{}", c.logs()));

    let producer = Producer::new(
        ProducerConfig { group: "ProxyRemotingPG".to_owned(), ..ProducerConfig::default() },
        c.client_config("proxy-producer"),
    );
    producer.start().await.unwrap();
    let mut want = BTreeSet::new();
    let mut used = BTreeSet::new();
    for i in 0..24 {
        let body = format!("m-{i}");
        let r = producer
            .send(Message::new(TWO, body.clone()))
            .await
            .unwrap_or_else(|e| panic!("send {i}: {e}\n{}", c.logs()));
        assert_eq!(r.status, SendStatus::SendOk);
        used.insert(r.message_queue.broker_name.clone());
        want.insert(body);
    }
    assert_eq!(used.len(), 2, "sends went to both groups: {used:?}");
    wait_for_all(&c, &seen, &want, "push consumer through the proxy").await;

    // The group's members, as the proxy knows them.
    let list = c
        .call(
            RemotingCommand::request(request_code::GET_CONSUMER_LIST_BY_GROUP)
                .with_header(&GetConsumerListByGroupRequestHeader { consumer_group: GROUP.into() }),
        )
        .await;
    assert_eq!(list.code, response_code::SUCCESS, "{:?}", list.remark);
    let ids = ConsumerListByGroupResponseBody::decode(&list.body).unwrap().consumer_id_list;
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert!(ids[0].contains("proxy-consumer"), "{ids:?}");
    // mqadmin consumerConnection through the proxy: the member, how it consumes and what.
    let conns = c.connection_list(GROUP).await;
    assert_eq!(conns.code, response_code::SUCCESS, "{:?}", conns.remark);
    let conns = ConsumerConnection::decode(&conns.body).unwrap();
    assert_eq!(conns.connection_set.len(), 1, "{conns:?}");
    assert!(conns.connection_set[0].client_id.contains("proxy-consumer"), "{conns:?}");
    assert!(conns.connection_set[0].client_addr.starts_with("127.0.0.1:"), "{conns:?}");
    assert_eq!(conns.consume_type, ConsumeType::ConsumePassively);
    assert!(conns.subscription_table.contains_key(TWO), "{conns:?}");
    let nobody = c.connection_list("NoSuchGroupHere").await;
    assert_eq!(nobody.code, response_code::CONSUMER_NOT_ONLINE, "{:?}", nobody.remark);

    // A transaction left UNKNOWN is committed by the check-back relayed through the proxy.
    let listener = Arc::new(CommitOnCheck { checked: Mutex::default() });
    let tx = TransactionProducer::new(
        ProducerConfig { group: TX_GROUP.to_owned(), ..ProducerConfig::default() },
        c.client_config("proxy-tx"),
        listener.clone(),
    );
    tx.start().await.unwrap();
    // The proxy checks a send's type against its topic's `message.type`, as Java's does: a
    // transaction to a NORMAL topic is refused, normal messages to the TRANSACTION topic too.
    let refused = tx.send_message_in_transaction(Message::new(TWO, "tx-to-normal"), ()).await;
    let refused = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(refused.contains("expected type is NORMAL, but actual type is TRANSACTION"), "{refused}");
    // (Checked before the request is routed: no broker named, two groups.)
    let normal_to_tx = c.call(send_request(TX_TOPIC, 0, b"normal-to-tx", &[])).await;
    assert_eq!(normal_to_tx.code, response_code::MESSAGE_ILLEGAL, "{:?}", normal_to_tx.remark);
    for body in ["commit-0", "check-0"] {
        tx.send_message_in_transaction(Message::new(TX_TOPIC, body), ())
            .await
            .unwrap_or_else(|e| panic!("{body}: {e}"));
        want.insert(body.to_owned());
    }
    wait_for_all(&c, &seen, &want, "transactional messages").await;
    assert!(listener.checked.lock().unwrap().contains(&"check-0".to_owned()), "the commit came from a check-back");
    tx.shutdown().await;

    // The 4.x C++ client (it names no broker) on the one-group topic: produce, then push-consume
    // everything ONE holds (the bname-less raw send above included).
    let home = c.dir.path().join("cpp");
    for (label, args) in [
        ("cpp-produce", vec!["produce", "--topic", ONE, "--group", "ProxyRemotingCppPG", "--count", "10"]),
        (
            "cpp-consume",
            vec![
                "push-consume",
                "--topic",
                ONE,
                "--group",
                "ProxyRemotingCppCG",
                "--expect",
                "11",
                "--settle-s",
                "0.5",
            ],
        ),
    ] {
        let run = match run_e2e(label, &home.join(label), &args, &c.remoting_addr, 40) {
            (run, None) => run,
            (run, Some(why)) => panic!("{why}\n{}\n{}", run.stdout, c.logs()),
        };
        if run.status.code() != Some(0) || run.done().and_then(|d| d.bool("ok")) != Some(true) {
            panic!(
                "{label} through the proxy: {}\n--- stdout:\n{}\n--- stderr:\n{}\n--- C++ log:\n{}\n{}",
                run.status,
                run.stdout,
                run.stderr,
                dir_tail(&run.client_log_dir, 40),
                c.logs()
            );
        }
    }

    // A gRPC client on the remoting port (the HTTP/2 preface hands it to the gRPC server,
    // `enableRemotingLocalProxyGrpc`): its message reaches the remoting push consumer.
    let mut on_remoting_port = connect(&c.remoting_addr).await;
    let sent = on_remoting_port
        .send_message(req(
            "grpc-on-8080",
            pb::SendMessageRequest { messages: vec![grpc_message(TWO, "via-remoting-port")] },
        ))
        .await
        .unwrap_or_else(|e| panic!("gRPC SendMessage on the remoting port: {e}\n{}", c.logs()))
        .into_inner();
    assert_eq!(code(&sent.status), Code::Ok, "{sent:?}");
    want.insert("via-remoting-port".to_owned());
    wait_for_all(&c, &seen, &want, "a gRPC send on the remoting port").await;

    // Two gRPC consumers of one group: brokers know the proxy's clients by its connection, so
    // the first one leaving must not unregister the group the second still consumes for. They
    // also connect through the remoting port (Telemetry streams and all).
    let grpc_group = "ProxyRemotingGrpcG";
    let broker_a = c.brokers[0].addr();
    let mut g = on_remoting_port;
    let mut streams = Vec::new();
    for id in ["grpc-c1", "grpc-c2"] {
        streams.push(telemetry(&mut g, id, consumer_settings(ClientType::SimpleConsumer, grpc_group, TWO)).await);
        let hb = g
            .heartbeat(req(
                id,
                pb::HeartbeatRequest { group: res(grpc_group), client_type: ClientType::SimpleConsumer as i32 },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&hb.status), Code::Ok, "{hb:?}");
    }
    assert!(!c.broker_consumers(&broker_a, grpc_group).await.is_empty(), "registered with broker-a\n{}", c.logs());
    let conns = c.connection_list(grpc_group).await;
    assert_eq!(conns.code, response_code::SUCCESS, "{:?}", conns.remark);
    let conns = ConsumerConnection::decode(&conns.body).unwrap();
    let ids: Vec<&str> = conns.connection_set.iter().map(|m| m.client_id.as_str()).collect();
    assert_eq!(ids, ["grpc-c1", "grpc-c2"], "{conns:?}");
    assert!(conns.connection_set.iter().all(|m| m.language == LanguageCode::Rust), "{conns:?}");
    // Java's parse of the version: "5.0.0" is no version name, so its own version.
    assert!(conns.connection_set.iter().all(|m| m.version == ferromq_protocol::version::CURRENT), "{conns:?}");
    assert_eq!(conns.consume_type, ConsumeType::ConsumeActively, "simple consumers");
    let bye = g
        .notify_client_termination(req("grpc-c1", pb::NotifyClientTerminationRequest { group: res(grpc_group) }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&bye.status), Code::Ok);
    assert!(
        !c.broker_consumers(&broker_a, grpc_group).await.is_empty(),
        "one consumer left; the group is still consumed through the proxy\n{}",
        c.logs()
    );
    let bye = g
        .notify_client_termination(req("grpc-c2", pb::NotifyClientTerminationRequest { group: res(grpc_group) }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&bye.status), Code::Ok);
    assert!(c.broker_consumers(&broker_a, grpc_group).await.is_empty(), "the last one left");
    drop(streams);

    // broker-b dies: sends carry on on broker-a, and are consumed.
    c.brokers[1].kill();
    let mut after = BTreeSet::new();
    for i in 0..12 {
        let body = format!("after-{i}");
        match producer.send(Message::new(TWO, body.clone())).await {
            Ok(r) if r.status == SendStatus::SendOk => {
                assert_eq!(r.message_queue.broker_name, "broker-a", "acknowledged by a dead broker?");
                after.insert(body);
            }
            other => eprintln!("send {body} after the kill: {other:?}"),
        }
    }
    assert!(after.len() >= 6, "most sends after the kill succeed: {after:?}\n{}", c.logs());
    wait_for_all(&c, &seen, &after, "messages sent after broker-b died").await;

    producer.shutdown().await;
    consumer.shutdown().await;
    // The proxy still answers.
    assert!(c.route_at(&c.remoting_addr, ONE).await.is_some(), "{}", c.logs());

    // SIGTERM: a relayed long poll waiting at its broker is answered at once (SYSTEM_BUSY, the
    // client pulls again elsewhere), the remoting port drains, then gRPC, then the broker
    // connections close; a clean exit.
    let pull = RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&PullMessageRequestHeader {
        consumer_group: "ProxyRemotingIdleG".into(),
        topic: IDLE.into(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: 32,
        sys_flag: pull_sys_flag::SUSPEND | pull_sys_flag::SUBSCRIPTION,
        suspend_timeout_millis: 30_000,
        subscription: Some("*".into()),
        expression_type: Some("TAG".into()),
        ..Default::default()
    });
    let long_poll = {
        let (client, addr) = (RemotingClient::new(ferromq_remoting::ClientConfig::default()), c.remoting_addr.clone());
        tokio::spawn(async move { client.invoke(&addr, pull, Duration::from_secs(40)).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!long_poll.is_finished(), "the pull of an empty queue waits at the broker");
    let pid = c.proxy.0.id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let answered = long_poll.await.unwrap().unwrap_or_else(|e| panic!("the long poll was cut, not answered: {e}"));
    assert_eq!(answered.code, response_code::SYSTEM_BUSY, "{:?}", answered.remark);
    assert!(answered.remark.unwrap_or_default().contains("shutting down"));
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = c.proxy.0.try_wait().unwrap() {
            assert!(status.success(), "clean exit on SIGTERM: {status:?}\n{}", c.logs());
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the proxy did not exit within 15 s of SIGTERM\n{}", c.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
