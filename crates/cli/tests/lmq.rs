//! Light message queues against the real binary (`enableLmq`, `enableMultiDispatch`): one send
//! reaching 100 light queues, each consumed with our client by a light queue group whose
//! offsets land in `lmqConsumerOffset.json`; the queues and offsets survive a SIGKILL; the
//! refusals of bad sends carry RocketMQ's codes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use ferromq_client::admin::AdminClient;
use ferromq_client::{
    ClientConfig, ClientError, ConsumeFromWhere, LitePullConsumer, LitePullConsumerConfig, Message, Producer,
    ProducerConfig,
};
use ferromq_protocol::body::{MessageQueue, TopicConfig};
use ferromq_protocol::message::keys;
use ferromq_protocol::response_code;
use ferromq_testkit::{free_broker_port, free_port, ChildProcess};

mod common;

const BROKER_NAME: &str = "broker-a";
const TOPIC: &str = "LmqParent";
const QUEUES: usize = 100;
const GROUP: &str = "%LMQ%readers";

fn start(dir: &Path, namesrv: u16, broker: u16) -> ChildProcess {
    common::cluster::start_standalone(
        dir,
        namesrv,
        broker,
        &format!("brokerName={BROKER_NAME}\nenableLmq=true\nenableMultiDispatch=true\n"),
    )
}

fn light_queues() -> Vec<String> {
    (0..QUEUES).map(|i| format!("%LMQ%room{i}")).collect()
}

async fn producer(namesrv: &str) -> Producer {
    let producer = Producer::new(
        ProducerConfig { group: "pg_lmq".into(), ..ProducerConfig::default() },
        ClientConfig::with_namesrv(namesrv),
    );
    producer.start().await.unwrap();
    producer
}

/// Sends until the broker (just started) takes the message.
async fn send(producer: &Producer, msg: Message) -> Result<(), ClientError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match producer.send(msg.clone()).await {
            Ok(_) => return Ok(()),
            Err(e @ ClientError::Broker { .. }) => return Err(e),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

fn to_rooms(body: &str, rooms: &[String]) -> Message {
    Message::new(TOPIC, body.to_owned()).with_property(keys::INNER_MULTI_DISPATCH, rooms.join(","))
}

/// A consumer of the light queues, sharing the producer's client instance: light queues are
/// in no route, so the broker's address comes from the parent topic's route, as for Java's
/// MQTT bridge.
async fn consumer(producer: &Producer, rooms: &[String]) -> LitePullConsumer {
    let config = LitePullConsumerConfig {
        group: GROUP.into(),
        auto_commit: false,
        consume_from_where: ConsumeFromWhere::ConsumeFromFirstOffset,
        broker_suspend_max: Duration::from_secs(2),
        ..LitePullConsumerConfig::default()
    };
    let consumer = LitePullConsumer::with_instance(config, producer.instance().clone());
    consumer.start().await.unwrap();
    consumer.assign(rooms.iter().map(|r| MessageQueue::new(r, BROKER_NAME, 0)).collect()).await.unwrap();
    consumer
}

/// Polls until every light queue returned `per_queue` messages: (queue, offset) -> body.
async fn poll_all(consumer: &LitePullConsumer, per_queue: usize) -> BTreeMap<(String, i64), String> {
    let mut seen = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < QUEUES * per_queue {
        for m in consumer.poll(Duration::from_millis(500)).await {
            let body = String::from_utf8(m.body().to_vec()).unwrap();
            let previous = seen.insert((m.message_queue.topic.clone(), m.queue_offset()), body);
            assert!(previous.is_none(), "{} offset {} delivered twice", m.message_queue.topic, m.queue_offset());
        }
        assert!(Instant::now() < deadline, "only {} of {} messages", seen.len(), QUEUES * per_queue);
    }
    seen
}

#[test]
fn one_send_reaches_a_hundred_light_queues_which_survive_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let (namesrv_port, broker_port) = (free_port(), free_broker_port());
    let namesrv = format!("127.0.0.1:{namesrv_port}");
    let mut server = start(dir.path(), namesrv_port, broker_port);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let rooms = light_queues();
    rt.block_on(async {
        let producer = producer(&namesrv).await;
        for i in 0..3 {
            send(&producer, to_rooms(&format!("m{i}"), &rooms)).await.unwrap();
        }
        let consumer = consumer(&producer, &rooms).await;
        let seen = poll_all(&consumer, 3).await;
        for room in &rooms {
            for i in 0..3 {
                assert_eq!(seen[&(room.clone(), i)], format!("m{i}"), "{room}");
            }
        }
        consumer.commit_sync().await.unwrap();
        let committed = consumer.committed(&MessageQueue::new(&rooms[7], BROKER_NAME, 0)).await.unwrap();
        assert_eq!(committed, Some(3));

        // Refusals, with the codes Java's checks give.
        let bad = send(&producer, to_rooms("bad", &["%LMQ%ok".into(), "plain".into()])).await.unwrap_err();
        assert!(matches!(bad, ClientError::Broker { code: response_code::MESSAGE_ILLEGAL, .. }), "{bad:?}");
        let direct = send(&producer, Message::new(&rooms[0], "direct")).await.unwrap_err();
        assert!(matches!(direct, ClientError::Broker { code: response_code::MESSAGE_ILLEGAL, .. }), "{direct:?}");
        // Light queues take no topic config (Java accepts one and drops it).
        let admin = AdminClient::new(&namesrv);
        let broker_addr = format!("127.0.0.1:{broker_port}");
        let config = TopicConfig::new(&rooms[0], 1, 1);
        let refused = admin.create_topic(&broker_addr, &config).await.unwrap_err().to_string();
        assert!(refused.contains("light queue"), "{refused}");
        consumer.shutdown().await;
        producer.shutdown().await;
    });
    // The offsets are written every 5 s; wait for the file before killing.
    let offsets_file = dir.path().join("data/store/config/lmqConsumerOffset.json");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&offsets_file).is_ok_and(|t| t.contains(&format!("{}@{GROUP}", rooms[99]))) {
        assert!(
            Instant::now() < deadline,
            "lmqConsumerOffset.json never written: {:?}, config dir: {:?}",
            std::fs::read_to_string(&offsets_file),
            std::fs::read_dir(dir.path().join("data/store/config"))
                .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(dir.path().join("data/store/consumequeue/%LMQ%room42/0/00000000000000000000").is_file());

    server.0.kill().unwrap();
    server.0.wait().unwrap();
    let _server = start(dir.path(), namesrv_port, broker_port);
    rt.block_on(async {
        let producer = producer(&namesrv).await;
        send(&producer, to_rooms("after", &rooms[..10])).await.unwrap();
        let consumer = consumer(&producer, &rooms[..10]).await;
        // The group continues from its committed offsets: only the new message, at offset 3.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        while seen.len() < 10 {
            for m in consumer.poll(Duration::from_millis(500)).await {
                seen.push((
                    m.message_queue.topic.clone(),
                    m.queue_offset(),
                    String::from_utf8(m.body().to_vec()).unwrap(),
                ));
            }
            assert!(Instant::now() < deadline, "after the restart: {seen:?}");
        }
        seen.sort();
        let mut expected: Vec<_> = rooms[..10].iter().map(|r| (r.clone(), 3, "after".to_owned())).collect();
        expected.sort();
        assert_eq!(seen, expected);
        consumer.shutdown().await;
        producer.shutdown().await;
    });
}
