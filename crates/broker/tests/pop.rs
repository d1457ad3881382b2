//! POP consumption over real loopback TCP, broker in process: pop, ack, invisible time and
//! revive through the timer wheel, change of invisible time, batch ack, dead letters, peek,
//! exclusive delivery within the invisible time, filters, queue id -1, FIFO pop, long polling,
//! NOTIFICATION, QUERY_ASSIGNMENT and bad input. Windows are wide: the machine is shared.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ferromq_protocol::body::{
    BatchAck, BatchAckMessageRequestBody, JsonBody, MessageRequestMode, QueryAssignmentRequestBody,
    QueryAssignmentResponseBody, SetMessageRequestModeRequestBody, SubscriptionGroupConfig,
};
use ferromq_protocol::header::*;
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::pop::{parse_msg_offset_info, parse_start_offset_info, ExtraInfo, RetryFlag};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{consumer_heartbeat, send_request, LocalCluster};

const T: Duration = Duration::from_secs(30);

fn fast_pop(s: &mut ferromq_broker::BrokerSettings) {
    s.store.timer_precision_ms = 100;
    s.store.timer_flush_interval_ms = 100;
    s.broker.revive_interval = 100;
    s.broker.enable_property_filter = true;
}

/// A popped message with the extra info the Java client would build for it.
struct Popped {
    msg: StoredMessage,
    extra: ExtraInfo,
}

impl Popped {
    /// The topic an ack names: the retry topic for a retried message.
    fn ack_topic(&self, topic: &str, group: &str) -> String {
        self.extra.retry_flag.real_topic(topic, group)
    }
}

fn pop_request(topic: &str, group: &str, queue_id: i32, max: i32, invisible_ms: i64, poll_ms: i64) -> RemotingCommand {
    RemotingCommand::request(request_code::POP_MESSAGE).with_header(&PopMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        max_msg_nums: max,
        invisible_time: invisible_ms,
        poll_time: poll_ms,
        born_time: 0,
        init_mode: 0,
        exp_type: None,
        exp: None,
        order: None,
        attempt_id: None,
        broker_name: None,
    })
}

/// Decodes a pop response as `MQClientAPIImpl#processPopResponse` does.
fn decode_pop(r: &RemotingCommand) -> Vec<Popped> {
    if r.code != response_code::SUCCESS {
        return Vec::new();
    }
    let h: PopMessageResponseHeader = r.decode_header().unwrap();
    let starts = parse_start_offset_info(h.start_offset_info.as_deref().unwrap_or("")).unwrap();
    let offsets = parse_msg_offset_info(h.msg_offset_info.as_deref().unwrap_or("")).unwrap();
    assert!(!offsets.is_empty());
    let broker_name = "broker-a".to_owned();
    StoredMessage::decode_all(&r.body)
        .unwrap()
        .into_iter()
        .map(|msg| {
            // A retried message carries the broker's POP_CK, whose flag names the retry topic.
            let flag =
                msg.property("POP_CK").map(|ck| ExtraInfo::parse(ck).unwrap().retry_flag).unwrap_or(RetryFlag::Normal);
            let key = format!("{}@{}", flag.as_str(), msg.queue_id);
            let extra = ExtraInfo {
                ck_queue_offset: starts[&key],
                pop_time: h.pop_time,
                invisible_time: h.invisible_time,
                revive_qid: h.revive_qid,
                retry_flag: flag,
                broker_name: broker_name.clone(),
                queue_id: Some(msg.queue_id),
                queue_offset: Some(msg.queue_offset),
                commit_log_offset: None,
            };
            assert!(offsets[&key].contains(&msg.queue_offset));
            Popped { msg, extra }
        })
        .collect()
}

async fn send(client: &RemotingClient, addr: &str, topic: &str, queue_id: i32, body: &str, tags: &str) {
    let r = client
        .invoke(addr, send_request(topic, queue_id, body.as_bytes(), &[("TAGS", tags), ("color", tags)]), T)
        .await
        .unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
}

