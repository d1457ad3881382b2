//! What `ferromq standalone` gives with no config: SQL92 subscriptions served, logs a person
//! can read (no colour codes into a file, no line per connection at INFO, a clean restart that
//! reports what it checked rather than a segment's worth of "truncated" bytes), and a warning
//! for a SYNC_MASTER that would not wait for a slave.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferromq_protocol::header::PullMessageRequestHeader;
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{free_broker_port, free_port, pull_request, send_request, ChildProcess};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");

struct Running {
    child: ChildProcess,
    broker: String,
    log: std::path::PathBuf,
}

/// A standalone at the default log level (INFO), its stderr in a file.
fn start(data: &std::path::Path, conf: Option<&str>) -> Running {
    let log = data.with_extension("log");
    let mut command = Command::new(BIN);
    let (ns_port, broker_port) = (free_port(), free_broker_port());
    command
        .args([
            "standalone",
            "--bind",
            "127.0.0.1",
            "--grpc-port",
            &ferromq_testkit::free_port().to_string(),
            "--data-dir",
        ])
        .arg(data)
        .args(["--metrics-port", &ferromq_testkit::free_port().to_string()])
        .args(["--dashboard-port", &ferromq_testkit::free_port().to_string()])
        .args(["--namesrv-port", &ns_port.to_string(), "--broker-port", &broker_port.to_string()])
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    if let Some(text) = conf {
        let path = data.with_extension("conf");
        std::fs::write(&path, text).unwrap();
        command.arg("-c").arg(path);
    }
    Running { child: ChildProcess(command.spawn().unwrap()), broker: format!("127.0.0.1:{broker_port}"), log }
}

async fn wait_serving(client: &RemotingClient, r: &mut Running) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(r.child.0.try_wait().unwrap().is_none(), "{}", std::fs::read_to_string(&r.log).unwrap_or_default());
        if client.invoke(&r.broker, pull_request("Probe", 0, 0, "*", 0), Duration::from_secs(2)).await.is_ok() {
            return;
        }
        assert!(Instant::now() < deadline, "the standalone did not serve");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn stop(r: Running) -> String {
    let pid = r.child.0.id();
    // SIGTERM: a clean stop.
    let _ = Command::new("kill").arg(pid.to_string()).status();
    let mut child = r.child;
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the standalone did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::read_to_string(&r.log).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql92_is_served_and_the_log_is_plain_and_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let client = RemotingClient::new(ClientConfig::default());
    let mut r = start(&data, None);
    wait_serving(&client, &mut r).await;
    let sent = client.invoke(&r.broker, send_request("Sql", 0, b"m", &[("a", "3")]), Duration::from_secs(5)).await;
    assert_eq!(sent.unwrap().code, response_code::SUCCESS);
    let mut pull = pull_request("Sql", 0, 0, "a > 2", 0);
    let mut h: PullMessageRequestHeader = pull.decode_header().unwrap();
    h.expression_type = Some("SQL92".into());
    pull = RemotingCommand::request(pull.code).with_header(&h);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = client.invoke(&r.broker, pull.clone(), Duration::from_secs(5)).await.unwrap();
        assert_ne!(answer.code, response_code::SYSTEM_ERROR, "SQL92 refused: {:?}", answer.remark);
        if answer.code == response_code::SUCCESS {
            break;
        }
        assert!(Instant::now() < deadline, "the SQL92 pull found nothing: {:?}", answer.remark);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Many short connections: none of them is an INFO line.
    for _ in 0..5 {
        let c = RemotingClient::new(ClientConfig::default());
        let _ = c.invoke(&r.broker, pull_request("Probe", 0, 0, "*", 0), Duration::from_secs(2)).await;
        c.shutdown().await;
    }
    client.shutdown().await;
    let log = stop(r);
    assert!(!log.contains('\u{1b}'), "colour codes in a log file:\n{log}");
    assert!(!log.contains("connection opened") && !log.contains("connection closed"), "{log}");
    assert!(!log.contains("WARN"), "a plain start, send and pull warn of nothing:\n{log}");

    // A clean restart reports what it checked, not a segment's worth of cut bytes.
    let client = RemotingClient::new(ClientConfig::default());
    let mut r = start(&data, None);
    wait_serving(&client, &mut r).await;
    client.shutdown().await;
    let log = stop(r);
    let recovered = log.lines().rev().find(|l| l.contains("store recovered")).expect("a recovery line");
    assert!(recovered.contains("bytes_truncated=0") && recovered.contains("bytes_checked="), "{recovered}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_master_that_would_not_wait_for_a_slave_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let client = RemotingClient::new(ClientConfig::default());
    let mut r = start(&dir.path().join("data"), Some("brokerRole=SYNC_MASTER\n"));
    wait_serving(&client, &mut r).await;
    client.shutdown().await;
    let log = stop(r);
    let warnings: Vec<_> = log.lines().filter(|l| l.contains("WARN") && l.contains("inSyncReplicas")).collect();
    assert_eq!(warnings.len(), 1, "one warning naming the key:\n{log}");

    let client = RemotingClient::new(ClientConfig::default());
    let mut r = start(&dir.path().join("data2"), Some("brokerRole=SYNC_MASTER\ninSyncReplicas=2\n"));
    wait_serving(&client, &mut r).await;
    client.shutdown().await;
    let log = stop(r);
    assert!(!log.contains("inSyncReplicas < 2"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_sql92_subscription_is_warned_of_once_per_group_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let client = RemotingClient::new(ClientConfig::default());
    let mut r = start(&dir.path().join("data"), Some("enablePropertyFilter=false\n"));
    wait_serving(&client, &mut r).await;
    let sql_pull = |group: &str| {
        let mut h: PullMessageRequestHeader = pull_request("Sql", 0, 0, "a > 2", 0).decode_header().unwrap();
        h.expression_type = Some("SQL92".into());
        h.consumer_group = group.into();
        RemotingCommand::request(ferromq_protocol::request_code::PULL_MESSAGE).with_header(&h)
    };
    let sent = client.invoke(&r.broker, send_request("Sql", 0, b"m", &[("a", "3")]), Duration::from_secs(5)).await;
    assert_eq!(sent.unwrap().code, response_code::SUCCESS);
    for group in ["g1", "g1", "g1", "g2"] {
        let answer = client.invoke(&r.broker, sql_pull(group), Duration::from_secs(5)).await.unwrap();
        assert_eq!(answer.code, response_code::SYSTEM_ERROR, "{:?}", answer.remark);
    }
    client.shutdown().await;
    let log = stop(r);
    let warnings: Vec<_> = log.lines().filter(|l| l.contains("WARN") && l.contains("enablePropertyFilter")).collect();
    assert_eq!(warnings.len(), 2, "one per group:\n{log}");
    assert!(warnings.iter().any(|l| l.contains("g1")) && warnings.iter().any(|l| l.contains("g2")), "{warnings:?}");
}
