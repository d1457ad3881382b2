//! The broker's client tables with real connections over loopback TCP: heartbeat registration,
//! NOTIFY_CONSUMER_IDS_CHANGED as the members receive it, unregistering, closed connections,
//! subscription versions, expiry with an injected clock, and the producer table.
//!
//! The broker side is a bare `RemotingServer` whose dispatcher hands out the server-side
//! `Connection` of each client and forwards connection closes to the managers, as the broker
//! will. Each member is a `RemotingClient` whose dispatcher records the notices it receives.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_broker::client::{
    ClientChannelInfo, ConsumerGroupEvent, ConsumerManager, ProducerManager, CHANNEL_EXPIRED_TIMEOUT_MS,
};
use ferromq_protocol::body::{ConsumeFromWhere, ConsumeType, HeartbeatData, JsonBody, MessageModel, SubscriptionData};
use ferromq_protocol::header::NotifyConsumerIdsChangedRequestHeader;
use ferromq_protocol::{request_code, response_code, LanguageCode, RemotingCommand};
use ferromq_remoting::{
    ClientConfig, Connection, Dispatcher, RemotingClient, RemotingError, RemotingServer, ServerConfig,
};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// A client announces itself with this code; the remark is its name.
const HELLO: i32 = 9100;
/// The broker calls a member with this code to know it has read everything sent before.
const PING: i32 = 9101;
const TIMEOUT: Duration = Duration::from_secs(5);
const T0: i64 = 1_700_000_000_000;

struct Broker {
    addr: String,
    consumers: Arc<ConsumerManager>,
    producers: Arc<ProducerManager>,
    events: Arc<Mutex<Vec<ConsumerGroupEvent>>>,
    accepted: Arc<Mutex<HashMap<String, Connection>>>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), RemotingError>>,
}

impl Broker {
    async fn start() -> Broker {
        let consumers = Arc::new(ConsumerManager::new());
        let producers = Arc::new(ProducerManager::new());
        let events = Arc::new(Mutex::new(Vec::new()));
        {
            let events = events.clone();
            consumers.on_change(move |event| events.lock().unwrap().push(event.clone()));
        }
        let accepted = Arc::new(Mutex::new(HashMap::new()));
        let mut dispatcher = Dispatcher::new();
        {
            let accepted = accepted.clone();
            dispatcher.register_sync(HELLO, move |conn, req| {
                accepted.lock().unwrap().insert(req.remark.clone().unwrap(), conn.clone());
                Some(RemotingCommand::response_to(req, response_code::SUCCESS, None))
            });
        }
        {
            let (consumers, producers) = (consumers.clone(), producers.clone());
            dispatcher.on_close(move |conn| {
                consumers.on_connection_closed(conn.id());
                producers.on_connection_closed(conn.id());
            });
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = RemotingServer::new(ServerConfig::default(), Arc::new(dispatcher));
        let task = tokio::spawn(async move {
            server
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await
        });
        Broker { addr, consumers, producers, events, accepted, stop: Some(stop), task }
    }

    /// Registers `member` in clustering group `group` subscribing to `topics` at `sub_version`.
    fn register(&self, member: &Member, group: &str, topics: &[&str], sub_version: i64, now_ms: i64) -> bool {
        let subscriptions: Vec<SubscriptionData> = topics.iter().map(|t| subscription(t, "*", sub_version)).collect();
        self.consumers.register_consumer(
            group,
            member.info(now_ms),
            ConsumeType::ConsumePassively,
            MessageModel::Clustering,
            ConsumeFromWhere::ConsumeFromLastOffset,
            &subscriptions,
            true,
        )
    }

    /// Takes the listener events seen so far.
    fn take_events(&self) -> Vec<ConsumerGroupEvent> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }

    /// Waits until each member has received its expected number of notices, then checks that
    /// no further one is on its way: every notice started has been queued, and each member has
    /// answered a PING sent after it, so it has read everything before.
    async fn assert_notices(&self, expected: &[(&Member, usize)]) {
        for (member, count) in expected {
            wait_until(&format!("{} receives {count} notices", member.name), || member.notices().len() >= *count).await;
        }
        self.consumers.flush_notifications().await;
        for (member, count) in expected {
            member.barrier().await;
            assert_eq!(member.notices().len(), *count, "notices received by {}", member.name);
        }
    }

