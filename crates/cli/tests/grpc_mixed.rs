//! 5.x and 4.x clients on one topic of `ferromq standalone`: a gRPC producer (tonic, as the
//! 5.x SDKs speak `apache.rocketmq.v2.MessagingService`) and the official C++ 4.x client
//! (PyPI `rocketmq` 0.4.4 through `compat/python/e2e.py`, remoting) both send; a gRPC simple
//! consumer and a C++ push consumer both receive every message, with the body, tag, keys and
//! user properties it was sent with, and the message id the sender was given:
//! gRPC `user_properties` ↔ message properties, `tag` ↔ TAGS, `keys` ↔ KEYS (space
//! separated), `message_id` ↔ UNIQ_KEY (the 4.x msgId).
//!
//! On failure the message carries the client's output and the standalone's log tail (run with
//! `RUST_LOG=info` for more).

#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ferromq_proxy::pb::{self, ClientType, Code};
use ferromq_testkit::{start_standalone, Standalone};
use tokio_stream::StreamExt;

mod common;
use common::e2e::{compat_python, dir_tail, file_tail, run_e2e, ClientRun, Json};
use common::grpc::{
    ack_entry, code, connect, consumer_settings, message_id, producer_settings, req, res, telemetry, Client,
    RPC_TIMEOUT,
};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
const TOPIC: &str = "GrpcMixedTopic";
const GRPC_GROUP: &str = "GrpcMixedG";
const CPP_GROUP: &str = "CG_GRPC_MIXED";
/// Hard deadline of one e2e.py run (it kills the C library after it).
const CLIENT_TIMEOUT_S: u64 = 30;
/// The born timestamp the gRPC producer gives its messages, ms.
const GRPC_BORN_MS: i64 = 1_700_000_000_000;

/// A message as either side sends it, and as both consumers must see it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spec {
    body: String,
    tag: Option<String>,
    keys: Vec<String>,
    props: BTreeMap<String, String>,
}

fn spec(body: &str, tag: Option<&str>, keys: &[&str], props: &[(&str, &str)]) -> Spec {
    Spec {
        body: body.to_owned(),
        tag: tag.map(str::to_owned),
        keys: keys.iter().map(|k| (*k).to_owned()).collect(),
        props: props.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
    }
}

/// What the gRPC producer sends: several keys or none, no tag, text that is not ASCII.
fn grpc_specs() -> Vec<Spec> {
    vec![
        spec("from-grpc-0", Some("TagA"), &["gk-0"], &[("color", "red"), ("origin", "grpc")]),
        spec("from-grpc-1", Some("TagB"), &["gk-1a", "gk-1b"], &[("color", "green"), ("origin", "grpc")]),
        spec("from-grpc-2", None, &[], &[("origin", "grpc"), ("note", "a value with spaces = and ;")]),
        spec("from-grpc-3 ünïcødé ✓", Some("TagA"), &["gk-3"], &[("origin", "grpc"), ("lang", "日本語")]),
        spec("from-grpc-4", Some("TagC"), &["gk-4"], &[]),
    ]
}

/// What the C++ producer sends (e2e.py produce-messages).
fn cpp_specs() -> Vec<Spec> {
    vec![
        spec("from-cpp-0", Some("TagA"), &["ck-0"], &[("color", "blue"), ("origin", "cpp")]),
        spec("from-cpp-1", Some("TagB"), &["ck-1a", "ck-1b"], &[("color", "red"), ("origin", "cpp")]),
        spec("from-cpp-2", None, &[], &[("origin", "cpp"), ("note", "a value with spaces = and ;")]),
        spec("from-cpp-3 ünïcødé ✓", Some("TagA"), &["ck-3"], &[("origin", "cpp"), ("lang", "日本語")]),
        spec("from-cpp-4", Some("TagC"), &["ck-4"], &[]),
    ]
}

/// The user property names any message carries (what the C++ consumer is asked to report).
fn prop_names() -> Vec<String> {
    let names: BTreeSet<String> =
        grpc_specs().iter().chain(&cpp_specs()).flat_map(|s| s.props.keys().cloned()).collect();
    names.into_iter().collect()
}

// ------------------------------------------------------------------------------------ gRPC

fn grpc_message(s: &Spec, id: &str) -> pb::Message {
    pb::Message {
        topic: res(TOPIC),
        user_properties: s.props.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        system_properties: Some(pb::SystemProperties {
            tag: s.tag.clone(),
            keys: s.keys.clone(),
            message_id: id.to_owned(),
            body_encoding: pb::Encoding::Identity as i32,
            message_type: pb::MessageType::Normal as i32,
            born_timestamp: Some(prost_types::Timestamp { seconds: GRPC_BORN_MS / 1000, nanos: 0 }),
            born_host: "127.0.0.1".into(),
            ..Default::default()
        }),
        body: s.body.clone().into_bytes(),
    }
}

