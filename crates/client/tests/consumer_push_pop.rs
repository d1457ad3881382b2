//! The push consumer in POP mode (`client_rebalance: false`): the broker assigns the queues
//! (QUERY_ASSIGNMENT under the group's POP mode), the consumer pops, acknowledges what its
//! listener consumed and makes failed messages visible again, which come back with their
//! reconsume times counted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_client::{
    ClientConfig, ConsumeStatus, Message, Producer, ProducerConfig, PushConsumer, PushConsumerConfig,
};
use ferromq_protocol::body::{JsonBody, MessageRequestMode, SetMessageRequestModeRequestBody, SubscriptionGroupConfig};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::RemotingClient;
use ferromq_testkit::LocalCluster;
use tokio::time::Instant;

const T: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_assigns_pop_queues_and_failed_messages_come_back() {
    let c = LocalCluster::start(|s| {
        s.store.timer_precision_ms = 100;
        s.broker.revive_interval = 100;
    })
    .await;
    let p = Producer::new(
        ProducerConfig { group: "pg_pushpop".into(), ..ProducerConfig::default() },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    p.start().await.unwrap();
    for i in 0..40 {
        p.send(Message::new("PushPopT", format!("m{i}").into_bytes())).await.unwrap();
    }
    p.shutdown().await;
    c.wait_registered("PushPopT").await;

    let admin = RemotingClient::new(ferromq_remoting::ClientConfig::default());
    let group = SubscriptionGroupConfig { group_name: "PushPopG".into(), ..SubscriptionGroupConfig::default() };
    let r = admin
        .invoke(
            &c.broker_addr,
            RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(group.encode()),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    let mode = SetMessageRequestModeRequestBody {
        consumer_group: "PushPopG".into(),
        mode: MessageRequestMode::Pop,
        pop_share_queue_num: 0,
        topic: "PushPopT".into(),
    };
    let r = admin
        .invoke(
            &c.broker_addr,
            RemotingCommand::request(request_code::SET_MESSAGE_REQUEST_MODE).with_body(mode.encode()),
            T,
        )
        .await
        .unwrap();
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);

    let consumer = PushConsumer::new(
        PushConsumerConfig {
            group: "PushPopG".into(),
            client_rebalance: false,
            rebalance_interval: Duration::from_millis(500),
            pop_invisible_time: Duration::from_secs(30),
            pop_retry_delay_max: Duration::from_millis(500),
            consume_from_where: ferromq_client::ConsumeFromWhere::ConsumeFromFirstOffset,
            ..PushConsumerConfig::default()
        },
        ClientConfig::with_namesrv(&c.ns_addr),
    );
    consumer.subscribe("PushPopT", "*").await.unwrap();
    // Every fifth message fails on its first delivery.
    let seen: Arc<Mutex<BTreeMap<String, Vec<i32>>>> = Arc::default();
    let s = seen.clone();
    consumer.register_listener(move |msgs| {
        let mut seen = s.lock().unwrap();
        let mut status = ConsumeStatus::ConsumeSuccess;
        for m in msgs {
            let text = String::from_utf8(m.body().to_vec()).unwrap();
            let n: usize = text[1..].parse().unwrap();
            let times = seen.entry(text).or_default();
            times.push(m.stored.reconsume_times);
            if n.is_multiple_of(5) && times.len() == 1 {
                status = ConsumeStatus::ReconsumeLater;
            }
        }
        status
    });
    consumer.start().await.unwrap();
    let started = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let done = {
            let seen = seen.lock().unwrap();
            seen.len() == 40
                && seen.iter().all(|(t, times)| {
                    times.len() == if t[1..].parse::<usize>().unwrap().is_multiple_of(5) { 2 } else { 1 }
                })
        };
        if done {
            println!("all consumed {:?} after start", Instant::now() - started);
            break;
        }
        assert!(Instant::now() < deadline, "not every message consumed: {:?}", seen.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let assignment = consumer.assignment();
    assert!(assignment.iter().any(|mq| mq.topic == "PushPopT" && mq.queue_id == -1), "{assignment:?}");
    for (text, times) in seen.lock().unwrap().iter() {
        if text[1..].parse::<usize>().unwrap().is_multiple_of(5) {
            assert_eq!(times, &vec![0, 1], "{text}: failed once, then redelivered with reconsume times 1");
        }
    }
    // Nothing more comes: consumed messages were acknowledged.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let total: usize = seen.lock().unwrap().values().map(Vec::len).sum();
    assert_eq!(total, 48);
    consumer.shutdown().await;
    c.stop().await;
}
