//! The broker's admin queries and offset operations over real loopback TCP, with a real name
//! server: topic stats, consume stats, connection lists, who consumes a topic, offset reset
//! (with the notices consumers receive), offset cloning, delay offsets and config updates.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferromq_broker::metadata::DelayOffsetSerializeWrapper;
use ferromq_broker::BrokerSettings;
use ferromq_protocol::body::{
    BrokerStatsData, ConsumeFromWhere, ConsumeStats, ConsumeStatsList, ConsumeType, ConsumerConnection,
    ConsumerOffsetSerializeWrapper, GroupList, JsonBody, MessageModel, MessageQueue, ProducerConnection, ProducerData,
    ProducerTableInfo, QueryConsumeQueueResponseBody, ResetOffsetBody, ResetOffsetBodyForC, SubscriptionGroupConfig,
    TopicConfig, TopicList, TopicRouteData, TopicStatsTable,
};
use ferromq_protocol::header::*;
use ferromq_protocol::message::MessageProperties;
use ferromq_protocol::{request_code, response_code, LanguageCode, RemotingCommand};
use ferromq_remoting::{ClientConfig, Dispatcher, RemotingClient};
use ferromq_testkit::{consumer_heartbeat, send_request, LocalCluster};
use tokio::sync::mpsc;

const T: Duration = Duration::from_secs(10);
const BROKER: &str = "broker-a";

/// The testkit's cluster, with helpers for these tests.
struct Cluster(LocalCluster);

impl std::ops::Deref for Cluster {
    type Target = LocalCluster;
    fn deref(&self) -> &LocalCluster {
        &self.0
    }
}

impl Cluster {
    async fn start(tweak: impl Fn(&mut BrokerSettings) + Send + Sync + 'static) -> Cluster {
        Cluster(LocalCluster::start(tweak).await)
    }

    async fn call(&self, client: &RemotingClient, req: RemotingCommand) -> RemotingCommand {
        client.invoke(&self.broker_addr, req, T).await.unwrap()
    }

    /// Sends `count` messages to `topic` queue `queue_id` (creating the topic with 4 queues),
    /// waits until they are dispatched to the consume queue, and returns the wall-clock window
    /// they were stored in.
    async fn send(&self, client: &RemotingClient, topic: &str, queue_id: i32, count: usize) -> (i64, i64) {
        let before = now_ms();
        let mut next_offset = 0;
        for i in 0..count {
            let r = self.call(client, send_v2(topic, queue_id, &format!("m{i}"))).await;
            assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
            next_offset = r.decode_header::<SendMessageResponseHeader>().unwrap().queue_offset + 1;
        }
        let stored = now_ms();
        let deadline = Instant::now() + T;
        loop {
            let req = RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&GetMaxOffsetRequestHeader {
                topic: topic.into(),
                queue_id,
                committed: None,
                broker_name: None,
                lo: None,
            });
            let max = self.call(client, req).await.decode_header::<OffsetResponseHeader>().unwrap().offset;
            if max >= next_offset {
                return (before, stored);
            }
            assert!(Instant::now() < deadline, "{topic}:{queue_id} never dispatched up to {next_offset}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Commits an offset as a consumer of `group` would, the group first coming to the broker
    /// as a heartbeat or pull brings it (an offset alone does not create it).
    async fn commit(&self, client: &RemotingClient, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let config = SubscriptionGroupConfig { group_name: group.into(), ..Default::default() };
        let create =
            RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(config.encode());
        assert_eq!(self.call(client, create).await.code, response_code::SUCCESS);
        let req = RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET).with_header(
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: group.into(),
                topic: topic.into(),
                queue_id,
                commit_offset: offset,
                broker_name: None,
                lo: None,
            },
        );
        assert_eq!(self.call(client, req).await.code, response_code::SUCCESS);
    }

