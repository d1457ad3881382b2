//! What admin tools ask of running consumers through the broker, against an in-process name
//! server and broker: an offset reset reaches online push and lite pull consumers at once
//! (RESET_CONSUMER_CLIENT_OFFSET) and they consume the old messages again; running info
//! (GET_CONSUMER_RUNNING_INFO) is forwarded to the named client and back.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_client::admin::{AdminClient, AdminError};
use ferromq_client::{
    ClientConfig, ConsumeFromWhere, ConsumeStatus, LitePullConsumer, LitePullConsumerConfig, Message, Producer,
    ProducerConfig, PushConsumer, PushConsumerConfig,
};
use ferromq_protocol::body::{
    PROP_CLIENT_VERSION, PROP_CONSUMER_START_TIMESTAMP, PROP_CONSUME_ORDERLY, PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR,
};
use ferromq_protocol::response_code;
use ferromq_testkit::LocalCluster;
use tokio::time::Instant;

/// How long a consumer may take to act on a reset. Well under the 20 s a parked pull is held
/// (`broker_suspend_max`), after which the broker's server-side reset alone would move it.
const RESET_DEADLINE: Duration = Duration::from_secs(8);
const T: Duration = Duration::from_secs(10);

async fn cluster() -> LocalCluster {
    LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.auto_create_topic_enable = true;
    })
    .await
}

