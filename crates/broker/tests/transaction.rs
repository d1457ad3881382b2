//! Transactional messages over real loopback TCP: half messages stay invisible until
//! committed and forever after a rollback; undecided ones are checked back with the producer
//! (CHECK_TRANSACTION_STATE on its own connection) and discarded after `transactionCheckMax`
//! checks; a restart in the middle keeps the half messages.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferromq_protocol::body::{HeartbeatData, JsonBody, ProducerData};
use ferromq_protocol::header::*;
use ferromq_protocol::message::{
    create_offset_msg_id, decode_offset_msg_id, sysflag, MessageProperties, StoredMessage,
};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, Dispatcher, RemotingClient};
use ferromq_testkit::{pull_messages, LocalCluster};
use tokio::sync::mpsc;

const T: Duration = Duration::from_secs(10);

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn quick_checks(s: &mut ferromq_broker::BrokerSettings) {
    s.broker.transaction_check_interval = 300;
    s.broker.transaction_time_out = 500;
    s.broker.transaction_check_max = 3;
}

/// A prepared send as the Java producer makes it.
fn half(topic: &str, body: &str, extra: &[(&str, &str)]) -> RemotingCommand {
    let mut props = MessageProperties::new();
    props.insert("TRAN_MSG", "true");
    props.insert("PGROUP", "txpg");
    props.insert("KEYS", body);
    for (k, v) in extra {
        props.insert(*k, *v);
    }
    let h: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
        producer_group: "txpg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 1,
        sys_flag: sysflag::TRANSACTION_PREPARED_TYPE,
        born_timestamp: now_ms(),
        properties: Some(props.encode()),
        ..SendMessageRequestHeader::default()
    }
    .into();
    RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&h).with_body(body.as_bytes().to_vec())
}

/// (commitLogOffset, tranStateTableOffset, msgId) of a half message from its send response.
struct HalfRef {
    commit_log_offset: i64,
    queue_offset: i64,
    msg_id: String,
}

