//! SIGKILL the standalone broker process under SYNC_FLUSH load; after a restart on the same
//! data directory every acknowledged message is pulled back. The same for delayed and timer
//! messages killed in the middle of their schedule: every acknowledged one is delivered after
//! the restart (at least once).

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferromq_protocol::header::{
    pull_sys_flag, PullMessageRequestHeader, PullMessageResponseHeader, SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
};
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};

const TOPIC: &str = "CrashTopic";
const QUEUES: i32 = 4;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Standalone(Child);

impl Drop for Standalone {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(dir: &std::path::Path, ns_port: u16, broker_port: u16) -> Standalone {
    let conf = dir.join("broker.conf");
    let mut f = std::fs::File::create(&conf).unwrap();
    writeln!(
        f,
        "flushDiskType=SYNC_FLUSH\nmapedFileSizeCommitLog=4194304\nregisterNameServerPeriod=10000\nmessageDelayLevel=1s 2s 3s"
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_ferromq"))
        .args(["standalone", "--bind", "127.0.0.1", "--data-dir"])
        .arg(dir.join("data"))
        .args(["--namesrv-port", &ns_port.to_string(), "--broker-port", &broker_port.to_string(), "-c"])
        .arg(&conf)
        .stdout(if std::env::var_os("CRASH_TEST_LOGS").is_some() { Stdio::inherit() } else { Stdio::null() })
        .stderr(if std::env::var_os("CRASH_TEST_LOGS").is_some() { Stdio::inherit() } else { Stdio::null() })
        .spawn()
        .unwrap();
    Standalone(child)
}

fn send(topic: &str, queue_id: i32, body: String) -> RemotingCommand {
    send_with(topic, queue_id, body, None)
}

fn send_with(topic: &str, queue_id: i32, body: String, properties: Option<String>) -> RemotingCommand {
    let h: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
        producer_group: "pg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: QUEUES,
        queue_id,
        born_timestamp: 1,
        properties,
        ..Default::default()
    }
    .into();
    RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&h).with_body(body.into_bytes())
}

async fn wait_ready(client: &RemotingClient, broker: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(r) = client.invoke(broker, send(TOPIC, 0, "warmup".into()), Duration::from_secs(2)).await {
            if r.code == response_code::SUCCESS {
                return;
            }
        }
        assert!(Instant::now() < deadline, "standalone did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_message_survives_sigkill_under_sync_flush() {
    let dir = tempfile::tempdir().unwrap();
    let (ns_port, broker_port) = (free_port(), free_port());
    let broker = format!("127.0.0.1:{broker_port}");
    let mut process = start(dir.path(), ns_port, broker_port);
    let client = Arc::new(RemotingClient::new(ClientConfig::default()));
    wait_ready(&client, &broker).await;

    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let mut senders = tokio::task::JoinSet::new();
    for s in 0..16 {
        let (client, broker, acked) = (client.clone(), broker.clone(), acked.clone());
        senders.spawn(async move {
            for i in 0..100_000u64 {
                let body = format!("s{s}-{i}");
                match client.invoke(&broker, send(TOPIC, s % QUEUES, body.clone()), Duration::from_secs(5)).await {
                    Ok(r) if r.code == response_code::SUCCESS => {
                        acked.lock().unwrap().insert(body);
                    }
                    _ => return,
                }
            }
        });
    }
    // Seeded by the clock; printed so a failure can be correlated with the logs.
    let kill_after =
        300 + (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_millis() % 700);
    println!("killing the broker after {kill_after} ms of load");
    tokio::time::sleep(Duration::from_millis(u64::from(kill_after))).await;
    process.0.kill().unwrap(); // SIGKILL
    process.0.wait().unwrap();
    while senders.join_next().await.is_some() {}
    client.shutdown().await;
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 10, "the load ran ({} acks)", acked.len());

    drop(process);
    let _process = start(dir.path(), ns_port, broker_port);
    let client = RemotingClient::new(ClientConfig::default());
    wait_ready(&client, &broker).await;
    let found = pull_all(&client, &broker, TOPIC).await;
    let lost: Vec<&String> = acked.difference(&found).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged messages lost, e.g. {:?}",
        lost.len(),
        lost.iter().take(5).collect::<Vec<_>>()
    );
    println!("{} acknowledged messages all recovered ({} stored)", acked.len(), found.len());
    client.shutdown().await;
}

