//! Compaction topics against the real binary: a topic created with `+cleanup.policy=COMPACTION`
//! refuses messages without keys, and consumers reading it from offset 0 get exactly the newest
//! message per key once a run is done; SIGKILLs at random moments while runs go on (every
//! second here) never lose a key's newest message nor show one twice.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use ferromq_client::admin::AdminClient;
use ferromq_protocol::body::TopicConfig;
use ferromq_protocol::header::PullMessageResponseHeader;
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::response_code;
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{free_broker_port, free_port, pull_request, send_request, ChildProcess};

mod common;

const TOPIC: &str = "KvState";
const KEYS: usize = 20;
const T: Duration = Duration::from_secs(10);

fn start(dir: &Path, namesrv: u16, broker: u16) -> ChildProcess {
    common::cluster::start_standalone(dir, namesrv, broker, "brokerName=broker-a\ncompactionScheduleInternal=1000\ncompactionMappedFileSize=65536\ncompactionCqMappedFileSize=4600\n")
}

/// Sends (retrying while the broker starts) and returns the answer's code and remark.
async fn send(client: &RemotingClient, addr: &str, body: &str, key: Option<&str>) -> (i32, Option<String>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let properties: Vec<(&str, &str)> = key.map(|k| vec![("KEYS", k)]).unwrap_or_default();
    loop {
        match client.invoke(addr, send_request(TOPIC, 0, body.as_bytes(), &properties), T).await {
            Ok(r) => return (r.code, r.remark),
            Err(e) => {
                assert!(Instant::now() < deadline, "broker not answering: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// (queue offset, body) of everything a consumer reads from offset 0.
async fn view(client: &RemotingClient, addr: &str) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    let mut offset = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = match client.invoke(addr, pull_request(TOPIC, 0, offset, "*", 0), T).await {
            Ok(r) => r,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(e) => panic!("pull: {e}"),
        };
        match r.code {
            response_code::SUCCESS => {
                for m in StoredMessage::decode_all(&r.body).unwrap() {
                    out.push((m.queue_offset, String::from_utf8(m.body.to_vec()).unwrap()));
                }
                offset = r.decode_header::<PullMessageResponseHeader>().unwrap().next_begin_offset;
            }
            response_code::PULL_NOT_FOUND => return out,
            response_code::PULL_RETRY_IMMEDIATELY | response_code::PULL_OFFSET_MOVED => {
                offset = r.decode_header::<PullMessageResponseHeader>().unwrap().next_begin_offset;
            }
            code => panic!("pull answered {code}: {:?}", r.remark),
        }
        assert!(Instant::now() < deadline, "pulls never reached the end");
    }
}

/// The view's invariants whatever runs happened: offsets strictly increase, every message is
/// one that was sent, and every key's newest acknowledged version is there.
fn check(view: &[(i64, String)], newest: &BTreeMap<String, usize>) {
    for pair in view.windows(2) {
        assert!(pair[0].0 < pair[1].0, "offsets out of order or repeated: {pair:?}");
    }
    for (key, version) in newest {
        let body = format!("{key}-v{version}");
        assert!(view.iter().any(|(_, b)| *b == body), "{body} (the newest) is missing");
    }
    for (_, body) in view {
        let (key, version) = body.split_once("-v").expect("a sent body");
        assert!(version.parse::<usize>().unwrap() <= newest[key], "{body} was never sent");
    }
}

#[test]
fn a_compaction_topic_keeps_the_newest_message_per_key_through_sigkills() {
    let dir = tempfile::tempdir().unwrap();
    let (namesrv_port, broker_port) = (free_port(), free_broker_port());
    let addr = format!("127.0.0.1:{broker_port}");
    let mut server = start(dir.path(), namesrv_port, broker_port);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let client = RemotingClient::new(ClientConfig::default());
    let mut newest: BTreeMap<String, usize> = BTreeMap::new();
    rt.block_on(async {
        let admin = AdminClient::new(&format!("127.0.0.1:{namesrv_port}"));
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Err(e) = admin.update_topic(&addr, &TopicConfig::new(TOPIC, 1, 1), "+cleanup.policy=COMPACTION").await
        {
            assert!(Instant::now() < deadline, "topic not created: {e}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (code, remark) = send(&client, &addr, "no key", None).await;
        assert_eq!(code, response_code::MESSAGE_ILLEGAL);
        assert_eq!(remark.as_deref(), Some("Required message key is missing"));
    });
    let mut killed_mid_run = 0;
    for round in 0..4usize {
        rt.block_on(async {
            for version in round * 50..(round + 1) * 50 {
                for k in 0..KEYS {
                    let key = format!("k{k}");
                    let (code, remark) = send(&client, &addr, &format!("{key}-v{version}"), Some(&key)).await;
                    assert_eq!(code, response_code::SUCCESS, "{remark:?}");
                    newest.insert(key, version);
                }
            }
        });
        // Runs start every second; kill at some moment of one.
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        std::thread::sleep(Duration::from_millis(u64::from(nanos % 1_500)));
        server.0.kill().unwrap();
        server.0.wait().unwrap();
        let output = dir.path().join(format!("data/store/compaction/compactionLog/{TOPIC}/0/compacting"));
        killed_mid_run += usize::from(output.exists());
        server = start(dir.path(), namesrv_port, broker_port);
        rt.block_on(async {
            let seen = view(&client, &addr).await;
            check(&seen, &newest);
        });
    }
    println!("{killed_mid_run} of 4 kills left a compaction run's output behind");
    // Runs go on after the restarts: the view becomes exactly the newest message per key.
    rt.block_on(async {
        let expected: Vec<String> = {
            let mut by_offset: Vec<_> = newest.iter().map(|(k, v)| format!("{k}-v{v}")).collect();
            by_offset.sort_by_key(|b| {
                let (k, v) = b.split_once("-v").unwrap();
                (v.parse::<usize>().unwrap(), k[1..].parse::<usize>().unwrap())
            });
            by_offset
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let seen = view(&client, &addr).await;
            check(&seen, &newest);
            let bodies: Vec<String> = seen.into_iter().map(|(_, b)| b).collect();
            if bodies == expected {
                break;
            }
            assert!(Instant::now() < deadline, "never compacted: {} messages, want {}", bodies.len(), expected.len());
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    assert!(dir.path().join("data/store/compaction/position-checkpoint").is_file());
}
