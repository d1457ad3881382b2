//! The dashboard's JSON API (rocketmq-dashboard's paths and shapes) against a real
//! `ferromq standalone`: topics and groups created, listed and deleted through it; messages
//! sent by a traced Rust producer and consumed by a traced push consumer found by key, id and
//! time, with their consume status and trace graph; lag, offset reset and skip; the TPS
//! history; and the refusals (GET on a change, cross-site posts, bad bodies, unknown paths).

use std::time::{Duration, Instant};

use ferromq_client::{
    ClientConfig, ConsumeFromWhere, ConsumeStatus, Message, Producer, ProducerConfig, PushConsumer, PushConsumerConfig,
};
use ferromq_testkit::{start_standalone, start_standalone_with_conf};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
const T: Duration = Duration::from_secs(20);
const TOPIC: &str = "DashApiTopic";
const GROUP: &str = "DashApiGroup";

/// A connection to the dashboard, waiting (bounded) for its port: the standalone helper
/// returns once the name server listens.
async fn connect(addr: &str) -> tokio::net::TcpStream {
    let deadline = Instant::now() + T;
    loop {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(stream) => return stream,
            Err(e) if Instant::now() < deadline && e.kind() == std::io::ErrorKind::ConnectionRefused => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("dashboard port {addr}: {e}"),
        }
    }
}

/// One HTTP/1.1 exchange: the status code and the body.
async fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Vec<u8>) {
    let mut stream = connect(addr).await;
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    // A refused oversized body may close the connection before it is all written.
    let _ = stream.write_all(body).await;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("answer");
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("head and body");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("status line: {head}"));
    (status, raw[split + 4..].to_vec())
}

/// A GET of the API: the whole `JsonResult`.
async fn get(addr: &str, path: &str) -> Value {
    let (status, body) = http(addr, "GET", path, &[], b"").await;
    assert_eq!(status, 200, "GET {path}");
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {}", String::from_utf8_lossy(&body)))
}

/// A POST with a JSON body: the whole `JsonResult`.
async fn post(addr: &str, path: &str, body: &Value) -> Value {
    let bytes = serde_json::to_vec(body).unwrap();
    let (status, body) = http(addr, "POST", path, &[("Content-Type", "application/json")], &bytes).await;
    assert_eq!(status, 200, "POST {path}");
    serde_json::from_slice(&body).unwrap()
}

/// The `data` of a successful answer.
fn data(answer: Value) -> Value {
    assert_eq!(answer["status"], 0, "{answer}");
    answer["data"].clone()
}