/// Waits until `n` messages of `topic` are dispatched to its consume queues (a send's answer
/// comes before its dispatch; a pop reads only what is dispatched).
async fn wait_dispatched(client: &RemotingClient, addr: &str, topic: &str, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut total = 0;
        for queue_id in 0..16 {
            let req = RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&GetMaxOffsetRequestHeader {
                topic: topic.into(),
                queue_id,
                ..Default::default()
            });
            let r = client.invoke(addr, req, T).await.unwrap();
            if r.code == response_code::SUCCESS {
                total += r.decode_header::<OffsetResponseHeader>().unwrap().offset;
            }
        }
        if total >= n {
            return;
        }
        assert!(Instant::now() < deadline, "only {total} of {n} messages dispatched");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn pop(client: &RemotingClient, addr: &str, req: RemotingCommand) -> (RemotingCommand, Vec<Popped>) {
    let r = client.invoke(addr, req, T).await.unwrap();
    let popped = decode_pop(&r);
    (r, popped)
}

async fn ack(client: &RemotingClient, addr: &str, topic: &str, group: &str, p: &Popped) -> RemotingCommand {
    let req = RemotingCommand::request(request_code::ACK_MESSAGE).with_header(&AckMessageRequestHeader {
        consumer_group: group.into(),
        topic: p.ack_topic(topic, group),
        queue_id: p.msg.queue_id,
        extra_info: p.extra.render(),
        offset: p.msg.queue_offset,
        broker_name: None,
    });
    client.invoke(addr, req, T).await.unwrap()
}

/// Pops until `want` messages came back or `within` passed.
async fn pop_until(
    client: &RemotingClient,
    addr: &str,
    topic: &str,
    group: &str,
    want: usize,
    within: Duration,
) -> Vec<Popped> {
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    while out.len() < want && Instant::now() < deadline {
        let (_, got) = pop(client, addr, pop_request(topic, group, -1, 32, 60_000, 500)).await;
        out.extend(got);
    }
    out
}

fn bodies(p: &[Popped]) -> BTreeSet<String> {
    p.iter().map(|p| String::from_utf8(p.msg.body.to_vec()).unwrap()).collect()
}