    async fn stop(mut self, members: Vec<Member>) {
        for member in members {
            member.client.shutdown().await;
        }
        self.consumers.flush_notifications().await;
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(15), &mut self.task).await.expect("server drains").unwrap().unwrap();
    }
}

/// One client process connected to the broker.
struct Member {
    name: String,
    client: RemotingClient,
    /// The broker's side of the member's connection.
    conn: Connection,
    /// Consumer group of every NOTIFY_CONSUMER_IDS_CHANGED received, with its oneway flag.
    received: Arc<Mutex<Vec<(String, bool)>>>,
}

impl Member {
    async fn connect(broker: &Broker, name: &str) -> Member {
        let received = Arc::new(Mutex::new(Vec::new()));
        let mut dispatcher = Dispatcher::new();
        {
            let received = received.clone();
            dispatcher.register_sync(request_code::NOTIFY_CONSUMER_IDS_CHANGED, move |_conn, req| {
                let header: NotifyConsumerIdsChangedRequestHeader = req.decode_header().unwrap();
                received.lock().unwrap().push((header.consumer_group, req.is_oneway()));
                None
            });
        }
        dispatcher
            .register_sync(PING, |_conn, req| Some(RemotingCommand::response_to(req, response_code::SUCCESS, None)));
        let client = RemotingClient::with_handler(ClientConfig::default(), Arc::new(dispatcher));
        let mut hello = RemotingCommand::request(HELLO);
        hello.remark = Some(name.to_owned());
        let response = client.invoke(&broker.addr, hello, TIMEOUT).await.unwrap();
        assert_eq!(response.code, response_code::SUCCESS);
        let conn = broker.accepted.lock().unwrap()[name].clone();
        Member { name: name.to_owned(), client, conn, received }
    }

    fn client_id(&self) -> String {
        format!("127.0.0.1@{}", self.name)
    }

    fn info(&self, now_ms: i64) -> ClientChannelInfo {
        ClientChannelInfo::new(self.conn.clone(), self.client_id(), LanguageCode::Java, 453, now_ms)
    }

    /// Groups named by the notices received so far; asserts each came oneway.
    fn notices(&self) -> Vec<String> {
        let received = self.received.lock().unwrap();
        assert!(received.iter().all(|(_, oneway)| *oneway), "notices are sent oneway");
        received.iter().map(|(group, _)| group.clone()).collect()
    }

    async fn barrier(&self) {
        let response = self.conn.invoke(RemotingCommand::request(PING), TIMEOUT).await.unwrap();
        assert_eq!(response.code, response_code::SUCCESS);
    }
}

fn subscription(topic: &str, expression: &str, sub_version: i64) -> SubscriptionData {
    SubscriptionData {
        topic: topic.to_owned(),
        sub_string: expression.to_owned(),
        sub_version,
        ..SubscriptionData::default()
    }
}

