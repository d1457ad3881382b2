//! The dashboard in headless Chromium (Debian's `chromium`, driven by playwright-core from
//! `crates/dashboard/browser-tests/dashboard.mjs`) against a real `ferromq standalone`: every
//! page loads without console errors or failed requests; a topic is created through the UI and
//! found with the admin CLI; a traced producer and consumer leave a backlog that the consumer
//! page shows while the TPS chart moves; a message is found by key and opened; the group's
//! backlog is skipped through the UI and the broker's offsets show it; the trace page shows
//! the message's producer. Screenshots of every page are kept in
//! `target/dashboard-screenshots`.

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::e2e::{dashboard_browser, repo_root};
use ferromq_client::admin::AdminClient;
use ferromq_client::{
    ClientConfig, ConsumeFromWhere, ConsumeStatus, Message, Producer, ProducerConfig, PushConsumer, PushConsumerConfig,
};
use ferromq_testkit::start_standalone;

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
const TOPIC: &str = "BrowserTopic";
const GROUP: &str = "BrowserGroup";
const KEY: &str = "browser-key";
const NEW_TOPIC: &str = "CreatedInTheBrowser";
/// The browser run's bound (each of its steps has its own, shorter one).
const BROWSER_LIMIT: Duration = Duration::from_secs(300);

/// The group's committed offsets on the topic, summed over its queues.
async fn committed(admin: &AdminClient, broker: &str) -> i64 {
    admin
        .consume_stats(broker, GROUP, Some(TOPIC))
        .await
        .map_or(0, |s| s.offset_table.values().map(|o| o.consumer_offset).sum())
}

#[test]
fn the_dashboard_works_in_a_browser() {
    let (chromium, tests_dir) = dashboard_browser();
    let s = start_standalone(BIN);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let producing = Arc::new(AtomicBool::new(true));
    let admin = AdminClient::new(&s.namesrv);

    // A backlog: ten traced messages consumed by the group, which then goes offline while
    // sends go on (one every 100 ms, for the TPS chart) until the browser is done.
    let (traced_id, backlog_start, producer_task) = runtime.block_on(async {
        // Sends create their topic once the broker has registered.
        let registered = Instant::now() + Duration::from_secs(20);
        while admin.topic_route("TBW102").await.is_err() {
            assert!(Instant::now() < registered, "the broker never registered");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let producer = Producer::new(
            ProducerConfig { group: "BrowserProducer".into(), enable_msg_trace: true, ..ProducerConfig::default() },
            ClientConfig::with_namesrv(&s.namesrv),
        );
        producer.start().await.unwrap();
        let mut first_id = String::new();
        for i in 0..10 {
            let key = if i == 3 { KEY.to_owned() } else { format!("other-{i}") };
            let m = Message::new(TOPIC, format!("browser body {i}").into_bytes()).with_tags("TagA").with_keys([key]);
            let sent = producer.send(m).await.unwrap();
            if i == 0 {
                first_id = sent.msg_id;
            }
        }
        let consumer = PushConsumer::new(
            PushConsumerConfig {
                group: GROUP.into(),
                consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
                enable_msg_trace: true,
                ..PushConsumerConfig::default()
            },
            ClientConfig::with_namesrv(&s.namesrv),
        );
        consumer.subscribe(TOPIC, "*").await.unwrap();
        consumer.register_listener(|_| ConsumeStatus::ConsumeSuccess);
        consumer.start().await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while committed(&admin, &s.broker).await < 10 {
            assert!(Instant::now() < deadline, "the group did not consume the first ten messages");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        consumer.shutdown().await;
        for i in 10..40 {
            producer.send(Message::new(TOPIC, format!("browser body {i}").into_bytes())).await.unwrap();
        }
        let flag = producing.clone();
        let task = tokio::spawn(async move {
            let mut i = 40;
            while flag.load(Ordering::Relaxed) {
                let _ = producer.send(Message::new(TOPIC, format!("browser body {i}").into_bytes())).await;
                i += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            producer.shutdown().await;
            i
        });
        (first_id, 40, task)
    });

    let screenshots = repo_root().join("target/dashboard-screenshots");
    std::fs::create_dir_all(&screenshots).unwrap();
    let mut child = Command::new("node")
        .arg(tests_dir.join("dashboard.mjs"))
        .current_dir(&tests_dir)
        .env("DASHBOARD_URL", format!("http://{}/", s.dashboard))
        .env("SCREENSHOT_DIR", &screenshots)
        .env("CHROMIUM", &chromium)
        .env("DASH_TOPIC", TOPIC)
        .env("DASH_KEY", KEY)
        .env("DASH_GROUP", GROUP)
        .env("DASH_NEW_TOPIC", NEW_TOPIC)
        .env("DASH_MSG_ID", &traced_id)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs dashboard.mjs");
    let deadline = Instant::now() + BROWSER_LIMIT;
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
    }
    let output = child.wait_with_output().unwrap();
    producing.store(false, Ordering::Relaxed);
    let sent = runtime.block_on(producer_task).unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the browser run failed ({}); screenshots in {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status,
        screenshots.display()
    );

    runtime.block_on(async {
        // The topic made in the browser, as the admin CLI lists it.
        let listed = Command::new(BIN).args(["admin", "topicList", "-n", &s.namesrv]).output().unwrap();
        let listed = String::from_utf8_lossy(&listed.stdout);
        assert!(listed.lines().any(|l| l.trim() == NEW_TOPIC), "{NEW_TOPIC} is not in topicList:\n{listed}");
        // The skip moved the group past the backlog the browser saw (at least the first 40).
        let offsets = committed(&admin, &s.broker).await;
        assert!(offsets >= backlog_start, "committed {offsets} after the skip, sent {sent}");
        admin.shutdown().await;
    });
    for page in ["dashboard", "cluster", "topic", "consumer", "producer", "message", "dlq", "trace", "ops"] {
        let shot = screenshots.join(format!("{page}.png"));
        assert!(shot.exists(), "no screenshot of the {page} page at {}", shot.display());
    }
}