async fn produce(c: &LocalCluster, topic: &str, prefix: &str, n: usize) {
    let p = Producer::new(
        ProducerConfig { group: format!("pg_{prefix}"), ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    p.start().await.unwrap();
    for i in 0..n {
        p.send(Message::new(topic, format!("{prefix}-{i}").into_bytes())).await.unwrap();
    }
    p.shutdown().await;
}

/// Body text -> deliveries.
type Counts = Arc<Mutex<BTreeMap<String, usize>>>;

async fn wait_counts(counts: &Counts, what: &str, deadline: Duration, done: impl Fn(&BTreeMap<String, usize>) -> bool) {
    let until = Instant::now() + deadline;
    while !done(&counts.lock().unwrap()) {
        assert!(Instant::now() < until, "timed out waiting for {what}: {:?}", counts.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn push_consumer(c: &LocalCluster, group: &str, topic: &str) -> (PushConsumer, Counts) {
    let config = PushConsumerConfig {
        group: group.to_owned(),
        consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        rebalance_interval: Duration::from_millis(300),
        persist_consumer_offset_interval: Duration::from_millis(300),
        broker_suspend_max: Duration::from_secs(20),
        ..PushConsumerConfig::default()
    };
    let consumer = PushConsumer::new(config, ClientConfig::with_namesrv(&c.ns_addr));
    consumer.subscribe(topic, "*").await.unwrap();
    let counts: Counts = Arc::default();
    let seen = counts.clone();
    consumer.register_listener(move |msgs| {
        let mut seen = seen.lock().unwrap();
        for m in msgs {
            *seen.entry(String::from_utf8_lossy(m.body()).into_owned()).or_default() += 1;
        }
        ConsumeStatus::ConsumeSuccess
    });
    consumer.start().await.unwrap();
    (consumer, counts)
}

/// Polls the broker until the group's committed offsets on `topic` add up to `total`.
async fn wait_committed(admin: &AdminClient, broker: &str, group: &str, topic: &str, total: i64) {
    let until = Instant::now() + T;
    loop {
        let stats = admin.consume_stats(broker, group, Some(topic)).await;
        let committed: i64 =
            stats.as_ref().map(|s| s.offset_table.values().map(|o| o.consumer_offset).sum()).unwrap_or(-1);
        if committed == total {
            return;
        }
        assert!(Instant::now() < until, "committed offsets of {group} sum to {committed}, not {total}: {stats:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_consumer_consumes_again_after_an_admin_reset_to_an_earlier_time() {
    let c = cluster().await;
    let (topic, group, n) = ("ResetPush", "cg_reset_push", 20);
    produce(&c, topic, "p", n).await;
    let (consumer, counts) = push_consumer(&c, group, topic).await;
    wait_counts(&counts, "first delivery", T, |m| m.len() == n).await;
    let admin = AdminClient::new(&c.ns_addr);
    wait_committed(&admin, &c.broker_addr, group, topic, n as i64).await;

    let reset = admin.reset_offset_by_time(&c.broker_addr, topic, group, 0, true).await.unwrap();
    assert!(!reset.offset_table.is_empty() && reset.offset_table.values().all(|o| *o == 0), "{reset:?}");
    wait_counts(&counts, "redelivery after the reset", RESET_DEADLINE, |m| m.values().all(|c| *c >= 2)).await;
    wait_committed(&admin, &c.broker_addr, group, topic, n as i64).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let counts = counts.lock().unwrap().clone();
    assert_eq!(counts.len(), n);
    assert!(counts.values().all(|c| *c == 2), "each message once more, no more: {counts:?}");

    consumer.shutdown().await;
    admin.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_consumer_seeks_to_an_admin_reset() {
    let c = cluster().await;
    let (topic, group, n) = ("ResetLite", "cg_reset_lite", 12);
    produce(&c, topic, "l", n).await;
    let config = LitePullConsumerConfig {
        group: group.to_owned(),
        consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        rebalance_interval: Duration::from_millis(300),
        auto_commit: false,
        broker_suspend_max: Duration::from_secs(20),
        ..LitePullConsumerConfig::default()
    };
    let consumer = LitePullConsumer::new(config, ClientConfig::with_namesrv(&c.ns_addr));
    consumer.subscribe(topic, "*").await.unwrap();
    consumer.start().await.unwrap();
    let counts: Counts = Arc::default();
    let poll_until = |deadline: Duration, want: usize| {
        let (consumer, counts) = (&consumer, counts.clone());
        async move {
            let until = Instant::now() + deadline;
            while counts.lock().unwrap().values().sum::<usize>() < want {
                assert!(Instant::now() < until, "polled only {:?}", counts.lock().unwrap());
                for m in consumer.poll(Duration::from_millis(200)).await {
                    *counts.lock().unwrap().entry(String::from_utf8_lossy(m.body()).into_owned()).or_default() += 1;
                }
            }
        }
    };
    poll_until(T, n).await;
    consumer.commit_sync().await.unwrap();
    let admin = AdminClient::new(&c.ns_addr);
    wait_committed(&admin, &c.broker_addr, group, topic, n as i64).await;

    admin.reset_offset_by_time(&c.broker_addr, topic, group, 0, true).await.unwrap();
    poll_until(RESET_DEADLINE, 2 * n).await;
    let counts = counts.lock().unwrap().clone();
    assert_eq!(counts.len(), n);
    assert!(counts.values().all(|c| *c == 2), "each message once more: {counts:?}");
    // The reset offsets were committed by the consumer; the new progress commits on top.
    consumer.commit_sync().await.unwrap();
    wait_committed(&admin, &c.broker_addr, group, topic, n as i64).await;

    consumer.shutdown().await;
    admin.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_info_comes_from_the_named_consumer_through_the_broker() {
    let c = cluster().await;
    let (topic, group, n) = ("RunningInfo", "cg_running_info", 8);
    produce(&c, topic, "r", n).await;
    let (consumer, counts) = push_consumer(&c, group, topic).await;
    wait_counts(&counts, "delivery", T, |m| m.len() == n).await;
    let admin = AdminClient::new(&c.ns_addr);
    wait_committed(&admin, &c.broker_addr, group, topic, n as i64).await;
    let client_id = consumer.instance().client_id().to_owned();

    let info = admin.consumer_running_info(&c.broker_addr, group, &client_id, false).await.unwrap();
    assert_eq!(info.properties[PROP_CONSUME_TYPE], "CONSUME_PASSIVELY");
    assert_eq!(info.properties[PROP_CONSUME_ORDERLY], "false");
    assert_eq!(info.properties[PROP_CLIENT_VERSION], "V5_3_3");
    assert_eq!(info.properties[PROP_NAMESERVER_ADDR], format!("{};", c.ns_addr));
    assert_eq!(info.properties["consumerGroup"], group);
    assert_eq!(info.properties["messageModel"], "CLUSTERING");
    assert!(info.properties[PROP_CONSUMER_START_TIMESTAMP].parse::<i64>().unwrap() > 0);
    let topics: Vec<&str> = info.subscription_set.iter().map(|s| s.topic.as_str()).collect();
    assert_eq!(topics, [format!("%RETRY%{group}").as_str(), topic], "{info:?}");
    let queues: Vec<_> = info.mq_table.iter().filter(|(mq, _)| mq.topic == topic).collect();
    assert!(!queues.is_empty(), "{info:?}");
    assert_eq!(queues.iter().map(|(_, q)| q.commit_offset).sum::<i64>(), n as i64, "{info:?}");
    assert!(queues.iter().all(|(_, q)| q.cached_msg_count == 0 && q.last_pull_timestamp > 0 && !q.dropped));
    let status = info.status_table[topic];
    assert!(status.pull_tps > 0.0 && status.consume_ok_tps > 0.0, "{status:?}");
    assert_eq!(status.consume_failed_msgs, 0);
    assert!(info.jstack.is_none());

    let with_dump = admin.consumer_running_info(&c.broker_addr, group, &client_id, true).await.unwrap();
    let dump = with_dump.jstack.unwrap_or_default();
    assert!(dump.contains(&format!("push consumer {group}")) && dump.contains(topic), "{dump}");

    consumer.shutdown().await;
    admin.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_info_of_a_lite_pull_consumer_says_pull() {
    let c = cluster().await;
    let (topic, group) = ("RunningInfoLite", "cg_running_info_lite");
    produce(&c, topic, "rl", 2).await;
    let config = LitePullConsumerConfig {
        group: group.to_owned(),
        rebalance_interval: Duration::from_millis(300),
        ..LitePullConsumerConfig::default()
    };
    let consumer = LitePullConsumer::new(config, ClientConfig::with_namesrv(&c.ns_addr));
    consumer.subscribe(topic, "*").await.unwrap();
    consumer.start().await.unwrap();
    let admin = AdminClient::new(&c.ns_addr);
    let client_id = consumer.instance().client_id().to_owned();
    let until = Instant::now() + T;
    let info = loop {
        let info = admin.consumer_running_info(&c.broker_addr, group, &client_id, false).await.unwrap();
        if !info.mq_table.is_empty() {
            break info;
        }
        assert!(Instant::now() < until, "no queue assigned: {info:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(info.properties[PROP_CONSUME_TYPE], "CONSUME_ACTIVELY");
    assert_eq!(info.properties["autoCommit"], "true");
    assert_eq!(info.subscription_set.len(), 1);
    assert!(info.mq_table.keys().all(|mq| mq.topic == topic));
    assert!(info.status_table.is_empty());

    consumer.shutdown().await;
    admin.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_info_of_a_client_not_online_is_a_system_error() {
    let c = cluster().await;
    let admin = AdminClient::new(&c.ns_addr);
    let err = admin.consumer_running_info(&c.broker_addr, "cg_nobody", "127.0.0.1@nobody", false).await.unwrap_err();
    match &err {
        AdminError::Response { code, remark, .. } => {
            assert_eq!(*code, response_code::SYSTEM_ERROR, "{err}");
            assert_eq!(remark, "The Consumer <cg_nobody> <127.0.0.1@nobody> not online");
        }
        other => panic!("expected a SYSTEM_ERROR response, got {other:?}"),
    }
    admin.shutdown().await;
    c.stop().await;
}
