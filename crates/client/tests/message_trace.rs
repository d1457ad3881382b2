//! Message trace (`enable_msg_trace`) against an in-process name server and a broker with
//! `traceTopicEnable`: a traced send and its consumption leave Java's `Pub`, `SubBefore` and
//! `SubAfter` records in RMQ_SYS_TRACE_TOPIC, found by the message id as mqadmin's
//! queryMsgTraceById finds them (QUERY_MESSAGE by key on the trace topic).

use std::time::Duration;

use ferromq_client::{
    ClientConfig, ConsumeFromWhere, ConsumeStatus, Message, Producer, ProducerConfig, PushConsumer, PushConsumerConfig,
};
use ferromq_protocol::header::QueryMessageRequestHeader;
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::trace::{context_code, msg_type, TraceRecord, RMQ_SYS_TRACE_TOPIC};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::RemotingClient;
use ferromq_testkit::LocalCluster;
use tokio::time::Instant;

const T: Duration = Duration::from_secs(15);

/// Every trace record of `msg_id` (a message id or user key) in the trace topic, once `want`
/// of them are there.
async fn traces(c: &LocalCluster, msg_id: &str, want: usize) -> Vec<TraceRecord> {
    let client = RemotingClient::new(ferromq_remoting::ClientConfig::default());
    let deadline = Instant::now() + T;
    loop {
        let header = QueryMessageRequestHeader {
            topic: RMQ_SYS_TRACE_TOPIC.to_owned(),
            key: msg_id.to_owned(),
            max_num: 64,
            begin_timestamp: 0,
            end_timestamp: i64::MAX,
        };
        let req = RemotingCommand::request(request_code::QUERY_MESSAGE).with_header(&header);
        let resp = client.invoke(&c.broker_addr, req, T).await.unwrap();
        let mut found = Vec::new();
        if resp.code == response_code::SUCCESS {
            for m in StoredMessage::decode_all(&resp.body).unwrap() {
                let body = String::from_utf8(m.body.to_vec()).expect("trace bodies are text");
                found.extend(
                    TraceRecord::decode_all(&body)
                        .unwrap()
                        .into_iter()
                        .filter(|r| r.msg_id() == msg_id || r.keys() == Some(msg_id)),
                );
            }
        }
        if found.len() >= want {
            client.shutdown().await;
            return found;
        }
        assert!(Instant::now() < deadline, "{} of {want} trace records of {msg_id}: {found:?}", found.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traced_send_and_consumption_leave_javas_trace_records() {
    let c = LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.trace_topic_enable = true;
    })
    .await;
    c.wait_registered(RMQ_SYS_TRACE_TOPIC).await;
    let producer = Producer::new(
        ProducerConfig { group: "pg_traced".into(), enable_msg_trace: true, ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    producer.start().await.unwrap();
    let sent = producer
        .send(Message::new("TracedTopic", b"traced body".to_vec()).with_tags("TagA").with_keys(["order-7"]))
        .await
        .unwrap();

    let consumer = PushConsumer::new(
        PushConsumerConfig {
            group: "cg_traced".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            enable_msg_trace: true,
            ..PushConsumerConfig::default()
        },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    consumer.subscribe("TracedTopic", "*").await.unwrap();
    consumer.register_listener(|_| ConsumeStatus::ConsumeSuccess);
    consumer.start().await.unwrap();

    let records = traces(&c, &sent.msg_id, 3).await;
    let publish = records.iter().find_map(|r| if let TraceRecord::Pub(p) = r { Some(p) } else { None }).expect("Pub");
    assert_eq!(publish.group, "pg_traced");
    assert_eq!(publish.topic, "TracedTopic");
    assert_eq!(publish.tags.as_deref(), Some("TagA"));
    assert_eq!(publish.keys.as_deref(), Some("order-7"));
    assert_eq!(publish.offset_msg_id, sent.offset_msg_id);
    assert_eq!(publish.store_host, c.broker_addr);
    assert_eq!(publish.body_length, 11);
    assert_eq!((publish.msg_type, publish.success), (msg_type::NORMAL, true));
    let before =
        records.iter().find_map(|r| if let TraceRecord::SubBefore(s) = r { Some(s) } else { None }).expect("SubBefore");
    assert_eq!((before.group.as_str(), before.retry_times), ("cg_traced", 0));
    let after =
        records.iter().find_map(|r| if let TraceRecord::SubAfter(s) = r { Some(s) } else { None }).expect("SubAfter");
    assert_eq!(after.request_id, before.request_id);
    assert_eq!((after.success, after.context_code), (true, context_code::SUCCESS));
    assert_eq!(after.group.as_deref(), Some("cg_traced"));
    // The user key finds the traces too.
    assert!(!traces(&c, "order-7", 1).await.is_empty());

    consumer.shutdown().await;
    producer.shutdown().await;
    c.stop().await;
}

/// Without a trace topic on the broker, tracing neither fails nor slows the traced sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_trace_topic_does_not_fail_the_sends() {
    let c = LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.auto_create_topic_enable = false;
    })
    .await;
    let admin = RemotingClient::new(ferromq_remoting::ClientConfig::default());
    let create = RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC).with_header(
        &ferromq_protocol::header::CreateTopicRequestHeader {
            topic: "Plain".into(),
            default_topic: "TBW102".into(),
            read_queue_nums: 1,
            write_queue_nums: 1,
            perm: 6,
            topic_filter_type: "SINGLE_TAG".into(),
            ..Default::default()
        },
    );
    assert_eq!(admin.invoke(&c.broker_addr, create, T).await.unwrap().code, response_code::SUCCESS);
    let producer = Producer::new(
        ProducerConfig { group: "pg_untraced".into(), enable_msg_trace: true, ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    producer.start().await.unwrap();
    for i in 0..20 {
        producer.send(Message::new("Plain", format!("m{i}").into_bytes())).await.expect("traced send succeeds");
    }
    producer.shutdown().await;
    admin.shutdown().await;
    c.stop().await;
}

/// Commits every local transaction.
struct Commit;

impl ferromq_client::TransactionListener for Commit {
    type Arg = ();

    fn execute_local_transaction(&self, _msg: &Message, _arg: &()) -> ferromq_client::LocalTransactionState {
        ferromq_client::LocalTransactionState::CommitMessage
    }

    fn check_local_transaction(&self, _msg: &ferromq_client::MessageExt) -> ferromq_client::LocalTransactionState {
        ferromq_client::LocalTransactionState::CommitMessage
    }
}

/// A traced transactional send leaves a Pub of the half message and its EndTransaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_transaction_records_its_half_message_and_its_end() {
    let c = LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.trace_topic_enable = true;
    })
    .await;
    c.wait_registered(RMQ_SYS_TRACE_TOPIC).await;
    let producer = ferromq_client::TransactionProducer::new(
        ProducerConfig { group: "pg_tx_traced".into(), enable_msg_trace: true, ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
        std::sync::Arc::new(Commit),
    );
    producer.start().await.unwrap();
    let sent = producer
        .send_message_in_transaction(Message::new("TxTraced", b"tx".to_vec()).with_keys(["tx-1"]), ())
        .await
        .unwrap();
    let records = traces(&c, &sent.send_result.msg_id, 2).await;
    let publish = records.iter().find_map(|r| if let TraceRecord::Pub(p) = r { Some(p) } else { None }).expect("Pub");
    assert_eq!((publish.msg_type, publish.success), (msg_type::TRANS_HALF, true));
    let end = records
        .iter()
        .find_map(|r| if let TraceRecord::EndTransaction(e) = r { Some(e) } else { None })
        .expect("EndTransaction");
    assert_eq!(end.transaction_state, "COMMIT_MESSAGE");
    assert_eq!(
        (end.group.as_str(), end.topic.as_str(), end.keys.as_deref()),
        ("pg_tx_traced", "TxTraced", Some("tx-1"))
    );
    assert_eq!(end.msg_type, msg_type::TRANS_COMMIT);
    assert!(!end.from_transaction_check);
    producer.shutdown().await;
    c.stop().await;
}

