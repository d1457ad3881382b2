//! `ferromq admin` end to end: a `ferromq standalone` process, admin commands run as processes,
//! their tables and JSON checked.

mod common;

use std::process::Command;
use std::time::Duration;

use common::admin::{admin, json, ok, start_server, stdout, until, wait_for_route, BIN};
use ferromq_protocol::body::{JsonBody, TopicRouteData};
use ferromq_protocol::header::GetRouteInfoRequestHeader;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::free_port;

/// The cell under `header` in every table row (for tables whose headers and cells have no spaces).
fn column(table: &str, header: &str) -> Vec<String> {
    let mut lines = table.lines().filter(|l| !l.trim().is_empty());
    let headers: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    let Some(index) = headers.iter().position(|h| *h == header) else { panic!("no column {header} in:\n{table}") };
    lines
        .take_while(|l| l.split_whitespace().count() == headers.len())
        .map(|l| l.split_whitespace().nth(index).unwrap().to_owned())
        .collect()
}

#[test]
fn admin_commands_manage_topics_messages_and_groups_on_a_standalone_server() {
    let server = start_server();
    let ns = server.namesrv.as_str();
    let topic = "AdminTestTopic";

    let clusters = ok(ns, &["clusterList"]);
    assert!(clusters.contains("DefaultCluster") && clusters.contains("broker-a"), "{clusters}");
    let clusters = json(&ok(ns, &["clusterList", "--json"]));
    assert_eq!(clusters[0]["brokerName"], "broker-a");
    assert_eq!(clusters[0]["brokerId"], 0);

    let created = ok(ns, &["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4"]);
    assert!(created.contains("create topic to 127.0.0.1:") && created.contains("success."), "{created}");

    // Attributes go as changes: set, then remove; removing what is gone is refused.
    let attrs = |change: &str| {
        admin(ns, &["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4", "-a", change])
    };
    assert!(attrs("+message.type=FIFO").status.success());
    assert!(attrs("-message.type").status.success());
    let again = attrs("-message.type");
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("attempt to delete a nonexistent key"), "{again:?}");
    assert!(!attrs("+foo=1").status.success(), "unknown attribute");

    let list = stdout(&until(ns, &["topicList"], |out| out.lines().any(|l| l == topic)));
    assert!(list.contains("TBW102"));
    let list = json(&ok(ns, &["topicList", "--json"]));
    assert!(list["topicList"].as_array().unwrap().iter().any(|t| t == topic));

    let route = ok(ns, &["topicRoute", "-t", topic, "-l"]);
    assert_eq!(column(&route, "#BrokerName"), ["broker-a"]);
    assert_eq!(column(&route, "#WriteQueue"), ["4"]);
    let route = json(&ok(ns, &["topicRoute", "-t", topic, "--json"]));
    assert_eq!(route["queueDatas"][0]["readQueueNums"], 4);
    assert_eq!(route["brokerDatas"][0]["brokerName"], "broker-a");

    let sent = ok(ns, &["sendMessage", "-t", topic, "-p", "hello admin", "-k", "order-42", "-c", "TagA", "--json"]);
    let sent = json(&sent);
    assert_eq!(sent["sendStatus"], "SEND_OK");
    let offset_msg_id = sent["offsetMsgId"].as_str().unwrap().to_owned();
    let uniq_id = sent["msgId"].as_str().unwrap().to_owned();
    let queue_id = sent["queueId"].as_i64().unwrap();

    let total_max = |out: &str| -> i64 {
        json(out)["queues"].as_array().unwrap().iter().map(|q| q["maxOffset"].as_i64().unwrap()).sum()
    };
    let status = stdout(&until(ns, &["topicStatus", "-t", topic, "--json"], |out| total_max(out) == 1));
    let status = json(&status);
    let queues = status["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 4);
    assert_eq!(queues[usize::try_from(queue_id).unwrap()]["maxOffset"], 1);

    let by_key = stdout(&until(ns, &["queryMsgByKey", "-t", topic, "-k", "order-42"], |out| out.contains(&uniq_id)));
    assert!(by_key.contains(&offset_msg_id), "{by_key}");
    let by_key = json(&ok(ns, &["queryMsgByKey", "-t", topic, "-k", "order-42", "--json"]));
    assert_eq!(by_key[0]["body"], "hello admin");
    let by_key = ok(ns, &["queryMsgByKey", "-t", topic, "-k", "no-such-key"]);
    assert_eq!(by_key.lines().count(), 1, "only the header: {by_key}");

    let by_id = ok(ns, &["queryMsgById", "-i", &offset_msg_id]);
    assert!(by_id.contains("hello admin") && by_id.contains("[TagA]") && by_id.contains("[order-42]"), "{by_id}");
    let by_id = json(&ok(ns, &["queryMsgById", "-i", &offset_msg_id, "--json"]));
    assert_eq!(by_id[0]["topic"], topic);
    assert_eq!(by_id[0]["msgId"], uniq_id.as_str());
    let by_uniq = json(&ok(ns, &["queryMsgById", "-i", &uniq_id, "-t", topic, "--json"]));
    assert_eq!(by_uniq[0]["offsetMsgId"], offset_msg_id.as_str());
    let qid = queue_id.to_string();
    let by_offset =
        json(&ok(ns, &["queryMsgByOffset", "-t", topic, "-b", "broker-a", "-i", &qid, "-o", "0", "--json"]));
    assert_eq!(by_offset[0]["body"], "hello admin");

    let group = "AdminTestGroup";
    ok(ns, &["updateSubGroup", "-c", "DefaultCluster", "-g", group]);
    let mode = ok(ns, &["setConsumeMode", "-c", "DefaultCluster", "-t", topic, "-g", group, "-m", "POP", "-q", "1"]);
    assert!(mode.contains("success.") && mode.contains("consume mode[POP] popShareQueueNum[1]"), "{mode}");
    let back = ok(ns, &["setConsumeMode", "-c", "DefaultCluster", "-t", topic, "-g", group, "-m", "PULL"]);
    assert!(back.contains("consume mode[PULL]"), "{back}");
    let bad = admin(ns, &["setConsumeMode", "-c", "DefaultCluster", "-t", topic, "-g", group, "-m", "PUSH"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("PULL or POP"), "{bad:?}");
    let retry = admin(ns, &["setConsumeMode", "-c", "DefaultCluster", "-t", "%RETRY%x", "-g", group, "-m", "POP"]);
    assert!(!retry.status.success(), "{retry:?}");
    let consumed = ok(ns, &["consumeMessage", "-t", topic, "-g", group]);
    assert!(consumed.contains("hello admin") && consumed.contains("Consumed 1 message(s)."), "{consumed}");
    let progress = ok(ns, &["consumerProgress", "-g", group, "-t", topic]);
    assert!(progress.contains("Consume Diff Total: 0"), "{progress}");
    assert_eq!(progress.lines().filter(|l| l.starts_with(topic)).count(), 4, "{progress}");
    let table = ok(ns, &["topicStatus", "-t", topic]);
    assert!(table.starts_with("#Broker Name  #QID  #Min Offset  #Max Offset"), "{table}");
    let progress = json(&ok(ns, &["consumerProgress", "-g", group, "-t", topic, "--json"]));
    let consumed_offsets: i64 =
        progress["queues"].as_array().unwrap().iter().map(|q| q["consumerOffset"].as_i64().unwrap()).sum();
    assert_eq!(consumed_offsets, 1, "{progress}");
    assert_eq!(progress["diffTotal"], 0);

    let reset = json(&ok(ns, &["resetOffsetByTime", "-g", group, "-t", topic, "-s", "0", "--json"]));
    assert!(reset["offsets"].as_array().unwrap().iter().all(|q| q["offset"] == 0), "{reset}");
    let progress = json(&ok(ns, &["consumerProgress", "-g", group, "-t", topic, "--json"]));
    assert_eq!(progress["diffTotal"], 1, "{progress}");

    let broker_status = ok(ns, &["brokerStatus", "-c", "DefaultCluster"]);
    assert!(broker_status.contains("commitLogMaxOffset"), "{broker_status}");
    let config = json(&ok(ns, &["getBrokerConfig", "-c", "DefaultCluster", "--json"]));
    let config = config.as_object().unwrap().values().next().unwrap().clone();
    assert_eq!(config["brokerName"], "broker-a");

    let deleted = ok(ns, &["deleteSubGroup", "-c", "DefaultCluster", "-g", group]);
    assert!(deleted.contains("success."), "{deleted}");
    let deleted = ok(ns, &["deleteTopic", "-t", topic, "-c", "DefaultCluster"]);
    assert!(deleted.contains(&format!("delete topic [{topic}] from NameServer success.")), "{deleted}");
    until(ns, &["topicList"], |out| !out.lines().any(|l| l == topic));
    let route = admin(ns, &["topicRoute", "-t", topic]);
    assert!(!route.status.success());
    assert!(String::from_utf8_lossy(&route.stderr).contains("TOPIC_NOT_EXIST"), "{route:?}");
}

#[test]
fn admin_with_an_unreachable_name_server_names_the_address_and_fails() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let out = admin(&addr, &["topicList"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&addr) && stderr.contains("GET_ALL_TOPIC_LIST_FROM_NAMESERVER"), "{stderr}");
    assert!(stderr.contains("connect to"), "{stderr}");
    assert!(out.stdout.is_empty());

    let out = Command::new(BIN).args(["admin", "clusterList"]).env_remove("NAMESRV_ADDR").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("NAMESRV_ADDR"));
}

