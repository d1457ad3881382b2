//! The official RocketMQ 5.x Python client (PyPI `rocketmq-python-client` 5.1.2, gRPC) against
//! a default `ferromq standalone`: `compat/python5/probe.py` sends normal messages with tags,
//! keys and properties, FIFO messages with a group, a delayed message, committed and rolled
//! back transactional messages, and receives them with a SimpleConsumer (ack, change invisible
//! duration and redelivery). `compat/setup.sh` installs the client in `target/compat-venv5`.
//! Plaintext: this client checks TLS certificates against the system's roots (it refuses the
//! standalone's self-signed one, as it refuses Java's test certificate), and plaintext is its
//! default.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::e2e::{compat_python5, repo_root};
use ferromq_testkit::{start_standalone, Standalone};

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
    let mut child = Command::new(python)
        .arg(repo_root().join("compat/python5/probe.py"))
        .args([&server.grpc, "Py5"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stderr_tail: Vec<&str> = stderr.lines().rev().take(30).collect();
    for scenario in ["normal", "change-invisible-duration", "fifo", "delay", "transaction", "all"] {
        assert!(
            stdout.lines().any(|l| l == format!("OK {scenario}")),
            "scenario {scenario} did not pass ({}):\n{stdout}\n--- stderr (last lines, newest first):\n{}",
            out.status,
            stderr_tail.join("\n")
        );
    }
}
