//! `ferromq admin` end to end for the browsing, RT, allocation, export and trace commands
//! (printMsg, printMsgByQueue, decodeMessageId, sendMsgStatus, clusterRT, allocateMQ,
//! exportConfigs, exportMetrics, queryMsgTraceById): a `ferromq standalone` process, data
//! sent with raw SEND_MESSAGE_V2 requests, the commands run as processes and what they print
//! checked.

mod common;

use std::process::Command;
use std::time::Duration;

use common::admin::{admin, fails, json, ok, send_all, start_server, stderr, stdout, until, wait_for_route, BIN};
use ferromq_testkit::{send_request, start_standalone_with_conf};

const CLUSTER: &str = "DefaultCluster";
const BROKER: &str = "broker-a";

/// Creates `topic` with `queues` queues on the cluster and waits for its route.
fn create_topic(ns: &str, topic: &str, queues: u32) {
    let n = queues.to_string();
    ok(ns, &["updateTopic", "-c", CLUSTER, "-t", topic, "-r", &n, "-w", &n]);
    wait_for_route(ns, topic);
}

/// A message with a unique id and a tag, as a Java producer sends it.
fn tagged(topic: &str, queue_id: i32, body: &str, uniq: &str, tag: &str) -> ferromq_protocol::RemotingCommand {
    send_request(topic, queue_id, body.as_bytes(), &[("UNIQ_KEY", uniq), ("TAGS", tag)])
}

fn now_ms() -> i64 {
    let elapsed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    i64::try_from(elapsed.as_millis()).unwrap()
}

/// The lines of `text` that start with `prefix`.
fn lines_starting<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}

#[test]
fn print_msg_prints_every_queue_over_a_time_range_with_tag_filter_and_progress() {
    let server = start_server();
    let ns = server.namesrv.as_str();
    let topic = "PrintMsgTopic";
    create_topic(ns, topic, 2);
    // Two messages per queue, then, after a gap, one more per queue.
    send_all(
        &server.broker,
        vec![
            tagged(topic, 0, "early-q0-a", "UNIQ-E0A", "TagA"),
            tagged(topic, 0, "early-q0-b", "UNIQ-E0B", "TagB"),
            tagged(topic, 1, "early-q1-a", "UNIQ-E1A", "TagA"),
            tagged(topic, 1, "early-q1-b", "UNIQ-E1B", "TagB"),
        ],
    );
    std::thread::sleep(Duration::from_millis(50));
    let boundary = now_ms();
    std::thread::sleep(Duration::from_millis(50));
    send_all(
        &server.broker,
        vec![tagged(topic, 0, "late-q0", "UNIQ-L0", "TagA"), tagged(topic, 1, "late-q1", "UNIQ-L1", "TagB")],
    );

    let out = until(ns, &["printMsg", "-t", topic], |s| s.matches("MSGID: ").count() == 6);
    let text = stdout(&out);
    assert_eq!(
        lines_starting(&text, "minOffset="),
        [
            "minOffset=0, maxOffset=3, MessageQueue [topic=PrintMsgTopic, brokerName=broker-a, queueId=0]",
            "minOffset=0, maxOffset=3, MessageQueue [topic=PrintMsgTopic, brokerName=broker-a, queueId=1]",
        ],
        "{text}"
    );
    let messages = lines_starting(&text, "MSGID: ");
    let ids_and_bodies: Vec<(&str, &str)> =
        messages.iter().map(|l| (l.split_whitespace().nth(1).unwrap(), l.rsplit_once(" BODY: ").unwrap().1)).collect();
    assert_eq!(
        ids_and_bodies,
        [
            ("UNIQ-E0A", "early-q0-a"),
            ("UNIQ-E0B", "early-q0-b"),
            ("UNIQ-L0", "late-q0"),
            ("UNIQ-E1A", "early-q1-a"),
            ("UNIQ-E1B", "early-q1-b"),
            ("UNIQ-L1", "late-q1"),
        ],
        "{text}"
    );
    assert!(messages[0].contains("MessageExt [brokerName=broker-a, queueId=0, storeSize="), "{}", messages[0]);
    assert!(messages[0].contains("queueOffset=0,") && messages[2].contains("queueOffset=2,"), "{text}");
    assert!(messages[0].contains("toString()=Message{topic='PrintMsgTopic', flag=0, properties={"), "{text}");
    assert!(messages[0].contains("TAGS=TagA") && messages[0].contains("MAX_OFFSET=3"), "{text}");
    assert_eq!(text.matches("--------------------------------------------------------").count(), 2, "{text}");
    // Progress goes to stderr, one line per queue.
    let progress = stderr(&out);
    assert!(progress.contains("queue 1/2") && progress.contains("queue 2/2"), "{progress}");

    // -b: only what was stored after the boundary; -s: only TagA; -d false: no bodies.
    let boundary = boundary.to_string();
    let late = ok(ns, &["printMsg", "-t", topic, "-b", &boundary, "-d", "false"]);
    assert_eq!(
        lines_starting(&late, "minOffset=")
            .iter()
            .map(|l| l.split(", MessageQueue").next().unwrap())
            .collect::<Vec<_>>(),
        ["minOffset=2, maxOffset=3", "minOffset=2, maxOffset=3"],
        "{late}"
    );
    let late_ids: Vec<&str> =
        lines_starting(&late, "MSGID: ").iter().map(|l| l.split_whitespace().nth(1).unwrap()).collect();
    assert_eq!(late_ids, ["UNIQ-L0", "UNIQ-L1"], "{late}");
    assert!(late.contains("BODY: NOT PRINT BODY") && !late.contains("BODY: late-q0"), "{late}");
    let early = ok(ns, &["printMsg", "-t", topic, "-e", &boundary, "-s", "TagA"]);
    let bodies: Vec<&str> =
        lines_starting(&early, "MSGID: ").iter().map(|l| l.rsplit_once(" BODY: ").unwrap().1).collect();
    assert_eq!(bodies, ["early-q0-a", "early-q1-a"], "{early}");

    let stderr = fails(ns, &["printMsg", "-t", "NoSuchTopic"]);
    assert!(stderr.contains("NoSuchTopic") && stderr.contains("TOPIC_NOT_EXIST"), "{stderr}");
    let stderr = fails(ns, &["printMsg", "-t", topic, "-c", "GBK"]);
    assert!(stderr.contains("charset GBK is not supported"), "{stderr}");
    let stderr = fails(ns, &["printMsg", "-t", topic, "-b", "yesterday"]);
    assert!(stderr.contains("-b \"yesterday\" is neither"), "{stderr}");
}

