//! SIGKILL the standalone broker while simple (pop) consumers receive and acknowledge; after a
//! restart on the same data directory every message that was received and not acknowledged
//! comes back (revive resumes from its persisted progress), every message is delivered at
//! least once, and none acknowledged before the kill comes back more than once. Prints the
//! duplicate ratio (acknowledged messages delivered again, from consumer offsets persisted
//! up to `flushConsumerOffsetInterval` before the kill).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferromq_client::{ClientConfig, MessageSelector, SimpleConsumer, SimpleConsumerConfig};
use ferromq_protocol::header::{SendMessageRequestHeader, SendMessageRequestHeaderV2};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::RemotingClient;
use ferromq_testkit::{free_broker_port, free_port, ChildProcess as Standalone};

const TOPIC: &str = "PopCrashTopic";
const GROUP: &str = "PopCrashGroup";
const MESSAGES: usize = 8_000;
const INVISIBLE: Duration = Duration::from_secs(3);

fn start(dir: &std::path::Path, ns_port: u16, broker_port: u16, extra: &str) -> Standalone {
    let conf = dir.join("broker.conf");
    let mut f = std::fs::File::create(&conf).unwrap();
    writeln!(f, "timerPrecisionMs=100\nreviveInterval=100\nflushConsumerOffsetInterval=1000\n{extra}").unwrap();
    let logs = std::env::var_os("CRASH_TEST_LOGS").is_some();
    let child = Command::new(env!("CARGO_BIN_EXE_ferromq"))
        .args([
            "standalone",
            "--bind",
            "127.0.0.1",
            "--grpc-port",
            &ferromq_testkit::free_port().to_string(),
            "--data-dir",
        ])
        .arg(dir.join("data"))
        .args(["--metrics-port", &ferromq_testkit::free_port().to_string()])
        .args(["--dashboard-port", &ferromq_testkit::free_port().to_string()])
        .args(["--namesrv-port", &ns_port.to_string(), "--broker-port", &broker_port.to_string(), "-c"])
        .arg(&conf)
        .stdout(if logs { Stdio::inherit() } else { Stdio::null() })
        .stderr(if logs { Stdio::inherit() } else { Stdio::null() })
        .spawn()
        .unwrap();
    Standalone(child)
}

fn send(queue_id: i32, body: String) -> RemotingCommand {
    let h: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
        producer_group: "pg".into(),
        topic: TOPIC.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id,
        born_timestamp: 1,
        ..Default::default()
    }
    .into();
    RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&h).with_body(body.into_bytes())
}

async fn send_all(broker: &str) {
    let client = RemotingClient::new(ferromq_remoting::ClientConfig::default());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut i = 0;
    while i < MESSAGES {
        match client.invoke(broker, send((i % 4) as i32, format!("m{i}")), Duration::from_secs(5)).await {
            Ok(r) if r.code == response_code::SUCCESS => i += 1,
            _ => {
                assert!(Instant::now() < deadline, "standalone did not take messages");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    client.shutdown().await;
}

async fn consumer(ns: &str) -> SimpleConsumer {
    let sc = SimpleConsumer::start(
        SimpleConsumerConfig { group: GROUP.into(), await_duration: Duration::from_millis(300), fifo: false },
        ClientConfig::with_namesrv(ns),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) = sc.subscribe(TOPIC, MessageSelector::tag("*")).await {
        assert!(Instant::now() < deadline, "no route for {TOPIC}: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    sc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn popped_and_unacked_messages_come_back_after_sigkill() {
    sigkill_under_pop_load("").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_checkpoint_buffer_popped_and_unacked_messages_come_back_after_sigkill() {
    sigkill_under_pop_load("enablePopBufferMerge=true\npopCkStayBufferTime=1000").await;
}

async fn sigkill_under_pop_load(extra: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (ns_port, broker_port) = (free_port(), free_broker_port());
    let (ns, broker) = (format!("127.0.0.1:{ns_port}"), format!("127.0.0.1:{broker_port}"));
    let mut process = start(dir.path(), ns_port, broker_port, extra);
    send_all(&broker).await;

    let popped = Arc::new(Mutex::new(BTreeSet::new()));
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let sc = Arc::new(consumer(&ns).await);
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..3 {
        let (sc, popped, acked) = (sc.clone(), popped.clone(), acked.clone());
        workers.spawn(async move {
            loop {
                let Ok(got) = sc.receive(32, INVISIBLE).await else { return };
                for (i, m) in got.iter().enumerate() {
                    let body = String::from_utf8(m.message.body().to_vec()).unwrap();
                    popped.lock().unwrap().insert(body.clone());
                    // Leave some unacknowledged on purpose: their checkpoints must bring them back.
                    if (i + w) % 4 == 0 {
                        continue;
                    }
                    match sc.ack(m).await {
                        Ok(()) => {
                            acked.lock().unwrap().insert(body);
                        }
                        Err(_) => return,
                    }
                }
            }
        });
    }
    let kill_after =
        1_500 + (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_millis() % 1_000);
    println!("killing the broker after {kill_after} ms of pop+ack load");
    tokio::time::sleep(Duration::from_millis(u64::from(kill_after))).await;
    process.0.kill().unwrap(); // SIGKILL
    process.0.wait().unwrap();
    while workers.join_next().await.is_some() {}
    sc.shutdown().await;
    let (popped, acked) = (popped.lock().unwrap().clone(), acked.lock().unwrap().clone());
    assert!(acked.len() > 10, "the load ran ({} popped, {} acked)", popped.len(), acked.len());
    drop(process);

    let _process = start(dir.path(), ns_port, broker_port, extra);
    let sc = consumer(&ns).await;
    let mut after: BTreeMap<String, usize> = BTreeMap::new();
    let unacked: BTreeSet<String> = popped.difference(&acked).cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut idle_since = Instant::now();
    // Until every message was seen and nothing arrived for two invisible times.
    while Instant::now() < deadline {
        let got = match sc.receive(32, Duration::from_secs(60)).await {
            Ok(g) => g,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        if got.is_empty() {
            let all_seen = (0..MESSAGES).all(|i| {
                let b = format!("m{i}");
                after.contains_key(&b) || acked.contains(&b)
            });
            if all_seen && idle_since.elapsed() > INVISIBLE * 2 {
                break;
            }
            continue;
        }
        idle_since = Instant::now();
        for m in &got {
            *after.entry(String::from_utf8(m.message.body().to_vec()).unwrap()).or_default() += 1;
            let _ = sc.ack(m).await;
        }
    }
    sc.shutdown().await;
    let missing_unacked: Vec<&String> = unacked.iter().filter(|b| !after.contains_key(*b)).collect();
    assert!(missing_unacked.is_empty(), "received, not acked, never back: {missing_unacked:?}");
    let never: Vec<String> =
        (0..MESSAGES).map(|i| format!("m{i}")).filter(|b| !after.contains_key(b) && !acked.contains(b)).collect();
    assert!(never.is_empty(), "{} messages never delivered: {:?}", never.len(), &never[..never.len().min(10)]);
    let twice: Vec<(&String, &usize)> = after.iter().filter(|(b, n)| acked.contains(*b) && **n > 1).collect();
    assert!(twice.is_empty(), "acknowledged messages delivered more than once more: {twice:?}");
    let duplicates = acked.iter().filter(|b| after.contains_key(*b)).count();
    println!(
        "[{extra:?}] popped {} acked {} unacked {} before the kill; after the restart {} delivered, duplicate ratio of acked {:.3}",
        popped.len(),
        acked.len(),
        unacked.len(),
        after.len(),
        duplicates as f64 / acked.len() as f64
    );
}