async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn heartbeat_registration_creates_consumer_and_producer_groups() {
    let broker = Broker::start().await;
    let a = Member::connect(&broker, "a").await;
    let heartbeat = HeartbeatData::decode(
        br#"{"clientID":"127.0.0.1@a","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",
        "consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","unitMode":false,
        "subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"tagA || tagB",
        "subVersion":1700000000000,"tagsSet":["tagA","tagB"],"topic":"T1"},{"subString":"*","subVersion":1700000000000,
        "topic":"%RETRY%cg"}]}],"heartbeatFingerprint":0,
        "producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"},{"groupName":"pg"}],"withoutSub":false}"#,
    )
    .unwrap();
    // What the HEART_BEAT processor does with it.
    let info = ClientChannelInfo::new(a.conn.clone(), heartbeat.client_id.clone(), LanguageCode::Java, 453, T0);
    for consumer in &heartbeat.consumer_data_set {
        assert!(broker.consumers.register_consumer(
            &consumer.group_name,
            info.clone(),
            consumer.consume_type,
            consumer.message_model,
            consumer.consume_from_where,
            &consumer.subscription_data_set,
            true,
        ));
    }
    for producer in &heartbeat.producer_data_set {
        assert!(broker.producers.register(&producer.group_name, info.clone()));
    }

    assert_eq!(broker.consumers.groups(), set(&["cg"]));
    let group = broker.consumers.group("cg").unwrap();
    assert_eq!(group.group_name, "cg");
    assert_eq!(group.consume_type, ConsumeType::ConsumePassively);
    assert_eq!(group.message_model, MessageModel::Clustering);
    assert_eq!(group.consume_from_where, ConsumeFromWhere::ConsumeFromFirstOffset);
    assert_eq!(group.subscribed_topics(), set(&["%RETRY%cg", "T1"]));
    assert_eq!(group.last_update_ms, T0);
    assert_eq!(broker.consumers.client_ids("cg"), strings(&["127.0.0.1@a"]));
    let tags = broker.consumers.find_subscription("cg", "T1").unwrap();
    assert_eq!(tags.sub_string, "tagA || tagB");
    assert_eq!(tags.tags_set, set(&["tagA", "tagB"]));
    assert!(broker.consumers.find_subscription("cg", "T2").is_none());
    assert!(broker.consumers.find_subscription("other", "T1").is_none());
    assert_eq!(broker.consumers.query_topic_consume_by_who("T1"), set(&["cg"]));
    assert!(broker.consumers.query_topic_consume_by_who("T2").is_empty());
    let connections = broker.consumers.connections("cg");
    assert_eq!(connections.len(), 1);
    assert_eq!(connections[0].connection, a.conn);
    assert_eq!(connections[0].language, LanguageCode::Java);
    assert_eq!(connections[0].version, 453);
    assert_eq!(broker.consumers.find_channel("cg", "127.0.0.1@a").unwrap().connection, a.conn);
    assert!(broker.consumers.find_channel("cg", "127.0.0.1@z").is_none());

    assert_eq!(broker.producers.groups(), set(&["CLIENT_INNER_PRODUCER", "pg"]));
    let producers = broker.producers.group_connections("pg");
    assert_eq!(producers.len(), 1);
    assert_eq!(producers[0].client_id, "127.0.0.1@a");
    assert_eq!(broker.producers.any_connection("pg"), Some(a.conn.clone()));
    assert_eq!(broker.producers.any_connection("unknown"), None);

    // The first member is told about itself; the same heartbeat again changes nothing.
    broker.assert_notices(&[(&a, 1)]).await;
    assert_eq!(a.notices(), strings(&["cg"]));
    let again = ClientChannelInfo { last_update_ms: T0 + 30_000, ..info };
    let consumer = &heartbeat.consumer_data_set[0];
    assert!(!broker.consumers.register_consumer(
        "cg",
        again.clone(),
        consumer.consume_type,
        consumer.message_model,
        consumer.consume_from_where,
        &consumer.subscription_data_set,
        true,
    ));
    assert!(!broker.producers.register("pg", again));
    assert_eq!(broker.consumers.group("cg").unwrap().channels[&a.conn.id()].last_update_ms, T0 + 30_000);
    assert_eq!(broker.producers.group_connections("pg")[0].last_update_ms, T0 + 30_000);
    broker.assert_notices(&[(&a, 1)]).await;
    broker.stop(vec![a]).await;
}

#[tokio::test]
async fn a_second_member_triggers_exactly_one_notice_to_each_member() {
    let broker = Broker::start().await;
    let a = Member::connect(&broker, "a").await;
    let b = Member::connect(&broker, "b").await;

    assert!(broker.register(&a, "g", &["T"], 1, T0));
    broker.assert_notices(&[(&a, 1), (&b, 0)]).await;
    assert_eq!(
        broker.take_events(),
        vec![
            ConsumerGroupEvent::ClientRegister { group: "g".into(), client_id: a.client_id(), topics: set(&["T"]) },
            ConsumerGroupEvent::Change { group: "g".into(), client_ids: vec![a.client_id()] },
            ConsumerGroupEvent::Register { group: "g".into(), subscriptions: vec![subscription("T", "*", 1)] },
        ]
    );

    assert!(broker.register(&b, "g", &["T"], 1, T0 + 10));
    broker.assert_notices(&[(&a, 2), (&b, 1)]).await;
    assert_eq!(b.notices(), strings(&["g"]));
    assert_eq!(broker.consumers.client_ids("g"), vec![a.client_id(), b.client_id()]);
    let events = broker.take_events();
    assert!(events
        .contains(&ConsumerGroupEvent::Change { group: "g".into(), client_ids: vec![a.client_id(), b.client_id()] }));

    // Regular heartbeats of both change nothing and tell nobody.
    assert!(!broker.register(&a, "g", &["T"], 1, T0 + 30_000));
    assert!(!broker.register(&b, "g", &["T"], 1, T0 + 30_010));
    broker.assert_notices(&[(&a, 2), (&b, 1)]).await;
    let events = broker.take_events();
    assert!(events.iter().all(|e| matches!(e, ConsumerGroupEvent::Register { .. })), "{events:?}");
    broker.stop(vec![a, b]).await;
}