/// Receives (and acks) until `want` distinct message ids arrived; every delivery by id.
async fn grpc_receive_all(client: &mut Client, want: usize) -> Result<BTreeMap<String, pb::Message>, String> {
    let mut got = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < want {
        if Instant::now() >= deadline {
            return Err(format!("the gRPC consumer received {} of {want} messages in 60 s", got.len()));
        }
        let r = pb::ReceiveMessageRequest {
            group: res(GRPC_GROUP),
            message_queue: Some(pb::MessageQueue { topic: res(TOPIC), id: -1, ..Default::default() }),
            filter_expression: Some(pb::FilterExpression {
                r#type: pb::FilterType::Tag as i32,
                expression: "*".into(),
            }),
            batch_size: 16,
            invisible_duration: Some(prost_types::Duration { seconds: 15, nanos: 0 }),
            auto_renew: false,
            long_polling_timeout: Some(prost_types::Duration { seconds: 5, nanos: 0 }),
            attempt_id: None,
        };
        let call = async {
            let mut stream = client.receive_message(req("mix-consumer", r)).await?.into_inner();
            let mut msgs = Vec::new();
            let mut status = None;
            while let Some(frame) = stream.next().await {
                match frame?.content {
                    Some(pb::receive_message_response::Content::Status(s)) => status = Some(s),
                    Some(pb::receive_message_response::Content::Message(m)) => msgs.push(m),
                    _ => {}
                }
            }
            Ok::<_, tonic::Status>((status, msgs))
        };
        let (status, msgs) = tokio::time::timeout(Duration::from_secs(25), call)
            .await
            .map_err(|_| "a receive took over 25 s".to_owned())?
            .map_err(|e| format!("receive: {e}"))?;
        if !matches!(code(&status), Code::Ok | Code::MessageNotFound) {
            return Err(format!("receive answered {status:?}"));
        }
        if msgs.is_empty() {
            continue;
        }
        let entries = msgs.iter().map(ack_entry).collect();
        let ack = pb::AckMessageRequest { group: res(GRPC_GROUP), topic: res(TOPIC), entries };
        let answer = tokio::time::timeout(RPC_TIMEOUT, client.ack_message(req("mix-consumer", ack)))
            .await
            .map_err(|_| "an ack took over 15 s".to_owned())?
            .map_err(|e| format!("ack: {e}"))?
            .into_inner();
        if code(&answer.status) != Code::Ok {
            return Err(format!("ack answered {answer:?}"));
        }
        for m in msgs {
            got.insert(m.system_properties.as_ref().unwrap().message_id.clone(), m);
        }
    }
    Ok(got)
}

// ------------------------------------------------------------------------------------ test