/// Polls `f` until it returns `Some`, or fails with `what`.
async fn eventually<F, Fut, R>(what: &str, mut f: F) -> R
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<R>>,
{
    let deadline = Instant::now() + T;
    loop {
        if let Some(r) = f().await {
            return r;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `text` as a URL query value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn now_ms() -> i64 {
    i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_api_shows_and_changes_the_cluster() {
    let s = start_standalone(BIN);
    let d = s.dashboard.as_str();

    // The page shell and its script are served.
    let (status, page) = http(d, "GET", "/", &[], b"").await;
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&page).contains("app.js"), "index.html loads the script");

    // Cluster: the standalone's broker with its runtime figures (once it has registered).
    let cluster = eventually("the broker in the cluster list", || async {
        let cluster = data(get(d, "/cluster/list.query").await);
        cluster["brokerServer"]["broker-a"]["0"].is_object().then_some(cluster)
    })
    .await;
    assert!(cluster["clusterInfo"]["clusterAddrTable"]["DefaultCluster"].is_array(), "{cluster}");
    let broker_addr =
        cluster["clusterInfo"]["brokerAddrTable"]["broker-a"]["brokerAddrs"]["0"].as_str().unwrap().to_owned();
    assert_eq!(broker_addr, s.broker);
    assert_eq!(cluster["brokerServer"]["broker-a"]["0"]["brokerVersionDesc"], "V5_3_3");
    assert_eq!(cluster["messageTypes"]["FIFO"], "MESSAGE_TYPE_FIFO");
    let config = data(get(d, &format!("/cluster/brokerConfig.query?brokerAddr={broker_addr}")).await);
    assert_eq!(config["brokerName"], "broker-a");

    // A topic created through the API, with its message type.
    let created = post(
        d,
        "/topic/createOrUpdate.do",
        &json!({ "clusterNameList": ["DefaultCluster"], "topicName": TOPIC, "writeQueueNums": 4,
                 "readQueueNums": 4, "perm": 6, "messageType": "NORMAL" }),
    )
    .await;
    assert_eq!(data(created), json!(true));
    let types = data(get(d, "/topic/list.queryTopicType").await);
    let names = types["topicNameList"].as_array().unwrap();
    let at = names.iter().position(|n| n == TOPIC).expect("the new topic is listed");
    assert_eq!(types["messageTypeList"][at], "NORMAL");
    assert!(names.iter().any(|n| n == "%SYS%TBW102"), "system topics are marked: {names:?}");
    let examined = data(get(d, &format!("/topic/examineTopicConfig.query?topic={TOPIC}")).await);
    assert_eq!(examined[0]["writeQueueNums"], 4);
    assert_eq!(examined[0]["brokerNameList"], json!(["broker-a"]));
    let route = data(get(d, &format!("/topic/route.query?topic={TOPIC}")).await);
    assert_eq!(route["queueDatas"][0]["readQueueNums"], 4);

    // Five traced messages, consumed by a traced push consumer.
    let producer = Producer::new(
        ProducerConfig { group: "DashApiProducer".into(), enable_msg_trace: true, ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&s.namesrv),
    );
    producer.start().await.unwrap();
    let mut sent = Vec::new();
    for i in 0..5 {
        let m = Message::new(TOPIC, format!("dashboard body {i}").into_bytes())
            .with_tags("TagA")
            .with_keys([format!("k-{i}")]);
        sent.push(producer.send(m).await.unwrap());
    }
    let consumer = PushConsumer::new(
        PushConsumerConfig {
            group: GROUP.into(),
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            enable_msg_trace: true,
            ..PushConsumerConfig::default()
        },
        ClientConfig::with_namesrv(&s.namesrv),
    );
    consumer.subscribe(TOPIC, "*").await.unwrap();
    consumer.register_listener(|_| ConsumeStatus::ConsumeSuccess);
    consumer.start().await.unwrap();

    // By key, with the body; by unique id, with each group's consume status.
    let by_key = data(get(d, &format!("/message/queryMessageByTopicAndKey.query?topic={TOPIC}&key=k-2")).await);
    assert_eq!(by_key.as_array().unwrap().len(), 1, "{by_key}");
    assert_eq!(by_key[0]["messageBody"], "dashboard body 2");
    assert_eq!(by_key[0]["properties"]["KEYS"], "k-2");
    assert_eq!(by_key[0]["msgId"], sent[2].msg_id.as_str());
    let tracked = eventually("the group to have consumed message 2", || async {
        let view = data(get(d, &format!("/message/viewMessage.query?topic={TOPIC}&msgId={}", sent[2].msg_id)).await);
        let consumed = view["messageTrackList"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["consumerGroup"] == GROUP && t["trackType"] == "CONSUMED");
        consumed.then_some(view)
    })
    .await;
    assert_eq!(tracked["messageView"]["storeHost"], s.broker.as_str());
    // An offset message id needs no topic.
    let by_offset_id = data(get(d, &format!("/message/viewMessage.query?msgId={}", sent[3].offset_msg_id)).await);
    assert_eq!(by_offset_id["messageView"]["messageBody"], "dashboard body 3");

    // The group online, with its client and queues.
    let row = eventually("the group to be listed with its client", || async {
        let groups = data(get(d, "/consumer/groupList.query?skipSysGroup=true").await);
        groups.as_array().unwrap().iter().find(|g| g["group"] == GROUP && g["count"] == 1).cloned()
    })
    .await;
    assert_eq!(row["consumeType"], "CONSUME_PASSIVELY");
    assert_eq!(row["messageModel"], "CLUSTERING");
    assert_eq!(row["subGroupType"], "NORMAL");
    let connection = data(get(d, &format!("/consumer/consumerConnection.query?consumerGroup={GROUP}")).await);
    // Client ids carry `#` and `@`: encoded as a browser's `encodeURIComponent` does.
    let client_id = encode(connection["connectionSet"][0]["clientId"].as_str().unwrap());
    assert_eq!(connection["connectionSet"][0]["language"], "RUST");
    assert!(connection["subscriptionTable"][TOPIC].is_object(), "{connection}");
    let running = data(
        get(d, &format!("/consumer/consumerRunningInfo.query?consumerGroup={GROUP}&clientId={client_id}&jstack=false"))
            .await,
    );
    assert!(running["mqTable"].as_object().unwrap().keys().any(|k| k.contains(&format!("topic={TOPIC}"))), "{running}");

    // The trace graph: the send, then the group's consume.
    let graph = eventually("the trace records of message 0", || async {
        let g = data(get(d, &format!("/messageTrace/viewMessageTraceGraph.query?msgId={}", sent[0].msg_id)).await);
        let consumed = g["subscriptionNodeList"].as_array().is_some_and(|l| {
            l.iter().any(|s| s["subscriptionGroup"] == GROUP && s["consumeNodeList"][0]["status"] == "success")
        });
        (g["producerNode"].is_object() && consumed).then_some(g)
    })
    .await;
    assert_eq!(graph["producerNode"]["topic"], TOPIC);
    assert_eq!(graph["producerNode"]["groupName"], "DashApiProducer");
    assert_eq!(graph["producerNode"]["traceNode"]["status"], "success");
    let kinds: Vec<&str> =
        graph["messageTraceViews"].as_array().unwrap().iter().filter_map(|v| v["traceType"].as_str()).collect();
    assert!(kinds.contains(&"Pub") && kinds.contains(&"SubAfter"), "{kinds:?}");

    // Offline and three messages behind: the lag shows, per queue too.
    consumer.shutdown().await;
    for i in 5..8 {
        producer
            .send(Message::new(TOPIC, format!("dashboard body {i}").into_bytes()).with_keys([format!("k-{i}")]))
            .await
            .unwrap();
    }
    eventually("a lag of 3", || async {
        let groups = data(get(d, "/consumer/groupList.query?skipSysGroup=true").await);
        let row = groups.as_array().unwrap().iter().find(|g| g["group"] == GROUP).cloned()?;
        (row["diffTotal"] == 3 && row["count"] == 0).then_some(())
    })
    .await;
    let detail = data(get(d, &format!("/consumer/queryTopicByConsumer.query?consumerGroup={GROUP}")).await);
    let topic_row = detail.as_array().unwrap().iter().find(|t| t["topic"] == TOPIC).expect("the topic's row").clone();
    assert_eq!(topic_row["diffTotal"], 3);
    assert_eq!(topic_row["queueStatInfoList"].as_array().unwrap().len(), 4);
    let by_topic = data(get(d, &format!("/topic/queryConsumerByTopic.query?topic={TOPIC}")).await);
    assert_eq!(by_topic[GROUP]["diffTotal"], 3);
    let offline = data(get(d, &format!("/message/viewMessage.query?topic={TOPIC}&msgId={}", sent[1].msg_id)).await);
    assert!(
        offline["messageTrackList"].as_array().unwrap().iter().any(|t| t["trackType"] == "NOT_ONLINE"),
        "{offline}"
    );

    // Paged by time: eight messages, five then three.
    let query = |page: i64| json!({ "topic": TOPIC, "begin": now_ms() - 600_000, "end": now_ms() + 60_000, "pageNum": page, "pageSize": 5 });
    let first = data(post(d, "/message/queryMessagePageByTopic.query", &query(1)).await);
    assert_eq!(first["page"]["totalElements"], 8);
    assert_eq!(first["page"]["content"].as_array().unwrap().len(), 5);
    assert_eq!(first["page"]["number"], 0);
    let second = data(post(d, "/message/queryMessagePageByTopic.query", &query(2)).await);
    assert_eq!(second["page"]["content"].as_array().unwrap().len(), 3);
    let mut bodies: Vec<String> = first["page"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["page"]["content"].as_array().unwrap())
        .map(|m| m["messageBody"].as_str().unwrap().to_owned())
        .collect();
    bodies.sort();
    assert_eq!(bodies, (0..8).map(|i| format!("dashboard body {i}")).collect::<Vec<_>>());
    // A DLQ nobody wrote to is an empty page, not an error.
    let dlq = data(
        post(
            d,
            "/dlqMessage/queryDlqMessageByConsumerGroup.query",
            &json!({
        "topic": format!("%DLQ%{GROUP}"), "begin": 0, "end": now_ms(), "pageNum": 1, "pageSize": 20 }),
        )
        .await,
    );
    assert_eq!(dlq["page"]["totalElements"], 0);

    // Reset to the beginning (the group is offline: offsets committed by the dashboard),
    // then skip the backlog.
    let reset = data(
        post(
            d,
            "/consumer/resetOffset.do",
            &json!({
        "consumerGroupList": [GROUP], "topic": TOPIC, "resetTime": 0, "force": true }),
        )
        .await,
    );
    assert_eq!(reset[GROUP]["status"], true, "{reset}");
    eventually("a lag of 8 after the reset", || async {
        let detail = data(get(d, &format!("/consumer/queryTopicByConsumer.query?consumerGroup={GROUP}")).await);
        detail.as_array().unwrap().iter().any(|t| t["topic"] == TOPIC && t["diffTotal"] == 8).then_some(())
    })
    .await;
    let skipped = data(
        post(
            d,
            "/consumer/skipAccumulate.do",
            &json!({
        "consumerGroupList": [GROUP], "topic": TOPIC, "resetTime": -1, "force": true }),
        )
        .await,
    );
    assert_eq!(skipped[GROUP]["status"], true);
    eventually("no lag after the skip", || async {
        let detail = data(get(d, &format!("/consumer/queryTopicByConsumer.query?consumerGroup={GROUP}")).await);
        detail.as_array().unwrap().iter().any(|t| t["topic"] == TOPIC && t["diffTotal"] == 0).then_some(())
    })
    .await;

    // A test message from the Topic page, found again by its key.
    let result = data(
        post(
            d,
            "/topic/sendTopicMessage.do",
            &json!({
        "topic": TOPIC, "key": "from-ui", "tag": "UiTag", "messageBody": "sent from the dashboard" }),
        )
        .await,
    );
    assert_eq!(result["sendStatus"], "SEND_OK");
    let found = data(get(d, &format!("/message/queryMessageByTopicAndKey.query?topic={TOPIC}&key=from-ui")).await);
    assert_eq!(found[0]["properties"]["TAGS"], "UiTag");

    // Groups: create, read its config, delete.
    let made = post(
        d,
        "/consumer/createOrUpdate.do",
        &json!({
        "clusterNameList": ["DefaultCluster"],
        "subscriptionGroupConfig": { "groupName": "DashMadeGroup", "retryMaxTimes": 5, "consumeEnable": true } }),
    )
    .await;
    assert_eq!(data(made), json!(true));
    let group_config = data(get(d, "/consumer/examineSubscriptionGroupConfig.query?consumerGroup=DashMadeGroup").await);
    assert_eq!(group_config[0]["subscriptionGroupConfig"]["retryMaxTimes"], 5);
    assert_eq!(
        data(get(d, "/consumer/fetchBrokerNameList.query?consumerGroup=DashMadeGroup").await),
        json!(["broker-a"])
    );
    let deleted = post(
        d,
        "/consumer/deleteSubGroup.do",
        &json!({ "groupName": "DashMadeGroup", "brokerNameList": ["broker-a"] }),
    )
    .await;
    assert_eq!(data(deleted), json!(true));
    let groups = data(get(d, "/consumer/groupList.query?skipSysGroup=true").await);
    assert!(!groups.as_array().unwrap().iter().any(|g| g["group"] == "DashMadeGroup"), "{groups}");

    // The producer's connection; the TPS history has the broker.
    let producers =
        data(get(d, &format!("/producer/producerConnection.query?producerGroup=DashApiProducer&topic={TOPIC}")).await);
    assert_eq!(producers["connectionSet"].as_array().unwrap().len(), 1, "{producers}");
    eventually("TPS points of the broker", || async {
        let series = data(get(d, "/dashboard/series.query").await);
        series["brokers"]["broker-a:0"].as_array().is_some_and(|p| !p.is_empty()).then_some(())
    })
    .await;

    // UNSPECIFIED is kept as asked (a blank type is NORMAL).
    let unspecified = json!({ "clusterNameList": ["DefaultCluster"], "topicName": "DashUnspecified",
                               "messageType": "UNSPECIFIED" });
    assert_eq!(data(post(d, "/topic/createOrUpdate.do", &unspecified).await), json!(true));
    let examined = data(get(d, "/topic/examineTopicConfig.query?topic=DashUnspecified").await);
    assert_eq!(examined[0]["messageType"], "UNSPECIFIED");

    // Delete a topic; it leaves the list.
    assert_eq!(
        data(
            post(
                d,
                "/topic/createOrUpdate.do",
                &json!({ "clusterNameList": ["DefaultCluster"], "topicName": "DashDoomed" })
            )
            .await
        ),
        json!(true)
    );
    let (status, body) = http(d, "POST", "/topic/deleteTopic.do?topic=DashDoomed", &[], b"").await;
    assert_eq!((status, data(serde_json::from_slice(&body).unwrap())), (200, json!(true)));
    let topics = data(get(d, "/topic/list.query?skipSysProcess=true").await);
    assert!(!topics["topicList"].as_array().unwrap().iter().any(|t| t == "DashDoomed"), "{topics}");

    // Refusals: each a clear error, and the server goes on.
    let as_get = get(d, "/topic/deleteTopic.do?topic=DashApiTopic").await;
    assert_eq!(as_get["status"], -1);
    assert!(as_get["errMsg"].as_str().unwrap().contains("POST"), "{as_get}");
    let (status, _) =
        http(d, "POST", "/topic/deleteTopic.do?topic=DashApiTopic", &[("Origin", "http://evil.example")], b"").await;
    assert_eq!(status, 403);
    let (status, body) =
        http(d, "POST", "/topic/createOrUpdate.do", &[("Content-Type", "application/json")], b"{not json").await;
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, answer["status"].clone()), (200, json!(-1)));
    let bad_name = post(
        d,
        "/topic/createOrUpdate.do",
        &json!({ "clusterNameList": ["DefaultCluster"], "topicName": "bad topic!" }),
    )
    .await;
    assert_eq!(bad_name["status"], -1, "{bad_name}");
    let unknown_cluster =
        post(d, "/topic/createOrUpdate.do", &json!({ "clusterNameList": ["NoSuchCluster"], "topicName": "X1" })).await;
    assert!(unknown_cluster["errMsg"].as_str().unwrap().contains("NoSuchCluster"), "{unknown_cluster}");
    assert_eq!(get(d, "/topic/nothing.query").await["status"], -1);
    let (status, _) = http(d, "GET", "/no/such/page", &[], b"").await;
    assert_eq!(status, 404);
    let huge = vec![b'x'; 6 * 1024 * 1024];
    let (status, _) =
        http(d, "POST", "/topic/sendTopicMessage.do", &[("Content-Type", "application/json")], &huge).await;
    assert_eq!(status, 413);
    let missing = get(d, "/topic/stats.query").await;
    assert!(missing["errMsg"].as_str().unwrap().contains("topic"), "{missing}");
    // Still serving.
    let stats = data(get(d, &format!("/topic/stats.query?topic={TOPIC}")).await);
    assert_eq!(stats["offsetTable"].as_object().unwrap().len(), 4);

    producer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ops_page_switches_name_servers() {
    let s = start_standalone(BIN);
    let d = s.dashboard.as_str();
    let home = data(get(d, "/ops/homePage.query").await);
    assert_eq!(home["currentNamesrv"], s.namesrv.as_str());
    let bad = http(d, "POST", "/ops/updateNameSvrAddr.do?nameSvrAddrList=nowhere", &[], b"").await;
    let bad: Value = serde_json::from_slice(&bad.1).unwrap();
    assert_eq!(bad["status"], -1, "{bad}");
    // A name server that is not there: the dashboard says so instead of showing stale data.
    let (_, body) = http(d, "POST", "/ops/updateNameSvrAddr.do?nameSvrAddrList=127.0.0.1:1", &[], b"").await;
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["data"], true);
    let cluster = get(d, "/cluster/list.query").await;
    assert_eq!(cluster["status"], -1, "{cluster}");
    assert!(cluster["errMsg"].as_str().unwrap().contains("127.0.0.1:1"), "{cluster}");
    let back = format!("/ops/updateNameSvrAddr.do?nameSvrAddrList={}", s.namesrv);
    let (_, body) = http(d, "POST", &back, &[], b"").await;
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["data"], true);
    assert_eq!(get(d, "/cluster/list.query").await["status"], 0);
    let home = data(get(d, "/ops/homePage.query").await);
    assert_eq!(home["namesvrAddrList"].as_array().unwrap().len(), 2, "{home}");
}

