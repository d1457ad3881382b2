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