#[test]
fn grpc_and_cpp_clients_see_the_same_messages_bodies_tags_keys_and_properties() {
    let started = Instant::now();
    let step = |what: &str| println!("[{:>6.1?}] {what}", started.elapsed());
    let h = Harness::new();
    step("compat client ready");
    let server = start_standalone(BIN);
    create_topic(&server);
    step("standalone up, topic created");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut problems = Vec::new();

    // (1) The gRPC producer sends its messages: id -> what was sent.
    let mut client = rt.block_on(connect(&server.grpc));
    let _producer = rt.block_on(telemetry(&mut client, "mix-producer", producer_settings(&[TOPIC])));
    let mut sent: BTreeMap<String, (&str, Spec)> = BTreeMap::new();
    for (n, s) in grpc_specs().into_iter().enumerate() {
        let id = message_id(n);
        let request = req("mix-producer", pb::SendMessageRequest { messages: vec![grpc_message(&s, &id)] });
        let r = rt
            .block_on(async { tokio::time::timeout(RPC_TIMEOUT, client.send_message(request)).await })
            .expect("send in time")
            .expect("send")
            .into_inner();
        assert_eq!(code(&r.status), Code::Ok, "gRPC send {n}: {r:?}");
        assert_eq!(r.entries[0].message_id, id, "{r:?}");
        sent.insert(id, ("gRPC", s));
    }

    step("gRPC producer sent");
    // (2) The C++ producer sends its messages; their ids are the UNIQ_KEYs it made.
    let specs_path = h.path().join("cpp-messages.json");
    std::fs::write(&specs_path, specs_json(&cpp_specs())).unwrap();
    let produce = h.client(
        "produce-messages",
        &server,
        &["produce-messages", "--topic", TOPIC, "--group", "PG_GRPC_MIXED", "--messages-json"],
        &[specs_path.to_str().unwrap()],
    );
    h.expect_success(&server, &produce, "the C++ producer sends its messages");
    let cpp = cpp_specs();
    let sent_lines: Vec<&Json> = produce.events("sent").collect();
    if sent_lines.len() != cpp.len() {
        h.fail(&server, Some(&produce), &format!("{} sent lines for {} messages", sent_lines.len(), cpp.len()));
    }
    for line in sent_lines {
        let (Some(i), Some(id)) = (line.int("i"), line.str("msg_id").filter(|s| !s.is_empty())) else {
            h.fail(&server, Some(&produce), &format!("sent line without index or msg id: {line}"));
        };
        if line.str("status") != Some("OK") {
            h.fail(&server, Some(&produce), &format!("C++ send not OK: {line}"));
        }
        sent.insert(id.to_owned(), ("C++", cpp[usize::try_from(i).unwrap()].clone()));
    }
    let total = sent.len();
    assert_eq!(total, grpc_specs().len() + cpp.len(), "message ids are distinct");

    step("C++ producer sent");
    // (3) The C++ push consumer gets every message as it was sent.
    let props = prop_names().join(",");
    let consume = h.client(
        "push-consume",
        &server,
        &["push-consume", "--topic", TOPIC, "--group", CPP_GROUP, "--settle-s", "1.0"],
        &["--expect", &total.to_string(), "--props", &props],
    );
    h.expect_success(&server, &consume, "the C++ push consumer gets every message");
    let mut cpp_seen: BTreeMap<String, Spec> = BTreeMap::new();
    // id -> (born timestamp, store timestamp, queue id, queue offset) as the C++ consumer saw it.
    let mut cpp_stored: BTreeMap<String, [Option<i64>; 4]> = BTreeMap::new();
    for m in consume.events("message") {
        let Some(id) = m.str("uniq_key").filter(|s| !s.is_empty()) else {
            problems.push(format!("C++ consumer: a message without UNIQ_KEY: {m}"));
            continue;
        };
        let Some((from, s)) = sent.get(id) else {
            problems.push(format!("C++ consumer: a message never sent: {m}"));
            continue;
        };
        if m.str("msg_id") != Some(id) {
            problems
                .push(format!("C++ consumer: {from} message {id} has msgId {:?}, not its UNIQ_KEY", m.str("msg_id")));
        }
        let got_props: BTreeMap<String, String> = match m.get("props") {
            Some(Json::Obj(fields)) => fields
                .iter()
                .filter_map(|(k, v)| match v {
                    Json::Str(v) => Some((k.clone(), v.clone())),
                    _ => None,
                })
                .collect(),
            _ => BTreeMap::new(),
        };
        let seen = Spec {
            body: m.str("body").unwrap_or_default().to_owned(),
            tag: m.str("tags").filter(|t| !t.is_empty()).map(str::to_owned),
            keys: m.str("keys").unwrap_or_default().split(' ').filter(|k| !k.is_empty()).map(str::to_owned).collect(),
            props: got_props,
        };
        if &seen != s {
            problems.push(format!("C++ consumer: {from} message {id} arrived as {seen:?}, sent as {s:?} ({m})"));
        }
        if *from == "gRPC" && m.int("born_timestamp") != Some(GRPC_BORN_MS) {
            problems.push(format!("C++ consumer: gRPC message {id}: born timestamp not the one sent: {m}"));
        }
        let stored = ["born_timestamp", "store_timestamp", "queue_id", "queue_offset"].map(|k| m.int(k));
        cpp_stored.insert(id.to_owned(), stored);
        if m.str("topic") != Some(TOPIC) || m.int("reconsume_times") != Some(0) {
            problems.push(format!("C++ consumer: {from} message {id}: topic or reconsume times: {m}"));
        }
        if m.str("keys") != Some(&s.keys.join(" ")) {
            problems.push(format!("C++ consumer: {from} message {id}: KEYS {:?}, sent {:?}", m.str("keys"), s.keys));
        }
        cpp_seen.insert(id.to_owned(), seen);
    }
    let missing: Vec<&String> = sent.keys().filter(|id| !cpp_seen.contains_key(*id)).collect();
    if !missing.is_empty() {
        problems.push(format!("C++ consumer: never got {missing:?}"));
    }

    step("C++ consumer received");
    // (4) The gRPC simple consumer gets every message as it was sent.
    let _consumer = rt.block_on(telemetry(
        &mut client,
        "mix-consumer",
        consumer_settings(ClientType::SimpleConsumer, GRPC_GROUP, TOPIC),
    ));
    match rt.block_on(grpc_receive_all(&mut client, total)) {
        Err(e) => problems.push(format!("gRPC consumer: {e}")),
        Ok(got) => {
            for (id, m) in &got {
                let Some((from, s)) = sent.get(id) else {
                    problems.push(format!("gRPC consumer: a message never sent: {m:?}"));
                    continue;
                };
                let sys = m.system_properties.clone().unwrap_or_default();
                let seen = Spec {
                    body: String::from_utf8_lossy(&m.body).into_owned(),
                    tag: sys.tag.clone(),
                    keys: sys.keys.clone(),
                    props: m.user_properties.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                };
                if &seen != s {
                    problems.push(format!("gRPC consumer: {from} message {id} arrived as {seen:?}, sent as {s:?}"));
                }
                let stored = [
                    sys.born_timestamp.as_ref().map(timestamp_ms),
                    sys.store_timestamp.as_ref().map(timestamp_ms),
                    Some(i64::from(sys.queue_id)),
                    sys.queue_offset,
                ];
                if cpp_stored.get(id).is_some_and(|c| c != &stored) {
                    problems.push(format!(
                        "gRPC consumer: {from} message {id}: born/store time, queue id and offset {stored:?}, \
                         the C++ consumer saw {:?}",
                        cpp_stored[id]
                    ));
                }
                let digest = sys.body_digest.as_ref().map(|d| d.checksum.clone()).unwrap_or_default();
                let checks = [
                    ("topic", m.topic.as_ref().map(|t| t.name.as_str()) == Some(TOPIC)),
                    ("message type NORMAL", sys.message_type == pb::MessageType::Normal as i32),
                    ("body encoding IDENTITY", sys.body_encoding == pb::Encoding::Identity as i32),
                    ("MD5 body digest", digest == md5_hex(s.body.as_bytes())),
                    ("delivery attempt 1", sys.delivery_attempt == Some(1)),
                    ("store host (the broker)", sys.store_host == server.broker),
                    ("born host", !sys.born_host.is_empty()),
                    ("a receipt handle", sys.receipt_handle.as_ref().is_some_and(|h| !h.is_empty())),
                ];
                for (what, ok) in checks {
                    if !ok {
                        problems.push(format!("gRPC consumer: {from} message {id}: wrong {what}: {m:?}"));
                    }
                }
            }
            // Both consumers saw the same messages.
            let grpc_ids: BTreeSet<&String> = got.keys().collect();
            let cpp_ids: BTreeSet<&String> = cpp_seen.keys().collect();
            if grpc_ids != cpp_ids {
                problems.push(format!("the consumers saw different messages: gRPC {grpc_ids:?}, C++ {cpp_ids:?}"));
            }
        }
    }
    step("gRPC consumer received");
    if !problems.is_empty() {
        h.fail(&server, Some(&consume), &format!("{} problems:\n  {}", problems.len(), problems.join("\n  ")));
    }
    println!(
        "{total} messages ({} from gRPC, {} from C++) seen alike by both consumers",
        grpc_specs().len(),
        cpp.len()
    );
}

