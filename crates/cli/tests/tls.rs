//! TLS on the remoting ports of a real `ferromq standalone` process (acl-and-tls.md section 4):
//! with `tls.server.mode=enforcing` our Rust producer and consumer with `use_tls`, the admin
//! CLI with `--useTLS` and the load tool with `--tls` work, and plaintext clients are refused on
//! the name server, the broker port and its VIP port, and on an enforcing cluster proxy's
//! remoting port (whose own connections use TLS); the default (permissive) serves both; bad TLS
//! settings stop the process with an error naming the file or key.

#![cfg(unix)]

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ferromq_client::{
    ClientConfig, ConsumeFromWhere, LitePullConsumer, LitePullConsumerConfig, Message, Producer, ProducerConfig,
};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::tls::ClientTls;
use ferromq_remoting::{RemotingClient, RemotingError};
use ferromq_testkit::{free_broker_port, free_port, start_standalone, start_standalone_with_conf, Standalone};

mod common;
use common::cluster::{spawn_listening, start_on_free_port};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
const T: Duration = Duration::from_secs(20);

fn admin(server: &Standalone, tls: bool, args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command.arg("admin");
    if tls {
        command.arg("--useTLS");
    }
    command.args(args).args(["-n", &server.namesrv]).env("RUST_LOG", "warn").stdin(Stdio::null());
    command.output().expect("run ferromq admin")
}

