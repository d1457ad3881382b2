//! `ferromq bench` against a real `ferromq standalone` process: produce a fixed count, consume
//! it back from offset 0, then an e2e batch run; the JSON reports must be well-formed and their
//! counts must add up.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ferromq_bench::report::Report;
use ferromq_testkit::{free_broker_port, free_port, ChildProcess as Standalone};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferromq")).arg("bench").args(args).stdin(Stdio::null()).output().unwrap()
}

fn read_report(path: &Path) -> Report {
    let text = std::fs::read_to_string(path).unwrap();
    Report::from_json(&text).unwrap_or_else(|e| panic!("bad report {e}: {text}"))
}

#[test]
fn bench_produce_consume_and_e2e_reports_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let (ns_port, broker_port, grpc_port) = (free_port(), free_broker_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_ferromq"))
        .args(["standalone", "--bind", "127.0.0.1", "--grpc-port", &grpc_port.to_string(), "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--metrics-port", &ferromq_testkit::free_port().to_string()])
        .args(["--dashboard-port", &ferromq_testkit::free_port().to_string()])
        .args(["--namesrv-port", &ns_port.to_string(), "--broker-port", &broker_port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = Standalone(child);
    let namesrv = format!("127.0.0.1:{ns_port}");

    // Produce 2000 messages; retry while the broker is still starting and registering.
    let produce_json = dir.path().join("r.json");
    let produce_args = [
        "produce",
        "-n",
        &namesrv,
        "-q",
        "2000",
        "-w",
        "16",
        "-s",
        "256",
        "-k",
        "--duration",
        "20",
        "--quiet",
        "--json",
        produce_json.to_str().unwrap(),
    ];
    let started = Instant::now();
    let out = loop {
        let out = bench(&produce_args);
        if out.status.success() || started.elapsed() > Duration::from_secs(10) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(out.status.success(), "produce failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("msgs/s"));
    let r = read_report(&produce_json);
    let p = r.produce.as_ref().expect("produce section");
    assert_eq!(r.tool, "ferromq bench");
    assert_eq!(r.config.mode, "produce");
    assert_eq!(r.config.broker, format!("127.0.0.1:{broker_port}"));
    assert!(r.environment.cpus >= 1 && !r.environment.commit.is_empty() && !r.environment.hostname.is_empty());
    assert!(r.environment.command_line.iter().any(|a| a == "produce"), "{:?}", r.environment.command_line);
    assert_eq!(p.sent, 2000);
    assert_eq!(p.sent, p.acked + p.failed);
    assert_eq!(p.failed, 0, "{:?}", p.first_error);
    assert_eq!(p.requests, 2000);
    assert_eq!(p.bytes, 2000 * 256);
    assert_eq!(p.latency_us.count, p.requests);
    assert!(p.msgs_per_s > 0.0 && p.latency_us.p50 <= p.latency_us.p99 && p.latency_us.p99 <= p.latency_us.max);
    assert!(r.consume.is_none());

    // Everything sent comes back when consuming from 0.
    let consume_json = dir.path().join("c.json");
    let out = bench(&[
        "consume",
        "-n",
        &namesrv,
        "--from-start",
        "-q",
        "2000",
        "--duration",
        "10",
        "--quiet",
        "--json",
        consume_json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "consume failed: {}", String::from_utf8_lossy(&out.stderr));
    let c = read_report(&consume_json).consume.expect("consume section");
    assert_eq!(c.consumed, p.sent, "{:?}", c.first_error);
    assert_eq!(c.bytes, p.bytes);
    assert_eq!(c.e2e_latency_ms.count, c.consumed);
    assert_eq!(c.queues, r.config.queues);
    // The rate counts the time messages arrived, not the time limit the run waited out.
    assert!(c.elapsed_s < 10.0 && c.msgs_per_s >= c.consumed as f64 / c.elapsed_s * 0.99, "{c:?}");

    // Without --from-start a backlog is not read, and the tool says which flag reads it.
    let out = bench(&["consume", "-n", &namesrv, "--duration", "1", "--quiet"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--from-start"), "{}", String::from_utf8_lossy(&out.stderr));

    // -n given a broker's port says that -n wants a name server.
    let broker = format!("127.0.0.1:{broker_port}");
    let out = bench(&["produce", "-n", &broker, "-q", "1", "--quiet"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("name server") && stderr.contains("--broker"), "{stderr}");

    // Each mode's help lists its own options only.
    let help = |mode: &str| String::from_utf8_lossy(&bench(&[mode, "--help"]).stdout).into_owned();
    let (produce, consume) = (help("produce"), help("consume"));
    assert!(produce.contains("--oneway") && !produce.contains("--from-start"), "{produce}");
    assert!(
        consume.contains("--from-start") && !consume.contains("--oneway") && !consume.contains("--messageSize"),
        "{consume}"
    );

    // The first message of a new topic is pullable right after SEND_OK.
    let out = bench(&["visibility", "-n", &namesrv, "--samples", "3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("visible"), "{}", String::from_utf8_lossy(&out.stdout));

    // e2e with batches: consumes exactly what was acked while it ran.
    let e2e_json = dir.path().join("e.json");
    let out = bench(&[
        "e2e",
        "-n",
        &namesrv,
        "-q",
        "640",
        "-b",
        "32",
        "-w",
        "4",
        "--duration",
        "10",
        "--quiet",
        "--json",
        e2e_json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "e2e failed: {}", String::from_utf8_lossy(&out.stderr));
    let e = read_report(&e2e_json);
    let (ep, ec) = (e.produce.expect("produce section"), e.consume.expect("consume section"));
    assert_eq!((ep.sent, ep.acked, ep.failed, ep.requests), (640, 640, 0, 20), "{:?}", ep.first_error);
    assert_eq!(ec.consumed, ep.acked, "{:?}", ec.first_error);

    // gRPC (the 5.x proxy in the standalone): 300 sends from 8 callers over 2 HTTP/2
    // connections, then all 300 received and acknowledged.
    let out = Command::new(env!("CARGO_BIN_EXE_ferromq"))
        .args(["admin", "updateTopic", "-n", &namesrv, "-c", "DefaultCluster", "-t", "GrpcBench"])
        .args(["-r", "4", "-w", "4", "-a", "+message.type=NORMAL"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let endpoint = format!("127.0.0.1:{grpc_port}");
    let common = ["--endpoint", &endpoint, "-t", "GrpcBench", "-q", "300", "--connections", "2", "--duration", "20"];
    let out = bench(&[&["grpc-produce", "-w", "8"][..], &common].concat());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("grpc-produce ok 300 failed 0"), "{stdout} {:?}", out);
    let out = bench(&[&["grpc-receive", "-w", "2", "-g", "GrpcBenchG"][..], &common].concat());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("grpc-receive ok 300 failed 0"), "{stdout} {:?}", out);
    let out = bench(&["grpc-produce", "--endpoint", &endpoint, "--connections", "0"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--connections must be 1..=64"));
}
