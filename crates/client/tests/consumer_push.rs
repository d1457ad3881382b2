//! The push consumer against an in-process name server and broker: every message once with
//! offsets committed, redelivery through the retry topic, the dead-letter topic after the
//! last retry, and two consumers of one group sharing the queues.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_client::{
    ClientConfig, ConsumeFromWhere, ConsumeStatus, LitePullConsumer, LitePullConsumerConfig, Message, MessageExt,
    MessageQueue, Producer, ProducerConfig, PushConsumer, PushConsumerConfig,
};
use ferromq_protocol::header::QueryMessageRequestHeader;
use ferromq_protocol::message::{keys, StoredMessage};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_testkit::LocalCluster;
use tokio::time::Instant;

const T: Duration = Duration::from_secs(10);

async fn cluster() -> LocalCluster {
    LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.auto_create_topic_enable = true;
        // Retries wait in delay level 3 + reconsume times: one second each here.
        s.set("messageDelayLevel", "1s 1s 1s 1s 1s 1s 1s 1s").unwrap();
    })
    .await
}

/// Sends `prefix-0` .. `prefix-{n-1}`, each with its text as key.
async fn produce(c: &LocalCluster, topic: &str, prefix: &str, n: usize) {
    let p = Producer::new(
        ProducerConfig { group: format!("pg_{prefix}"), ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    p.start().await.unwrap();
    for i in 0..n {
        let text = format!("{prefix}-{i}");
        p.send(Message::new(topic, text.clone().into_bytes()).with_keys([text])).await.unwrap();
    }
    p.shutdown().await;
}

fn text(m: &MessageExt) -> String {
    String::from_utf8(m.body().to_vec()).unwrap()
}

/// Every delivery a listener saw: (text, topic, reconsume times).
type Seen = Arc<Mutex<Vec<(String, String, i32)>>>;

/// A started push consumer of `topic` whose listener records deliveries and answers `status`.
async fn start_consumer(
    c: &LocalCluster,
    group: &str,
    topic: &str,
    tweak: impl FnOnce(&mut PushConsumerConfig),
    status: impl Fn(&MessageExt) -> ConsumeStatus + Send + Sync + 'static,
) -> (PushConsumer, Seen) {
    let mut config = PushConsumerConfig {
        group: group.to_owned(),
        consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        rebalance_interval: Duration::from_millis(300),
        persist_consumer_offset_interval: Duration::from_millis(500),
        consume_thread_max: 4,
        ..PushConsumerConfig::default()
    };
    tweak(&mut config);
    let consumer = PushConsumer::new(config, ClientConfig::with_namesrv(&c.ns_addr));
    consumer.subscribe(topic, "*").await.unwrap();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    consumer.register_listener(move |msgs| {
        assert_eq!(msgs.len(), 1, "consume_message_batch_max_size is 1");
        let m = &msgs[0];
        log.lock().unwrap().push((text(m), m.topic().to_owned(), m.reconsume_times()));
        status(m)
    });
    consumer.start().await.unwrap();
    (consumer, seen)
}

/// Waits until `done` holds for the deliveries seen so far.
async fn wait_for(seen: &Seen, what: &str, done: impl Fn(&[(String, String, i32)]) -> bool) {
    let deadline = Instant::now() + T;
    while !done(&seen.lock().unwrap()) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {:?}", seen.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn distinct(seen: &[(String, String, i32)], prefix: &str) -> BTreeSet<String> {
    seen.iter().filter(|s| s.0.starts_with(prefix)).map(|s| s.0.clone()).collect()
}

fn expected(prefix: &str, n: usize) -> BTreeSet<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

async fn queues(c: &LocalCluster, topic: &str) -> Vec<MessageQueue> {
    let route = c.wait_registered(topic).await;
    route
        .queue_datas
        .iter()
        .flat_map(|qd| (0..qd.read_queue_nums).map(|q| MessageQueue::new(topic, qd.broker_name.clone(), q)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_consumer_gets_every_message_once_and_commits_offsets() {
    let c = cluster().await;
    produce(&c, "PushAll", "a", 30).await;
    let (consumer, seen) =
        start_consumer(&c, "cg_push_all", "PushAll", |_| {}, |_| ConsumeStatus::ConsumeSuccess).await;
    wait_for(&seen, "30 messages", |s| s.len() >= 30).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    consumer.shutdown().await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 30, "each message exactly once");
    assert_eq!(distinct(&seen, "a"), expected("a", 30), "bodies intact");
    assert!(seen.iter().all(|s| s.1 == "PushAll" && s.2 == 0));

    // Shutdown committed every queue to its end.
    let reader = LitePullConsumer::new(
        LitePullConsumerConfig { group: "cg_push_all".to_owned(), ..LitePullConsumerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    let mut total = 0;
    for mq in queues(&c, "PushAll").await {
        total += reader.committed(&mq).await.unwrap().unwrap_or(0);
    }
    assert_eq!(total, 30);
    reader.instance().shutdown().await;

    // A new consumer of the group gets nothing old.
    produce(&c, "PushAll", "b", 3).await;
    let (again, seen) = start_consumer(&c, "cg_push_all", "PushAll", |_| {}, |_| ConsumeStatus::ConsumeSuccess).await;
    wait_for(&seen, "3 new messages", |s| s.len() >= 3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    again.shutdown().await;
    assert_eq!(distinct(&seen.lock().unwrap(), ""), expected("b", 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconsume_later_redelivers_through_the_retry_topic() {
    let c = cluster().await;
    produce(&c, "PushRetry", "r", 30).await;
    let (consumer, seen) = start_consumer(
        &c,
        "cg_push_retry",
        "PushRetry",
        |_| {},
        |m| {
            if text(m) == "r-7" && m.reconsume_times() < 2 {
                ConsumeStatus::ReconsumeLater
            } else {
                ConsumeStatus::ConsumeSuccess
            }
        },
    )
    .await;
    wait_for(&seen, "r-7 redelivered twice", |s| s.iter().any(|d| d.0 == "r-7" && d.2 == 2)).await;
    wait_for(&seen, "all 30", |s| distinct(s, "r").len() == 30).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    consumer.shutdown().await;
    let seen = seen.lock().unwrap().clone();
    let r7: Vec<(String, i32)> = seen.iter().filter(|d| d.0 == "r-7").map(|d| (d.1.clone(), d.2)).collect();
    // Redeliveries come from %RETRY%cg_push_retry but show the original topic.
    assert_eq!(r7, vec![("PushRetry".to_owned(), 0), ("PushRetry".to_owned(), 1), ("PushRetry".to_owned(), 2)]);
    assert_eq!(seen.len(), 32, "the others once each: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_failing_every_time_ends_in_the_dead_letter_topic() {
    let c = cluster().await;
    produce(&c, "PushDlq", "d", 30).await;
    let (consumer, seen) = start_consumer(
        &c,
        "cg_push_dlq",
        "PushDlq",
        |cfg| cfg.max_reconsume_times = 2,
        |m| if text(m) == "d-3" { ConsumeStatus::ReconsumeLater } else { ConsumeStatus::ConsumeSuccess },
    )
    .await;
    wait_for(&seen, "d-3 delivered three times", |s| s.iter().filter(|d| d.0 == "d-3").count() >= 3).await;
    wait_for(&seen, "all 30", |s| distinct(s, "d").len() == 30).await;

    let header = QueryMessageRequestHeader {
        topic: "%DLQ%cg_push_dlq".to_owned(),
        key: "d-3".to_owned(),
        max_num: 32,
        begin_timestamp: 0,
        end_timestamp: i64::MAX,
    };
    let deadline = Instant::now() + T;
    let found = loop {
        let req = RemotingCommand::request(request_code::QUERY_MESSAGE).with_header(&header);
        let resp = consumer.instance().remoting().invoke(&c.broker_addr, req, T).await.unwrap();
        if resp.code == response_code::SUCCESS {
            break StoredMessage::decode_all(&resp.body).unwrap();
        }
        assert_eq!(resp.code, response_code::QUERY_NOT_FOUND);
        assert!(Instant::now() < deadline, "d-3 never reached the dead-letter topic");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(found.len(), 1);
    assert_eq!(&found[0].body[..], b"d-3");
    assert_eq!(found[0].property(keys::DLQ_ORIGIN_TOPIC), Some("%RETRY%cg_push_dlq"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    consumer.shutdown().await;
    let d3: Vec<i32> = seen.lock().unwrap().iter().filter(|d| d.0 == "d-3").map(|d| d.2).collect();
    assert_eq!(d3, vec![0, 1, 2], "no delivery after the dead-letter topic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_push_consumers_of_one_group_share_the_messages() {
    let c = cluster().await;
    produce(&c, "PushShare", "warm", 1).await;
    let all = queues(&c, "PushShare").await;
    let ok = |_: &MessageExt| ConsumeStatus::ConsumeSuccess;
    let (c1, seen1) = start_consumer(&c, "cg_push_share", "PushShare", |_| {}, ok).await;
    let (c2, seen2) = start_consumer(&c, "cg_push_share", "PushShare", |_| {}, ok).await;
    let mine = |p: &PushConsumer| p.assignment().into_iter().filter(|q| q.topic == "PushShare").collect::<Vec<_>>();
    let deadline = Instant::now() + T;
    loop {
        let (a, b) = (mine(&c1), mine(&c2));
        if !a.is_empty() && !b.is_empty() && a.len() + b.len() == all.len() {
            break;
        }
        assert!(Instant::now() < deadline, "queues never shared: {a:?} / {b:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    produce(&c, "PushShare", "s", 30).await;
    let deadline = Instant::now() + T;
    loop {
        let got: BTreeMap<String, usize> =
            seen1.lock().unwrap().iter().chain(seen2.lock().unwrap().iter()).filter(|d| d.0.starts_with('s')).fold(
                BTreeMap::new(),
                |mut m, d| {
                    *m.entry(d.0.clone()).or_default() += 1;
                    m
                },
            );
        if got.len() == 30 {
            assert!(got.values().all(|&n| n == 1), "each once: {got:?}");
            break;
        }
        assert!(Instant::now() < deadline, "only {} of 30 consumed", got.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c1.shutdown().await;
    c2.shutdown().await;
    let (s1, s2) = (distinct(&seen1.lock().unwrap(), "s"), distinct(&seen2.lock().unwrap(), "s"));
    assert!(!s1.is_empty() && !s2.is_empty(), "both got a share: {s1:?} / {s2:?}");
    assert!(s1.is_disjoint(&s2));
    assert_eq!(&s1 | &s2, expected("s", 30));
}