/// A traced batch leaves one Pub per message, each under its own id and offset id (Java
/// writes one record under the joined ids, which no id search finds: ADR 0023).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_batch_leaves_a_pub_per_message() {
    let c = LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.trace_topic_enable = true;
    })
    .await;
    c.wait_registered(RMQ_SYS_TRACE_TOPIC).await;
    let producer = Producer::new(
        ProducerConfig { group: "pg_batch_traced".into(), enable_msg_trace: true, ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    producer.start().await.unwrap();
    let batch: Vec<Message> = (0..3)
        .map(|i| Message::new("BatchTraced", format!("batch {i}").into_bytes()).with_keys([format!("b-{i}")]))
        .collect();
    let sent = producer.send_batch(batch).await.unwrap();
    let ids: Vec<&str> = sent.msg_id.split(',').collect();
    let offset_ids: Vec<&str> = sent.offset_msg_id.split(',').collect();
    assert_eq!((ids.len(), offset_ids.len()), (3, 3), "{sent:?}");
    for (i, id) in ids.iter().enumerate() {
        let records = traces(&c, id, 1).await;
        let publish =
            records.iter().find_map(|r| if let TraceRecord::Pub(p) = r { Some(p) } else { None }).expect("Pub");
        assert_eq!(publish.offset_msg_id, offset_ids[i]);
        assert_eq!(publish.keys.as_deref(), Some(format!("b-{i}").as_str()));
        assert_eq!(publish.body_length, 7);
    }
    producer.shutdown().await;
    c.stop().await;
}

/// Orderly listeners and POP-mode push consumers are traced as concurrent ones are (Java's
/// consume hooks run in all three services).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_and_pop_consumption_is_traced() {
    use ferromq_protocol::body::{
        JsonBody, MessageRequestMode, SetMessageRequestModeRequestBody, SubscriptionGroupConfig,
    };
    let c = LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.trace_topic_enable = true;
    })
    .await;
    c.wait_registered(RMQ_SYS_TRACE_TOPIC).await;
    let producer = Producer::new(
        ProducerConfig { group: "pg_kinds".into(), ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    producer.start().await.unwrap();
    let orderly_msg = producer.send(Message::new("OrderlyTraced", b"o".to_vec())).await.unwrap();
    let pop_msg = producer.send(Message::new("PopTraced", b"p".to_vec())).await.unwrap();
    c.wait_registered("PopTraced").await;

    let orderly = PushConsumer::new(
        PushConsumerConfig {
            group: "cg_orderly_traced".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            enable_msg_trace: true,
            ..PushConsumerConfig::default()
        },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    orderly.subscribe("OrderlyTraced", "*").await.unwrap();
    orderly.register_listener_orderly(|_| ferromq_client::ConsumeOrderlyStatus::Success);
    orderly.start().await.unwrap();

    // The POP group: the broker assigns its queues as POP (Java's SET_MESSAGE_REQUEST_MODE).
    let admin = RemotingClient::new(ferromq_remoting::ClientConfig::default());
    let group = SubscriptionGroupConfig { group_name: "cg_pop_traced".into(), ..SubscriptionGroupConfig::default() };
    let create = RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(group.encode());
    assert_eq!(admin.invoke(&c.broker_addr, create, T).await.unwrap().code, response_code::SUCCESS);
    let mode = SetMessageRequestModeRequestBody {
        consumer_group: "cg_pop_traced".into(),
        mode: MessageRequestMode::Pop,
        pop_share_queue_num: 0,
        topic: "PopTraced".into(),
    };
    let set = RemotingCommand::request(request_code::SET_MESSAGE_REQUEST_MODE).with_body(mode.encode());
    assert_eq!(admin.invoke(&c.broker_addr, set, T).await.unwrap().code, response_code::SUCCESS);
    let pop = PushConsumer::new(
        PushConsumerConfig {
            group: "cg_pop_traced".into(),
            client_rebalance: false,
            rebalance_interval: Duration::from_millis(500),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            enable_msg_trace: true,
            ..PushConsumerConfig::default()
        },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    pop.subscribe("PopTraced", "*").await.unwrap();
    pop.register_listener(|_| ConsumeStatus::ConsumeSuccess);
    pop.start().await.unwrap();

    for (id, group) in [(&orderly_msg.msg_id, "cg_orderly_traced"), (&pop_msg.msg_id, "cg_pop_traced")] {
        let records = traces(&c, id, 2).await;
        let before = records
            .iter()
            .find_map(|r| if let TraceRecord::SubBefore(s) = r { Some(s) } else { None })
            .expect("SubBefore");
        let after = records
            .iter()
            .find_map(|r| if let TraceRecord::SubAfter(s) = r { Some(s) } else { None })
            .expect("SubAfter");
        assert_eq!(before.group, group);
        assert_eq!((after.request_id.as_str(), after.success), (before.request_id.as_str(), true));
    }
    admin.shutdown().await;
    orderly.shutdown().await;
    pop.shutdown().await;
    producer.shutdown().await;
    c.stop().await;
}

/// A transaction left unknown and committed on the broker's check-back leaves an
/// EndTransaction marked `fromTransactionCheck` (Java: the check's end-transaction hook).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checked_back_transaction_is_traced_as_such() {
    struct LaterCommit;
    impl ferromq_client::TransactionListener for LaterCommit {
        type Arg = ();
        fn execute_local_transaction(&self, _msg: &Message, _arg: &()) -> ferromq_client::LocalTransactionState {
            ferromq_client::LocalTransactionState::Unknown
        }
        fn check_local_transaction(&self, _msg: &ferromq_client::MessageExt) -> ferromq_client::LocalTransactionState {
            ferromq_client::LocalTransactionState::CommitMessage
        }
    }
    let c = LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.trace_topic_enable = true;
        s.broker.transaction_check_interval = 500;
        s.broker.transaction_time_out = 0;
    })
    .await;
    c.wait_registered(RMQ_SYS_TRACE_TOPIC).await;
    let producer = ferromq_client::TransactionProducer::new(
        ProducerConfig { group: "pg_tx_checked".into(), enable_msg_trace: true, ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
        std::sync::Arc::new(LaterCommit),
    );
    producer.start().await.unwrap();
    let sent = producer
        .send_message_in_transaction(Message::new("TxChecked", b"tx".to_vec()).with_keys(["tx-checked"]), ())
        .await
        .unwrap();
    let records = traces(&c, &sent.send_result.msg_id, 3).await;
    let ends: Vec<_> =
        records.iter().filter_map(|r| if let TraceRecord::EndTransaction(e) = r { Some(e) } else { None }).collect();
    let checked = ends.iter().find(|e| e.from_transaction_check).expect("an EndTransaction from the check-back");
    assert_eq!(checked.transaction_state, "COMMIT_MESSAGE");
    assert_eq!((checked.group.as_str(), checked.topic.as_str()), ("pg_tx_checked", "TxChecked"));
    assert_eq!(checked.keys.as_deref(), Some("tx-checked"));
    assert!(ends.iter().any(|e| !e.from_transaction_check && e.transaction_state == "UNKNOW"), "{ends:?}");
    producer.shutdown().await;
    c.stop().await;
}
