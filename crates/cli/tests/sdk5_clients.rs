//! Official RocketMQ 5.x SDKs of other languages against `ferromq standalone` (gRPC), each as
//! installed by `compat/setup.sh`:
//!
//! - Python (PyPI `rocketmq-python-client` 5.1.2, `target/compat-venv5`):
//!   `compat/python5/probe.py` sends normal messages with tags, keys and properties, FIFO
//!   messages with a group, a delayed message, committed and rolled back transactional
//!   messages, and receives them with a SimpleConsumer (ack, change invisible duration,
//!   redelivery).
//! - Node.js (npm `rocketmq-client-nodejs` 1.0.8, `target/compat-node5`):
//!   `compat/node5/probe.js`: normal and FIFO through a SimpleConsumer, a delayed message and
//!   a recalled one (RecallMessage), a PushConsumer.
//!
//! Plaintext: both clients check TLS certificates against the system's roots (they refuse the
//! standalone's self-signed one, as they refuse Java's test certificate), and plaintext is
//! their default.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::e2e::{compat_node5_modules, compat_python5, repo_root};
use ferromq_testkit::{start_standalone, start_standalone_with_conf, Standalone};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");

fn create_topic(server: &Standalone, topic: &str, message_type: &str) {
    let attr = format!("+message.type={message_type}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = Command::new(BIN)
            .args(["admin", "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4", "-a", &attr])
            .args(["-n", &server.namesrv])
            .output()
            .unwrap();
        if out.status.success() {
            return;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(Instant::now() < deadline && err.contains("no master"), "updateTopic {topic}: {err}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn official_python_client_5_sends_and_receives() {
    let python = compat_python5();
    let server = start_standalone(BIN);
    for (suffix, kind) in [("normal", "NORMAL"), ("fifo", "FIFO"), ("delay", "DELAY"), ("tx", "TRANSACTION")] {
        create_topic(&server, &format!("Py5-{suffix}"), kind);
    }
    let mut command = Command::new(python);
    command.arg(repo_root().join("compat/python5/probe.py")).args([&server.grpc, "Py5"]);
    let (stdout, stderr) = run(command, 180);
    expect_scenarios(
        "python",
        &format!("{stdout}\n{stderr}"),
        &["normal", "change-invisible-duration", "fifo", "delay", "transaction", "all"],
    );
}

#[test]
fn official_node_client_5_sends_and_receives() {
    let modules = compat_node5_modules();
    let server = start_standalone_with_conf(BIN, "recallMessageEnable=true\n");
    for (suffix, kind) in [("normal", "NORMAL"), ("fifo", "FIFO"), ("delay", "DELAY")] {
        create_topic(&server, &format!("Node5-{suffix}"), kind);
    }
    // The client writes its log under $HOME/logs/rocketmq.
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new("node");
    command
        .arg(repo_root().join("compat/node5/probe.js"))
        .args([&server.grpc, "Node5"])
        .env("NODE_PATH", &modules)
        .env("HOME", home.path());
    let (stdout, stderr) = run(command, 180);
    expect_scenarios("node", &format!("{stdout}\n{stderr}"), &["normal", "fifo", "delay-recall", "push", "all"]);
}

/// Runs `command` to its end (killed after `limit_s`); its stdout and stderr.
fn run(mut command: Command, limit_s: u64) -> (String, String) {
    let mut child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // Drain both pipes while it runs: a client that logs much must not block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(limit_s);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = child.wait().unwrap();
    let (stdout, stderr) = (out_reader.join().unwrap(), err_reader.join().unwrap());
    eprintln!("client exited: {status}");
    (stdout, stderr)
}

/// Every scenario printed its `OK <name>` line in `output`.
fn expect_scenarios(client: &str, output: &str, scenarios: &[&str]) {
    for scenario in scenarios {
        assert!(
            output.lines().any(|l| l == format!("OK {scenario}")),
            "{client}: scenario {scenario} did not pass:\n{}",
            output.lines().rev().take(60).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
}