    async fn query_offset(&self, client: &RemotingClient, group: &str, topic: &str, queue_id: i32) -> i64 {
        let req = RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET).with_header(
            &QueryConsumerOffsetRequestHeader {
                consumer_group: group.into(),
                topic: topic.into(),
                queue_id,
                set_zero_if_not_found: None,
                broker_name: None,
                lo: None,
            },
        );
        let r = self.call(client, req).await;
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        r.decode_header::<OffsetResponseHeader>().unwrap().offset
    }

    async fn consume_stats(&self, client: &RemotingClient, group: &str, topic: Option<&str>) -> ConsumeStats {
        let req =
            RemotingCommand::request(request_code::GET_CONSUME_STATS).with_header(&GetConsumeStatsRequestHeader {
                consumer_group: group.into(),
                topic: topic.map(str::to_owned),
                topic_list: None,
            });
        let r = self.call(client, req).await;
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        ConsumeStats::decode(&r.body).unwrap()
    }

    async fn stop(self) {
        self.0.stop().await;
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn send_v2(topic: &str, queue_id: i32, body: &str) -> RemotingCommand {
    send_request(topic, queue_id, body.as_bytes(), &[])
}

/// A heartbeat from `client_id` running consumer `group` on `topics` and, if given, a producer
/// group.
fn heartbeat(client_id: &str, group: &str, topics: &[&str], producer_group: Option<&str>) -> RemotingCommand {
    let mut hb = consumer_heartbeat(client_id, group, topics);
    hb.producer_data_set = producer_group.map(|g| ProducerData { group_name: g.into() }).into_iter().collect();
    RemotingCommand::request(request_code::HEART_BEAT).with_body(hb.encode())
}

/// A client whose connection records every RESET_CONSUMER_CLIENT_OFFSET the broker sends it.
fn recording_client() -> (RemotingClient, mpsc::UnboundedReceiver<RemotingCommand>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut dispatcher = Dispatcher::new();
    dispatcher.register_sync(request_code::RESET_CONSUMER_CLIENT_OFFSET, move |_conn, req| {
        let _ = tx.send(req.clone());
        None
    });
    (RemotingClient::with_handler(ClientConfig::default(), Arc::new(dispatcher)), rx)
}

fn reset(topic: &str, group: &str, queue_id: Option<i32>, offset: Option<i64>, timestamp: i64) -> RemotingCommand {
    RemotingCommand::request(request_code::INVOKE_BROKER_TO_RESET_OFFSET).with_header(&ResetOffsetRequestHeader {
        topic: topic.into(),
        group: group.into(),
        queue_id,
        offset,
        timestamp,
        is_force: true,
    })
}

fn queue(topic: &str, queue_id: i32) -> MessageQueue {
    MessageQueue::new(topic, BROKER, queue_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_stats_report_offset_ranges_and_last_store_time() {
    let c = Cluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let (before, after) = c.send(&client, "Stats", 1, 3).await;
    let req = RemotingCommand::request(request_code::GET_TOPIC_STATS_INFO)
        .with_header(&GetTopicStatsInfoRequestHeader { topic: "Stats".into() });
    let r = c.call(&client, req).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    // The wire form is fastjson's: queue objects as map keys.
    let text = String::from_utf8(r.body.to_vec()).unwrap();
    assert!(
        text.starts_with(concat!(
            r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"Stats"}:"#,
            r#"{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0},{"brokerName":"broker-a","queueId":1,"#
        )),
        "{text}"
    );
    assert!(text.contains(r#""topicPutTps":"#), "{text}");
    let table = TopicStatsTable::decode(&r.body).unwrap();
    // Three messages within the first second: a rate above 0 and at most 3 per second.
    assert!(table.topic_put_tps > 0.0 && table.topic_put_tps <= 3.0, "{}", table.topic_put_tps);
    assert_eq!(table.offset_table.len(), 4);
    let q1 = table.offset_table[&queue("Stats", 1)];
    assert_eq!((q1.min_offset, q1.max_offset), (0, 3));
    assert!((before..=after).contains(&q1.last_update_timestamp), "{q1:?} not in [{before}, {after}]");
    assert_eq!(table.offset_table[&queue("Stats", 3)], Default::default());

    let req = RemotingCommand::request(request_code::GET_TOPIC_STATS_INFO)
        .with_header(&GetTopicStatsInfoRequestHeader { topic: "Nope".into() });
    let r = c.call(&client, req).await;
    assert_eq!(r.code, response_code::TOPIC_NOT_EXIST);
    assert_eq!(r.remark.as_deref(), Some("topic[Nope] not exist"));
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_info_has_the_keys_cluster_list_reads() {
    let c = Cluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let (before, _) = c.send(&client, "Runtime", 0, 4).await;
    let r = c.call(&client, RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO)).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let kv = ferromq_protocol::body::KVTable::decode(&r.body).unwrap().table;
    let get = |k: &str| kv.get(k).unwrap_or_else(|| panic!("no {k} in {kv:?}")).as_str();
    // Today's traffic is now minus this morning (0 before the broker's first midnight).
    // (A run across midnight UTC may already have rolled the morning totals; they never pass
    // the totals now.)
    let num = |k: &str| get(k).parse::<u64>().unwrap_or_else(|_| panic!("{k} is a count"));
    assert_eq!(num("msgPutTotalTodayNow"), 4);
    assert!(num("msgPutTotalYesterdayMorning") <= num("msgPutTotalTodayMorning"));
    assert!(num("msgPutTotalTodayMorning") <= 4);
    assert_eq!(num("msgGetTotalTodayNow"), 0);
    assert_eq!((num("msgGetTotalTodayMorning"), num("msgGetTotalYesterdayMorning")), (0, 0));
    assert_eq!(get("brokerActive"), "true");
    let earliest: i64 = get("earliestMessageTimeStamp").parse().unwrap();
    assert!(earliest >= before && earliest <= now_ms(), "{earliest}");
    let ratio: f64 = get("commitLogDiskRatio").parse().unwrap();
    assert!((0.0..=1.0).contains(&ratio), "{ratio}");
    let _: f64 = get("consumeQueueDiskRatio").parse().unwrap();
    assert!(get("commitLogDirCapacity").starts_with("Total : "), "{}", get("commitLogDirCapacity"));
    assert!(get("remainHowManyDataToFlush").ends_with('B'));
    // No timer wheel in this broker: Java's zeros.
    assert_eq!((get("timerCongestNum"), get("timerEnqueueTps"), get("timerDequeueTps")), ("0", "0.0", "0.0"));
    // What 4.9.8's clusterList and exportMetrics read (a missing key is a NullPointerException).
    assert_eq!(get("getTransferedTps"), get("getTransferredTps"));
    for key in
        ["sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills", "pageCacheLockTimeMills"]
    {
        get(key).parse::<i64>().unwrap_or_else(|_| panic!("{key} is a number"));
    }
    assert_eq!((get("diskFull"), get("runningFlags")), ("false", "0"));
    // And what 4.9.8's exportConfigs reads from the broker config.
    let r = c.call(&client, RemotingCommand::request(request_code::GET_BROKER_CONFIG)).await;
    let config = String::from_utf8(r.body.to_vec()).unwrap();
    for key in ["filterServerNums=0", "msgTraceTopicName=RMQ_SYS_TRACE_TOPIC", "traceTopicEnable=false", "useTLS=false"]
    {
        assert!(config.lines().any(|l| l == key), "{key} in {config}");
    }
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_topic_enable_creates_and_serves_the_trace_topic() {
    let c = Cluster::start(|s| {
        s.broker.trace_topic_enable = true;
        s.broker.msg_trace_topic_name = "MyTraceTopic".into();
    })
    .await;
    let route = c.wait_registered("MyTraceTopic").await;
    assert_eq!(route.queue_datas[0].write_queue_nums, 1, "{route:?}");
    let client = RemotingClient::new(ClientConfig::default());
    c.send(&client, "MyTraceTopic", 0, 2).await;
    let pulled = ferromq_testkit::pull_messages(&client, &c.broker_addr, "MyTraceTopic", 0, 0, 2, T).await;
    assert_eq!(pulled.len(), 2);
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_stats_report_broker_and_consumer_offsets() {
    let c = Cluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let (before, after) = c.send(&client, "Orders", 0, 5).await;
    c.send(&client, "Other", 0, 1).await;
    c.commit(&client, "cg", "Orders", 0, 2).await;
    c.commit(&client, "cg", "Other", 0, 1).await;

    let stats = c.consume_stats(&client, "cg", Some("Orders")).await;
    assert_eq!(stats.offset_table.len(), 4);
    let q0 = stats.offset_table[&queue("Orders", 0)];
    assert_eq!((q0.broker_offset, q0.consumer_offset, q0.pull_offset), (5, 2, 2));
    assert!((before..=after).contains(&q0.last_timestamp), "{q0:?}");
    assert_eq!(stats.offset_table[&queue("Orders", 1)], Default::default());
    assert_eq!(stats.total_diff(), 3);
    assert_eq!(stats.consume_tps, 0.0, "nothing pulled yet");
    let pull = RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&PullMessageRequestHeader {
        consumer_group: "cg".into(),
        topic: "Orders".into(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: 4,
        sys_flag: pull_sys_flag::SUBSCRIPTION,
        subscription: Some("*".into()),
        expression_type: Some("TAG".into()),
        ..Default::default()
    });
    assert_eq!(c.call(&client, pull).await.code, response_code::SUCCESS);
    let stats = c.consume_stats(&client, "cg", Some("Orders")).await;
    // Four messages pulled within the first second.
    assert!(stats.consume_tps > 0.0 && stats.consume_tps <= 4.0, "{}", stats.consume_tps);
    assert_eq!(c.consume_stats(&client, "cg", Some("Other")).await.consume_tps, 0.0);
    // The same counters as `mqadmin statsAll` reads them: five single puts, one pull of four.
    let view = |name: &str, key: &str| {
        RemotingCommand::request(request_code::VIEW_BROKER_STATS_DATA)
            .with_header(&ViewBrokerStatsDataRequestHeader { stats_name: name.into(), stats_key: key.into() })
    };
    let put = BrokerStatsData::decode(&c.call(&client, view("TOPIC_PUT_NUMS", "Orders")).await.body).unwrap();
    assert_eq!((put.stats_minute.sum, put.stats_hour.sum, put.stats_day.sum), (5, 5, 5), "{put:?}");
    assert!((put.stats_minute.avgpt - 1.0).abs() < 1e-9, "{put:?}");
    let get = BrokerStatsData::decode(&c.call(&client, view("GROUP_GET_NUMS", "Orders@cg")).await.body).unwrap();
    assert_eq!(get.stats_day.sum, 4, "{get:?}");
    assert!((get.stats_day.avgpt - 4.0).abs() < 1e-9, "{get:?}");
    for (name, key) in [("GROUP_GET_NUMS", "Other@cg"), ("BROKER_PUT_NUMS_X", "Orders")] {
        let r = c.call(&client, view(name, key)).await;
        assert_eq!(r.code, response_code::SYSTEM_ERROR);
        assert_eq!(r.remark.unwrap(), format!("The stats <{name}> <{key}> not exist"));
    }

    // Without a topic: every topic the group has offsets on; the topic list picks exactly.
    let all = c.consume_stats(&client, "cg", None).await;
    assert_eq!(all.offset_table.len(), 8);
    assert_eq!(all.offset_table[&queue("Other", 0)].consumer_offset, 1);
    let req = RemotingCommand::request(request_code::GET_CONSUME_STATS).with_header(&GetConsumeStatsRequestHeader {
        consumer_group: "cg".into(),
        topic: Some("Orders".into()),
        topic_list: Some("Other;".into()),
    });
    let listed = ConsumeStats::decode(&c.call(&client, req).await.body).unwrap();
    assert!(listed.offset_table.keys().all(|q| q.topic == "Other"), "{listed:?}");
    // A group nobody knows has nothing to report.
    assert!(c.consume_stats(&client, "nobody", None).await.offset_table.is_empty());

    // Once the group is online, topics it does not subscribe to are left out.
    let member = RemotingClient::new(ClientConfig::default());
    assert_eq!(c.call(&member, heartbeat("127.0.0.1@m", "cg", &["Orders"], None)).await.code, response_code::SUCCESS);
    let online = c.consume_stats(&client, "cg", None).await;
    assert!(online.offset_table.keys().all(|q| q.topic == "Orders"), "{online:?}");
    assert!(c.consume_stats(&client, "cg", Some("Other")).await.offset_table.is_empty());

    // Every group on the broker at once (`mqadmin brokerConsumeStats`): the online group on
    // the topics it subscribes to, over the topic's write queues.
    let broker_stats = |is_order: bool| {
        RemotingCommand::request(request_code::GET_BROKER_CONSUME_STATS)
            .with_header(&GetConsumeStatsInBrokerHeader { is_order })
    };
    let r = c.call(&client, broker_stats(false)).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let list = ConsumeStatsList::decode(&r.body).unwrap();
    assert_eq!(list.broker_addr, c.broker_addr);
    let cg: Vec<&ConsumeStats> = list.consume_stats_list.iter().filter_map(|m| m.get("cg")).flatten().collect();
    assert_eq!(cg.len(), 1, "Orders only: {cg:?}");
    assert_eq!(cg[0].offset_table.len(), 4);
    assert_eq!(cg[0].offset_table[&queue("Orders", 0)].consumer_offset, 2);
    assert_eq!(list.total_diff, 3);
    let ordered = ConsumeStatsList::decode(&c.call(&client, broker_stats(true)).await.body).unwrap();
    assert_eq!(ordered.total_diff, 0, "no ordered topic has offsets");
    member.shutdown().await;
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_message_directly_hands_the_stored_message_to_the_named_consumer() {
    let c = Cluster::start(|_| {}).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut dispatcher = Dispatcher::new();
    dispatcher.register_sync(request_code::CONSUME_MESSAGE_DIRECTLY, move |_conn, req| {
        let _ = tx.send(req.clone());
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(b"CR_SUCCESS".to_vec()))
    });
    let member = RemotingClient::with_handler(ClientConfig::default(), Arc::new(dispatcher));
    assert_eq!(c.call(&member, heartbeat("127.0.0.1@m1", "cg1", &["Orders"], None)).await.code, response_code::SUCCESS);
    let admin = RemotingClient::new(ClientConfig::default());
    let sent = c.call(&admin, send_v2("Orders", 0, "again")).await;
    let msg_id = sent.decode_header::<SendMessageResponseHeader>().unwrap().msg_id;

    let mut req = RemotingCommand::request(request_code::CONSUME_MESSAGE_DIRECTLY);
    req.ext_fields.insert("consumerGroup".into(), "cg1");
    req.ext_fields.insert("clientId".into(), "127.0.0.1@m1");
    req.ext_fields.insert("msgId".into(), &msg_id);
    req.ext_fields.insert("topic".into(), "Orders");
    let r = c.call(&admin, req.clone()).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    assert_eq!(&r.body[..], b"CR_SUCCESS", "the consumer's answer comes back");
    let forwarded = rx.recv().await.unwrap();
    assert_eq!(forwarded.ext("brokerName"), Some(BROKER));
    assert_eq!((forwarded.ext("topicSysFlag"), forwarded.ext("groupSysFlag")), (Some("0"), Some("0")));
    let message = ferromq_protocol::message::StoredMessage::decode_all(&forwarded.body).unwrap().remove(0);
    assert_eq!(&message.body[..], b"again");

    req.ext_fields.insert("clientId".into(), "127.0.0.1@gone");
    let r = c.call(&admin, req).await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some("The Consumer <cg1> <127.0.0.1@gone> not online"));
    member.shutdown().await;
    admin.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_lists_show_the_registered_clients() {
    let c = Cluster::start(|_| {}).await;
    let member = RemotingClient::new(ClientConfig::default());
    let r = c.call(&member, heartbeat("127.0.0.1@m1", "cg1", &["Orders"], Some("pg1"))).await;
    assert_eq!(r.code, response_code::SUCCESS);
    let admin = RemotingClient::new(ClientConfig::default());

    let req = RemotingCommand::request(request_code::GET_CONSUMER_CONNECTION_LIST)
        .with_header(&GetConsumerConnectionListRequestHeader { consumer_group: "cg1".into() });
    let r = c.call(&admin, req).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let consumers = ConsumerConnection::decode(&r.body).unwrap();
    assert_eq!(consumers.connection_set.len(), 1);
    let connection = &consumers.connection_set[0];
    assert_eq!(connection.client_id, "127.0.0.1@m1");
    assert_eq!(connection.language, LanguageCode::Rust);
    assert_eq!(connection.version, ferromq_protocol::version::CURRENT);
    assert!(connection.client_addr.starts_with("127.0.0.1:"), "{connection:?}");
    assert_ne!(connection.client_addr, c.broker_addr, "the client's address, not the broker's");
    assert_eq!(consumers.consume_type, ConsumeType::ConsumePassively);
    assert_eq!(consumers.message_model, MessageModel::Clustering);
    assert_eq!(consumers.consume_from_where, ConsumeFromWhere::ConsumeFromFirstOffset);
    assert_eq!(consumers.subscription_table["Orders"].sub_string, "*");
    assert!(String::from_utf8_lossy(&r.body).contains(r#""language":"RUST""#));

    let req = RemotingCommand::request(request_code::GET_CONSUMER_CONNECTION_LIST)
        .with_header(&GetConsumerConnectionListRequestHeader { consumer_group: "ghost".into() });
    let r = c.call(&admin, req).await;
    assert_eq!(r.code, response_code::CONSUMER_NOT_ONLINE);
    assert_eq!(r.remark.as_deref(), Some("the consumer group[ghost] not online"));

    let req = RemotingCommand::request(request_code::GET_PRODUCER_CONNECTION_LIST)
        .with_header(&GetProducerConnectionListRequestHeader { producer_group: "pg1".into() });
    let r = c.call(&admin, req).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let producers = ProducerConnection::decode(&r.body).unwrap();
    assert_eq!(producers.connection_set, consumers.connection_set);

    let req = RemotingCommand::request(request_code::GET_PRODUCER_CONNECTION_LIST)
        .with_header(&GetProducerConnectionListRequestHeader { producer_group: "ghost".into() });
    let r = c.call(&admin, req).await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some("the producer group[ghost] not exist"));

    // Every producer group at once, as `mqadmin producer` asks.
    let r = c.call(&admin, RemotingCommand::request(request_code::GET_ALL_PRODUCER_INFO)).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let table = ProducerTableInfo::decode(&r.body).unwrap();
    let pg1 = &table.data["pg1"];
    assert_eq!(pg1.len(), 1);
    assert_eq!((pg1[0].client_id.as_str(), pg1[0].language), ("127.0.0.1@m1", LanguageCode::Rust));
    assert_eq!(pg1[0].remote_ip, format!("/{}", connection.client_addr), "Java's socket-address form");
    assert!(pg1[0].last_update_timestamp > 0);
    member.shutdown().await;
    admin.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_consumers_are_online_subscribers_and_groups_with_offsets() {
    let c = Cluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    c.send(&client, "Orders", 0, 1).await;
    c.commit(&client, "committed", "Orders", 0, 1).await;
    assert_eq!(
        c.call(&client, heartbeat("127.0.0.1@m", "online", &["Orders"], None)).await.code,
        response_code::SUCCESS
    );
    let req = RemotingCommand::request(request_code::QUERY_TOPIC_CONSUME_BY_WHO)
        .with_header(&QueryTopicConsumeByWhoRequestHeader { topic: "Orders".into() });
    let r = c.call(&client, req).await;
    assert_eq!(r.code, response_code::SUCCESS);
    assert_eq!(r.body.as_ref(), br#"{"groupList":["committed","online"]}"#);
    let req = RemotingCommand::request(request_code::QUERY_TOPIC_CONSUME_BY_WHO)
        .with_header(&QueryTopicConsumeByWhoRequestHeader { topic: "Nobody".into() });
    assert!(GroupList::decode(&c.call(&client, req).await.body).unwrap().group_list.is_empty());
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_offset_moves_committed_offsets_and_tells_the_consumers() {
    let c = Cluster::start(|_| {}).await;
    let admin = RemotingClient::new(ClientConfig::default());
    c.send(&admin, "Reset", 0, 5).await;
    let (java, mut java_rx) = recording_client();
    let (cpp, mut cpp_rx) = recording_client();
    assert_eq!(c.call(&java, heartbeat("127.0.0.1@java", "rg", &["Reset"], None)).await.code, response_code::SUCCESS);
    let mut cpp_heartbeat = heartbeat("127.0.0.1@cpp", "rg", &["Reset"], None);
    cpp_heartbeat.language = LanguageCode::Cpp;
    assert_eq!(c.call(&cpp, cpp_heartbeat).await.code, response_code::SUCCESS);
    c.commit(&admin, "rg", "Reset", 0, 4).await;

    // By time, before every message: each readable queue goes to its start.
    let r = c.call(&admin, reset("Reset", "rg", None, None, 0)).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let golden = concat!(
        r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"Reset"}:0,"#,
        r#"{"brokerName":"broker-a","queueId":1,"topic":"Reset"}:0,"#,
        r#"{"brokerName":"broker-a","queueId":2,"topic":"Reset"}:0,"#,
        r#"{"brokerName":"broker-a","queueId":3,"topic":"Reset"}:0}}"#
    );
    assert_eq!(String::from_utf8(r.body.to_vec()).unwrap(), golden);
    assert_eq!(c.query_offset(&admin, "rg", "Reset", 0).await, 0);
    assert_eq!(c.consume_stats(&admin, "rg", Some("Reset")).await.offset_table[&queue("Reset", 0)].consumer_offset, 0);

    // The consumers hear of it: Java-style clients with the queue-keyed body, C++ ones with
    // the list form.
    let notice = tokio::time::timeout(T, java_rx.recv()).await.expect("java consumer notified").unwrap();
    assert!(notice.is_oneway());
    let h: ResetOffsetRequestHeader = notice.decode_header().unwrap();
    assert_eq!((h.topic.as_str(), h.group.as_str(), h.timestamp, h.is_force), ("Reset", "rg", 0, true));
    assert_eq!(notice.body.as_ref(), golden.as_bytes());
    let notice = tokio::time::timeout(T, cpp_rx.recv()).await.expect("cpp consumer notified").unwrap();
    let body = ResetOffsetBodyForC::decode(&notice.body).unwrap();
    assert_eq!(body.offset_table.len(), 4);
    assert_eq!((body.offset_table[0].queue_id, body.offset_table[0].offset), (0, 0));

    // One queue to an explicit offset (5.x), checked against the queue's range.
    let r = c.call(&admin, reset("Reset", "rg", Some(0), Some(3), -1)).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let body = ResetOffsetBody::decode(&r.body).unwrap();
    assert_eq!(body.offset_table, BTreeMap::from([(queue("Reset", 0), 3)]));
    assert_eq!(c.query_offset(&admin, "rg", "Reset", 0).await, 3);
    let r = c.call(&admin, reset("Reset", "rg", Some(0), Some(99), -1)).await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some("Target offset 99 not in consume queue range [0-5]"));

    // Timestamp -1: the end of every queue.
    let r = c.call(&admin, reset("Reset", "rg", None, None, -1)).await;
    let body = ResetOffsetBody::decode(&r.body).unwrap();
    assert_eq!(body.offset_table[&queue("Reset", 0)], 5);
    assert_eq!(c.query_offset(&admin, "rg", "Reset", 0).await, 5);

    // Until the consumer pulls, its own commits would undo the reset: they are ignored...
    c.commit(&admin, "rg", "Reset", 0, 1).await;
    assert_eq!(c.query_offset(&admin, "rg", "Reset", 0).await, 5);
    // ...the next pull of the queue moves the consumer to the reset offset...
    let pull = RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&PullMessageRequestHeader {
        consumer_group: "rg".into(),
        topic: "Reset".into(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: 32,
        sys_flag: pull_sys_flag::SUBSCRIPTION,
        subscription: Some("*".into()),
        expression_type: Some("TAG".into()),
        ..Default::default()
    });
    let r = c.call(&admin, pull).await;
    assert_eq!((r.code, r.remark.as_deref()), (response_code::PULL_OFFSET_MOVED, Some("OFFSET_RESET")));
    assert_eq!(r.decode_header::<PullMessageResponseHeader>().unwrap().next_begin_offset, 5);
    // ...and from then on commits count again.
    c.commit(&admin, "rg", "Reset", 0, 2).await;
    assert_eq!(c.query_offset(&admin, "rg", "Reset", 0).await, 2);

    let r = c.call(&admin, reset("Nope", "rg", None, None, 0)).await;
    assert_eq!(r.code, response_code::TOPIC_NOT_EXIST);
    let r = c.call(&admin, reset("Reset", "ghost", None, None, 0)).await;
    assert_eq!(r.code, response_code::SUBSCRIPTION_GROUP_NOT_EXIST);
    assert_eq!(r.remark.as_deref(), Some("Group ghost does not exist"));
    for client in [admin, java, cpp] {
        client.shutdown().await;
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clone_group_offset_copies_one_topic_or_all() {
    let c = Cluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    c.send(&client, "A", 0, 1).await;
    c.send(&client, "B", 0, 1).await;
    c.commit(&client, "src", "A", 0, 3).await;
    c.commit(&client, "src", "A", 1, 1).await;
    c.commit(&client, "src", "B", 0, 2).await;
    let clone = |dest: &str, topic: Option<&str>, offline: Option<bool>| {
        RemotingCommand::request(request_code::CLONE_GROUP_OFFSET).with_header(&CloneGroupOffsetRequestHeader {
            src_group: "src".into(),
            dest_group: dest.into(),
            topic: topic.map(str::to_owned),
            offline,
        })
    };
    let offsets = |r: RemotingCommand| ConsumerOffsetSerializeWrapper::decode(&r.body).unwrap().offset_table;
    let all_offsets = || RemotingCommand::request(request_code::GET_ALL_CONSUMER_OFFSET);

    assert_eq!(c.call(&client, clone("one", Some("A"), None)).await.code, response_code::SUCCESS);
    assert_eq!(c.call(&client, clone("all", Some(" "), None)).await.code, response_code::SUCCESS);
    let table = offsets(c.call(&client, all_offsets()).await);
    assert_eq!(table["A@one"], BTreeMap::from([(0, 3), (1, 1)]));
    assert!(!table.contains_key("B@one"));
    assert_eq!(table["A@all"], table["A@src"]);
    assert_eq!(table["B@all"], BTreeMap::from([(0, 2)]));

    // An online source group: only the topics it subscribes to, unless offline.
    let member = RemotingClient::new(ClientConfig::default());
    assert_eq!(c.call(&member, heartbeat("127.0.0.1@m", "src", &["A"], None)).await.code, response_code::SUCCESS);
    assert_eq!(c.call(&client, clone("online", None, Some(false))).await.code, response_code::SUCCESS);
    assert_eq!(c.call(&client, clone("offline", None, Some(true))).await.code, response_code::SUCCESS);
    let table = offsets(c.call(&client, all_offsets()).await);
    assert!(table.contains_key("A@online") && !table.contains_key("B@online"), "{table:?}");
    assert!(table.contains_key("A@offline") && table.contains_key("B@offline"), "{table:?}");
    member.shutdown().await;
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_offsets_are_served_as_java_writes_them() {
    let c = Cluster::start(|s| {
        let config = s.store.store_path_root_dir.join("config");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(config.join("delayOffset.json"), br#"{"offsetTable":{1:0,2:17}}"#).unwrap();
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    let r = c.call(&client, RemotingCommand::request(request_code::GET_ALL_DELAY_OFFSET)).await;
    assert_eq!(r.code, response_code::SUCCESS);
    let text = String::from_utf8(r.body.to_vec()).unwrap();
    assert!(text.starts_with(r#"{"dataVersion":{"#) && text.ends_with(r#""offsetTable":{1:0,2:17}}"#), "{text}");
    let wrapper: DelayOffsetSerializeWrapper = ferromq_protocol::json::parse_lenient(&r.body).unwrap();
    assert_eq!(wrapper.offset_table, BTreeMap::from([(1, 0), (2, 17)]));
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_config_updates_apply_all_or_nothing_and_refuse_black_listed_keys() {
    let c = Cluster::start(|s| {
        s.broker.unknown.insert("configBlackList".into(), "configBlackList;brokerConfigPath;storePathRootDir".into());
        s.broker.unknown.insert("confOnlyKey".into(), "a".into());
    })
    .await;
    let client = RemotingClient::new(ClientConfig::default());
    let update = |text: &str| RemotingCommand::request(request_code::UPDATE_BROKER_CONFIG).with_body(text.to_owned());
    let config = || async {
        let r = c.call(&client, RemotingCommand::request(request_code::GET_BROKER_CONFIG)).await;
        String::from_utf8(r.body.to_vec()).unwrap()
    };

    // Keys the broker does not know are refused, whole, with the keys named.
    for foreign in ["someNewKey=x", "justakey", "\u{1}\u{2}bin=\u{3}"] {
        let r = c.call(&client, update(&format!("brokerPermission=2\n{foreign}\n"))).await;
        assert_eq!(r.code, response_code::SYSTEM_ERROR, "{foreign}");
        assert!(r.remark.as_deref().unwrap_or_default().contains("unknown broker config key"), "{:?}", r.remark);
    }
    let many: String = (0..10_000).map(|i| format!("unknownKey{i}=v\n")).collect();
    let r = c.call(&client, update(&many)).await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR, "a body over the bound is refused");
    assert!(r.remark.as_deref().unwrap_or_default().contains("bytes"), "{:?}", r.remark);
    let text = config().await;
    assert!(!text.contains("someNewKey") && !text.contains("justakey") && !text.contains("unknownKey"), "{text}");
    assert!(!text.contains("brokerPermission=2"), "{text}");

    // A key broker.conf already holds (Java keeps those) may be updated.
    let r = c.call(&client, update("brokerPermission=4\nconfOnlyKey=b\n")).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let text = config().await;
    assert!(text.contains("brokerPermission=4") && text.contains("confOnlyKey=b"), "{text}");

    for refused in
        ["rocketmqHome=/refused", "brokerConfigPath=/refused/b.conf", "storePathRootDir=/refused", "configBlackList="]
    {
        let r = c.call(&client, update(&format!("brokerPermission=2\n{refused}\n"))).await;
        assert_eq!(r.code, response_code::NO_PERMISSION, "{refused}");
        assert_eq!(r.remark.as_deref(), Some("Can not update config in black list."));
    }
    let r = c.call(&client, update("brokerPermission=2\nlistenPort=not-a-port\n")).await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    let text = config().await;
    assert!(
        text.contains("brokerPermission=4") && !text.contains("/refused") && !text.contains("brokerPermission=2"),
        "nothing applied: {text}"
    );
    assert_eq!(c.call(&client, update("")).await.code, response_code::SUCCESS);

    // Accepted updates are written back, whole, where the next start can read them.
    let path = c.dir().join("store").join("config").join("broker.properties");
    let persisted = std::fs::read_to_string(&path).unwrap();
    assert!(persisted.contains("brokerPermission=4\n") && !persisted.contains("someNewKey"), "{persisted}");
    assert!(!persisted.contains("brokerPermission=2") && !persisted.contains("/refused"), "{persisted}");
    let mut reloaded = BrokerSettings::default();
    let unknown = reloaded.load_file(&path).unwrap();
    assert_eq!(unknown, vec!["confOnlyKey".to_owned(), "configBlackList".to_owned()]);
    assert_eq!(reloaded.broker.broker_permission, 4);
    assert_eq!(reloaded.broker.broker_name, "broker-a");
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_message_size_changes_apply_at_once_and_stay_within_what_a_pull_can_carry() {
    let c = Cluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let update = |text: &str| RemotingCommand::request(request_code::UPDATE_BROKER_CONFIG).with_body(text.to_owned());
    let body = "x".repeat(2048);
    assert_eq!(c.call(&client, send_v2("SizeTopic", 0, &body)).await.code, response_code::SUCCESS);
    assert_eq!(c.call(&client, update("maxMessageSize=1024\n")).await.code, response_code::SUCCESS);
    let r = c.call(&client, send_v2("SizeTopic", 0, &body)).await;
    assert_eq!(r.code, response_code::MESSAGE_ILLEGAL, "the new limit applies to the next send: {:?}", r.remark);
    let r = c.call(&client, update(&format!("maxMessageSize={}\n", 20 * 1024 * 1024))).await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR, "over what a pull frame can carry");
    assert!(r.remark.as_deref().unwrap_or_default().contains("maxMessageSize"), "{:?}", r.remark);
    assert_eq!(c.call(&client, update("maxMessageSize=4096\n")).await.code, response_code::SUCCESS);
    assert_eq!(c.call(&client, send_v2("SizeTopic", 0, &body)).await.code, response_code::SUCCESS);

    // A topic filter type other than Java's two is refused, as Java's header check does.
    let create = |filter: &str| {
        RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC).with_header(&CreateTopicRequestHeader {
            topic: "FilterTopic".into(),
            default_topic: "TBW102".into(),
            read_queue_nums: 4,
            write_queue_nums: 4,
            perm: 6,
            topic_filter_type: filter.into(),
            ..Default::default()
        })
    };
    let r = c.call(&client, create("BOGUS")).await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert!(
        r.remark.as_deref().unwrap_or_default().contains("topicFilterType = [BOGUS] value invalid"),
        "{:?}",
        r.remark
    );
    assert_eq!(c.call(&client, create("MULTI_TAG")).await.code, response_code::SUCCESS);
    client.shutdown().await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_config_update_that_cannot_be_persisted_is_refused_and_not_applied() {
    let blocker = tempfile::NamedTempFile::new().unwrap();
    // A regular file where a directory is needed: the write back must fail.
    let unwritable = blocker.path().join("broker.conf").display().to_string();
    let c = Cluster::start(move |s| s.broker.broker_config_path = unwritable.clone()).await;
    let client = RemotingClient::new(ClientConfig::default());
    let r = c
        .call(&client, RemotingCommand::request(request_code::UPDATE_BROKER_CONFIG).with_body("brokerPermission=4\n"))
        .await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert!(r.remark.as_deref().unwrap_or_default().contains("cannot persist"), "{:?}", r.remark);
    let r = c.call(&client, RemotingCommand::request(request_code::GET_BROKER_CONFIG)).await;
    let text = String::from_utf8(r.body.to_vec()).unwrap();
    assert!(text.contains("brokerPermission=6") && !text.contains("brokerPermission=4"), "{text}");
    client.shutdown().await;
    c.stop().await;
}

/// Polls the name server until `topic`'s route shows `perm` for the broker's queues.
async fn wait_route_perm(c: &Cluster, topic: &str, perm: i32) {
    let client = RemotingClient::new(ClientConfig::default());
    let deadline = Instant::now() + T;
    loop {
        let req = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)
            .with_header(&GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: Some(true) });
        let r = client.invoke(&c.ns_addr, req, T).await.unwrap();
        let now = (r.code == response_code::SUCCESS)
            .then(|| TopicRouteData::decode(&r.body).unwrap().queue_datas.first().map(|q| q.perm))
            .flatten();
        if now == Some(perm) {
            client.shutdown().await;
            return;
        }
        assert!(Instant::now() < deadline, "{topic} route perm never became {perm} (now {now:?})");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_permission_update_takes_effect_at_once_and_is_re_registered() {
    let c = Cluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let update = |text: &str| RemotingCommand::request(request_code::UPDATE_BROKER_CONFIG).with_body(text.to_owned());
    c.send(&client, "PermTopic", 0, 1).await;
    wait_route_perm(&c, "PermTopic", 6).await;

    // Read-only: sends are refused, pulls still served, routes show the topic read-only.
    assert_eq!(c.call(&client, update("brokerPermission=4\n")).await.code, response_code::SUCCESS);
    let r = c.call(&client, send_v2("PermTopic", 0, "refused")).await;
    assert_eq!(r.code, response_code::NO_PERMISSION, "{:?}", r.remark);
    assert!(r.remark.as_deref().unwrap_or_default().contains("sending message is forbidden"), "{:?}", r.remark);
    let pull = RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&PullMessageRequestHeader {
        consumer_group: "perm-group".into(),
        topic: "PermTopic".into(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: 32,
        sys_flag: pull_sys_flag::SUBSCRIPTION,
        subscription: Some("*".into()),
        expression_type: Some("TAG".into()),
        ..Default::default()
    });
    assert_eq!(c.call(&client, pull).await.code, response_code::SUCCESS);
    wait_route_perm(&c, "PermTopic", 4).await;

    // Writable again.
    assert_eq!(c.call(&client, update("brokerPermission=6\n")).await.code, response_code::SUCCESS);
    assert_eq!(c.call(&client, send_v2("PermTopic", 0, "accepted")).await.code, response_code::SUCCESS);
    wait_route_perm(&c, "PermTopic", 6).await;
    client.shutdown().await;
    c.stop().await;
}

/// Request-reply: a consumer's reply (SEND_REPLY_MESSAGE_V2) is pushed to the requesting
/// producer client named by REPLY_TO_CLIENT (PUSH_REPLY_MESSAGE_TO_CLIENT) and stored in the
/// cluster's reply topic; a reply nobody can receive is refused, and stored all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_is_pushed_to_the_requester_and_stored() {
    let c = Cluster::start(|_| {}).await;
    let (tx, mut pushed) = mpsc::unbounded_channel();
    let mut dispatcher = Dispatcher::new();
    dispatcher.register_sync(request_code::PUSH_REPLY_MESSAGE_TO_CLIENT, move |_conn, req| {
        let _ = tx.send(req.clone());
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, None))
    });
    let requester = RemotingClient::with_handler(ClientConfig::default(), Arc::new(dispatcher));
    let hb = heartbeat("127.0.0.1@requester", "cg-requester", &["Orders"], Some("pg-requester"));
    assert_eq!(c.call(&requester, hb).await.code, response_code::SUCCESS);

    let replier = RemotingClient::new(ClientConfig::default());
    let reply = |to: Option<&str>, correlation: &str| {
        let mut props = vec![("CORRELATION_ID", correlation), ("MSG_TYPE", "reply")];
        props.extend(to.map(|to| ("REPLY_TO_CLIENT", to)));
        let mut req = send_request("DefaultCluster_REPLY_TOPIC", -1, correlation.as_bytes(), &props);
        req.code = request_code::SEND_REPLY_MESSAGE_V2;
        req
    };
    let r = c.call(&replier, reply(Some("127.0.0.1@requester"), "c-1")).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!((h.msg_id.len(), h.queue_id, h.queue_offset), (32, 0, 0), "stored as the queue's first message");
    assert_eq!(r.ext_fields.get("MSG_REGION"), Some("DefaultRegion"));

    let push = tokio::time::timeout(T, pushed.recv()).await.unwrap().unwrap();
    // Java's field names on the wire.
    for key in
        ["producerGroup", "topic", "queueId", "sysFlag", "bornTimestamp", "bornHost", "storeHost", "storeTimestamp"]
    {
        assert!(push.ext_fields.get(key).is_some(), "{key} missing: {:?}", push.ext_fields);
    }
    let ph: ReplyMessageRequestHeader = push.decode_header().unwrap();
    assert_eq!(ph.topic, "DefaultCluster_REPLY_TOPIC");
    assert!(ph.born_host.starts_with("127.0.0.1:"), "{}", ph.born_host);
    assert!(ph.store_timestamp > 0 && !ph.store_host.is_empty());
    let props = MessageProperties::decode(ph.properties.as_deref().unwrap());
    assert_eq!(props.get("CORRELATION_ID"), Some("c-1"));
    assert!(props.get("PUSH_REPLY_TIME").is_some_and(|t| t.parse::<i64>().is_ok()));
    assert_eq!(&push.body[..], b"c-1");

    // A requester that is not connected: refused, but the reply is kept (as Java does).
    let r = c.call(&replier, reply(Some("10.0.0.9@gone"), "c-2")).await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert!(r.remark.as_deref().unwrap().contains("<10.0.0.9@gone> not found"), "{:?}", r.remark);
    assert_eq!(r.decode_header::<SendMessageResponseHeader>().unwrap().queue_offset, 1);
    // No REPLY_TO_CLIENT at all.
    let r = c.call(&replier, reply(None, "c-3")).await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert!(r.remark.as_deref().unwrap().contains("REPLY_TO_CLIENT"), "{:?}", r.remark);
    assert!(pushed.try_recv().is_err(), "only the first reply reached the requester");
    for client in [requester, replier] {
        client.shutdown().await;
    }
    c.stop().await;
}

/// The 5.x list and single-config admin requests: topics and groups created in bulk (all
/// checked before any is stored), read back one by one, and the system topic set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_and_group_lists_are_created_together_and_read_back_one_by_one() {
    let c = Cluster::start(|_| {}).await;
    let admin = RemotingClient::new(ClientConfig::default());
    let topic_list = |json: &str| {
        RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC_LIST).with_body(json.as_bytes().to_vec())
    };
    let get_topic = |topic: &str| {
        RemotingCommand::request(request_code::GET_TOPIC_CONFIG)
            .with_header(&GetTopicConfigRequestHeader { topic: topic.into(), lo: None })
    };
    let r = c
        .call(
            &admin,
            topic_list(
                r#"{"topicConfigList":[{"topicName":"ListA","readQueueNums":2,"writeQueueNums":2,"perm":6,"attributes":{"+message.type":"FIFO"}},{"topicName":"ListB"}]}"#,
            ),
        )
        .await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let r = c.call(&admin, get_topic("ListA")).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let a = TopicConfig::decode(&r.body).unwrap();
    assert_eq!((a.read_queue_nums, a.write_queue_nums, a.perm), (2, 2, 6));
    assert_eq!(a.attributes, BTreeMap::from([("message.type".to_owned(), "FIFO".to_owned())]));
    assert_eq!(TopicConfig::decode(&c.call(&admin, get_topic("ListB")).await.body).unwrap().read_queue_nums, 16);
    // One bad entry refuses the whole list: nothing of it is stored.
    let r = c.call(&admin, topic_list(r#"{"topicConfigList":[{"topicName":"ListC"},{"topicName":"TBW102"}]}"#)).await;
    assert_eq!(r.code, response_code::INVALID_PARAMETER, "{:?}", r.remark);
    let r = c.call(&admin, get_topic("ListC")).await;
    assert_eq!(r.code, response_code::TOPIC_NOT_EXIST);
    assert_eq!(r.remark.as_deref(), Some("No topic in this broker. topic: ListC"));
    let r = c
        .call(
            &admin,
            topic_list(
                r#"{"topicConfigList":[{"topicName":"ListF"},{"topicName":"ListD","attributes":{"-message.type":""}}]}"#,
            ),
        )
        .await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR, "a new topic can only add attributes");
    assert_eq!(c.call(&admin, get_topic("ListF")).await.code, response_code::TOPIC_NOT_EXIST, "nothing of it stored");
    let r = c
        .call(&admin, topic_list(r#"{"topicConfigList":[{"topicName":"ListE","attributes":{"message.type":"FIFO"}}]}"#))
        .await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR, "an attribute change needs its sign: {:?}", r.remark);

    let group_list = |json: &str| {
        RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST)
            .with_body(json.as_bytes().to_vec())
    };
    let get_group = |group: &str| {
        RemotingCommand::request(request_code::GET_SUBSCRIPTIONGROUP_CONFIG)
            .with_header(&GetSubscriptionGroupConfigRequestHeader { group: group.into() })
    };
    let r = c
        .call(&admin, group_list(r#"{"groupConfigList":[{"groupName":"lg1","retryMaxTimes":3},{"groupName":"lg2"}]}"#))
        .await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let r = c.call(&admin, get_group("lg1")).await;
    assert_eq!(r.code, response_code::SUCCESS);
    assert_eq!(SubscriptionGroupConfig::decode(&r.body).unwrap().retry_max_times, 3);
    let r = c.call(&admin, group_list(r#"{"groupConfigList":[{"groupName":"lg3"},{"groupName":"bad group"}]}"#)).await;
    assert_eq!(r.code, response_code::INVALID_PARAMETER);
    let all = c.call(&admin, RemotingCommand::request(request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).await;
    let all = String::from_utf8(all.body.to_vec()).unwrap();
    assert!(all.contains("lg2") && !all.contains("lg3"), "the refused list stored nothing");

    let r = c.call(&admin, RemotingCommand::request(request_code::GET_SYSTEM_TOPIC_LIST_FROM_BROKER)).await;
    let system = TopicList::decode(&r.body).unwrap().topic_list;
    for topic in ["TBW102", "SCHEDULE_TOPIC_XXXX", "DefaultCluster", BROKER, "DefaultCluster_REPLY_TOPIC"] {
        assert!(system.contains(topic), "{topic} missing from {system:?}");
    }
    assert!(!system.contains("ListA"));
    admin.shutdown().await;
    c.stop().await;
}

/// Deleting a topic deletes its queues (the name starts again at offset 0); the store
/// clean-ups answer and keep every live queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topic_starts_again_at_zero_and_clean_ups_keep_live_queues() {
    let c = Cluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    let max_offset = |topic: &str, queue_id: i32| {
        RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&GetMaxOffsetRequestHeader {
            topic: topic.into(),
            queue_id,
            committed: None,
            broker_name: None,
            lo: None,
        })
    };
    let max = |r: RemotingCommand| r.decode_header::<OffsetResponseHeader>().unwrap().offset;
    c.send(&client, "Gone", 0, 3).await;
    c.send(&client, "Stays", 1, 2).await;
    for code in [
        request_code::CLEAN_UNUSED_TOPIC,
        request_code::CLEAN_EXPIRED_CONSUMEQUEUE,
        request_code::DELETE_EXPIRED_COMMITLOG,
    ] {
        let r = c.call(&client, RemotingCommand::request(code)).await;
        assert_eq!(r.code, response_code::SUCCESS, "{code}: {:?}", r.remark);
    }
    assert_eq!(max(c.call(&client, max_offset("Stays", 1)).await), 2, "live queues are kept");
    assert_eq!(max(c.call(&client, max_offset("Gone", 0)).await), 3);

    // The units of a consume queue, as `mqadmin queryCq` shows them.
    let query_cq = |topic: &str, queue_id: i32, index: i64, group: Option<&str>| {
        RemotingCommand::request(request_code::QUERY_CONSUME_QUEUE).with_header(&QueryConsumeQueueRequestHeader {
            topic: topic.into(),
            queue_id,
            index,
            count: 10,
            consumer_group: group.map(str::to_owned),
        })
    };
    let r = c.call(&client, query_cq("Stays", 1, 0, Some("nobody"))).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    let cq = QueryConsumeQueueResponseBody::decode(&r.body).unwrap();
    assert_eq!((cq.min_queue_index, cq.max_queue_index, cq.queue_data.len()), (0, 2, 2), "{cq:?}");
    assert!(cq.queue_data[0].physic_offset < cq.queue_data[1].physic_offset && cq.queue_data[0].physic_size > 0);
    assert_eq!(cq.filter_data.as_deref(), Some("nobody@Stays is not online!"));
    assert!(cq.subscription_data.is_none());
    let r = c.call(&client, query_cq("Stays", 1, 5, None)).await;
    assert_eq!((r.code, r.body.is_empty()), (response_code::SUCCESS, true));
    assert_eq!(r.remark.as_deref(), Some("Index 5 of 1@Stays is not exist!"));
    let r = c.call(&client, query_cq("Unknown", 3, 0, None)).await;
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert_eq!(r.remark.as_deref(), Some("3@Unknown is not exist!"));

    let delete = RemotingCommand::request(request_code::DELETE_TOPIC_IN_BROKER)
        .with_header(&DeleteTopicRequestHeader { topic: "Gone".into() });
    assert_eq!(c.call(&client, delete).await.code, response_code::SUCCESS);
    assert_eq!(max(c.call(&client, max_offset("Gone", 0)).await), 0, "its queues went with it");
    c.send(&client, "Gone", 0, 1).await;
    assert_eq!(max(c.call(&client, max_offset("Gone", 0)).await), 1, "created again, from offset 0");
    assert_eq!(max(c.call(&client, max_offset("Stays", 1)).await), 2);
    client.shutdown().await;
    c.stop().await;
}

/// A group's read permission on a topic (UPDATE_AND_GET_GROUP_FORBIDDEN) and a group that may
/// not broadcast: pulls get NO_PERMISSION with Java's `forbiddenType`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_groups_are_refused_with_their_forbidden_type() {
    let c = Cluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());
    c.send(&client, "Fb", 0, 2).await;
    assert_eq!(c.call(&client, heartbeat("127.0.0.1@fb", "fbg", &["Fb"], None)).await.code, response_code::SUCCESS);
    let forbid = |readable: Option<bool>| {
        RemotingCommand::request(request_code::UPDATE_AND_GET_GROUP_FORBIDDEN)
            .with_header(&UpdateGroupForbiddenRequestHeader { group: "fbg".into(), topic: "Fb".into(), readable })
    };
    let pull = |group: &str| {
        let mut p = ferromq_testkit::pull_request("Fb", 0, 0, "*", 0);
        p.ext_fields.insert("consumerGroup".into(), group);
        p.ext_fields.insert("sysFlag".into(), "0");
        p
    };
    let r = c.call(&client, forbid(Some(false))).await;
    assert_eq!(r.code, response_code::SUCCESS);
    assert_eq!(String::from_utf8(r.body.to_vec()).unwrap(), r#"{"group":"fbg","readable":false,"topic":"Fb"}"#);
    let r = c.call(&client, pull("fbg")).await;
    assert_eq!(r.code, response_code::NO_PERMISSION);
    assert_eq!(r.ext_fields.get("forbiddenType"), Some("5"));
    assert_eq!(r.remark.as_deref(), Some("the consumer group[fbg] is forbidden for topic[Fb]"));
    let r = c.call(&client, forbid(None)).await;
    assert!(String::from_utf8(r.body.to_vec()).unwrap().contains(r#""readable":false"#), "reading changes nothing");
    assert_eq!(c.call(&client, forbid(Some(true))).await.code, response_code::SUCCESS);
    assert_eq!(c.call(&client, pull("fbg")).await.code, response_code::SUCCESS);

    // A group that may not broadcast, consuming by broadcasting.
    let mut config = SubscriptionGroupConfig { group_name: "bcg".into(), ..Default::default() };
    config.consume_broadcast_enable = false;
    let create = RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(config.encode());
    assert_eq!(c.call(&client, create).await.code, response_code::SUCCESS);
    let mut hb = consumer_heartbeat("127.0.0.1@bc", "bcg", &["Fb"]);
    hb.consumer_data_set[0].message_model = MessageModel::Broadcasting;
    let hb = RemotingCommand::request(request_code::HEART_BEAT).with_body(hb.encode());
    assert_eq!(c.call(&client, hb).await.code, response_code::SUCCESS);
    let r = c.call(&client, pull("bcg")).await;
    assert_eq!(r.code, response_code::NO_PERMISSION);
    assert_eq!(r.ext_fields.get("forbiddenType"), Some("4"));
    assert_eq!(r.remark.as_deref(), Some("the consumer group[bcg] can not consume by broadcast way"));
    client.shutdown().await;
    c.stop().await;
}

/// A topic is in the name server's routes by the time UPDATE_AND_CREATE_TOPIC (or _LIST) is
/// answered, as Java registers before it answers: a client told "created" that asks for the
/// route at once finds it (the C++ client fails a send at once on "No route info").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_topic_is_routed_when_the_creation_is_answered() {
    let c = Cluster::start(|_| {}).await;
    let admin = RemotingClient::new(ClientConfig::default());
    let route = |topic: &str| {
        RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC)
            .with_header(&GetRouteInfoRequestHeader { topic: topic.into(), accept_standard_json_only: Some(true) })
    };
    for i in 0..10 {
        let topic = format!("RoutedAtOnce{i}");
        let create =
            RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC).with_header(&CreateTopicRequestHeader {
                topic: topic.clone(),
                default_topic: "TBW102".into(),
                read_queue_nums: 4,
                write_queue_nums: 4,
                perm: 6,
                topic_filter_type: "SINGLE_TAG".into(),
                ..Default::default()
            });
        assert_eq!(c.call(&admin, create).await.code, response_code::SUCCESS);
        let r = admin.invoke(&c.ns_addr, route(&topic), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{topic}: {:?}", r.remark);
        assert_eq!(TopicRouteData::decode(&r.body).unwrap().queue_datas.first().map(|q| q.write_queue_nums), Some(4));

        let listed = format!("RoutedListed{i}");
        let list = RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC_LIST)
            .with_body(format!(r#"{{"topicConfigList":[{{"topicName":"{listed}"}}]}}"#).into_bytes());
        assert_eq!(c.call(&admin, list).await.code, response_code::SUCCESS);
        let r = admin.invoke(&c.ns_addr, route(&listed), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{listed}: {:?}", r.remark);
    }
    admin.shutdown().await;
    c.stop().await;
}

/// A name server that missed a registration (here: one that starts after the broker) is asked
/// again within seconds, backing off, not a whole registerNameServerPeriod (30 s) later; and
/// a topic created meanwhile is still answered (the live name server has it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_name_server_is_registered_with_soon() {
    let late_port = ferromq_testkit::free_port();
    let late_addr = format!("127.0.0.1:{late_port}");
    let listed = late_addr.clone();
    let c = Cluster::start(move |s| s.broker.namesrv_addr = format!("{};{listed}", s.broker.namesrv_addr)).await;
    let admin = RemotingClient::new(ClientConfig::default());
    let create =
        RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC).with_header(&CreateTopicRequestHeader {
            topic: "BeforeLateNs".into(),
            default_topic: "TBW102".into(),
            read_queue_nums: 2,
            write_queue_nums: 2,
            perm: 6,
            topic_filter_type: "SINGLE_TAG".into(),
            ..Default::default()
        });
    assert_eq!(c.call(&admin, create).await.code, response_code::SUCCESS);

    let dir = tempfile::tempdir().unwrap();
    let config = ferromq_namesrv::NamesrvConfig {
        kv_config_path: dir.path().join("kv.json"),
        config_store_path: dir.path().join("namesrv.properties"),
        ..Default::default()
    };
    let listener = tokio::net::TcpListener::bind(&late_addr).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let late = tokio::spawn(ferromq_namesrv::run(config, listener, async {
        let _ = stopped.await;
    }));
    let deadline = Instant::now() + T;
    loop {
        let req =
            RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(&GetRouteInfoRequestHeader {
                topic: "BeforeLateNs".into(),
                accept_standard_json_only: Some(true),
            });
        if admin.invoke(&late_addr, req, T).await.unwrap().code == response_code::SUCCESS {
            break;
        }
        assert!(Instant::now() < deadline, "the broker did not register with the late name server within {T:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(());
    late.await.unwrap().unwrap();
    admin.shutdown().await;
    c.stop().await;
}