#[test]
fn print_msg_by_queue_prints_one_queue_and_counts_tags() {
    let server = start_server();
    let ns = server.namesrv.as_str();
    let topic = "ByQueueTopic";
    create_topic(ns, topic, 2);
    send_all(
        &server.broker,
        vec![
            tagged(topic, 0, "b0", "U0", "TagA"),
            tagged(topic, 0, "b1", "U1", "TagB"),
            tagged(topic, 0, "b2", "U2", "TagA"),
            tagged(topic, 0, "b3", "U3", "TagA"),
            tagged(topic, 1, "other-queue", "U4", "TagC"),
        ],
    );
    let args = ["printMsgByQueue", "-t", topic, "-a", BROKER, "-i", "0", "-f", "true"];
    let counted = stdout(&until(ns, &args, |s| s.contains("Count: 3")));
    assert_eq!(
        counted.lines().collect::<Vec<_>>(),
        [format!("Tag: {:<30} Count: 3", "TagA"), format!("Tag: {:<30} Count: 1", "TagB")],
        "{counted}"
    );
    assert!(!counted.contains("MSGID"), "-p is false by default: {counted}");

    let printed = ok(ns, &["printMsgByQueue", "-t", topic, "-a", BROKER, "-i", "0", "-p", "true", "-d", "true"]);
    let bodies: Vec<&str> =
        lines_starting(&printed, "MSGID: ").iter().map(|l| l.rsplit_once(" BODY: ").unwrap().1).collect();
    assert_eq!(bodies, ["b0", "b1", "b2", "b3"], "{printed}");
    let filtered = json(&ok(
        ns,
        &["printMsgByQueue", "-t", topic, "-a", BROKER, "-i", "0", "-p", "true", "-s", "TagB", "-f", "true", "--json"],
    ));
    assert_eq!(filtered["messages"].as_array().unwrap().len(), 1, "{filtered}");
    assert_eq!(filtered["messages"][0]["msgId"], "U1", "{filtered}");
    assert_eq!(filtered["tagCounts"][0]["tag"], "TagB", "{filtered}");
    assert_eq!(filtered["tagCounts"][0]["count"], 1, "{filtered}");

    let stderr = fails(ns, &["printMsgByQueue", "-t", topic, "-a", BROKER, "-i", "7"]);
    assert!(stderr.contains("has no readable queue 7 on broker broker-a"), "{stderr}");
    let stderr = fails(ns, &["printMsgByQueue", "-t", topic, "-a", "broker-z", "-i", "0"]);
    assert!(stderr.contains("broker-z"), "{stderr}");
}