#[tokio::test]
async fn a_burst_of_joins_reaches_every_member() {
    let broker = Broker::start().await;
    let members = vec![
        Member::connect(&broker, "a").await,
        Member::connect(&broker, "b").await,
        Member::connect(&broker, "c").await,
    ];
    for member in &members {
        assert!(broker.register(member, "g", &["T"], 1, T0));
    }
    for member in &members {
        wait_until(&format!("{} is notified", member.name), || !member.notices().is_empty()).await;
    }
    broker.consumers.flush_notifications().await;
    // A notice still being sent when the next change comes may be cut short, since the newer
    // one goes to everyone; never more than one per change reaches a member.
    let total: usize = members.iter().map(|m| m.notices().len()).sum();
    assert!(total <= 1 + 2 + 3, "{total} notices for three joins");
    broker.stop(members).await;
}

#[tokio::test]
async fn unregistering_a_member_notifies_the_remaining_ones() {
    let broker = Broker::start().await;
    let a = Member::connect(&broker, "a").await;
    let b = Member::connect(&broker, "b").await;
    let c = Member::connect(&broker, "c").await;
    broker.register(&a, "g", &["T"], 1, T0);
    broker.assert_notices(&[(&a, 1)]).await;
    broker.register(&b, "g", &["T"], 1, T0);
    broker.assert_notices(&[(&a, 2), (&b, 1)]).await;
    broker.register(&c, "g", &["T"], 1, T0);
    broker.assert_notices(&[(&a, 3), (&b, 2), (&c, 1)]).await;
    broker.take_events();

    assert!(broker.consumers.unregister_consumer("g", b.conn.id()));
    broker.assert_notices(&[(&a, 4), (&b, 2), (&c, 2)]).await;
    assert_eq!(broker.consumers.client_ids("g"), vec![a.client_id(), c.client_id()]);
    assert_eq!(
        broker.take_events(),
        vec![
            ConsumerGroupEvent::ClientUnregister { group: "g".into(), client_id: b.client_id(), topics: set(&["T"]) },
            ConsumerGroupEvent::Change { group: "g".into(), client_ids: vec![a.client_id(), c.client_id()] },
        ]
    );

    // Not a member (any more, or of that group): nothing happens.
    assert!(!broker.consumers.unregister_consumer("g", b.conn.id()));
    assert!(!broker.consumers.unregister_consumer("other", a.conn.id()));
    assert!(broker.take_events().is_empty());

    assert!(broker.consumers.unregister_consumer("g", a.conn.id()));
    broker.assert_notices(&[(&a, 4), (&b, 2), (&c, 3)]).await;
    assert!(broker.consumers.unregister_consumer("g", c.conn.id()));
    broker.assert_notices(&[(&a, 4), (&b, 2), (&c, 3)]).await;
    assert!(broker.consumers.group("g").is_none());
    assert!(broker.consumers.groups().is_empty());
    assert!(broker.consumers.query_topic_consume_by_who("T").is_empty());
    let events = broker.take_events();
    assert_eq!(
        events[events.len() - 2..],
        [
            ConsumerGroupEvent::Unregister { group: "g".into() },
            ConsumerGroupEvent::Change { group: "g".into(), client_ids: vec![] },
        ]
    );
    broker.stop(vec![a, b, c]).await;
}

