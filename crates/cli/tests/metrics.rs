//! Prometheus metrics of `ferromq standalone` (on by default): scraped over HTTP while a
//! test produces and consumes, parsed by a Prometheus text parser, and checked series by
//! series against what was sent, pulled and committed (observability.md §1.2, §1.3).

use std::time::{Duration, Instant};

use ferromq_protocol::header::UpdateConsumerOffsetRequestHeader;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{pull_request, send_request, start_standalone};
use prometheus_parse::{Sample, Scrape, Value};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
const T: Duration = Duration::from_secs(10);
const TOPIC: &str = "MetricsTopic";
const BODY: &[u8] = b"metrics-body-20bytes";

fn scrape(addr: &str) -> (String, Scrape) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("metrics port");
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("head and body");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let parsed = Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).expect("Prometheus text format");
    (body.to_owned(), parsed)
}

fn value(s: &Sample) -> f64 {
    match s.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
        ref other => panic!("{} is {other:?}", s.metric),
    }
}

/// The one sample of `metric` whose labels include `labels`.
fn find<'a>(scrape: &'a Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    let mut found =
        scrape.samples.iter().filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)));
    let first = found.next();
    assert!(found.next().is_none(), "{metric} {labels:?} matches several series");
    first
}

fn get(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    find(scrape, metric, labels).map(value).unwrap_or_else(|| panic!("no {metric} {labels:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_metrics_count_traffic_lag_and_connections() {
    let s = start_standalone(BIN);
    let client = RemotingClient::new(ClientConfig::default());

    // 10 normal messages and 2 delayed ones to queue 0; a pull of the first 4 by group "cg",
    // whose committed offset is then 4.
    for _ in 0..10 {
        let r = client.invoke(&s.broker, send_request(TOPIC, 0, BODY, &[]), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
    for _ in 0..2 {
        let r = client.invoke(&s.broker, send_request(TOPIC, 0, BODY, &[("DELAY", "1")]), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
    let deadline = Instant::now() + T;
    loop {
        let mut pull = pull_request(TOPIC, 0, 0, "*", 0);
        pull.ext_fields.insert("maxMsgNums".into(), "4");
        let r = client.invoke(&s.broker, pull, T).await.unwrap();
        if r.code == response_code::SUCCESS {
            break;
        }
        assert!(Instant::now() < deadline, "pull never found the messages: {} {:?}", r.code, r.remark);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let commit = RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET).with_header(
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: "cg".into(),
            topic: TOPIC.into(),
            queue_id: 0,
            commit_offset: 2,
            broker_name: None,
            lo: None,
        },
    );
    assert_eq!(client.invoke(&s.broker, commit, T).await.unwrap().code, response_code::SUCCESS);

    let create = RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC).with_header(
        &ferromq_protocol::header::CreateTopicRequestHeader {
            topic: "MetricsCreated".into(),
            default_topic: "TBW102".into(),
            read_queue_nums: 2,
            write_queue_nums: 2,
            perm: 6,
            topic_filter_type: "SINGLE_TAG".into(),
            ..Default::default()
        },
    );
    assert_eq!(client.invoke(&s.broker, create, T).await.unwrap().code, response_code::SUCCESS);

    let (text, m) = scrape(&s.metrics);
    // Every series carries the constant labels.
    let rss = find(&m, "process_resident_memory_bytes", &[]).expect("process metrics");
    assert_eq!(rss.labels.get("cluster"), Some("DefaultCluster"));
    assert_eq!(rss.labels.get("node_type"), Some("broker"));
    assert_eq!(rss.labels.get("node_id"), Some("broker-a"));
    assert!(value(rss) > 1e6, "{}", value(rss));

    let normal = [("topic", TOPIC), ("message_type", "normal"), ("is_system", "false")];
    assert_eq!(get(&m, "rocketmq_messages_in_total", &normal), 10.0);
    assert_eq!(get(&m, "rocketmq_throughput_in_total", &normal), 10.0 * BODY.len() as f64);
    let delay = [("topic", TOPIC), ("message_type", "delay")];
    assert_eq!(get(&m, "rocketmq_messages_in_total", &delay), 2.0);
    let out = [("topic", TOPIC), ("consumer_group", "cg"), ("is_retry", "false")];
    assert_eq!(get(&m, "rocketmq_messages_out_total", &out), 4.0);
    assert!(get(&m, "rocketmq_throughput_out_total", &out) >= 4.0 * BODY.len() as f64);

    // Lag of "cg" on the topic: 10 normal messages on queue 0 (the delayed ones are not in the
    // topic's queue yet), 4 pulled, 2 committed: 8 behind, 2 of them in flight, 6 ready.
    let lag = [("consumer_group", "cg"), ("topic", TOPIC)];
    assert_eq!(get(&m, "rocketmq_consumer_lag_messages", &lag), 8.0);
    assert_eq!(get(&m, "rocketmq_consumer_ready_messages", &lag), 6.0);
    assert_eq!(get(&m, "rocketmq_consumer_inflight_messages", &lag), 2.0);
    let age = get(&m, "rocketmq_consumer_lag_latency_milliseconds", &lag);
    assert!((0.0..600_000.0).contains(&age), "{age}");

    assert!(get(&m, "rocketmq_topic_number", &[]) >= 1.0);
    assert_eq!(get(&m, "rocketmq_broker_permission", &[]), 6.0);
    assert!(get(&m, "rocketmq_storage_size_bytes", &[]) > 0.0);
    assert!(get(&m, "ferromq_storage_commitlog_max_offset_bytes", &[]) > 0.0);
    assert!(find(&m, "rocketmq_storage_dispatch_behind_bytes", &[]).is_some(), "{text}");

    // Histograms: body sizes (all 20 bytes: the first bucket), topic creation.
    let sizes = format!("topic=\"{TOPIC}\",message_type=\"normal\"");
    for line in [
        format!("rocketmq_message_size_bucket{{cluster=\"DefaultCluster\",node_type=\"broker\",node_id=\"broker-a\",{sizes},le=\"1024\"}} 10"),
        format!("rocketmq_message_size_count{{cluster=\"DefaultCluster\",node_type=\"broker\",node_id=\"broker-a\",{sizes}}} 10"),
        "rocketmq_topic_create_execution_time_milliseconds_count{cluster=\"DefaultCluster\",node_type=\"broker\",node_id=\"broker-a\"} 1".to_owned(),
    ] {
        assert!(text.contains(&line), "missing {line}\n{text}");
    }
    assert!(find(&m, "rocketmq_processor_watermark", &[("processor", "send")]).is_some(), "{text}");

    // Remoting latency by request code and result.
    let sends = [("request_code", "send_message_v2"), ("response_code", "success"), ("result", "success")];
    assert!(get(&m, "rocketmq_rpc_latency_milliseconds_count", &sends) >= 12.0);
    assert!(text.contains("# TYPE rocketmq_rpc_latency_milliseconds histogram"), "{text}");
    client.shutdown().await;
}

/// A cluster-mode proxy (`ferromq proxy`) with the metrics keys in `rmq-proxy.json` serves
/// `rocketmq_proxy_up` with its constant labels, and the latency of its remoting port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_proxy_serves_its_metrics() {
    let s = start_standalone(BIN);
    let dir = tempfile::tempdir().unwrap();
    let (grpc, remoting, metrics) =
        (ferromq_testkit::free_port(), ferromq_testkit::free_port(), ferromq_testkit::free_port());
    let json = format!(
        "{{\"grpcServerPort\": {grpc}, \"remotingListenPort\": {remoting}, \"proxyName\": \"proxy-1\", \
         \"metricsExporterType\": \"PROM\", \"metricsPromExporterHost\": \"127.0.0.1\", \
         \"metricsPromExporterPort\": {metrics}, \"metricsLabel\": \"zone:z1\"}}\n"
    );
    let _proxy = common::cluster::spawn_listening(
        &["proxy", "-n", &s.namesrv],
        &dir.path().join("rmq-proxy.json"),
        &json,
        &dir.path().join("proxy.log"),
        metrics,
    )
    .expect("proxy starts");
    let remoting_addr = format!("127.0.0.1:{remoting}");
    let client = RemotingClient::new(ClientConfig::default());
    let deadline = Instant::now() + T;
    let route = || {
        RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(
            &ferromq_protocol::header::GetRouteInfoRequestHeader {
                topic: "TBW102".into(),
                accept_standard_json_only: None,
            },
        )
    };
    while client.invoke(&remoting_addr, route(), T).await.is_err() {
        assert!(Instant::now() < deadline, "the proxy's remoting port does not answer");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, m) = scrape(&format!("127.0.0.1:{metrics}"));
    let up = find(&m, "rocketmq_proxy_up", &[]).expect("proxy up");
    assert_eq!(value(up), 1.0);
    for (k, v) in [("node_type", "proxy"), ("node_id", "proxy-1"), ("proxy_mode", "cluster"), ("zone", "z1")] {
        assert_eq!(up.labels.get(k), Some(v), "{k}");
    }
    assert!(get(&m, "rocketmq_rpc_latency_milliseconds_count", &[("request_code", "get_routeinfo_by_topic")]) >= 1.0);
    client.shutdown().await;
}

/// The timer's per-topic figures, pending half messages and the POP revive families: a timed
/// message delivered, a transaction left open, a popped message never acknowledged and
/// revived (observability.md §1.2, POP and store tables).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timer_transaction_and_pop_revive_metrics_follow_their_messages() {
    use ferromq_client::{
        ClientConfig as Client, LocalTransactionState, Message, MessageExt, MessageSelector, Producer, ProducerConfig,
        SimpleConsumer, SimpleConsumerConfig, TransactionListener, TransactionProducer,
    };
    struct Undecided;
    impl TransactionListener for Undecided {
        type Arg = ();
        fn execute_local_transaction(&self, _: &Message, _: &()) -> LocalTransactionState {
            LocalTransactionState::Unknown
        }
        fn check_local_transaction(&self, _: &MessageExt) -> LocalTransactionState {
            LocalTransactionState::Unknown
        }
    }
    let s = start_standalone(BIN);
    // Sends create their topics once the broker has registered with the name server.
    let admin = ferromq_client::admin::AdminClient::new(&s.namesrv);
    let registered = Instant::now() + Duration::from_secs(20);
    while admin.topic_route("TBW102").await.is_err() {
        assert!(Instant::now() < registered, "the broker never registered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    admin.shutdown().await;
    let producer = Producer::new(
        ProducerConfig { group: "pg_metrics_more".into(), ..ProducerConfig::default() },
        Client::with_namesrv(&s.namesrv),
    );
    producer.start().await.unwrap();
    // A message due in one second, through the timer wheel.
    let mut timed = Message::new("MetricsTimed", b"timed".to_vec());
    timed.set_deliver_time_ms(
        i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()).unwrap()
            + 1_000,
    );
    producer.send(timed).await.unwrap();
    // A half message nobody decides on.
    let tx = TransactionProducer::new(
        ProducerConfig { group: "pg_metrics_tx".into(), ..ProducerConfig::default() },
        Client::with_namesrv(&s.namesrv),
        std::sync::Arc::new(Undecided),
    );
    tx.start().await.unwrap();
    tx.send_message_in_transaction(Message::new("MetricsHalf", b"half".to_vec()), ()).await.unwrap();
    // A message popped with a one-second invisible time and never acknowledged.
    producer.send(Message::new("MetricsPop", b"pop".to_vec())).await.unwrap();
    let consumer = SimpleConsumer::start(
        SimpleConsumerConfig { group: "cg_metrics_pop".into(), ..SimpleConsumerConfig::default() },
        Client::with_namesrv(&s.namesrv),
    );
    // The send auto-created the topic; its registration reaches the name server a moment
    // after the send is answered.
    let routed = Instant::now() + Duration::from_secs(10);
    loop {
        match consumer.subscribe("MetricsPop", MessageSelector::tag("*")).await {
            Ok(()) => break,
            Err(ferromq_client::ClientError::RouteNotFound { .. }) if Instant::now() < routed => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("subscribe MetricsPop: {e}"),
        }
    }
    let popped = consumer.receive(1, Duration::from_secs(1)).await.unwrap();
    assert_eq!(popped.len(), 1);

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, scrape) = scrape(&s.metrics);
        let timer_done = find(&scrape, "rocketmq_timer_dequeue_total", &[("topic", "MetricsTimed")]).map(value)
            == Some(1.0)
            && find(&scrape, "rocketmq_timer_enqueue_total", &[("topic", "MetricsTimed")]).map(value) == Some(1.0)
            && find(&scrape, "rocketmq_timing_messages", &[("topic", "MetricsTimed")]).map(value) == Some(0.0)
            && find(&scrape, "rocketmq_delay_message_latency_seconds_count", &[]).map(value).unwrap_or(0.0) >= 1.0;
        let half = find(&scrape, "rocketmq_half_messages", &[("topic", "MetricsHalf")]).map(value) == Some(1.0);
        let revived = find(
            &scrape,
            "rocketmq_pop_revive_retry_messages_total",
            &[("topic", "MetricsPop"), ("consumer_group", "cg_metrics_pop"), ("put_status", "PUT_OK")],
        )
        .map(value)
            == Some(1.0);
        let ck_in = scrape.samples.iter().any(|x| {
            x.metric == "rocketmq_pop_revive_in_message_total"
                && x.labels.get("revive_message_type") == Some("ck")
                && value(x) >= 1.0
        });
        let ck_out = scrape.samples.iter().any(|x| {
            x.metric == "rocketmq_pop_revive_out_message_total"
                && x.labels.get("revive_message_type") == Some("ck")
                && value(x) >= 1.0
        });
        let lag_known = scrape.samples.iter().any(|x| x.metric == "rocketmq_pop_revive_lag");
        if timer_done && half && revived && ck_in && ck_out && lag_known {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "timer {timer_done}, half {half}, revived {revived}, ck in {ck_in}, ck out {ck_out}, lag {lag_known}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    consumer.shutdown().await;
    tx.shutdown().await;
    producer.shutdown().await;
}