#[test]
fn decode_message_id_shows_store_host_and_commit_log_offset_without_a_server() {
    let server = start_server();
    let ns = server.namesrv.as_str();
    let topic = "DecodeIdTopic";
    create_topic(ns, topic, 1);
    let ids = send_all(
        &server.broker,
        vec![tagged(topic, 0, "first", "D1", "T"), tagged(topic, 0, "second body", "D2", "T")],
    );
    // The CommitLog offsets, as the broker reports them for each message.
    let offsets: Vec<String> = ids
        .iter()
        .map(|id| {
            let shown = ok(ns, &["queryMsgById", "-i", id]);
            let line = shown.lines().find(|l| l.starts_with("CommitLog Offset:")).unwrap();
            line.split_whitespace().last().unwrap().to_owned()
        })
        .collect();
    assert_ne!(offsets[0], offsets[1]);

    // No name server is needed (and none given).
    let joined = ids.join(",");
    let out = Command::new(BIN)
        .args(["admin", "decodeMessageId", "-i", &joined])
        .env_remove("NAMESRV_ADDR")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let rows: Vec<Vec<&str>> = text.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        rows,
        [
            vec![ids[0].as_str(), server.broker.as_str(), offsets[0].as_str()],
            vec![ids[1].as_str(), server.broker.as_str(), offsets[1].as_str()],
        ],
        "{text}"
    );
    let decoded = json(&ok(ns, &["decodeMessageId", "-i", &ids[1], "--json"]));
    assert_eq!(decoded[0]["ip"], "127.0.0.1", "{decoded}");
    assert_eq!(decoded[0]["commitLogOffset"].to_string(), offsets[1], "{decoded}");

    let stderr = fails(ns, &["decodeMessageId", "-i", &format!("{},NOT-AN-ID", ids[0])]);
    assert!(stderr.contains("NOT-AN-ID is not an offset message id"), "{stderr}");
    let stderr = fails(ns, &["decodeMessageId", "-i", "ZZ000001000027110000000000000000"]);
    assert!(stderr.contains("not hexadecimal"), "{stderr}");
}

