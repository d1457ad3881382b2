//! Transactional messages against an in-process name server and broker that checks half
//! messages back quickly: a committed transaction is delivered, a rolled-back one never is, an
//! unknown one is decided by the check-back listener, and one that stays unknown is discarded
//! after `transactionCheckMax` checks.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_client::{
    ClientConfig, ConsumeFromWhere, ConsumeStatus, LitePullConsumer, LitePullConsumerConfig, LocalTransactionState,
    Message, MessageExt, MessageQueue, ProducerConfig, PushConsumer, PushConsumerConfig, SendStatus,
    TransactionListener, TransactionProducer,
};
use ferromq_protocol::message::keys;
use ferromq_testkit::LocalCluster;
use tokio::time::Instant;

const T: Duration = Duration::from_secs(15);
/// The broker's check interval here; "a few runs" below are multiples of it.
const CHECK_INTERVAL_MS: u64 = 300;
/// Checks before the broker gives up on a half message.
const CHECK_MAX: i32 = 2;

async fn cluster() -> LocalCluster {
    LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.auto_create_topic_enable = true;
        s.broker.transaction_check_interval = CHECK_INTERVAL_MS;
        s.broker.transaction_time_out = 500;
        s.broker.transaction_check_max = CHECK_MAX;
        s.broker.enable_property_filter = true;
    })
    .await
}

/// What the check-back listener saw of one half message.
#[derive(Debug, Clone)]
struct Checked {
    body: String,
    topic: String,
    queue_id: i32,
    check_times: Option<String>,
    transaction_id: Option<String>,
}

/// What the local transaction saw of one message.
#[derive(Debug, Clone)]
struct Executed {
    body: String,
    arg: u32,
    tran_msg: Option<String>,
    producer_group: Option<String>,
    transaction_id: Option<String>,
}

/// A listener deciding by the body's prefix (`commit-`, `rollback-`, anything else unknown)
/// for the local transaction, and answering `on_check` to every check-back.
struct Scripted {
    on_check: LocalTransactionState,
    executed: Mutex<Vec<Executed>>,
    checked: Mutex<Vec<Checked>>,
}

impl Scripted {
    fn new(on_check: LocalTransactionState) -> Arc<Self> {
        Arc::new(Scripted { on_check, executed: Mutex::default(), checked: Mutex::default() })
    }

    fn checks(&self) -> Vec<Checked> {
        self.checked.lock().unwrap().clone()
    }
}

impl TransactionListener for Scripted {
    type Arg = u32;

    fn execute_local_transaction(&self, msg: &Message, arg: &u32) -> LocalTransactionState {
        let body = String::from_utf8(msg.body.to_vec()).unwrap();
        let prop = |k: &str| msg.property(k).map(str::to_owned);
        self.executed.lock().unwrap().push(Executed {
            body: body.clone(),
            arg: *arg,
            tran_msg: prop(keys::TRAN_MSG),
            producer_group: prop(keys::PGROUP),
            transaction_id: prop(keys::TRANSACTION_ID),
        });
        if body.starts_with("commit-") {
            LocalTransactionState::CommitMessage
        } else if body.starts_with("rollback-") {
            LocalTransactionState::RollbackMessage
        } else {
            LocalTransactionState::Unknown
        }
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        self.checked.lock().unwrap().push(Checked {
            body: text(msg),
            topic: msg.topic().to_owned(),
            queue_id: msg.stored.queue_id,
            check_times: msg.property(keys::TRANSACTION_CHECK_TIMES).map(str::to_owned),
            transaction_id: msg.transaction_id().map(str::to_owned),
        });
        self.on_check
    }
}

fn client(c: &LocalCluster, instance: &str) -> ClientConfig {
    ClientConfig {
        client_ip: "127.0.0.1".to_owned(),
        instance_name: instance.to_owned(),
        ..ClientConfig::with_namesrv(&c.ns_addr)
    }
}

