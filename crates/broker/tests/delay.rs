//! Delayed messages by level over real loopback TCP: a DELAY send waits in
//! SCHEDULE_TOPIC_XXXX and reaches its real queue once due, progress survives a restart,
//! and consumer retries flow through the same levels. Windows have wide margins: the machine
//! is shared and noisy.

use std::time::{Duration, Instant};

use ferromq_broker::metadata::DelayOffsetSerializeWrapper;
use ferromq_protocol::header::*;
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_store::DelayLevels;
use ferromq_testkit::{pull_messages, pull_request, send_request, LocalCluster};

const T: Duration = Duration::from_secs(10);

fn short_levels(s: &mut ferromq_broker::BrokerSettings) {
    // Level 1 = 1 s, 2 = 2 s, 3 = 3 s (the highest).
    s.store.message_delay_level = DelayLevels::parse("1s 2s 3s").unwrap();
}

async fn send(client: &RemotingClient, addr: &str, topic: &str, queue_id: i32, body: &str, delay: &str) -> i64 {
    let r = client
        .invoke(addr, send_request(topic, queue_id, body.as_bytes(), &[("DELAY", delay), ("KEYS", body)]), T)
        .await
        .unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let h = r.decode_header::<SendMessageResponseHeader>().unwrap();
    assert_eq!(h.queue_id, queue_id, "the response names the queue asked for");
    h.queue_offset
}

