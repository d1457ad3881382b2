//! The name server over real loopback TCP: registrations from two broker groups with masters
//! and slaves, route and cluster queries, expiry, KV config and bad input.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use ferromq_namesrv::NamesrvConfig;
use ferromq_protocol::body::{
    ClusterInfo, DataVersion, GetBrokerMemberGroupResponseBody, JsonBody, KVTable, RegisterBrokerBody, TopicConfig,
    TopicConfigAndMappingSerializeWrapper, TopicList, TopicRouteData,
};
use ferromq_protocol::header::*;
use ferromq_protocol::message::crc32_masked;
use ferromq_protocol::{json, request_code, response_code, version, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

const TIMEOUT: Duration = Duration::from_secs(5);

struct Namesrv {
    addr: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Namesrv {
    async fn start(tweak: impl FnOnce(&mut NamesrvConfig)) -> Namesrv {
        let dir = tempfile::tempdir().unwrap();
        let mut config = NamesrvConfig {
            kv_config_path: dir.path().join("kvConfig.json"),
            config_store_path: dir.path().join("namesrv.properties"),
            ..NamesrvConfig::default()
        };
        tweak(&mut config);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            ferromq_namesrv::run(config, listener, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        Namesrv { addr, stop: Some(stop), task, _dir: dir }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(TIMEOUT, &mut self.task).await.expect("name server stops").unwrap();
    }
}

fn topic(name: &str, queues: i32) -> TopicConfig {
    TopicConfig::new(name, queues, queues)
}

fn registration(
    cluster: &str,
    name: &str,
    id: i64,
    addr: &str,
    topics: &[TopicConfig],
    compressed: bool,
) -> RemotingCommand {
    let mut table = BTreeMap::new();
    for t in topics {
        table.insert(t.topic_name.clone(), t.clone());
    }
    let body = RegisterBrokerBody {
        filter_server_list: vec![],
        topic_config_serialize_wrapper: TopicConfigAndMappingSerializeWrapper {
            data_version: DataVersion::now(),
            topic_config_table: table,
            ..Default::default()
        },
    }
    .encode(compressed, version::CURRENT);
    let header = RegisterBrokerRequestHeader {
        broker_name: name.into(),
        broker_addr: addr.into(),
        cluster_name: cluster.into(),
        ha_server_addr: format!("{addr}-ha"),
        broker_id: id,
        heartbeat_timeout_millis: None,
        enable_acting_master: Some(false),
        compressed: Some(compressed),
        body_crc32: Some(crc32_masked(&body) as i32),
    };
    RemotingCommand::request(request_code::REGISTER_BROKER).with_header(&header).with_body(body)
}

async fn call(client: &RemotingClient, addr: &str, cmd: RemotingCommand) -> RemotingCommand {
    client.invoke(addr, cmd, TIMEOUT).await.expect("name server answers")
}

fn route_request(topic: &str, client_version: i32) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)
        .with_header(&GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: None });
    cmd.version = client_version;
    cmd
}

/// Polls `check` until it holds or a generous deadline passes.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