async fn producer(c: &LocalCluster, group: &str, listener: Arc<Scripted>) -> TransactionProducer<Scripted> {
    let p = TransactionProducer::new(
        ProducerConfig { group: group.to_owned(), ..ProducerConfig::default() },
        client(c, &format!("tx-{group}")),
        listener,
    );
    p.start().await.unwrap();
    p
}

fn text(m: &MessageExt) -> String {
    String::from_utf8(m.body().to_vec()).unwrap()
}

type Seen = Arc<Mutex<Vec<String>>>;

/// A started push consumer of `topic` from its first offset, recording bodies.
async fn consumer(c: &LocalCluster, group: &str, topic: &str) -> (PushConsumer, Seen) {
    let config = PushConsumerConfig {
        group: group.to_owned(),
        consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        rebalance_interval: Duration::from_millis(300),
        persist_consumer_offset_interval: Duration::from_millis(300),
        ..PushConsumerConfig::default()
    };
    let consumer = PushConsumer::new(config, client(c, &format!("cons-{group}")));
    consumer.subscribe(topic, "*").await.unwrap();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    consumer.register_listener(move |msgs| {
        log.lock().unwrap().extend(msgs.iter().map(text));
        ConsumeStatus::ConsumeSuccess
    });
    consumer.start().await.unwrap();
    (consumer, seen)
}

