//! The simple (pop) consumer against an in-process name server and broker: receive across
//! queues, ack, nack by changing the invisible duration, redelivery after the invisible time
//! with reconsume times counted, tag selectors, and FIFO receive.

use std::collections::BTreeSet;
use std::time::Duration;

use ferromq_client::{
    ClientConfig, Message, MessageSelector, Producer, ProducerConfig, ReceivedMessage, SimpleConsumer,
    SimpleConsumerConfig,
};
use ferromq_testkit::LocalCluster;
use tokio::time::Instant;

async fn cluster() -> LocalCluster {
    LocalCluster::start(|s| {
        s.store.timer_precision_ms = 100;
        s.broker.revive_interval = 100;
    })
    .await
}

async fn produce(c: &LocalCluster, topic: &str, n: usize, tag: &str) {
    let p = Producer::new(
        ProducerConfig { group: format!("pg_{topic}_{tag}"), ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    p.start().await.unwrap();
    for i in 0..n {
        p.send(Message::new(topic, format!("{tag}-{i}").into_bytes()).with_tags(tag)).await.unwrap();
    }
    p.shutdown().await;
}

fn consumer(c: &LocalCluster, group: &str, fifo: bool) -> SimpleConsumer {
    SimpleConsumer::start(
        SimpleConsumerConfig { group: group.into(), await_duration: Duration::from_millis(500), fifo },
        ClientConfig::with_namesrv(&c.ns_addr),
    )
}

async fn receive_until(
    consumer: &SimpleConsumer,
    want: usize,
    invisible: Duration,
    within: Duration,
) -> Vec<ReceivedMessage> {
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    while out.len() < want && Instant::now() < deadline {
        out.extend(consumer.receive(32, invisible).await.unwrap());
    }
    out
}

fn bodies(msgs: &[ReceivedMessage]) -> BTreeSet<String> {
    msgs.iter().map(|m| String::from_utf8(m.message.body().to_vec()).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receive_ack_nack_and_redelivery() {
    let c = cluster().await;
    produce(&c, "SimpleT", 20, "a").await;
    c.wait_registered("SimpleT").await;
    let sc = consumer(&c, "SG1", false);
    sc.subscribe("SimpleT", MessageSelector::tag("*")).await.unwrap();
    let got = receive_until(&sc, 20, Duration::from_secs(2), Duration::from_secs(10)).await;
    assert_eq!(bodies(&got).len(), 20, "every message once");
    let mut got = got;
    let (acked, rest) = got.split_at_mut(10);
    for m in acked.iter() {
        sc.ack(m).await.unwrap();
    }
    let (nacked, late) = rest.split_at_mut(5);
    for m in nacked.iter_mut() {
        sc.change_invisible_duration(m, Duration::ZERO).await.unwrap();
    }
    // The nacked ones come back at once, the others after their 2 s; acked ones never.
    let back = receive_until(&sc, 10, Duration::from_secs(30), Duration::from_secs(15)).await;
    let expect: BTreeSet<String> = bodies(nacked).union(&bodies(late)).cloned().collect();
    assert_eq!(bodies(&back), expect);
    assert!(back.iter().all(|m| m.reconsume_times == 1 && m.message.topic() == "SimpleT"));
    for m in &back {
        sc.ack(m).await.unwrap();
    }
    // An old receipt no longer acknowledges after its message was nacked and redelivered;
    // the broker still answers (Java's behaviour), and nothing comes back twice.
    let again = receive_until(&sc, 1, Duration::from_secs(30), Duration::from_secs(3)).await;
    assert!(again.is_empty(), "{:?}", bodies(&again));
    sc.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_selectors_and_fifo_receive() {
    let c = cluster().await;
    produce(&c, "SimpleF", 6, "keep").await;
    produce(&c, "SimpleF", 6, "skip").await;
    c.wait_registered("SimpleF").await;
    let sc = consumer(&c, "SG2", false);
    sc.subscribe("SimpleF", MessageSelector::tag("keep")).await.unwrap();
    let got = receive_until(&sc, 6, Duration::from_secs(30), Duration::from_secs(10)).await;
    assert_eq!(bodies(&got), (0..6).map(|i| format!("keep-{i}")).collect());
    sc.shutdown().await;

    let fifo = consumer(&c, "SG3", true);
    fifo.subscribe("SimpleF", MessageSelector::tag("*")).await.unwrap();
    let first = receive_until(&fifo, 1, Duration::from_millis(800), Duration::from_secs(10)).await;
    assert!(!first.is_empty());
    // Per queue, offsets ascend within the batch.
    for w in first.windows(2) {
        if w[0].message.message_queue.queue_id == w[1].message.message_queue.queue_id {
            assert!(w[0].message.queue_offset() < w[1].message.queue_offset());
        }
    }
    // Not acked: after the invisible time the same messages come again, counted.
    tokio::time::sleep(Duration::from_millis(900)).await;
    let again = receive_until(&fifo, first.len(), Duration::from_secs(30), Duration::from_secs(10)).await;
    let firsts: BTreeSet<(i32, i64)> =
        first.iter().map(|m| (m.message.message_queue.queue_id, m.message.queue_offset())).collect();
    let redelivered: Vec<&ReceivedMessage> = again
        .iter()
        .filter(|m| firsts.contains(&(m.message.message_queue.queue_id, m.message.queue_offset())))
        .collect();
    assert!(!redelivered.is_empty(), "redelivered in place");
    assert!(redelivered.iter().all(|m| m.reconsume_times >= 1));
    for m in &again {
        fifo.ack(m).await.unwrap();
    }
    fifo.shutdown().await;
    c.stop().await;
}
