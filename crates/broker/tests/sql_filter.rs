//! SQL92 subscriptions over real loopback TCP: refused unless `enablePropertyFilter`,
//! evaluated on message properties for expressions carried in the pull or registered by the
//! heartbeat, and RocketMQ's codes for broken, missing and stale filter data.

use std::time::{Duration, Instant};

use ferromq_protocol::body::{
    ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, JsonBody, MessageModel, SubscriptionData,
};
use ferromq_protocol::header::*;
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{send_request, LocalCluster};

const T: Duration = Duration::from_secs(10);

fn pull(topic: &str, offset: i64, sql: Option<&str>, sub_version: i64, suspend_ms: i64) -> RemotingCommand {
    let mut sys_flag = if suspend_ms > 0 { pull_sys_flag::SUSPEND } else { 0 };
    if sql.is_some() {
        sys_flag |= pull_sys_flag::SUBSCRIPTION;
    }
    RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&PullMessageRequestHeader {
        consumer_group: "sqlcg".into(),
        topic: topic.into(),
        queue_id: 0,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag,
        suspend_timeout_millis: suspend_ms,
        subscription: sql.map(str::to_owned),
        sub_version,
        expression_type: Some("SQL92".into()),
        ..Default::default()
    })
}

/// Bodies of every message the pulls return, following nextBeginOffset to the end.
async fn pull_all(
    client: &RemotingClient,
    addr: &str,
    topic: &str,
    sql: Option<&str>,
    sub_version: i64,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut offset = 0;
    let deadline = Instant::now() + T;
    loop {
        let r = client.invoke(addr, pull(topic, offset, sql, sub_version, 0), T).await.unwrap();
        match r.code {
            response_code::SUCCESS | response_code::PULL_RETRY_IMMEDIATELY => {
                for m in StoredMessage::decode_all(&r.body).unwrap() {
                    out.push(String::from_utf8(m.body.to_vec()).unwrap());
                }
                offset = r.decode_header::<PullMessageResponseHeader>().unwrap().next_begin_offset;
            }
            response_code::PULL_NOT_FOUND => return out,
            code => panic!("pull failed: {code} {:?}", r.remark),
        }
        assert!(Instant::now() < deadline, "pulls never reached the end");
    }
}

