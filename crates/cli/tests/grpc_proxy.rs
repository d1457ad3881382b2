//! The gRPC proxy of `ferromq standalone`, driven by a tonic client speaking
//! `apache.rocketmq.v2.MessagingService` as the 5.x SDKs do: every RPC, and the bad requests
//! with the status codes of grpc-proxy.md §7, the proxy serving on after each.

use std::process::Command;
use std::time::Duration;

use ferromq_proxy::pb::{self, telemetry_command::Command as Tc, ClientType, Code};
use ferromq_testkit::{start_standalone, Standalone};
use tokio_stream::StreamExt;

mod common;
use common::grpc::{ack_entry, code, connect, consumer_settings, producer_settings, req, res, telemetry, Client};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");

/// Runs an admin command, retrying while the broker has not registered yet.
fn admin(server: &Standalone, args: &[&str]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let out = Command::new(BIN).arg("admin").args(args).args(["-n", &server.namesrv]).output().expect("admin runs");
        if out.status.success() {
            return;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(std::time::Instant::now() < deadline && err.contains("no master"), "admin {args:?}: {err}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn create_topic(server: &Standalone, topic: &str, message_type: &str) {
    let attr = format!("+message.type={message_type}");
    admin(server, &["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4", "-a", &attr]);
}

fn endpoints(server: &Standalone) -> pb::Endpoints {
    let (host, port) = server.grpc.rsplit_once(':').unwrap();
    pb::Endpoints {
        scheme: pb::AddressScheme::IPv4 as i32,
        addresses: vec![pb::Address { host: host.to_owned(), port: port.parse().unwrap() }],
    }
}

fn message(topic: &str, id: &str, body: &[u8]) -> pb::Message {
    pb::Message {
        topic: res(topic),
        user_properties: [("color".to_owned(), "red".to_owned())].into(),
        system_properties: Some(pb::SystemProperties {
            tag: Some("TagA".into()),
            keys: vec!["k1".into()],
            message_id: id.to_owned(),
            body_encoding: pb::Encoding::Identity as i32,
            message_type: pb::MessageType::Normal as i32,
            born_timestamp: Some(prost_types::Timestamp { seconds: now_ms() / 1000, nanos: 0 }),
            born_host: "10.1.2.3".into(),
            ..Default::default()
        }),
        body: body.to_vec(),
    }
}

async fn receive(
    client: &mut Client,
    client_id: &str,
    group: &str,
    topic: &str,
    invisible_s: i64,
) -> (Vec<pb::Message>, Vec<Code>) {
    receive_resources(client, client_id, res(group), res(topic), invisible_s).await
}

/// [`receive`] with the group and topic as resources (a namespace in them, say).
async fn receive_resources(
    client: &mut Client,
    client_id: &str,
    group: Option<pb::Resource>,
    topic: Option<pb::Resource>,
    invisible_s: i64,
) -> (Vec<pb::Message>, Vec<Code>) {
    let r = pb::ReceiveMessageRequest {
        group,
        message_queue: Some(pb::MessageQueue { topic, id: -1, ..Default::default() }),
        filter_expression: Some(pb::FilterExpression { r#type: pb::FilterType::Tag as i32, expression: "*".into() }),
        batch_size: 16,
        invisible_duration: Some(prost_types::Duration { seconds: invisible_s, nanos: 0 }),
        auto_renew: false,
        long_polling_timeout: Some(prost_types::Duration { seconds: 5, nanos: 0 }),
        attempt_id: None,
    };
    let mut stream = client.receive_message(req(client_id, r)).await.expect("receive").into_inner();
    let (mut msgs, mut codes) = (Vec::new(), Vec::new());
    while let Some(frame) = stream.next().await {
        match frame.expect("frame").content.expect("content") {
            pb::receive_message_response::Content::Status(s) => codes.push(Code::try_from(s.code).unwrap()),
            pb::receive_message_response::Content::Message(m) => msgs.push(m),
            pb::receive_message_response::Content::DeliveryTimestamp(_) => codes.push(Code::Unspecified),
        }
    }
    (msgs, codes)
}

/// Receives until `want` messages arrived (sends are answered before dispatch).
async fn receive_n(client: &mut Client, client_id: &str, group: &str, topic: &str, want: usize) -> Vec<pb::Message> {
    let mut all = Vec::new();
    for _ in 0..10 {
        let (msgs, _) = receive(client, client_id, group, topic, 15).await;
        all.extend(msgs);
        if all.len() >= want {
            return all;
        }
    }
    panic!("received {} of {want} messages", all.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_send_receive_ack_and_change_invisible() {
    let server = start_standalone(BIN);
    create_topic(&server, "GrpcNormal", "NORMAL");
    let mut c = connect(&server.grpc).await;

    // QueryRoute: 4 READ_WRITE queues of the one broker, at the address the client used.
    let route = c
        .query_route(req("p1", pb::QueryRouteRequest { topic: res("GrpcNormal"), endpoints: Some(endpoints(&server)) }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&route.status), Code::Ok, "{route:?}");
    assert_eq!(route.message_queues.len(), 4);
    let q = &route.message_queues[0];
    assert_eq!(q.permission, pb::Permission::ReadWrite as i32);
    assert_eq!(q.accept_message_types, vec![pb::MessageType::Normal as i32]);
    assert_eq!(q.broker.as_ref().unwrap().endpoints.as_ref().unwrap(), &endpoints(&server));

    // Producer settings: the server's retry policy and limits.
    let (s, _ptx, _pin) = telemetry(&mut c, "p1", producer_settings(&["GrpcNormal"])).await;
    assert_eq!(s.backoff_policy.as_ref().unwrap().max_attempts, 3);
    let Some(pb::settings::PubSub::Publishing(p)) = s.pub_sub else { panic!("publishing") };
    assert_eq!(p.max_body_size, 4 * 1024 * 1024);
    assert!(p.validate_message_type);
    let hb =
        c.heartbeat(req("p1", pb::HeartbeatRequest { group: None, client_type: ClientType::Producer as i32 })).await;
    assert_eq!(code(&hb.unwrap().into_inner().status), Code::Ok);

    // Send three, in one request and two more; the third's 100 KiB body is far larger than
    // the codec's starting buffers (crates/proxy/src/codec.rs), both ways.
    let three: Vec<u8> = (0..100 * 1024u32).map(|i| (i % 251) as u8).collect();
    let sent = c
        .send_message(req("p1", pb::SendMessageRequest { messages: vec![message("GrpcNormal", "ID-1", b"one")] }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&sent.status), Code::Ok, "{sent:?}");
    assert_eq!(sent.entries[0].message_id, "ID-1");
    let batch = c
        .send_message(req(
            "p1",
            pb::SendMessageRequest {
                messages: vec![message("GrpcNormal", "ID-2", b"two"), message("GrpcNormal", "ID-3", &three)],
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&batch.status), Code::Ok, "{batch:?}");
    assert_eq!(batch.entries.len(), 2);

    // A simple consumer: settings, assignment, receive, ack.
    let (s, _ctx, _cin) =
        telemetry(&mut c, "c1", consumer_settings(ClientType::SimpleConsumer, "GrpcG1", "GrpcNormal")).await;
    assert_eq!(s.backoff_policy.as_ref().unwrap().max_attempts, 17);
    let a = c
        .query_assignment(req(
            "c1",
            pb::QueryAssignmentRequest {
                topic: res("GrpcNormal"),
                group: res("GrpcG1"),
                endpoints: Some(endpoints(&server)),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&a.status), Code::Ok);
    assert_eq!(a.assignments.len(), 1);
    assert_eq!(a.assignments[0].message_queue.as_ref().unwrap().id, -1);

    let msgs = receive_n(&mut c, "c1", "GrpcG1", "GrpcNormal", 3).await;
    let mut bodies: Vec<&[u8]> = msgs.iter().map(|m| m.body.as_slice()).collect();
    bodies.sort_by_key(|b| (b.len(), *b));
    assert_eq!(bodies, vec![&b"one"[..], b"two", &three[..]]);
    let m = msgs.iter().find(|m| m.body == b"one").unwrap();
    let sys = m.system_properties.as_ref().unwrap();
    assert_eq!(sys.tag.as_deref(), Some("TagA"));
    assert_eq!(sys.keys, vec!["k1".to_owned()]);
    assert_eq!(sys.message_id, "ID-1");
    assert_eq!(sys.born_host, "10.1.2.3");
    assert_eq!(sys.delivery_attempt, Some(1));
    assert_eq!(m.user_properties.get("color").map(String::as_str), Some("red"));
    assert_eq!(sys.body_digest.as_ref().unwrap().checksum, "F97C5D29941BFB1B2FDAB0874906AB82");

    // Ack one; change another's invisibility to 1 s: it comes back with attempt 2.
    let ack = c
        .ack_message(req(
            "c1",
            pb::AckMessageRequest {
                group: res("GrpcG1"),
                topic: res("GrpcNormal"),
                entries: msgs.iter().filter(|m| m.body != b"two").map(ack_entry).collect(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&ack.status), Code::Ok, "{ack:?}");
    let two = msgs.iter().find(|m| m.body == b"two").unwrap().system_properties.clone().unwrap();
    let changed = c
        .change_invisible_duration(req(
            "c1",
            pb::ChangeInvisibleDurationRequest {
                group: res("GrpcG1"),
                topic: res("GrpcNormal"),
                receipt_handle: two.receipt_handle.clone().unwrap(),
                invisible_duration: Some(prost_types::Duration { seconds: 1, nanos: 0 }),
                message_id: two.message_id.clone(),
                lite_topic: None,
                suspend: None,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&changed.status), Code::Ok, "{changed:?}");
    assert_ne!(changed.receipt_handle, two.receipt_handle.clone().unwrap());
    let again = receive_n(&mut c, "c1", "GrpcG1", "GrpcNormal", 1).await;
    assert_eq!(again[0].body, b"two");
    assert_eq!(again[0].system_properties.as_ref().unwrap().delivery_attempt, Some(2));

    // Nothing left: MESSAGE_NOT_FOUND, a status and nothing else.
    let h = again[0].system_properties.as_ref().unwrap().receipt_handle.clone().unwrap();
    let ack = c
        .ack_message(req(
            "c1",
            pb::AckMessageRequest {
                group: res("GrpcG1"),
                topic: res("GrpcNormal"),
                entries: vec![pb::AckMessageEntry { message_id: "ID-2".into(), receipt_handle: h, lite_topic: None }],
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&ack.status), Code::Ok);
    let (none, codes) = receive(&mut c, "c1", "GrpcG1", "GrpcNormal", 15).await;
    assert!(none.is_empty());
    assert_eq!(codes, vec![Code::MessageNotFound]);

    // Termination: the client is forgotten, a heartbeat now is refused.
    let t = c.notify_client_termination(req("c1", pb::NotifyClientTerminationRequest { group: res("GrpcG1") })).await;
    assert_eq!(code(&t.unwrap().into_inner().status), Code::Ok);
    let hb = c
        .heartbeat(req(
            "c1",
            pb::HeartbeatRequest { group: res("GrpcG1"), client_type: ClientType::SimpleConsumer as i32 },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&hb.status), Code::UnrecognizedClientType);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_codes_of_the_fact_sheet() {
    let server = start_standalone(BIN);
    create_topic(&server, "GrpcBad", "NORMAL");
    let mut c = connect(&server.grpc).await;
    // No client id.
    let r = c.query_route(tonic::Request::new(pb::QueryRouteRequest { topic: res("GrpcBad"), endpoints: None })).await;
    assert_eq!(code(&r.unwrap().into_inner().status), Code::ClientIdRequired);
    // Unknown topic, bad topic name, system topic.
    for (topic, want) in
        [("NoSuchTopic", Code::TopicNotFound), ("bad topic", Code::IllegalTopic), ("TBW102", Code::IllegalTopic)]
    {
        let r = c.query_route(req("b1", pb::QueryRouteRequest { topic: res(topic), endpoints: None })).await;
        assert_eq!(code(&r.unwrap().into_inner().status), want, "{topic}");
    }
    let send = |messages: Vec<pb::Message>| pb::SendMessageRequest { messages };
    // A FIFO message on a NORMAL topic.
    let mut fifo = message("GrpcBad", "F1", b"x");
    fifo.system_properties.as_mut().unwrap().message_group = Some("g".into());
    let r = c.send_message(req("b1", send(vec![fifo]))).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::MessagePropertyConflictWithType, "{r:?}");
    // Too large, empty, no messages, mixed topics, reserved property.
    let r = c.send_message(req("b1", send(vec![message("GrpcBad", "B", &vec![0; 4 * 1024 * 1024 + 1])]))).await;
    assert_eq!(code(&r.unwrap().into_inner().status), Code::MessageBodyTooLarge);
    let r = c.send_message(req("b1", send(vec![message("GrpcBad", "E", b"")]))).await;
    assert_eq!(code(&r.unwrap().into_inner().status), Code::MessageBodyEmpty);
    let r = c.send_message(req("b1", send(vec![]))).await;
    assert_eq!(code(&r.unwrap().into_inner().status), Code::MessageCorrupted);
    let r = c.send_message(req("b1", send(vec![message("GrpcBad", "M1", b"x"), message("Other", "M2", b"y")]))).await;
    assert_eq!(code(&r.unwrap().into_inner().status), Code::MessageCorrupted);
    let mut reserved = message("GrpcBad", "R", b"x");
    reserved.user_properties.insert("UNIQ_KEY".into(), "x".into());
    let r = c.send_message(req("b1", send(vec![reserved]))).await;
    assert_eq!(code(&r.unwrap().into_inner().status), Code::IllegalMessagePropertyKey);
    // Receive without settings; with a too short invisible time.
    let (_, codes) = receive(&mut c, "b1", "GrpcBadG", "GrpcBad", 15).await;
    assert_eq!(codes, vec![Code::UnrecognizedClientType]);
    let _keep = telemetry(&mut c, "b2", consumer_settings(ClientType::SimpleConsumer, "GrpcBadG", "GrpcBad")).await;
    let (_, codes) = receive(&mut c, "b2", "GrpcBadG", "GrpcBad", 1).await;
    assert_eq!(codes, vec![Code::IllegalInvisibleTime]);
    // Malformed and expired receipt handles.
    for handle in ["garbage", "0 1 2 3 0 broker-a 0 0 0"] {
        let r = c
            .ack_message(req(
                "b2",
                pb::AckMessageRequest {
                    group: res("GrpcBadG"),
                    topic: res("GrpcBad"),
                    entries: vec![pb::AckMessageEntry {
                        message_id: "x".into(),
                        receipt_handle: handle.into(),
                        lite_topic: None,
                    }],
                },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&r.status), Code::InvalidReceiptHandle, "{handle}");
        let r = c
            .forward_message_to_dead_letter_queue(req(
                "b2",
                pb::ForwardMessageToDeadLetterQueueRequest {
                    group: res("GrpcBadG"),
                    topic: res("GrpcBad"),
                    receipt_handle: handle.into(),
                    message_id: "x".into(),
                    ..Default::default()
                },
            ))
            .await;
        assert_eq!(code(&r.unwrap().into_inner().status), Code::InvalidReceiptHandle);
    }
    // Unknown transaction, blank transaction id.
    let end = |tid: &str| pb::EndTransactionRequest {
        topic: res("GrpcBad"),
        message_id: "m".into(),
        transaction_id: tid.into(),
        resolution: pb::TransactionResolution::Commit as i32,
        source: pb::TransactionSource::SourceClient as i32,
        trace_context: String::new(),
    };
    let r = c.end_transaction(req("b1", end(""))).await;
    assert_eq!(code(&r.unwrap().into_inner().status), Code::InvalidTransactionId);
    let r = c.end_transaction(req("b1", end("nope"))).await;
    assert_eq!(code(&r.unwrap().into_inner().status), Code::InternalServerError);
    // Settings with neither publishing nor subscription end the stream INVALID_ARGUMENT.
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(pb::TelemetryCommand { status: None, command: Some(Tc::Settings(pb::Settings::default())) }).await.unwrap();
    let mut r = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    r.metadata_mut().insert("x-mq-client-id", "b3".parse().unwrap());
    let mut inbound = c.telemetry(r).await.unwrap().into_inner();
    let e = inbound.next().await.unwrap().unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    // The proxy still serves.
    let r = c.query_route(req("b1", pb::QueryRouteRequest { topic: res("GrpcBad"), endpoints: None })).await;
    assert_eq!(code(&r.unwrap().into_inner().status), Code::Ok);
}

fn end(
    topic: &str,
    message_id: &str,
    tid: &str,
    resolution: pb::TransactionResolution,
    source: pb::TransactionSource,
) -> pb::EndTransactionRequest {
    pb::EndTransactionRequest {
        topic: res(topic),
        message_id: message_id.to_owned(),
        transaction_id: tid.to_owned(),
        resolution: resolution as i32,
        source: source as i32,
        trace_context: String::new(),
    }
}

fn typed(topic: &str, id: &str, body: &[u8], t: pb::MessageType) -> pb::Message {
    let mut m = message(topic, id, body);
    m.system_properties.as_mut().unwrap().message_type = t as i32;
    m
}

async fn send_one(c: &mut Client, client_id: &str, m: pb::Message) -> pb::SendResultEntry {
    let r = c.send_message(req(client_id, pb::SendMessageRequest { messages: vec![m] })).await.unwrap().into_inner();
    assert_eq!(code(&r.status), Code::Ok, "{r:?}");
    r.entries.into_iter().next().unwrap()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_commit_rollback_and_check_back_through_telemetry() {
    let server =
        ferromq_testkit::start_standalone_with_conf(BIN, "transactionCheckInterval=1000\ntransactionTimeOut=1000\n");
    create_topic(&server, "GrpcTx", "TRANSACTION");
    let mut c = connect(&server.grpc).await;
    let (_s, _ptx, mut commands) = telemetry(&mut c, "tp1", producer_settings(&["GrpcTx"])).await;
    let _consumer = telemetry(&mut c, "tc1", consumer_settings(ClientType::SimpleConsumer, "GrpcTxG", "GrpcTx")).await;

    // A normal message on a TRANSACTION topic is refused.
    let r = c.send_message(req("tp1", pb::SendMessageRequest { messages: vec![message("GrpcTx", "N", b"n")] })).await;
    assert_eq!(code(&r.unwrap().into_inner().status), Code::MessagePropertyConflictWithType);

    let commit = send_one(&mut c, "tp1", typed("GrpcTx", "TX-C", b"commit", pb::MessageType::Transaction)).await;
    assert!(!commit.transaction_id.is_empty());
    let rollback = send_one(&mut c, "tp1", typed("GrpcTx", "TX-R", b"rollback", pb::MessageType::Transaction)).await;
    let r = c
        .end_transaction(req(
            "tp1",
            end(
                "GrpcTx",
                "TX-C",
                &commit.transaction_id,
                pb::TransactionResolution::Commit,
                pb::TransactionSource::SourceClient,
            ),
        ))
        .await;
    assert_eq!(code(&r.unwrap().into_inner().status), Code::Ok);
    let r = c
        .end_transaction(req(
            "tp1",
            end(
                "GrpcTx",
                "TX-R",
                &rollback.transaction_id,
                pb::TransactionResolution::Rollback,
                pb::TransactionSource::SourceClient,
            ),
        ))
        .await;
    assert_eq!(code(&r.unwrap().into_inner().status), Code::Ok);

    // Left open: the broker asks, the proxy relays RecoverOrphanedTransactionCommand.
    send_one(&mut c, "tp1", typed("GrpcTx", "TX-O", b"orphan", pb::MessageType::Transaction)).await;
    let (message, tid) = loop {
        let cmd = tokio::time::timeout(Duration::from_secs(30), commands.next())
            .await
            .expect("a transaction check within 30 s")
            .expect("stream open")
            .expect("no error");
        if let Some(Tc::RecoverOrphanedTransactionCommand(r)) = cmd.command {
            break (r.message.unwrap(), r.transaction_id);
        }
    };
    let sys = message.system_properties.as_ref().unwrap();
    assert_eq!(sys.message_id, "TX-O");
    assert_eq!(message.body, b"orphan");
    assert_eq!(message.topic.as_ref().unwrap().name, "GrpcTx");
    let r = c
        .end_transaction(req(
            "tp1",
            end("GrpcTx", "TX-O", &tid, pb::TransactionResolution::Commit, pb::TransactionSource::SourceServerCheck),
        ))
        .await;
    assert_eq!(code(&r.unwrap().into_inner().status), Code::Ok);

    let got = receive_n(&mut c, "tc1", "GrpcTxG", "GrpcTx", 2).await;
    let mut ids: Vec<String> = got.iter().map(|m| m.system_properties.as_ref().unwrap().message_id.clone()).collect();
    ids.sort();
    assert_eq!(ids, vec!["TX-C".to_owned(), "TX-O".to_owned()]);
    assert!(got
        .iter()
        .all(|m| m.system_properties.as_ref().unwrap().message_type == pb::MessageType::Transaction as i32));
    let (more, _) = receive(&mut c, "tc1", "GrpcTxG", "GrpcTx", 15).await;
    assert!(more.is_empty(), "the rolled back message must not arrive: {more:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_delay_recall_offsets_and_pull() {
    let server = ferromq_testkit::start_standalone_with_conf(BIN, "recallMessageEnable=true\n");
    create_topic(&server, "GrpcFifo", "FIFO");
    create_topic(&server, "GrpcDelay", "DELAY");
    create_topic(&server, "GrpcPull", "NORMAL");
    admin(&server, &["updateSubGroup", "-c", "DefaultCluster", "-g", "GrpcFifoG", "-o", "true"]);
    let mut c = connect(&server.grpc).await;
    let _p = telemetry(&mut c, "fp1", producer_settings(&["GrpcFifo", "GrpcDelay", "GrpcPull"])).await;

    // FIFO: one group's messages share one queue, in order; the group's settings say fifo.
    let (s, _ctx, _cin) =
        telemetry(&mut c, "fc1", consumer_settings(ClientType::SimpleConsumer, "GrpcFifoG", "GrpcFifo")).await;
    let Some(pb::settings::PubSub::Subscription(sub)) = s.pub_sub else { panic!("subscription") };
    assert_eq!(sub.fifo, Some(true));
    for i in 0..6 {
        let mut m = typed("GrpcFifo", &format!("F-{i}"), format!("{i}").as_bytes(), pb::MessageType::Fifo);
        m.system_properties.as_mut().unwrap().message_group = Some("order-7".into());
        send_one(&mut c, "fp1", m).await;
    }
    let got = receive_n(&mut c, "fc1", "GrpcFifoG", "GrpcFifo", 6).await;
    let queues: std::collections::BTreeSet<i32> =
        got.iter().map(|m| m.system_properties.as_ref().unwrap().queue_id).collect();
    assert_eq!(queues.len(), 1, "one group, one queue: {queues:?}");
    let bodies: Vec<&[u8]> = got.iter().map(|m| m.body.as_slice()).collect();
    assert_eq!(bodies, vec![&b"0"[..], b"1", b"2", b"3", b"4", b"5"]);
    assert_eq!(got[0].system_properties.as_ref().unwrap().message_group.as_deref(), Some("order-7"));

    // DELAY: delivered no earlier than its timestamp; recall cancels another.
    let _d = telemetry(&mut c, "dc1", consumer_settings(ClientType::SimpleConsumer, "GrpcDelayG", "GrpcDelay")).await;
    let at = now_ms() + 3000;
    let mut m = typed("GrpcDelay", "D-1", b"later", pb::MessageType::Delay);
    m.system_properties.as_mut().unwrap().delivery_timestamp =
        Some(prost_types::Timestamp { seconds: at / 1000, nanos: ((at % 1000) * 1_000_000) as i32 });
    send_one(&mut c, "fp1", m).await;
    let far = now_ms() + 600_000;
    let mut m = typed("GrpcDelay", "D-2", b"recalled", pb::MessageType::Delay);
    m.system_properties.as_mut().unwrap().delivery_timestamp =
        Some(prost_types::Timestamp { seconds: far / 1000, nanos: 0 });
    let recalled = send_one(&mut c, "fp1", m).await;
    assert!(!recalled.recall_handle.is_empty(), "a delayed send returns a recall handle");
    let r = c
        .recall_message(req(
            "fp1",
            pb::RecallMessageRequest { topic: res("GrpcDelay"), recall_handle: recalled.recall_handle },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&r.status), Code::Ok, "{r:?}");
    assert_eq!(r.message_id, "D-2");
    let got = receive_n(&mut c, "dc1", "GrpcDelayG", "GrpcDelay", 1).await;
    assert!(now_ms() >= at, "delivered before its time");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, b"later");
    let sys = got[0].system_properties.as_ref().unwrap();
    assert_eq!(sys.message_type, pb::MessageType::Delay as i32);
    assert!(sys.delivery_timestamp.is_some());

    // The lite pull consumer's RPCs: pull from an offset, commit it, read it back.
    for i in 0..3 {
        send_one(&mut c, "fp1", message("GrpcPull", &format!("P-{i}"), b"p")).await;
    }
    let route = c
        .query_route(req("fp1", pb::QueryRouteRequest { topic: res("GrpcPull"), endpoints: None }))
        .await
        .unwrap()
        .into_inner();
    let masters: Vec<pb::MessageQueue> =
        route.message_queues.iter().filter(|q| q.broker.as_ref().unwrap().id == 0).cloned().collect();
    // A send is answered before its dispatch: wait until the queues' ends count all three.
    let mut ends = Vec::new();
    for _ in 0..100 {
        ends.clear();
        for q in &masters {
            let end = c
                .query_offset(req(
                    "fp1",
                    pb::QueryOffsetRequest {
                        message_queue: Some(q.clone()),
                        query_offset_policy: pb::QueryOffsetPolicy::End as i32,
                        timestamp: None,
                    },
                ))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(code(&end.status), Code::Ok, "{end:?}");
            ends.push(end.offset);
        }
        if ends.iter().sum::<i64>() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ends.iter().sum::<i64>(), 3, "queue ends {ends:?}");
    let mut pulled = 0;
    for (q, end_offset) in masters.iter().zip(ends.iter().copied()) {
        if end_offset == 0 {
            continue;
        }
        let mut stream = c
            .pull_message(req(
                "fp1",
                pb::PullMessageRequest {
                    group: res("GrpcPullG"),
                    message_queue: Some(q.clone()),
                    offset: 0,
                    batch_size: 32,
                    filter_expression: Some(pb::FilterExpression {
                        r#type: pb::FilterType::Tag as i32,
                        expression: "*".into(),
                    }),
                    long_polling_timeout: Some(prost_types::Duration { seconds: 1, nanos: 0 }),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        let mut next = None;
        while let Some(f) = stream.next().await {
            match f.unwrap().content.unwrap() {
                pb::pull_message_response::Content::Status(s) => assert_eq!(s.code, Code::Ok as i32, "{s:?}"),
                pb::pull_message_response::Content::Message(_) => pulled += 1,
                pb::pull_message_response::Content::NextOffset(n) => next = Some(n),
            }
        }
        assert_eq!(next, Some(end_offset));
        let u = c
            .update_offset(req(
                "fp1",
                pb::UpdateOffsetRequest { group: res("GrpcPullG"), message_queue: Some(q.clone()), offset: end_offset },
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(&u.status), Code::Ok, "{u:?}");
        let g = c
            .get_offset(req("fp1", pb::GetOffsetRequest { group: res("GrpcPullG"), message_queue: Some(q.clone()) }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!((code(&g.status), g.offset), (Code::Ok, end_offset));
    }
    assert_eq!(pulled, 3);
}

async fn receive_renewed(c: &mut Client, client_id: &str, group: &str, topic: &str) -> Vec<pb::Message> {
    let r = pb::ReceiveMessageRequest {
        group: res(group),
        message_queue: Some(pb::MessageQueue { topic: res(topic), id: -1, ..Default::default() }),
        filter_expression: Some(pb::FilterExpression { r#type: pb::FilterType::Tag as i32, expression: "*".into() }),
        batch_size: 8,
        invisible_duration: None,
        auto_renew: true,
        long_polling_timeout: Some(prost_types::Duration { seconds: 5, nanos: 0 }),
        attempt_id: None,
    };
    let mut stream = c.receive_message(req(client_id, r)).await.unwrap().into_inner();
    let mut out = Vec::new();
    while let Some(f) = stream.next().await {
        if let Some(pb::receive_message_response::Content::Message(m)) = f.unwrap().content {
            out.push(m);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_consumer_auto_renew_stack_trace_and_verify_message() {
    // Short invisible time and renewal window so renewal shows within seconds.
    let server = ferromq_testkit::start_standalone_with_proxy_conf(
        BIN,
        r#"{"defaultInvisibleTimeMills": 3000, "renewAheadTimeMillis": 2000, "renewSchedulePeriodMillis": 300}"#,
    );
    create_topic(&server, "GrpcPush", "NORMAL");
    let mut c = connect(&server.grpc).await;
    let _p = telemetry(&mut c, "pp1", producer_settings(&["GrpcPush"])).await;
    let (_s, ctx, mut commands) =
        telemetry(&mut c, "pc1", consumer_settings(ClientType::PushConsumer, "GrpcPushG", "GrpcPush")).await;
    // The push consumer answers the proxy's commands as the Java client does.
    let answers = tokio::spawn(async move {
        while let Some(Ok(cmd)) = commands.next().await {
            let reply = match cmd.command {
                Some(Tc::PrintThreadStackTraceCommand(p)) => Tc::ThreadStackTrace(pb::ThreadStackTrace {
                    nonce: p.nonce,
                    thread_stack_trace: Some("\"main\" RUNNABLE at consume()".into()),
                }),
                Some(Tc::VerifyMessageCommand(v)) => {
                    assert_eq!(v.message.unwrap().body, b"renewed");
                    Tc::VerifyMessageResult(pb::VerifyMessageResult { nonce: v.nonce })
                }
                _ => continue,
            };
            let status = Some(pb::Status { code: Code::Ok as i32, message: "OK".into() });
            if ctx.send(pb::TelemetryCommand { status, command: Some(reply) }).await.is_err() {
                return;
            }
        }
    });
    send_one(&mut c, "pp1", message("GrpcPush", "PUSH-1", b"renewed")).await;
    let mut got = Vec::new();
    for _ in 0..10 {
        got = receive_renewed(&mut c, "pc1", "GrpcPushG", "GrpcPush").await;
        if !got.is_empty() {
            break;
        }
    }
    assert_eq!(got.len(), 1);
    let handle = got[0].system_properties.as_ref().unwrap().receipt_handle.clone().unwrap();
    // Three invisible times later it has not come back: the proxy renewed it.
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert!(
        receive_renewed(&mut c, "pc1", "GrpcPushG", "GrpcPush").await.is_empty(),
        "an auto-renewed message came back"
    );

    // Admin requests relayed through the client's Telemetry stream.
    let out = Command::new(BIN)
        .args(["admin", "consumerStatus", "-n", &server.namesrv, "-g", "GrpcPushG", "-i", "pc1", "-s"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("RUNNABLE at consume()"),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(BIN)
        .args([
            "admin",
            "queryMsgByUniqueKey",
            "-n",
            &server.namesrv,
            "-i",
            "PUSH-1",
            "-t",
            "GrpcPush",
            "-g",
            "GrpcPushG",
            "-d",
            "pc1",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("CR_SUCCESS"), "{text} {}", String::from_utf8_lossy(&out.stderr));

    // The ack uses the handle the client holds; the proxy substitutes the renewed one.
    let ack = c
        .ack_message(req(
            "pc1",
            pb::AckMessageRequest {
                group: res("GrpcPushG"),
                topic: res("GrpcPush"),
                entries: vec![pb::AckMessageEntry {
                    message_id: "PUSH-1".into(),
                    receipt_handle: handle,
                    lite_topic: None,
                }],
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&ack.status), Code::Ok, "{ack:?}");

    // A second message, then the client terminates: it comes back at once to another client.
    send_one(&mut c, "pp1", message("GrpcPush", "PUSH-2", b"handed back")).await;
    let mut got = Vec::new();
    for _ in 0..10 {
        got = receive_renewed(&mut c, "pc1", "GrpcPushG", "GrpcPush").await;
        if !got.is_empty() {
            break;
        }
    }
    assert_eq!(got.len(), 1);
    let t =
        c.notify_client_termination(req("pc1", pb::NotifyClientTerminationRequest { group: res("GrpcPushG") })).await;
    assert_eq!(code(&t.unwrap().into_inner().status), Code::Ok);
    let _other = telemetry(&mut c, "pc2", consumer_settings(ClientType::SimpleConsumer, "GrpcPushG", "GrpcPush")).await;
    let again = receive_n(&mut c, "pc2", "GrpcPushG", "GrpcPush", 1).await;
    assert_eq!(again[0].body, b"handed back");
    answers.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_vanishes_mid_poll_gets_its_messages_handed_back_at_once() {
    let server = start_standalone(BIN);
    create_topic(&server, "GrpcGone", "NORMAL");
    let mut c = connect(&server.grpc).await;
    let _p = telemetry(&mut c, "gp1", producer_settings(&["GrpcGone"])).await;
    let _k = telemetry(&mut c, "gc1", consumer_settings(ClientType::SimpleConsumer, "GrpcGoneG", "GrpcGone")).await;
    // A receive parked on an empty topic (60 s invisible time), abandoned by its client.
    let parked = pb::ReceiveMessageRequest {
        group: res("GrpcGoneG"),
        message_queue: Some(pb::MessageQueue { topic: res("GrpcGone"), id: -1, ..Default::default() }),
        filter_expression: Some(pb::FilterExpression { r#type: pb::FilterType::Tag as i32, expression: "*".into() }),
        batch_size: 16,
        invisible_duration: Some(prost_types::Duration { seconds: 60, nanos: 0 }),
        auto_renew: false,
        long_polling_timeout: Some(prost_types::Duration { seconds: 10, nanos: 0 }),
        attempt_id: None,
    };
    let mut r = tonic::Request::new(parked);
    r.metadata_mut().insert("x-mq-client-id", "gc1".parse().unwrap());
    let mut gone = c.clone();
    let call = tokio::spawn(async move {
        let mut s = gone.receive_message(r).await.unwrap().into_inner();
        s.next().await
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    call.abort();
    let _ = call.await;
    // The message the abandoned poll takes comes back well before 60 s.
    send_one(&mut c, "gp1", message("GrpcGone", "G-1", b"again")).await;
    let started = std::time::Instant::now();
    let got = receive_n(&mut c, "gc1", "GrpcGoneG", "GrpcGone", 1).await;
    assert_eq!(got[0].body, b"again");
    assert!(started.elapsed() < Duration::from_secs(30), "handed back after {:?}", started.elapsed());
}

/// Every resource of `settings` in namespace `ns`.
fn in_namespace(mut settings: pb::Settings, ns: &str) -> pb::Settings {
    let set = |r: &mut pb::Resource| r.resource_namespace = ns.to_owned();
    match settings.pub_sub.as_mut() {
        Some(pb::settings::PubSub::Publishing(p)) => p.topics.iter_mut().for_each(set),
        Some(pb::settings::PubSub::Subscription(s)) => {
            s.group.iter_mut().for_each(set);
            s.subscriptions.iter_mut().filter_map(|e| e.topic.as_mut()).for_each(set);
        }
        None => {}
    }
    settings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_resources_are_served_as_namespace_percent_name() {
    let server = start_standalone(BIN);
    // The broker holds `ns1%NsOrders`; a client of namespace ns1 names it NsOrders.
    create_topic(&server, "ns1%NsOrders", "NORMAL");
    let mut c = connect(&server.grpc).await;
    let ns = |name: &str| Some(pb::Resource { resource_namespace: "ns1".into(), name: name.into() });

    let route = c
        .query_route(req("nsp", pb::QueryRouteRequest { topic: ns("NsOrders"), endpoints: Some(endpoints(&server)) }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&route.status), Code::Ok, "{route:?}");
    assert!(route.message_queues.iter().all(|q| q.topic == ns("NsOrders")), "queues name the topic as asked");
    let bare = c
        .query_route(req("nsp", pb::QueryRouteRequest { topic: res("NsOrders"), endpoints: Some(endpoints(&server)) }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&bare.status), Code::TopicNotFound, "without the namespace it is another topic");

    let (_s, _ptx, _pin) = telemetry(&mut c, "nsp", in_namespace(producer_settings(&["NsOrders"]), "ns1")).await;
    let mut m = message("NsOrders", "NS-ID-1", b"namespaced");
    m.topic = ns("NsOrders");
    let sent =
        c.send_message(req("nsp", pb::SendMessageRequest { messages: vec![m.clone()] })).await.unwrap().into_inner();
    assert_eq!(code(&sent.status), Code::Ok, "{sent:?}");
    // One request, two namespaces: not one topic.
    let mut other = m.clone();
    other.topic = res("ns1%NsOrders");
    let mut third = m;
    third.topic = Some(pb::Resource { resource_namespace: "ns2".into(), name: "NsOrders".into() });
    let mixed =
        c.send_message(req("nsp", pb::SendMessageRequest { messages: vec![other, third] })).await.unwrap().into_inner();
    assert_eq!(code(&mixed.status), Code::MessageCorrupted, "{mixed:?}");

    let settings = in_namespace(consumer_settings(ClientType::SimpleConsumer, "NsG", "NsOrders"), "ns1");
    let (_s, _ctx, _cin) = telemetry(&mut c, "nsc", settings).await;
    let mut got = Vec::new();
    for _ in 0..10 {
        got.extend(receive_resources(&mut c, "nsc", ns("NsG"), ns("NsOrders"), 15).await.0);
        if !got.is_empty() {
            break;
        }
    }
    assert_eq!(got.len(), 1, "the namespaced message");
    assert_eq!(got[0].body, b"namespaced");
    assert_eq!(got[0].topic, ns("NsOrders"), "shown without the namespace, in it");
    let ack = c
        .ack_message(req(
            "nsc",
            pb::AckMessageRequest { group: ns("NsG"), topic: ns("NsOrders"), entries: vec![ack_entry(&got[0])] },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(&ack.status), Code::Ok, "{ack:?}");
}

/// Every message type to every kind of topic: a topic takes its own type (MIXED takes all),
/// anything else is refused with MESSAGE_PROPERTY_CONFLICT_WITH_TYPE and Java's remark, and
/// the proxy serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_message_type_to_each_kind_of_topic() {
    // MIXED topics exist only with enableMixedMessageType (Java's broker key).
    let server = ferromq_testkit::start_standalone_with_conf(BIN, "enableMixedMessageType=true\n");
    let kinds = ["NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"];
    let topics: Vec<String> = kinds.iter().map(|k| format!("Mt{k}")).collect();
    for (topic, kind) in topics.iter().zip(kinds) {
        create_topic(&server, topic, kind);
    }
    let mut c = connect(&server.grpc).await;
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    let _p = telemetry(&mut c, "mt1", producer_settings(&names)).await;
    let types = [
        ("NORMAL", pb::MessageType::Normal),
        ("FIFO", pb::MessageType::Fifo),
        ("DELAY", pb::MessageType::Delay),
        ("TRANSACTION", pb::MessageType::Transaction),
    ];
    let mut outcomes = Vec::new();
    for (topic, kind) in topics.iter().zip(kinds) {
        for (type_name, t) in types {
            let mut m = typed(topic, &format!("{topic}-{type_name}"), b"x", t);
            let sys = m.system_properties.as_mut().unwrap();
            match t {
                pb::MessageType::Fifo => sys.message_group = Some("g".into()),
                pb::MessageType::Delay => {
                    sys.delivery_timestamp = Some(prost_types::Timestamp { seconds: now_ms() / 1000 + 60, nanos: 0 })
                }
                _ => {}
            }
            let r =
                c.send_message(req("mt1", pb::SendMessageRequest { messages: vec![m] })).await.unwrap().into_inner();
            let status = r.status.clone().unwrap_or_default();
            let expected =
                if kind == "MIXED" || kind == type_name { Code::Ok } else { Code::MessagePropertyConflictWithType };
            if code(&r.status) != expected {
                outcomes.push(format!("{type_name} to {kind}: {:?} {}", code(&r.status), status.message));
            }
            if expected == Code::MessagePropertyConflictWithType {
                let remark = format!("the expected type is {kind}, but actual type is {type_name}");
                if !status.message.contains(&remark) {
                    outcomes.push(format!("{type_name} to {kind}: remark {:?} lacks {remark:?}", status.message));
                }
            }
        }
    }
    assert!(outcomes.is_empty(), "unexpected answers:\n{}", outcomes.join("\n"));
}
