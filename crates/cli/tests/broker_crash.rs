//! SIGKILL the standalone broker process under SYNC_FLUSH load; after a restart on the same
//! data directory every acknowledged message is pulled back. The same for delayed and timer
//! messages killed in the middle of their schedule: every acknowledged one is delivered after
//! the restart (at least once). And for transactions: killed with half messages committed,
//! rolled back and undecided, every committed one is delivered after the restart, the
//! undecided ones are checked back, and nothing rolled back is ever delivered.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferromq_protocol::header::{
    pull_sys_flag, PullMessageRequestHeader, PullMessageResponseHeader, SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
};
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{free_broker_port, free_port, ChildProcess as Standalone};

const TOPIC: &str = "CrashTopic";
const QUEUES: i32 = 4;

fn start(dir: &std::path::Path, ns_port: u16, broker_port: u16) -> Standalone {
    let conf = dir.join("broker.conf");
    let mut f = std::fs::File::create(&conf).unwrap();
    writeln!(
        f,
        "flushDiskType=SYNC_FLUSH\nmapedFileSizeCommitLog=4194304\nregisterNameServerPeriod=10000\nmessageDelayLevel=1s 2s 3s\n\
         transactionCheckInterval=500\ntransactionTimeOut=1000"
    )
    .unwrap();
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

/// SIGKILLs the standalone and waits until the process is gone.
fn sigkill(mut process: Standalone) {
    process.0.kill().unwrap();
    process.0.wait().unwrap();
}

/// Starts the standalone again on its store and ports; returns it with a client once its broker
/// takes writes.
async fn restart(dir: &std::path::Path, ns_port: u16, broker_port: u16, broker: &str) -> (Standalone, RemotingClient) {
    let process = start(dir, ns_port, broker_port);
    let client = RemotingClient::new(ClientConfig::default());
    wait_ready(&client, broker).await;
    (process, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_message_survives_sigkill_under_sync_flush() {
    let dir = tempfile::tempdir().unwrap();
    let (ns_port, broker_port) = (free_port(), free_broker_port());
    let broker = format!("127.0.0.1:{broker_port}");
    let process = start(dir.path(), ns_port, broker_port);
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
    sigkill(process);
    while senders.join_next().await.is_some() {}
    client.shutdown().await;
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 10, "the load ran ({} acks)", acked.len());

    let (_process, client) = restart(dir.path(), ns_port, broker_port, &broker).await;
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
    let (ns_port, broker_port) = (free_port(), free_broker_port());
    let broker = format!("127.0.0.1:{broker_port}");
    let process = start(dir.path(), ns_port, broker_port);
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
    sigkill(process);
    client.shutdown().await;

    let (_process, client) = restart(dir.path(), ns_port, broker_port, &broker).await;
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

/// A prepared send as the Java producer makes it (born now: the check-back ages messages by
/// their born time).
fn half_send(topic: &str, body: &str) -> RemotingCommand {
    let props = "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}txpg\u{2}WAIT\u{1}true\u{2}".to_owned();
    let h: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
        producer_group: "txpg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: QUEUES,
        queue_id: 0,
        sys_flag: ferromq_protocol::message::sysflag::TRANSACTION_PREPARED_TYPE,
        born_timestamp: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64,
        properties: Some(props),
        ..Default::default()
    }
    .into();
    RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&h).with_body(body.as_bytes().to_vec())
}

/// The producer's decision for a body: `c..` commit, `r..` roll back, `u<i>` commit when i is
/// even (decided only when the broker checks back).
fn decision(body: &str) -> i32 {
    use ferromq_protocol::message::sysflag::{TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE};
    let commit = match body.as_bytes()[0] {
        b'c' => true,
        b'r' => false,
        _ => body[1..].parse::<u32>().unwrap().is_multiple_of(2),
    };
    if commit {
        TRANSACTION_COMMIT_TYPE
    } else {
        TRANSACTION_ROLLBACK_TYPE
    }
}

fn end_request(
    group: &str,
    queue_offset: i64,
    commit_log_offset: i64,
    msg_id: &str,
    decision: i32,
    from_check: bool,
) -> RemotingCommand {
    RemotingCommand::request(request_code::END_TRANSACTION)
        .with_header(&ferromq_protocol::header::EndTransactionRequestHeader {
            topic: None,
            producer_group: group.into(),
            tran_state_table_offset: queue_offset,
            commit_log_offset,
            commit_or_rollback: decision,
            from_transaction_check: Some(from_check),
            msg_id: msg_id.into(),
            transaction_id: None,
            broker_name: None,
        })
        .into_oneway()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_survive_sigkill_with_commits_rollbacks_and_undecided_halves() {
    use ferromq_protocol::header::CheckTransactionStateRequestHeader;
    use ferromq_protocol::message::decode_offset_msg_id;
    const TX: &str = "TxCrash";
    let dir = tempfile::tempdir().unwrap();
    let (ns_port, broker_port) = (free_port(), free_broker_port());
    let broker = format!("127.0.0.1:{broker_port}");
    let process = start(dir.path(), ns_port, broker_port);

    // The producer answers check-backs on its own connection, by the message body.
    let mut d = ferromq_remoting::Dispatcher::new();
    d.register(
        request_code::CHECK_TRANSACTION_STATE,
        |conn: ferromq_remoting::Connection, req: RemotingCommand| async move {
            let h: CheckTransactionStateRequestHeader = req.decode_header().unwrap();
            let m = StoredMessage::decode_all(&req.body).unwrap().remove(0);
            let body = String::from_utf8(m.body.to_vec()).unwrap();
            let msg_id = h.msg_id.clone().unwrap_or_default();
            let end =
                end_request("txpg", h.tran_state_table_offset, h.commit_log_offset, &msg_id, decision(&body), true);
            let _ = conn.invoke_oneway(end).await;
            None
        },
    );
    let producer = Arc::new(RemotingClient::with_handler(ClientConfig::default(), Arc::new(d)));
    wait_ready(&producer, &broker).await;
    // Heartbeats keep the broker aware of the producer (also after the restart).
    let heartbeats = {
        let (producer, broker) = (producer.clone(), broker.clone());
        tokio::spawn(async move {
            let hb = ferromq_protocol::body::HeartbeatData {
                client_id: "127.0.0.1@tx-crash".into(),
                producer_data_set: vec![ferromq_protocol::body::ProducerData { group_name: "txpg".into() }],
                ..Default::default()
            };
            loop {
                let req = RemotingCommand::request(request_code::HEART_BEAT)
                    .with_body(ferromq_protocol::body::JsonBody::encode(&hb));
                let _ = producer.invoke(&broker, req, Duration::from_secs(2)).await;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };

    let mut committed = BTreeSet::new();
    let mut rolled_back = BTreeSet::new();
    for i in 0..90u32 {
        let body = match i % 3 {
            0 => format!("c{i}"),
            1 => format!("r{i}"),
            _ => format!("u{i}"),
        };
        let r = producer.invoke(&broker, half_send(TX, &body), Duration::from_secs(5)).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let h = r.decode_header::<ferromq_protocol::header::SendMessageResponseHeader>().unwrap();
        let decided = decision(&body);
        if decided == ferromq_protocol::message::sysflag::TRANSACTION_COMMIT_TYPE {
            committed.insert(body.clone());
        } else {
            rolled_back.insert(body.clone());
        }
        if !body.starts_with('u') {
            let (_, commit_log_offset) = decode_offset_msg_id(&h.msg_id).unwrap();
            producer
                .invoke_oneway(
                    &broker,
                    end_request("txpg", h.queue_offset, commit_log_offset, &h.msg_id, decided, false),
                )
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The early undecided ones are checked before the kill; the last second's only after.
    let before = pull_all(&producer, &broker, TX).await;
    sigkill(process);
    let (_process, client) = restart(dir.path(), ns_port, broker_port, &broker).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let found = loop {
        let found = pull_all(&client, &broker, TX).await;
        assert!(
            found.is_disjoint(&rolled_back),
            "rolled back messages delivered: {:?}",
            found.intersection(&rolled_back).collect::<Vec<_>>()
        );
        if committed.is_subset(&found) || Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let missing: Vec<&String> = committed.difference(&found).collect();
    assert!(missing.is_empty(), "committed transactions never delivered: {missing:?}");
    // A few more check rounds: still nothing rolled back shows up.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let found = pull_all(&client, &broker, TX).await;
    assert!(found.is_disjoint(&rolled_back));
    println!(
        "{} delivered before the kill; all {} committed delivered after the restart",
        before.len(),
        committed.len()
    );
    heartbeats.abort();
    client.shutdown().await;
    producer.shutdown().await;
}

/// Topics and subscription groups an admin created, changed and deleted, each change answered,
/// are all there after a SIGKILL right after the last answer: they were journaled, not waiting
/// for the periodic persist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_changes_to_topics_and_groups_survive_sigkill() {
    use ferromq_protocol::body::TopicConfigSerializeWrapper;
    use ferromq_protocol::body::{JsonBody, SubscriptionGroupConfig, SubscriptionGroupWrapper, TopicConfig};
    use ferromq_protocol::header::{
        CreateTopicRequestHeader, DeleteSubscriptionGroupRequestHeader, DeleteTopicRequestHeader,
    };

    let dir = tempfile::tempdir().unwrap();
    let (ns_port, broker_port) = (free_port(), free_broker_port());
    let broker = format!("127.0.0.1:{broker_port}");
    let process = start(dir.path(), ns_port, broker_port);
    let client = RemotingClient::new(ClientConfig::default());
    wait_ready(&client, &broker).await;
    let call = |req: RemotingCommand| {
        let (client, broker) = (&client, &broker);
        async move {
            let r = client.invoke(broker, req, Duration::from_secs(5)).await.unwrap();
            assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
            r
        }
    };
    const N: usize = 300;
    for i in 0..N {
        let h = CreateTopicRequestHeader {
            topic: format!("Kept{i}"),
            default_topic: "TBW102".into(),
            read_queue_nums: 2,
            write_queue_nums: 2,
            perm: 6,
            topic_filter_type: "SINGLE_TAG".into(),
            ..Default::default()
        };
        call(RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC).with_header(&h)).await;
        let mut group = SubscriptionGroupConfig::new(format!("kept_{i}"));
        group.retry_max_times = (i % 16) as i32;
        call(RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(group.encode()))
            .await;
    }
    for i in (0..N).step_by(10) {
        let h = DeleteTopicRequestHeader { topic: format!("Kept{i}") };
        call(RemotingCommand::request(request_code::DELETE_TOPIC_IN_BROKER).with_header(&h)).await;
        let h = DeleteSubscriptionGroupRequestHeader { group_name: format!("kept_{i}"), clean_offset: None };
        call(RemotingCommand::request(request_code::DELETE_SUBSCRIPTIONGROUP).with_header(&h)).await;
    }
    sigkill(process); // right after the last answer
    client.shutdown().await;

    let (_process, client) = restart(dir.path(), ns_port, broker_port, &broker).await;
    let call = |code| {
        let (client, broker) = (&client, &broker);
        async move { client.invoke(broker, RemotingCommand::request(code), Duration::from_secs(5)).await.unwrap() }
    };
    let topics = TopicConfigSerializeWrapper::decode(&call(request_code::GET_ALL_TOPIC_CONFIG).await.body).unwrap();
    let groups =
        SubscriptionGroupWrapper::decode(&call(request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG).await.body).unwrap();
    for i in 0..N {
        let deleted = i % 10 == 0;
        let topic: Option<&TopicConfig> = topics.topic_config_table.get(&format!("Kept{i}"));
        assert_eq!(topic.is_none(), deleted, "topic Kept{i}");
        let group = groups.subscription_group_table.get(&format!("kept_{i}"));
        assert_eq!(group.is_none(), deleted, "group kept_{i}");
        if let Some(g) = group {
            assert_eq!(g.retry_max_times, (i % 16) as i32, "group kept_{i} as last updated");
        }
    }
    client.shutdown().await;
}