/// Waits until the broker has dispatched `n` messages to queue 0 of `topic` (a send is
/// acknowledged before its consume-queue unit exists, so a pull right after may not see it).
async fn wait_dispatched(client: &RemotingClient, addr: &str, topic: &str, n: i64) {
    let deadline = Instant::now() + T;
    loop {
        let req = RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&GetMaxOffsetRequestHeader {
            topic: topic.into(),
            queue_id: 0,
            committed: None,
            broker_name: None,
            lo: None,
        });
        let r = client.invoke(addr, req, T).await.unwrap();
        if r.decode_header::<OffsetResponseHeader>().is_ok_and(|h| h.offset >= n) {
            return;
        }
        assert!(Instant::now() < deadline, "{topic}: {n} messages never dispatched");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn send_all(client: &RemotingClient, addr: &str, topic: &str) {
    for i in 0..10 {
        let color = ["red", "green"][i % 2];
        let a = i.to_string();
        let r = client
            .invoke(
                addr,
                send_request(topic, 0, format!("m{i}").as_bytes(), &[("a", &a), ("color", color), ("TAGS", "t")]),
                T,
            )
            .await
            .unwrap();
        assert_eq!(r.code, response_code::SUCCESS);
    }
    wait_dispatched(client, addr, topic, 10).await;
}

async fn heartbeat(client: &RemotingClient, addr: &str, topic: &str, sql: &str, sub_version: i64) {
    let hb = HeartbeatData {
        client_id: "127.0.0.1@sql".into(),
        consumer_data_set: vec![ConsumerData {
            group_name: "sqlcg".into(),
            consume_type: ConsumeType::ConsumePassively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            subscription_data_set: vec![SubscriptionData {
                topic: topic.into(),
                sub_string: sql.into(),
                expression_type: "SQL92".into(),
                sub_version,
                ..SubscriptionData::default()
            }],
            unit_mode: false,
        }],
        ..HeartbeatData::default()
    };
    let r = client
        .invoke(addr, RemotingCommand::request(request_code::HEART_BEAT).with_body(hb.encode()), T)
        .await
        .unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql92_is_refused_unless_enable_property_filter() {
    let c = LocalCluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    send_all(&client, &c.broker_addr, "NoSql").await;
    let r = client.invoke(&c.broker_addr, pull("NoSql", 0, Some("a > 1"), 1, 0), T).await.unwrap();
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some("The broker does not support consumer to filter message by SQL92"));
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql92_in_the_pull_filters_by_properties() {
    let c = LocalCluster::start(|s| s.broker.enable_property_filter = true).await;
    let client = RemotingClient::new(ClientConfig::default());
    send_all(&client, &c.broker_addr, "Sql").await;
    let got = pull_all(&client, &c.broker_addr, "Sql", Some("a > 5 AND color = 'red'"), 1).await;
    assert_eq!(got, ["m6", "m8"]);
    let got =
        pull_all(&client, &c.broker_addr, "Sql", Some("a BETWEEN 2 AND 4 OR color IN ('none') OR TAGS IS NULL"), 1)
            .await;
    assert_eq!(got, ["m2", "m3", "m4"]);
    let got = pull_all(&client, &c.broker_addr, "Sql", Some("missing = 'x'"), 1).await;
    assert!(got.is_empty(), "a missing property is unknown, never true");
    // A broken expression is a parse failure with the reason.
    let r = client.invoke(&c.broker_addr, pull("Sql", 0, Some("a >"), 1, 0), T).await.unwrap();
    assert_eq!(r.code, response_code::SUBSCRIPTION_PARSE_FAILED, "{:?}", r.remark);
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_registered_sql92_filters_and_versions_are_checked() {
    let c = LocalCluster::start(|s| s.broker.enable_property_filter = true).await;
    let client = RemotingClient::new(ClientConfig::default());
    send_all(&client, &c.broker_addr, "SqlHb").await;
    heartbeat(&client, &c.broker_addr, "SqlHb", "color = 'green' AND a >= 7", 100).await;
    assert_eq!(pull_all(&client, &c.broker_addr, "SqlHb", None, 100).await, ["m7", "m9"]);
    // The consumer says it subscribed later than the broker knows: not latest.
    let r = client.invoke(&c.broker_addr, pull("SqlHb", 0, None, 101, 0), T).await.unwrap();
    assert_eq!(r.code, response_code::SUBSCRIPTION_NOT_LATEST);
    // A newer heartbeat with an expression that does not compile: the subscription is known,
    // the filter data is not.
    send_all(&client, &c.broker_addr, "SqlHb2").await;
    heartbeat(&client, &c.broker_addr, "SqlHb2", "color = ", 200).await;
    let r = client.invoke(&c.broker_addr, pull("SqlHb2", 0, None, 200, 0), T).await.unwrap();
    assert_eq!(r.code, response_code::FILTER_DATA_NOT_EXIST, "{:?}", r.remark);

    // A parked pull is answered when a matching message arrives.
    heartbeat(&client, &c.broker_addr, "SqlHb", "color = 'blue'", 300).await;
    let parked = {
        let client = RemotingClient::new(ClientConfig::default());
        let addr = c.broker_addr.clone();
        tokio::spawn(async move {
            let began = Instant::now();
            let mut offset = 10;
            loop {
                let r = client.invoke(&addr, pull("SqlHb", offset, None, 300, 5_000), T).await.unwrap();
                if r.code == response_code::SUCCESS {
                    let bodies: Vec<String> = StoredMessage::decode_all(&r.body)
                        .unwrap()
                        .into_iter()
                        .map(|m| String::from_utf8(m.body.to_vec()).unwrap())
                        .collect();
                    client.shutdown().await;
                    return (bodies, began.elapsed());
                }
                assert!(began.elapsed() < T, "no blue message came: {} {:?}", r.code, r.remark);
                offset = r.decode_header::<PullMessageResponseHeader>().unwrap().next_begin_offset;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (body, color) in [("no", "red"), ("yes", "blue")] {
        let r = client
            .invoke(&c.broker_addr, send_request("SqlHb", 0, body.as_bytes(), &[("color", color)]), T)
            .await
            .unwrap();
        assert_eq!(r.code, response_code::SUCCESS);
    }
    let (bodies, waited) = parked.await.unwrap();
    assert_eq!(bodies, ["yes"]);
    assert!(waited < Duration::from_secs(5), "answered by the arrival, not the suspend timeout: {waited:?}");
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bloom_bitmaps_in_the_consume_queue_ext_mark_matching_messages() {
    let c = LocalCluster::start(|s| {
        s.broker.enable_property_filter = true;
        s.broker.enable_calc_filter_bit_map = true;
        s.store.enable_consume_queue_ext = true;
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    // The topic exists before the consumer registers; its expression is then known at dispatch.
    let r = client.invoke(&c.broker_addr, send_request("SqlBloom", 0, b"first", &[("a", "0")]), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    // The first message is dispatched, and a millisecond has passed, before the expression is
    // registered: under load its dispatch could otherwise land after the registration.
    wait_dispatched(&client, &c.broker_addr, "SqlBloom", 1).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    heartbeat(&client, &c.broker_addr, "SqlBloom", "a >= 5", 1).await;
    // Dispatch compares store times with the registration time (ms): step past it.
    tokio::time::sleep(Duration::from_millis(5)).await;
    for i in 1..10 {
        let a = i.to_string();
        let r = client
            .invoke(&c.broker_addr, send_request("SqlBloom", 0, format!("b{i}").as_bytes(), &[("a", &a)]), T)
            .await
            .unwrap();
        assert_eq!(r.code, response_code::SUCCESS);
    }
    wait_dispatched(&client, &c.broker_addr, "SqlBloom", 10).await;
    let mut got = pull_all(&client, &c.broker_addr, "SqlBloom", None, 1).await;
    got.sort();
    assert_eq!(got, ["b5", "b6", "b7", "b8", "b9"]);
    client.shutdown().await;
    // A copy of the queue files (the page cache has them; the running broker keeps its own).
    let copy = tempfile::tempdir().unwrap();
    let root = copy.path();
    for (dir, file_size_dir) in [("consumequeue", "SqlBloom/0"), ("consumequeue_ext", "SqlBloom/0")] {
        let to = root.join(dir).join(file_size_dir);
        std::fs::create_dir_all(&to).unwrap();
        for f in std::fs::read_dir(c.dir().join("store").join(dir).join(file_size_dir)).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), to.join(f.file_name())).unwrap();
        }
    }
    c.stop().await;

    // The stored bitmaps: the bits of `sqlcg#SqlBloom` in messages 5..9 only.
    let bloom = ferromq_filter::BloomFilter::new(20, 32).unwrap();
    let positions = bloom.subscription_positions("sqlcg", "SqlBloom");
    let ext = ferromq_store::ExtOptions { root: root.join("consumequeue_ext"), file_size: 48 * 1024 * 1024 };
    let cq =
        ferromq_store::ConsumeQueue::open_with_ext(&root.join("consumequeue"), "SqlBloom", 0, 20 * 1000, Some(&ext))
            .unwrap();
    cq.recover().unwrap();
    let units = cq.iter_from_with_ext(0, 32);
    assert_eq!(units.len(), 10);
    let hits: Vec<bool> = units
        .iter()
        .map(|(_, e)| e.as_ref().and_then(|e| e.filter_bit_map.as_deref()).is_some_and(|b| bloom.is_hit(b, &positions)))
        .collect();
    assert_eq!(hits, [false, false, false, false, false, true, true, true, true, true]);
    assert!(units[0].1.as_ref().unwrap().filter_bit_map.is_none(), "no expression was registered for the first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_client_config_answers_whether_a_subscription_can_be_served() {
    use ferromq_protocol::body::CheckClientRequestBody;
    let check = |expression: &str, expression_type: &str| {
        let body = CheckClientRequestBody {
            client_id: "c".into(),
            group: "sqlcg".into(),
            subscription_data: Some(SubscriptionData {
                topic: "T".into(),
                sub_string: expression.into(),
                expression_type: expression_type.into(),
                ..SubscriptionData::default()
            }),
            namespace: None,
        };
        RemotingCommand::request(request_code::CHECK_CLIENT_CONFIG).with_body(body.encode())
    };
    let off = LocalCluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let r = client.invoke(&off.broker_addr, check("a > 1", "SQL92"), T).await.unwrap();
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    let r = client.invoke(&off.broker_addr, check("TagA || TagB", "TAG"), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    off.stop().await;
    let on = LocalCluster::start(|s| s.broker.enable_property_filter = true).await;
    let r = client.invoke(&on.broker_addr, check("a > 1", "SQL92"), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    let r = client.invoke(&on.broker_addr, check("a >", "SQL92"), T).await.unwrap();
    assert_eq!(r.code, response_code::SUBSCRIPTION_PARSE_FAILED);
    assert!(r.remark.is_some_and(|m| !m.is_empty()));
    client.shutdown().await;
    on.stop().await;
}
