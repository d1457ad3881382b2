//! Master and slave brokers of one broker name over real loopback TCP: the slave learns the
//! master's HA address from the name server, follows its CommitLog and serves the messages;
//! a SYNC_MASTER that needs one slave answers SLAVE_NOT_AVAILABLE before the slave is there
//! and SUCCESS only once the slave has the message; GET_BROKER_HA_STATUS reports both sides.

use std::time::{Duration, Instant};

use ferromq_broker::{BrokerRole, BrokerSettings};
use ferromq_protocol::body::JsonBody;
use ferromq_protocol::header::*;
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_replication::HaRuntimeInfo;
use ferromq_testkit::{pull_request, send_request, test_settings, ExtraBroker, LocalCluster};

const T: Duration = Duration::from_secs(10);

/// A slave (broker id 1) of the cluster's broker. It replicates from the master address the
/// name server gives, or with `ha_master` from that address (e.g. a relay). The directory
/// holds its store and must outlive it.
async fn start_slave(
    c: &LocalCluster,
    slave_read_enable: bool,
    ha_master: Option<String>,
) -> (ExtraBroker, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let slave = c
        .start_slave(1, dir.path(), move |s| {
            s.broker.slave_sync_interval = 200;
            s.broker.slave_read_enable = slave_read_enable;
            if let Some(master) = ha_master {
                s.ha.ha_master_address = master;
            }
        })
        .await;
    (slave, dir)
}

/// A consumer's CONSUMER_SEND_MSG_BACK (group `cg`) of the message at `offset`, consumed from
/// `origin_topic`.
fn send_back(offset: i64, origin_topic: &str) -> RemotingCommand {
    RemotingCommand::request(request_code::CONSUMER_SEND_MSG_BACK).with_header(&ConsumerSendMsgBackRequestHeader {
        offset,
        group: "cg".into(),
        delay_level: 0,
        origin_msg_id: None,
        origin_topic: Some(origin_topic.into()),
        unit_mode: None,
        max_reconsume_times: None,
        broker_name: None,
    })
}

