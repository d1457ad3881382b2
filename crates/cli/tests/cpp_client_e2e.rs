//! The official Apache RocketMQ C++ client (PyPI `rocketmq` 0.4.4, driven through
//! `compat/python/e2e.py`) against the real `ferromq standalone` process: send, push and pull
//! consume, tag filtering, orderly send, committed offsets, and a restart on the same data
//! directory (STYLE.md 7.8).
//!
//! What is asserted is RocketMQ's behaviour, not ours: a new consumer group on a queue that
//! still starts at offset 0 consumes from 0 (Java `ConsumerManageProcessor#queryConsumerOffset`),
//! a message comes back with the body, tags, keys and properties it was sent with and at the
//! queue offset the send response named, a subscription `TagA` gets only TagA messages, a
//! message goes to the queue the producer's selector chose, nothing stored or committed is lost
//! across a clean restart, and a consumer whose pulls are parked gets a new message as soon as it
//! is stored.
//!
//! On failure the assertion message carries the tail of the broker log (`RUST_LOG` for the
//! child is `info,ferromq_remoting=debug`, so every request code is in it; override with
//! `FERROMQ_E2E_RUST_LOG`), the client's JSON lines and the C++ client log, and the temporary
//! directory (data, `broker.log`, `clients/<step>/logs/rocketmq-cpp/`) is kept; set
//! `FERROMQ_E2E_KEEP=1` to keep it on success too.

#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ferromq_protocol::header::GetRouteInfoRequestHeader;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{free_broker_port, free_port};

mod common;
use common::e2e::{compat_python, dir_tail, file_tail, repo_root, ClientRun, Json};

const TOPIC: &str = "CppE2eTopic";
const MESSAGES: usize = 20;
const COLORS: [&str; 3] = ["red", "green", "blue"];
/// Hard deadline of one client run (e2e.py kills the C library after it).
const CLIENT_TIMEOUT_S: &str = "20";
/// Time a started push consumer gets to pull its drained queues (so the pulls are parked).
const PARK_TIME: Duration = Duration::from_millis(1500);
/// Store-to-listener time allowed for a message that wakes a parked pull. Java answers a
/// parked pull when the message is dispatched (long polling); this client's pulls wait 15 s.
const MAX_DELIVERY_LATENCY_MS: i64 = 3000;
const READY_TIMEOUT: Duration = Duration::from_secs(15);
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

// ------------------------------------------------------------------------------------ tests