/// Sends a HEART_BEAT announcing one consumer group (subscribed to `topic`) and one producer
/// group for `client_id` to the broker at `broker`, over `client`'s connection, which stays
/// open as long as `client` lives.
async fn heartbeat(
    client: &RemotingClient,
    broker: &str,
    client_id: &str,
    consumer: &str,
    producer: &str,
    topic: &str,
) {
    use ferromq_protocol::body::{ConsumerData, HeartbeatData, JsonBody, ProducerData, SubscriptionData};
    let subscription = SubscriptionData { topic: topic.to_owned(), sub_string: "*".to_owned(), ..Default::default() };
    let data = HeartbeatData {
        client_id: client_id.to_owned(),
        consumer_data_set: vec![ConsumerData {
            group_name: consumer.to_owned(),
            subscription_data_set: vec![subscription],
            ..Default::default()
        }],
        producer_data_set: vec![ProducerData { group_name: producer.to_owned() }],
        ..Default::default()
    };
    let request = RemotingCommand::request(request_code::HEART_BEAT).with_body(data.encode());
    let response = client.invoke(broker, request, Duration::from_secs(5)).await.unwrap();
    assert_eq!(response.code, response_code::SUCCESS, "HEART_BEAT refused: {:?}", response.remark);
}

#[test]
fn admin_updates_broker_config_lists_topic_clusters_groups_and_live_connections() {
    let server = start_server();
    let ns = server.namesrv.as_str();
    let topic = "AdminMoreTopic";
    let group = "AdminMoreGroup";
    let producer_group = "AdminMoreProducerGroup";
    let client_id = "127.0.0.1@admin-more-test";

    let clusters = json(&ok(ns, &["clusterList", "--json"]));
    let broker = clusters[0]["brokerAddr"].as_str().unwrap().to_owned();

    // updateBrokerConfig on one broker (-b), then on a cluster (-c), seen by getBrokerConfig.
    let updated = ok(ns, &["updateBrokerConfig", "-b", &broker, "-k", "maxMessageSize", "-v", "2097152"]);
    assert_eq!(updated.trim(), format!("update broker config success, {broker}"));
    let config = ok(ns, &["getBrokerConfig", "-b", &broker]);
    assert!(config.lines().any(|l| l.starts_with("maxMessageSize ") && l.ends_with("=  2097152")), "{config}");
    let updated = json(&ok(
        ns,
        &["updateBrokerConfig", "-c", "DefaultCluster", "-k", "maxMessageSize", "-v", "3145728", "--json"],
    ));
    assert_eq!(updated["brokers"][0], broker.as_str(), "{updated}");
    assert_eq!(updated["value"], "3145728");
    let config = json(&ok(ns, &["getBrokerConfig", "-b", &broker, "--json"]));
    assert_eq!(config[broker.as_str()]["maxMessageSize"], "3145728", "{config}");
    let persisted = server.data.path().join("data").join("store").join("config").join("broker.properties");
    let persisted = std::fs::read_to_string(&persisted).unwrap();
    assert!(persisted.lines().any(|l| l == "maxMessageSize=3145728"), "{persisted}");
    let refused = admin(ns, &["updateBrokerConfig", "-b", &broker, "-k", "brokerConfigPath", "-v", "/tmp/x"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("NO_PERMISSION"), "{refused:?}");

    // topicClusterList.
    ok(ns, &["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2"]);
    let listed = stdout(&until(ns, &["topicClusterList", "-t", topic], |out| out == "DefaultCluster\n"));
    assert_eq!(listed, "DefaultCluster\n");
    let listed = json(&ok(ns, &["topicClusterList", "-t", topic, "--json"]));
    assert_eq!(listed["clusters"], ferromq_client::admin::json!(["DefaultCluster"]), "{listed}");
    assert!(!admin(ns, &["topicClusterList", "-t", "NoSuchTopicHere"]).status.success());

    // A group with offsets: one message sent and consumed.
    ok(ns, &["updateSubGroup", "-c", "DefaultCluster", "-g", group]);
    ok(ns, &["sendMessage", "-t", topic, "-p", "more"]);
    until(ns, &["topicStatus", "-t", topic, "--json"], |out| {
        json(out)["queues"].as_array().unwrap().iter().map(|q| q["maxOffset"].as_i64().unwrap()).sum::<i64>() == 1
    });
    let consumed = ok(ns, &["consumeMessage", "-t", topic, "-g", group]);
    assert!(consumed.contains("Consumed 1 message(s)."), "{consumed}");

    // resetOffsetByTime with RocketMQ's date format (UTC): back to the start, then past the end.
    let reset =
        json(&ok(ns, &["resetOffsetByTime", "-g", group, "-t", topic, "-s", "1970-01-01#00:00:00:000", "--json"]));
    assert_eq!(reset["timestamp"], 0);
    assert!(reset["offsets"].as_array().unwrap().iter().all(|q| q["offset"] == 0), "{reset}");
    let progress = json(&ok(ns, &["consumerProgress", "-g", group, "-t", topic, "--json"]));
    assert_eq!(progress["diffTotal"], 1, "{progress}");
    let reset = ok(ns, &["resetOffsetByTime", "-g", group, "-t", topic, "-s", "2999-12-31#23:59:59:999"]);
    assert!(reset.contains("timestamp(ms)[32503679999999]"), "{reset}");
    let progress = json(&ok(ns, &["consumerProgress", "-g", group, "-t", topic, "--json"]));
    assert_eq!(progress["diffTotal"], 0, "{progress}");
    let bad = admin(ns, &["resetOffsetByTime", "-g", group, "-t", topic, "-s", "2024-13-01#00:00:00:000"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("yyyy-MM-dd#HH:mm:ss:SSS"), "{bad:?}");

    // statsAll: today's one message in and out, nothing left to consume.
    let stats = json(&ok(ns, &["statsAll", "-t", topic, "--json"]));
    let row =
        stats.as_array().unwrap().iter().find(|r| r["group"] == group).unwrap_or_else(|| panic!("{stats}")).clone();
    assert_eq!((row["inMsg24Hour"].as_i64(), row["outMsg24Hour"].as_i64()), (Some(1), Some(1)), "{row}");
    assert_eq!(row["accumulation"], 0, "{row}");
    let table = ok(ns, &["statsAll", "-a"]);
    assert!(table.lines().any(|l| l.starts_with(topic) && l.contains(group)), "{table}");

    // skipAccumulatedMessage: two new messages skipped; cloneGroupOffset copies the result.
    ok(ns, &["sendMessage", "-t", topic, "-p", "skip-1"]);
    ok(ns, &["sendMessage", "-t", topic, "-p", "skip-2"]);
    until(ns, &["consumerProgress", "-g", group, "-t", topic, "--json"], |out| json(out)["diffTotal"] == 2);
    let skipped = ok(ns, &["skipAccumulatedMessage", "-g", group, "-t", topic]);
    assert!(skipped.contains("#brokerName"), "{skipped}");
    let progress = json(&ok(ns, &["consumerProgress", "-g", group, "-t", topic, "--json"]));
    assert_eq!(progress["diffTotal"], 0, "{progress}");
    let clone_group = "AdminMoreCloneGroup";
    ok(ns, &["updateSubGroup", "-c", "DefaultCluster", "-g", clone_group]);
    let cloned = ok(ns, &["cloneGroupOffset", "-s", group, "-d", clone_group, "-t", topic, "-o", "true"]);
    assert_eq!(
        cloned.trim(),
        format!("clone group offset success. srcGroup[{group}], destGroup=[{clone_group}], topic[{topic}]")
    );
    let progress = json(&ok(ns, &["consumerProgress", "-g", clone_group, "-t", topic, "--json"]));
    assert_eq!(progress["diffTotal"], 0, "the clone is at the end too: {progress}");
    let offsets: i64 =
        progress["queues"].as_array().unwrap().iter().map(|q| q["consumerOffset"].as_i64().unwrap()).sum();
    assert_eq!(offsets, 3, "{progress}");

    // updateTopicList and updateSubGroupList from JSON files; getConsumerConfig reads back.
    let files = tempfile::tempdir().unwrap();
    let topics_file = files.path().join("topics.json");
    std::fs::write(
        &topics_file,
        r#"[{"topicName":"AdminListA","readQueueNums":2,"writeQueueNums":2,"perm":6,"attributes":{"+message.type":"FIFO"}},{"topicName":"AdminListB"}]"#,
    )
    .unwrap();
    let listed = ok(ns, &["updateTopicList", "-c", "DefaultCluster", "-f", topics_file.to_str().unwrap()]);
    assert_eq!(
        listed.trim(),
        format!("submit batch of topic config to {broker} success, please check the result later.")
    );
    until(ns, &["topicRoute", "-t", "AdminListA", "--json"], |out| json(out)["queueDatas"][0]["writeQueueNums"] == 2);
    until(ns, &["topicRoute", "-t", "AdminListB", "--json"], |out| json(out)["queueDatas"][0]["writeQueueNums"] == 16);
    let groups_file = files.path().join("groups.json");
    std::fs::write(&groups_file, r#"[{"groupName":"AdminListG1","retryMaxTimes":3},{"groupName":"AdminListG2"}]"#)
        .unwrap();
    let listed = ok(ns, &["updateSubGroupList", "-b", &broker, "-f", groups_file.to_str().unwrap()]);
    assert_eq!(
        listed.trim(),
        format!("submit batch of group config to {broker} success, please check the result later.")
    );
    let config = ok(ns, &["getConsumerConfig", "-g", "AdminListG1"]);
    assert!(config.starts_with(&format!("=============================DefaultCluster:{broker}")), "{config}");
    assert!(config.lines().any(|l| l.starts_with("retryMaxTimes ") && l.ends_with("=  3")), "{config}");
    // exportMetadata: the user topics and groups of the cluster, then one broker's topics.
    let exported = ok(ns, &["exportMetadata", "-c", "DefaultCluster", "-f", files.path().to_str().unwrap()]);
    let metadata_file = files.path().join("metadata.json");
    assert_eq!(exported.trim(), format!("export {} success", metadata_file.display()));
    let metadata = json(&std::fs::read_to_string(&metadata_file).unwrap());
    assert_eq!(metadata["topicConfigTable"]["AdminListA"]["writeQueueNums"], 2, "{metadata}");
    assert!(metadata["topicConfigTable"].get("TBW102").is_none(), "no system topic");
    assert!(metadata["topicConfigTable"].as_object().unwrap().keys().all(|t| !t.starts_with("%RETRY%")));
    assert_eq!(metadata["subscriptionGroupTable"]["AdminListG1"]["retryMaxTimes"], 3, "{metadata}");
    assert!(metadata["subscriptionGroupTable"].get("TOOLS_CONSUMER").is_none(), "no predefined group");
    assert!(metadata["exportTime"].as_i64().is_some());
    ok(ns, &["exportMetadata", "-b", &broker, "-t", "-s", "-f", files.path().to_str().unwrap()]);
    let topics = json(&std::fs::read_to_string(files.path().join("topic.json")).unwrap());
    assert_eq!(topics["topicConfigTable"][topic]["writeQueueNums"], 2, "{topics}");
    assert!(topics.get("dataVersion").is_some());
    let missing = admin(ns, &["updateTopicList", "-b", &broker, "-f", "/no/such/file.json"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("does not exists"), "{missing:?}");

    // updateOrderConf on the name server's KV config.
    let put = ok(ns, &["updateOrderConf", "-t", topic, "-m", "put", "-v", "broker-x:2"]);
    assert_eq!(put.trim(), format!("update orderConf success. topic=[{topic}], orderConf=[broker-x:2]"));
    let got = json(&ok(ns, &["updateOrderConf", "-t", topic, "-m", "get", "--json"]));
    assert_eq!(got["orderConf"], "broker-x:2", "{got}");
    ok(ns, &["updateOrderConf", "-t", topic, "-m", "delete"]);
    let got = json(&ok(ns, &["updateOrderConf", "-t", topic, "-m", "get", "--json"]));
    assert!(got["orderConf"].is_null(), "{got}");

    // updateTopicPerm: read only on the cluster, then read-write again on the broker.
    let perm_of = |out: &str| json(out)["queueDatas"][0]["perm"].as_i64();
    let updated = ok(ns, &["updateTopicPerm", "-t", topic, "-p", "4", "-c", "DefaultCluster"]);
    assert_eq!(updated.trim(), format!("update topic perm from 6 to 4 in {broker} success."));
    until(ns, &["topicRoute", "-t", topic, "--json"], |out| perm_of(out) == Some(4));
    let same = ok(ns, &["updateTopicPerm", "-t", topic, "-p", "4", "-b", &broker]);
    assert_eq!(same.trim(), "new perm equals to the old one!");
    ok(ns, &["updateTopicPerm", "-t", topic, "-p", "6", "-b", &broker]);
    until(ns, &["topicRoute", "-t", topic, "--json"], |out| perm_of(out) == Some(6));

    // consumerProgress without -g before any client is online: the group is listed OFFLINE.
    let all = json(&ok(ns, &["consumerProgress", "--json"]));
    let row = all.as_array().unwrap().iter().find(|r| r["group"] == group).unwrap_or_else(|| panic!("{all}")).clone();
    assert_eq!(row["count"], 0, "{row}");
    assert_eq!(row["version"], "OFFLINE", "{row}");
    assert_eq!(row["diffTotal"], 0, "{row}");
    // The one message pulled above, within the broker's one-minute window.
    let tps = row["consumeTps"].as_f64().unwrap_or_else(|| panic!("{row}"));
    assert!(tps > 0.0 && tps <= 1.0, "{row}");

    // A live client: a HEART_BEAT over a connection kept open while the commands run.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    // It consumes what the broker hands it directly (CONSUME_MESSAGE_DIRECTLY) and says so.
    let mut dispatcher = ferromq_remoting::Dispatcher::new();
    dispatcher.register_sync(request_code::CONSUME_MESSAGE_DIRECTLY, |_conn, req| {
        let body = r#"{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":1}"#;
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body.as_bytes().to_vec()))
    });
    let client = RemotingClient::with_handler(ClientConfig::default(), std::sync::Arc::new(dispatcher));
    rt.block_on(heartbeat(&client, &broker, client_id, group, producer_group, topic));

    let consumers = ok(ns, &["consumerConnection", "-g", group]);
    assert_eq!(column(&consumers, "#ClientId"), [client_id], "{consumers}");
    assert!(consumers.contains("MessageModel: Clustering"), "{consumers}");
    let consumers = json(&ok(ns, &["consumerConnection", "-g", group, "-b", &broker, "--json"]));
    assert_eq!(consumers["connectionSet"][0]["clientId"], client_id, "{consumers}");
    assert!(consumers["subscriptionTable"].get(topic).is_some(), "{consumers}");

    let producers = ok(ns, &["producerConnection", "-g", producer_group, "-t", topic]);
    assert_eq!(column(&producers, "#ClientId"), [client_id], "{producers}");
    let producers = json(&ok(ns, &["producerConnection", "-g", producer_group, "-t", topic, "--json"]));
    assert_eq!(producers["connectionSet"][0]["clientId"], client_id, "{producers}");
    // Every producer group of the broker at once.
    let all_producers = ok(ns, &["producer", "-b", &broker]);
    assert!(
        all_producers.contains(&format!("producer group ({producer_group}) instances are below:")),
        "{all_producers}"
    );
    let (_, table) = all_producers.split_once('\n').unwrap();
    assert_eq!(column(table, "#ClientId"), [client_id], "{all_producers}");
    let all_producers = json(&ok(ns, &["producer", "-b", &broker, "--json"]));
    assert_eq!(all_producers[producer_group][0]["clientId"], client_id, "{all_producers}");
    // Every group's progress on the broker: the group is online and at the end of its topic.
    let stats = ok(ns, &["brokerConsumeStats", "-b", &broker]);
    assert!(stats.contains(group) && stats.trim_end().ends_with("Diff Total: 0"), "{stats}");
    let stats = json(&ok(ns, &["brokerConsumeStats", "-b", &broker, "-o", "true", "--json"]));
    assert_eq!(stats["queues"].as_array().map(Vec::len), Some(0), "no ordered topic: {stats}");

    let all = ok(ns, &["consumerProgress"]);
    assert!(all.starts_with("#Group"), "{all}");
    let line = all.lines().find(|l| l.split_whitespace().next() == Some(group)).unwrap_or_else(|| panic!("{all}"));
    let mut cells: Vec<&str> = line.split_whitespace().collect();
    // #TPS is the one-minute consume rate as a whole number (the one pull above: 0 or 1).
    assert!(matches!(cells.get(5), Some(&("0" | "1"))), "{all}");
    cells.remove(5);
    assert_eq!(cells, [group, "1", "V5_3_3", "PUSH", "CLUSTERING", "0"], "{all}");
    let all = json(&ok(ns, &["consumerProgress", "--json"]));
    let row = all.as_array().unwrap().iter().find(|r| r["group"] == group).unwrap_or_else(|| panic!("{all}")).clone();
    assert_eq!(row["count"], 1, "{row}");
    assert_eq!(row["consumeType"], "PUSH", "{row}");
    assert_eq!(row["messageModel"], "CLUSTERING", "{row}");
    // Groups without offsets (the built-in ones here) are not listed.
    assert!(all.as_array().unwrap().iter().all(|r| r["group"] != "TOOLS_CONSUMER"), "{all}");

    // The store clean-ups: answered, and the live topic keeps its messages.
    for command in ["cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog"] {
        assert_eq!(ok(ns, &[command]).trim(), "success", "{command} on every master");
        assert_eq!(ok(ns, &[command, "-b", &broker]).trim(), "success", "{command} -b");
    }
    let status = json(&ok(ns, &["topicStatus", "-t", topic, "--json"]));
    let kept: i64 = status["queues"].as_array().unwrap().iter().map(|q| q["maxOffset"].as_i64().unwrap()).sum();
    assert_eq!(kept, 3, "{status}");
    // queryCq on a queue that holds messages.
    let queue =
        status["queues"].as_array().unwrap().iter().find(|q| q["maxOffset"].as_i64() > Some(0)).unwrap().clone();
    let (queue_id, max) = (queue["queueId"].to_string(), queue["maxOffset"].as_i64().unwrap());
    let cq = ok(ns, &["queryCq", "-t", topic, "-q", &queue_id, "-i", "0", "-g", group]);
    assert!(cq.contains(&format!("Queue data: \nmax: {max}, min: 0")), "{cq}");
    assert!(cq.contains("idx: 0\nConsumeQueueData{physicOffset="), "{cq}");
    assert_eq!(cq.matches("idx: ").count() as i64, max, "{cq}");
    let past = ok(ns, &["queryCq", "-t", topic, "-q", &queue_id, "-i", "100"]);
    assert_eq!(past.trim(), format!("Index 100 of {queue_id}@{topic} is not exist!"));

    // queryMsgByUniqueKey, and the online client consuming the message again (-g -d).
    let sent = json(&ok(ns, &["sendMessage", "-t", topic, "-p", "direct", "--json"]));
    let uniq = sent["msgId"].as_str().unwrap().to_owned();
    let found = stdout(&until(ns, &["queryMsgByUniqueKey", "-i", &uniq, "-t", topic], |out| out.contains("direct")));
    assert!(found.contains(&uniq), "{found}");
    let consumed = ok(ns, &["queryMsgByUniqueKey", "-i", &uniq, "-t", topic, "-g", group, "-d", client_id]);
    assert!(consumed.contains(r#""consumeResult":"CR_SUCCESS""#), "{consumed}");

    // Java's VIP channel, listenPort - 2, serves the same requests (4.x clients with
    // vipChannelEnabled send there).
    let port: u16 = broker.rsplit(':').next().unwrap().parse().unwrap();
    let vip = format!("127.0.0.1:{}", port - 2);
    let request = RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO);
    let r = rt.block_on(client.invoke(&vip, request, Duration::from_secs(5))).unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    // Name-server settings and KV config.
    let config = ok(ns, &["getNamesrvConfig"]);
    assert!(config.starts_with(&format!("============{ns}============")), "{config}");
    let updated = ok(ns, &["updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true"]);
    assert_eq!(updated, format!("update name server config success!{ns}\norderMessageEnable : true\n"));
    let config = json(&ok(ns, &["getNamesrvConfig", "--json"]));
    assert_eq!(config[ns]["orderMessageEnable"], "true", "{config}");
    let put = ok(ns, &["updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", topic, "-v", "broker-x:4"]);
    assert_eq!(put.trim(), "create or update kv config to namespace success.");
    let deleted = ok(ns, &["deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", topic]);
    assert_eq!(deleted.trim(), "delete kv config from namespace success.");

    // A broker group's write permission, taken away and given back on the name server.
    let broker_name = clusters[0]["brokerName"].as_str().unwrap().to_owned();
    let route_perm = || json(&ok(ns, &["topicRoute", "-t", topic, "--json"]))["queueDatas"][0]["perm"].clone();
    // The broker's own registration (every 30 s) restores its permission, so a wipe that
    // one lands between is repeated.
    let mut count = 0;
    for _ in 0..3 {
        let wiped = ok(ns, &["wipeWritePerm", "-b", &broker_name]);
        let prefix = format!("wipe write perm of broker[{broker_name}] in name server[{ns}] OK, ");
        count = wiped.trim().strip_prefix(&prefix).unwrap_or_else(|| panic!("{wiped}")).parse().unwrap();
        assert!(count > 0, "{wiped}");
        if route_perm() == 4 {
            break;
        }
    }
    assert_eq!(route_perm(), 4, "read only");
    let added = json(&ok(ns, &["addWritePerm", "-b", &broker_name, "--json"]));
    assert_eq!(added["addTopicCount"][ns], count, "{added}");
    assert_eq!(route_perm(), 6, "read and write again");

    rt.block_on(client.shutdown());
}

/// A broker started with `ROCKETMQ_ZONE` registers in that zone, and a client asking in zone
/// mode is served its zone's routes (Java's `DynamicalExtFieldRPCHook` on both sides).
#[test]
fn a_broker_in_a_zone_registers_it_and_zone_mode_clients_get_its_routes() {
    let server = ferromq_testkit::start_standalone_with_env(BIN, &[("ROCKETMQ_ZONE", "zone-a")]);
    wait_for_route(&server.namesrv, "TBW102");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let route_brokers = |zone: &str| {
            let client =
                RemotingClient::new(ClientConfig::default().with_zone(Some(zone.to_owned()), Some("true".to_owned())));
            let namesrv = server.namesrv.clone();
            async move {
                let header =
                    GetRouteInfoRequestHeader { topic: "TBW102".into(), accept_standard_json_only: Some(true) };
                let request = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(&header);
                let response = client.invoke(&namesrv, request, Duration::from_secs(5)).await.unwrap();
                client.shutdown().await;
                assert_eq!(response.code, response_code::SUCCESS, "{:?}", response.remark);
                TopicRouteData::decode(&response.body).unwrap().broker_datas
            }
        };
        let own = route_brokers("ZONE-A").await;
        assert_eq!(own.len(), 1);
        assert_eq!(own[0].zone_name.as_deref(), Some("zone-a"), "the broker registered its zone");
        assert!(route_brokers("zone-b").await.is_empty(), "another zone's client does not see it");
    });
}

/// What the standalone banner promises, on a fresh store: `sendMessage` to a topic that does
/// not exist creates it (through TBW102's route, as Java's producer does), and the message is
/// consumable at once: one `consumeMessage` right after, no retry. A group that does not
/// exist is an error, not an empty table.
#[test]
fn a_fresh_standalone_takes_a_first_message_to_a_new_topic_and_serves_it_at_once() {
    let server = start_server();
    let ns = &server.namesrv;
    let sent = json(&ok(ns, &["sendMessage", "-t", "BrandNewTopic", "-p", "first words", "--json"]));
    assert_eq!(sent["sendStatus"], "SEND_OK", "{sent}");
    let consumed = ok(ns, &["consumeMessage", "-t", "BrandNewTopic"]);
    assert!(consumed.contains("first words") && consumed.contains("Consumed 1 message(s)."), "{consumed}");

    let out = admin(ns, &["consumerProgress", "-g", "nosuchgroup"]);
    assert!(!out.status.success(), "an unknown group is an error");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nosuchgroup") && stderr.contains("not found"), "{stderr}");
}
