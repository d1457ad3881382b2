//! The broker over real loopback TCP, with a real name server: send, pull, long polling,
//! offsets, heartbeats, queries, admin requests, bad input and a restart.

use std::time::{Duration, Instant};

use bytes::Bytes;
use ferromq_protocol::body::{HeartbeatData, JsonBody};
use ferromq_protocol::header::*;
use ferromq_protocol::message::{encode_batch, BatchEntry, StoredMessage};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{consumer_heartbeat, pull_request, send_request, LocalCluster};

const T: Duration = Duration::from_secs(10);

/// The in-process cluster of the testkit.
type Cluster = LocalCluster;

fn send_v2(topic: &str, queue_id: i32, body: &str, tag: &str, key: &str) -> RemotingCommand {
    send_request(topic, queue_id, body.as_bytes(), &[("TAGS", tag), ("KEYS", key)])
}

/// Pulls until messages come back: dispatch to the consume queue follows the append
/// asynchronously, so a pull right after a send may not see it yet.
/// Pulls until the answer is FOUND with at least `count` messages (dispatch to the consume
/// queue runs behind the send's answer, as in Java), or the deadline passes.
async fn pull_found(client: &RemotingClient, addr: &str, req: RemotingCommand, count: usize) -> RemotingCommand {
    let deadline = Instant::now() + T;
    loop {
        let r = client.invoke(addr, req.clone(), T).await.unwrap();
        let found =
            r.code == response_code::SUCCESS && StoredMessage::decode_all(&r.body).map_or(0, |m| m.len()) >= count;
        if found || Instant::now() > deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The name server's answer code to a route request for `topic`.
async fn route_code(client: &RemotingClient, ns_addr: &str, topic: &str) -> i32 {
    let req = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)
        .with_header(&GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: None });
    client.invoke(ns_addr, req, T).await.unwrap().code
}

fn bodies(r: &RemotingCommand) -> Vec<String> {
    StoredMessage::decode_all(&r.body)
        .unwrap()
        .into_iter()
        .map(|m| String::from_utf8(m.body.to_vec()).unwrap())
        .collect()
}

async fn heart_beat(client: &RemotingClient, addr: &str, hb: &HeartbeatData) -> RemotingCommand {
    client.invoke(addr, RemotingCommand::request(request_code::HEART_BEAT).with_body(hb.encode()), T).await.unwrap()
}

fn consumer_list(group: &str) -> RemotingCommand {
    RemotingCommand::request(request_code::GET_CONSUMER_LIST_BY_GROUP)
        .with_header(&GetConsumerListByGroupRequestHeader { consumer_group: group.into() })
}