/// With ACL 2.0 on, the dashboard signs as the broker's inner user and manages users and
/// policies through the ACL page's paths.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acl_page_manages_users_and_policies() {
    let conf = "authenticationEnabled=true\nauthorizationEnabled=true\n\
                initAuthenticationUser={\"username\":\"rocketmq\",\"password\":\"12345678\"}\n";
    let s = start_standalone_with_conf(BIN, conf);
    let d = s.dashboard.as_str();
    eventually("the broker in the cluster list", || async {
        let cluster = get(d, "/cluster/list.query").await;
        (cluster["status"] == 0 && cluster["data"]["brokerServer"]["broker-a"].is_object()).then_some(())
    })
    .await;
    let made = post(
        d,
        "/acl/createUser.do",
        &json!({ "userInfo": { "username": "alice", "password": "alice-secret",
        "userType": "Normal", "userStatus": "enable" } }),
    )
    .await;
    assert_eq!(data(made), json!(true));
    let users = data(get(d, "/acl/users.query").await);
    let names: Vec<&str> = users.as_array().unwrap().iter().filter_map(|u| u["username"].as_str()).collect();
    assert!(names.contains(&"alice") && names.contains(&"rocketmq"), "{users}");
    let policy = json!({ "subject": "User:alice", "policies": [{ "policyType": "Custom", "entries": [
        { "resource": ["Topic:DashAclTopic", "Group:DashAclGroup"], "actions": ["Pub", "Sub"],
          "sourceIps": ["127.0.0.1"], "decision": "Allow" }] }] });
    assert_eq!(data(post(d, "/acl/createAcl.do", &policy).await), json!(true));
    let acls = data(get(d, "/acl/acls.query?searchParam=alice").await);
    let entries = acls[0]["policies"][0]["entries"].as_array().expect("alice's entries").clone();
    assert_eq!(acls[0]["subject"], "User:alice", "{acls}");
    assert_eq!(entries.len(), 2, "one entry per resource: {acls}");
    let (status, body) = http(d, "DELETE", "/acl/deleteAcl.do?subject=User%3Aalice", &[], b"").await;
    assert_eq!((status, data(serde_json::from_slice(&body).unwrap())), (200, json!(true)));
    let acls = data(get(d, "/acl/acls.query?searchParam=alice").await);
    assert!(acls.as_array().unwrap().is_empty(), "{acls}");
    let (_, body) = http(d, "DELETE", "/acl/deleteUser.do?username=alice", &[], b"").await;
    assert_eq!(data(serde_json::from_slice(&body).unwrap()), json!(true));
    let users = data(get(d, "/acl/users.query").await);
    assert!(!users.as_array().unwrap().iter().any(|u| u["username"] == "alice"), "{users}");
    // The controller page says there is no controller here.
    assert_eq!(data(get(d, "/controller/state.query").await), json!({ "enabled": false }));
}