#[test]
fn send_msg_status_and_cluster_rt_send_to_the_broker_topic_and_report_rt() {
    let server = start_server();
    let ns = server.namesrv.as_str();
    wait_for_route(ns, BROKER);

    let out = ok(ns, &["sendMsgStatus", "-b", BROKER, "-s", "30", "-c", "3"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    for (i, line) in lines.iter().enumerate() {
        let (rt, result) = line.split_once("ms, SendResult=").unwrap_or_else(|| panic!("{line}"));
        assert!(rt.strip_prefix("rt=").unwrap().parse::<u64>().is_ok(), "{line}");
        assert!(result.starts_with("SendResult [sendStatus=SEND_OK, msgId="), "{line}");
        // The warm-up message took offset 0.
        let tail = format!(
            "messageQueue=MessageQueue [topic=broker-a, brokerName=broker-a, queueId=0], queueOffset={}, recallHandle=null]",
            i + 1
        );
        assert!(result.ends_with(&tail), "{line}");
    }
    // The bodies are "hello jodie" repeated up to the size (so up to ten bytes more).
    // The consume queue may trail the CommitLog by a moment after the last send.
    let print = ["printMsgByQueue", "-t", BROKER, "-a", BROKER, "-i", "0", "-p", "true", "-d", "true"];
    let stored = stdout(&until(ns, &print, |out| lines_starting(out, "MSGID: ").len() >= 4));
    let bodies: Vec<&str> =
        lines_starting(&stored, "MSGID: ").iter().map(|l| l.rsplit_once(" BODY: ").unwrap().1).collect();
    let (warm_up, sized) = ("hello jodie".repeat(2), "hello jodie".repeat(3));
    assert_eq!(bodies, [&warm_up, &sized, &sized, &sized], "the 16-byte warm-up, then -s 30: {stored}");

    let stderr = fails(ns, &["sendMsgStatus", "-b", "broker-nope"]);
    assert!(stderr.contains("no route for topic broker-nope"), "{stderr}");

    let out = admin(ns, &["clusterRT", "-c", CLUSTER, "-a", "4", "-s", "10", "-i", "0", "--rounds", "2"]);
    assert!(out.status.success(), "{}", common::admin::stderr(&out));
    let table = stdout(&out);
    let lines: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["#Cluster", "Name", "#Broker", "Name", "#RT", "#successCount", "#failCount"], "{table}");
    assert_eq!(lines.len(), 3, "a header and one row per round: {table}");
    for row in &lines[1..] {
        assert_eq!((row[0], row[1], row[3], row[4]), (CLUSTER, BROKER, "4", "0"), "{table}");
        let rt: f64 = row[2].parse().unwrap();
        assert!(rt >= 0.0 && row[2].split_once('.').unwrap().1.len() == 2, "{table}");
    }
    let progress = common::admin::stderr(&out);
    assert!(progress.contains("round 1, broker 1/1") && progress.contains("round 2, broker 1/1"), "{progress}");
    // 3 + 1 from sendMsgStatus, 8 from clusterRT.
    let status = json(&ok(ns, &["topicStatus", "-t", BROKER, "--json"]));
    assert_eq!(status["queues"][0]["maxOffset"], 12, "{status}");

    let tlog = ok(ns, &["clusterRT", "-c", CLUSTER, "-a", "2", "-p", "true", "-m", "room1", "--rounds", "1"]);
    let fields: Vec<&str> = tlog.trim_end().split('|').collect();
    assert_eq!(fields.len(), 5, "{tlog}");
    assert_eq!(fields[0].len(), "2024-01-01 00:00:00".len(), "{tlog}");
    assert_eq!(&fields[1..4], ["room1", CLUSTER, BROKER], "{tlog}");
    assert!(fields[4].parse::<u64>().is_ok(), "{tlog}");

    let stderr = fails(ns, &["clusterRT", "-c", "NoSuchCluster", "--rounds", "1"]);
    assert!(stderr.contains("cluster NoSuchCluster does not exist"), "{stderr}");
}

#[test]
fn allocate_mq_shares_the_queues_averagely_as_json() {
    let server = start_server();
    let ns = server.namesrv.as_str();
    let topic = "AllocateTopic";
    create_topic(ns, topic, 5);
    let out = ok(ns, &["allocateMQ", "-t", topic, "-i", "10.0.0.2,10.0.0.1"]);
    assert_eq!(out.lines().count(), 1, "one line, as mqadmin: {out}");
    let result = json(&out);
    let queue_ids = |cid: &str| -> Vec<i64> {
        result["result"][cid].as_array().unwrap().iter().map(|q| q["queueId"].as_i64().unwrap()).collect()
    };
    assert_eq!(queue_ids("10.0.0.1"), [0, 1, 2], "{out}");
    assert_eq!(queue_ids("10.0.0.2"), [3, 4], "{out}");
    assert_eq!(result["result"]["10.0.0.1"][0]["brokerName"], BROKER, "{out}");
    assert_eq!(result["result"]["10.0.0.1"][0]["topic"], topic, "{out}");

    let stderr = fails(ns, &["allocateMQ", "-t", "NoSuchTopic", "-i", "a,b"]);
    assert!(stderr.contains("no route for topic NoSuchTopic"), "{stderr}");
    let stderr = fails(ns, &["allocateMQ", "-t", topic, "-i", " , "]);
    assert!(stderr.contains("give the client ids"), "{stderr}");
}

#[test]
fn export_configs_and_metrics_write_the_cluster_reports() {
    let server = start_server();
    let ns = server.namesrv.as_str();
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap();

    let out = admin(ns, &["exportConfigs", "-c", CLUSTER, "-f", dir_arg]);
    assert!(out.status.success(), "{}", stderr(&out));
    let path = dir.path().join("configs.json");
    assert_eq!(stdout(&out).trim(), format!("export {} success", path.display()));
    assert!(stderr(&out).contains("broker 1/1 broker-a"), "{}", stderr(&out));
    let configs = json(&std::fs::read_to_string(&path).unwrap());
    let broker = &configs["brokerConfigs"][BROKER];
    assert_eq!(broker["brokerClusterName"], CLUSTER, "{configs}");
    assert_eq!(broker["brokerId"], "0", "{configs}");
    assert_eq!(broker["brokerRole"], "ASYNC_MASTER", "{configs}");
    assert_eq!(broker["autoCreateTopicEnable"], "true", "{configs}");
    assert!(broker.get("listenPort").is_none(), "only the exported keys: {configs}");
    assert_eq!(configs["clusterScale"]["namesrvSize"], 1, "{configs}");
    assert_eq!(configs["clusterScale"]["masterBrokerSize"], 1, "{configs}");
    assert_eq!(configs["clusterScale"]["slaveBrokerSize"], 0, "{configs}");
    let namesrv = configs["namesrvConfigs"][ns].as_object().unwrap_or_else(|| panic!("{configs}"));
    assert!(!namesrv.is_empty(), "{configs}");

    // Data for the metrics: one user topic with 3 messages of 100 bytes, one user group.
    let topic = "MetricsTopic";
    create_topic(ns, topic, 1);
    ok(ns, &["updateSubGroup", "-c", CLUSTER, "-g", "MetricsGroup"]);
    let body = "m".repeat(100);
    send_all(&server.broker, (0..3).map(|_| send_request(topic, 0, body.as_bytes(), &[])).collect());

    let out = admin(ns, &["exportMetrics", "-c", CLUSTER, "-f", dir_arg]);
    assert!(out.status.success(), "{}", stderr(&out));
    let path = dir.path().join("metrics.json");
    assert_eq!(stdout(&out).trim(), format!("export {} success", path.display()));
    assert!(stderr(&out).contains("broker 1/1 broker-a"), "{}", stderr(&out));
    let metrics = json(&std::fs::read_to_string(&path).unwrap());
    let report = &metrics["evaluateReport"][BROKER];
    let quota = &report["runtimeQuota"];
    assert_eq!(quota["topicSize"], 1, "{metrics}");
    assert_eq!(quota["groupSize"], 1, "{metrics}");
    let average: f64 = quota["messageAverageSize"].as_str().unwrap().parse().unwrap();
    assert!(average > 100.0, "stored records are larger than their bodies: {metrics}");
    let ratio: f64 = quota["diskRatio"]["commitLogDiskRatio"].as_str().unwrap().parse().unwrap();
    assert!((0.0..=1.0).contains(&ratio), "{metrics}");
    for key in ["normalInTps", "normalOutTps", "transInTps", "scheduleInTps"] {
        assert!(quota["tps"][key].as_f64().is_some_and(|t| t >= 0.0), "{key}: {metrics}");
    }
    assert_eq!(quota["oneDayNum"]["transOneDayInNum"], 0, "{metrics}");
    assert_eq!(report["runtimeVersion"]["rocketmqVersion"], "V5_3_3", "{metrics}");
    assert_eq!(
        metrics["totalData"]["totalTps"]["totalNormalInTps"], quota["tps"]["normalInTps"],
        "one broker: the totals are its figures: {metrics}"
    );

    let stderr = fails(ns, &["exportMetrics", "-c", "NoSuchCluster", "-f", dir_arg]);
    assert!(stderr.contains("cluster NoSuchCluster does not exist (known: DefaultCluster)"), "{stderr}");
    let stderr = fails(ns, &["exportConfigs", "-c", "NoSuchCluster", "-f", dir_arg]);
    assert!(stderr.contains("cluster NoSuchCluster does not exist"), "{stderr}");
}

const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

/// One trace record: fields joined by char 1, ended by char 2 (fact sheet, advanced topics 6).
fn trace_record(fields: &[&str]) -> String {
    format!("{}\u{2}", fields.join("\u{1}"))
}

#[test]
fn query_msg_trace_by_id_prints_the_pub_and_sub_records_of_a_message() {
    let server = start_standalone_with_conf(BIN, "traceTopicEnable=true\n");
    let ns = server.namesrv.as_str();
    wait_for_route(ns, TRACE_TOPIC);
    let traced = "7F0000010E1C18B4AAC2735A0F4A0001";
    let other = "7F0000010E1C18B4AAC2735A0F4A0002";
    let send_trace = |keys: &str, body: String| send_request(TRACE_TOPIC, 0, body.as_bytes(), &[("KEYS", keys)]);
    let pub_record = |msg_id: &str, group: &str, cost: &str| {
        trace_record(&[
            "Pub",
            "1700000000123",
            "DefaultRegion",
            group,
            "OrderTopic",
            msg_id,
            "TagA",
            "order-1",
            "127.0.0.1:10911",
            "11",
            cost,
            "0",
            "7F00000100002A9F0000000000000C8E",
            "true",
        ])
    };
    send_all(
        &server.broker,
        vec![
            // The producer's trace batch names both messages it traced.
            send_trace(
                &format!("{traced} {other} order-1"),
                pub_record(traced, "PG1", "7") + &pub_record(other, "PG9", "1"),
            ),
            send_trace(
                &format!("{traced} order-1"),
                [
                    trace_record(&[
                        "SubBefore",
                        "1700000060000",
                        "DefaultRegion",
                        "CG1",
                        "req-1",
                        traced,
                        "0",
                        "order-1",
                    ]),
                    trace_record(&["SubAfter", "req-1", traced, "15", "false", "order-1", "1", "1700000060015", "CG1"]),
                    trace_record(&["SubAfter", "req-2", traced, "4", "true", "order-1", "0", "1700000120004", "CG1"]),
                    trace_record(&["SubAfter", "req-3", traced, "9", "true", "order-1", "0", "1700000180009", "CG2"]),
                ]
                .concat(),
            ),
        ],
    );

    let out = until(ns, &["queryMsgTraceById", "-i", traced], |s| s.contains("CG2"));
    let text = stdout(&out);
    let expected = [
        "#Type      #ProducerGroup       #ClientHost          #SendTime            #CostTimes #Status",
        "Pub        PG1                  127.0.0.1            2023-11-14 22:13:20  7ms        success",
        "",
        "#Type      #ConsumerGroup       #ClientHost          #ConsumerTime        #CostTimes #Status",
        "Sub        CG1                  127.0.0.1            2023-11-14 22:14:20  15ms       failed",
        "Sub        CG1                  127.0.0.1            2023-11-14 22:15:20  4ms        success",
        "",
        "#Type      #ConsumerGroup       #ClientHost          #ConsumerTime        #CostTimes #Status",
        "Sub        CG2                  127.0.0.1            2023-11-14 22:16:20  9ms        success",
        "",
    ];
    assert_eq!(text.lines().collect::<Vec<_>>(), expected, "{text}");

    // JSON has every record of the message, SubBefore too, and nothing of the other message.
    let all = json(&ok(ns, &["queryMsgTraceById", "-i", traced, "-t", TRACE_TOPIC, "--json"]));
    let kinds: Vec<&str> = all.as_array().unwrap().iter().map(|r| r["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Pub", "SubBefore", "SubAfter", "SubAfter", "SubAfter"], "{all}");
    assert_eq!(all[0]["offsetMsgId"], "7F00000100002A9F0000000000000C8E", "{all}");

    // A time range before the trace messages were stored finds nothing.
    let stderr = fails(ns, &["queryMsgTraceById", "-i", traced, "-b", "0", "-e", "1000"]);
    assert!(stderr.contains(&format!("no trace of message {traced} in trace topic {TRACE_TOPIC}")), "{stderr}");
    let stderr = fails(ns, &["queryMsgTraceById", "-i", "7F0000010E1C18B4AAC2735A0F4AFFFF"]);
    assert!(stderr.contains("no trace of message 7F0000010E1C18B4AAC2735A0F4AFFFF"), "{stderr}");
    let stderr = fails(ns, &["queryMsgTraceById", "-i", traced, "-t", "NoTraceTopic"]);
    assert!(stderr.contains("no route for trace topic NoTraceTopic"), "{stderr}");
}
