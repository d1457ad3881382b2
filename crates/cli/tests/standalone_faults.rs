//! Start-up and logging faults of `ferromq standalone`: a broker half that cannot start (its
//! store locked by another process, its HA port taken) ends the whole process at once with an
//! error naming the path or the port; and a log that cannot be written (stdout and stderr on a
//! full disk, `/dev/full`) never stops the servers.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferromq_protocol::response_code;
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{free_broker_port, free_port, pull_messages, send_request, start_standalone, ChildProcess};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");

/// Starts a standalone with `data` and waits for it to exit (at most 20 s); its exit status
/// and stderr.
fn run_until_exit(data: &std::path::Path, broker_port: u16) -> (std::process::ExitStatus, String) {
    run_until_exit_with(data, broker_port, &[])
}

fn run_until_exit_with(data: &std::path::Path, broker_port: u16, extra: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = ChildProcess(
        Command::new(BIN)
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
            .args(["--namesrv-port", &free_port().to_string(), "--broker-port", &broker_port.to_string()])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "standalone kept running although its broker could not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child.0.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    (status, stderr)
}

#[test]
fn a_held_store_lock_ends_standalone_at_once_naming_the_lock_file() {
    let first = start_standalone(BIN);
    let (status, stderr) = run_until_exit(&first.data.path().join("data"), free_broker_port());
    assert!(!status.success(), "{status}: {stderr}");
    assert!(stderr.contains("lock") && stderr.contains("store"), "the error names the lock file: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_taken_ha_port_ends_standalone_at_once_naming_the_port() {
    let data = tempfile::tempdir().unwrap();
    // The HA port is the broker port + 1: hold it.
    let (broker_port, holder) = loop {
        let port = free_broker_port();
        if let Ok(l) = std::net::TcpListener::bind(("0.0.0.0", port + 1)) {
            break (port, l);
        }
    };
    let (status, stderr) = run_until_exit(data.path(), broker_port);
    drop(holder);
    assert!(!status.success(), "{status}: {stderr}");
    assert!(stderr.contains(&(broker_port + 1).to_string()) && stderr.contains("haListenPort"), "{stderr}");
}

#[test]
fn a_max_message_size_no_pull_could_carry_is_refused_at_start() {
    let data = tempfile::tempdir().unwrap();
    let conf = data.path().join("broker.conf");
    std::fs::write(&conf, "maxMessageSize=33554432\n").unwrap();
    let (status, stderr) =
        run_until_exit_with(&data.path().join("data"), free_broker_port(), &["-c", conf.to_str().unwrap()]);
    assert!(!status.success(), "{status}: {stderr}");
    assert!(stderr.contains("maxMessageSize=33554432") && stderr.contains("at most"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_log_disk_stops_neither_the_name_server_nor_the_broker() {
    let data = tempfile::tempdir().unwrap();
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let (ns_port, broker_port) = (free_port(), free_broker_port());
    // Debug logging: a line per connection and request, all of it failing to write.
    let mut child = ChildProcess(
        Command::new(BIN)
            .args([
                "standalone",
                "--bind",
                "127.0.0.1",
                "--grpc-port",
                &ferromq_testkit::free_port().to_string(),
                "--data-dir",
            ])
            .arg(data.path())
            .args(["--metrics-port", &ferromq_testkit::free_port().to_string()])
            .args(["--dashboard-port", &ferromq_testkit::free_port().to_string()])
            .args(["--namesrv-port", &ns_port.to_string(), "--broker-port", &broker_port.to_string()])
            .env("RUST_LOG", "debug")
            .stdout(full())
            .stderr(full())
            .spawn()
            .unwrap(),
    );
    let broker = format!("127.0.0.1:{broker_port}");
    let client = RemotingClient::new(ClientConfig::default());
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut sent = 0;
    while sent < 50 {
        assert!(child.0.try_wait().unwrap().is_none(), "standalone exited with its log disk full");
        assert!(Instant::now() < deadline, "sends were not answered with the log disk full");
        // A fresh connection each time: connection logs are written (and fail) too.
        let client = RemotingClient::new(ClientConfig::default());
        match client
            .invoke(&broker, send_request("LogFull", 0, format!("m{sent}").as_bytes(), &[]), Duration::from_secs(3))
            .await
        {
            Ok(r) if r.code == response_code::SUCCESS => sent += 1,
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let got = pull_messages(&client, &broker, "LogFull", 0, 0, 50, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 50, "every message is pulled back");
    // The name server answers too.
    let ns = std::net::TcpStream::connect(("127.0.0.1", ns_port));
    assert!(ns.is_ok(), "the name server still accepts connections");
    assert!(child.0.try_wait().unwrap().is_none(), "standalone exited with its log disk full");
}

#[test]
fn a_name_server_with_its_log_disk_full_keeps_serving() {
    let port = free_port();
    let conf = tempfile::tempdir().unwrap();
    let path = conf.path().join("namesrv.conf");
    std::fs::write(&path, format!("listenPort={port}\nbindAddress=127.0.0.1\n")).unwrap();
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let mut child = ChildProcess(
        Command::new(BIN)
            .args(["namesrv", "-c"])
            .arg(&path)
            .env("RUST_LOG", "debug")
            .stdout(full())
            .stderr(full())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(child.0.try_wait().unwrap().is_none(), "the name server exited with its log disk full");
        assert!(Instant::now() < deadline, "the name server did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..20 {
        drop(std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect"));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(child.0.try_wait().unwrap().is_none(), "the name server exited with its log disk full");
}