#[test]
fn cpp_client_round_trip_with_filters_offsets_and_restart() {
    let h = Harness::new();
    let mut server = h.start_standalone();

    // (a) Produce to a topic that does not exist yet: the broker auto-creates it.
    let produce = h.client("a-produce", &server, &["produce", "--topic", TOPIC, "--group", "PG_E2E", "--count", "20"]);
    h.expect_success(&server, &produce, "(a) produce 20 messages");
    let sent = h.sent_messages(&server, &produce);

    // (b) A new push consumer group subscribed to `TagA || TagB` gets all 20, intact.
    let push_all = h.client(
        "b-push-all",
        &server,
        &[
            "push-consume",
            "--topic",
            TOPIC,
            "--group",
            "CG_E2E_ALL",
            "--expression",
            "TagA || TagB",
            "--expect",
            "20",
            "--settle-s",
            "0.5",
        ],
    );
    h.expect_success(&server, &push_all, "(b) push consumer `TagA || TagB` gets the 20 messages");
    let before_restart = h.check_received(&server, &push_all, &sent, &all_indexes(), "(b) push `TagA || TagB`");

    // (c) A second group subscribed to `TagA` gets exactly the 10 TagA messages.
    let push_a = h.client(
        "c-push-taga",
        &server,
        &[
            "push-consume",
            "--topic",
            TOPIC,
            "--group",
            "CG_E2E_TAGA",
            "--expression",
            "TagA",
            "--expect",
            "10",
            "--settle-s",
            "1.0",
        ],
    );
    h.expect_success(&server, &push_a, "(c) push consumer `TagA` gets the 10 TagA messages");
    let tag_a: BTreeSet<usize> = (0..MESSAGES).filter(|i| i.is_multiple_of(2)).collect();
    h.check_received(&server, &push_a, &sent, &tag_a, "(c) push `TagA`");

    // (d) A pull consumer reads every queue from offset 0 and finds the 20 messages.
    let pull =
        h.client("d-pull", &server, &["pull-consume", "--topic", TOPIC, "--group", "PULL_E2E", "--expect", "20"]);
    h.expect_success(&server, &pull, "(d) pull consumer reads the 20 messages");
    h.check_received(&server, &pull, &sent, &all_indexes(), "(d) pull");
    h.check_pull_statuses(&server, &pull, "(d) pull");

    // (f) SIGTERM: a clean exit; then the same data directory serves everything again.
    let status = server.stop();
    if status.code() != Some(0) {
        h.fail(&server, None, &format!("(f) standalone did not exit with 0 after SIGTERM: {status:?}"));
    }
    let mut server = h.restart_standalone(server);
    let push_after = h.client(
        "f-push-after-restart",
        &server,
        &["push-consume", "--topic", TOPIC, "--group", "CG_E2E_AFTER", "--expect", "20", "--settle-s", "0.5"],
    );
    h.expect_success(&server, &push_after, "(f) a new group reads the 20 messages after the restart");
    let after_restart =
        h.check_received(&server, &push_after, &sent, &all_indexes(), "(f) push after restart (new group)");
    for (i, before) in &before_restart {
        let after = &after_restart[i];
        for field in
            ["queue_id", "queue_offset", "commit_log_offset", "store_size", "born_timestamp", "store_timestamp"]
        {
            if before.get(field) != after.get(field) {
                h.fail(
                    &server,
                    Some(&push_after),
                    &format!(
                        "(f) message {i} changed across the restart: {field} {:?} before, {:?} after",
                        before.get(field),
                        after.get(field)
                    ),
                );
            }
        }
    }

    // The offsets group (b) committed before the restart still hold: after one more message,
    // that group gets only the new one.
    let one_more = h.client(
        "g-produce-one-more",
        &server,
        &["produce", "--topic", TOPIC, "--group", "PG_E2E", "--count", "1", "--start", "20"],
    );
    h.expect_success(&server, &one_more, "(g) produce message 20 after the restart");
    let mut sent_after = sent.clone();
    sent_after.extend(h.sent_messages(&server, &one_more));
    let resumed = h.client(
        "g-push-resume",
        &server,
        &[
            "push-consume",
            "--topic",
            TOPIC,
            "--group",
            "CG_E2E_ALL",
            "--expression",
            "TagA || TagB",
            "--expect",
            "1",
            "--settle-s",
            "1.0",
        ],
    );
    h.expect_success(&server, &resumed, "(g) group (b) resumes from its committed offsets after the restart");
    h.check_received(&server, &resumed, &sent_after, &BTreeSet::from([MESSAGES]), "(g) group (b) after restart");

    // (h) A consumer waiting on drained queues (its pulls parked on the broker) gets new
    // messages as they are stored, not when its pull times out (15 s in this client).
    let mut live = h.spawn_client(
        "h-push-live",
        &server,
        &["push-consume", "--topic", TOPIC, "--group", "CG_E2E_ALL", "--expect", "5", "--settle-s", "0.5"],
    );
    if !live.wait_for_event("started", Duration::from_secs(10)) {
        let run = live.finish(&h, &server);
        h.fail(&server, Some(&run), "(h) the push consumer did not start");
    }
    std::thread::sleep(PARK_TIME);
    let more = h.client(
        "h-produce-live",
        &server,
        &["produce", "--topic", TOPIC, "--group", "PG_E2E", "--count", "5", "--start", "21"],
    );
    h.expect_success(&server, &more, "(h) produce messages 21..25 while a consumer waits");
    sent_after.extend(h.sent_messages(&server, &more));
    let live = live.finish(&h, &server);
    h.expect_success(&server, &live, "(h) the waiting consumer gets the 5 new messages");
    let got = h.check_received(&server, &live, &sent_after, &(21..26).collect(), "(h) waiting consumer");
    for (i, m) in &got {
        let latency = m.int("received_at_ms").unwrap_or(i64::MAX).saturating_sub(m.int("store_timestamp").unwrap_or(0));
        if latency > MAX_DELIVERY_LATENCY_MS {
            h.fail(
                &server,
                Some(&live),
                &format!("(h) message {i} reached the waiting consumer {latency} ms after it was stored: {m}"),
            );
        }
    }

    let status = server.stop();
    if status.code() != Some(0) {
        h.fail(&server, None, &format!("standalone did not exit with 0 after SIGTERM: {status:?}"));
    }
}