fn buffered(s: &mut ferromq_broker::BrokerSettings) {
    fast_pop(s);
    s.broker.enable_pop_buffer_merge = true;
    s.broker.pop_ck_stay_buffer_time = 300;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unacked_messages_come_back_after_their_invisible_time() {
    unacked_messages_come_back(fast_pop).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_checkpoint_buffer_unacked_messages_come_back_and_acked_ones_do_not() {
    unacked_messages_come_back(buffered).await;
}

async fn unacked_messages_come_back(tweak: fn(&mut ferromq_broker::BrokerSettings)) {
    let c = LocalCluster::start(tweak).await;
    let client = RemotingClient::new(ClientConfig::default());
    let addr = c.broker_addr.clone();
    for i in 0..10 {
        send(&client, &addr, "PopT", i % 4, &format!("m{i}"), "a").await;
    }
    wait_dispatched(&client, &addr, "PopT", 10).await;
    let (r, got) = pop(&client, &addr, pop_request("PopT", "G1", -1, 32, 2_000, 0)).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(got.len(), 10, "queue id -1 reads every queue");
    let h: PopMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(h.invisible_time, 2_000);
    assert_eq!(h.rest_num, 0);
    // Hidden: a second pop finds nothing.
    let (again, none) = pop(&client, &addr, pop_request("PopT", "G1", -1, 32, 2_000, 0)).await;
    assert!(none.is_empty());
    assert_eq!(again.code, response_code::POLLING_TIMEOUT);
    let (acked, unacked) = got.split_at(5);
    for p in acked {
        let r = ack(&client, &addr, "PopT", "G1", p).await;
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
    // Popped and not acked is not consumed: the group's lag counts the five in flight.
    let stats = RemotingCommand::request(request_code::GET_CONSUME_STATS).with_header(&GetConsumeStatsRequestHeader {
        consumer_group: "G1".into(),
        topic: Some("PopT".into()),
        topic_list: None,
    });
    let r = client.invoke(&addr, stats, T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let stats = ferromq_protocol::body::ConsumeStats::decode(&r.body).unwrap();
    assert_eq!(stats.total_diff(), 5, "in-flight messages show as lag");
    let back = pop_until(&client, &addr, "PopT", "G1", 5, Duration::from_secs(20)).await;
    assert_eq!(bodies(&back), bodies(unacked), "exactly the unacknowledged ones come back");
    // An ack of a message already revived (its old receipt) matches nothing and is answered
    // as Java answers it; the retried copy still needs its own ack.
    for p in unacked {
        let r = ack(&client, &addr, "PopT", "G1", p).await;
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
    for p in &back {
        assert_eq!(p.msg.reconsume_times, 1);
        assert_eq!(p.msg.topic, "PopT", "served under the original topic");
        assert_eq!(p.extra.retry_flag, RetryFlag::RetryV1);
        let r = ack(&client, &addr, "PopT", "G1", p).await;
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
    // Acknowledged retries stay acknowledged.
    let after = pop_until(&client, &addr, "PopT", "G1", 1, Duration::from_millis(3_500)).await;
    assert!(after.is_empty(), "acked messages came back: {:?}", bodies(&after));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_invisible_time_extends_and_shortens_and_batch_ack_acks() {
    change_invisible_and_batch_ack(fast_pop).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_checkpoint_buffer_change_invisible_time_and_batch_ack_work() {
    change_invisible_and_batch_ack(buffered).await;
}

async fn change_invisible_and_batch_ack(tweak: fn(&mut ferromq_broker::BrokerSettings)) {
    let c = LocalCluster::start(tweak).await;
    let client = RemotingClient::new(ClientConfig::default());
    let addr = c.broker_addr.clone();
    for i in 0..6 {
        send(&client, &addr, "PopC", 0, &format!("m{i}"), "a").await;
    }
    wait_dispatched(&client, &addr, "PopC", 6).await;
    let (_, got) = pop(&client, &addr, pop_request("PopC", "G2", 0, 6, 1_500, 0)).await;
    assert_eq!(got.len(), 6);
    let change = |p: &Popped, invisible: i64| {
        RemotingCommand::request(request_code::CHANGE_MESSAGE_INVISIBLETIME).with_header(
            &ChangeInvisibleTimeRequestHeader {
                consumer_group: "G2".into(),
                topic: "PopC".into(),
                queue_id: 0,
                extra_info: p.extra.render(),
                offset: p.msg.queue_offset,
                invisible_time: invisible,
                broker_name: None,
            },
        )
    };
    // m0: extended to a minute; m1: shortened; m2..m5: batch-acked.
    let r = client.invoke(&addr, change(&got[0], 60_000), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let new_header: ChangeInvisibleTimeResponseHeader = r.decode_header().unwrap();
    assert_eq!(new_header.invisible_time, 60_000);
    let r = client.invoke(&addr, change(&got[1], 200), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    let mut batch = BatchAck {
        consumer_group: "G2".into(),
        invisible_time: 1_500,
        pop_time: got[2].extra.pop_time,
        queue_id: 0,
        retry: "0".into(),
        revive_queue_id: got[2].extra.revive_qid,
        start_offset: got[2].extra.ck_queue_offset,
        topic: "PopC".into(),
        ..BatchAck::default()
    };
    let indexes: Vec<u32> = got[2..].iter().map(|p| (p.msg.queue_offset - batch.start_offset) as u32).collect();
    batch.set_acked_indexes(&indexes);
    let body = BatchAckMessageRequestBody { acks: vec![batch], broker_name: Some("broker-a".into()) };
    let r = client
        .invoke(&addr, RemotingCommand::request(request_code::BATCH_ACK_MESSAGE).with_body(body.encode()), T)
        .await
        .unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let back = pop_until(&client, &addr, "PopC", "G2", 2, Duration::from_secs(8)).await;
    assert_eq!(bodies(&back), BTreeSet::from(["m1".to_owned()]), "only the shortened one is back");
    // An empty batch is refused.
    let empty = BatchAckMessageRequestBody::default();
    let r = client
        .invoke(&addr, RemotingCommand::request(request_code::BATCH_ACK_MESSAGE).with_body(empty.encode()), T)
        .await
        .unwrap();
    assert_eq!(r.code, response_code::NO_MESSAGE);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_never_acked_lands_in_the_dead_letter_topic() {
    let c = LocalCluster::start(fast_pop).await;
    let client = RemotingClient::new(ClientConfig::default());
    let addr = c.broker_addr.clone();
    let group =
        SubscriptionGroupConfig { group_name: "G3".into(), retry_max_times: 1, ..SubscriptionGroupConfig::default() };
    let r = client
        .invoke(
            &addr,
            RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(group.encode()),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    send(&client, &addr, "PopD", 0, "doomed", "a").await;
    let (_, first) = pop(&client, &addr, pop_request("PopD", "G3", -1, 32, 300, 2_000)).await;
    assert_eq!(first.len(), 1);
    // Popped with a short invisible time and never acked: back once (reconsume 1), then dead.
    let mut seen = vec![first[0].msg.reconsume_times];
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && seen.len() < 3 {
        let (_, got) = pop(&client, &addr, pop_request("PopD", "G3", -1, 32, 300, 300)).await;
        seen.extend(got.iter().map(|p| p.msg.reconsume_times));
        let dlq = client.invoke(&addr, ferromq_testkit::pull_request("%DLQ%G3", 0, 0, "*", 0), T).await.unwrap();
        if dlq.code == response_code::SUCCESS {
            let dead = StoredMessage::decode_all(&dlq.body).unwrap();
            assert_eq!(&dead[0].body[..], b"doomed");
            assert_eq!(dead[0].property("DLQ_ORIGIN_TOPIC"), Some("PopD"));
            assert_eq!(seen, vec![0, 1], "delivered 1 + retryMaxTimes times");
            c.stop().await;
            return;
        }
    }
    panic!("never reached the dead-letter topic; deliveries {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peek_does_not_hide_and_two_poppers_never_share_a_message() {
    let c = LocalCluster::start(fast_pop).await;
    let client = RemotingClient::new(ClientConfig::default());
    let other = RemotingClient::new(ClientConfig::default());
    let addr = c.broker_addr.clone();
    for i in 0..200 {
        send(&client, &addr, "PopX", i % 4, &format!("m{i}"), "a").await;
    }
    wait_dispatched(&client, &addr, "PopX", 200).await;
    let peek = RemotingCommand::request(request_code::PEEK_MESSAGE).with_header(&PeekMessageRequestHeader {
        topic: "PopX".into(),
        queue_id: 0,
        max_msg_nums: 5,
        consumer_group: "G4".into(),
        broker_name: None,
    });
    for _ in 0..2 {
        let r = client.invoke(&addr, peek.clone(), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS);
        assert_eq!(StoredMessage::decode_all(&r.body).unwrap().len(), 5, "peek takes nothing away");
    }
    let (a, b) = tokio::join!(
        pop_until(&client, &addr, "PopX", "G4", 100, Duration::from_secs(10)),
        pop_until(&other, &addr, "PopX", "G4", 100, Duration::from_secs(10)),
    );
    let (ba, bb) = (bodies(&a), bodies(&b));
    assert_eq!(ba.len() + bb.len(), 200, "every message once: {} + {}", ba.len(), bb.len());
    assert!(ba.is_disjoint(&bb));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_and_sql92_filters_apply_and_skip_the_rest() {
    let c = LocalCluster::start(fast_pop).await;
    let client = RemotingClient::new(ClientConfig::default());
    let addr = c.broker_addr.clone();
    for (i, tag) in ["red", "blue", "red", "green"].iter().enumerate() {
        send(&client, &addr, "PopF", 0, &format!("{tag}{i}"), tag).await;
    }
    let with = |group: &str, exp_type: &str, exp: &str| {
        let mut r = pop_request("PopF", group, 0, 32, 60_000, 0);
        r.ext_fields.insert("expType".into(), exp_type);
        r.ext_fields.insert("exp".into(), exp);
        r
    };
    // Pops until two came (a send's dispatch may still be on its way), then once more.
    let pop_all = |req: RemotingCommand| {
        let (client, addr) = (&client, &addr);
        async move {
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(5);
            while got.len() < 2 && Instant::now() < deadline {
                got.extend(pop(client, addr, req.clone()).await.1);
            }
            got.extend(pop(client, addr, req).await.1);
            got
        }
    };
    let tagged = pop_all(with("GT", "TAG", "red")).await;
    assert_eq!(bodies(&tagged), BTreeSet::from(["red0".to_owned(), "red2".to_owned()]));
    assert_eq!(tagged.len(), 2);
    let sql = pop_all(with("GS", "SQL92", "color = 'green' OR color = 'blue'")).await;
    assert_eq!(bodies(&sql), BTreeSet::from(["blue1".to_owned(), "green3".to_owned()]));
    assert_eq!(sql.len(), 2);
    let (bad, _) = pop(&client, &addr, with("GS", "SQL92", "color = ")).await;
    assert_eq!(bad.code, response_code::SUBSCRIPTION_PARSE_FAILED);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polling_pop_and_notification_are_woken_by_a_send() {
    let c = LocalCluster::start(fast_pop).await;
    let client = RemotingClient::new(ClientConfig::default());
    let addr = c.broker_addr.clone();
    send(&client, &addr, "PopL", 0, "first", "a").await;
    let _ = pop_until(&client, &addr, "PopL", "GL", 1, Duration::from_secs(5)).await;
    let started = Instant::now();
    let parked = {
        let client = RemotingClient::new(ClientConfig::default());
        let addr = addr.clone();
        tokio::spawn(async move { pop(&client, &addr, pop_request("PopL", "GL", -1, 32, 60_000, 15_000)).await })
    };
    // POLLING_INFO sees the parked pop.
    let info = RemotingCommand::request(request_code::POLLING_INFO).with_header(&PollingInfoRequestHeader {
        consumer_group: "GL".into(),
        topic: "PopL".into(),
        queue_id: -1,
        broker_name: None,
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = client.invoke(&addr, info.clone(), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        if r.decode_header::<PollingInfoResponseHeader>().unwrap().polling_num == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "pop never parked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    send(&client, &addr, "PopL", 2, "wake", "a").await;
    let (r, got) = parked.await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(bodies(&got), BTreeSet::from(["wake".to_owned()]));
    assert!(started.elapsed() < Duration::from_secs(14), "woken by the send, not by the poll timeout");

    let notification = |poll: i64| {
        RemotingCommand::request(request_code::NOTIFICATION).with_header(&NotificationRequestHeader {
            consumer_group: "GL".into(),
            topic: "PopL".into(),
            queue_id: -1,
            poll_time: poll,
            born_time: 0,
            order: None,
            attempt_id: None,
            broker_name: None,
        })
    };
    let r = client.invoke(&addr, notification(0), T).await.unwrap();
    assert!(!r.decode_header::<NotificationResponseHeader>().unwrap().has_msg);
    let waiting = {
        let client = RemotingClient::new(ClientConfig::default());
        let addr = addr.clone();
        let req = notification(10_000);
        tokio::spawn(async move { client.invoke(&addr, req, T).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    send(&client, &addr, "PopL", 1, "ding", "a").await;
    let r = waiting.await.unwrap();
    assert!(r.decode_header::<NotificationResponseHeader>().unwrap().has_msg);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_pop_keeps_order_and_blocks_the_queue_until_acked() {
    let c = LocalCluster::start(fast_pop).await;
    let client = RemotingClient::new(ClientConfig::default());
    let addr = c.broker_addr.clone();
    for i in 0..4 {
        send(&client, &addr, "PopO", 0, &format!("o{i}"), "a").await;
    }
    wait_dispatched(&client, &addr, "PopO", 4).await;
    let fifo = |attempt: &str, max: i32, invisible: i64| {
        let mut r = pop_request("PopO", "GO", 0, max, invisible, 0);
        r.ext_fields.insert("order".into(), "true");
        r.ext_fields.insert("attemptId".into(), attempt);
        r
    };
    let (r, first) = pop(&client, &addr, fifo("a1", 2, 1_000)).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(first.iter().map(|p| p.msg.queue_offset).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(first[0].extra.revive_qid, 999);
    let (_, blocked) = pop(&client, &addr, fifo("a2", 2, 1_000)).await;
    assert!(blocked.is_empty(), "the queue is blocked while its batch is out");
    // Not acked: after the invisible time the same batch comes again, in order.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let (r, again) = pop(&client, &addr, fifo("a3", 2, 60_000)).await;
    assert_eq!(again.iter().map(|p| p.msg.queue_offset).collect::<Vec<_>>(), [0, 1], "{:?}", r.remark);
    let h: PopMessageResponseHeader = r.decode_header().unwrap();
    assert!(h.order_count_info.unwrap().contains("0 qo0%0 1"), "reconsume count 1");
    for p in &again {
        let r = ack(&client, &addr, "PopO", "GO", p).await;
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
    let (_, next) = pop(&client, &addr, fifo("a4", 2, 60_000)).await;
    assert_eq!(next.iter().map(|p| p.msg.queue_offset).collect::<Vec<_>>(), [2, 3]);
    // Restart: the batch still blocks the queue, and acks still land.
    let mut c = c;
    c.restart_broker().await;
    let addr = c.broker_addr.clone();
    let client = RemotingClient::new(ClientConfig::default());
    let (_, blocked) = pop(&client, &addr, fifo("a5", 2, 60_000)).await;
    assert!(blocked.is_empty(), "order info survives a restart");
    for p in &next {
        let r = ack(&client, &addr, "PopO", "GO", p).await;
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
    send(&client, &addr, "PopO", 0, "o4", "a").await;
    wait_dispatched(&client, &addr, "PopO", 5).await;
    let (_, last) = pop(&client, &addr, fifo("a6", 2, 60_000)).await;
    assert_eq!(bodies(&last), BTreeSet::from(["o4".to_owned()]));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_assignment_follows_the_request_mode() {
    let c = LocalCluster::start(fast_pop).await;
    let client = RemotingClient::new(ClientConfig::default());
    let addr = c.broker_addr.clone();
    send(&client, &addr, "PopA", 0, "x", "a").await;
    c.wait_registered("PopA").await;
    // One connection per client, as real clients have.
    let consumers = [RemotingClient::new(ClientConfig::default()), RemotingClient::new(ClientConfig::default())];
    for (cid, consumer) in ["c1", "c2"].iter().zip(&consumers) {
        let hb = consumer_heartbeat(cid, "GA", &["PopA"]);
        let r = consumer
            .invoke(&addr, RemotingCommand::request(request_code::HEART_BEAT).with_body(hb.encode()), T)
            .await
            .unwrap();
        assert_eq!(r.code, response_code::SUCCESS);
    }
    let query = |cid: &str| {
        let body = QueryAssignmentRequestBody {
            client_id: cid.into(),
            consumer_group: "GA".into(),
            strategy_name: "AVG".into(),
            topic: "PopA".into(),
            ..QueryAssignmentRequestBody::default()
        };
        RemotingCommand::request(request_code::QUERY_ASSIGNMENT).with_body(body.encode())
    };
    let assigned = |r: RemotingCommand| {
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        QueryAssignmentResponseBody::decode(&r.body).unwrap().message_queue_assignments.unwrap()
    };
    let queues = c.wait_registered("PopA").await.queue_datas[0].read_queue_nums as usize;
    let pull1 = assigned(client.invoke(&addr, query("c1"), T).await.unwrap());
    let pull2 = assigned(client.invoke(&addr, query("c2"), T).await.unwrap());
    assert_eq!(pull1.len() + pull2.len(), queues, "PULL: the queues shared out");
    assert!(pull1.len().abs_diff(pull2.len()) <= 1);
    assert!(pull1.iter().chain(&pull2).all(|a| a.mode == MessageRequestMode::Pull));
    let ids1: BTreeSet<i32> = pull1.iter().map(|a| a.message_queue.queue_id).collect();
    assert!(pull2.iter().all(|a| !ids1.contains(&a.message_queue.queue_id)));
    let set = SetMessageRequestModeRequestBody {
        consumer_group: "GA".into(),
        mode: MessageRequestMode::Pop,
        pop_share_queue_num: 0,
        topic: "PopA".into(),
    };
    let r = client
        .invoke(&addr, RemotingCommand::request(request_code::SET_MESSAGE_REQUEST_MODE).with_body(set.encode()), T)
        .await
        .unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let popped = assigned(client.invoke(&addr, query("c2"), T).await.unwrap());
    assert_eq!(popped.len(), 1, "POP: one every-queue queue per broker");
    let only = popped.iter().next().unwrap();
    assert_eq!((only.mode, only.message_queue.queue_id), (MessageRequestMode::Pop, -1));
    let retry = SetMessageRequestModeRequestBody { topic: "%RETRY%GA".into(), ..set };
    let r = client
        .invoke(&addr, RemotingCommand::request(request_code::SET_MESSAGE_REQUEST_MODE).with_body(retry.encode()), T)
        .await
        .unwrap();
    assert_eq!(r.code, response_code::NO_PERMISSION);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pop_input_gets_clear_codes_and_the_broker_keeps_serving() {
    let c = LocalCluster::start(fast_pop).await;
    let client = RemotingClient::new(ClientConfig::default());
    let addr = c.broker_addr.clone();
    send(&client, &addr, "PopB", 0, "x", "a").await;
    let code = |r: RemotingCommand| (r.code, r.remark.unwrap_or_default());
    let (too_many, _) = pop(&client, &addr, pop_request("PopB", "GB", -1, 33, 1_000, 0)).await;
    assert_eq!(too_many.code, response_code::INVALID_PARAMETER);
    let (no_topic, _) = pop(&client, &addr, pop_request("NoSuchTopic", "GB", -1, 1, 1_000, 0)).await;
    assert_eq!(no_topic.code, response_code::TOPIC_NOT_EXIST);
    let (bad_queue, _) = pop(&client, &addr, pop_request("PopB", "GB", 99, 1, 1_000, 0)).await;
    assert_eq!(bad_queue.code, response_code::INVALID_PARAMETER);
    let mut missing = pop_request("PopB", "GB", -1, 1, 1_000, 0);
    missing.ext_fields.remove("invisibleTime");
    let (c1, remark) = code(client.invoke(&addr, missing, T).await.unwrap());
    assert_eq!(c1, response_code::SYSTEM_ERROR);
    assert!(remark.contains("invisibleTime"), "{remark}");
    let ack_with = |extra: &str, offset: i64| {
        RemotingCommand::request(request_code::ACK_MESSAGE).with_header(&AckMessageRequestHeader {
            consumer_group: "GB".into(),
            topic: "PopB".into(),
            queue_id: 0,
            extra_info: extra.into(),
            offset,
            broker_name: None,
        })
    };
    let (c2, remark) = code(client.invoke(&addr, ack_with("garbage", 0), T).await.unwrap());
    assert_eq!(c2, response_code::INVALID_PARAMETER, "{remark}");
    assert!(remark.contains("malformed"), "{remark}");
    let (c3, _) = code(client.invoke(&addr, ack_with("0 1 2 77 0 broker-a 0 0", 0), T).await.unwrap());
    assert_eq!(c3, response_code::INVALID_PARAMETER, "revive queue out of range");
    let (c4, _) = code(client.invoke(&addr, ack_with("0 1 2 0 0 broker-a 0 0", 500), T).await.unwrap());
    assert_eq!(c4, response_code::NO_MESSAGE, "offset past the queue");
    let fifo_unknown = client.invoke(&addr, ack_with("0 1 2 999 0 broker-a 0 0", 0), T).await.unwrap();
    assert_eq!(fifo_unknown.code, response_code::MESSAGE_ILLEGAL, "FIFO ack of a batch never popped");
    let bad_batch = RemotingCommand::request(request_code::BATCH_ACK_MESSAGE).with_body(&b"{not json"[..]);
    assert_eq!(client.invoke(&addr, bad_batch, T).await.unwrap().code, response_code::SYSTEM_ERROR);
    // Still serving.
    let got = pop_until(&client, &addr, "PopB", "GB", 1, Duration::from_secs(5)).await;
    assert_eq!(bodies(&got), BTreeSet::from(["x".to_owned()]));
    c.stop().await;
}

/// A light queue is popped like a topic of one queue: what comes back names its offsets in
/// the light queue (the record's own are its topic's, so the client reads them from
/// INNER_MULTI_QUEUE_OFFSET as Java's does), acks by them hide the messages for good, and an
/// unacked one comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_light_queue_pops_acks_and_revives() {
    let c = LocalCluster::start(|s| {
        fast_pop(s);
        s.store.enable_lmq = true;
        s.store.enable_multi_dispatch = true;
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    let addr = c.broker_addr.clone();
    let (lmq, group) = ("%LMQ%pop", "%LMQ%poppers");
    for i in 0..3 {
        let req = send_request("LmqPopParent", 0, format!("m{i}").as_bytes(), &[("INNER_MULTI_DISPATCH", lmq)]);
        let r = client.invoke(&addr, req, T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
    wait_dispatched(&client, &addr, lmq, 3).await;
    let r = client.invoke(&addr, pop_request(lmq, group, -1, 32, 2_000, 500), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let h: PopMessageResponseHeader = r.decode_header().unwrap();
    let offsets = parse_msg_offset_info(h.msg_offset_info.as_deref().unwrap_or("")).unwrap();
    assert_eq!(offsets["0@0"], [0, 1, 2], "offsets in the light queue");
    let starts = parse_start_offset_info(h.start_offset_info.as_deref().unwrap_or("")).unwrap();
    let msgs = StoredMessage::decode_all(&r.body).unwrap();
    assert_eq!(msgs.len(), 3);
    for (i, msg) in msgs.iter().enumerate().take(2) {
        let offset: i64 = msg.property("INNER_MULTI_QUEUE_OFFSET").unwrap().parse().unwrap();
        assert_eq!(offset, i as i64);
        let extra = ExtraInfo {
            ck_queue_offset: starts["0@0"],
            pop_time: h.pop_time,
            invisible_time: h.invisible_time,
            revive_qid: h.revive_qid,
            retry_flag: RetryFlag::Normal,
            broker_name: "broker-a".into(),
            queue_id: Some(0),
            queue_offset: Some(offset),
            commit_log_offset: None,
        };
        let req = RemotingCommand::request(request_code::ACK_MESSAGE).with_header(&AckMessageRequestHeader {
            consumer_group: group.into(),
            topic: lmq.into(),
            queue_id: 0,
            extra_info: extra.render(),
            offset,
            broker_name: None,
        });
        let a = client.invoke(&addr, req, T).await.unwrap();
        assert_eq!(a.code, response_code::SUCCESS, "{:?}", a.remark);
    }
    // m2 was not acked: it comes back after its invisible time (through the retry topic);
    // m0 and m1 do not.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut again = Vec::new();
    while again.is_empty() && Instant::now() < deadline {
        let r = client.invoke(&addr, pop_request(lmq, group, -1, 32, 60_000, 500), T).await.unwrap();
        if r.code == response_code::SUCCESS {
            again.extend(StoredMessage::decode_all(&r.body).unwrap());
        }
    }
    let bodies: Vec<String> = again.iter().map(|m| String::from_utf8(m.body.to_vec()).unwrap()).collect();
    assert_eq!(bodies, ["m2"]);
    c.stop().await;
}