#[tokio::test]
async fn a_closed_connection_leaves_every_group_and_the_remaining_members_are_notified() {
    let broker = Broker::start().await;
    let a = Member::connect(&broker, "a").await;
    let b = Member::connect(&broker, "b").await;
    broker.register(&a, "g1", &["T"], 1, T0);
    broker.assert_notices(&[(&a, 1)]).await;
    broker.register(&b, "g1", &["T"], 1, T0);
    broker.register(&b, "g2", &["U"], 1, T0);
    broker.producers.register("pg", b.info(T0));
    broker.assert_notices(&[(&a, 2), (&b, 2)]).await;

    b.client.shutdown().await;
    wait_until("b leaves g1", || broker.consumers.client_ids("g1") == vec![a.client_id()]).await;
    wait_until("b leaves pg", || broker.producers.groups().is_empty()).await;
    broker.assert_notices(&[(&a, 3)]).await;
    assert_eq!(a.notices(), strings(&["g1", "g1", "g1"]));
    assert_eq!(broker.consumers.groups(), set(&["g1"]));
    assert!(broker.producers.groups().is_empty());
    assert!(broker.take_events().contains(&ConsumerGroupEvent::Unregister { group: "g2".into() }));
    assert_eq!(b.notices().len(), 2);
    // A heartbeat processed after the close does not bring the member back.
    assert!(!broker.register(&b, "g1", &["T"], 1, T0 + 1));
    assert!(!broker.producers.register("pg", b.info(T0 + 1)));
    assert_eq!(broker.consumers.client_ids("g1"), vec![a.client_id()]);
    assert!(broker.producers.groups().is_empty());
    broker.stop(vec![a, b]).await;
}

#[tokio::test]
async fn broadcasting_and_notify_disabled_groups_are_not_notified() {
    let broker = Broker::start().await;
    let a = Member::connect(&broker, "a").await;
    let b = Member::connect(&broker, "b").await;
    let subscriptions = [subscription("T", "*", 1)];
    for member in [&a, &b] {
        assert!(broker.consumers.register_consumer(
            "broadcast",
            member.info(T0),
            ConsumeType::ConsumePassively,
            MessageModel::Broadcasting,
            ConsumeFromWhere::ConsumeFromLastOffset,
            &subscriptions,
            true,
        ));
        assert!(broker.consumers.register_consumer(
            "quiet",
            member.info(T0),
            ConsumeType::ConsumePassively,
            MessageModel::Clustering,
            ConsumeFromWhere::ConsumeFromLastOffset,
            &subscriptions,
            false,
        ));
    }
    assert_eq!(broker.consumers.client_ids("broadcast"), vec![a.client_id(), b.client_id()]);
    // Listeners still hear of the changes.
    let changes = broker.take_events().into_iter().filter(|e| matches!(e, ConsumerGroupEvent::Change { .. })).count();
    assert_eq!(changes, 4);
    // The group's flag also holds when a member leaves by closing.
    b.client.shutdown().await;
    wait_until("b leaves", || broker.consumers.client_ids("quiet").len() == 1).await;
    wait_until("b leaves", || broker.consumers.client_ids("broadcast").len() == 1).await;
    broker.assert_notices(&[(&a, 0)]).await;
    broker.stop(vec![a, b]).await;
}

#[tokio::test]
async fn a_stale_sub_version_is_ignored_and_a_dropped_topic_notifies() {
    let broker = Broker::start().await;
    let a = Member::connect(&broker, "a").await;
    let register = |topic: &str, expression: &str, sub_version: i64| {
        broker.consumers.register_consumer(
            "g",
            a.info(T0),
            ConsumeType::ConsumePassively,
            MessageModel::Clustering,
            ConsumeFromWhere::ConsumeFromLastOffset,
            &[subscription(topic, expression, sub_version), subscription("%RETRY%g", "*", 1)],
            true,
        )
    };
    assert!(register("T", "a", 100));
    broker.assert_notices(&[(&a, 1)]).await;
    assert!(!register("T", "b", 50));
    assert_eq!(broker.consumers.find_subscription("g", "T").unwrap().sub_string, "a");
    // A newer version replaces the expression without counting as a change, as in Java.
    assert!(!register("T", "c", 200));
    assert_eq!(broker.consumers.find_subscription("g", "T").unwrap().sub_string, "c");
    broker.assert_notices(&[(&a, 1)]).await;
    // Switching topics drops the old one and is a change.
    assert!(register("U", "*", 300));
    broker.assert_notices(&[(&a, 2)]).await;
    assert!(broker.consumers.find_subscription("g", "T").is_none());
    assert!(broker.consumers.query_topic_consume_by_who("T").is_empty());
    assert_eq!(broker.consumers.query_topic_consume_by_who("U"), set(&["g"]));
    // A 5.x heartbeat without subscriptions keeps them.
    assert!(!broker.consumers.register_consumer_without_sub(
        "g",
        a.info(T0 + 1),
        ConsumeType::ConsumePassively,
        MessageModel::Clustering,
        ConsumeFromWhere::ConsumeFromLastOffset,
        true,
    ));
    assert_eq!(broker.consumers.group("g").unwrap().subscribed_topics(), set(&["%RETRY%g", "U"]));
    broker.assert_notices(&[(&a, 2)]).await;
    broker.stop(vec![a]).await;
}

