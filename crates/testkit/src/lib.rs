//! Dev-only helpers: a real name server and broker started in process on 127.0.0.1 port 0
//! with temporary directories, for loopback tests of the broker, the client and the tools.
//! Never a dependency of production code.

mod extra_broker;
pub mod netns;
mod process;
mod pull;
mod relay;

use std::path::Path;
use std::time::{Duration, Instant};

use ferromq_broker::BrokerSettings;
use ferromq_namesrv::NamesrvConfig;
use ferromq_protocol::body::{
    ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, JsonBody, MessageModel, SubscriptionData,
    TopicRouteData,
};
use ferromq_protocol::header::{GetRouteInfoRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2};
use ferromq_protocol::message::MessageProperties;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use extra_broker::{slave_settings, spawn_broker, ExtraBroker};
pub use process::{
    spawn_with_config, start_standalone, start_standalone_with_conf, start_standalone_with_env,
    start_standalone_with_proxy_conf, ChildProcess, Standalone,
};
pub use pull::{pull_messages, pull_request};
pub use relay::Relay;

/// How long the harness waits for anything (registration, shutdown).
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A port free on 127.0.0.1 right now, below the kernel's ephemeral range (see
/// [`candidate_port`]); another test's server may still take it first.
pub fn free_port() -> u16 {
    loop {
        let port = candidate_port(0);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() && reserve(&[port]) {
            return port;
        }
    }
}

/// A port for a server to listen on later. Taken below the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`, 32768-60999 by default) when there is room: a port handed
/// out by binding port 0 comes from that range, and any outgoing connection on the machine
/// can take it (as its local port) before the server binds it; seen in CI as a controller-mode
/// broker that could not bind its HA port for a minute. Below the range only another test's
/// listener can, and the random pick makes two processes' picks rarely meet. `above` ports
/// after the pick stay below the range too.
fn candidate_port(above: u16) -> u16 {
    const LOWEST: u16 = 20_000;
    // Read once per process: every pick of a test binary asks.
    static EPHEMERAL_LOW: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    let ephemeral_low = *EPHEMERAL_LOW.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
            .unwrap_or(0)
    });
    if ephemeral_low < LOWEST + 1_000 {
        return std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind port 0")
            .local_addr()
            .expect("local address")
            .port();
    }
    LOWEST + (next_random() % u64::from(ephemeral_low - LOWEST - above)) as u16
}

/// A xorshift step over a seed of the clock and the process id: a spread, not a secret.
fn next_random() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut x = STATE.load(Ordering::Relaxed);
    if x == 0 {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos());
        x = (nanos as u64 ^ (u64::from(std::process::id()) << 32)) | 1;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    STATE.store(x, Ordering::Relaxed);
    x
}

/// Ports this process handed out, with a broker's neighbours: the tests of one binary run in
/// parallel, and the OS may hand a port released by one test's check to another before the
/// first test's server binds it (seen as a standalone exiting at start in CI).
fn reserve(ports: &[u16]) -> bool {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    if ports.iter().any(|p| handed.contains(p)) {
        return false;
    }
    handed.extend_from_slice(ports);
    true
}

/// A port for a broker started without `haListenPort`: it is free and so are the next one,
/// which such a broker takes for replication (listenPort + 1, as Java does), and the one two
/// below, its VIP channel (listenPort - 2).
pub fn free_broker_port() -> u16 {
    loop {
        let port = candidate_port(1);
        let free = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
        if port > 2
            && port < u16::MAX
            && free(port)
            && free(port + 1)
            && free(port - 2)
            && reserve(&[port, port + 1, port - 2])
        {
            return port;
        }
    }
}

/// Broker settings for tests: small segments and index so files roll, rooted in `dir`.
pub fn test_settings(dir: &Path, ns_addr: &str) -> BrokerSettings {
    let mut s = BrokerSettings::default();
    s.broker.namesrv_addr = ns_addr.to_owned();
    s.store.store_path_root_dir = dir.join("store");
    s.store.mapped_file_size_commit_log = 1 << 20;
    s.store.mapped_file_size_consume_queue = 20 * 1000;
    s.store.max_hash_slot_num = 1000;
    s.store.max_index_num = 4000;
    // Any free port for replication (brokers bind port 0 here, so listenPort + 1 is unknown).
    s.ha.ha_listen_port = 0;
    s
}

