//! Topic creation one by one at scale, against the real binary: every acknowledged
//! UPDATE_AND_CREATE_TOPIC is routable at once and survives the broker being SIGKILLed right
//! after the acknowledgement (in the broker's table and in the name server's routes after the
//! restart). And the periodic registration's data-version shortcut (`forceRegister=false`):
//! an unchanged table is not re-sent, a changed one is.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferromq_client::admin::AdminClient;
use ferromq_protocol::body::TopicConfig;
use ferromq_testkit::{free_broker_port, free_port, ChildProcess};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
const BROKER_NAME: &str = "broker-a";

struct Ports {
    namesrv: u16,
    broker: u16,
}

fn start(dir: &Path, ports: &Ports, broker_conf: &str) -> ChildProcess {
    let conf = dir.join("broker.conf");
    std::fs::write(&conf, broker_conf).unwrap();
    let logs = std::env::var_os("FERROMQ_TEST_LOGS").is_some();
    let output = || if logs { Stdio::inherit() } else { Stdio::null() };
    let child = Command::new(BIN)
        .args(["standalone", "--no-dashboard", "--no-proxy", "--bind", "127.0.0.1", "--data-dir"])
        .arg(dir.join("data"))
        .args(["--metrics-port", &free_port().to_string()])
        .args(["--namesrv-port", &ports.namesrv.to_string(), "--broker-port", &ports.broker.to_string(), "-c"])
        .arg(&conf)
        .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_owned()))
        .stdout(output())
        .stderr(output())
        .spawn()
        .unwrap();
    ChildProcess(child)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Waits until the name server routes `topic` to the broker.