fn create_topic(server: &Standalone) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = Command::new(BIN)
            .args(["admin", "updateTopic", "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4"])
            .args(["-a", "+message.type=NORMAL", "-n", &server.namesrv])
            .output()
            .expect("admin runs");
        if out.status.success() {
            return;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(Instant::now() < deadline && err.contains("no master"), "updateTopic: {err}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn timestamp_ms(t: &prost_types::Timestamp) -> i64 {
    t.seconds * 1000 + i64::from(t.nanos) / 1_000_000
}

/// Upper-case hex MD5, as the proxy's body digest (Java: `UtilAll.bytes2string`).
fn md5_hex(body: &[u8]) -> String {
    // RFC 1321, small and slow: enough for a few short bodies.
    const S: [u32; 64] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14,
        20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6,
        10, 15, 21,
    ];
    let k: Vec<u32> = (0..64).map(|i| ((i as f64 + 1.0).sin().abs() * 4_294_967_296.0) as u32).collect();
    let mut msg = body.to_vec();
    let bit_len = (body.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_le_bytes());
    let mut h: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];
    for chunk in msg.chunks(64) {
        let m: Vec<u32> = chunk.chunks(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
        let [mut a, mut b, mut c, mut d] = h;
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let f = f.wrapping_add(a).wrapping_add(k[i]).wrapping_add(m[g]);
            a = d;
            d = c;
            c = b;
            b = b.wrapping_add(f.rotate_left(S[i]));
        }
        h = [h[0].wrapping_add(a), h[1].wrapping_add(b), h[2].wrapping_add(c), h[3].wrapping_add(d)];
    }
    h.iter().flat_map(|w| w.to_le_bytes()).map(|b| format!("{b:02X}")).collect()
}

