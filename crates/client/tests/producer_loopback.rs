//! The producer against a real name server and broker(s) over loopback: every send flavour,
//! compression, ids, validation, unknown topics and broker fail-over. Stored messages are
//! checked by pulling them back.

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use ferromq_broker::BrokerSettings;
use ferromq_client::{
    select_by_hash, ClientConfig, ClientError, Message, MessageQueue, Producer, ProducerConfig, SendStatus,
};
use ferromq_namesrv::NamesrvConfig;
use ferromq_protocol::body::{JsonBody, TopicRouteData};
use ferromq_protocol::header::*;
use ferromq_protocol::message::{keys, sysflag, MessageProperties, StoredMessage};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::RemotingClient;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const T: Duration = Duration::from_secs(10);

struct Broker {
    addr: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

struct Cluster {
    ns_addr: String,
    ns_stop: Option<oneshot::Sender<()>>,
    ns_task: JoinHandle<()>,
    brokers: Vec<Broker>,
    raw: RemotingClient,
    _dir: tempfile::TempDir,
}

async fn start_broker(dir: &Path, ns_addr: &str, name: &str, auto_create: bool) -> Broker {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut s = BrokerSettings::default();
    s.broker.namesrv_addr = ns_addr.to_owned();
    s.broker.broker_name = name.to_owned();
    s.broker.broker_ip1 = "127.0.0.1".to_owned();
    s.broker.auto_create_topic_enable = auto_create;
    s.store.store_path_root_dir = dir.join(name);
    s.store.mapped_file_size_commit_log = 1 << 20;
    s.store.mapped_file_size_consume_queue = 20 * 1000;
    s.store.max_hash_slot_num = 1000;
    s.store.max_index_num = 4000;
    // Any free port for replication: listenPort + 1 of a port-0 listener may be taken (a CI
    // run failed on it).
    s.ha.ha_listen_port = 0;
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        ferromq_broker::run(s, listener, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    Broker { addr, stop: Some(stop), task: Some(task) }
}

impl Cluster {
    async fn start(broker_names: &[&str], auto_create: bool) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let ns_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let ns_addr = ns_listener.local_addr().unwrap().to_string();
        let config = NamesrvConfig { kv_config_path: dir.path().join("kv.json"), ..NamesrvConfig::default() };
        let (ns_stop, ns_stopped) = oneshot::channel::<()>();
        let ns_task = tokio::spawn(async move {
            ferromq_namesrv::run(config, ns_listener, async {
                let _ = ns_stopped.await;
            })
            .await
            .unwrap();
        });
        let mut brokers = Vec::new();
        for name in broker_names {
            brokers.push(start_broker(dir.path(), &ns_addr, name, auto_create).await);
        }
        let c = Cluster {
            ns_addr,
            ns_stop: Some(ns_stop),
            ns_task,
            brokers,
            raw: RemotingClient::new(ferromq_remoting::ClientConfig::default()),
            _dir: dir,
        };
        c.wait_route("SELF_TEST_TOPIC", broker_names.len()).await;
        c
    }

    /// Waits until the name server lists `groups` broker groups for `topic`.
    async fn wait_route(&self, topic: &str, groups: usize) -> TopicRouteData {
        let deadline = Instant::now() + T;
        loop {
            let req = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)
                .with_header(&GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: None });
            if let Ok(r) = self.raw.invoke(&self.ns_addr, req, T).await {
                if r.code == response_code::SUCCESS {
                    let route = TopicRouteData::decode(&r.body).unwrap();
                    if route.queue_datas.len() >= groups {
                        return route;
                    }
                }
            }
            assert!(Instant::now() < deadline, "route of {topic} never had {groups} groups");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Creates `topic` on broker `i` by a raw send (auto-creation from TBW102).
    async fn create_topic(&self, i: usize, topic: &str) {
        let mut props = MessageProperties::new();
        props.insert(keys::WAIT, "true");
        let h: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
            producer_group: "setup".into(),
            topic: topic.into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 0,
            sys_flag: 0,
            born_timestamp: 1,
            flag: 0,
            properties: Some(props.encode()),
            ..Default::default()
        }
        .into();
        let req = RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&h).with_body(&b"setup"[..]);
        let r = self.raw.invoke(&self.brokers[i].addr, req, T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }

