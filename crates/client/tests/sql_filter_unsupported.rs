//! SQL92 subscriptions against a broker without `enablePropertyFilter`: the consumers say why
//! they get nothing and keep retrying after a pause instead of spinning. A test binary of its
//! own because it installs the process-wide log subscriber to read what the consumers report.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_client::{
    ClientConfig, ClientError, ConsumeFromWhere, ConsumeStatus, LitePullConsumer, LitePullConsumerConfig, Message,
    MessageSelector, Producer, ProducerConfig, PushConsumer, PushConsumerConfig,
};
use ferromq_protocol::response_code;
use ferromq_testkit::LocalCluster;
use tokio::time::Instant;

const T: Duration = Duration::from_secs(15);
const SQL: &str = "a > 5 AND color = 'red'";
/// How long the consumers are watched after the first report.
const WATCH: Duration = Duration::from_secs(3);

/// Log output, shared with the subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn install() -> Captured {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("ferromq_client=debug"))
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        captured
    }

    /// The log lines naming `topic` that contain `text`.
    fn lines(&self, topic: &str, text: &str) -> Vec<String> {
        let all = String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned();
        let field = format!("topic={topic} ");
        all.lines().filter(|l| l.contains(&field) && l.contains(text)).map(str::to_owned).collect()
    }

    /// Failed pulls of `topic` logged so far: the first of a run in full, the others at debug.
    fn pull_failures(&self, topic: &str) -> usize {
        self.lines(topic, "pull refused").len() + self.lines(topic, "pull failed again").len()
    }
}

fn client(c: &LocalCluster, instance: &str) -> ClientConfig {
    ClientConfig {
        client_ip: "127.0.0.1".to_owned(),
        instance_name: instance.to_owned(),
        ..ClientConfig::with_namesrv(&c.ns_addr)
    }
}

/// Creates `topic` with one message that would match [`SQL`]; returns its queue count.
async fn create_topic(c: &LocalCluster, topic: &str) -> usize {
    let p = Producer::new(
        ProducerConfig { group: format!("pg_{topic}"), ..ProducerConfig::default() },
        client(c, &format!("prod-{topic}")),
    );
    p.start().await.unwrap();
    p.send(Message::new(topic, "m").with_property("a", "9").with_property("color", "red")).await.unwrap();
    p.shutdown().await;
    let route = c.wait_registered(topic).await;
    route.queue_datas.iter().map(|qd| qd.read_queue_nums as usize).sum()
}

/// Whether `start` failed the way a broker checking the subscription (CHECK_CLIENT_CONFIG)
/// makes it fail; any other failure panics.
fn refused_at_start(start: Result<(), ClientError>) -> bool {
    match start {
        Ok(()) => false,
        Err(ClientError::Broker { code, remark, .. }) => {
            assert_eq!(code, response_code::SYSTEM_ERROR, "{remark}");
            true
        }
        Err(e) => panic!("unexpected start failure: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_subscriptions_without_broker_support_are_reported_and_retried_after_a_pause() {
    let captured = Captured::install();
    let c = LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.auto_create_topic_enable = true;
        s.broker.enable_property_filter = false;
    })
    .await;
    let push_queues = create_topic(&c, "SqlOffPush").await;
    let lite_queues = create_topic(&c, "SqlOffLite").await;

    let push = PushConsumer::new(
        PushConsumerConfig {
            group: "cg_sql_off_push".to_owned(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            rebalance_interval: Duration::from_millis(300),
            ..PushConsumerConfig::default()
        },
        client(&c, "cons-sql-off-push"),
    );
    push.subscribe("SqlOffPush", MessageSelector::sql(SQL)).await.unwrap();
    let delivered = Arc::new(Mutex::new(0usize));
    let count = delivered.clone();
    push.register_listener(move |msgs| {
        *count.lock().unwrap() += msgs.len();
        ConsumeStatus::ConsumeSuccess
    });
    let lite = LitePullConsumer::new(
        LitePullConsumerConfig {
            group: "cg_sql_off_lite".to_owned(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            rebalance_interval: Duration::from_millis(300),
            ..LitePullConsumerConfig::default()
        },
        client(&c, "cons-sql-off-lite"),
    );
    lite.subscribe("SqlOffLite", MessageSelector::sql(SQL)).await.unwrap();

    // A broker serving CHECK_CLIENT_CONFIG refuses the subscription at start, as Java's does;
    // one that does not serve it lets the consumer start, and its pulls then fail.
    let push_refused = refused_at_start(push.start().await);
    let lite_refused = refused_at_start(lite.start().await);
    let mut watched = Vec::new();
    if !push_refused {
        watched.push(("SqlOffPush", push_queues));
    }
    if !lite_refused {
        watched.push(("SqlOffLite", lite_queues));
    }

    let deadline = Instant::now() + T;
    for (topic, _) in &watched {
        while captured.lines(topic, "enablePropertyFilter").is_empty() {
            assert!(Instant::now() < deadline, "{topic}: the refused pulls were never reported");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let started = Instant::now();
    let before: Vec<usize> = watched.iter().map(|(topic, _)| captured.pull_failures(topic)).collect();
    let lite_polled = if lite_refused { Vec::new() } else { lite.poll(WATCH).await };
    tokio::time::sleep(WATCH.saturating_sub(started.elapsed())).await;
    let elapsed = started.elapsed();
    for ((topic, queues), before) in watched.iter().zip(before) {
        let failures = captured.pull_failures(topic) - before;
        // One pull per queue and second (the pause after a failure), with slack for timing.
        let bound = queues * (elapsed.as_secs() as usize + 2);
        assert!(failures >= 1, "{topic}: the pulls stopped being retried");
        assert!(failures <= bound, "{topic}: {failures} failed pulls in {elapsed:?} over {queues} queues: spinning");
        let full = captured.lines(topic, "pull refused").len();
        assert!(full <= *queues, "{topic}: one full report per queue, then debug lines; got {full}");
    }
    assert_eq!(*delivered.lock().unwrap(), 0, "nothing can be delivered");
    assert!(lite_polled.is_empty());
    push.shutdown().await;
    lite.shutdown().await;
    c.stop().await;
}