#[test]
fn cpp_client_orderly_send_keeps_each_key_in_its_selected_queue() {
    let h = Harness::new();
    let mut server = h.start_standalone();
    let topic = "CppE2eOrderly";
    let keys = ["A", "B", "C"];
    let per_key = 4;

    // (e) send_orderly with the key's index as the selector argument: queue = index % queues.
    let produce = h.client(
        "e-produce-orderly",
        &server,
        &["produce-orderly", "--topic", topic, "--group", "PG_E2E_ORDER", "--order-keys", "A,B,C", "--count", "4"],
    );
    h.expect_success(&server, &produce, "(e) orderly produce");
    let sent: Vec<&Json> = produce.events("sent").collect();
    if sent.len() != keys.len() * per_key {
        h.fail(
            &server,
            Some(&produce),
            &format!("(e) expected {} sent lines, got {}", keys.len() * per_key, sent.len()),
        );
    }
    // key -> (chosen queue, [queue offsets in send order])
    let mut chosen: BTreeMap<String, (i64, Vec<i64>)> = BTreeMap::new();
    for s in &sent {
        let key = s.str("order_key").unwrap_or_default().to_owned();
        let (Some(queue), Some(offset)) = (s.int("queue_id"), s.int("queue_offset")) else {
            h.fail(&server, Some(&produce), &format!("(e) sent line without queue_id/queue_offset: {s}"));
        };
        let entry = chosen.entry(key.clone()).or_insert((queue, Vec::new()));
        if entry.0 != queue {
            h.fail(&server, Some(&produce), &format!("(e) the selector chose two queues for key {key}: {s}"));
        }
        entry.1.push(offset);
    }
    for (key, (_, offsets)) in &chosen {
        if offsets.windows(2).any(|w| w[1] != w[0] + 1) {
            h.fail(
                &server,
                Some(&produce),
                &format!("(e) key {key}: send results name queue offsets {offsets:?}, not consecutive"),
            );
        }
    }

    let pull = h.client(
        "e-pull-orderly",
        &server,
        &["pull-consume", "--topic", topic, "--group", "PULL_E2E_ORDER", "--expect", "12"],
    );
    h.expect_success(&server, &pull, "(e) pull the orderly messages back");
    h.check_pull_statuses(&server, &pull, "(e) pull");
    let received: Vec<&Json> = pull.events("message").collect();
    if received.len() != keys.len() * per_key {
        h.fail(
            &server,
            Some(&pull),
            &format!("(e) expected {} messages, pulled {}", keys.len() * per_key, received.len()),
        );
    }
    // key -> [(queue offset, seq)] as stored
    let mut stored: BTreeMap<String, Vec<(i64, i64, i64)>> = BTreeMap::new();
    for m in &received {
        let props = m.get("props");
        let key = props.and_then(|p| p.str("order_key")).unwrap_or_default().to_owned();
        let seq: i64 = props.and_then(|p| p.str("seq")).and_then(|s| s.parse().ok()).unwrap_or(-1);
        let Some((queue, _)) = chosen.get(&key) else {
            h.fail(&server, Some(&pull), &format!("(e) pulled a message with an unknown order_key: {m}"));
        };
        if m.int("queue_id") != Some(*queue) {
            h.fail(&server, Some(&pull), &format!("(e) key {key} was sent to queue {queue} but stored in: {m}"));
        }
        if m.str("body") != Some(&format!("o-{key}-{seq}")) || m.str("keys") != Some(&key) {
            h.fail(&server, Some(&pull), &format!("(e) body or keys not as sent: {m}"));
        }
        stored.entry(key).or_default().push((
            m.int("queue_offset").unwrap_or(-1),
            seq,
            m.int("queue_id").unwrap_or(-1),
        ));
    }
    for key in keys {
        let mut entries = stored.remove(key).unwrap_or_default();
        entries.sort();
        let seqs: Vec<i64> = entries.iter().map(|e| e.1).collect();
        let offsets: Vec<i64> = entries.iter().map(|e| e.0).collect();
        if seqs != (0..per_key as i64).collect::<Vec<_>>() {
            h.fail(
                &server,
                Some(&pull),
                &format!("(e) key {key}: seqs in queue-offset order {seqs:?} (offsets {offsets:?})"),
            );
        }
        if offsets != chosen[key].1 {
            h.fail(
                &server,
                Some(&pull),
                &format!("(e) key {key}: stored at offsets {offsets:?}, send results said {:?}", chosen[key].1),
            );
        }
    }
    // (e) An orderly push consumer (broker queue locks) gets each key's messages in send order.
    let push = h.client(
        "e-push-orderly",
        &server,
        &[
            "push-consume",
            "--orderly",
            "--topic",
            topic,
            "--group",
            "CG_E2E_ORDER",
            "--expect",
            "12",
            "--settle-s",
            "0.5",
        ],
    );
    h.expect_success(&server, &push, "(e) orderly push consumer gets the 12 messages");
    let mut delivered: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for m in push.events("message") {
        let props = m.get("props");
        let key = props.and_then(|p| p.str("order_key")).unwrap_or_default().to_owned();
        let seq: i64 = props.and_then(|p| p.str("seq")).and_then(|s| s.parse().ok()).unwrap_or(-1);
        delivered.entry(key).or_default().push((m.int("recv_seq").unwrap_or(-1), seq));
    }
    for key in keys {
        let mut d = delivered.remove(key).unwrap_or_default();
        d.sort();
        let seqs: Vec<i64> = d.iter().map(|e| e.1).collect();
        if seqs != (0..per_key as i64).collect::<Vec<_>>() {
            h.fail(&server, Some(&push), &format!("(e) orderly push: key {key} delivered as seqs {seqs:?}"));
        }
    }
    let status = server.stop();
    if status.code() != Some(0) {
        h.fail(&server, None, &format!("standalone did not exit with 0 after SIGTERM: {status:?}"));
    }
}

