//! Consumers reading from a slave, against an in-process name server, a master (brokerId 0)
//! and a slave (brokerId 1, role SLAVE) of one broker name: the master sends the consumer to
//! the slave (`slaveReadEnable`, and `accessMessageInMemoryMaxRatio=0` so every read counts
//! as cold), the next pulls go there; with the master stopped, consumers pull from the slave
//! and commit their offsets to it; once the master is back, the offsets reach the master.
//!
//! In the first two tests the slave does not replicate: its store is filled beforehand by a
//! standalone broker on the same directory with the same topic and queue offsets but
//! different bodies (`s-…` where the master has `m-…`), and its HA client points nowhere, so
//! each message shows which broker served it. The last test replicates for real and reads
//! the master's messages from the slave once the master is gone.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_broker::BrokerSettings;
use ferromq_client::admin::{AdminClient, SubscriptionGroupConfig};
use ferromq_client::{
    ClientConfig, ConsumeFromWhere, ConsumeStatus, LitePullConsumer, LitePullConsumerConfig, MessageExt, PushConsumer,
    PushConsumerConfig,
};
use ferromq_protocol::body::{TopicConfig, MASTER_ID};
use ferromq_protocol::header::{GetMaxOffsetRequestHeader, OffsetResponseHeader, QueryConsumerOffsetRequestHeader};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::RemotingClient;
use ferromq_testkit::{send_request, spawn_broker, test_settings, ExtraBroker, LocalCluster};
use tokio::time::Instant;

const T: Duration = Duration::from_secs(20);
const TOPIC: &str = "SlaveReads";
const QUEUES: i32 = 2;
const PER_QUEUE: i64 = 40;

/// Both brokers: reads beyond 0% of memory are cold, so a master that finds a message
/// suggests the group's `whichBrokerWhenConsumeSlowly` (1), and the slave serves reads.
fn tweak(s: &mut BrokerSettings) {
    s.broker.broker_ip1 = "127.0.0.1".to_owned();
    s.broker.broker_ip2 = "127.0.0.1".to_owned();
    s.broker.slave_read_enable = true;
    s.store.access_message_in_memory_max_ratio = 0;
}

struct Pair {
    cluster: LocalCluster,
    slave: Option<ExtraBroker>,
    slave_addr: String,
    _slave_dir: tempfile::TempDir,
    admin: AdminClient,
    remoting: RemotingClient,
}

impl Pair {
    async fn stop(mut self) {
        self.admin.shutdown().await;
        self.remoting.shutdown().await;
        if let Some(slave) = self.slave.take() {
            slave.stop().await;
        }
        self.cluster.stop().await;
    }

