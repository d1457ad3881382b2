//! A static topic's mapping on one broker over real loopback TCP with a real name server:
//! UPDATE_AND_CREATE_STATIC_TOPIC and its refusals, GET_TOPIC_CONFIG with and without `lo`, the
//! route's mapping, sends to a logic queue that moved away, a physical send to a queue that
//! moved away (written to a queue this broker still leads), the mapping across a restart, and
//! its removal with the topic.

use std::time::Duration;

use ferromq_protocol::body::{
    JsonBody, LogicQueueMappingItem, TopicConfigAndQueueMapping, TopicQueueMappingDetail, TopicQueueMappingInfo,
};
use ferromq_protocol::header::{
    CreateTopicRequestHeader, DeleteTopicRequestHeader, GetTopicConfigRequestHeader, SendMessageResponseHeader,
};
use ferromq_protocol::{request_code, response_code, version, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{send_request, LocalCluster};

const T: Duration = Duration::from_secs(10);
const TOPIC: &str = "StaticOne";

fn create(detail: &TopicQueueMappingDetail, queues: i32, force: bool) -> RemotingCommand {
    RemotingCommand::request(request_code::UPDATE_AND_CREATE_STATIC_TOPIC)
        .with_header(&CreateTopicRequestHeader {
            topic: detail.topic.clone(),
            default_topic: "TBW102".into(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: 6,
            topic_filter_type: "SINGLE_TAG".into(),
            topic_sys_flag: Some(0),
            order: false,
            attributes: None,
            force: Some(force),
        })
        .with_body(detail.encode())
}

async fn call(client: &RemotingClient, addr: &str, req: RemotingCommand) -> RemotingCommand {
    client.invoke(addr, req, T).await.expect("answered")
}

fn topic_config(lo: Option<bool>) -> RemotingCommand {
    RemotingCommand::request(request_code::GET_TOPIC_CONFIG)
        .with_header(&GetTopicConfigRequestHeader { topic: TOPIC.into(), lo })
}

/// broker-a leads logic queue 0 on physical queue 0; logic queue 1 was on its physical
/// queue 1 and moved to broker-b.
fn mapping(epoch: i64) -> TopicQueueMappingDetail {
    let mut detail = TopicQueueMappingDetail::new(TOPIC, 2, "broker-a", epoch);
    detail.hosted_queues.insert(0, vec![LogicQueueMappingItem::new(0, 0, "broker-a", 0)]);
    detail.hosted_queues.insert(
        1,
        vec![LogicQueueMappingItem::new(0, 1, "broker-a", 0), LogicQueueMappingItem::new(1, 0, "broker-b", 10_000)],
    );
    detail
}

#[tokio::test]
async fn a_brokers_part_of_a_static_topic_is_fenced_stored_routed_and_honoured() {
    let mut cluster = LocalCluster::start(|_| {}).await;
    let client = RemotingClient::new(ClientConfig::default());

    // Refused: another broker's mapping, a physical queue past the write queues, garbage.
    let mut other = mapping(1_000);
    other.bname = "broker-x".into();
    assert_eq!(
        call(&client, &cluster.broker_addr, create(&other, 2, false)).await.code,
        response_code::INVALID_PARAMETER
    );
    assert_eq!(
        call(&client, &cluster.broker_addr, create(&mapping(1_000), 1, false)).await.code,
        response_code::INVALID_PARAMETER
    );
    let garbage = create(&mapping(1_000), 2, false).with_body(&b"{not json"[..]);
    assert_eq!(call(&client, &cluster.broker_addr, garbage).await.code, response_code::SYSTEM_ERROR);
    assert_eq!(
        call(&client, &cluster.broker_addr, topic_config(None)).await.code,
        response_code::TOPIC_NOT_EXIST,
        "nothing was stored"
    );

    let r = call(&client, &cluster.broker_addr, create(&mapping(1_000), 2, false)).await;
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    // Fenced: an older epoch, or the same generation on another physical queue.
    let r = call(&client, &cluster.broker_addr, create(&mapping(999), 2, false)).await;
    assert_eq!(
        (r.code, r.remark.as_deref()),
        (response_code::SYSTEM_ERROR, Some("Can't accept data with small epoch 999 < 1000"))
    );
    let mut moved = mapping(2_000);
    moved.hosted_queues.get_mut(&0).unwrap()[0].queue_id = 1;
    assert_eq!(call(&client, &cluster.broker_addr, create(&moved, 2, false)).await.code, response_code::SYSTEM_ERROR);

    // GET_TOPIC_CONFIG carries the mapping only with lo=true.
    let plain = TopicConfigAndQueueMapping::decode(&call(&client, &cluster.broker_addr, topic_config(None)).await.body)
        .unwrap();
    assert_eq!((plain.config.write_queue_nums, plain.mapping_detail), (2, None));
    let with =
        TopicConfigAndQueueMapping::decode(&call(&client, &cluster.broker_addr, topic_config(Some(true))).await.body)
            .unwrap();
    assert_eq!(with.mapping_detail, Some(mapping(1_000)));

    // The route carries the logic queue the broker leads.
    let route = cluster.wait_registered(TOPIC).await;
    let info: TopicQueueMappingInfo =
        serde_json::from_value(route.topic_queue_mapping_by_broker.unwrap()["broker-a"].clone()).unwrap();
    assert_eq!(info.curr_id_map, [(0, 0)].into());

    // Logic sends: queue 0 here, queue 1 led elsewhere.
    let r = call(&client, &cluster.broker_addr, send_request(TOPIC, 0, b"logic", &[])).await;
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!((r.code, h.queue_id, h.queue_offset), (response_code::SUCCESS, 0, 0));
    assert_eq!(
        call(&client, &cluster.broker_addr, send_request(TOPIC, 1, b"moved", &[])).await.code,
        response_code::NOT_LEADER_FOR_QUEUE
    );
    // A pre-5.0 client's physical send to queue 1 (which no longer leads anything) is
    // written to physical queue 0, which logic readers of queue 0 still read.
    let mut old = send_request(TOPIC, 1, b"physical", &[]);
    old.version = version::ordinal("V4_9_8").unwrap();
    let r = call(&client, &cluster.broker_addr, old).await;
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!((r.code, h.queue_id, h.queue_offset), (response_code::SUCCESS, 0, 1));

    // The mapping survives a restart (topicQueueMapping.json), and goes with the topic.
    cluster.restart_broker().await;
    let with =
        TopicConfigAndQueueMapping::decode(&call(&client, &cluster.broker_addr, topic_config(Some(true))).await.body)
            .unwrap();
    assert_eq!(with.mapping_detail, Some(mapping(1_000)));
    let delete = RemotingCommand::request(request_code::DELETE_TOPIC_IN_BROKER)
        .with_header(&DeleteTopicRequestHeader { topic: TOPIC.into() });
    assert_eq!(call(&client, &cluster.broker_addr, delete).await.code, response_code::SUCCESS);
    cluster.restart_broker().await;
    let file = cluster.dir().join("store/config/topicQueueMapping.json");
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(!text.contains(TOPIC), "{}: {text}", file.display());
    client.shutdown().await;
    cluster.stop().await;
}