#[test]
fn cpp_client_delayed_messages_arrive_after_their_level() {
    let h = Harness::new();
    let mut server = h.start_standalone();
    let topic = "CppE2eDelayed";
    // (g) Level 2 is 5 s with RocketMQ's default levels.
    let produce = h.client(
        "g-produce-delayed",
        &server,
        &["produce", "--topic", topic, "--group", "PG_E2E_DELAY", "--count", "6", "--delay-level", "2"],
    );
    h.expect_success(&server, &produce, "(g) delayed produce");
    let sent_at: BTreeMap<String, i64> =
        produce.events("sent").filter_map(|s| Some((s.str("key")?.to_owned(), s.int("sent_at_ms")?))).collect();
    if sent_at.len() != 6 {
        h.fail(&server, Some(&produce), &format!("(g) expected 6 sent lines with keys, got {}", sent_at.len()));
    }
    let push = h.client(
        "g-push-delayed",
        &server,
        &["push-consume", "--topic", topic, "--group", "CG_E2E_DELAY", "--expect", "6", "--settle-s", "0.5"],
    );
    h.expect_success(&server, &push, "(g) the push consumer gets the 6 delayed messages");
    let received: Vec<&Json> = push.events("message").collect();
    let keys: BTreeSet<&str> = received.iter().filter_map(|m| m.str("keys")).collect();
    if keys.len() != 6 {
        h.fail(&server, Some(&push), &format!("(g) expected 6 distinct messages, got keys {keys:?}"));
    }
    for m in &received {
        let key = m.str("keys").unwrap_or_default();
        let (Some(sent), Some(got)) = (sent_at.get(key), m.int("received_at_ms")) else {
            h.fail(&server, Some(&push), &format!("(g) a message without a matching send: {m}"));
        };
        // Due 5 s after it was stored; generous upper margin for a loaded machine.
        let waited = got - sent;
        if !(4_500..=20_000).contains(&waited) {
            h.fail(
                &server,
                Some(&push),
                &format!("(g) message {key} arrived {waited} ms after its send, not ~5 s: {m}"),
            );
        }
        if m.str("topic") != Some(topic) {
            h.fail(&server, Some(&push), &format!("(g) delivered with the wrong topic: {m}"));
        }
    }
    let status = server.stop();
    if status.code() != Some(0) {
        h.fail(&server, None, &format!("standalone did not exit with 0 after SIGTERM: {status:?}"));
    }
}