    /// Pulls queue `queue_id` of `topic` on broker `i` from `offset` until at least `min`
    /// messages come back.
    async fn pull(&self, i: usize, topic: &str, queue_id: i32, offset: i64, min: usize) -> Vec<StoredMessage> {
        let deadline = Instant::now() + T;
        loop {
            let req = RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&PullMessageRequestHeader {
                consumer_group: "cg".into(),
                topic: topic.into(),
                queue_id,
                queue_offset: offset,
                max_msg_nums: 64,
                sys_flag: pull_sys_flag::SUBSCRIPTION,
                commit_offset: 0,
                suspend_timeout_millis: 0,
                subscription: Some("*".into()),
                sub_version: 0,
                expression_type: Some("TAG".into()),
                ..Default::default()
            });
            let r = self.raw.invoke(&self.brokers[i].addr, req, T).await.unwrap();
            if min == 0 && r.code != response_code::SUCCESS {
                return Vec::new();
            }
            if r.code == response_code::SUCCESS {
                let msgs = StoredMessage::decode_all(&r.body).unwrap();
                if msgs.len() >= min {
                    return msgs;
                }
            }
            assert!(Instant::now() < deadline, "pull of {topic}/{queue_id}@{offset} found < {min}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn stop_broker(&mut self, i: usize) {
        let b = &mut self.brokers[i];
        let _ = b.stop.take().unwrap().send(());
        tokio::time::timeout(T, b.task.take().unwrap()).await.expect("broker stops").unwrap();
    }

    async fn stop(mut self) {
        for i in 0..self.brokers.len() {
            if self.brokers[i].stop.is_some() {
                self.stop_broker(i).await;
            }
        }
        self.raw.shutdown().await;
        let _ = self.ns_stop.take().unwrap().send(());
        tokio::time::timeout(T, &mut self.ns_task).await.expect("namesrv stops").unwrap();
    }
}

async fn producer(c: &Cluster, group: &str, tweak: impl FnOnce(&mut ProducerConfig)) -> Producer {
    let mut config = ProducerConfig { group: group.into(), ..ProducerConfig::default() };
    tweak(&mut config);
    let p = Producer::new(config, ClientConfig::with_namesrv(&c.ns_addr));
    p.start().await.unwrap();
    p
}

fn body_text(m: &StoredMessage) -> String {
    String::from_utf8(m.body.to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_send_stores_the_message_with_its_uniq_key_as_msg_id() {
    let c = Cluster::start(&["broker-a"], true).await;
    let p = producer(&c, "pg_sync", |_| {}).await;
    // The first send goes through the TBW102 route and auto-creates the topic.
    let r = p.send(Message::new("Orders", "hello").with_tags("TagA").with_keys(["k1", "k2"])).await.unwrap();
    assert_eq!(r.status, SendStatus::SendOk);
    assert_eq!(r.message_queue.topic, "Orders");
    assert_eq!(r.message_queue.broker_name, "broker-a");
    let stored = c.pull(0, "Orders", r.message_queue.queue_id, r.queue_offset, 1).await;
    let m = &stored[0];
    assert_eq!(body_text(m), "hello");
    assert_eq!(m.property(keys::UNIQ_KEY), Some(r.msg_id.as_str()));
    assert_eq!(m.property(keys::TAGS), Some("TagA"));
    assert_eq!(m.property(keys::KEYS), Some("k1 k2"));
    assert_eq!(m.offset_msg_id(), r.offset_msg_id);
    assert_eq!(m.sys_flag & sysflag::COMPRESSED_FLAG, 0);

    // Oneway: no result, but the message arrives.
    p.send_oneway(Message::new("Orders", "fire-and-forget")).await.unwrap();
    let mut found = false;
    let deadline = Instant::now() + T;
    while !found {
        for q in 0..4 {
            let all = c.pull(0, "Orders", q, 0, 0).await;
            found |= all.iter().any(|m| body_text(m) == "fire-and-forget");
        }
        assert!(found || Instant::now() < deadline, "oneway message never stored");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    p.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_selector_batch_and_compression_land_where_expected() {
    let c = Cluster::start(&["broker-a"], true).await;
    c.create_topic(0, "Shop").await;
    c.wait_route("Shop", 1).await;
    let p = producer(&c, "pg_route", |_| {}).await;

    // send_to_queue
    let mq = MessageQueue::new("Shop", "broker-a", 2);
    let r = p.send_to_queue(Message::new("Shop", "to-q2"), &mq).await.unwrap();
    assert_eq!(r.message_queue, mq);
    let got = c.pull(0, "Shop", 2, r.queue_offset, 1).await;
    assert_eq!(body_text(&got[0]), "to-q2");

    // A hash selector keeps one sharding key on one queue.
    let mut queues = std::collections::BTreeSet::new();
    for i in 0..6 {
        let r =
            p.send_with_selector(Message::new("Shop", format!("order-{i}")), select_by_hash("order-77")).await.unwrap();
        queues.insert(r.message_queue.queue_id);
    }
    assert_eq!(queues.len(), 1, "{queues:?}");

    // A batch of 32 is one request, stored as 32 messages with their own UNIQ_KEYs.
    let msgs: Vec<_> = (0..32).map(|i| Message::new("Shop", format!("b{i}"))).collect();
    let r = p.send_batch(msgs).await.unwrap();
    let ids: Vec<&str> = r.msg_id.split(',').collect();
    assert_eq!(ids.len(), 32);
    let got = c.pull(0, "Shop", r.message_queue.queue_id, r.queue_offset, 32).await;
    let got: Vec<_> = got.iter().take(32).collect();
    for (i, m) in got.iter().enumerate() {
        assert_eq!(body_text(m), format!("b{i}"));
        assert_eq!(m.property(keys::UNIQ_KEY), Some(ids[i]));
    }

    // A 10 KiB body is stored zlib-compressed with COMPRESSED_FLAG.
    let big: Vec<u8> = (0..10 * 1024).map(|i| (i % 251) as u8).collect();
    let r = p.send(Message::new("Shop", big.clone())).await.unwrap();
    let got = c.pull(0, "Shop", r.message_queue.queue_id, r.queue_offset, 1).await;
    assert_eq!(got[0].sys_flag & sysflag::COMPRESSED_FLAG, sysflag::COMPRESSED_FLAG);
    assert!(got[0].body.len() < big.len());
    let mut inflated = Vec::new();
    flate2_inflate(&got[0].body, &mut inflated);
    assert_eq!(inflated, big);
    p.shutdown().await;
    c.stop().await;
}

fn flate2_inflate(z: &[u8], out: &mut Vec<u8>) {
    flate2::read::ZlibDecoder::new(z).read_to_end(out).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_messages_are_refused_before_sending() {
    let c = Cluster::start(&["broker-a"], true).await;
    let p = producer(&c, "pg_valid", |cfg| cfg.max_message_size = 1024).await;
    for msg in [
        Message::new("bad topic!", "x"),
        Message::new("x".repeat(128), "x"),
        Message::new("Fine", ""),
        Message::new("Fine", vec![0u8; 1025]),
    ] {
        let e = p.send(msg).await.unwrap_err();
        assert!(matches!(e, ClientError::Validation { .. }), "{e:?}");
    }
    let e = p.send_oneway(Message::new("", "x")).await.unwrap_err();
    assert!(matches!(e, ClientError::Validation { .. }), "{e:?}");
    p.shutdown().await;
    let e = p.send(Message::new("Fine", "x")).await.unwrap_err();
    assert!(matches!(e, ClientError::NotRunning { .. }), "{e:?}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_topic_without_auto_create_is_a_typed_error() {
    let c = Cluster::start(&["broker-a"], false).await;
    let p = producer(&c, "pg_unknown", |_| {}).await;
    let e = p.send(Message::new("NoSuchTopic", "x")).await.unwrap_err();
    let typed = matches!(e, ClientError::RouteNotFound { ref topic } if topic == "NoSuchTopic")
        || matches!(e, ClientError::Broker { code: response_code::TOPIC_NOT_EXIST, .. });
    assert!(typed, "{e:?}");
    p.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_fail_over_to_the_other_broker_when_one_stops() {
    let mut c = Cluster::start(&["broker-a", "broker-b"], true).await;
    c.create_topic(0, "Pay").await;
    c.create_topic(1, "Pay").await;
    c.wait_route("Pay", 2).await;
    let p = producer(&c, "pg_failover", |_| {}).await;
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..8 {
        seen.insert(p.send(Message::new("Pay", format!("before-{i}"))).await.unwrap().message_queue.broker_name);
    }
    assert_eq!(seen.len(), 2, "round robin uses both brokers: {seen:?}");

    c.stop_broker(1).await;
    for i in 0..10 {
        let r = p.send(Message::new("Pay", format!("after-{i}"))).await.unwrap();
        assert_eq!(r.message_queue.broker_name, "broker-a");
    }
    p.shutdown().await;
    c.stop().await;
}