#[tokio::test]
async fn two_broker_groups_with_slaves_merge_into_routes_and_cluster_info() {
    let ns = Namesrv::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let shared = topic("SharedTopic", 4);
    // broker-a: master and slave, plain bodies; broker-b: master only, compressed body.
    let r = call(
        &client,
        &ns.addr,
        registration("DefaultCluster", "broker-a", 0, "127.0.0.1:10911", &[shared.clone(), topic("OnlyA", 2)], false),
    )
    .await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let slave = call(
        &client,
        &ns.addr,
        registration("DefaultCluster", "broker-a", 1, "127.0.0.2:10911", std::slice::from_ref(&shared), false),
    )
    .await;
    assert_eq!(slave.code, response_code::SUCCESS);
    let slave_header: RegisterBrokerResponseHeader = slave.decode_header().unwrap();
    assert_eq!(slave_header.master_addr.as_deref(), Some("127.0.0.1:10911"));
    assert_eq!(slave_header.ha_server_addr.as_deref(), Some("127.0.0.1:10911-ha"));
    let r = call(
        &client,
        &ns.addr,
        registration("DefaultCluster", "broker-b", 0, "127.0.0.3:10911", std::slice::from_ref(&shared), true),
    )
    .await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    let r = call(&client, &ns.addr, route_request("SharedTopic", version::CURRENT)).await;
    assert_eq!(r.code, response_code::SUCCESS);
    let route = TopicRouteData::decode(&r.body).unwrap();
    assert_eq!(route.queue_datas.len(), 2);
    assert!(route.queue_datas.iter().all(|q| q.read_queue_nums == 4 && q.write_queue_nums == 4 && q.perm == 6));
    let a = route.broker_datas.iter().find(|b| b.broker_name == "broker-a").unwrap();
    assert_eq!(a.broker_addrs.get(&0).map(String::as_str), Some("127.0.0.1:10911"));
    assert_eq!(a.broker_addrs.get(&1).map(String::as_str), Some("127.0.0.2:10911"));
    assert_eq!(a.cluster, "DefaultCluster");
    // New clients get standard JSON with quoted broker ids...
    let text = String::from_utf8(r.body.to_vec()).unwrap();
    assert!(text.contains(r#""0":"127.0.0.1:10911""#), "{text}");
    // ...and pre-4.9.4 clients fastjson's unquoted ones, as the Java name server writes.
    let old = call(&client, &ns.addr, route_request("SharedTopic", version::V4_0_0)).await;
    let old_text = String::from_utf8(old.body.to_vec()).unwrap();
    assert!(old_text.contains(r#"0:"127.0.0.1:10911""#) && !old_text.contains(r#""0":"#), "{old_text}");
    assert_eq!(TopicRouteData::decode(&old.body).unwrap(), route);

    let r = call(&client, &ns.addr, RemotingCommand::request(request_code::GET_BROKER_CLUSTER_INFO)).await;
    let info: ClusterInfo = json::parse_lenient(&r.body).unwrap();
    assert_eq!(info.cluster_addr_table["DefaultCluster"].len(), 2);
    assert_eq!(info.broker_addr_table["broker-a"].broker_addrs.len(), 2);

    // A group's members, as a 5.x broker asks for them; an unknown group has none.
    let member_group = |broker_name: &str| {
        RemotingCommand::request(request_code::GET_BROKER_MEMBER_GROUP).with_header(
            &GetBrokerMemberGroupRequestHeader {
                cluster_name: "DefaultCluster".into(),
                broker_name: broker_name.into(),
            },
        )
    };
    let r = call(&client, &ns.addr, member_group("broker-a")).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let text = String::from_utf8(r.body.to_vec()).unwrap();
    assert_eq!(
        text,
        r#"{"brokerMemberGroup":{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}}"#
    );
    let r = call(&client, &ns.addr, member_group("broker-x")).await;
    let group = GetBrokerMemberGroupResponseBody::decode(&r.body).unwrap().broker_member_group;
    assert_eq!((group.broker_name.as_str(), group.broker_addrs.len()), ("broker-x", 0));
    let missing = RemotingCommand::request(request_code::GET_BROKER_MEMBER_GROUP);
    assert_eq!(call(&client, &ns.addr, missing).await.code, response_code::SYSTEM_ERROR, "header fields are required");

    let r = call(&client, &ns.addr, RemotingCommand::request(request_code::GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).await;
    let topics = TopicList::decode(&r.body).unwrap();
    assert!(topics.topic_list.contains("SharedTopic") && topics.topic_list.contains("OnlyA"));
    let r = call(
        &client,
        &ns.addr,
        RemotingCommand::request(request_code::GET_TOPICS_BY_CLUSTER)
            .with_header(&GetTopicsByClusterRequestHeader { cluster: "DefaultCluster".into() }),
    )
    .await;
    assert_eq!(TopicList::decode(&r.body).unwrap().topic_list.len(), 2);
    let r = call(&client, &ns.addr, RemotingCommand::request(request_code::GET_SYSTEM_TOPIC_LIST_FROM_NS)).await;
    let sys = TopicList::decode(&r.body).unwrap();
    assert!(sys.topic_list.contains("DefaultCluster") && sys.topic_list.contains("broker-b"));

    let r = call(&client, &ns.addr, route_request("NoSuchTopic", version::CURRENT)).await;
    assert_eq!(r.code, response_code::TOPIC_NOT_EXIST);
    assert!(r.remark.unwrap().contains("NoSuchTopic"));
    client.shutdown().await;
    ns.stop().await;
}

#[tokio::test]
async fn broker_is_removed_when_its_connection_closes() {
    let ns = Namesrv::start(|_| {}).await;
    let admin = RemotingClient::new(ClientConfig::default());
    call(&admin, &ns.addr, registration("c1", "broker-a", 0, "127.0.0.1:20911", &[topic("Stays", 1)], false)).await;
    let broker_b = RemotingClient::new(ClientConfig::default());
    call(&broker_b, &ns.addr, registration("c1", "broker-b", 0, "127.0.0.1:30911", &[topic("Goes", 1)], false)).await;
    assert_eq!(call(&admin, &ns.addr, route_request("Goes", version::CURRENT)).await.code, response_code::SUCCESS);
    broker_b.shutdown().await;
    eventually("broker-b's topic disappears", || async {
        call(&admin, &ns.addr, route_request("Goes", version::CURRENT)).await.code == response_code::TOPIC_NOT_EXIST
    })
    .await;
    assert_eq!(call(&admin, &ns.addr, route_request("Stays", version::CURRENT)).await.code, response_code::SUCCESS);
    let r = call(&admin, &ns.addr, RemotingCommand::request(request_code::GET_BROKER_CLUSTER_INFO)).await;
    let info: ClusterInfo = json::parse_lenient(&r.body).unwrap();
    assert!(!info.broker_addr_table.contains_key("broker-b"));
    admin.shutdown().await;
    ns.stop().await;
}

#[tokio::test]
async fn silent_broker_expires_after_its_heartbeat_timeout() {
    let ns = Namesrv::start(|c| c.scan_not_active_broker_interval_ms = 100).await;
    // The broker's own connection: the name server closes it when the broker expires, as the
    // Java name server closes an expired broker's channel.
    let broker = RemotingClient::new(ClientConfig::default());
    let admin = RemotingClient::new(ClientConfig::default());
    let mut reg = registration("c1", "broker-a", 0, "127.0.0.1:40911", &[topic("Short", 1)], false);
    reg.ext_fields.insert("heartbeatTimeoutMillis".into(), "300");
    assert_eq!(call(&broker, &ns.addr, reg).await.code, response_code::SUCCESS);
    // A BROKER_HEARTBEAT keeps it alive for a while...
    let hb = BrokerHeartbeatRequestHeader {
        cluster_name: "c1".into(),
        broker_addr: "127.0.0.1:40911".into(),
        broker_name: "broker-a".into(),
        ..Default::default()
    };
    assert_eq!(
        call(&broker, &ns.addr, RemotingCommand::request(request_code::BROKER_HEARTBEAT).with_header(&hb)).await.code,
        response_code::SUCCESS
    );
    // ...but without more, the scan drops it although it never closed its connection.
    eventually("the silent broker expires", || async {
        call(&admin, &ns.addr, route_request("Short", version::CURRENT)).await.code == response_code::TOPIC_NOT_EXIST
    })
    .await;
    broker.shutdown().await;
    admin.shutdown().await;
    ns.stop().await;
}

#[tokio::test]
async fn kv_config_round_trips_and_feeds_order_topic_routes() {
    let ns = Namesrv::start(|c| c.order_message_enable = true).await;
    let client = RemotingClient::new(ClientConfig::default());
    let put = |ns: &str, k: &str, v: &str| {
        RemotingCommand::request(request_code::PUT_KV_CONFIG).with_header(&PutKvConfigRequestHeader {
            namespace: ns.into(),
            key: k.into(),
            value: v.into(),
        })
    };
    assert_eq!(
        call(&client, &ns.addr, put("ORDER_TOPIC_CONFIG", "Ordered", "broker-a:4")).await.code,
        response_code::SUCCESS
    );
    assert_eq!(call(&client, &ns.addr, put("app", "k1", "v1")).await.code, response_code::SUCCESS);
    let get = |k: &str| {
        RemotingCommand::request(request_code::GET_KV_CONFIG)
            .with_header(&GetKvConfigRequestHeader { namespace: "app".into(), key: k.into() })
    };
    let r = call(&client, &ns.addr, get("k1")).await;
    assert_eq!(r.decode_header::<GetKvConfigResponseHeader>().unwrap().value.as_deref(), Some("v1"));
    assert_eq!(call(&client, &ns.addr, get("missing")).await.code, response_code::QUERY_NOT_FOUND);
    let list_app = RemotingCommand::request(request_code::GET_KVLIST_BY_NAMESPACE)
        .with_header(&GetKvListByNamespaceRequestHeader { namespace: "app".into() });
    let r = call(&client, &ns.addr, list_app.clone()).await;
    assert_eq!(KVTable::decode(&r.body).unwrap().table.get("k1").map(String::as_str), Some("v1"));
    let del = RemotingCommand::request(request_code::DELETE_KV_CONFIG)
        .with_header(&DeleteKvConfigRequestHeader { namespace: "app".into(), key: "k1".into() });
    assert_eq!(call(&client, &ns.addr, del).await.code, response_code::SUCCESS);
    assert_eq!(call(&client, &ns.addr, get("k1")).await.code, response_code::QUERY_NOT_FOUND);
    // The emptied namespace stays, listed empty (as Java).
    let r = call(&client, &ns.addr, list_app.clone()).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert!(KVTable::decode(&r.body).unwrap().table.is_empty());

    // A broker registering gets the order-topic table back, and routes carry the entry.
    let r =
        call(&client, &ns.addr, registration("c1", "broker-a", 0, "127.0.0.1:10911", &[topic("Ordered", 4)], false))
            .await;
    assert_eq!(KVTable::decode(&r.body).unwrap().table.get("Ordered").map(String::as_str), Some("broker-a:4"));
    let r = call(&client, &ns.addr, route_request("Ordered", version::CURRENT)).await;
    assert_eq!(TopicRouteData::decode(&r.body).unwrap().order_topic_conf.as_deref(), Some("broker-a:4"));
    client.shutdown().await;
    ns.stop().await;
}

#[tokio::test]
async fn write_permission_is_wiped_and_restored() {
    let ns = Namesrv::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let mut write_only = topic("T3", 1);
    write_only.perm = 2;
    let reg =
        registration("c1", "broker-a", 0, "127.0.0.1:10911", &[topic("T1", 2), topic("T2", 2), write_only], false);
    call(&client, &ns.addr, reg.clone()).await;
    let r = call(
        &client,
        &ns.addr,
        RemotingCommand::request(request_code::WIPE_WRITE_PERM_OF_BROKER)
            .with_header(&WipeWritePermOfBrokerRequestHeader { broker_name: "broker-a".into() }),
    )
    .await;
    assert_eq!(r.decode_header::<WipeWritePermOfBrokerResponseHeader>().unwrap().wipe_topic_count, 3);
    let route =
        TopicRouteData::decode(&call(&client, &ns.addr, route_request("T1", version::CURRENT)).await.body).unwrap();
    assert_eq!(route.queue_datas[0].perm, 4);
    let r = call(
        &client,
        &ns.addr,
        RemotingCommand::request(request_code::ADD_WRITE_PERM_OF_BROKER)
            .with_header(&AddWritePermOfBrokerRequestHeader { broker_name: "broker-a".into() }),
    )
    .await;
    assert_eq!(r.decode_header::<AddWritePermOfBrokerResponseHeader>().unwrap().add_topic_count, 3);
    let route =
        TopicRouteData::decode(&call(&client, &ns.addr, route_request("T1", version::CURRENT)).await.body).unwrap();
    assert_eq!(route.queue_datas[0].perm, 6);
    // Restoring gives read and write, whatever the queue had (Java).
    let route =
        TopicRouteData::decode(&call(&client, &ns.addr, route_request("T3", version::CURRENT)).await.body).unwrap();
    assert_eq!(route.queue_datas[0].perm, 6);

    let del = RemotingCommand::request(request_code::DELETE_TOPIC_IN_NAMESRV)
        .with_header(&DeleteTopicFromNamesrvRequestHeader { topic: "T2".into(), cluster_name: None });
    assert_eq!(call(&client, &ns.addr, del).await.code, response_code::SUCCESS);
    let r = call(&client, &ns.addr, route_request("T2", version::CURRENT)).await;
    assert_eq!(r.code, response_code::TOPIC_NOT_EXIST);
    assert_eq!(
        r.remark.as_deref(),
        Some("No topic route info in name server for the topic: T2\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.")
    );
    // A topic deleted from one cluster comes back with the next registration of a broker that
    // still has it, even at the same data version (Java 5's isTopicConfigChanged).
    call(&client, &ns.addr, reg).await;
    let reg_b = registration("c2", "broker-b", 0, "127.0.0.1:10921", &[topic("T2", 2)], false);
    call(&client, &ns.addr, reg_b.clone()).await;
    let brokers_of = |route: RemotingCommand| {
        let mut names: Vec<String> =
            TopicRouteData::decode(&route.body).unwrap().queue_datas.into_iter().map(|q| q.broker_name).collect();
        names.sort();
        names
    };
    assert_eq!(
        brokers_of(call(&client, &ns.addr, route_request("T2", version::CURRENT)).await),
        ["broker-a", "broker-b"]
    );
    let del = RemotingCommand::request(request_code::DELETE_TOPIC_IN_NAMESRV)
        .with_header(&DeleteTopicFromNamesrvRequestHeader { topic: "T2".into(), cluster_name: Some("c2".into()) });
    assert_eq!(call(&client, &ns.addr, del).await.code, response_code::SUCCESS);
    assert_eq!(brokers_of(call(&client, &ns.addr, route_request("T2", version::CURRENT)).await), ["broker-a"]);
    call(&client, &ns.addr, reg_b).await;
    assert_eq!(
        brokers_of(call(&client, &ns.addr, route_request("T2", version::CURRENT)).await),
        ["broker-a", "broker-b"]
    );

    // Unregistering removes the address whatever broker id the request names.
    let unreg = RemotingCommand::request(request_code::UNREGISTER_BROKER).with_header(&UnRegisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: "127.0.0.1:10911".into(),
        cluster_name: "c1".into(),
        broker_id: 7,
    });
    assert_eq!(call(&client, &ns.addr, unreg).await.code, response_code::SUCCESS);
    assert_eq!(
        call(&client, &ns.addr, route_request("T1", version::CURRENT)).await.code,
        response_code::TOPIC_NOT_EXIST
    );
    client.shutdown().await;
    ns.stop().await;
}

/// 5.x zones: a broker registers its `__ZONE_NAME`; a client in zone mode gets the groups of
/// its zone, plus any group whose master is down (its slaves serve reads wherever they are).
/// Brokers and clients send the fields on every request once configured with a zone, as
/// Java's `DynamicalExtFieldRPCHook` does from `ROCKETMQ_ZONE` / `ROCKETMQ_ZONE_MODE`.
#[tokio::test]
async fn zone_mode_clients_get_the_routes_of_their_zone() {
    let ns = Namesrv::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    // Each broker keeps its connection open: the name server drops a broker whose
    // registration connection closes.
    let mut brokers_connections = Vec::new();
    for (name, id, addr, zone) in [
        ("broker-a", 0, "127.0.0.1:10911", "z1"),
        ("broker-b", 0, "127.0.0.1:10921", "z2"),
        ("broker-c", 1, "127.0.0.1:10932", "z2"),
    ] {
        let broker = RemotingClient::new(ClientConfig::default().with_zone(Some(zone.into()), None));
        let reg = registration("c1", name, id, addr, &[topic("Zoned", 2)], false);
        assert_eq!(call(&broker, &ns.addr, reg).await.code, response_code::SUCCESS);
        brokers_connections.push(broker);
    }
    let brokers = |route: &RemotingCommand| {
        let route = TopicRouteData::decode(&route.body).unwrap();
        let mut names: Vec<String> = route.broker_datas.iter().map(|b| b.broker_name.clone()).collect();
        names.sort();
        let mut queues: Vec<String> = route.queue_datas.iter().map(|q| q.broker_name.clone()).collect();
        queues.sort();
        assert_eq!(names, queues, "queues only of the brokers kept");
        (names, route.broker_datas.iter().find(|b| b.broker_name == "broker-a").and_then(|b| b.zone_name.clone()))
    };
    let all = call(&client, &ns.addr, route_request("Zoned", version::CURRENT)).await;
    assert_eq!(brokers(&all), (vec!["broker-a".into(), "broker-b".into(), "broker-c".into()], Some("z1".into())));
    let zoned = RemotingClient::new(ClientConfig::default().with_zone(Some("Z1".into()), Some("true".into())));
    let r = call(&zoned, &ns.addr, route_request("Zoned", version::CURRENT)).await;
    assert_eq!(brokers(&r).0, ["broker-a", "broker-c"], "its zone, and the group without a master");
    // A blank zone is no zone: the client gets every group.
    let blank = RemotingClient::new(ClientConfig::default().with_zone(Some(" ".into()), Some("true".into())));
    let r = call(&blank, &ns.addr, route_request("Zoned", version::CURRENT)).await;
    assert_eq!(brokers(&r).0.len(), 3);
    for c in brokers_connections.into_iter().chain([zoned, blank]) {
        c.shutdown().await;
    }
    client.shutdown().await;
    ns.stop().await;
}

/// 5.x acting master: when a group's master unregisters and its slaves may act for it, the
/// group's queues lose write permission and routes name the first slave as master; the group's
/// member-sync topic still shows the real members.
#[tokio::test]
async fn a_group_without_its_master_is_served_read_only_by_an_acting_slave() {
    let ns = Namesrv::start(|c| c.support_acting_master = true).await;
    let client = RemotingClient::new(ClientConfig::default());
    let sync_topic = "rmq_sys_SYNC_BROKER_MEMBER_broker-a";
    for (id, addr) in [(0, "127.0.0.1:10911"), (1, "127.0.0.1:10912")] {
        let mut reg = registration("c1", "broker-a", id, addr, &[topic("Acted", 2), topic(sync_topic, 1)], false);
        reg.ext_fields.insert("enableActingMaster".into(), "true");
        assert_eq!(call(&client, &ns.addr, reg).await.code, response_code::SUCCESS);
    }
    let unreg = RemotingCommand::request(request_code::UNREGISTER_BROKER).with_header(&UnRegisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: "127.0.0.1:10911".into(),
        cluster_name: "c1".into(),
        broker_id: 0,
    });
    assert_eq!(call(&client, &ns.addr, unreg).await.code, response_code::SUCCESS);
    let route =
        TopicRouteData::decode(&call(&client, &ns.addr, route_request("Acted", version::CURRENT)).await.body).unwrap();
    assert_eq!(route.queue_datas[0].perm, 4, "no writes without a master");
    assert_eq!(route.broker_datas[0].broker_addrs.get(&0).map(String::as_str), Some("127.0.0.1:10912"));
    let route =
        TopicRouteData::decode(&call(&client, &ns.addr, route_request(sync_topic, version::CURRENT)).await.body)
            .unwrap();
    assert_eq!(route.broker_datas[0].broker_addrs.keys().copied().collect::<Vec<_>>(), [1], "the real members");
    client.shutdown().await;
    ns.stop().await;
}

#[tokio::test]
async fn data_version_query_reports_changes() {
    let ns = Namesrv::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let reg = registration("c1", "broker-a", 0, "127.0.0.1:10911", &[topic("T1", 2)], false);
    let registered = RegisterBrokerBody::decode(&reg.body, false, version::CURRENT)
        .unwrap()
        .topic_config_serialize_wrapper
        .data_version;
    call(&client, &ns.addr, reg).await;
    let query = |v: &DataVersion| {
        RemotingCommand::request(request_code::QUERY_DATA_VERSION)
            .with_header(&QueryDataVersionRequestHeader {
                broker_name: "broker-a".into(),
                broker_addr: "127.0.0.1:10911".into(),
                cluster_name: "c1".into(),
                broker_id: 0,
            })
            .with_body(v.encode())
    };
    let r = call(&client, &ns.addr, query(&registered)).await;
    assert!(!r.decode_header::<QueryDataVersionResponseHeader>().unwrap().changed);
    assert_eq!(DataVersion::decode(&r.body).unwrap(), registered);
    let mut newer = registered;
    newer.next_version();
    let r = call(&client, &ns.addr, query(&newer)).await;
    assert!(r.decode_header::<QueryDataVersionResponseHeader>().unwrap().changed);
    // No version at all counts as changed (Java compares with null).
    let mut empty = query(&newer);
    empty.body = Default::default();
    let r = call(&client, &ns.addr, empty).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert!(r.decode_header::<QueryDataVersionResponseHeader>().unwrap().changed);
    client.shutdown().await;
    ns.stop().await;
}

#[tokio::test]
async fn config_can_be_read_and_updated_but_not_its_black_list() {
    let ns = Namesrv::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let r = call(&client, &ns.addr, RemotingCommand::request(request_code::GET_NAMESRV_CONFIG)).await;
    let text = String::from_utf8(r.body.to_vec()).unwrap();
    assert!(text.contains("orderMessageEnable=false"), "{text}");
    let update = |body: &str| {
        RemotingCommand::request(request_code::UPDATE_NAMESRV_CONFIG).with_body(body.to_owned().into_bytes())
    };
    assert_eq!(call(&client, &ns.addr, update("orderMessageEnable=true\n")).await.code, response_code::SUCCESS);
    let r = call(&client, &ns.addr, RemotingCommand::request(request_code::GET_NAMESRV_CONFIG)).await;
    assert!(String::from_utf8(r.body.to_vec()).unwrap().contains("orderMessageEnable=true"));
    assert_eq!(call(&client, &ns.addr, update("kvConfigPath=/tmp/evil\n")).await.code, response_code::NO_PERMISSION);
    assert_eq!(call(&client, &ns.addr, update("listenPort=notanumber\n")).await.code, response_code::SYSTEM_ERROR);
    client.shutdown().await;
    ns.stop().await;
}

#[tokio::test]
async fn bad_input_gets_clear_errors_and_the_server_keeps_serving() {
    let ns = Namesrv::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    call(&client, &ns.addr, registration("c1", "broker-a", 0, "127.0.0.1:10911", &[topic("T1", 2)], false)).await;

    // Missing required header field: SYSTEM_ERROR naming it.
    let r = call(&client, &ns.addr, RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)).await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert!(r.remark.unwrap().contains("topic"));
    // Unknown request code.
    let r = call(&client, &ns.addr, RemotingCommand::request(99_999)).await;
    assert_eq!(r.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(r.remark.as_deref(), Some(" request type 99999 not supported"));
    // A body whose CRC does not match.
    let mut bad_crc = registration("c1", "broker-x", 0, "127.0.0.1:1", &[topic("X", 1)], false);
    bad_crc.ext_fields.insert("bodyCrc32".into(), "12345");
    let r = call(&client, &ns.addr, bad_crc).await;
    assert_eq!((r.code, r.remark.as_deref()), (response_code::SYSTEM_ERROR, Some("crc32 not match")));
    // A garbage compressed body.
    let mut garbage = registration("c1", "broker-x", 0, "127.0.0.1:1", &[], true);
    garbage.body = bytes::Bytes::from_static(b"definitely not zlib");
    garbage.ext_fields.insert("bodyCrc32".into(), "0");
    assert_eq!(call(&client, &ns.addr, garbage).await.code, response_code::SYSTEM_ERROR);

    let ns_addr: SocketAddr = ns.addr.parse().unwrap();
    // Garbage bytes: the connection is closed...
    let mut raw = TcpStream::connect(ns_addr).await.unwrap();
    raw.write_all(&[0, 0, 0, 12, 9, 9, 9, 9, 1, 2, 3, 4, 5, 6, 7, 8]).await.unwrap();
    assert_closed(&mut raw).await;
    // ...and so is one announcing a 17 MiB frame, without the server reading it all.
    let mut raw = TcpStream::connect(ns_addr).await.unwrap();
    let mut frame = BytesMut::new();
    frame.put_i32(17 * 1024 * 1024);
    frame.put_bytes(0, 4096);
    raw.write_all(&frame).await.unwrap();
    assert_closed(&mut raw).await;
    // A malformed JSON header closes that connection too.
    let mut raw = TcpStream::connect(ns_addr).await.unwrap();
    let header = b"{\"code\":105,";
    let mut frame = BytesMut::new();
    frame.put_i32(4 + header.len() as i32);
    frame.put_u32(header.len() as u32);
    frame.put_slice(header);
    raw.write_all(&frame).await.unwrap();
    assert_closed(&mut raw).await;

    // The well-behaved client was never disturbed.
    assert_eq!(call(&client, &ns.addr, route_request("T1", version::CURRENT)).await.code, response_code::SUCCESS);
    client.shutdown().await;
    ns.stop().await;
}

async fn assert_closed(stream: &mut TcpStream) {
    let mut buf = [0u8; 1024];
    let result = tokio::time::timeout(TIMEOUT, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(result.is_ok(), "server should close a connection that sent a bad frame");
}

#[tokio::test]
async fn binary_header_requests_are_understood() {
    let ns = Namesrv::start(|_| {}).await;
    // The registering connection stays open: closing it would unregister the broker.
    let broker = RemotingClient::new(ClientConfig::default());
    call(&broker, &ns.addr, registration("c1", "broker-a", 0, "127.0.0.1:10911", &[topic("T1", 2)], false)).await;
    let mut raw = TcpStream::connect(&ns.addr).await.unwrap();
    let mut out = BytesMut::new();
    let req = route_request("T1", version::CURRENT).with_opaque(77);
    ferromq_protocol::encode_frame(&req, ferromq_protocol::SerializeType::RocketMq, &mut out).unwrap();
    raw.write_all(&out).await.unwrap();
    let mut buf = BytesMut::new();
    let response = loop {
        if let Some(cmd) = ferromq_protocol::decode_frame(&mut buf, ferromq_protocol::MAX_FRAME_BYTES).unwrap() {
            break cmd;
        }
        assert!(raw.read_buf(&mut buf).await.unwrap() > 0);
    };
    assert_eq!((response.opaque, response.code), (77, response_code::SUCCESS));
    assert!(response.is_response());
    assert_eq!(TopicRouteData::decode(&response.body).unwrap().queue_datas.len(), 1);
    broker.shutdown().await;
    ns.stop().await;
}

/// `brokerRegisterWhiteList` and `adminRequestWhiteList`: a broker outside the list cannot
/// register or unregister, an operator outside the other cannot change the tables; reads stay
/// open, and an address in the list passes.
#[tokio::test]
async fn white_lists_guard_registration_and_admin_changes() {
    let client = RemotingClient::new(ClientConfig::default());
    let ns = Namesrv::start(|c| {
        c.broker_register_white_list = "10.0.0.0/8, 192.168.1.7".into();
        c.admin_request_white_list = "10.9.9.9".into();
    })
    .await;
    let fake = registration("DefaultCluster", "broker-a", 0, "127.0.0.1:10911", &[topic("Hijacked", 4)], false);
    let r = client.invoke(&ns.addr, fake, TIMEOUT).await.unwrap();
    assert_eq!(r.code, response_code::NO_PERMISSION);
    assert_eq!(r.remark.as_deref(), Some("127.0.0.1 is not in brokerRegisterWhiteList of this name server"));
    let unreg = RemotingCommand::request(request_code::UNREGISTER_BROKER).with_header(&UnRegisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: "127.0.0.1:10911".into(),
        cluster_name: "DefaultCluster".into(),
        broker_id: 0,
    });
    assert_eq!(client.invoke(&ns.addr, unreg, TIMEOUT).await.unwrap().code, response_code::NO_PERMISSION);
    let wipe = RemotingCommand::request(request_code::WIPE_WRITE_PERM_OF_BROKER)
        .with_header(&WipeWritePermOfBrokerRequestHeader { broker_name: "broker-a".into() });
    let r = client.invoke(&ns.addr, wipe, TIMEOUT).await.unwrap();
    assert_eq!(
        (r.code, r.remark.as_deref()),
        (response_code::NO_PERMISSION, Some("127.0.0.1 is not in adminRequestWhiteList of this name server"))
    );
    // Reads are not guarded.
    let route = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)
        .with_header(&GetRouteInfoRequestHeader { topic: "Hijacked".into(), accept_standard_json_only: None });
    assert_eq!(client.invoke(&ns.addr, route, TIMEOUT).await.unwrap().code, response_code::TOPIC_NOT_EXIST);
    ns.stop().await;

    let ns = Namesrv::start(|c| c.broker_register_white_list = "127.0.0.0/8".into()).await;
    let real = registration("DefaultCluster", "broker-a", 0, "127.0.0.1:10911", &[topic("Real", 4)], false);
    assert_eq!(client.invoke(&ns.addr, real, TIMEOUT).await.unwrap().code, response_code::SUCCESS);
    ns.stop().await;
    client.shutdown().await;
}

fn signed_client(ak: &str, sk: &str) -> RemotingClient {
    RemotingClient::new(
        ClientConfig::default().with_credentials(Some(ferromq_protocol::signature::SessionCredentials::new(ak, sk))),
    )
}

fn put_kv() -> RemotingCommand {
    RemotingCommand::request(request_code::PUT_KV_CONFIG).with_header(&PutKvConfigRequestHeader {
        namespace: "ORDER_TOPIC_CONFIG".into(),
        key: "Orders".into(),
        value: "broker-a:4".into(),
    })
}

/// ACL 2.0 on the name server (`authenticationEnabled`): registrations and admin changes need
/// a user of `authConfigPath` whose signature verifies and who is SUPER or allowed on the
/// cluster; reads stay open; users added to the files later count without a restart.
#[tokio::test]
async fn acl_2_users_sign_registrations_and_admin_changes() {
    let users = tempfile::tempdir().unwrap();
    std::fs::write(
        users.path().join("users.json"),
        r#"[{"username":"ops","password":"ops-secret","userType":"Normal","userStatus":"enable"},
            {"username":"off","password":"off-secret","userType":"Super","userStatus":"disable"}]"#,
    )
    .unwrap();
    std::fs::write(
        users.path().join("acls.json"),
        r#"[{"subject":"User:ops","policies":[{"policyType":"Custom","entries":[
            {"resource":"Cluster:C1","actions":["Update"],"decision":"Allow"}]}]}]"#,
    )
    .unwrap();
    let dir = users.path().to_path_buf();
    let ns = Namesrv::start(move |c| {
        c.authentication_enabled = true;
        c.auth_config_path = dir;
        c.init_authentication_user = r#"{"username":"root","password":"root-secret"}"#.into();
    })
    .await;
    let anonymous = RemotingClient::new(ClientConfig::default());
    let root = signed_client("root", "root-secret");
    let ops = signed_client("ops", "ops-secret");
    let reg = |cluster: &str, name: &str| registration(cluster, name, 0, "127.0.0.1:10911", &[topic("T", 4)], false);

    let r = call(&anonymous, &ns.addr, reg("C1", "broker-a")).await;
    assert_eq!((r.code, r.remark.as_deref()), (response_code::NO_PERMISSION, Some("username cannot be null.")));
    let r = call(&signed_client("root", "guess"), &ns.addr, reg("C1", "broker-a")).await;
    assert_eq!((r.code, r.remark.as_deref()), (response_code::NO_PERMISSION, Some("check signature failed.")));
    let r = call(&signed_client("off", "off-secret"), &ns.addr, reg("C1", "broker-a")).await;
    assert_eq!((r.code, r.remark.as_deref()), (response_code::NO_PERMISSION, Some("User:off is disabled.")));
    // A SUPER user may do anything; a normal user what its policies allow.
    assert_eq!(call(&root, &ns.addr, reg("C2", "broker-b")).await.code, response_code::SUCCESS);
    assert_eq!(call(&ops, &ns.addr, reg("C1", "broker-a")).await.code, response_code::SUCCESS);
    let r = call(&ops, &ns.addr, reg("C2", "broker-c")).await;
    assert_eq!(r.code, response_code::NO_PERMISSION, "{:?}", r.remark);
    assert!(r.remark.as_deref().unwrap_or("").contains("Cluster:C2"), "{:?}", r.remark);
    // What names no cluster needs rights on every cluster.
    assert_eq!(call(&ops, &ns.addr, put_kv()).await.code, response_code::NO_PERMISSION);
    assert_eq!(call(&root, &ns.addr, put_kv()).await.code, response_code::SUCCESS);
    // Reads are open, as on Java's name server.
    assert_eq!(call(&anonymous, &ns.addr, route_request("T", version::CURRENT)).await.code, response_code::SUCCESS);

    // A user a broker of this host adds (the same files) counts without a restart, from its
    // first request: a refusal rereads changed files before it is answered.
    let late = ferromq_auth::v2::AuthMetadata::open(users.path()).unwrap();
    late.ensure_super_user("late", "late-secret").unwrap();
    let late_client = signed_client("late", "late-secret");
    let r = call(&late_client, &ns.addr, reg("C3", "broker-d")).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    for c in [anonymous, root, ops, late_client] {
        c.shutdown().await;
    }
    ns.stop().await;
}