#[test]
fn md5_matches_rfc_1321() {
    assert_eq!(md5_hex(b""), "D41D8CD98F00B204E9800998ECF8427E");
    assert_eq!(md5_hex(b"one"), "F97C5D29941BFB1B2FDAB0874906AB82");
    assert_eq!(md5_hex(&[b'a'; 100]), "36A92CC94A9E0FA21F625F8BFB007ADF");
    assert_eq!(md5_hex("from-grpc-3 ünïcødé ✓".as_bytes()), "5B3B92151B1336BC686AC94E38544172");
}

/// The `--messages-json` file of e2e.py produce-messages.
fn specs_json(specs: &[Spec]) -> String {
    let list: Vec<String> = specs
        .iter()
        .map(|s| {
            let keys: Vec<String> = s.keys.iter().map(|k| json_str(k)).collect();
            let props: Vec<String> = s.props.iter().map(|(k, v)| format!("{}: {}", json_str(k), json_str(v))).collect();
            let tag = s.tag.as_deref().map_or_else(|| "null".to_owned(), json_str);
            format!(
                "{{\"body\": {}, \"tag\": {tag}, \"keys\": [{}], \"props\": {{{}}}}}",
                json_str(&s.body),
                keys.join(", "),
                props.join(", ")
            )
        })
        .collect();
    format!("[\n{}\n]\n", list.join(",\n"))
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[test]
fn messages_json_reads_back() {
    let text = specs_json(&cpp_specs());
    let Json::Arr(list) = Json::parse(&text).unwrap() else { panic!("a list: {text}") };
    assert_eq!(list.len(), cpp_specs().len());
    assert_eq!(list[3].str("body"), Some("from-cpp-3 ünïcødé ✓"));
    assert_eq!(list[2].get("tag"), Some(&Json::Null));
    assert_eq!(list[1].get("props").and_then(|p| p.str("origin")), Some("cpp"));
}

// ------------------------------------------------------------------ e2e.py (from cpp_client_e2e)

/// The test's temporary directory and the e2e.py runner.
struct Harness {
    dir: Option<tempfile::TempDir>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(dir) = self.dir.take() {
                eprintln!("kept the test directory for inspection: {}", dir.keep().display());
            }
        }
    }
}

impl Harness {
    fn new() -> Harness {
        // Sets the compat venv up once, before the first client needs it.
        let _ = compat_python();
        let dir = tempfile::Builder::new().prefix("ferromq-grpc-mixed-").tempdir().unwrap();
        Harness { dir: Some(dir) }
    }

    fn path(&self) -> &Path {
        self.dir.as_ref().unwrap().path()
    }

    /// Runs `e2e.py <args> <more> --namesrv ..` to its end, in its own process group (killed as
    /// a whole if it outlives its own deadline by 15 s).
    fn client(&self, label: &str, server: &Standalone, args: &[&str], more: &[&str]) -> ClientRun {
        let home = self.path().join("clients").join(label);
        let all: Vec<&str> = args.iter().chain(more).copied().collect();
        match run_e2e(label, &home, &all, &server.namesrv, CLIENT_TIMEOUT_S) {
            (run, None) => run,
            (run, Some(why)) => self.fail(server, Some(&run), &why),
        }
    }

    fn expect_success(&self, server: &Standalone, run: &ClientRun, what: &str) {
        if run.status.code() != Some(0) || run.done().and_then(|d| d.bool("ok")) != Some(true) {
            self.fail(
                server,
                Some(run),
                &format!("{what}: e2e.py {} (done: {:?})", run.status, run.done().map(ToString::to_string)),
            );
        }
    }

    fn fail(&self, server: &Standalone, run: Option<&ClientRun>, what: &str) -> ! {
        let mut report = format!("{what}\n");
        if let Some(run) = run {
            report += &format!(
                "\n--- e2e.py {} ({}), stdout:\n{}\n--- stderr:\n{}\n--- C++ client log ({}), tail:\n{}\n",
                run.label,
                run.status,
                run.stdout.trim_end(),
                run.stderr.trim_end(),
                run.client_log_dir.display(),
                dir_tail(&run.client_log_dir, 60)
            );
        }
        let log = server.data.path().join("standalone.log");
        report += &format!("--- standalone log ({}), tail:\n{}\n", log.display(), file_tail(&log, 80));
        panic!("{report}");
    }
}