    /// The committed offset of `group` on queue `queue_id` at `addr` (`None`: not found).
    async fn committed(&self, addr: &str, group: &str, queue_id: i32) -> Option<i64> {
        let header = QueryConsumerOffsetRequestHeader {
            consumer_group: group.to_owned(),
            topic: TOPIC.to_owned(),
            queue_id,
            set_zero_if_not_found: Some(false),
            broker_name: None,
            lo: None,
        };
        let req = RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET).with_header(&header);
        let resp = self.remoting.invoke(addr, req, T).await.unwrap();
        (resp.code == response_code::SUCCESS).then(|| resp.decode_header::<OffsetResponseHeader>().unwrap().offset)
    }

    /// Waits until every queue of `group` has `PER_QUEUE` committed at `addr`.
    async fn wait_committed(&self, addr: &str, group: &str, what: &str) {
        let deadline = Instant::now() + T;
        loop {
            let mut all = Vec::new();
            for q in 0..QUEUES {
                all.push(self.committed(addr, group, q).await);
            }
            if all.iter().all(|o| *o == Some(PER_QUEUE)) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: committed offsets of {group} at {addr} are {all:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the master and waits until the name server's route lists only the slave.
    async fn stop_master(&mut self) {
        self.cluster.stop_broker().await;
        self.wait_route(|ids| ids == [1]).await;
    }

    /// Starts the master again (same store, new port) and waits until the route lists both.
    async fn restart_master(&mut self) {
        self.cluster.restart_broker().await;
        self.wait_route(|ids| ids == [MASTER_ID, 1]).await;
    }

    async fn wait_route(&self, done: impl Fn(&[i64]) -> bool) {
        let deadline = Instant::now() + T;
        loop {
            let ids: Vec<i64> = match self.admin.topic_route(TOPIC).await {
                Ok(route) => route.broker_datas.iter().flat_map(|bd| bd.broker_addrs.keys().copied()).collect(),
                Err(_) => Vec::new(),
            };
            if done(&ids) {
                return;
            }
            assert!(Instant::now() < deadline, "the route never settled; broker ids {ids:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Sends `{prefix}-{queue}-{offset}` to every queue of `TOPIC` at `addr`.
async fn fill(remoting: &RemotingClient, addr: &str, prefix: &str) {
    for q in 0..QUEUES {
        for i in 0..PER_QUEUE {
            let body = format!("{prefix}-{q}-{i}");
            let resp = remoting.invoke(addr, send_request(TOPIC, q, body.as_bytes(), &[]), T).await.unwrap();
            assert_eq!(resp.code, response_code::SUCCESS, "send to {addr}: {:?}", resp.remark);
        }
    }
}

/// A master with `m-…` messages, and a slave whose store holds the same queue offsets with
/// `s-…` bodies, both registered under `broker-a`.
async fn master_and_slave(groups: &[&str]) -> Pair {
    let cluster = LocalCluster::start(tweak).await;
    let admin = AdminClient::new(&cluster.ns_addr);
    let remoting = RemotingClient::new(ferromq_remoting::ClientConfig::default());
    let topic = TopicConfig::new(TOPIC, QUEUES, QUEUES);
    admin.create_topic(&cluster.broker_addr, &topic).await.unwrap();
    for group in groups {
        let mut sub = SubscriptionGroupConfig::new((*group).to_owned());
        sub.which_broker_when_consume_slowly = 1;
        admin.create_subscription_group(&cluster.broker_addr, &sub).await.unwrap();
    }
    fill(&remoting, &cluster.broker_addr, "m").await;

    let slave_dir = tempfile::tempdir().unwrap();
    let mut seed = test_settings(slave_dir.path(), "");
    tweak(&mut seed);
    let seeder = spawn_broker(seed).await;
    admin.create_topic(&seeder.addr, &topic).await.unwrap();
    fill(&remoting, &seeder.addr, "s").await;
    seeder.stop().await;

    let slave = cluster
        .start_slave(1, slave_dir.path(), |s| {
            // Nothing listens there: the slave keeps its own CommitLog.
            s.ha.ha_master_address = "127.0.0.1:1".to_owned();
        })
        .await;
    let slave_addr = slave.addr.clone();
    let pair = Pair { cluster, slave: Some(slave), slave_addr, _slave_dir: slave_dir, admin, remoting };
    pair.wait_route(|ids| ids == [MASTER_ID, 1]).await;
    pair
}

fn client_config(pair: &Pair) -> ClientConfig {
    ClientConfig {
        poll_name_server_interval: Duration::from_millis(200),
        heartbeat_broker_interval: Duration::from_millis(500),
        ..ClientConfig::with_namesrv(&pair.cluster.ns_addr)
    }
}

/// Every delivery: (queue id, queue offset, body).
type Seen = Arc<Mutex<Vec<(i32, i64, String)>>>;

fn record(seen: &Seen, msgs: &[MessageExt]) {
    let mut seen = seen.lock().unwrap();
    for m in msgs.iter().filter(|m| m.topic() == TOPIC) {
        seen.push((m.message_queue.queue_id, m.queue_offset(), String::from_utf8_lossy(m.body()).into_owned()));
    }
}

async fn wait_for(seen: &Seen, n: usize, what: &str) {
    let deadline = Instant::now() + T;
    while seen.lock().unwrap().len() < n {
        assert!(Instant::now() < deadline, "{what}: only {} of {n} messages", seen.lock().unwrap().len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Per queue, which broker served each offset (`m` or `s`), checking every offset came
/// exactly once with the body of its queue and offset.
fn sources(seen: &Seen) -> BTreeMap<i32, String> {
    let seen = seen.lock().unwrap();
    let mut by_queue: BTreeMap<i32, BTreeMap<i64, char>> = BTreeMap::new();
    for (q, offset, body) in seen.iter() {
        let (source, rest) = body.split_once('-').unwrap();
        assert_eq!(rest, format!("{q}-{offset}"), "the body of queue {q} offset {offset}");
        let previous = by_queue.entry(*q).or_default().insert(*offset, source.chars().next().unwrap());
        assert!(previous.is_none(), "queue {q} offset {offset} delivered twice");
    }
    by_queue
        .into_iter()
        .map(|(q, offsets)| {
            assert_eq!(offsets.keys().copied().collect::<Vec<_>>(), (0..PER_QUEUE).collect::<Vec<_>>(), "queue {q}");
            (q, offsets.values().collect())
        })
        .collect()
}

/// The first pull of each queue went to the master, which sent the consumer to the slave for
/// the rest (one switch, no way back while the slave keeps finding cold messages).
fn assert_master_then_slave(sources: &BTreeMap<i32, String>) {
    assert_eq!(sources.len(), QUEUES as usize);
    for (q, s) in sources {
        let switch = s.find('s').unwrap_or_else(|| panic!("queue {q} never read from the slave: {s}"));
        assert!(switch > 0, "queue {q}: the first pull goes to the master: {s}");
        assert!(s[switch..].chars().all(|c| c == 's'), "queue {q}: after the switch every pull reads the slave: {s}");
    }
}

fn push_consumer(pair: &Pair, group: &str, seen: &Seen) -> PushConsumer {
    let config = PushConsumerConfig {
        group: group.to_owned(),
        consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        rebalance_interval: Duration::from_millis(300),
        persist_consumer_offset_interval: Duration::from_millis(200),
        // Pulls parked on the slave stay there past the test's deadline, so only the
        // periodic commit can bring an offset to a master that came back (a pull of it
        // would commit too).
        broker_suspend_max: Duration::from_secs(60),
        consumer_timeout_when_suspend: Duration::from_secs(90),
        ..PushConsumerConfig::default()
    };
    let consumer = PushConsumer::new(config, client_config(pair));
    let log = seen.clone();
    consumer.register_listener(move |msgs| {
        record(&log, msgs);
        ConsumeStatus::ConsumeSuccess
    });
    consumer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_consumer_follows_the_slave_suggestion_and_reads_the_slave_while_the_master_is_down() {
    let mut pair = master_and_slave(&["cg_slave_suggest", "cg_master_down"]).await;
    let all = (QUEUES * PER_QUEUE as i32) as usize;

    // The master suggests the slave; the next pulls go there.
    let seen = Seen::default();
    let consumer = push_consumer(&pair, "cg_slave_suggest", &seen);
    consumer.subscribe(TOPIC, "*").await.unwrap();
    consumer.start().await.unwrap();
    wait_for(&seen, all, "reads through the slave").await;
    assert_master_then_slave(&sources(&seen));
    // Consumers heartbeat the slaves too, so a slave knows the group.
    let on_slave = pair.admin.consumer_connection(&pair.slave_addr, "cg_slave_suggest").await.unwrap();
    assert_eq!(on_slave.connection_set.len(), 1, "the slave lists the consumer");
    pair.wait_committed(&pair.cluster.broker_addr.clone(), "cg_slave_suggest", "offsets go to the master").await;
    consumer.shutdown().await;

    // The master is gone from the route: a new group reads everything from the slave and
    // commits there.
    pair.stop_master().await;
    let seen = Seen::default();
    let consumer = push_consumer(&pair, "cg_master_down", &seen);
    consumer.subscribe(TOPIC, "*").await.unwrap();
    consumer.start().await.unwrap();
    wait_for(&seen, all, "reads while the master is down").await;
    for (q, s) in sources(&seen) {
        assert!(s.chars().all(|c| c == 's'), "queue {q} read only from the slave: {s}");
    }
    pair.wait_committed(&pair.slave_addr.clone(), "cg_master_down", "offsets go to the slave meanwhile").await;

    // The master is back: the offsets committed to the slave reach it, and nothing is
    // delivered again.
    pair.restart_master().await;
    let master = pair.cluster.broker_addr.clone();
    pair.wait_committed(&master, "cg_master_down", "offsets reach the master once it is back").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(seen.lock().unwrap().len(), all, "nothing delivered twice");
    consumer.shutdown().await;
    pair.stop().await;
}

fn lite_consumer(pair: &Pair, group: &str) -> LitePullConsumer {
    let config = LitePullConsumerConfig {
        group: group.to_owned(),
        consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        auto_commit_interval: Duration::from_millis(200),
        rebalance_interval: Duration::from_millis(300),
        ..LitePullConsumerConfig::default()
    };
    LitePullConsumer::new(config, client_config(pair))
}

/// Polls until `n` messages of `TOPIC` were seen.
async fn poll_all(consumer: &LitePullConsumer, n: usize, what: &str) -> Seen {
    let seen = Seen::default();
    let deadline = Instant::now() + T;
    while seen.lock().unwrap().len() < n {
        assert!(Instant::now() < deadline, "{what}: only {} of {n} messages", seen.lock().unwrap().len());
        record(&seen, &consumer.poll(Duration::from_millis(100)).await);
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite_pull_consumer_follows_the_slave_suggestion_and_reads_the_slave_while_the_master_is_down() {
    let mut pair = master_and_slave(&["cg_lite_suggest", "cg_lite_down"]).await;
    let all = (QUEUES * PER_QUEUE as i32) as usize;

    let consumer = lite_consumer(&pair, "cg_lite_suggest");
    consumer.subscribe(TOPIC, "*").await.unwrap();
    consumer.start().await.unwrap();
    let seen = poll_all(&consumer, all, "reads through the slave").await;
    assert_master_then_slave(&sources(&seen));
    consumer.commit_sync().await.unwrap();
    pair.wait_committed(&pair.cluster.broker_addr.clone(), "cg_lite_suggest", "offsets go to the master").await;
    consumer.shutdown().await;

    pair.stop_master().await;
    let consumer = lite_consumer(&pair, "cg_lite_down");
    consumer.subscribe(TOPIC, "*").await.unwrap();
    consumer.start().await.unwrap();
    let seen = poll_all(&consumer, all, "reads while the master is down").await;
    for (q, s) in sources(&seen) {
        assert!(s.chars().all(|c| c == 's'), "queue {q} read only from the slave: {s}");
    }
    pair.wait_committed(&pair.slave_addr.clone(), "cg_lite_down", "offsets go to the slave meanwhile").await;

    pair.restart_master().await;
    let master = pair.cluster.broker_addr.clone();
    pair.wait_committed(&master, "cg_lite_down", "offsets reach the master once it is back").await;
    assert!(consumer.poll(Duration::from_millis(500)).await.is_empty(), "nothing delivered twice");
    consumer.shutdown().await;
    pair.stop().await;
}

/// The max offset of queue `queue_id` of `TOPIC` at `addr`.
async fn max_offset(remoting: &RemotingClient, addr: &str, queue_id: i32) -> i64 {
    let header =
        GetMaxOffsetRequestHeader { topic: TOPIC.to_owned(), queue_id, committed: None, broker_name: None, lo: None };
    let req = RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&header);
    let resp = remoting.invoke(addr, req, T).await.unwrap();
    resp.decode_header::<OffsetResponseHeader>().map_or(-1, |h| h.offset)
}

/// With real replication: what the master stored before it stopped is read from the slave,
/// byte for byte the master's messages, and the offsets committed meanwhile reach the master
/// when it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_consumer_reads_replicated_messages_from_the_slave_while_the_master_is_down() {
    let cluster = LocalCluster::start(|s| {
        s.broker.broker_ip1 = "127.0.0.1".to_owned();
        s.broker.broker_ip2 = "127.0.0.1".to_owned();
        // A Java slave serves no pull without it.
        s.broker.slave_read_enable = true;
    })
    .await;
    let admin = AdminClient::new(&cluster.ns_addr);
    let remoting = RemotingClient::new(ferromq_remoting::ClientConfig::default());
    let topic = TopicConfig::new(TOPIC, QUEUES, QUEUES);
    admin.create_topic(&cluster.broker_addr, &topic).await.unwrap();
    let slave_dir = tempfile::tempdir().unwrap();
    // The slave learns the master's HA address from the name server's answer.
    let slave = cluster.start_slave(1, slave_dir.path(), |_| {}).await;
    let slave_addr = slave.addr.clone();
    admin.create_topic(&slave_addr, &topic).await.unwrap();
    fill(&remoting, &cluster.broker_addr, "m").await;
    let deadline = Instant::now() + T;
    for q in 0..QUEUES {
        while max_offset(&remoting, &slave_addr, q).await < PER_QUEUE {
            assert!(Instant::now() < deadline, "the slave never caught up on queue {q}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let mut pair = Pair { cluster, slave: Some(slave), slave_addr, _slave_dir: slave_dir, admin, remoting };
    pair.wait_route(|ids| ids == [MASTER_ID, 1]).await;

    pair.stop_master().await;
    let seen = Seen::default();
    let consumer = push_consumer(&pair, "cg_replicated", &seen);
    consumer.subscribe(TOPIC, "*").await.unwrap();
    consumer.start().await.unwrap();
    let all = (QUEUES * PER_QUEUE as i32) as usize;
    wait_for(&seen, all, "replicated messages read from the slave").await;
    for (q, s) in sources(&seen) {
        assert!(s.chars().all(|c| c == 'm'), "queue {q}: the master's messages, as replicated: {s}");
    }
    pair.wait_committed(&pair.slave_addr.clone(), "cg_replicated", "offsets go to the slave meanwhile").await;

    pair.restart_master().await;
    let master = pair.cluster.broker_addr.clone();
    pair.wait_committed(&master, "cg_replicated", "offsets reach the master once it is back").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(seen.lock().unwrap().len(), all, "nothing delivered twice");
    consumer.shutdown().await;
    pair.stop().await;
}