/// ACL 1.0 on the name server (`aclEnable`): registrations and admin changes need an admin
/// account of plain_acl.yml or a global white address; the file is reread when it changes.
#[tokio::test]
async fn acl_1_admin_accounts_or_global_white_addresses_sign_registrations() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("conf")).unwrap();
    let plain = home.path().join("conf/plain_acl.yml");
    let yaml = |white: &str| {
        format!(
            "globalWhiteRemoteAddresses:\n  - {white}\naccounts:\n  - accessKey: adminKey1\n    secretKey: adminSecret1\n    admin: true\n  - accessKey: appKey123\n    secretKey: appSecret1\n    admin: false\n    defaultTopicPerm: PUB|SUB\n"
        )
    };
    std::fs::write(&plain, yaml("10.10.10.*")).unwrap();
    let home_text = home.path().display().to_string();
    let ns = Namesrv::start(move |c| {
        c.acl_enable = true;
        c.rocketmq_home = home_text;
    })
    .await;
    let anonymous = RemotingClient::new(ClientConfig::default());
    let admin = signed_client("adminKey1", "adminSecret1");
    let app = signed_client("appKey123", "appSecret1");
    let reg = || registration("DefaultCluster", "broker-a", 0, "127.0.0.1:10911", &[topic("T", 4)], false);
    let r = call(&anonymous, &ns.addr, reg()).await;
    assert_eq!((r.code, r.remark.as_deref()), (response_code::SYSTEM_ERROR, Some("No accessKey is configured")));
    let r = call(&app, &ns.addr, reg()).await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert!(r.remark.as_deref().unwrap_or("").starts_with("Need admin permission"), "{:?}", r.remark);
    assert_eq!(call(&app, &ns.addr, put_kv()).await.code, response_code::SYSTEM_ERROR);
    assert_eq!(call(&admin, &ns.addr, reg()).await.code, response_code::SUCCESS);
    assert_eq!(call(&admin, &ns.addr, put_kv()).await.code, response_code::SUCCESS);
    assert_eq!(call(&anonymous, &ns.addr, route_request("T", version::CURRENT)).await.code, response_code::SUCCESS);
    // 4.x brokers do not sign: a global white address lets them register (from the first
    // request after the change).
    std::fs::write(&plain, yaml("127.0.0.1")).unwrap();
    let r = call(&anonymous, &ns.addr, reg()).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    for c in [anonymous, admin, app] {
        c.shutdown().await;
    }
    ns.stop().await;
}