async fn send_half(client: &RemotingClient, addr: &str, topic: &str, body: &str, extra: &[(&str, &str)]) -> HalfRef {
    let r = client.invoke(addr, half(topic, body, extra), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let h = r.decode_header::<SendMessageResponseHeader>().unwrap();
    assert_eq!(h.queue_id, 1, "the producer is told the queue it asked for");
    let (_, commit_log_offset) = decode_offset_msg_id(&h.msg_id).unwrap();
    HalfRef { commit_log_offset, queue_offset: h.queue_offset, msg_id: h.msg_id }
}

fn end(r: &HalfRef, decision: i32, group: &str, from_check: bool) -> RemotingCommand {
    RemotingCommand::request(request_code::END_TRANSACTION).with_header(&EndTransactionRequestHeader {
        topic: None,
        producer_group: group.into(),
        tran_state_table_offset: r.queue_offset,
        commit_log_offset: r.commit_log_offset,
        commit_or_rollback: decision,
        from_transaction_check: Some(from_check),
        msg_id: r.msg_id.clone(),
        transaction_id: None,
        broker_name: None,
    })
}

fn bodies(msgs: &[StoredMessage]) -> Vec<String> {
    msgs.iter().map(|m| String::from_utf8(m.body.to_vec()).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_shows_the_message_and_rollback_never_does() {
    let c = LocalCluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let a = send_half(&client, &c.broker_addr, "Tx", "to-commit", &[]).await;
    let b = send_half(&client, &c.broker_addr, "Tx", "to-roll-back", &[]).await;
    assert!(
        pull_messages(&client, &c.broker_addr, "Tx", 1, 0, 1, Duration::from_millis(600)).await.is_empty(),
        "half message visible"
    );

    // A wrong producer group or offset is refused (answered, though the request is oneway).
    let wrong = end(&a, sysflag::TRANSACTION_COMMIT_TYPE, "other", false);
    let r = client.invoke(&c.broker_addr, wrong, T).await.unwrap();
    assert_eq!((r.code, r.remark.as_deref()), (response_code::SYSTEM_ERROR, Some("The producer group wrong")));
    let bad = HalfRef { queue_offset: a.queue_offset + 7, ..HalfRef { msg_id: a.msg_id.clone(), ..a } };
    let wrong = end(&bad, sysflag::TRANSACTION_COMMIT_TYPE, "txpg", false);
    let r = client.invoke(&c.broker_addr, wrong, T).await.unwrap();
    assert_eq!(r.remark.as_deref(), Some("The transaction state table offset wrong"));

    client.invoke_oneway(&c.broker_addr, end(&a, sysflag::TRANSACTION_COMMIT_TYPE, "txpg", false)).await.unwrap();
    client.invoke_oneway(&c.broker_addr, end(&b, sysflag::TRANSACTION_ROLLBACK_TYPE, "txpg", false)).await.unwrap();
    let got = pull_messages(&client, &c.broker_addr, "Tx", 1, 0, 1, T).await;
    assert_eq!(bodies(&got), vec!["to-commit"]);
    let m = &got[0];
    assert_eq!(sysflag::transaction_value(m.sys_flag), sysflag::TRANSACTION_COMMIT_TYPE);
    assert_eq!(m.prepared_transaction_offset, a.commit_log_offset);
    // The half message's properties, as Java stores the committed copy: TRAN_MSG (a Java
    // consumer takes the transaction id from it), REAL_TOPIC / REAL_QID, PGROUP, WAIT.
    assert_eq!(m.property("TRAN_MSG"), Some("true"));
    assert_eq!(m.property("REAL_TOPIC"), Some("Tx"));
    assert_eq!(m.property("REAL_QID"), Some("1"));
    assert_eq!(m.property("PGROUP"), Some("txpg"));
    assert_eq!(m.property("WAIT"), None, "as the producer sent it (without)");
    assert!(m.property("__transactionId__").is_some());
    // The rollback never shows, and the op queue marks both half messages done.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(pull_messages(&client, &c.broker_addr, "Tx", 1, 0, 2, Duration::from_millis(600)).await.len(), 1);
    let ops = pull_messages(&client, &c.broker_addr, "RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, 0, 1, T).await;
    let mut done: Vec<i64> = ops
        .iter()
        .flat_map(|m| {
            String::from_utf8(m.body.to_vec()).unwrap().split(',').filter_map(|t| t.parse().ok()).collect::<Vec<i64>>()
        })
        .collect();
    done.sort_unstable();
    assert_eq!(done, vec![a.queue_offset, b.queue_offset]);
    assert!(ops.iter().all(|m| m.property("TAGS") == Some("d")));
    client.shutdown().await;
    c.stop().await;
}

/// A producer connection that registers group `txpg` and reports every check-back.
async fn checked_producer(
    addr: &str,
) -> (RemotingClient, mpsc::UnboundedReceiver<(CheckTransactionStateRequestHeader, StoredMessage)>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut d = Dispatcher::new();
    d.register_sync(request_code::CHECK_TRANSACTION_STATE, move |_conn, req| {
        let h: CheckTransactionStateRequestHeader = req.decode_header().unwrap();
        let m = StoredMessage::decode_all(&req.body).unwrap().remove(0);
        let _ = tx.send((h, m));
        None
    });
    let client = RemotingClient::with_handler(ClientConfig::default(), Arc::new(d));
    let hb = HeartbeatData {
        client_id: "127.0.0.1@tx-test".into(),
        producer_data_set: vec![ProducerData { group_name: "txpg".into() }],
        ..HeartbeatData::default()
    };
    let r = client
        .invoke(addr, RemotingCommand::request(request_code::HEART_BEAT).with_body(hb.encode()), T)
        .await
        .unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    (client, rx)
}

/// Java's `rejectCommitOrRollback`: a producer that asked to be checked first
/// (CHECK_IMMUNITY_TIME_IN_SECONDS) and ends the transaction on its own after that time is
/// refused; an answer to a check still decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_end_past_the_check_immunity_is_refused_and_a_check_answer_is_not() {
    let c = LocalCluster::start(quick_checks).await;
    let client = RemotingClient::new(ClientConfig::default());
    let early =
        send_half(&client, &c.broker_addr, "TxImmune", "early", &[("CHECK_IMMUNITY_TIME_IN_SECONDS", "1")]).await;
    let r =
        client.invoke(&c.broker_addr, end(&early, sysflag::TRANSACTION_COMMIT_TYPE, "txpg", false), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "within the immunity: {:?}", r.remark);

    let late = send_half(&client, &c.broker_addr, "TxImmune", "late", &[("CHECK_IMMUNITY_TIME_IN_SECONDS", "1")]).await;
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let r =
        client.invoke(&c.broker_addr, end(&late, sysflag::TRANSACTION_COMMIT_TYPE, "txpg", false), T).await.unwrap();
    assert_eq!(r.code, response_code::ILLEGAL_OPERATION, "{:?}", r.remark);
    let r = client.invoke(&c.broker_addr, end(&late, sysflag::TRANSACTION_COMMIT_TYPE, "txpg", true), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "an answer to a check: {:?}", r.remark);
    let got = pull_messages(&client, &c.broker_addr, "TxImmune", 1, 0, 2, T).await;
    assert_eq!(bodies(&got), ["early", "late"]);
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecided_half_messages_are_checked_back_and_the_answer_commits_them() {
    let c = LocalCluster::start(quick_checks).await;
    let (producer, mut checks) = checked_producer(&c.broker_addr).await;
    let a = send_half(&producer, &c.broker_addr, "TxCheck", "undecided", &[]).await;
    // No END_TRANSACTION: after transactionTimeOut the broker asks.
    let (h, m) = tokio::time::timeout(T, checks.recv()).await.expect("a check-back").unwrap();
    assert_eq!(h.topic.as_deref(), Some("RMQ_SYS_TRANS_HALF_TOPIC"), "the header names the half topic (Java)");
    assert_ne!(h.commit_log_offset, a.commit_log_offset, "the check names the copy put back");
    assert_eq!(h.msg_id, m.property("UNIQ_KEY").map(str::to_owned));
    assert_eq!((m.topic.as_str(), m.queue_id), ("TxCheck", 1), "the producer sees the real topic and queue");
    assert_eq!(m.property("TRANSACTION_CHECK_TIMES"), Some("1"));
    assert_eq!(&m.body[..], b"undecided");
    // The producer's answer to the check commits it.
    let copy = HalfRef {
        commit_log_offset: h.commit_log_offset,
        queue_offset: h.tran_state_table_offset,
        msg_id: h.offset_msg_id.clone().unwrap(),
    };
    producer.invoke_oneway(&c.broker_addr, end(&copy, sysflag::TRANSACTION_COMMIT_TYPE, "txpg", true)).await.unwrap();
    let got = pull_messages(&producer, &c.broker_addr, "TxCheck", 1, 0, 1, T).await;
    assert_eq!(bodies(&got), vec!["undecided"]);
    // Decided: no more checks (give the service a few runs).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    while let Ok((h, _)) = checks.try_recv() {
        assert!(h.commit_log_offset <= copy.commit_log_offset, "checked again after the commit: {h:?}");
    }
    assert_eq!(pull_messages(&producer, &c.broker_addr, "TxCheck", 1, 0, 2, Duration::from_millis(600)).await.len(), 1);
    producer.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_half_messages_are_discarded_after_transaction_check_max() {
    let c = LocalCluster::start(quick_checks).await;
    let (producer, mut checks) = checked_producer(&c.broker_addr).await;
    send_half(&producer, &c.broker_addr, "TxLost", "never-answered", &[]).await;
    let mut seen = 0;
    while seen < 3 {
        let (_, m) = tokio::time::timeout(T, checks.recv()).await.expect("a check-back").unwrap();
        seen += 1;
        assert_eq!(m.property("TRANSACTION_CHECK_TIMES"), Some(seen.to_string().as_str()));
    }
    // transactionCheckMax = 3: the next run discards instead of asking.
    let discarded = pull_messages(&producer, &c.broker_addr, "TRANS_CHECK_MAX_TIME_TOPIC", 0, 0, 1, T).await;
    assert_eq!(bodies(&discarded), vec!["never-answered"]);
    assert!(
        tokio::time::timeout(Duration::from_millis(1_500), checks.recv()).await.is_err(),
        "asked again after the discard"
    );
    assert!(pull_messages(&producer, &c.broker_addr, "TxLost", 1, 0, 1, Duration::from_millis(600)).await.is_empty());

    // mqadmin resumeCheckHalfMessage on the discarded copy: checked again from a count of 0,
    // and the answer commits it.
    let resume = |msg_id: String| {
        RemotingCommand::request(request_code::RESUME_CHECK_HALF_MESSAGE)
            .with_header(&ResumeCheckHalfMessageRequestHeader { topic: Some("TxLost".into()), msg_id: Some(msg_id) })
    };
    let copy_id = create_offset_msg_id(discarded[0].store_host, discarded[0].physical_offset);
    let r = producer.invoke(&c.broker_addr, resume(copy_id), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let (h, m) = tokio::time::timeout(T, checks.recv()).await.expect("checked again").unwrap();
    assert_eq!(m.property("TRANSACTION_CHECK_TIMES"), Some("1"));
    let again = HalfRef {
        commit_log_offset: h.commit_log_offset,
        queue_offset: h.tran_state_table_offset,
        msg_id: h.msg_id.clone().unwrap_or_default(),
    };
    producer.invoke_oneway(&c.broker_addr, end(&again, sysflag::TRANSACTION_COMMIT_TYPE, "txpg", true)).await.unwrap();
    let committed = pull_messages(&producer, &c.broker_addr, "TxLost", 1, 0, 1, T).await;
    assert_eq!(bodies(&committed), vec!["never-answered"]);
    // Not a message id, no message there, or a message whose transaction is over: refused.
    let plain = pull_messages(&producer, &c.broker_addr, "TxLost", 1, 0, 1, T).await;
    let plain_id = create_offset_msg_id(plain[0].store_host, plain[0].physical_offset);
    for id in ["nope".to_owned(), create_offset_msg_id(plain[0].store_host, 1 << 40), plain_id] {
        let r = producer.invoke(&c.broker_addr, resume(id.clone()), T).await.unwrap();
        assert_eq!(r.code, response_code::SYSTEM_ERROR, "{id}: {:?}", r.remark);
    }
    producer.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_messages_survive_a_restart_and_a_delayed_commit_waits_for_its_level() {
    let mut c = LocalCluster::start(|s| {
        s.store.message_delay_level = ferromq_store::DelayLevels::parse("2s").unwrap();
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    let a = send_half(&client, &c.broker_addr, "TxRestart", "after-restart", &[("DELAY", "1")]).await;
    let b = send_half(&client, &c.broker_addr, "TxRestart", "rolled-back", &[]).await;
    c.restart_broker().await;
    client.invoke_oneway(&c.broker_addr, end(&b, sysflag::TRANSACTION_ROLLBACK_TYPE, "txpg", false)).await.unwrap();
    let committed_at = Instant::now();
    client.invoke_oneway(&c.broker_addr, end(&a, sysflag::TRANSACTION_COMMIT_TYPE, "txpg", false)).await.unwrap();
    assert!(
        pull_messages(&client, &c.broker_addr, "TxRestart", 1, 0, 1, Duration::from_millis(1_000)).await.is_empty(),
        "the commit skipped its delay"
    );
    let got = pull_messages(&client, &c.broker_addr, "TxRestart", 1, 0, 1, T).await;
    assert_eq!(bodies(&got), vec!["after-restart"]);
    assert!(committed_at.elapsed() >= Duration::from_millis(1_800));
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_transactions_and_transactional_batches_are_refused() {
    let c = LocalCluster::start(|s| s.broker.reject_transaction_message = true).await;
    let client = RemotingClient::new(ClientConfig::default());
    let r = client.invoke(&c.broker_addr, half("TxNo", "x", &[]), T).await.unwrap();
    assert_eq!(r.code, response_code::NO_PERMISSION);
    client.shutdown().await;
    c.stop().await;
}