#[tokio::test]
async fn silent_consumers_expire_after_120_seconds_and_are_disconnected() {
    let broker = Broker::start().await;
    let a = Member::connect(&broker, "a").await;
    let b = Member::connect(&broker, "b").await;
    broker.register(&a, "g", &["T"], 1, T0);
    broker.assert_notices(&[(&a, 1)]).await;
    broker.register(&b, "g", &["T"], 1, T0 + 60_000);
    broker.assert_notices(&[(&a, 2), (&b, 1)]).await;
    broker.take_events();

    assert_eq!(broker.consumers.scan_not_active(T0 + CHANNEL_EXPIRED_TIMEOUT_MS), 0);
    assert_eq!(broker.consumers.scan_not_active(T0 + CHANNEL_EXPIRED_TIMEOUT_MS + 1), 1);
    assert_eq!(broker.consumers.client_ids("g"), vec![b.client_id()]);
    broker.assert_notices(&[(&b, 2)]).await;
    wait_until("a's connection closes", || a.conn.is_closed()).await;
    assert_eq!(
        broker.take_events(),
        vec![
            ConsumerGroupEvent::ClientUnregister { group: "g".into(), client_id: a.client_id(), topics: set(&["T"]) },
            ConsumerGroupEvent::Change { group: "g".into(), client_ids: vec![b.client_id()] },
        ]
    );

    assert_eq!(broker.consumers.scan_not_active(T0 + 60_000 + CHANNEL_EXPIRED_TIMEOUT_MS + 1), 1);
    assert!(broker.consumers.groups().is_empty());
    assert!(broker.take_events().contains(&ConsumerGroupEvent::Unregister { group: "g".into() }));
    wait_until("b's connection closes", || b.conn.is_closed()).await;
    // Nobody was left to notify.
    assert_eq!((a.notices().len(), b.notices().len()), (2, 2));
    broker.stop(vec![a, b]).await;
}

#[tokio::test]
async fn producers_register_rotate_unregister_and_expire() {
    let broker = Broker::start().await;
    let p1 = Member::connect(&broker, "p1").await;
    let p2 = Member::connect(&broker, "p2").await;
    assert!(broker.producers.register("pg", p1.info(T0)));
    assert!(broker.producers.register("pg", p2.info(T0 + 60_000)));
    assert!(!broker.producers.register("pg", p1.info(T0)));
    assert!(broker.producers.register("other", p1.info(T0)));
    assert_eq!(broker.producers.groups(), set(&["other", "pg"]));
    let clients: Vec<String> = broker.producers.group_connections("pg").into_iter().map(|i| i.client_id).collect();
    assert_eq!(clients, vec![p1.client_id(), p2.client_id()]);
    let picked: BTreeSet<u64> = (0..4).map(|_| broker.producers.any_connection("pg").unwrap().id()).collect();
    assert_eq!(picked, BTreeSet::from([p1.conn.id(), p2.conn.id()]));

    assert!(broker.producers.unregister("other", p1.conn.id()));
    assert!(!broker.producers.unregister("other", p1.conn.id()));
    assert_eq!(broker.producers.groups(), set(&["pg"]));

    assert_eq!(broker.producers.scan_not_active(T0 + CHANNEL_EXPIRED_TIMEOUT_MS), 0);
    assert_eq!(broker.producers.scan_not_active(T0 + CHANNEL_EXPIRED_TIMEOUT_MS + 1), 1);
    wait_until("p1's connection closes", || p1.conn.is_closed()).await;
    assert_eq!(broker.producers.any_connection("pg"), Some(p2.conn.clone()));
    assert_eq!(broker.producers.scan_not_active(T0 + 60_000 + CHANNEL_EXPIRED_TIMEOUT_MS + 1), 1);
    assert!(broker.producers.groups().is_empty());
    assert_eq!(broker.producers.any_connection("pg"), None);
    wait_until("p2's connection closes", || p2.conn.is_closed()).await;
    broker.stop(vec![p1, p2]).await;
}