/// With the broker's metrics keys the name server serves `/metrics`: its requests by code
/// and result, the brokers and routes it knows, and its process figures.
#[tokio::test]
async fn metrics_keys_serve_prometheus_metrics() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let ns = Namesrv::start(move |c| {
        c.unknown.insert("metricsExporterType".into(), "PROM".into());
        c.unknown.insert("metricsPromExporterHost".into(), "127.0.0.1".into());
        c.unknown.insert("metricsPromExporterPort".into(), port.to_string());
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    let reg = registration("C1", "broker-a", 0, "127.0.0.1:10911", &[topic("T", 4)], false);
    assert_eq!(call(&client, &ns.addr, reg).await.code, response_code::SUCCESS);
    let text = {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("metrics port");
        stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).await.unwrap();
        raw
    };
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    for line in [
        // No cluster: no `cluster` label.
        "ferromq_namesrv_live_brokers{node_type=\"namesrv\"",
        "ferromq_namesrv_topics{node_type=\"namesrv\"",
        "request_code=\"register_broker\",response_code=\"success\",is_long_polling=\"false\",result=\"success\"} 1",
        "process_open_fds{",
    ] {
        assert!(text.contains(line), "missing {line}:\n{text}");
    }
    let live = text.lines().find(|l| l.starts_with("ferromq_namesrv_live_brokers{")).expect("live brokers");
    assert_eq!(live.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()), Some(1.0), "{live}");
    assert!(live.contains(&format!("node_id=\"{}\"", ns.addr)), "{live}");
    client.shutdown().await;
    ns.stop().await;

    // A port that cannot be bound stops the start with an error naming the keys.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut config = NamesrvConfig::default();
    config.unknown.insert("metricsExporterType".into(), "PROM".into());
    config.unknown.insert("metricsPromExporterHost".into(), "127.0.0.1".into());
    config.unknown.insert("metricsPromExporterPort".into(), taken.local_addr().unwrap().port().to_string());
    let dir = tempfile::tempdir().unwrap();
    config.kv_config_path = dir.path().join("kv.json");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let e = ferromq_namesrv::run(config, listener, async {}).await.expect_err("port taken");
    assert!(e.to_string().contains("metricsPromExporterPort"), "{e}");
}
