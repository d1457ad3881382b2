//! SQL92 subscriptions against an in-process broker with `enablePropertyFilter`: push and lite
//! pull consumers get exactly the messages whose properties match, tags notwithstanding.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_client::admin::AdminClient;
use ferromq_client::{
    ClientConfig, ConsumeFromWhere, ConsumeStatus, LitePullConsumer, LitePullConsumerConfig, Message, MessageSelector,
    Producer, ProducerConfig, PushConsumer, PushConsumerConfig,
};
use ferromq_testkit::LocalCluster;
use tokio::time::Instant;

const T: Duration = Duration::from_secs(15);
const SQL: &str = "a > 5 AND color = 'red'";

async fn cluster() -> LocalCluster {
    LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.auto_create_topic_enable = true;
        s.broker.enable_property_filter = true;
    })
    .await
}

fn client(c: &LocalCluster, instance: &str) -> ClientConfig {
    ClientConfig {
        client_ip: "127.0.0.1".to_owned(),
        instance_name: instance.to_owned(),
        ..ClientConfig::with_namesrv(&c.ns_addr)
    }
}

/// Sends `m-0` .. `m-19` with `a` = i and `color` red for even i, blue for odd, plus two
/// messages without `a` (which SQL treats as null, so they never match); every message has
/// tag `TagA`. Returns the bodies matching [`SQL`].
async fn produce(c: &LocalCluster, topic: &str) -> BTreeSet<String> {
    let p = Producer::new(
        ProducerConfig { group: format!("pg_{topic}"), ..ProducerConfig::default() },
        client(c, &format!("prod-{topic}")),
    );
    p.start().await.unwrap();
    let mut matching = BTreeSet::new();
    for i in 0..20 {
        let color = if i % 2 == 0 { "red" } else { "blue" };
        let body = format!("m-{i}");
        let msg = Message::new(topic, body.clone().into_bytes())
            .with_tags("TagA")
            .with_property("a", i.to_string())
            .with_property("color", color);
        p.send(msg).await.unwrap();
        if i > 5 && color == "red" {
            matching.insert(body);
        }
    }
    for body in ["no-a-0", "no-a-1"] {
        p.send(Message::new(topic, body).with_tags("TagA").with_property("color", "red")).await.unwrap();
    }
    p.shutdown().await;
    matching
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_consumer_with_a_sql_selector_gets_exactly_the_matching_messages() {
    let c = cluster().await;
    let expected = produce(&c, "SqlPush").await;
    assert_eq!(expected.len(), 7, "m-6, m-8, .., m-18");
    let consumer = PushConsumer::new(
        PushConsumerConfig {
            group: "cg_sql_push".to_owned(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            rebalance_interval: Duration::from_millis(300),
            ..PushConsumerConfig::default()
        },
        client(&c, "cons-sql-push"),
    );
    consumer.subscribe("SqlPush", MessageSelector::sql(SQL)).await.unwrap();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    consumer.register_listener(move |msgs| {
        log.lock().unwrap().extend(msgs.iter().map(|m| String::from_utf8(m.body().to_vec()).unwrap()));
        ConsumeStatus::ConsumeSuccess
    });
    consumer.start().await.unwrap();
    let deadline = Instant::now() + T;
    while seen.lock().unwrap().len() < expected.len() {
        assert!(Instant::now() < deadline, "timed out: {:?}", seen.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), expected.len(), "each once, nothing else: {seen:?}");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), expected);

    // The heartbeat told the broker the SQL92 subscription, without tags.
    let admin = AdminClient::new(&c.ns_addr);
    let connection = admin.consumer_connection(&c.broker_addr, "cg_sql_push").await.unwrap();
    let sub = &connection.subscription_table["SqlPush"];
    assert_eq!((sub.expression_type.as_str(), sub.sub_string.as_str()), ("SQL92", SQL));
    assert!(sub.tags_set.is_empty() && sub.code_set.is_empty(), "{sub:?}");
    admin.shutdown().await;
    consumer.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_consumer_with_a_sql_selector_gets_exactly_the_matching_messages() {
    let c = cluster().await;
    let expected = produce(&c, "SqlLite").await;
    let consumer = LitePullConsumer::new(
        LitePullConsumerConfig {
            group: "cg_sql_lite".to_owned(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            rebalance_interval: Duration::from_millis(300),
            ..LitePullConsumerConfig::default()
        },
        client(&c, "cons-sql-lite"),
    );
    consumer.subscribe("SqlLite", MessageSelector::sql(SQL)).await.unwrap();
    consumer.start().await.unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + T;
    while seen.len() < expected.len() {
        assert!(Instant::now() < deadline, "timed out: {seen:?}");
        let msgs = consumer.poll(Duration::from_millis(200)).await;
        seen.extend(msgs.iter().map(|m| String::from_utf8(m.body().to_vec()).unwrap()));
    }
    seen.extend(
        consumer.poll(Duration::from_millis(500)).await.iter().map(|m| String::from_utf8(m.body().to_vec()).unwrap()),
    );
    assert_eq!(seen.len(), expected.len(), "each once, nothing else: {seen:?}");
    assert_eq!(seen.into_iter().collect::<BTreeSet<_>>(), expected);
    consumer.shutdown().await;
    c.stop().await;
}