async fn ha_status(client: &RemotingClient, addr: &str) -> HaRuntimeInfo {
    let r = client.invoke(addr, RemotingCommand::request(request_code::GET_BROKER_HA_STATUS), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    HaRuntimeInfo::decode(&r.body).unwrap()
}

async fn max_offset(client: &RemotingClient, addr: &str, topic: &str) -> i64 {
    let req = RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&GetMaxOffsetRequestHeader {
        topic: topic.into(),
        queue_id: 0,
        committed: None,
        broker_name: None,
        lo: None,
    });
    let r = client.invoke(addr, req, T).await.unwrap();
    r.decode_header::<OffsetResponseHeader>().map(|h| h.offset).unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_master_waits_for_its_slave_and_the_slave_serves_what_was_acknowledged() {
    let c = LocalCluster::start(|s| {
        s.broker.broker_role = BrokerRole::SyncMaster;
        // 4.x behaviour: every send waits for one slave (the master counts as one).
        s.ha.in_sync_replicas = 2;
        s.ha.slave_timeout_ms = 3_000;
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    // No slave yet: stored, but the producer hears SLAVE_NOT_AVAILABLE (with the message id).
    let r = client.invoke(&c.broker_addr, send_request("HaTopic", 0, b"early", &[]), T).await.unwrap();
    assert_eq!(r.code, response_code::SLAVE_NOT_AVAILABLE, "{:?}", r.remark);
    let early_id = r.decode_header::<SendMessageResponseHeader>().unwrap().msg_id;
    // A consumer's send-back does not wait for the slave, as in Java (ADR 0016 §9): its retry
    // is stored and acknowledged at once.
    let early_offset = ferromq_protocol::message::decode_offset_msg_id(&early_id).unwrap().1;
    let r = client.invoke(&c.broker_addr, send_back(early_offset, "HaTopic"), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    let (slave, _slave_dir) = start_slave(&c, true, None).await;
    let deadline = Instant::now() + T;
    loop {
        let info = ha_status(&client, &c.broker_addr).await;
        if info.in_sync_slave_nums == 1 {
            assert!(info.master);
            assert_eq!(info.ha_connection_info.len(), 1);
            break;
        }
        assert!(Instant::now() < deadline, "the slave never connected: {info:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Every acknowledged send is on the slave when the answer comes.
    for i in 0..50 {
        let body = format!("m{i}");
        let r = client.invoke(&c.broker_addr, send_request("HaTopic", 0, body.as_bytes(), &[]), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let offset = r.decode_header::<SendMessageResponseHeader>().unwrap().queue_offset;
        // The slave's consume queue follows its CommitLog by dispatch: allow it a moment.
        let deadline = Instant::now() + T;
        while max_offset(&client, &slave.addr, "HaTopic").await <= offset {
            assert!(Instant::now() < deadline, "message {i} acknowledged but not on the slave");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    // The slave refuses writes and serves reads.
    let r = client.invoke(&slave.addr, send_request("HaTopic", 0, b"x", &[]), T).await.unwrap();
    assert_eq!(r.code, response_code::SERVICE_NOT_AVAILABLE);
    let pull = pull_request("HaTopic", 0, 0, "*", 0);
    // The slave learns the topic from its metadata sync.
    let deadline = Instant::now() + T;
    let r = loop {
        let r = client.invoke(&slave.addr, pull.clone(), T).await.unwrap();
        if r.code != response_code::TOPIC_NOT_EXIST || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let bodies: Vec<String> = StoredMessage::decode_all(&r.body)
        .unwrap()
        .into_iter()
        .map(|m| String::from_utf8(m.body.to_vec()).unwrap())
        .collect();
    // One pull returns what the store's transfer limits allow; the first is the early one.
    assert!(!bodies.is_empty() && bodies.len() <= 51);
    assert_eq!(bodies[0], "early");
    assert_eq!(bodies.get(1).map(String::as_str), Some("m0"));
    let info = ha_status(&client, &slave.addr).await;
    assert!(!info.master);
    // The runtime info carries the HA state too.
    let runtime = |addr: String| {
        let client = &client;
        async move {
            let r =
                client.invoke(&addr, RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO), T).await.unwrap();
            ferromq_protocol::body::KVTable::decode(&r.body).unwrap().table
        }
    };
    let master_info = runtime(c.broker_addr.clone()).await;
    assert_eq!(master_info.get("haSlaveCount").map(String::as_str), Some("1"));
    assert_eq!(master_info.get("haInSyncSlaveNums").map(String::as_str), Some("1"));
    assert!(master_info.contains_key("haSlaveFallBehindBytes"));
    let slave_info = runtime(slave.addr.clone()).await;
    assert_eq!(slave_info.get("haSlaveConnected").map(String::as_str), Some("true"));
    assert!(slave_info.get("haMasterAddress").is_some_and(|a| !a.is_empty()));

    slave.stop().await;
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_serves_reads_only_with_slave_read_enable() {
    let c = LocalCluster::start(|_| {}).await;
    let (slave, _slave_dir) = start_slave(&c, false, None).await;
    let client = RemotingClient::new(ClientConfig::default());
    let pull = pull_request("TBW102", 0, 0, "*", 0);
    let deadline = Instant::now() + T;
    let r = loop {
        match client.invoke(&slave.addr, pull.clone(), T).await {
            Ok(r) => break r,
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("slave unreachable: {e}"),
        }
    };
    assert_eq!(r.code, response_code::SYSTEM_BUSY, "Java's rejectRequest: {:?}", r.remark);
    slave.stop().await;
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_and_slow_links_make_sync_sends_time_out_and_the_slave_catches_up_after() {
    let c = LocalCluster::start(|s| {
        s.broker.broker_role = BrokerRole::SyncMaster;
        s.ha.in_sync_replicas = 2;
        s.ha.slave_timeout_ms = 800;
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    let ha_addr = ha_status_master_addr(&client, &c.broker_addr).await;
    let relay = ferromq_testkit::Relay::start(ha_addr.parse().unwrap()).await;
    let (slave, _slave_dir) = start_slave(&c, true, Some(relay.addr().to_string())).await;
    // Wait until sends are acknowledged by the slave through the relay.
    let deadline = Instant::now() + T;
    loop {
        let r = client.invoke(&c.broker_addr, send_request("HaRelay", 0, b"warm", &[]), T).await.unwrap();
        if r.code == response_code::SUCCESS {
            break;
        }
        assert!(Instant::now() < deadline, "no acknowledged send: {:?}", r.remark);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    relay.stall();
    let r = client.invoke(&c.broker_addr, send_request("HaRelay", 0, b"stalled", &[]), T).await.unwrap();
    assert_eq!(r.code, response_code::FLUSH_SLAVE_TIMEOUT, "{:?}", r.remark);
    assert!(!r.decode_header::<SendMessageResponseHeader>().unwrap().msg_id.is_empty(), "stored all the same");
    relay.resume();
    let deadline = Instant::now() + T;
    loop {
        let r = client.invoke(&c.broker_addr, send_request("HaRelay", 0, b"after", &[]), T).await.unwrap();
        if r.code == response_code::SUCCESS {
            break;
        }
        assert!(Instant::now() < deadline, "never acknowledged again: {:?}", r.remark);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A slow link (20 KB/s): a 100 KB message cannot reach the slave within slaveTimeout.
    relay.slow(20_000);
    let big = vec![b'x'; 100 * 1024];
    let r = client.invoke(&c.broker_addr, send_request("HaRelay", 0, &big, &[]), T).await.unwrap();
    assert_eq!(r.code, response_code::FLUSH_SLAVE_TIMEOUT, "{:?}", r.remark);
    relay.slow(0);
    let deadline = Instant::now() + T;
    loop {
        let r = client.invoke(&c.broker_addr, send_request("HaRelay", 0, b"fast again", &[]), T).await.unwrap();
        if r.code == response_code::SUCCESS {
            break;
        }
        assert!(Instant::now() < deadline, "never acknowledged after the slow link: {:?}", r.remark);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Each message once on the slave, in order (the stalled and the slow ones included).
    let deadline = Instant::now() + T;
    while max_offset(&client, &slave.addr, "HaRelay").await < 5 {
        assert!(Instant::now() < deadline, "slave did not catch up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let master_max = max_offset(&client, &c.broker_addr, "HaRelay").await;
    assert_eq!(max_offset(&client, &slave.addr, "HaRelay").await, master_max, "no duplicate on the slave");
    slave.stop().await;
    client.shutdown().await;
    c.stop().await;
}

/// The master's HA address, from its runtime info.
async fn ha_status_master_addr(client: &RemotingClient, addr: &str) -> String {
    let r = client.invoke(addr, RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO), T).await.unwrap();
    ferromq_protocol::body::KVTable::decode(&r.body).unwrap().table["haServerAddr"].clone()
}

/// Java's `offsetCheckInSlave` (off by default): a slave that has no master to send a reader
/// to must not move the consumer's offset from its own, possibly lagging, queue; the pull
/// keeps its offset and is retried. With the check on, the slave corrects it as a master does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_without_its_master_keeps_an_out_of_range_pull_offset_and_refuses_send_backs() {
    let c = LocalCluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    for check in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut s: BrokerSettings = test_settings(dir.path(), &c.ns_addr);
        // A broker name of its own: no master exists for it.
        s.broker.broker_name = format!("lonely-{check}");
        s.broker.broker_id = 1;
        s.broker.broker_role = BrokerRole::Slave;
        s.broker.slave_read_enable = true;
        s.store.offset_check_in_slave = check;
        let slave = ferromq_testkit::spawn_broker(s).await;
        let pull = pull_request("TBW102", 0, 5, "*", 0);
        let r = client.invoke(&slave.addr, pull, T).await.unwrap();
        let h = r.decode_header::<PullMessageResponseHeader>().unwrap();
        if check {
            assert_eq!(r.code, response_code::PULL_OFFSET_MOVED, "{:?}", r.remark);
            assert_eq!(h.next_begin_offset, 0, "corrected to the empty queue's start");
        } else {
            assert_eq!(r.code, response_code::PULL_RETRY_IMMEDIATELY, "{:?}", r.remark);
            assert_eq!(h.next_begin_offset, 5, "the consumer's offset is kept");
            assert_eq!(h.suggest_which_broker_id, 0, "the group's broker id");
            // Nor does a slave store a consumer's send-back in its copy of the master's log.
            let r = client.invoke(&slave.addr, send_back(0, "TBW102"), T).await.unwrap();
            assert_eq!(r.code, response_code::SYSTEM_ERROR);
            assert!(r.remark.as_deref().unwrap_or("").contains("no master available"), "{:?}", r.remark);
        }
        slave.stop().await;
    }
    client.shutdown().await;
    c.stop().await;
}

fn scrape(port: u16) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("metrics port");
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text
}

fn gauge(text: &str, prefix: &str) -> Option<f64> {
    text.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// With metrics on, a master shows its role and how far each connected slave is behind; the
/// slave shows its role and how long ago it last heard from its master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_shows_in_the_metrics_of_master_and_slave() {
    let (master_port, slave_port) = (ferromq_testkit::free_port(), ferromq_testkit::free_port());
    let c = LocalCluster::start(move |s| {
        s.metrics.metrics_exporter_type = ferromq_metrics::ExporterType::Prom;
        s.metrics.metrics_prom_exporter_host = "127.0.0.1".into();
        s.metrics.metrics_prom_exporter_port = master_port;
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let slave = c.start_slave(1, dir.path(), move |s| s.metrics.metrics_prom_exporter_port = slave_port).await;
    let client = RemotingClient::new(ClientConfig::default());
    let r = client.invoke(&c.broker_addr, send_request("HaMetrics", 0, b"m", &[]), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let deadline = Instant::now() + T;
    loop {
        let text = scrape(master_port);
        let behind = gauge(&text, "ferromq_replication_slave_behind_bytes{");
        if behind == Some(0.0) {
            assert_eq!(gauge(&text, "ferromq_broker_role{"), Some(1.0), "{text}");
            assert_eq!(gauge(&text, "ferromq_replication_in_sync_slaves{"), Some(1.0), "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "the slave never showed as caught up:\n{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let text = scrape(slave_port);
    assert_eq!(gauge(&text, "ferromq_broker_role{"), Some(2.0), "{text}");
    let silence = gauge(&text, "ferromq_replication_master_silence_milliseconds{").expect("slave's silence");
    assert!((0.0..10_000.0).contains(&silence), "{text}");
    client.shutdown().await;
    slave.stop().await;
    c.stop().await;
}
