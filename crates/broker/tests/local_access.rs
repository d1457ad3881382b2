//! A broker's in-process access (the proxy's local mode) against a real broker and name
//! server on loopback: sends and pulls over an in-process connection reach the same processors
//! and store as TCP clients, the client tables list the connection under the caller's address,
//! the broker calls the in-process client back, and shutdown closes the connections.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferromq_broker::{BrokerError, LocalAccess};
use ferromq_namesrv::NamesrvConfig;
use ferromq_protocol::body::{HeartbeatData, JsonBody, ProducerConnection, ProducerData};
use ferromq_protocol::header::{
    GetConsumerRunningInfoRequestHeader, GetMaxOffsetRequestHeader, GetProducerConnectionListRequestHeader,
    OffsetResponseHeader, PullMessageResponseHeader, SendMessageResponseHeader,
};
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, Connection, Dispatcher, RemotingClient, RemotingError};
use ferromq_testkit::{consumer_heartbeat, pull_request, send_request, test_settings};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

const T: Duration = Duration::from_secs(10);

/// The address the in-process client claims; nothing listens there.
fn client_addr() -> SocketAddr {
    "192.0.2.10:50123".parse().unwrap()
}

/// A name server and a broker started with `run_with_local_access`, and the broker's handle.
struct Running {
    access: LocalAccess,
    /// The broker's TCP address, for requests from a remote client.
    tcp_addr: String,
    stop: oneshot::Sender<()>,
    broker: JoinHandle<Result<(), BrokerError>>,
    ns_stop: oneshot::Sender<()>,
    ns: JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Running {
    async fn start() -> Running {
        let dir = tempfile::tempdir().unwrap();
        let ns_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let ns_addr = ns_listener.local_addr().unwrap().to_string();
        let ns_config = NamesrvConfig {
            kv_config_path: dir.path().join("kv.json"),
            config_store_path: dir.path().join("namesrv.properties"),
            ..NamesrvConfig::default()
        };
        let (ns_stop, ns_stopped) = oneshot::channel::<()>();
        let ns = tokio::spawn(async move {
            ferromq_namesrv::run(ns_config, ns_listener, async {
                let _ = ns_stopped.await;
            })
            .await
            .unwrap();
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp_addr = listener.local_addr().unwrap().to_string();
        let settings = test_settings(dir.path(), &ns_addr);
        let (stop, stopped) = oneshot::channel::<()>();
        let (ready, access) = oneshot::channel();
        let broker = tokio::spawn(ferromq_broker::run_with_local_access(
            settings,
            listener,
            async {
                let _ = stopped.await;
            },
            ready,
        ));
        let access = tokio::time::timeout(T, access).await.expect("broker ready in time").expect("broker starts");
        Running { access, tcp_addr, stop, broker, ns_stop, ns, _dir: dir }
    }

    /// Stops the broker (waiting for `run` to return Ok) and the name server; returns the
    /// handle, which outlives the broker.
    async fn stop(self) -> LocalAccess {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(30), self.broker)
            .await
            .expect("broker stops in time")
            .unwrap()
            .expect("broker stops cleanly");
        let _ = self.ns_stop.send(());
        tokio::time::timeout(T, self.ns).await.expect("name server stops").unwrap();
        self.access
    }
}

async fn invoke(conn: &Connection, request: RemotingCommand) -> RemotingCommand {
    conn.invoke(request, T).await.unwrap()
}

/// Pulls queue `queue_id` of `topic` over `conn` from offset 0 until `count` messages come back
/// (dispatch to the consume queue runs behind the send's answer).
async fn pull_over(conn: &Connection, topic: &str, queue_id: i32, count: usize) -> Vec<StoredMessage> {
    let deadline = Instant::now() + T;
    let mut out = Vec::new();
    let mut next = 0;
    while out.len() < count {
        assert!(Instant::now() < deadline, "{count} messages pulled in time, got {}", out.len());
        let r = invoke(conn, pull_request(topic, queue_id, next, "*", 500)).await;
        if r.code == response_code::SUCCESS {
            out.extend(StoredMessage::decode_all(&r.body).unwrap());
            next = r.decode_header::<PullMessageResponseHeader>().unwrap().next_begin_offset;
        }
    }
    out
}

fn producer_list(group: &str) -> RemotingCommand {
    RemotingCommand::request(request_code::GET_PRODUCER_CONNECTION_LIST)
        .with_header(&GetProducerConnectionListRequestHeader { producer_group: group.into() })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_connection_sends_and_pulls_through_the_brokers_own_processors() {
    let running = Running::start().await;
    let access = running.access.clone();
    assert_eq!(access.broker_addr(), running.tcp_addr, "brokerIP1:listenPort of the bound listener");
    assert_eq!(access.broker_name(), "broker-a");
    assert_eq!(access.cluster_name(), "DefaultCluster");
    let conn = access.connect(Arc::new(Dispatcher::new()), client_addr());
    assert_eq!(conn.remote_addr().to_string(), access.broker_addr());

    let topic = "LocalAccessTopic";
    for i in 0..3 {
        let r = invoke(&conn, send_request(topic, 0, format!("m{i}").as_bytes(), &[("TAGS", "t")])).await;
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        assert_eq!(r.decode_header::<SendMessageResponseHeader>().unwrap().queue_offset, i);
    }
    let pulled = pull_over(&conn, topic, 0, 3).await;
    let bodies: Vec<_> = pulled.iter().map(|m| String::from_utf8(m.body.to_vec()).unwrap()).collect();
    assert_eq!(bodies, ["m0", "m1", "m2"]);
    assert!(pulled.iter().all(|m| m.born_host == client_addr()), "the send processor saw the in-process client");

    // A remote client sees the same store.
    let tcp = RemotingClient::new(ClientConfig::default());
    let max = tcp
        .invoke(
            &running.tcp_addr,
            RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&GetMaxOffsetRequestHeader {
                topic: topic.into(),
                queue_id: 0,
                committed: None,
                broker_name: None,
                lo: None,
            }),
            T,
        )
        .await
        .unwrap();
    assert_eq!(max.code, response_code::SUCCESS, "{:?}", max.remark);
    assert_eq!(max.decode_header::<OffsetResponseHeader>().unwrap().offset, 3);
    tcp.shutdown().await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_producer_is_listed_under_its_client_addr_until_it_disconnects() {
    let running = Running::start().await;
    let conn = running.access.connect(Arc::new(Dispatcher::new()), client_addr());
    let heartbeat = HeartbeatData {
        client_id: "192.0.2.10@local-proxy".into(),
        producer_data_set: vec![ProducerData { group_name: "local-pg".into() }],
        ..Default::default()
    };
    let r = invoke(&conn, RemotingCommand::request(request_code::HEART_BEAT).with_body(heartbeat.encode())).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    let admin = RemotingClient::new(ClientConfig::default());
    let r = admin.invoke(&running.tcp_addr, producer_list("local-pg"), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let listed = ProducerConnection::decode(&r.body).unwrap().connection_set;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].client_addr, client_addr().to_string());
    assert_eq!(listed[0].client_id, "192.0.2.10@local-proxy");

    // Closing the in-process connection runs the broker's close hooks, as a TCP close does.
    conn.close();
    let deadline = Instant::now() + T;
    loop {
        let r = admin.invoke(&running.tcp_addr, producer_list("local-pg"), T).await.unwrap();
        if r.code == response_code::SYSTEM_ERROR {
            break;
        }
        assert!(Instant::now() < deadline, "the producer is forgotten after its connection closes");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    admin.shutdown().await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_calls_an_in_process_consumer_back_on_its_connection() {
    let running = Running::start().await;
    let mut client_side = Dispatcher::new();
    client_side.register_sync(request_code::GET_CONSUMER_RUNNING_INFO, |conn, req| {
        let body = format!("running, asked by {}", conn.remote_addr());
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body.into_bytes()))
    });
    let conn = running.access.connect(Arc::new(client_side), client_addr());
    let heartbeat = consumer_heartbeat("192.0.2.10@local-proxy", "local-cg", &["LocalAccessTopic"]);
    let r = invoke(&conn, RemotingCommand::request(request_code::HEART_BEAT).with_body(heartbeat.encode())).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    // An admin over TCP asks the broker, which forwards to the consumer's connection.
    let admin = RemotingClient::new(ClientConfig::default());
    let ask = RemotingCommand::request(request_code::GET_CONSUMER_RUNNING_INFO).with_header(
        &GetConsumerRunningInfoRequestHeader {
            consumer_group: "local-cg".into(),
            client_id: "192.0.2.10@local-proxy".into(),
            jstack_enable: None,
        },
    );
    let r = admin.invoke(&running.tcp_addr, ask, T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(String::from_utf8_lossy(&r.body), format!("running, asked by {}", running.access.broker_addr()));
    admin.shutdown().await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_shutdown_closes_in_process_connections_and_later_ones_are_born_closed() {
    let running = Running::start().await;
    let (closes_tx, mut closes) = mpsc::unbounded_channel();
    let mut client_side = Dispatcher::new();
    client_side.on_close(move |c| {
        let _ = closes_tx.send(c.remote_addr());
    });
    let conn = running.access.connect(Arc::new(client_side), client_addr());
    let r = invoke(&conn, send_request("LocalAccessTopic", 0, b"before stop", &[])).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    let access = running.stop().await;
    assert!(conn.is_closed(), "the broker's shutdown closed the in-process connection");
    let closed = tokio::time::timeout(T, closes.recv()).await.expect("client handler told of the close").unwrap();
    assert_eq!(closed.to_string(), access.broker_addr());

    let late = access.connect(Arc::new(Dispatcher::new()), client_addr());
    assert!(late.is_closed());
    let err = late.invoke(send_request("LocalAccessTopic", 0, b"after stop", &[]), T).await.unwrap_err();
    assert!(matches!(err, RemotingError::ConnectionClosed { .. }), "{err}");
}

fn service_send(topic: &str, body: ferromq_broker::service::SendBody) -> ferromq_broker::service::SendRequest {
    ferromq_broker::service::SendRequest {
        producer_group: "SvcProducer".into(),
        topic: topic.into(),
        queue_id: None,
        sys_flag: 0,
        born_timestamp_ms: 1_700_000_000_000,
        reconsume_times: 0,
        max_reconsume_times: None,
        auto_create: Some(ferromq_broker::service::AutoCreate { default_topic: "TBW102".into(), queue_nums: 4 }),
        body,
    }
}

fn one(body: &'static [u8], props: &str) -> ferromq_broker::service::BatchMessage {
    ferromq_broker::service::BatchMessage {
        body: bytes::Bytes::from_static(body),
        properties: ferromq_protocol::message::MessageProperties::decode(props),
        flag: 7,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_stores_sends_and_refuses_with_the_processors_codes() {
    use ferromq_broker::service::{AckRequest, Caller, SendBody, SendStatus, ServiceError};
    let running = Running::start().await;
    let access = running.access.clone();
    let svc = access.service().expect("service while the broker runs");
    let caller = Caller { remote_addr: "198.51.100.7:40001".parse().unwrap(), client_version: 479 };

    // One message, the queue left to the broker, the topic auto-created from TBW102.
    let receipt =
        svc.send(&caller, service_send("SvcTopic", SendBody::One(one(b"hello", "KEYS\u{1}k1\u{2}")))).await.unwrap();
    assert_eq!(receipt.status, SendStatus::Ok);
    assert!((0..4).contains(&receipt.queue_id), "a queue of the 4 created: {}", receipt.queue_id);
    assert_eq!(receipt.queue_offset, 0);
    let uniq = receipt.transaction_id.clone().expect("the UNIQ_KEY comes back");
    let first_queue = receipt.queue_id;
    let conn = access.connect(Arc::new(Dispatcher::new()), client_addr());
    let stored = pull_over(&conn, "SvcTopic", receipt.queue_id, 1).await;
    assert_eq!(&stored[0].body[..], b"hello");
    assert_eq!(stored[0].flag, 7);
    assert_eq!(stored[0].born_host, caller.remote_addr, "the caller's address is the born host");
    let props = ferromq_protocol::message::MessageProperties::decode(&stored[0].properties);
    assert_eq!(props.get("UNIQ_KEY"), Some(uniq.as_str()));
    assert_eq!(props.get("KEYS"), Some("k1"));
    assert_eq!(props.get("CLUSTER"), Some("DefaultCluster"));

    // A batch to one chosen queue: consecutive offsets, one id per message.
    let mut batch = service_send(
        "SvcTopic",
        SendBody::Batch { messages: vec![one(b"a", ""), one(b"b", ""), one(b"c", "")], properties: Default::default() },
    );
    batch.queue_id = Some(2);
    let receipt = svc.send(&caller, batch).await.unwrap();
    assert_eq!(receipt.queue_id, 2);
    assert_eq!(receipt.msg_id.split(',').count(), 3);
    assert_eq!(receipt.transaction_id, None);
    let stored = pull_over(&conn, "SvcTopic", 2, 3).await;
    let bodies: Vec<&[u8]> = stored.iter().map(|m| &m.body[..]).collect();
    assert!(bodies.ends_with(&[b"a", b"b", b"c"]), "{bodies:?}");

    // Refusals, each with the remoting processors' code.
    let bad_name = svc.send(&caller, service_send("bad topic!", SendBody::One(one(b"x", "")))).await.unwrap_err();
    assert!(matches!(bad_name, ServiceError::InvalidParameter(_)), "{bad_name:?}");
    assert_eq!(bad_name.remoting_code(), response_code::INVALID_PARAMETER);
    let mut no_create = service_send("SvcMissing", SendBody::One(one(b"x", "")));
    no_create.auto_create = None;
    let missing = svc.send(&caller, no_create).await.unwrap_err();
    assert_eq!(missing.remoting_code(), response_code::TOPIC_NOT_EXIST, "{missing}");
    let mut bad_queue = service_send("SvcTopic", SendBody::One(one(b"x", "")));
    bad_queue.queue_id = Some(99);
    let e = svc.send(&caller, bad_queue).await.unwrap_err();
    assert_eq!(e.remoting_code(), response_code::INVALID_PARAMETER);
    assert!(e.to_string().contains("queueId[99]") && e.to_string().contains("198.51.100.7"), "{e}");
    let delayed = SendBody::Batch { messages: vec![one(b"d", "DELAY\u{1}3\u{2}")], properties: Default::default() };
    let e = svc.send(&caller, service_send("SvcTopic", delayed)).await.unwrap_err();
    assert_eq!(e.remoting_code(), response_code::MESSAGE_ILLEGAL, "{e}");
    let empty = SendBody::Batch { messages: Vec::new(), properties: Default::default() };
    let e = svc.send(&caller, service_send("SvcTopic", empty)).await.unwrap_err();
    assert_eq!(e.remoting_code(), response_code::MESSAGE_ILLEGAL, "{e}");
    let ack = AckRequest {
        consumer_group: "SvcGroup".into(),
        topic: "SvcTopic".into(),
        queue_id: 2,
        offset: 0,
        extra_info: "not an extra info".into(),
    };
    let e = svc.ack(&caller, &ack).await.unwrap_err();
    assert_eq!(e.remoting_code(), response_code::INVALID_PARAMETER, "{e}");
    let e = svc.ack(&caller, &AckRequest { topic: "SvcNoSuchTopic".into(), ..ack }).await.unwrap_err();
    assert_eq!(e.remoting_code(), response_code::TOPIC_NOT_EXIST, "{e}");

    // Offsets: no offset yet; a commit for a group that does not exist is refused.
    let e = svc.query_consumer_offset("SvcGroup", "SvcTopic", 2, false).unwrap_err();
    assert_eq!(e.remoting_code(), response_code::QUERY_NOT_FOUND, "{e}");
    assert_eq!(svc.query_consumer_offset("SvcGroup", "SvcTopic", 2, true).unwrap(), 0, "a young queue reads from 0");
    let e = svc.update_consumer_offset(&caller, "SvcNoGroup", "SvcTopic", 2, 1).unwrap_err();
    assert_eq!(e.remoting_code(), response_code::SUBSCRIPTION_GROUP_NOT_EXIST, "{e}");
    assert_eq!(
        svc.max_offset("SvcTopic", 2),
        if first_queue == 2 { 4 } else { 3 },
        "the batch (and the first send when it went there)"
    );
    assert_eq!(svc.min_offset("SvcTopic", 2), 0);

    // An end of transaction naming no half message.
    let end = ferromq_broker::service::EndTransactionRequest {
        producer_group: "SvcProducer".into(),
        tran_state_table_offset: 0,
        commit_log_offset: 1 << 40,
        decision: ferromq_broker::service::TransactionDecision::Commit,
        from_transaction_check: false,
        msg_id: "none".into(),
    };
    let e = svc.end_transaction(&caller, &end).await.unwrap_err();
    assert_eq!(e.remoting_code(), response_code::SYSTEM_ERROR, "{e}");
    let unknown = ferromq_broker::service::EndTransactionRequest {
        decision: ferromq_broker::service::TransactionDecision::Unknown,
        ..end
    };
    assert_eq!(
        svc.end_transaction(&caller, &unknown).await.unwrap(),
        ferromq_broker::service::TransactionEnded::LeftUndecided
    );
    drop(svc);

    let access = running.stop().await;
    assert!(access.service().is_none(), "no service once the broker stopped");
}

fn service_pop(poll_time_ms: i64) -> ferromq_broker::service::PopRequest {
    ferromq_broker::service::PopRequest {
        consumer_group: "SvcPopG".into(),
        topic: "SvcPopTopic".into(),
        queue_id: None,
        max_msg_nums: 32,
        invisible_time_ms: 60_000,
        poll_time_ms,
        born_time_ms: 0,
        init_mode: 0,
        expression_type: Some("TAG".into()),
        expression: Some("*".into()),
        order: false,
        attempt_id: None,
    }
}

fn popped_bodies(p: &ferromq_broker::service::Popped) -> Vec<Vec<u8>> {
    p.messages.iter().map(|b| StoredMessage::decode_shared(b).unwrap().0.body.to_vec()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_pop_waits_for_an_arrival_and_a_dropped_one_is_withdrawn() {
    use ferromq_broker::service::{Caller, PopStatus, SendBody};
    let running = Running::start().await;
    let access = running.access.clone();
    let svc: ferromq_broker::service::Service = (*access.service().expect("service")).clone();
    let caller = Caller { remote_addr: "198.51.100.8:40002".parse().unwrap(), client_version: 479 };
    let send = |body: &'static [u8]| {
        let svc = svc.clone();
        async move { svc.send(&caller, service_send("SvcPopTopic", SendBody::One(one(body, "")))).await.unwrap() }
    };

    send(b"m0").await;
    let p = svc.pop(&caller, &service_pop(5_000)).await.unwrap();
    assert_eq!(p.status, PopStatus::Found);
    assert_eq!(popped_bodies(&p), vec![b"m0".to_vec()]);
    assert!(p.start_offset_info.is_some(), "the handles' start offsets come back");
    let p = svc.pop(&caller, &service_pop(0)).await.unwrap();
    assert_eq!(p.status, PopStatus::PollingTimeout, "nothing left, no poll time: answered at once");

    // A pop that waits is woken by the next message, long before its poll time ends.
    let waiting = {
        let svc = svc.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            (svc.pop(&caller, &service_pop(20_000)).await, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    send(b"m1").await;
    let (p, waited) = tokio::time::timeout(T * 3, waiting).await.expect("the pop returns").unwrap();
    let p = p.unwrap();
    assert_eq!(p.status, PopStatus::Found);
    assert_eq!(popped_bodies(&p), vec![b"m1".to_vec()]);
    assert!(waited < Duration::from_secs(15), "woken by the arrival, not by its poll time: {waited:?}");

    // A waiting pop whose caller goes away is withdrawn: it takes nothing with it.
    let abandoned = {
        let svc = svc.clone();
        tokio::spawn(async move { svc.pop(&caller, &service_pop(20_000)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    abandoned.abort();
    let _ = abandoned.await;
    send(b"m2").await;
    let p = svc.pop(&caller, &service_pop(5_000)).await.unwrap();
    assert_eq!(popped_bodies(&p), vec![b"m2".to_vec()], "the message went to the pop still asking");

    // m2 given back straight to the dead-letter topic (delay level -1), as the proxy forwards.
    let offset = StoredMessage::decode_shared(&p.messages[0]).unwrap().0.physical_offset;
    let back = ferromq_broker::service::SendBackRequest {
        group: "SvcPopG".into(),
        offset,
        delay_level: -1,
        max_reconsume_times: Some(0),
    };
    let sent = svc.send_back(&caller, &back).await.unwrap();
    assert_eq!(sent, ferromq_broker::service::SentBack::Stored { topic: "%DLQ%SvcPopG".into(), dead_letter: true });
    let conn = access.connect(Arc::new(Dispatcher::new()), client_addr());
    let dead = pull_over(&conn, "%DLQ%SvcPopG", 0, 1).await;
    assert_eq!(&dead[0].body[..], b"m2");
    let e = svc
        .send_back(&caller, &ferromq_broker::service::SendBackRequest { offset: 1 << 40, ..back })
        .await
        .unwrap_err();
    assert_eq!(e.remoting_code(), response_code::SYSTEM_ERROR, "no message at that offset: {e}");
    drop(svc);
    running.stop().await;
}
