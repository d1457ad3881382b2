//! `ferromq admin consumerStatus` and `resetOffsetByTime` against online consumers: a
//! `ferromq standalone` process, a push consumer running in this test, admin commands run as
//! processes.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_client::{
    ClientConfig, ConsumeFromWhere, ConsumeStatus, Message, Producer, ProducerConfig, PushConsumer, PushConsumerConfig,
};
use ferromq_testkit::{start_standalone, Standalone};
use tokio::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
const T: Duration = Duration::from_secs(20);

async fn start_server() -> Standalone {
    let server = start_standalone(BIN);
    until(&server.namesrv, None, &["clusterList", "--json"], |out| out.contains("brokerAddr")).await;
    server
}

/// Runs `ferromq admin <args> -n <namesrv>` in `dir` (the working directory otherwise).
async fn admin(namesrv: &str, dir: Option<&Path>, args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command.arg("admin").args(args).args(["-n", namesrv]).env("RUST_LOG", "warn");
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap()
}

/// Runs a command that must succeed; returns its stdout.
async fn ok(namesrv: &str, dir: Option<&Path>, args: &[&str]) -> String {
    let out = admin(namesrv, dir, args).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "admin {args:?} failed: {}\nstdout: {stdout}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// Runs a command until it succeeds with a stdout satisfying `check`; returns that stdout.
async fn until(namesrv: &str, dir: Option<&Path>, args: &[&str], check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + T;
    loop {
        let out = admin(namesrv, dir, args).await;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && check(&stdout) {
            return stdout;
        }
        assert!(
            Instant::now() < deadline,
            "admin {args:?} never gave the expected output; last stdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn json(text: &str) -> ferromq_client::admin::JsonValue {
    ferromq_client::admin::json_from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Body text -> deliveries.
type Counts = Arc<Mutex<BTreeMap<String, usize>>>;

async fn wait_counts(counts: &Counts, what: &str, done: impl Fn(&BTreeMap<String, usize>) -> bool) {
    let deadline = Instant::now() + T;
    while !done(&counts.lock().unwrap()) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {:?}", counts.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_status_reports_online_consumers_and_a_reset_reaches_them() {
    let server = start_server().await;
    let ns = server.namesrv.as_str();
    let (topic, group, n) = ("StatusTopic", "StatusGroup", 10);
    ok(ns, None, &["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2"]).await;
    until(ns, None, &["topicRoute", "-t", topic], |_| true).await;

    let producer_config = ProducerConfig { group: "StatusProducer".into(), ..Default::default() };
    let producer = Producer::new(producer_config, ClientConfig::with_namesrv(ns));
    producer.start().await.unwrap();
    for i in 0..n {
        producer.send(Message::new(topic, format!("m-{i}").into_bytes())).await.unwrap();
    }
    producer.shutdown().await;

    let config = PushConsumerConfig {
        group: group.into(),
        consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        rebalance_interval: Duration::from_millis(300),
        persist_consumer_offset_interval: Duration::from_millis(300),
        ..Default::default()
    };
    let consumer = PushConsumer::new(config, ClientConfig::with_namesrv(ns));
    consumer.subscribe(topic, "*").await.unwrap();
    let counts: Counts = Arc::default();
    let seen = counts.clone();
    consumer.register_listener(move |msgs| {
        for m in msgs {
            *seen.lock().unwrap().entry(String::from_utf8_lossy(m.body()).into_owned()).or_default() += 1;
        }
        ConsumeStatus::ConsumeSuccess
    });
    consumer.start().await.unwrap();
    wait_counts(&counts, "first delivery", |m| m.len() == n).await;
    let client_id = consumer.instance().client_id().to_owned();
    // Offsets committed: every queue's consumer offset reaches its broker offset.
    until(ns, None, &["consumerProgress", "-g", group, "-t", topic, "--json"], |out| json(out)["diffTotal"] == 0).await;

    // Without -i: one row per client, its report written to <now>/<clientId>.
    let dir = tempfile::tempdir().unwrap();
    let table = ok(ns, Some(dir.path()), &["consumerStatus", "-g", group]).await;
    let mut lines = table.lines();
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        ["#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile"]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["1", client_id.as_str(), "V5_3_3"], "{table}");
    let report = std::fs::read_to_string(dir.path().join(row[3])).unwrap();
    assert!(report.starts_with("#Consumer Properties#\n"), "{report}");
    assert!(report.contains(&format!("001 Topic: %RETRY%{group}")), "{report}");
    assert!(report.contains(&format!("002 Topic: {topic}")), "{report}");
    assert!(table.contains("Same subscription in the same group of consumer"), "{table}");
    assert!(table.contains("Rebalance OK"), "{table}");

    // With -i: the client's report; its queues and their committed offsets.
    let report = ok(ns, None, &["consumerStatus", "-g", group, "-i", &client_id]).await;
    let property = |key: &str| {
        report.lines().find(|l| l.split(':').next().map(str::trim) == Some(key)).map(|l| l.split_once(": ").unwrap().1)
    };
    assert_eq!(property("PROP_CONSUME_TYPE"), Some("CONSUME_PASSIVELY"), "{report}");
    assert_eq!(property("consumerGroup"), Some(group), "{report}");
    let offsets: i64 = report
        .split("#Consumer Offset#")
        .nth(1)
        .and_then(|rest| rest.split("#Consumer MQ Detail#").next())
        .unwrap()
        .lines()
        .filter(|l| l.starts_with(topic))
        .map(|l| l.split_whitespace().nth(3).unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(offsets, n as i64, "{report}");
    assert!(report.contains("#Consumer RT&TPS#"), "{report}");
    assert!(!report.contains("#Consumer jstack#"), "{report}");
    let dumped = ok(ns, None, &["consumerStatus", "-g", group, "-i", &client_id, "-s"]).await;
    assert!(dumped.contains("#Consumer jstack#\npush consumer StatusGroup"), "{dumped}");

    let info = json(&ok(ns, None, &["consumerStatus", "-g", group, "-i", &client_id, "--json"]).await);
    let queues = info["runningInfo"]["mqTable"].as_array().unwrap().clone();
    let topic_queues: Vec<_> = queues.iter().filter(|q| q["topic"] == topic).collect();
    assert_eq!(topic_queues.len(), 2, "{info}");
    assert_eq!(topic_queues.iter().map(|q| q["commitOffset"].as_i64().unwrap()).sum::<i64>(), n as i64, "{info}");
    assert_eq!(info["runningInfo"]["properties"]["PROP_CONSUMEORDERLY"], "false", "{info}");
    let all = json(&ok(ns, None, &["consumerStatus", "-g", group, "--json"]).await);
    assert_eq!(all["consumers"][0]["clientId"], client_id.as_str(), "{all}");
    assert_eq!(all["subscriptionSame"], true, "{all}");

    // A client that is not online, and a group with no client.
    let missing = admin(ns, None, &["consumerStatus", "-g", group, "-i", "127.0.0.1@nobody"]).await;
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("SYSTEM_ERROR") && stderr.contains("<127.0.0.1@nobody> not online"), "{stderr}");
    let offline = admin(ns, None, &["consumerStatus", "-g", "NoSuchGroupOnline"]).await;
    assert!(!offline.status.success());
    assert!(String::from_utf8_lossy(&offline.stderr).contains("not online"), "{offline:?}");

    // resetOffsetByTime while the consumer runs: it is told and consumes everything again.
    let reset = json(&ok(ns, None, &["resetOffsetByTime", "-g", group, "-t", topic, "-s", "0", "--json"]).await);
    assert!(reset["offsets"].as_array().unwrap().iter().all(|q| q["offset"] == 0), "{reset}");
    wait_counts(&counts, "redelivery after the reset", |m| m.values().all(|c| *c >= 2)).await;
    until(ns, None, &["consumerProgress", "-g", group, "-t", topic, "--json"], |out| json(out)["diffTotal"] == 0).await;

    consumer.shutdown().await;
}