/// Every message body of `topic`'s queues, from offset 0.
async fn pull_all(client: &RemotingClient, broker: &str, topic: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for queue_id in 0..QUEUES {
        let mut offset = 0;
        loop {
            let pull = RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&PullMessageRequestHeader {
                consumer_group: "verify".into(),
                topic: topic.into(),
                queue_id,
                queue_offset: offset,
                max_msg_nums: 32,
                sys_flag: pull_sys_flag::SUBSCRIPTION,
                subscription: Some("*".into()),
                expression_type: Some("TAG".into()),
                ..Default::default()
            });
            let r = client.invoke(broker, pull, Duration::from_secs(5)).await.unwrap();
            if r.code != response_code::SUCCESS {
                break;
            }
            for m in StoredMessage::decode_all(&r.body).expect("no torn record is served") {
                m.verify_body_crc().unwrap();
                found.insert(String::from_utf8(m.body.to_vec()).unwrap());
            }
            offset = r.decode_header::<PullMessageResponseHeader>().unwrap().next_begin_offset;
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_messages_survive_sigkill_in_the_middle_of_their_schedule() {
    const DELAYED: &str = "DelayedCrash";
    let dir = tempfile::tempdir().unwrap();
    let (ns_port, broker_port) = (free_port(), free_port());
    let broker = format!("127.0.0.1:{broker_port}");
    let mut process = start(dir.path(), ns_port, broker_port);
    let client = RemotingClient::new(ClientConfig::default());
    wait_ready(&client, &broker).await;

    // Levels 1 s, 2 s and 3 s, sent over about two seconds: when the kill comes some are
    // delivered, some due, some still waiting.
    let mut acked = BTreeSet::new();
    let began = Instant::now();
    for i in 0..300u32 {
        let level = 1 + i % 3;
        // Even: a delay level; odd: a timer-wheel delay of the same length.
        let (body, props) = if i % 2 == 0 {
            (format!("d{i}-L{level}"), format!("DELAY\u{1}{level}\u{2}WAIT\u{1}true\u{2}"))
        } else {
            (format!("t{i}-{level}s"), format!("TIMER_DELAY_MS\u{1}{}\u{2}WAIT\u{1}true\u{2}", level * 1000))
        };
        let r = client
            .invoke(&broker, send_with(DELAYED, (i % 4) as i32, body.clone(), Some(props)), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        acked.insert(body);
        tokio::time::sleep(Duration::from_millis(6)).await;
    }
    let kill_after =
        2_000 + (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_millis() % 1_000);
    println!("sent in {:?}; killing the broker {kill_after} ms after the first send", began.elapsed());
    tokio::time::sleep(Duration::from_millis(u64::from(kill_after)).saturating_sub(began.elapsed())).await;
    let before_kill = pull_all(&client, &broker, DELAYED).await.len();
    process.0.kill().unwrap(); // SIGKILL
    process.0.wait().unwrap();
    client.shutdown().await;
    drop(process);

    let _process = start(dir.path(), ns_port, broker_port);
    let client = RemotingClient::new(ClientConfig::default());
    wait_ready(&client, &broker).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let found = loop {
        let found = pull_all(&client, &broker, DELAYED).await;
        if acked.is_subset(&found) || Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let lost: Vec<&String> = acked.difference(&found).collect();
    assert!(
        lost.is_empty(),
        "{} delayed messages never delivered, e.g. {:?}",
        lost.len(),
        lost.iter().take(5).collect::<Vec<_>>()
    );
    println!("{before_kill} delivered before the kill; all {} delivered after the restart", acked.len());
    client.shutdown().await;
}