async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + T;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn seen_set(seen: &Seen) -> BTreeSet<String> {
    seen.lock().unwrap().iter().cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_transaction_is_delivered_without_a_check() {
    let c = cluster().await;
    let listener = Scripted::new(LocalTransactionState::RollbackMessage);
    let p = producer(&c, "pg_tx_commit", listener.clone()).await;
    let r = p.send_message_in_transaction(Message::new("TxCommit", "commit-0").with_tags("T1"), 7).await.unwrap();
    assert_eq!(r.local_transaction_state, LocalTransactionState::CommitMessage);
    assert_eq!(r.send_result.status, SendStatus::SendOk);
    assert_eq!(r.send_result.transaction_id.as_deref(), Some(r.send_result.msg_id.as_str()), "the UNIQ_KEY");
    {
        let executed = listener.executed.lock().unwrap();
        assert_eq!(executed.len(), 1);
        let e = &executed[0];
        assert_eq!((e.body.as_str(), e.arg), ("commit-0", 7));
        assert_eq!(e.tran_msg.as_deref(), Some("true"));
        assert_eq!(e.producer_group.as_deref(), Some("pg_tx_commit"));
        assert_eq!(e.transaction_id.as_deref(), Some(r.send_result.msg_id.as_str()));
    }

    let (consumer, seen) = consumer(&c, "cg_tx_commit", "TxCommit").await;
    wait_until("the committed message", || seen_set(&seen).contains("commit-0")).await;
    tokio::time::sleep(Duration::from_millis(3 * CHECK_INTERVAL_MS)).await;
    assert_eq!(*seen.lock().unwrap(), vec!["commit-0".to_owned()], "delivered once");
    assert!(listener.checks().is_empty(), "a decided transaction is not checked back: {:?}", listener.checks());
    consumer.shutdown().await;
    p.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolled_back_transaction_is_never_delivered() {
    let c = cluster().await;
    let listener = Scripted::new(LocalTransactionState::CommitMessage);
    let p = producer(&c, "pg_tx_rollback", listener.clone()).await;
    let r = p.send_message_in_transaction(Message::new("TxRollback", "rollback-0"), 1).await.unwrap();
    assert_eq!(r.local_transaction_state, LocalTransactionState::RollbackMessage);
    let r = p.send_message_in_transaction(Message::new("TxRollback", "commit-1"), 2).await.unwrap();
    assert_eq!(r.local_transaction_state, LocalTransactionState::CommitMessage);

    let (consumer, seen) = consumer(&c, "cg_tx_rollback", "TxRollback").await;
    wait_until("the committed message", || seen_set(&seen).contains("commit-1")).await;
    // Several check runs: a check-back (which would commit) must not happen either.
    tokio::time::sleep(Duration::from_millis(5 * CHECK_INTERVAL_MS)).await;
    assert_eq!(*seen.lock().unwrap(), vec!["commit-1".to_owned()]);
    assert!(listener.checks().is_empty(), "rolled back is decided: {:?}", listener.checks());
    consumer.shutdown().await;
    p.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_transaction_is_committed_by_the_check_back() {
    let c = cluster().await;
    let listener = Scripted::new(LocalTransactionState::CommitMessage);
    let p = producer(&c, "pg_tx_unknown", listener.clone()).await;
    let r = p.send_message_in_transaction(Message::new("TxUnknown", "unknown-0"), 3).await.unwrap();
    assert_eq!(r.local_transaction_state, LocalTransactionState::Unknown);

    let (consumer, seen) = consumer(&c, "cg_tx_unknown", "TxUnknown").await;
    wait_until("the message committed by the check", || seen_set(&seen).contains("unknown-0")).await;
    let checks = listener.checks();
    assert_eq!(checks.len(), 1, "{checks:?}");
    let check = &checks[0];
    assert_eq!(check.body, "unknown-0");
    assert_eq!(check.topic, "TxUnknown", "the real topic, not the half topic");
    assert_eq!(check.queue_id, r.send_result.message_queue.queue_id, "the real queue");
    assert_eq!(check.check_times.as_deref(), Some("1"));
    assert_eq!(check.transaction_id.as_deref(), Some(r.send_result.msg_id.as_str()));
    tokio::time::sleep(Duration::from_millis(3 * CHECK_INTERVAL_MS)).await;
    assert_eq!(*seen.lock().unwrap(), vec!["unknown-0".to_owned()], "delivered once");
    assert_eq!(listener.checks().len(), 1, "a committed transaction is not checked again");
    consumer.shutdown().await;
    p.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_left_unknown_is_discarded_after_the_last_check() {
    let c = cluster().await;
    let listener = Scripted::new(LocalTransactionState::Unknown);
    let p = producer(&c, "pg_tx_forever", listener.clone()).await;
    let r = p.send_message_in_transaction(Message::new("TxForever", "unknown-forever"), 4).await.unwrap();
    assert_eq!(r.local_transaction_state, LocalTransactionState::Unknown);

    let (consumer, seen) = consumer(&c, "cg_tx_forever", "TxForever").await;
    wait_until("transactionCheckMax checks", || listener.checks().len() >= CHECK_MAX as usize).await;
    let times: Vec<Option<String>> = listener.checks().into_iter().map(|c| c.check_times).collect();
    assert_eq!(times, vec![Some("1".to_owned()), Some("2".to_owned())]);

    // The broker gives up: the half message goes to TRANS_CHECK_MAX_TIME_TOPIC.
    let discard_topic = "TRANS_CHECK_MAX_TIME_TOPIC";
    let route = c.wait_registered(discard_topic).await;
    let broker_name = route.broker_datas[0].broker_name.clone();
    let lite = LitePullConsumer::new(
        LitePullConsumerConfig {
            group: "cg_tx_discarded".to_owned(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            ..LitePullConsumerConfig::default()
        },
        client(&c, "lite-discarded"),
    );
    lite.assign(vec![MessageQueue::new(discard_topic, broker_name, 0)]).await.unwrap();
    lite.start().await.unwrap();
    let deadline = Instant::now() + T;
    let mut discarded = Vec::new();
    while !discarded.iter().any(|b| b == "unknown-forever") {
        assert!(Instant::now() < deadline, "the half message never reached {discard_topic}: {discarded:?}");
        discarded.extend(lite.poll(Duration::from_millis(200)).await.iter().map(text));
    }
    lite.shutdown().await;

    tokio::time::sleep(Duration::from_millis(4 * CHECK_INTERVAL_MS)).await;
    assert_eq!(listener.checks().len(), CHECK_MAX as usize, "no check after the last one");
    assert!(seen.lock().unwrap().is_empty(), "nothing delivered: {:?}", seen.lock().unwrap());
    consumer.shutdown().await;
    p.shutdown().await;
    c.stop().await;
}