async fn until_routed(admin: &AdminClient, topic: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if admin.topic_route(topic).await.is_ok_and(|r| !r.queue_datas.is_empty()) {
            return;
        }
        assert!(Instant::now() < deadline, "{topic} never routed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The queue counts the name server routes `topic` with on this broker, if it routes it.
async fn routed_queues(admin: &AdminClient, topic: &str) -> Option<(i32, i32)> {
    let route = admin.topic_route(topic).await.ok()?;
    let q = route.queue_datas.iter().find(|q| q.broker_name == BROKER_NAME)?;
    Some((q.read_queue_nums, q.write_queue_nums))
}

fn topic(i: usize, queues: i32) -> TopicConfig {
    TopicConfig::new(format!("ScaleTopic_{i}"), queues, queues)
}

#[test]
fn acknowledged_topics_survive_sigkill_in_broker_and_routes() {
    let dir = tempfile::tempdir().unwrap();
    let ports = Ports { namesrv: free_port(), broker: free_broker_port() };
    let broker = format!("127.0.0.1:{}", ports.broker);
    let namesrv = format!("127.0.0.1:{}", ports.namesrv);
    let rt = runtime();
    let conf = format!("brokerName={BROKER_NAME}\n");
    let mut child = start(dir.path(), &ports, &conf);
    // (topic, queues) as last acknowledged.
    let mut expected: Vec<(String, i32)> = Vec::new();
    rt.block_on(async {
        let admin = AdminClient::new(&namesrv);
        until_routed(&admin, "TBW102").await;
        // One by one, each checked at the name server as soon as it is acknowledged.
        for i in 0..300 {
            let config = topic(i, 1 + (i % 8) as i32);
            admin.update_topic(&broker, &config, "").await.unwrap();
            let queues = config.write_queue_nums;
            assert_eq!(routed_queues(&admin, &config.topic_name).await, Some((queues, queues)), "{i}");
            expected.push((config.topic_name, queues));
        }
        // Concurrent ones share registration rounds (and journal syncs).
        let shared = std::sync::Arc::new(AdminClient::new(&namesrv));
        let mut concurrent = tokio::task::JoinSet::new();
        for i in 300..400 {
            let (admin, broker) = (shared.clone(), broker.clone());
            concurrent.spawn(async move { admin.update_topic(&broker, &topic(i, 2), "").await });
        }
        while let Some(result) = concurrent.join_next().await {
            result.unwrap().unwrap();
        }
        shared.shutdown().await;
        expected.extend((300..400).map(|i| (format!("ScaleTopic_{i}"), 2)));
        // A change of an existing topic, acknowledged last.
        admin.update_topic(&broker, &topic(0, 16), "").await.unwrap();
        expected[0].1 = 16;
        admin.shutdown().await;
    });
    // Killed right after the last acknowledgement.
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    drop(child);

    let _child = start(dir.path(), &ports, &conf);
    rt.block_on(async {
        let admin = AdminClient::new(&namesrv);
        until_routed(&admin, "TBW102").await;
        let table = admin.all_topic_config(&broker).await.unwrap();
        for (name, queues) in &expected {
            let config = table.topic_config_table.get(name).unwrap_or_else(|| panic!("{name} lost by the broker"));
            assert_eq!((config.read_queue_nums, config.write_queue_nums), (*queues, *queues), "{name}");
            assert_eq!(routed_queues(&admin, name).await, Some((*queues, *queues)), "{name} at the name server");
        }
        admin.shutdown().await;
    });
}

#[test]
fn periodic_registration_skips_an_unchanged_table_with_force_register_off() {
    let dir = tempfile::tempdir().unwrap();
    let ports = Ports { namesrv: free_port(), broker: free_broker_port() };
    let broker = format!("127.0.0.1:{}", ports.broker);
    let namesrv = format!("127.0.0.1:{}", ports.namesrv);
    // The shortest period the broker takes (10 s).
    let conf = format!("brokerName={BROKER_NAME}\nforceRegister=false\nregisterNameServerPeriod=10000\n");
    let _child = start(dir.path(), &ports, &conf);
    let rt = runtime();
    rt.block_on(async {
        let admin = AdminClient::new(&namesrv);
        until_routed(&admin, "TBW102").await;
        for i in 0..3 {
            admin.update_topic(&broker, &topic(i, 4), "").await.unwrap();
        }
        // Dropped from the name server only: a full registration would bring it back.
        admin.delete_topic_in_namesrv("ScaleTopic_0", None).await.unwrap();
        assert_eq!(routed_queues(&admin, "ScaleTopic_0").await, None);
        // The topic creations left the name server's data version behind the broker's, so
        // the first periodic round re-sends the table; wait until it did.
        let deadline = Instant::now() + Duration::from_secs(30);
        while routed_queues(&admin, "ScaleTopic_0").await.is_none() {
            assert!(Instant::now() < deadline, "the first periodic round did not re-send the changed table");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Now both versions agree: the next rounds only ask (QUERY_DATA_VERSION) and the
        // broker stays registered, its routes intact.
        admin.delete_topic_in_namesrv("ScaleTopic_1", None).await.unwrap();
        tokio::time::sleep(Duration::from_secs(22)).await;
        assert_eq!(routed_queues(&admin, "ScaleTopic_1").await, None, "an unchanged table was re-sent");
        assert_eq!(routed_queues(&admin, "ScaleTopic_2").await, Some((4, 4)));
        // A change moves the version: the new topic is routed at once, and the next periodic
        // round re-sends the whole table.
        admin.update_topic(&broker, &topic(3, 4), "").await.unwrap();
        assert_eq!(routed_queues(&admin, "ScaleTopic_3").await, Some((4, 4)));
        let deadline = Instant::now() + Duration::from_secs(30);
        while routed_queues(&admin, "ScaleTopic_1").await.is_none() {
            assert!(Instant::now() < deadline, "a changed table was not re-sent");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        admin.shutdown().await;
    });
}

#[test]
fn bench_topics_reports_every_chunk_and_the_registration_costs() {
    let dir = tempfile::tempdir().unwrap();
    let ports = Ports { namesrv: free_port(), broker: free_broker_port() };
    let namesrv = format!("127.0.0.1:{}", ports.namesrv);
    let broker = format!("127.0.0.1:{}", ports.broker);
    let _child = start(dir.path(), &ports, &format!("brokerName={BROKER_NAME}\n"));
    runtime().block_on(async {
        let admin = AdminClient::new(&namesrv);
        until_routed(&admin, "TBW102").await;
        admin.shutdown().await;
    });
    let out = Command::new(BIN)
        .args(["bench", "topics", "-n", &namesrv, "-b", &broker, "--topics", "30", "--chunk", "10"])
        .args(["--groups", "5", "--repeat", "2"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for row in ["1-10", "11-20", "21-30", "REGISTER_BROKER, same version", "QUERY_DATA_VERSION", "HEART_BEAT, repeated"]
    {
        assert!(stdout.lines().any(|l| l.trim_start().starts_with(row)), "no {row} row in:\n{stdout}");
    }
    // The fake broker the bench registered is gone again; the real one routes the topics.
    runtime().block_on(async {
        let admin = AdminClient::new(&namesrv);
        let route = admin.topic_route("BenchTopic_29").await.unwrap();
        let brokers: Vec<&str> = route.broker_datas.iter().map(|b| b.broker_name.as_str()).collect();
        assert_eq!(brokers, [BROKER_NAME]);
        admin.shutdown().await;
    });
}