/// UPDATE_AND_CREATE_TOPIC of `topic` with 2 queues, read-write, ordered or not.
fn create_topic(topic: &str, order: bool) -> RemotingCommand {
    RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC).with_header(&CreateTopicRequestHeader {
        topic: topic.into(),
        default_topic: "TBW102".into(),
        read_queue_nums: 2,
        write_queue_nums: 2,
        perm: 6,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: None,
        order,
        attributes: None,
        force: None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_pull_offsets_and_long_polling() {
    let c = Cluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    // First send auto-creates the topic from TBW102 (4 queues, as the client asked).
    for i in 0..6 {
        let r = client
            .invoke(
                &c.broker_addr,
                send_v2("Orders", 1, &format!("m{i}"), if i % 2 == 0 { "A" } else { "B" }, &format!("k{i}")),
                T,
            )
            .await
            .unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let h: SendMessageResponseHeader = r.decode_header().unwrap();
        assert_eq!((h.queue_id, h.queue_offset), (1, i));
        assert_eq!(h.msg_id.len(), 32);
        assert!(r.ext("MSG_REGION").is_some() && r.ext("TRACE_ON").is_some());
    }
    let route = c.wait_registered("Orders").await;
    assert_eq!(route.queue_datas[0].write_queue_nums, 4);

    let r = pull_found(&client, &c.broker_addr, pull_request("Orders", 1, 0, "*", 0), 6).await;
    assert_eq!(r.code, response_code::SUCCESS);
    assert_eq!(bodies(&r), vec!["m0", "m1", "m2", "m3", "m4", "m5"]);
    let h: PullMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!((h.next_begin_offset, h.min_offset, h.max_offset), (6, 0, 6));
    let stored = StoredMessage::decode_all(&r.body).unwrap();
    assert_eq!(stored[0].property("CLUSTER"), Some("DefaultCluster"));
    assert!(stored[0].property("UNIQ_KEY").is_some(), "the broker adds a UNIQ_KEY when the producer did not");

    // Tag filter.
    let r = client.invoke(&c.broker_addr, pull_request("Orders", 1, 0, "B", 0), T).await.unwrap();
    assert_eq!(bodies(&r), vec!["m1", "m3", "m5"]);
    // At the end: PULL_NOT_FOUND without suspension.
    let r = client.invoke(&c.broker_addr, pull_request("Orders", 1, 6, "*", 0), T).await.unwrap();
    assert_eq!(r.code, response_code::PULL_NOT_FOUND);
    assert_eq!(r.remark.as_deref(), Some("OFFSET_OVERFLOW_ONE"));
    // Far past the end: PULL_OFFSET_MOVED.
    let r = client.invoke(&c.broker_addr, pull_request("Orders", 1, 60, "*", 0), T).await.unwrap();
    assert_eq!(r.code, response_code::PULL_OFFSET_MOVED);

    // Long polling: a suspended pull is answered when the message arrives, long before its
    // 30 s suspension would run out.
    let parked = {
        let addr = c.broker_addr.clone();
        tokio::spawn(async move {
            let client = RemotingClient::new(ClientConfig::default());
            client.invoke(&addr, pull_request("Orders", 1, 6, "*", 30_000), Duration::from_secs(40)).await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!parked.is_finished(), "the pull waits");
    let r = client.invoke(&c.broker_addr, send_v2("Orders", 1, "late", "A", "k6"), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    let woke = tokio::time::timeout(T, parked).await.expect("the parked pull is answered on arrival").unwrap().unwrap();
    assert_eq!(woke.code, response_code::SUCCESS);
    assert_eq!(bodies(&woke), vec!["late"]);

    // A parked pull whose tag does not match stays parked until its suspension ends.
    let r = client.invoke(&c.broker_addr, pull_request("Orders", 1, 7, "Z", 300), T).await.unwrap();
    assert_eq!(r.code, response_code::PULL_NOT_FOUND);

    // Offsets.
    let update = RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET).with_header(
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: "cg".into(),
            topic: "Orders".into(),
            queue_id: 1,
            commit_offset: 5,
            broker_name: None,
            lo: None,
        },
    );
    assert_eq!(client.invoke(&c.broker_addr, update.clone(), T).await.unwrap().code, response_code::SUCCESS);
    // An offset alone does not create a group (Java 5): the group must have come to the broker
    // by heartbeat, pull or admin request first.
    let mut unknown = update;
    unknown.ext_fields.insert("consumerGroup".into(), "never-seen");
    let r = client.invoke(&c.broker_addr, unknown, T).await.unwrap();
    assert_eq!(r.code, response_code::SUBSCRIPTION_GROUP_NOT_EXIST, "{:?}", r.remark);
    let query = |group: &str| {
        RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET).with_header(&QueryConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: "Orders".into(),
            queue_id: 1,
            set_zero_if_not_found: None,
            broker_name: None,
            lo: None,
        })
    };
    let r = client.invoke(&c.broker_addr, query("cg"), T).await.unwrap();
    assert_eq!(r.decode_header::<OffsetResponseHeader>().unwrap().offset, 5);
    let r = client.invoke(&c.broker_addr, query("new-group"), T).await.unwrap();
    assert_eq!((r.code, r.decode_header::<OffsetResponseHeader>().unwrap().offset), (response_code::SUCCESS, 0));
    // Not for a client that asks not to set zero (5.x).
    let mut no_zero = query("new-group");
    no_zero.ext_fields.insert("setZeroIfNotFound".into(), "false");
    assert_eq!(client.invoke(&c.broker_addr, no_zero, T).await.unwrap().code, response_code::QUERY_NOT_FOUND);
    // A queue that never held a message is read from 0: a message stored after this answer
    // (and before the client's next step) is not skipped. Java 5 answers QUERY_NOT_FOUND here,
    // the client then asks for the max offset, and a message stored in between is lost to
    // the group; the steps in that order:
    let mut empty_queue = query("new-group");
    empty_queue.ext_fields.insert("queueId".into(), "3");
    let r = client.invoke(&c.broker_addr, empty_queue, T).await.unwrap();
    assert_eq!((r.code, r.decode_header::<OffsetResponseHeader>().unwrap().offset), (response_code::SUCCESS, 0));
    let stored = client.invoke(&c.broker_addr, send_v2("Orders", 3, "raced", "t", "k"), T).await.unwrap();
    assert_eq!(stored.code, response_code::SUCCESS);
    let r = pull_found(&client, &c.broker_addr, pull_request("Orders", 3, 0, "*", 0), 1).await;
    assert_eq!(bodies(&r), vec!["raced".to_owned()], "the message stored after the offset query is consumed");
    let max = RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&GetMaxOffsetRequestHeader {
        topic: "Orders".into(),
        queue_id: 1,
        committed: None,
        broker_name: None,
        lo: None,
    });
    assert_eq!(
        client.invoke(&c.broker_addr, max, T).await.unwrap().decode_header::<OffsetResponseHeader>().unwrap().offset,
        7
    );
    let min = RemotingCommand::request(request_code::GET_MIN_OFFSET).with_header(&QueueRequestHeader {
        topic: "Orders".into(),
        queue_id: 1,
        broker_name: None,
        lo: None,
    });
    assert_eq!(
        client.invoke(&c.broker_addr, min, T).await.unwrap().decode_header::<OffsetResponseHeader>().unwrap().offset,
        0
    );

    // Query by key.
    let q = RemotingCommand::request(request_code::QUERY_MESSAGE).with_header(&QueryMessageRequestHeader {
        topic: "Orders".into(),
        key: "k3".into(),
        max_num: 32,
        begin_timestamp: 0,
        end_timestamp: i64::MAX,
    });
    let r = client.invoke(&c.broker_addr, q.clone(), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "the messages were dispatched (pulled above), so indexed");
    assert!(bodies(&r).contains(&"m3".to_owned()));
    let found: QueryMessageResponseHeader = r.decode_header().unwrap();
    assert!(found.index_last_update_phyoffset > 0);
    // Not found: the answer still says how far the index reaches.
    let mut missing = q;
    missing.ext_fields.insert("key".into(), "no-such-key");
    let r = client.invoke(&c.broker_addr, missing, T).await.unwrap();
    assert_eq!(r.code, response_code::QUERY_NOT_FOUND);
    let index: QueryMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(index.index_last_update_phyoffset, found.index_last_update_phyoffset);

    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_heartbeat_and_consumer_list() {
    let c = Cluster::start(|s| s.store.max_message_size = 1_000).await;
    let client = RemotingClient::new(ClientConfig::default());
    let entries: Vec<BatchEntry> = (0..3)
        .map(|i| BatchEntry {
            flag: 0,
            body: Bytes::from(format!("b{i}")),
            properties: format!("TAGS\u{1}T\u{2}KEYS\u{1}bk{i}\u{2}"),
        })
        .collect();
    let mut req = send_v2("Batch", 0, "", "T", "x");
    req.code = request_code::SEND_BATCH_MESSAGE;
    req.ext_fields.insert("m".into(), "true");
    req.body = encode_batch(&entries).unwrap().freeze();
    let r = client.invoke(&c.broker_addr, req, T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(h.msg_id.split(',').count(), 3);
    let r = pull_found(&client, &c.broker_addr, pull_request("Batch", 0, 0, "*", 0), 3).await;
    assert_eq!(bodies(&r), vec!["b0", "b1", "b2"]);
    // Each entry is under maxMessageSize, the batch is not: refused whole.
    let big: Vec<BatchEntry> =
        (0..3).map(|_| BatchEntry { flag: 0, body: Bytes::from(vec![b'x'; 400]), properties: String::new() }).collect();
    let mut req = send_v2("Batch", 0, "", "T", "x");
    req.code = request_code::SEND_BATCH_MESSAGE;
    req.ext_fields.insert("m".into(), "true");
    req.body = encode_batch(&big).unwrap().freeze();
    let r = client.invoke(&c.broker_addr, req, T).await.unwrap();
    assert_eq!(r.code, response_code::MESSAGE_ILLEGAL, "{:?}", r.remark);

    let hb = consumer_heartbeat("127.0.0.1@test", "cg1", &["Batch"]);
    let r = heart_beat(&client, &c.broker_addr, &hb).await;
    assert_eq!(r.code, response_code::SUCCESS);
    let r = client.invoke(&c.broker_addr, consumer_list("cg1"), T).await.unwrap();
    assert!(String::from_utf8_lossy(&r.body).contains("127.0.0.1@test"));
    // The heartbeat created the group's retry topic, and it reaches the name server.
    c.wait_registered("%RETRY%cg1").await;
    // A pull without a subscription in the request uses the heartbeat's.
    let mut p = pull_request("Batch", 0, 0, "ignored", 0);
    p.ext_fields.insert("consumerGroup".into(), "cg1");
    p.ext_fields.insert("sysFlag".into(), "0");
    let r = client.invoke(&c.broker_addr, p.clone(), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    // A 5.x heartbeat that leaves unchanged subscriptions out keeps the registered ones.
    let mut without_sub = hb.clone();
    without_sub.without_sub = true;
    without_sub.heartbeat_fingerprint = 42;
    without_sub.consumer_data_set[0].subscription_data_set.clear();
    let r = heart_beat(&client, &c.broker_addr, &without_sub).await;
    assert_eq!(r.code, response_code::SUCCESS);
    let r = client.invoke(&c.broker_addr, p, T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "the subscription is still there: {:?}", r.remark);

    // A unit-mode group subscribing an ordered topic gets an ordered, unit-sub retry topic.
    let ordered = create_topic("Ordered", true);
    assert_eq!(client.invoke(&c.broker_addr, ordered, T).await.unwrap().code, response_code::SUCCESS);
    let mut hb = hb;
    hb.consumer_data_set[0].group_name = "cg-ordered".into();
    hb.consumer_data_set[0].unit_mode = true;
    hb.consumer_data_set[0].subscription_data_set[0].topic = "Ordered".into();
    let r = heart_beat(&client, &c.broker_addr, &hb).await;
    assert_eq!(r.code, response_code::SUCCESS);
    let r =
        client.invoke(&c.broker_addr, RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG), T).await.unwrap();
    let topics = ferromq_protocol::body::TopicConfigSerializeWrapper::decode(&r.body).unwrap().topic_config_table;
    let retry = &topics["%RETRY%cg-ordered"];
    assert_eq!((retry.order, retry.topic_sys_flag), (true, 2), "{retry:?}");
    assert!(!topics["%RETRY%cg1"].order);
    client.shutdown().await;
    c.stop().await;
}

/// Heartbeat V2 as a 5.x Java client runs it: it learns from IS_SUPPORT_HEART_BEAT_V2 that it
/// may leave unchanged subscriptions out, and sends them again whenever IS_SUB_CHANGE says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_v2_fingerprints_say_when_subscriptions_must_be_sent_again() {
    let c = Cluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    assert_eq!(client.invoke(&c.broker_addr, create_topic("V2", false), T).await.unwrap().code, response_code::SUCCESS);
    let flags = |r: &RemotingCommand| {
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        (
            r.ext_fields.get("IS_SUPPORT_HEART_BEAT_V2").map(str::to_owned),
            r.ext_fields.get("IS_SUB_CHANGE").map(str::to_owned),
        )
    };
    let yes = (Some("true".to_owned()), Some("true".to_owned()));
    let no = (Some("true".to_owned()), Some("false".to_owned()));
    let full = |group: &str, fingerprint: i32| {
        let mut hb = consumer_heartbeat("127.0.0.1@v2", group, &["V2"]);
        hb.heartbeat_fingerprint = fingerprint;
        hb
    };
    let without_sub = |group: &str, fingerprint: i32| {
        let mut hb = full(group, fingerprint);
        hb.consumer_data_set[0].subscription_data_set.clear();
        hb.without_sub = true;
        hb
    };
    let subscribed = |group: &'static str| {
        let c = &c;
        let client = &client;
        async move {
            let mut p = pull_request("V2", 0, 0, "ignored", 0);
            p.ext_fields.insert("consumerGroup".into(), group);
            p.ext_fields.insert("sysFlag".into(), "0");
            client.invoke(&c.broker_addr, p, T).await.unwrap().code != response_code::SUBSCRIPTION_NOT_EXIST
        }
    };

    // A heartbeat without a fingerprint (4.x, or 5.x before it knows) always hears "changed".
    assert_eq!(flags(&heart_beat(&client, &c.broker_addr, &full("g4", 0)).await), yes);
    assert_eq!(flags(&heart_beat(&client, &c.broker_addr, &full("g4", 0)).await), yes);
    // The first fingerprinted heartbeat of a group carries its subscriptions: nothing to resend.
    assert_eq!(flags(&heart_beat(&client, &c.broker_addr, &full("g5", 7)).await), no);
    // The same fingerprint without subscriptions keeps the registered ones.
    assert_eq!(flags(&heart_beat(&client, &c.broker_addr, &without_sub("g5", 7)).await), no);
    assert!(subscribed("g5").await);
    // Another fingerprint means other subscriptions than the broker holds.
    assert_eq!(flags(&heart_beat(&client, &c.broker_addr, &without_sub("g5", 8)).await), yes);
    // The client then sends them with the new fingerprint, which the broker already holds.
    assert_eq!(flags(&heart_beat(&client, &c.broker_addr, &full("g5", 8)).await), no);
    // A group the broker does not know (restarted, or dropped after its members left) cannot
    // do without the subscriptions.
    assert_eq!(flags(&heart_beat(&client, &c.broker_addr, &without_sub("g-new", 7)).await), yes);
    assert!(!subscribed("g-new").await);
    let unregister =
        RemotingCommand::request(request_code::UNREGISTER_CLIENT).with_header(&UnregisterClientRequestHeader {
            client_id: "127.0.0.1@v2".into(),
            producer_group: None,
            consumer_group: Some("g5".into()),
        });
    assert_eq!(client.invoke(&c.broker_addr, unregister, T).await.unwrap().code, response_code::SUCCESS);
    assert_eq!(flags(&heart_beat(&client, &c.broker_addr, &without_sub("g5", 8)).await), yes);
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_of_a_group_without_config_is_not_registered() {
    let c = Cluster::start(|s| s.broker.auto_create_subscription_group = false).await;
    let client = RemotingClient::new(ClientConfig::default());
    let hb = consumer_heartbeat("127.0.0.1@nogroup", "unknown-group", &["TBW102"]);
    assert_eq!(heart_beat(&client, &c.broker_addr, &hb).await.code, response_code::SUCCESS);
    let r = client.invoke(&c.broker_addr, consumer_list("unknown-group"), T).await.unwrap();
    assert_eq!(r.code, response_code::SYSTEM_ERROR, "no consumer registered: {:?}", r.remark);
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_rocketmq_codes_and_the_broker_keeps_serving() {
    let c = Cluster::start(|s| {
        s.broker.auto_create_topic_enable = false;
        s.store.max_message_size = 1024;
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    let r = client.invoke(&c.broker_addr, send_v2("Unknown", 0, "x", "T", "k"), T).await.unwrap();
    assert_eq!(r.code, response_code::TOPIC_NOT_EXIST, "{:?}", r.remark);
    let r = client.invoke(&c.broker_addr, send_v2("bad topic!", 0, "x", "T", "k"), T).await.unwrap();
    assert_eq!(r.code, response_code::INVALID_PARAMETER);
    let r = client.invoke(&c.broker_addr, send_v2("SCHEDULE_TOPIC_XXXX", 0, "x", "T", "k"), T).await.unwrap();
    assert_eq!(r.code, response_code::NO_PERMISSION);
    // Create the topic through the admin request, then an oversized body.
    let create = create_topic("Small", false);
    assert_eq!(client.invoke(&c.broker_addr, create.clone(), T).await.unwrap().code, response_code::SUCCESS);
    // System topics are the broker's own: admin requests may neither change nor delete them
    // (Java's validateSystemTopicWhenUpdateTopic, on by default).
    for topic in ["TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC", "rmq_sys_anything"] {
        let mut update = create.clone();
        update.ext_fields.insert("topic".into(), topic);
        update.ext_fields.insert("defaultTopic".into(), "TBW102x");
        let r = client.invoke(&c.broker_addr, update, T).await.unwrap();
        assert_eq!(r.code, response_code::INVALID_PARAMETER, "update {topic}: {:?}", r.remark);
        assert!(r.remark.as_deref().unwrap_or("").contains("conflict with system topic"), "{:?}", r.remark);
        let delete = RemotingCommand::request(request_code::DELETE_TOPIC_IN_BROKER)
            .with_header(&DeleteTopicRequestHeader { topic: topic.into() });
        let r = client.invoke(&c.broker_addr, delete, T).await.unwrap();
        assert_eq!(r.code, response_code::INVALID_PARAMETER, "delete {topic}: {:?}", r.remark);
    }
    let topics = || async {
        let r = client
            .invoke(&c.broker_addr, RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG), T)
            .await
            .unwrap();
        ferromq_protocol::body::TopicConfigSerializeWrapper::decode(&r.body).unwrap().topic_config_table
    };
    assert!(topics().await.contains_key("SCHEDULE_TOPIC_XXXX"), "still there");
    // Attributes (5.x): the header lists changes, merged into the topic's current attributes.
    let with_attributes = |topic: &str, write_queues: &str, attributes: Option<&str>| {
        let mut r = create.clone();
        r.ext_fields.insert("topic".into(), topic);
        r.ext_fields.insert("writeQueueNums".into(), write_queues);
        match attributes {
            Some(a) => r.ext_fields.insert("attributes".into(), a),
            None => r.ext_fields.remove("attributes"),
        };
        r
    };
    let r = client.invoke(&c.broker_addr, with_attributes("Typed", "2", Some("+message.type=FIFO")), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let r = client.invoke(&c.broker_addr, with_attributes("Typed", "4", None), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let typed = topics().await.remove("Typed").unwrap();
    assert_eq!((typed.write_queue_nums, typed.attributes.get("message.type").map(String::as_str)), (4, Some("FIFO")));
    let r = client.invoke(&c.broker_addr, with_attributes("Typed", "4", Some("+foo=1")), T).await.unwrap();
    assert_eq!((r.code, r.remark.as_deref()), (response_code::SYSTEM_ERROR, Some("unsupported key: foo")));
    let r = client.invoke(&c.broker_addr, with_attributes("Typed", "4", Some("+message.type=MIXED")), T).await.unwrap();
    assert_eq!(r.code, response_code::INVALID_PARAMETER, "{:?}", r.remark);
    let r = client.invoke(&c.broker_addr, with_attributes("Typed", "4", Some("-message.type")), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert!(topics().await["Typed"].attributes.is_empty());
    let r = client.invoke(&c.broker_addr, send_v2("Small", 0, &"x".repeat(2000), "T", "k"), T).await.unwrap();
    assert_eq!(r.code, response_code::MESSAGE_ILLEGAL);
    let r = client.invoke(&c.broker_addr, send_v2("Small", 9, "x", "T", "k"), T).await.unwrap();
    assert_eq!(r.code, response_code::INVALID_PARAMETER, "queue id out of range");
    let r = client.invoke(&c.broker_addr, pull_request("Small", 9, 0, "*", 0), T).await.unwrap();
    assert_eq!(r.code, response_code::INVALID_PARAMETER, "pull: queue id out of range: {:?}", r.remark);
    // Subscription groups: no body changes nothing (as Java), an illegal name is refused.
    let group = |body: &'static [u8]| {
        RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(Bytes::from_static(body))
    };
    assert_eq!(client.invoke(&c.broker_addr, group(b""), T).await.unwrap().code, response_code::SUCCESS);
    let r = client.invoke(&c.broker_addr, group(br#"{"groupName":"bad.group"}"#), T).await.unwrap();
    assert_eq!(r.code, response_code::INVALID_PARAMETER, "{:?}", r.remark);
    let r = client.invoke(&c.broker_addr, RemotingCommand::request(request_code::SEND_MESSAGE_V2), T).await.unwrap();
    assert_eq!(r.code, response_code::SYSTEM_ERROR, "missing header fields");
    let r = client.invoke(&c.broker_addr, RemotingCommand::request(99_999), T).await.unwrap();
    assert_eq!(r.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    let r = client.invoke(&c.broker_addr, send_v2("Small", 1, "fine", "T", "k"), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_messages_offsets_and_topics() {
    let mut c = Cluster::start(|s| s.store.flush_disk_type = ferromq_store::FlushDiskType::SyncFlush).await;
    let client = RemotingClient::new(ClientConfig::default());
    for i in 0..10 {
        let r = client.invoke(&c.broker_addr, send_v2("Durable", 2, &format!("d{i}"), "T", "k"), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS);
    }
    // The consumer group comes to the broker with its heartbeat, then commits.
    let hb = consumer_heartbeat("127.0.0.1@durable", "cg", &["Durable"]);
    assert_eq!(heart_beat(&client, &c.broker_addr, &hb).await.code, response_code::SUCCESS);
    let update = RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET).with_header(
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: "cg".into(),
            topic: "Durable".into(),
            queue_id: 2,
            commit_offset: 4,
            broker_name: None,
            lo: None,
        },
    );
    assert_eq!(client.invoke(&c.broker_addr, update, T).await.unwrap().code, response_code::SUCCESS);
    client.shutdown().await;
    c.restart_broker().await;
    let client = RemotingClient::new(ClientConfig::default());
    let r = pull_found(&client, &c.broker_addr, pull_request("Durable", 2, 0, "*", 0), 10).await;
    assert_eq!(bodies(&r), (0..10).map(|i| format!("d{i}")).collect::<Vec<_>>());
    let q =
        RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET).with_header(&QueryConsumerOffsetRequestHeader {
            consumer_group: "cg".into(),
            topic: "Durable".into(),
            queue_id: 2,
            set_zero_if_not_found: None,
            broker_name: None,
            lo: None,
        });
    assert_eq!(
        client.invoke(&c.broker_addr, q, T).await.unwrap().decode_header::<OffsetResponseHeader>().unwrap().offset,
        4
    );
    let r = client.invoke(&c.broker_addr, send_v2("Durable", 2, "d10", "T", "k"), T).await.unwrap();
    assert_eq!(r.decode_header::<SendMessageResponseHeader>().unwrap().queue_offset, 10);
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_back_goes_to_retry_then_dead_letter_topic() {
    // Retries wait in the delay levels (3 + reconsume times): make those short.
    let c = Cluster::start(|s| {
        s.store.message_delay_level = ferromq_store::DelayLevels::parse("1s 1s 1s 1s 1s 1s").unwrap();
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    let r = client.invoke(&c.broker_addr, send_v2("Work", 0, "job", "T", "k"), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    let r = pull_found(&client, &c.broker_addr, pull_request("Work", 0, 0, "*", 0), 1).await;
    let original = StoredMessage::decode_all(&r.body).unwrap().remove(0);
    let back = |offset: i64, delay_level: i32| {
        RemotingCommand::request(request_code::CONSUMER_SEND_MSG_BACK).with_header(&ConsumerSendMsgBackRequestHeader {
            offset,
            group: "cg".into(),
            delay_level,
            // What Java clients send (the UNIQ_KEY); ORIGIN_MESSAGE_ID is not taken from it.
            origin_msg_id: Some("7F0000010000000000000000000000AA".into()),
            origin_topic: Some("Work".into()),
            unit_mode: None,
            max_reconsume_times: Some(2),
            broker_name: None,
        })
    };
    let r = client.invoke(&c.broker_addr, back(original.physical_offset, 0), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(
        route_code(&client, &c.ns_addr, "%RETRY%cg").await,
        response_code::SUCCESS,
        "registered before the answer"
    );
    let r = pull_found(&client, &c.broker_addr, pull_request("%RETRY%cg", 0, 0, "*", 0), 1).await;
    assert_eq!(r.code, response_code::SUCCESS);
    let retried = StoredMessage::decode_all(&r.body).unwrap().remove(0);
    assert_eq!(retried.body, original.body);
    assert_eq!(retried.reconsume_times, 1);
    assert_eq!(retried.property("RETRY_TOPIC"), Some("Work"));
    let original_id = ferromq_protocol::message::create_offset_msg_id(original.store_host, original.physical_offset);
    assert_eq!(retried.property("ORIGIN_MESSAGE_ID"), Some(original_id.as_str()), "the original's offset id");

    // Second failure: reconsume times reach maxReconsumeTimes (2) on the next send-back.
    let r = client.invoke(&c.broker_addr, back(retried.physical_offset, 0), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    let r = pull_found(&client, &c.broker_addr, pull_request("%RETRY%cg", 0, 1, "*", 0), 1).await;
    let second = StoredMessage::decode_all(&r.body).unwrap().remove(0);
    assert_eq!(second.reconsume_times, 2);
    let r = client.invoke(&c.broker_addr, back(second.physical_offset, 0), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    assert_eq!(
        route_code(&client, &c.ns_addr, "%DLQ%cg").await,
        response_code::SUCCESS,
        "registered before the answer"
    );
    // The dead-letter topic is readable (Java since 4.9.4), so the dead letters can be consumed.
    let r = pull_found(&client, &c.broker_addr, pull_request("%DLQ%cg", 0, 0, "*", 0), 1).await;
    assert_eq!(r.code, response_code::SUCCESS);
    let dead = StoredMessage::decode_all(&r.body).unwrap().remove(0);
    assert_eq!((dead.topic.as_str(), dead.reconsume_times), ("%DLQ%cg", 3));
    assert_eq!(dead.property("DELAY"), Some("0"), "delivered at once");
    assert_eq!(dead.property("ORIGIN_MESSAGE_ID"), Some(original_id.as_str()), "kept from the first attempt");
    // It is also found by key through the index.
    let q = RemotingCommand::request(request_code::QUERY_MESSAGE).with_header(&QueryMessageRequestHeader {
        topic: "%DLQ%cg".into(),
        key: "k".into(),
        max_num: 32,
        begin_timestamp: 0,
        end_timestamp: i64::MAX,
    });
    // The index is built by dispatch, right after the append: poll.
    let deadline = Instant::now() + T;
    let r = loop {
        let r = client.invoke(&c.broker_addr, q.clone(), T).await.unwrap();
        if r.code == response_code::SUCCESS || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(r.code, response_code::SUCCESS);
    assert_eq!(StoredMessage::decode_all(&r.body).unwrap().remove(0).physical_offset, dead.physical_offset);
    assert_eq!(dead.property("DLQ_ORIGIN_TOPIC"), Some("%RETRY%cg"));
    client.shutdown().await;
    c.stop().await;
}

/// With `maxMessageSize` at its limit, the largest messages are acknowledged and each comes
/// back alone in a pull that fits one frame, whatever byte budget the consumer asks for; a
/// larger limit is refused at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_accepted_message_is_pulled_back_alone_within_a_frame() {
    let limit = ferromq_broker::MAX_MESSAGE_SIZE_LIMIT;
    assert!(ferromq_broker::check_max_message_size(limit + 1).is_err());
    let c = Cluster::start(move |s| {
        s.store.max_message_size = limit;
        s.store.mapped_file_size_commit_log = 64 << 20;
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    // Incompressible bytes: a stored record is its body plus the record fields.
    let body: Vec<u8> = (0..limit as usize).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    for _ in 0..2 {
        let r = client.invoke(&c.broker_addr, send_request("BigTopic", 0, &body, &[]), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
    let mut offset = 0;
    for _ in 0..2 {
        let mut req = pull_request("BigTopic", 0, offset, "*", 0);
        let mut h: PullMessageRequestHeader = req.decode_header().unwrap();
        h.max_msg_bytes = Some(i32::MAX);
        req = req.with_header(&h);
        let r = pull_found(&client, &c.broker_addr, req, 1).await;
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let got = StoredMessage::decode_all(&r.body).unwrap();
        assert_eq!(got.len(), 1, "one message per pull: two would not fit a frame");
        assert_eq!(got[0].body.len(), body.len());
        offset = r.decode_header::<PullMessageResponseHeader>().unwrap().next_begin_offset;
    }
    assert_eq!(offset, 2);
    client.shutdown().await;
    c.stop().await;
}

/// A pull that arrives after SEND_OK reads the message, even if dispatch to the consume queue
/// has not finished yet: the broker waits (a bounded moment) for dispatch to reach what was
/// stored before the pull arrived. One pull each, no retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_after_send_ok_reads_the_message_sent() {
    let c = Cluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    for i in 0..20 {
        let topic = format!("ReadYourWrite{i}");
        let r = client.invoke(&c.broker_addr, send_v2(&topic, 0, "written", "t", "k"), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let r = client.invoke(&c.broker_addr, pull_request(&topic, 0, 0, "*", 0), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{topic}: {:?}", r.remark);
        assert_eq!(bodies(&r), vec!["written".to_owned()]);
    }
    client.shutdown().await;
    c.stop().await;
}

/// As Java, a send that creates its topic registers it before answering: a client that asks
/// the name server for the route right after the answer finds it (a 5.x consumer subscribing
/// to what it has just produced did not, now and then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_created_by_a_send_is_routable_when_the_send_is_answered() {
    let c = Cluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    for i in 0..20 {
        let topic = format!("RoutedOnAnswer{i}");
        let r = client.invoke(&c.broker_addr, send_v2(&topic, 0, "m", "t", "k"), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        assert_eq!(route_code(&client, &c.ns_addr, &topic).await, response_code::SUCCESS, "{topic} not routable");
    }
    client.shutdown().await;
    c.stop().await;
}

/// The answer of a send that created its topic waits for the name server: with the broker's
/// link to it stalled, the send stays unanswered; once the link resumes, it is answered and
/// the route is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_that_creates_its_topic_is_answered_after_the_registration() {
    let via = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    let tweak_via = via.clone();
    let mut c = Cluster::start(move |s| {
        if let Some(relay) = tweak_via.lock().unwrap().clone() {
            s.broker.namesrv_addr = relay;
        }
    })
    .await;
    let relay = ferromq_testkit::Relay::start(c.ns_addr.parse().unwrap()).await;
    *via.lock().unwrap() = Some(relay.addr().to_string());
    c.restart_broker().await;
    let client = RemotingClient::new(ClientConfig::default());
    let r = client.invoke(&c.broker_addr, send_v2("ThroughRelay", 0, "m", "t", "k"), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(route_code(&client, &c.ns_addr, "ThroughRelay").await, response_code::SUCCESS);

    relay.stall();
    let send = {
        let (sender, addr) = (RemotingClient::new(ClientConfig::default()), c.broker_addr.clone());
        tokio::spawn(async move { sender.invoke(&addr, send_v2("WhileStalled", 0, "m", "t", "k"), T).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!send.is_finished(), "answered before the name server heard of the topic");
    assert_ne!(route_code(&client, &c.ns_addr, "WhileStalled").await, response_code::SUCCESS);
    relay.resume();
    let r = send.await.unwrap().unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(route_code(&client, &c.ns_addr, "WhileStalled").await, response_code::SUCCESS);
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_per_client_address_follow_server_max_connections_per_address() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // broker.conf's `serverMaxConnectionsPerAddress=2`: two connections from 127.0.0.1 are
    // served, a third is closed at once, and one closing frees its slot.
    let c = Cluster::start(|s| {
        assert!(s.apply_text("serverMaxConnectionsPerAddress=2\n").unwrap().is_empty(), "a known key");
    })
    .await;
    let mut ask = bytes::BytesMut::new();
    let req = RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO);
    ferromq_protocol::encode_frame(&req, ferromq_protocol::SerializeType::Json, &mut ask).unwrap();
    // Served: a request on it is answered (its frame length arrives).
    async fn served(s: &mut tokio::net::TcpStream, ask: &[u8]) -> bool {
        if s.write_all(ask).await.is_err() {
            return false;
        }
        let mut len = [0u8; 4];
        matches!(tokio::time::timeout(T, s.read_exact(&mut len)).await, Ok(Ok(_)))
    }
    let mut first = tokio::net::TcpStream::connect(&c.broker_addr).await.unwrap();
    let mut second = tokio::net::TcpStream::connect(&c.broker_addr).await.unwrap();
    assert!(served(&mut first, &ask).await && served(&mut second, &ask).await);
    let mut third = tokio::net::TcpStream::connect(&c.broker_addr).await.unwrap();
    let mut buf = [0u8; 1];
    let closed = tokio::time::timeout(T, third.read(&mut buf)).await.expect("the third is closed, not kept waiting");
    assert!(matches!(closed, Ok(0) | Err(_)), "a third connection from the address was served: {closed:?}");
    drop(first);
    let deadline = Instant::now() + T;
    loop {
        let mut again = tokio::net::TcpStream::connect(&c.broker_addr).await.unwrap();
        if served(&mut again, &ask).await {
            break;
        }
        assert!(Instant::now() < deadline, "the closed connection's slot never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.stop().await;
}
