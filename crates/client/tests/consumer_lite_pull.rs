//! The lite pull consumer against an in-process name server and broker: assign mode with
//! compressed bodies and seek, tag filtering in subscribe mode, committed offsets resumed by a
//! new consumer, and two consumers of one group sharing the queues and taking over.

use std::collections::BTreeSet;
use std::time::Duration;

use ferromq_client::{
    ClientConfig, ConsumeFromWhere, LitePullConsumer, LitePullConsumerConfig, Message, MessageExt, MessageQueue,
    Producer, ProducerConfig,
};
use ferromq_testkit::LocalCluster;
use tokio::time::Instant;

const T: Duration = Duration::from_secs(10);
/// Bodies over 4 KiB are compressed by the producer.
const BIG: usize = 5_000;

async fn cluster() -> LocalCluster {
    LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.auto_create_topic_enable = true;
    })
    .await
}

fn body_of(prefix: &str, i: usize) -> Vec<u8> {
    let mut b = format!("{prefix}-{i}|").into_bytes();
    if i.is_multiple_of(10) {
        b.resize(BIG, b'z');
    }
    b
}

/// Sends `n` messages with tags alternating TagA (even) and TagB (odd).
async fn produce(c: &LocalCluster, topic: &str, prefix: &str, n: usize) {
    let p = Producer::new(
        ProducerConfig { group: format!("pg_{prefix}"), ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    p.start().await.unwrap();
    for i in 0..n {
        let tag = if i % 2 == 0 { "TagA" } else { "TagB" };
        p.send(Message::new(topic, body_of(prefix, i)).with_tags(tag)).await.unwrap();
    }
    p.shutdown().await;
}

async fn queues(c: &LocalCluster, topic: &str) -> Vec<MessageQueue> {
    let route = c.wait_registered(topic).await;
    route
        .queue_datas
        .iter()
        .flat_map(|qd| (0..qd.read_queue_nums).map(|q| MessageQueue::new(topic, qd.broker_name.clone(), q)))
        .collect()
}

fn consumer(c: &LocalCluster, group: &str, tweak: impl FnOnce(&mut LitePullConsumerConfig)) -> LitePullConsumer {
    let mut config = LitePullConsumerConfig {
        group: group.to_owned(),
        rebalance_interval: Duration::from_millis(500),
        auto_commit: false,
        ..LitePullConsumerConfig::default()
    };
    tweak(&mut config);
    LitePullConsumer::new(config, ClientConfig::with_namesrv(&c.ns_addr))
}

fn text(m: &MessageExt) -> String {
    let b = m.body();
    let end = b.iter().position(|&x| x == b'|').unwrap_or(b.len());
    String::from_utf8(b[..end].to_vec()).unwrap()
}

/// Polls until `n` messages whose text starts with `prefix` arrived, then a little longer to
/// catch extra ones.
async fn poll_n(c: &LitePullConsumer, prefix: &str, n: usize) -> Vec<MessageExt> {
    let deadline = Instant::now() + T;
    let mut got = Vec::new();
    while got.len() < n {
        assert!(Instant::now() < deadline, "only {} of {n} {prefix} messages arrived", got.len());
        got.extend(c.poll(Duration::from_millis(200)).await.into_iter().filter(|m| text(m).starts_with(prefix)));
    }
    got.extend(c.poll(Duration::from_millis(300)).await.into_iter().filter(|m| text(m).starts_with(prefix)));
    got
}

fn check_intact(msgs: &[MessageExt], prefix: &str) {
    for m in msgs {
        let i: usize = text(m)[prefix.len() + 1..].parse().unwrap();
        assert_eq!(m.body()[..], body_of(prefix, i)[..], "body of {}", text(m));
        assert_eq!(m.stored.queue_id, m.message_queue.queue_id);
        assert_eq!(m.queue_offset(), m.stored.queue_offset);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assign_polls_every_message_intact_and_seek_rereads() {
    let c = cluster().await;
    produce(&c, "LiteAll", "m", 40).await;
    let mqs = queues(&c, "LiteAll").await;
    let consumer = consumer(&c, "cg_all", |cfg| cfg.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset);
    consumer.assign(mqs.clone()).await.unwrap();
    consumer.start().await.unwrap();
    assert_eq!(consumer.assignment(), mqs.iter().cloned().collect());

    let got = poll_n(&consumer, "m", 40).await;
    assert_eq!(got.len(), 40);
    let texts: BTreeSet<String> = got.iter().map(text).collect();
    assert_eq!(texts, (0..40).map(|i| format!("m-{i}")).collect());
    check_intact(&got, "m");

    // Seek one queue back to 0: exactly its messages come again, from offset 0.
    let mq = &got[0].message_queue;
    let in_queue: Vec<String> = got.iter().filter(|m| &m.message_queue == mq).map(text).collect();
    consumer.seek(mq, 0).unwrap();
    let again = poll_n(&consumer, "m", in_queue.len()).await;
    assert_eq!(again.iter().map(text).collect::<Vec<_>>(), in_queue);
    assert_eq!(again[0].queue_offset(), 0);
    assert!(consumer.seek(&MessageQueue::new("Other", "b", 0), 0).is_err());
    consumer.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_with_a_tag_gets_only_that_tag_and_auto_commits() {
    let c = cluster().await;
    produce(&c, "LiteTag", "t", 40).await;
    let consumer = consumer(&c, "cg_tag", |cfg| {
        cfg.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset;
        cfg.auto_commit = true;
        cfg.auto_commit_interval = Duration::from_millis(100);
    });
    consumer.subscribe("LiteTag", "TagA").await.unwrap();
    consumer.start().await.unwrap();
    assert!(consumer.assign(vec![]).await.is_err(), "assign after subscribe is refused");
    let got = poll_n(&consumer, "t", 20).await;
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|m| m.tags() == Some("TagA")));
    let texts: BTreeSet<String> = got.iter().map(text).collect();
    assert_eq!(texts, (0..40).step_by(2).map(|i| format!("t-{i}")).collect());
    check_intact(&got, "t");

    // Auto-commit brings each queue's committed offset past its last consumed message.
    let deadline = Instant::now() + T;
    for mq in consumer.assignment() {
        // A queue with no TagA was never consumed; the broker answers 0 for it.
        let want = got.iter().filter(|m| m.message_queue == mq).map(|m| m.queue_offset() + 1).max().or(Some(0));
        while consumer.committed(&mq).await.unwrap() != want {
            assert!(Instant::now() < deadline, "{mq:?} never committed {want:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    consumer.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offsets_let_a_new_consumer_resume() {
    let c = cluster().await;
    produce(&c, "LiteCommit", "old", 40).await;
    let mqs = queues(&c, "LiteCommit").await;
    let first = consumer(&c, "cg_commit", |cfg| cfg.consume_from_where = ConsumeFromWhere::ConsumeFromFirstOffset);
    first.assign(mqs.clone()).await.unwrap();
    first.start().await.unwrap();
    let got = poll_n(&first, "old", 40).await;
    assert_eq!(got.len(), 40);
    first.commit_sync().await.unwrap();
    let mut total = 0;
    for mq in &mqs {
        let committed = first.committed(mq).await.unwrap().expect("committed");
        let max = got.iter().filter(|m| &m.message_queue == mq).map(|m| m.queue_offset() + 1).max().unwrap_or(0);
        assert_eq!(committed, max, "{mq:?}");
        total += committed;
    }
    assert_eq!(total, 40);
    first.shutdown().await;

    produce(&c, "LiteCommit", "new", 8).await;
    // Same group, default start (last offset): the committed offsets win.
    let second = consumer(&c, "cg_commit", |_| {});
    second.assign(mqs).await.unwrap();
    second.start().await.unwrap();
    let got = second.poll(Duration::ZERO).await;
    let mut all: Vec<MessageExt> = got;
    let deadline = Instant::now() + T;
    while all.len() < 8 {
        assert!(Instant::now() < deadline, "only {} new messages", all.len());
        all.extend(second.poll(Duration::from_millis(200)).await);
    }
    all.extend(second.poll(Duration::from_millis(300)).await);
    let texts: BTreeSet<String> = all.iter().map(text).collect();
    assert_eq!(all.len(), 8, "{texts:?}");
    assert_eq!(texts, (0..8).map(|i| format!("new-{i}")).collect());
    second.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_splits_the_queues_and_one_takes_over_when_the_other_leaves() {
    let c = cluster().await;
    produce(&c, "LiteSplit", "warm", 4).await;
    let all: BTreeSet<MessageQueue> = queues(&c, "LiteSplit").await.into_iter().collect();
    // No timer rebalance within the test: the split and the take-over come from the brokers'
    // NOTIFY_CONSUMER_IDS_CHANGED.
    let slow = |cfg: &mut LitePullConsumerConfig| cfg.rebalance_interval = Duration::from_secs(600);
    let a = consumer(&c, "cg_split", slow);
    let b = consumer(&c, "cg_split", slow);
    for x in [&a, &b] {
        x.subscribe("LiteSplit", "*").await.unwrap();
        x.start().await.unwrap();
    }
    let deadline = Instant::now() + T;
    loop {
        let (qa, qb) = (a.assignment(), b.assignment());
        if !qa.is_empty()
            && !qb.is_empty()
            && qa.is_disjoint(&qb)
            && qa.union(&qb).cloned().collect::<BTreeSet<_>>() == all
        {
            break;
        }
        assert!(Instant::now() < deadline, "never balanced: {qa:?} / {qb:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    produce(&c, "LiteSplit", "split", 40).await;
    let (mut got_a, mut got_b) = (BTreeSet::new(), BTreeSet::new());
    let deadline = Instant::now() + T;
    while got_a.len() + got_b.len() < 40 {
        assert!(Instant::now() < deadline, "only {} + {} arrived", got_a.len(), got_b.len());
        for (x, got) in [(&a, &mut got_a), (&b, &mut got_b)] {
            got.extend(x.poll(Duration::from_millis(100)).await.iter().map(text).filter(|t| t.starts_with("split")));
        }
    }
    assert!(!got_a.is_empty() && !got_b.is_empty(), "{} / {}", got_a.len(), got_b.len());
    assert!(got_a.is_disjoint(&got_b));
    let union: BTreeSet<String> = got_a.union(&got_b).cloned().collect();
    assert_eq!(union, (0..40).map(|i| format!("split-{i}")).collect());

    b.shutdown().await;
    let deadline = Instant::now() + T;
    while a.assignment() != all {
        assert!(Instant::now() < deadline, "a never took over: {:?}", a.assignment());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    produce(&c, "LiteSplit", "after", 10).await;
    let got = poll_n(&a, "after", 10).await;
    let texts: BTreeSet<String> = got.iter().map(text).collect();
    assert_eq!(texts, (0..10).map(|i| format!("after-{i}")).collect());
    a.shutdown().await;
    c.stop().await;
}
