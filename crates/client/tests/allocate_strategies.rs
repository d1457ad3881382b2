//! Two lite pull consumers of one group with [`AllocateStrategy::AveragelyByCircle`] against an
//! in-process name server and broker: the sorted queues are dealt round-robin to the sorted
//! client ids.

use std::collections::BTreeSet;
use std::time::Duration;

use ferromq_client::{
    AllocateStrategy, ClientConfig, LitePullConsumer, LitePullConsumerConfig, Message, MessageQueue, Producer,
    ProducerConfig,
};
use ferromq_testkit::LocalCluster;
use tokio::time::Instant;

const T: Duration = Duration::from_secs(10);

fn consumer(c: &LocalCluster, instance: &str) -> LitePullConsumer {
    let config = LitePullConsumerConfig {
        group: "cg_circle".to_owned(),
        rebalance_interval: Duration::from_millis(500),
        auto_commit: false,
        allocate_strategy: AllocateStrategy::AveragelyByCircle,
        ..LitePullConsumerConfig::default()
    };
    let client = ClientConfig { instance_name: instance.to_owned(), ..ClientConfig::with_namesrv(&c.ns_addr) };
    LitePullConsumer::new(config, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_circle_deals_the_queues_round_robin() {
    let c = LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.auto_create_topic_enable = true;
    })
    .await;
    let p = Producer::new(
        ProducerConfig { group: "pg_circle".to_owned(), ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    p.start().await.unwrap();
    p.send(Message::new("CircleTopic", b"warm".to_vec())).await.unwrap();
    p.shutdown().await;
    let route = c.wait_registered("CircleTopic").await;
    let mut all: Vec<MessageQueue> = route
        .queue_datas
        .iter()
        .flat_map(|qd| (0..qd.read_queue_nums).map(|q| MessageQueue::new("CircleTopic", qd.broker_name.clone(), q)))
        .collect();
    all.sort();
    assert!(all.len() >= 4, "too few queues to tell the strategies apart: {all:?}");

    let a = consumer(&c, "circle_a");
    let b = consumer(&c, "circle_b");
    for x in [&a, &b] {
        x.subscribe("CircleTopic", "*").await.unwrap();
        x.start().await.unwrap();
    }
    let mut ids = [a.instance().client_id().to_owned(), b.instance().client_id().to_owned()];
    ids.sort();
    let expect = |id: &str| -> BTreeSet<MessageQueue> {
        let first = usize::from(id != ids[0]);
        all.iter().skip(first).step_by(2).cloned().collect()
    };
    let (want_a, want_b) = (expect(a.instance().client_id()), expect(b.instance().client_id()));
    assert_ne!(want_a, want_b);

    let deadline = Instant::now() + T;
    while a.assignment() != want_a || b.assignment() != want_b {
        assert!(Instant::now() < deadline, "never dealt round-robin: {:?} / {:?}", a.assignment(), b.assignment());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a.shutdown().await;
    b.shutdown().await;
    c.stop().await;
}