/// Runs an admin command over TLS until it succeeds and prints `expect` (the broker registers
/// shortly after start).
fn admin_ok(server: &Standalone, args: &[&str], expect: &str) -> String {
    let deadline = Instant::now() + T;
    loop {
        let out = admin(server, true, args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && stdout.contains(expect) {
            return stdout;
        }
        assert!(
            Instant::now() < deadline,
            "admin --useTLS {args:?} failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn client(server: &Standalone, use_tls: bool) -> ClientConfig {
    ClientConfig { use_tls, ..ClientConfig::with_namesrv(&server.namesrv) }
}

async fn send(server: &Standalone, use_tls: bool, topic: &str, count: usize) -> Result<(), String> {
    let producer =
        Producer::new(ProducerConfig { group: "pg_tls".into(), ..ProducerConfig::default() }, client(server, use_tls));
    producer.start().await.map_err(|e| e.to_string())?;
    let mut result = Ok(());
    for i in 0..count {
        if let Err(e) = producer.send(Message::new(topic, format!("tls-{i}").into_bytes())).await {
            result = Err(format!("{e:#}"));
            break;
        }
    }
    producer.shutdown().await;
    result
}

async fn receive(server: &Standalone, topic: &str, count: usize) -> Vec<String> {
    let consumer = LitePullConsumer::new(
        LitePullConsumerConfig {
            group: "cg_tls".into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            ..LitePullConsumerConfig::default()
        },
        client(server, true),
    );
    consumer.subscribe(topic, "*").await.expect("subscribe");
    consumer.start().await.expect("start");
    let deadline = Instant::now() + T;
    let mut got = Vec::new();
    while got.len() < count {
        assert!(Instant::now() < deadline, "received {} of {count} messages over TLS", got.len());
        got.extend(
            consumer
                .poll(Duration::from_millis(200))
                .await
                .iter()
                .map(|m| String::from_utf8_lossy(m.body()).into_owned()),
        );
    }
    consumer.shutdown().await;
    got.sort();
    got
}

/// One request straight to `addr`; `Err` when the connection is refused.
async fn probe(addr: &str, tls: bool) -> Result<i32, RemotingError> {
    let config = ferromq_remoting::ClientConfig::default().with_tls(tls.then(ClientTls::default));
    let client = RemotingClient::new(config);
    let result = client.invoke(addr, RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO), T).await;
    client.shutdown().await;
    result.map(|r| r.code)
}

fn vip_addr(broker: &str) -> String {
    let (host, port) = broker.rsplit_once(':').expect("host:port");
    format!("{host}:{}", port.parse::<u16>().expect("port") - 2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforcing_standalone_serves_tls_clients_and_refuses_plaintext_ones() {
    let server = start_standalone_with_conf(BIN, "tls.server.mode=enforcing\n");

    // The broker registered with the name server over TLS (its own client follows enforcing).
    admin_ok(&server, &["clusterList"], &server.broker);
    admin_ok(&server, &["updateTopic", "-b", &server.broker, "-t", "tls_orders", "-r", "2", "-w", "2"], "");

    send(&server, true, "tls_orders", 20).await.expect("a TLS producer sends");
    let expected: Vec<String> = {
        let mut v: Vec<String> = (0..20).map(|i| format!("tls-{i}")).collect();
        v.sort();
        v
    };
    assert_eq!(receive(&server, "tls_orders", 20).await, expected);

    // Plaintext is refused everywhere: name server, broker port, VIP port, admin CLI, producer.
    for addr in [server.namesrv.clone(), server.broker.clone(), vip_addr(&server.broker)] {
        let err = probe(&addr, false).await.expect_err("plaintext must be refused");
        assert!(matches!(err, RemotingError::ConnectionClosed { .. }), "{addr}: {err:?}");
        assert_eq!(probe(&addr, true).await.map_err(|e| format!("{addr}: {e:#}")).map(|_| ()), Ok(()));
    }
    assert_eq!(probe(&server.broker, true).await.unwrap(), response_code::SUCCESS);
    let out = admin(&server, false, &["clusterList"]);
    assert!(!out.status.success(), "a plaintext admin CLI must fail");
    assert!(String::from_utf8_lossy(&out.stderr).contains("closed"), "{}", String::from_utf8_lossy(&out.stderr));
    send(&server, false, "tls_orders", 1).await.expect_err("a plaintext producer must fail");

    // The load tool with --tls.
    let report = server.data.path().join("bench.json");
    let out = Command::new(BIN)
        .args(["bench", "produce", "-n", &server.namesrv, "-t", "tls_orders", "--tls", "-q", "200", "--quiet"])
        .args(["--duration", "20", "--json"])
        .arg(&report)
        .stdin(Stdio::null())
        .output()
        .expect("run ferromq bench");
    assert!(out.status.success(), "bench --tls failed: {}", String::from_utf8_lossy(&out.stderr));
    let report = ferromq_bench::report::Report::from_json(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let produced = report.produce.expect("a produce report");
    assert_eq!((produced.acked, produced.failed), (200, 0));
    assert!(report.config.tls);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforcing_cluster_proxy_serves_its_remoting_port_over_tls_only() {
    let server = start_standalone_with_conf(BIN, "tls.server.mode=enforcing\n");
    admin_ok(&server, &["updateTopic", "-b", &server.broker, "-t", "tls_proxied", "-r", "2", "-w", "2"], "");
    let dir = tempfile::tempdir().unwrap();
    let remoting_port = free_port();
    let (_proxy, _grpc_port) = start_on_free_port(free_port, |port| {
        let json = format!(
            "{{\"grpcServerPort\": {port}, \"remotingListenPort\": {remoting_port}, \"tls.server.mode\": \"enforcing\"}}\n"
        );
        spawn_listening(
            &["proxy", "-n", &server.namesrv],
            &dir.path().join("rmq-proxy.json"),
            &json,
            &dir.path().join("proxy.log"),
            port,
        )
    });
    let addr = format!("127.0.0.1:{remoting_port}");
    let route = |tls: bool| {
        let addr = addr.clone();
        async move {
            let config = ferromq_remoting::ClientConfig::default().with_tls(tls.then(ClientTls::default));
            let client = RemotingClient::new(config);
            let header = ferromq_protocol::header::GetRouteInfoRequestHeader {
                topic: "tls_proxied".into(),
                accept_standard_json_only: Some(true),
            };
            let request = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(&header);
            let result = client.invoke(&addr, request, T).await;
            client.shutdown().await;
            result.map(|r| r.code)
        }
    };
    // The route comes from the enforcing name server, so the proxy's own connection is TLS.
    let deadline = Instant::now() + T;
    loop {
        match route(true).await {
            Ok(code) if code == response_code::SUCCESS => break,
            other => assert!(Instant::now() < deadline, "route through the proxy over TLS: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let err = route(false).await.expect_err("plaintext must be refused");
    assert!(matches!(err, RemotingError::ConnectionClosed { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_standalone_serves_plaintext_and_tls_clients_on_the_same_ports() {
    let server = start_standalone(BIN);
    for addr in [server.namesrv.clone(), server.broker.clone()] {
        let deadline = Instant::now() + T;
        // Plaintext exactly as before, and TLS with Java's default client (trust any).
        loop {
            match (probe(&addr, false).await, probe(&addr, true).await) {
                (Ok(_), Ok(_)) => break,
                other => assert!(Instant::now() < deadline, "{addr}: {other:?}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut sent = Err(String::new());
    let deadline = Instant::now() + T;
    while sent.is_err() && Instant::now() < deadline {
        sent = send(&server, false, "TopicTest", 1).await;
    }
    sent.expect("plaintext producer");
    send(&server, true, "TopicTest", 1).await.expect("TLS producer");
}

/// Starts `ferromq standalone -c <conf>` and returns its output once it has exited.
fn standalone_exit(conf: &str) -> (std::process::ExitStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broker.conf");
    std::fs::write(&path, conf).unwrap();
    let child = Command::new(BIN)
        .args(["standalone", "--bind", "127.0.0.1", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--metrics-port", &ferromq_testkit::free_port().to_string()])
        .args(["--dashboard-port", &ferromq_testkit::free_port().to_string()])
        .args(["--namesrv-port", &free_port().to_string(), "--broker-port", &free_broker_port().to_string()])
        .args(["--grpc-port", &free_port().to_string(), "-c"])
        .arg(&path)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_exit(child)
}

fn wait_exit(child: std::process::Child) -> (std::process::ExitStatus, String) {
    let mut child = ferromq_testkit::ChildProcess(child);
    let deadline = Instant::now() + T;
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            return (status, stderr);
        }
        assert!(Instant::now() < deadline, "the process did not stop on bad TLS settings");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn bad_tls_settings_stop_the_process_with_an_error_naming_the_file_or_key() {
    let (status, stderr) = standalone_exit(
        "tls.test.mode.enable=false\ntls.server.certPath=/nonexistent/tls/server.pem\n\
         tls.server.keyPath=/nonexistent/tls/server.key\n",
    );
    assert!(!status.success());
    assert!(stderr.contains("/nonexistent/tls/server.pem") && stderr.contains("tls.server.certPath"), "{stderr}");

    let (status, stderr) = standalone_exit("tls.server.mode=strict\n");
    assert!(!status.success());
    assert!(stderr.contains("tls.server.mode") && stderr.contains("disabled, permissive or enforcing"), "{stderr}");

    let (status, stderr) = standalone_exit("tls.config.file=/nonexistent/tls.properties\n");
    assert!(!status.success());
    assert!(stderr.contains("/nonexistent/tls.properties"), "{stderr}");
}

#[test]
fn a_name_server_with_an_unreadable_key_stops_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("namesrv.conf");
    let key = dir.path().join("missing.key");
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = dir.path().join("server.pem");
    std::fs::write(&cert, generated.cert.pem()).unwrap();
    let text = format!(
        "listenPort={}\nkvConfigPath={}\ntls.test.mode.enable=false\ntls.server.certPath={}\ntls.server.keyPath={}\n",
        free_port(),
        dir.path().join("kv.json").display(),
        cert.display(),
        key.display()
    );
    std::fs::write(&conf, text).unwrap();
    let child = Command::new(BIN)
        .arg("namesrv")
        .arg("-c")
        .arg(&conf)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (status, stderr) = wait_exit(child);
    assert!(!status.success());
    assert!(stderr.contains(&key.display().to_string()) && stderr.contains("tls.server.keyPath"), "{stderr}");
}
