//! More of the push consumer against an in-process name server and broker: broadcasting with
//! local offset files, orderly consumption under broker queue locks, and the requests a
//! broker sends to consumers (running info, offset reset).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_client::{
    select_by_hash, ClientConfig, ConsumeFromWhere, ConsumeOrderlyStatus, ConsumeStatus, Message, MessageExt,
    MessageModel, MessageQueue, Producer, ProducerConfig, PushConsumer, PushConsumerConfig,
};
use ferromq_protocol::body::{JsonBody, LockBatchRequestBody, LockBatchResponseBody};
use ferromq_protocol::header::{GetMaxOffsetRequestHeader, OffsetResponseHeader};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::RemotingClient;
use ferromq_testkit::LocalCluster;
use tokio::time::Instant;

const T: Duration = Duration::from_secs(15);

async fn cluster() -> LocalCluster {
    LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.auto_create_topic_enable = true;
    })
    .await
}

async fn producer(c: &LocalCluster, group: &str) -> Producer {
    let p = Producer::new(
        ProducerConfig { group: group.to_owned(), ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    p.start().await.unwrap();
    p
}

/// Sends `prefix-0` .. `prefix-{n-1}`.
async fn produce(c: &LocalCluster, topic: &str, prefix: &str, n: usize) {
    let p = producer(c, &format!("pg_{prefix}")).await;
    for i in 0..n {
        p.send(Message::new(topic, format!("{prefix}-{i}").into_bytes())).await.unwrap();
    }
    p.shutdown().await;
}

fn text(m: &MessageExt) -> String {
    String::from_utf8(m.body().to_vec()).unwrap()
}

type Seen = Arc<Mutex<Vec<String>>>;

fn base_config(group: &str) -> PushConsumerConfig {
    PushConsumerConfig {
        group: group.to_owned(),
        consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        rebalance_interval: Duration::from_millis(300),
        persist_consumer_offset_interval: Duration::from_millis(300),
        consume_thread_max: 4,
        ..PushConsumerConfig::default()
    }
}

fn client(c: &LocalCluster, instance: &str) -> ClientConfig {
    ClientConfig {
        client_ip: "127.0.0.1".to_owned(),
        instance_name: instance.to_owned(),
        ..ClientConfig::with_namesrv(&c.ns_addr)
    }
}

async fn wait_for(seen: &Seen, what: &str, done: impl Fn(&[String]) -> bool) {
    let deadline = Instant::now() + T;
    while !done(&seen.lock().unwrap()) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {:?}", seen.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn expected(prefix: &str, n: usize) -> BTreeSet<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

async fn start_broadcasting(c: &LocalCluster, instance: &str, dir: &Path, topic: &str) -> (PushConsumer, Seen) {
    let config = PushConsumerConfig {
        message_model: MessageModel::Broadcasting,
        offset_store_dir: Some(dir.to_owned()),
        ..base_config("cg_broadcast")
    };
    let consumer = PushConsumer::new(config, client(c, instance));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcasting_consumers_each_get_every_message_and_resume_from_local_offsets() {
    let c = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    produce(&c, "Bcast", "a", 20).await;
    let (one, seen_one) = start_broadcasting(&c, "one", dir.path(), "Bcast").await;
    let (two, seen_two) = start_broadcasting(&c, "two", dir.path(), "Bcast").await;
    for seen in [&seen_one, &seen_two] {
        wait_for(seen, "all 20", |s| s.len() >= 20).await;
    }
    assert_eq!(one.assignment(), two.assignment(), "every consumer gets every queue");
    assert!(one.assignment().iter().all(|mq| mq.topic == "Bcast"), "no retry topic when broadcasting");
    tokio::time::sleep(Duration::from_millis(300)).await;
    one.shutdown().await;
    for seen in [&seen_one, &seen_two] {
        let s = seen.lock().unwrap().clone();
        assert_eq!(s.len(), 20, "each message once: {s:?}");
        assert_eq!(s.into_iter().collect::<BTreeSet<_>>(), expected("a", 20));
    }
    let file = dir.path().join("127.0.0.1@one").join("cg_broadcast").join("offsets.json");
    let json = std::fs::read_to_string(&file).unwrap();
    assert!(json.contains("offsetTable"), "{json}");

    // Restarted with the same client id and directory, it resumes where it stopped.
    produce(&c, "Bcast", "b", 5).await;
    let (again, seen_again) = start_broadcasting(&c, "one", dir.path(), "Bcast").await;
    wait_for(&seen_again, "5 new", |s| s.len() >= 5).await;
    wait_for(&seen_two, "25 in all", |s| s.len() >= 25).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    again.shutdown().await;
    two.shutdown().await;
    let s = seen_again.lock().unwrap().clone();
    assert_eq!(s.into_iter().collect::<BTreeSet<_>>(), expected("b", 5), "nothing old again");
}

const KEYS: usize = 4;

/// Sends `k{key}-{i}` for i in `from..to`, interleaving the keys, each key to one queue by
/// the hash selector.
async fn produce_ordered(c: &LocalCluster, topic: &str, from: usize, to: usize) {
    let p = producer(c, "pg_ordered").await;
    for i in from..to {
        for k in 0..KEYS {
            let key = format!("k{k}");
            let msg = Message::new(topic, format!("{key}-{i}").into_bytes());
            p.send_with_selector(msg, select_by_hash(&key)).await.unwrap();
        }
    }
    p.shutdown().await;
}

async fn queues(c: &LocalCluster, topic: &str) -> BTreeSet<MessageQueue> {
    let route = c.wait_registered(topic).await;
    route
        .queue_datas
        .iter()
        .flat_map(|qd| (0..qd.read_queue_nums).map(|q| MessageQueue::new(topic, qd.broker_name.clone(), q)))
        .collect()
}

/// LOCK_BATCH_MQ or UNLOCK_BATCH_MQ for another client id, straight to the broker.
async fn lock_as(c: &LocalCluster, code: i32, group: &str, mqs: &BTreeSet<MessageQueue>) -> BTreeSet<MessageQueue> {
    let body = LockBatchRequestBody {
        client_id: "10.9.9.9@intruder".to_owned(),
        consumer_group: group.to_owned(),
        mq_set: mqs.clone(),
        only_this_broker: false,
    };
    let rc = RemotingClient::new(ferromq_remoting::ClientConfig::default());
    let req = RemotingCommand::request(code).with_body(body.encode());
    let resp = rc.invoke(&c.broker_addr, req, Duration::from_secs(3)).await.unwrap();
    rc.shutdown().await;
    assert_eq!(resp.code, response_code::SUCCESS);
    if code == request_code::LOCK_BATCH_MQ {
        LockBatchResponseBody::decode(&resp.body).unwrap().lock_ok_mq_set
    } else {
        BTreeSet::new()
    }
}

/// Deliveries an orderly listener saw: (text, reconsume times).
type SeenOrderly = Arc<Mutex<Vec<(String, i32)>>>;

async fn start_orderly(
    c: &LocalCluster,
    group: &str,
    instance: &str,
    topic: &str,
    tweak: impl FnOnce(&mut PushConsumerConfig),
    status: impl Fn(&MessageExt) -> ConsumeOrderlyStatus + Send + Sync + 'static,
) -> (PushConsumer, SeenOrderly) {
    let mut config = PushConsumerConfig {
        lock_renew_interval: Duration::from_millis(500),
        suspend_current_queue_time: Duration::from_millis(100),
        ..base_config(group)
    };
    tweak(&mut config);
    let consumer = PushConsumer::new(config, client(c, instance));
    consumer.subscribe(topic, "*").await.unwrap();
    let seen: SeenOrderly = Arc::default();
    let log = seen.clone();
    consumer.register_listener_orderly(move |msgs| {
        let m = &msgs[0];
        log.lock().unwrap().push((text(m), m.reconsume_times()));
        status(m)
    });
    consumer.start().await.unwrap();
    (consumer, seen)
}

async fn wait_orderly(seen: &SeenOrderly, what: &str, done: impl Fn(&[(String, i32)]) -> bool) {
    let deadline = Instant::now() + T;
    while !done(&seen.lock().unwrap()) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {:?}", seen.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Each key's messages, in delivery order, with immediate repeats (local retries) dropped.
fn per_key(seen: &[(String, i32)], key: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (t, _) in seen.iter().filter(|d| d.0.starts_with(&format!("k{key}-"))) {
        if out.last() != Some(t) {
            out.push(t.clone());
        }
    }
    out
}

fn in_send_order(key: usize, from: usize, to: usize) -> Vec<String> {
    (from..to).map(|i| format!("k{key}-{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_consumer_waits_for_the_lock_and_consumes_each_key_in_send_order() {
    let c = cluster().await;
    produce_ordered(&c, "Ordered", 0, 10).await;
    let all = queues(&c, "Ordered").await;
    assert_eq!(lock_as(&c, request_code::LOCK_BATCH_MQ, "cg_orderly", &all).await, all);

    let suspended_once = Arc::new(Mutex::new(false));
    let flag = suspended_once.clone();
    let (consumer, seen) = start_orderly(
        &c,
        "cg_orderly",
        "o1",
        "Ordered",
        |_| {},
        move |m| {
            let mut once = flag.lock().unwrap();
            if text(m) == "k1-3" && !*once {
                *once = true;
                return ConsumeOrderlyStatus::SuspendCurrentQueueAMoment;
            }
            ConsumeOrderlyStatus::Success
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(seen.lock().unwrap().is_empty(), "nothing consumed while another client holds the locks");
    assert!(consumer.assignment().iter().all(|mq| mq.topic != "Ordered"), "{:?}", consumer.assignment());

    lock_as(&c, request_code::UNLOCK_BATCH_MQ, "cg_orderly", &all).await;
    wait_orderly(&seen, "all 40", |s| s.len() > 4 * 10).await;
    consumer.shutdown().await;
    let seen = seen.lock().unwrap().clone();
    for k in 0..KEYS {
        assert_eq!(per_key(&seen, k), in_send_order(k, 0, 10), "key k{k}: {seen:?}");
    }
    let again: Vec<&(String, i32)> = seen.iter().filter(|d| d.0 == "k1-3").collect();
    assert_eq!(again, [&("k1-3".to_owned(), 0), &("k1-3".to_owned(), 1)], "retried locally, counted");
    // Shutdown unlocked the queues: another client can lock them now.
    assert_eq!(lock_as(&c, request_code::LOCK_BATCH_MQ, "cg_orderly", &all).await, all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_orderly_consumer_takes_over_queues_when_the_first_shuts_down() {
    let c = cluster().await;
    produce_ordered(&c, "Ordered2", 0, 5).await;
    let all = queues(&c, "Ordered2").await;
    let ok = |_: &MessageExt| ConsumeOrderlyStatus::Success;
    let (first, seen_first) = start_orderly(&c, "cg_orderly2", "a", "Ordered2", |_| {}, ok).await;
    wait_orderly(&seen_first, "first 20", |s| s.len() >= 20).await;
    let (second, seen_second) = start_orderly(&c, "cg_orderly2", "b", "Ordered2", |_| {}, ok).await;
    // Shared out: never one queue on both.
    let deadline = Instant::now() + T;
    loop {
        let (a, b) = (first.assignment(), second.assignment());
        assert!(a.is_disjoint(&b), "{a:?} / {b:?}");
        if !b.is_empty() && a.iter().chain(&b).filter(|mq| mq.topic == "Ordered2").count() == all.len() {
            break;
        }
        assert!(Instant::now() < deadline, "no split: {a:?} / {b:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    first.shutdown().await;
    let deadline = Instant::now() + T;
    while !all.is_subset(&second.assignment()) {
        assert!(Instant::now() < deadline, "no takeover: {:?}", second.assignment());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    produce_ordered(&c, "Ordered2", 5, 10).await;
    wait_orderly(&seen_second, "the next 20", |s| s.iter().filter(|d| !d.0.ends_with("-0")).count() >= 20).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    second.shutdown().await;
    let seen = seen_second.lock().unwrap().clone();
    for k in 0..KEYS {
        let tail: Vec<String> =
            per_key(&seen, k).into_iter().filter(|t| t.as_str() >= format!("k{k}-5").as_str()).collect();
        assert_eq!(tail, in_send_order(k, 5, 10), "key k{k}: {seen:?}");
    }
    assert_eq!(seen_first.lock().unwrap().len(), 20, "nothing consumed twice by the first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_message_past_max_reconsume_times_goes_to_the_dead_letter_topic() {
    let c = cluster().await;
    let p = producer(&c, "pg_dlq").await;
    for i in 0..3 {
        p.send_with_selector(Message::new("OrderedDlq", format!("d-{i}").into_bytes()), select_by_hash("d"))
            .await
            .unwrap();
    }
    p.shutdown().await;
    let (consumer, seen) = start_orderly(
        &c,
        "cg_orderly_dlq",
        "d",
        "OrderedDlq",
        |cfg| cfg.max_reconsume_times = 2,
        |m| {
            if text(m) == "d-1" {
                ConsumeOrderlyStatus::SuspendCurrentQueueAMoment
            } else {
                ConsumeOrderlyStatus::Success
            }
        },
    )
    .await;
    wait_orderly(&seen, "d-2", |s| s.iter().any(|d| d.0 == "d-2")).await;
    consumer.shutdown().await;
    let seen = seen.lock().unwrap().clone();
    let expected: Vec<(String, i32)> =
        [("d-0", 0), ("d-1", 0), ("d-1", 1), ("d-1", 2), ("d-2", 0)].iter().map(|(t, r)| (t.to_string(), *r)).collect();
    assert_eq!(seen, expected);

    // Count the dead-letter topic's messages.
    let rc = RemotingClient::new(ferromq_remoting::ClientConfig::default());
    let header = GetMaxOffsetRequestHeader {
        topic: "%DLQ%cg_orderly_dlq".to_owned(),
        queue_id: 0,
        committed: None,
        broker_name: None,
        lo: None,
    };
    let req = RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&header);
    let resp = rc.invoke(&c.broker_addr, req, Duration::from_secs(3)).await.unwrap();
    assert_eq!(resp.code, response_code::SUCCESS, "{:?}", resp.remark);
    assert_eq!(resp.decode_header::<OffsetResponseHeader>().unwrap().offset, 1, "d-1 in the dead-letter topic");
    rc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orderly_consumption_resumes_in_order_after_consumer_and_broker_restarts() {
    let mut c = cluster().await;
    produce_ordered(&c, "OrderedRestart", 0, 5).await;
    let ok = |_: &MessageExt| ConsumeOrderlyStatus::Success;
    let (first, seen_first) = start_orderly(&c, "cg_orderly_restart", "r1", "OrderedRestart", |_| {}, ok).await;
    wait_orderly(&seen_first, "the first 20", |s| s.len() >= 4 * 5).await;
    // A clean shutdown commits the offsets and releases the queue locks.
    first.shutdown().await;

    // The broker restarts (same data, new port) between the two consumer lives.
    c.restart_broker().await;
    c.wait_registered("OrderedRestart").await;
    produce_ordered(&c, "OrderedRestart", 5, 10).await;
    let (second, seen_second) = start_orderly(&c, "cg_orderly_restart", "r2", "OrderedRestart", |_| {}, ok).await;
    wait_orderly(&seen_second, "the next 20", |s| s.len() >= 4 * 5).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    second.shutdown().await;
    let first = seen_first.lock().unwrap().clone();
    let second = seen_second.lock().unwrap().clone();
    for k in 0..KEYS {
        assert_eq!(per_key(&first, k), in_send_order(k, 0, 5), "first life, key k{k}: {first:?}");
        assert_eq!(
            per_key(&second, k),
            in_send_order(k, 5, 10),
            "second life starts at the committed offsets, key k{k}: {second:?}"
        );
    }
}