fn all_indexes() -> BTreeSet<usize> {
    (0..MESSAGES).collect()
}

// ------------------------------------------------------------------------------- standalone

/// The `ferromq standalone` child process; killed on drop if still running.
struct Standalone {
    child: Option<Child>,
    namesrv_port: u16,
    broker_port: u16,
    data_dir: PathBuf,
    log: PathBuf,
}

impl Standalone {
    fn spawn(data_dir: &Path, log: &Path, namesrv_port: u16, broker_port: u16) -> Standalone {
        let stderr = OpenOptions::new().create(true).append(true).open(log).unwrap();
        let rust_log = std::env::var("FERROMQ_E2E_RUST_LOG").unwrap_or_else(|_| "info,ferromq_remoting=debug".into());
        let child = Command::new(env!("CARGO_BIN_EXE_ferromq"))
            .arg("standalone")
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--metrics-port", &ferromq_testkit::free_port().to_string()])
            .args(["--dashboard-port", &ferromq_testkit::free_port().to_string()])
            .args(["--namesrv-port", &namesrv_port.to_string(), "--broker-port", &broker_port.to_string()])
            .args(["--bind", "127.0.0.1", "--grpc-port", &ferromq_testkit::free_port().to_string()])
            .env("RUST_LOG", rust_log)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn ferromq standalone");
        Standalone { child: Some(child), namesrv_port, broker_port, data_dir: data_dir.to_owned(), log: log.to_owned() }
    }

    fn namesrv(&self) -> String {
        format!("127.0.0.1:{}", self.namesrv_port)
    }