async fn delay_offsets(client: &RemotingClient, addr: &str) -> DelayOffsetSerializeWrapper {
    let r = client.invoke(addr, RemotingCommand::request(request_code::GET_ALL_DELAY_OFFSET), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    ferromq_protocol::json::parse_lenient(&r.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_message_reaches_its_queue_after_its_level() {
    let c = LocalCluster::start(short_levels).await;
    let client = RemotingClient::new(ClientConfig::default());
    let sent_at = Instant::now();
    // Level 2 (2 s) to queue 1; the schedule queue is level - 1 = 1, its first offset 0.
    assert_eq!(send(&client, &c.broker_addr, "Later", 1, "two-seconds", "2").await, 0);
    // A level above the highest counts as the highest (3 s, schedule queue 3 - 1 = 2).
    assert_eq!(send(&client, &c.broker_addr, "Later", 1, "clamped", "99").await, 0);
    // Not visible in its real queue yet.
    let r = client.invoke(&c.broker_addr, pull_request("Later", 1, 0, "*", 0), T).await.unwrap();
    assert_ne!(r.code, response_code::SUCCESS, "delivered too early");

    let got = pull_messages(&client, &c.broker_addr, "Later", 1, 0, 1, Duration::from_secs(15)).await;
    let first_at = sent_at.elapsed();
    assert_eq!(got.len(), 1, "one message due first");
    assert!(first_at >= Duration::from_millis(1_800), "due after 2 s, delivered after {first_at:?}");
    assert!(first_at < Duration::from_secs(8), "delivered late: {first_at:?}");
    let m = &got[0];
    assert_eq!((m.topic.as_str(), m.queue_id, m.queue_offset), ("Later", 1, 0));
    assert_eq!(&m.body[..], b"two-seconds");
    // The stored properties are the scheduled message's, as Java stores them: the level
    // stays readable (MessageExt.getDelayTimeLevel()) and WAIT is the producer's.
    assert_eq!(m.property("DELAY"), Some("2"), "the level sent");
    assert_eq!(m.property("WAIT"), Some("true"), "as the producer sent it");
    assert_eq!(m.property("REAL_TOPIC"), Some("Later"), "kept, as RocketMQ does");
    assert_eq!(m.property("REAL_QID"), Some("1"));
    assert_eq!(m.property("KEYS"), Some("two-seconds"));
    assert_eq!(m.born_timestamp_ms, 1_700_000_000_000, "born time kept");

    let got = pull_messages(&client, &c.broker_addr, "Later", 1, 1, 1, Duration::from_secs(15)).await;
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].body[..], b"clamped");
    assert!(sent_at.elapsed() >= Duration::from_millis(2_800), "level 3 is 3 s");

    // Progress is visible to admin tools and slaves (GET_ALL_DELAY_OFFSET).
    let offsets = delay_offsets(&client, &c.broker_addr).await;
    assert_eq!(offsets.offset_table.get(&2), Some(&1));
    assert_eq!(offsets.offset_table.get(&3), Some(&1));
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_delays_survive_a_restart_and_delivered_ones_are_not_repeated() {
    let mut c = LocalCluster::start(short_levels).await;
    let client = RemotingClient::new(ClientConfig::default());
    // Level 1 (1 s): delivered before the restart.
    send(&client, &c.broker_addr, "Kept", 0, "early", "1").await;
    let got = pull_messages(&client, &c.broker_addr, "Kept", 0, 0, 1, Duration::from_secs(15)).await;
    assert_eq!(got.len(), 1);
    // Level 3 (3 s): still pending when the broker stops.
    for i in 0..5 {
        send(&client, &c.broker_addr, "Kept", 0, &format!("late-{i}"), "3").await;
    }
    c.restart_broker().await;
    let mut bodies = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while bodies.len() < 6 && Instant::now() < deadline {
        for m in pull_messages(&client, &c.broker_addr, "Kept", 0, bodies.len() as i64, 1, Duration::from_secs(2)).await
        {
            bodies.push(String::from_utf8(m.body.to_vec()).unwrap());
        }
    }
    let expected: Vec<String> =
        ["early"].into_iter().map(str::to_owned).chain((0..5).map(|i| format!("late-{i}"))).collect();
    assert_eq!(bodies, expected);
    // Nothing more comes: the early one was not delivered again after the restart.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let r = client.invoke(&c.broker_addr, pull_request("Kept", 0, 6, "*", 0), T).await.unwrap();
    assert_ne!(r.code, response_code::SUCCESS, "a delivered message came again");
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_wait_for_their_level_and_direct_retry_sends_overflow_to_the_dlq() {
    let c = LocalCluster::start(short_levels).await;
    let client = RemotingClient::new(ClientConfig::default());
    send(&client, &c.broker_addr, "Work", 0, "job", "0").await;
    let original = pull_messages(&client, &c.broker_addr, "Work", 0, 0, 1, T).await.remove(0);
    let back =
        RemotingCommand::request(request_code::CONSUMER_SEND_MSG_BACK).with_header(&ConsumerSendMsgBackRequestHeader {
            offset: original.physical_offset,
            group: "cg".into(),
            delay_level: 0,
            origin_msg_id: None,
            origin_topic: Some("Work".into()),
            unit_mode: None,
            max_reconsume_times: Some(16),
            broker_name: None,
        });
    let sent_back_at = Instant::now();
    let r = client.invoke(&c.broker_addr, back, T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    // First retry: level 3 + 0 = 3 (3 s here).
    let r = client.invoke(&c.broker_addr, pull_request("%RETRY%cg", 0, 0, "*", 0), T).await.unwrap();
    assert_ne!(r.code, response_code::SUCCESS, "the retry skipped its delay");
    let retried = pull_messages(&client, &c.broker_addr, "%RETRY%cg", 0, 0, 1, Duration::from_secs(15)).await;
    let waited = sent_back_at.elapsed();
    assert_eq!(retried.len(), 1);
    assert!(waited >= Duration::from_millis(2_800), "retry level 3 is 3 s, came after {waited:?}");
    assert_eq!(retried[0].reconsume_times, 1);
    assert_eq!(retried[0].property("RETRY_TOPIC"), Some("Work"));
    assert_eq!(retried[0].property("DELAY"), Some("3"), "the retry level, kept as Java keeps it");

    // The client's fallback: it sends to %RETRY%cg itself. Within the maximum: a normal retry.
    let direct = |reconsume: i32| {
        let mut req = send_request("%RETRY%cg", 0, b"fallback", &[("DELAY", "1"), ("KEYS", "fallback")]);
        let mut h = SendMessageRequestHeader::decode_for(req.code, &req.ext_fields).unwrap();
        h.reconsume_times = Some(reconsume);
        h.max_reconsume_times = Some(2);
        let v2: SendMessageRequestHeaderV2 = h.into();
        req = RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&v2).with_body(req.body.clone());
        req
    };
    let r = client.invoke(&c.broker_addr, direct(2), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let got = pull_messages(&client, &c.broker_addr, "%RETRY%cg", 0, 1, 1, Duration::from_secs(15)).await;
    assert_eq!(&got[0].body[..], b"fallback");
    // Beyond it: the dead-letter topic, at once.
    let r = client.invoke(&c.broker_addr, direct(3), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let q = RemotingCommand::request(request_code::QUERY_MESSAGE).with_header(&QueryMessageRequestHeader {
        topic: "%DLQ%cg".into(),
        key: "fallback".into(),
        max_num: 32,
        begin_timestamp: 0,
        end_timestamp: i64::MAX,
    });
    let deadline = Instant::now() + T;
    let dead = loop {
        let r = client.invoke(&c.broker_addr, q.clone(), T).await.unwrap();
        if r.code == response_code::SUCCESS {
            break StoredMessage::decode_all(&r.body).unwrap();
        }
        assert!(Instant::now() < deadline, "nothing in the DLQ");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].topic, "%DLQ%cg");
    assert_eq!(dead[0].property("DELAY"), Some("-1"), "not delayed (Java's mark)");
    client.shutdown().await;
    c.stop().await;
}