/// A heartbeat of one push consumer (`client_id`) of `group`, subscribing all messages of
/// each of `topics` (clustering, from the first offset).
pub fn consumer_heartbeat(client_id: &str, group: &str, topics: &[&str]) -> HeartbeatData {
    HeartbeatData {
        client_id: client_id.into(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            consume_type: ConsumeType::ConsumePassively,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
            subscription_data_set: topics
                .iter()
                .map(|t| SubscriptionData { topic: (*t).into(), sub_string: "*".into(), ..Default::default() })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A SEND_MESSAGE_V2 request as a Java producer sends it (group `pg`, default topic TBW102 with
/// 4 queues, WAIT=true), with `properties` added.
pub fn send_request(topic: &str, queue_id: i32, body: &[u8], properties: &[(&str, &str)]) -> RemotingCommand {
    let mut props = MessageProperties::new();
    for (k, v) in properties {
        props.insert(*k, *v);
    }
    props.insert("WAIT", "true");
    let header: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
        producer_group: "pg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id,
        born_timestamp: 1_700_000_000_000,
        properties: Some(props.encode()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(false),
        ..SendMessageRequestHeader::default()
    }
    .into();
    RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&header).with_body(body.to_vec())
}

struct RunningBroker {
    addr: String,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

async fn start_broker(settings: BrokerSettings) -> RunningBroker {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind broker port");
    let addr = listener.local_addr().expect("local address").to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        ferromq_broker::run(settings, listener, async {
            let _ = stopped.await;
        })
        .await
        .expect("broker runs");
    });
    RunningBroker { addr, stop, task }
}

/// A name server and one broker (`broker-a` in `DefaultCluster` unless tweaked).
pub struct LocalCluster {
    /// Name server `ip:port`.
    pub ns_addr: String,
    /// Broker `ip:port`.
    pub broker_addr: String,
    ns_stop: Option<oneshot::Sender<()>>,
    ns_task: Option<JoinHandle<()>>,
    broker: Option<RunningBroker>,
    tweak: Box<dyn Fn(&mut BrokerSettings) + Send + Sync>,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for LocalCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCluster").field("ns_addr", &self.ns_addr).field("broker_addr", &self.broker_addr).finish()
    }
}

impl LocalCluster {
    /// Starts both and waits until the broker's SELF_TEST_TOPIC route is known (registered).
    pub async fn start(tweak: impl Fn(&mut BrokerSettings) + Send + Sync + 'static) -> LocalCluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let ns_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind name server port");
        let ns_addr = ns_listener.local_addr().expect("local address").to_string();
        let config = NamesrvConfig {
            kv_config_path: dir.path().join("kv.json"),
            config_store_path: dir.path().join("namesrv.properties"),
            ..NamesrvConfig::default()
        };
        let (ns_stop, ns_stopped) = oneshot::channel::<()>();
        let ns_task = tokio::spawn(async move {
            ferromq_namesrv::run(config, ns_listener, async {
                let _ = ns_stopped.await;
            })
            .await
            .expect("name server runs");
        });
        let mut settings = test_settings(dir.path(), &ns_addr);
        tweak(&mut settings);
        let broker = start_broker(settings).await;
        let c = LocalCluster {
            ns_addr,
            broker_addr: broker.addr.clone(),
            ns_stop: Some(ns_stop),
            ns_task: Some(ns_task),
            broker: Some(broker),
            tweak: Box::new(tweak),
            dir,
        };
        c.wait_registered("SELF_TEST_TOPIC").await;
        c
    }

    /// The directory holding the broker's store.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Waits until the name server has a route for `topic`, and returns it.
    ///
    /// # Panics
    /// When no route appears within [`TIMEOUT`].
    pub async fn wait_registered(&self, topic: &str) -> TopicRouteData {
        let client = RemotingClient::new(ClientConfig::default());
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let req = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)
                .with_header(&GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: None });
            if let Ok(r) = client.invoke(&self.ns_addr, req, TIMEOUT).await {
                if r.code == response_code::SUCCESS {
                    client.shutdown().await;
                    return TopicRouteData::decode(&r.body).expect("route body");
                }
            }
            assert!(Instant::now() < deadline, "broker never registered {topic}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the broker cleanly and starts it again on the same directory (new port).
    pub async fn restart_broker(&mut self) {
        self.stop_broker().await;
        let mut settings = test_settings(self.dir.path(), &self.ns_addr);
        (self.tweak)(&mut settings);
        let broker = start_broker(settings).await;
        self.broker_addr = broker.addr.clone();
        self.broker = Some(broker);
    }

    /// Stops the broker cleanly (the name server keeps running); [`Self::restart_broker`]
    /// starts it again.
    pub async fn stop_broker(&mut self) {
        if let Some(b) = self.broker.take() {
            let _ = b.stop.send(());
            tokio::time::timeout(TIMEOUT, b.task).await.expect("broker stops in time").expect("broker task");
        }
    }

    /// Stops the broker, then the name server.
    pub async fn stop(mut self) {
        self.stop_broker().await;
        if let Some(stop) = self.ns_stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.ns_task.take() {
            tokio::time::timeout(TIMEOUT, task).await.expect("name server stops in time").expect("name server task");
        }
    }
}