    /// None while running; the exit status once it has ended.
    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// SIGTERM, then waits for the exit (SIGKILL after [`STOP_TIMEOUT`]).
    fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("standalone already stopped");
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let status = child.wait().unwrap();
                eprintln!("standalone did not exit within {STOP_TIMEOUT:?} of SIGTERM; killed ({status:?})");
                return status;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Standalone {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------- harness

/// One test's temporary directory, the client runner and the failure report.
struct Harness {
    dir: Option<tempfile::TempDir>,
    python: PathBuf,
    script: PathBuf,
}

impl Drop for Harness {
    fn drop(&mut self) {
        if std::thread::panicking() || std::env::var_os("FERROMQ_E2E_KEEP").is_some() {
            if let Some(dir) = self.dir.take() {
                eprintln!("kept the test directory for inspection: {}", dir.keep().display());
            }
        }
    }
}

impl Harness {
    fn new() -> Harness {
        let python = compat_python().clone();
        let dir = tempfile::Builder::new().prefix("ferromq-cpp-e2e-").tempdir().unwrap();
        Harness { dir: Some(dir), python, script: repo_root().join("compat/python/e2e.py") }
    }

    fn path(&self) -> &Path {
        self.dir.as_ref().unwrap().path()
    }

    fn start_standalone(&self) -> Standalone {
        let data = self.path().join("data");
        let log = self.path().join("broker.log");
        let mut server = Standalone::spawn(&data, &log, free_port(), free_broker_port());
        self.wait_ready(&mut server);
        server
    }

    /// Starts a new process on the stopped one's ports and data directory.
    fn restart_standalone(&self, old: Standalone) -> Standalone {
        let mut server = Standalone::spawn(&old.data_dir, &old.log, old.namesrv_port, old.broker_port);
        drop(old);
        self.wait_ready(&mut server);
        server
    }

    /// Both ports accept connections and the name server routes TBW102 (the broker registered).
    fn wait_ready(&self, server: &mut Standalone) {
        let deadline = Instant::now() + READY_TIMEOUT;
        for port in [server.namesrv_port, server.broker_port] {
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                if let Some(status) = server.exited() {
                    self.fail(server, None, &format!("standalone exited during start-up: {status:?}"));
                }
                if Instant::now() > deadline {
                    self.fail(server, None, &format!("port {port} not accepting within {READY_TIMEOUT:?}"));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let addr = server.namesrv();
        let routed = rt.block_on(async {
            let client = RemotingClient::new(ClientConfig::default());
            let routed = loop {
                let request = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(
                    &GetRouteInfoRequestHeader { topic: "TBW102".into(), accept_standard_json_only: None },
                );
                let last = match client.invoke(&addr, request, Duration::from_secs(2)).await {
                    Ok(r) if r.code == response_code::SUCCESS => break Ok(()),
                    Ok(r) => format!("code {} remark {:?}", r.code, r.remark),
                    Err(e) => e.to_string(),
                };
                if Instant::now() > deadline {
                    break Err(last);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            client.shutdown().await;
            routed
        });
        if let Err(last) = routed {
            self.fail(server, None, &format!("no route for TBW102 within {READY_TIMEOUT:?}; last answer: {last}"));
        }
    }

    /// Runs `e2e.py <args> --namesrv ..` to the end (it has its own hard deadline).
    fn client(&self, label: &str, server: &Standalone, args: &[&str]) -> ClientRun {
        self.spawn_client(label, server, args).finish(self, server)
    }

    /// Starts `e2e.py <args> --namesrv ..` with its own client home under the test directory,
    /// in its own process group (killed as a whole if the test panics).
    fn spawn_client(&self, label: &str, server: &Standalone, args: &[&str]) -> RunningClient {
        let home = self.path().join("clients").join(label);
        let mut child = Command::new(&self.python)
            .arg(&self.script)
            .args(args)
            .args(["--namesrv", &server.namesrv(), "--timeout-s", CLIENT_TIMEOUT_S])
            .arg("--client-home")
            .arg(&home)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run compat/python/e2e.py");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        RunningClient {
            label: label.to_owned(),
            child: Some(child),
            lines,
            seen: Vec::new(),
            stderr: Some(stderr),
            client_log_dir: home.join("logs/rocketmq-cpp"),
            started: Instant::now(),
        }
    }

    fn expect_success(&self, server: &Standalone, run: &ClientRun, what: &str) {
        let done_ok = run.done().and_then(|d| d.bool("ok")) == Some(true);
        if run.status.code() != Some(0) || !done_ok {
            self.fail(
                server,
                Some(run),
                &format!("{what}: e2e.py {} (done: {:?})", run.status, run.done().map(ToString::to_string)),
            );
        }
    }

    /// The `sent` lines of a produce run by message index, checked against what e2e.py
    /// documents it sends.
    fn sent_messages(&self, server: &Standalone, run: &ClientRun) -> BTreeMap<usize, Json> {
        let mut sent = BTreeMap::new();
        for s in run.events("sent") {
            let Some(i) = s.int("i").and_then(|i| usize::try_from(i).ok()) else {
                self.fail(server, Some(run), &format!("sent line without index: {s}"));
            };
            if s.str("status") != Some("OK")
                || s.str("msg_id").is_none_or(str::is_empty)
                || s.int("queue_offset").is_none()
            {
                self.fail(server, Some(run), &format!("send {i} not OK or without msg id/queue offset: {s}"));
            }
            let expected = expected_message(i);
            if s.str("body") != Some(&expected.body)
                || s.str("tag") != Some(expected.tag)
                || s.str("color") != Some(expected.color)
            {
                self.fail(server, Some(run), &format!("e2e.py sent message {i} differently than documented: {s}"));
            }
            sent.insert(i, s.clone());
        }
        let count = run.done().and_then(|d| d.int("sent")).unwrap_or(-1);
        if count != sent.len() as i64 {
            self.fail(server, Some(run), &format!("{} sent lines but done says sent={count}", sent.len()));
        }
        sent
    }

    /// Checks that the run received exactly the messages `want` (indexes into `sent`), each
    /// once and as sent; returns the received lines by index.
    fn check_received(
        &self,
        server: &Standalone,
        run: &ClientRun,
        sent: &BTreeMap<usize, Json>,
        want: &BTreeSet<usize>,
        what: &str,
    ) -> BTreeMap<usize, Json> {
        let mut got: BTreeMap<usize, Json> = BTreeMap::new();
        let mut problems = Vec::new();
        for m in run.events("message") {
            let index = m.str("keys").and_then(|k| k.strip_prefix("k-")).and_then(|n| n.parse::<usize>().ok());
            let Some(i) = index.filter(|i| sent.contains_key(i)) else {
                problems.push(format!("a message that was never sent: {m}"));
                continue;
            };
            if got.insert(i, m.clone()).is_some() {
                problems.push(format!("message {i} delivered twice: {m}"));
            }
            let e = expected_message(i);
            let s = &sent[&i];
            let props = m.get("props");
            let checks: [(&str, bool); 9] = [
                ("topic", m.str("topic") == Some(TOPIC)),
                ("body", m.str("body") == Some(&e.body)),
                ("tags", m.str("tags") == Some(e.tag)),
                ("user property color", props.and_then(|p| p.str("color")) == Some(e.color)),
                // Java's SendMessageProcessor adds the broker's cluster name to every message.
                ("property CLUSTER", props.and_then(|p| p.str("CLUSTER")) == Some("DefaultCluster")),
                (
                    "UNIQ_KEY (the msg id the send returned)",
                    m.str("uniq_key").is_some() && m.str("uniq_key") == s.str("msg_id"),
                ),
                ("queue_offset (as in the send response)", m.int("queue_offset") == s.int("queue_offset")),
                ("reconsume_times", m.int("reconsume_times") == Some(0)),
                ("queue_id", m.int("queue_id").is_some_and(|q| q >= 0)),
            ];
            for (field, ok) in checks {
                if !ok {
                    problems.push(format!("message {i}: wrong {field}: {m} (sent: {s})"));
                }
            }
        }
        let keys: BTreeSet<usize> = got.keys().copied().collect();
        if &keys != want {
            let missing: Vec<_> = want.difference(&keys).collect();
            let extra: Vec<_> = keys.difference(want).collect();
            problems.push(format!("expected messages {want:?}; missing {missing:?}, unexpected {extra:?}"));
        }
        // Two messages never share a queue slot.
        let slots: BTreeSet<(i64, i64)> =
            got.values().map(|m| (m.int("queue_id").unwrap_or(-1), m.int("queue_offset").unwrap_or(-1))).collect();
        if slots.len() != got.len() {
            problems.push("two messages report the same (queue_id, queue_offset)".into());
        }
        if !problems.is_empty() {
            self.fail(server, Some(run), &format!("{what}:\n  {}", problems.join("\n  ")));
        }
        got
    }

    /// Every queue was read from 0 to its end with FOUND pulls, ending in NO_NEW_MSG, with
    /// min offset 0 and next offsets that add up.
    fn check_pull_statuses(&self, server: &Standalone, run: &ClientRun, what: &str) {
        let queues: Vec<i64> = run
            .events("queues")
            .flat_map(|q| match q.get("queues") {
                Some(Json::Arr(list)) => list.iter().filter_map(|e| e.int("queue_id")).collect(),
                _ => Vec::new(),
            })
            .collect();
        let mut problems = Vec::new();
        if queues.is_empty() {
            problems.push("the client found no message queue for the topic".to_owned());
        }
        for q in &queues {
            let pulls: Vec<&Json> = run.events("pull").filter(|p| p.int("queue_id") == Some(*q)).collect();
            let stored = run.events("message").filter(|m| m.int("queue_id") == Some(*q)).count() as i64;
            let Some(last) = pulls.last() else {
                problems.push(format!("queue {q} was never pulled"));
                continue;
            };
            if last.str("status") != Some("NO_NEW_MSG") || last.int("offset") != Some(stored) {
                problems.push(format!("queue {q}: last pull should be NO_NEW_MSG at offset {stored}: {last}"));
            }
            for p in &pulls {
                let status = p.str("status").unwrap_or_default();
                let bad = match status {
                    "FOUND" => {
                        p.int("next_begin_offset") != Some(p.int("offset").unwrap_or(0) + p.int("count").unwrap_or(0))
                    }
                    "NO_NEW_MSG" => p.int("next_begin_offset") != p.int("offset"),
                    _ => true,
                };
                if bad || p.int("min_offset") != Some(0) || p.int("max_offset") != Some(stored) {
                    problems.push(format!("queue {q} holds {stored} messages from 0; unexpected pull result: {p}"));
                }
            }
        }
        if !problems.is_empty() {
            self.fail(server, Some(run), &format!("{what}:\n  {}", problems.join("\n  ")));
        }
    }

    /// Panics with everything needed to diagnose: the broker log tail and the client's output
    /// and log. The test directory is kept (see `Drop`).
    fn fail(&self, server: &Standalone, run: Option<&ClientRun>, what: &str) -> ! {
        let mut report = format!("{what}\n");
        if let Some(run) = run {
            report += &format!(
                "\n--- client step {} ({}, {:.1} s), stdout:\n{}\n--- stderr:\n{}\n",
                run.label,
                run.status,
                run.elapsed.as_secs_f64(),
                run.stdout.trim_end(),
                run.stderr.trim_end()
            );
            report += &format!(
                "--- C++ client log ({}), tail:\n{}\n",
                run.client_log_dir.display(),
                dir_tail(&run.client_log_dir, 60)
            );
        }
        report += &format!("--- broker log ({}), tail:\n{}\n", server.log.display(), file_tail(&server.log, 120));
        panic!("{report}");
    }
}

struct Expected {
    body: String,
    tag: &'static str,
    color: &'static str,
}

/// What `e2e.py produce` sends as message `i`.
fn expected_message(i: usize) -> Expected {
    Expected {
        body: format!("m-{i}"),
        tag: if i.is_multiple_of(2) { "TagA" } else { "TagB" },
        color: COLORS[i % COLORS.len()],
    }
}

/// An `e2e.py` run in progress.
struct RunningClient {
    label: String,
    child: Option<Child>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
    client_log_dir: PathBuf,
    started: Instant,
}

impl RunningClient {
    /// Reads lines until one with `"event": kind`; false if the run ended or `timeout` passed.
    fn wait_for_event(&mut self, kind: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let found = Json::parse(&line).is_ok_and(|v| v.str("event") == Some(kind));
                    self.seen.push(line);
                    if found {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
    }

    /// Waits for the run to end and collects its output.
    fn finish(mut self, h: &Harness, server: &Standalone) -> ClientRun {
        // e2e.py always ends by its own --timeout-s; the stdout reader ends with it.
        let mut lines = std::mem::take(&mut self.seen);
        lines.extend(self.lines.iter());
        let status = self.child.take().unwrap().wait().unwrap();
        let stderr = self.stderr.take().unwrap().join().unwrap_or_default();
        let mut events = Vec::new();
        let mut bad_lines = Vec::new();
        for line in lines.iter().filter(|l| !l.trim().is_empty()) {
            match Json::parse(line) {
                Ok(v) => events.push(v),
                Err(e) => bad_lines.push(format!("{e}: {line}")),
            }
        }
        let run = ClientRun {
            label: self.label.clone(),
            status,
            events,
            stdout: lines.join("\n"),
            stderr,
            client_log_dir: self.client_log_dir.clone(),
            elapsed: self.started.elapsed(),
        };
        eprintln!("client step {}: {:?} in {:.1} s", run.label, run.status.code(), run.elapsed.as_secs_f64());
        if !bad_lines.is_empty() {
            h.fail(
                server,
                Some(&run),
                &format!("{}: e2e.py printed lines that are not JSON: {bad_lines:?}", run.label),
            );
        }
        run
    }
}

impl Drop for RunningClient {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The whole group: e2e.py and the child process that runs the C library.
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn json_reader_reads_what_python_writes() {
    let v = Json::parse(r#"{"a": [1, -2.5, true, null], "b": "x\"\u00e9\ud83d\ude00", "c": {}}"#).unwrap();
    assert_eq!(v.get("a"), Some(&Json::Arr(vec![Json::Num(1.0), Json::Num(-2.5), Json::Bool(true), Json::Null])));
    assert_eq!(v.str("b"), Some("x\"é😀"));
    assert_eq!(v.get("c"), Some(&Json::Obj(Vec::new())));
    assert!(Json::parse("{\"a\": 1} x").is_err());
}
