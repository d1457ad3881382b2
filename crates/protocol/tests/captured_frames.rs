//! Frames captured from the official RocketMQ C++ client (compat/captured/) decode into the
//! commands, headers and bodies they carry. These are real peer bytes, not our own encoder's.

use bytes::BytesMut;
use ferromq_protocol::body::{ConsumeType, HeartbeatData, JsonBody, MessageModel};
use ferromq_protocol::header::{
    GetRouteInfoRequestHeader, PullMessageRequestHeader, QueryConsumerOffsetRequestHeader, SendMessageRequestHeader,
    UnregisterClientRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use ferromq_protocol::message::MessageProperties;
use ferromq_protocol::{decode_frame, request_code, LanguageCode, RemotingCommand, MAX_FRAME_BYTES};

fn captured(name: &str) -> RemotingCommand {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../compat/captured").join(name);
    let hex = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let hex = hex.trim();
    let bytes: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    let mut buf = BytesMut::from(&bytes[..]);
    let cmd = decode_frame(&mut buf, MAX_FRAME_BYTES).unwrap().expect("a whole frame");
    assert!(buf.is_empty(), "{name}: one frame per file");
    assert_eq!(cmd.language, LanguageCode::Cpp);
    assert_eq!(cmd.version, 63, "the C++ client reports V3_1_8");
    assert!(!cmd.is_response() && !cmd.is_oneway());
    cmd
}

#[test]
fn route_query_carries_the_topic() {
    let cmd = captured("cpp-get-route-request.hex");
    assert_eq!(cmd.code, request_code::GET_ROUTEINFO_BY_TOPIC);
    let h: GetRouteInfoRequestHeader = cmd.decode_header().unwrap();
    assert_eq!(h.topic, "CompatTopic");
    // The ACL fields every C++ request carries are kept, not rejected.
    assert_eq!(cmd.ext("OnsChannel"), Some("ALIYUN"));
}

#[test]
fn send_uses_long_keys_with_numbers_and_zero_one_booleans() {
    let cmd = captured("cpp-send-message-request.hex");
    assert_eq!(cmd.code, request_code::SEND_MESSAGE);
    let h = SendMessageRequestHeader::decode_for(cmd.code, &cmd.ext_fields).unwrap();
    assert_eq!(
        (h.topic.as_str(), h.producer_group.as_str(), h.default_topic.as_str()),
        ("CompatTopic", "CompatGroup", "TBW102")
    );
    assert_eq!(h.default_topic_queue_nums, 4);
    // "batch":"0" is Java's Boolean.parseBoolean("0") == false.
    assert_eq!(h.batch, Some(false));
    let props = MessageProperties::decode(h.properties.as_deref().unwrap());
    assert_eq!(props.get("KEYS"), Some("k1"));
    assert_eq!(props.get("TAGS"), Some("TagA"));
    assert!(props.get("UNIQ_KEY").is_some());
    assert_eq!(&cmd.body[..], b"hello-ferromq");
}

#[test]
fn consumer_heartbeat_body_with_numeric_enums_parses() {
    let cmd = captured("cpp-heartbeat-request.hex");
    assert_eq!(cmd.code, request_code::HEART_BEAT);
    let hb = HeartbeatData::decode(&cmd.body).unwrap();
    let consumer = &hb.consumer_data_set[0];
    assert_eq!(consumer.group_name, "CompatConsumerGroup");
    assert_eq!(consumer.consume_type, ConsumeType::ConsumePassively);
    assert_eq!(consumer.message_model, MessageModel::Clustering);
    let sub = consumer.subscription_data_set.iter().find(|s| s.topic == "CompatTopic").unwrap();
    assert_eq!(sub.sub_string, "TagA || TagB");
    assert!(sub.tags_set.contains("TagA") && sub.tags_set.contains("TagB"));
    assert!(sub.sub_version > 0);
}

#[test]
fn producer_heartbeat_body_parses() {
    let cmd = captured("cpp-heartbeat-producer-request.hex");
    let hb = HeartbeatData::decode(&cmd.body).unwrap();
    assert!(hb.producer_data_set.iter().any(|p| p.group_name == "CompatGroup"));
    assert!(hb.consumer_data_set.is_empty());
}

#[test]
fn pull_offset_and_unregister_headers_decode() {
    let pull = captured("cpp-pull-message-request.hex");
    assert_eq!(pull.code, request_code::PULL_MESSAGE);
    let h: PullMessageRequestHeader = pull.decode_header().unwrap();
    assert_eq!((h.topic.as_str(), h.queue_id, h.max_msg_nums, h.sys_flag), ("CompatTopic", 0, 32, 6));
    assert_eq!(h.suspend_timeout_millis, 15_000);
    assert_eq!(h.subscription.as_deref(), Some("TagA || TagB"));

    let q = captured("cpp-query-consumer-offset-request.hex");
    let h: QueryConsumerOffsetRequestHeader = q.decode_header().unwrap();
    assert_eq!(h.consumer_group, "CompatConsumerGroup");

    let u = captured("cpp-update-consumer-offset-request.hex");
    let h: UpdateConsumerOffsetRequestHeader = u.decode_header().unwrap();
    assert_eq!(h.topic, "CompatTopic");

    for name in ["cpp-unregister-client-producer-request.hex", "cpp-unregister-client-consumer-request.hex"] {
        let cmd = captured(name);
        assert_eq!(cmd.code, request_code::UNREGISTER_CLIENT);
        let h: UnregisterClientRequestHeader = cmd.decode_header().unwrap();
        assert!(h.client_id.contains("@"), "{}", h.client_id);
    }

    let list = captured("cpp-get-consumer-list-request.hex");
    assert_eq!(list.code, request_code::GET_CONSUMER_LIST_BY_GROUP);
    let retry_route = captured("cpp-get-route-retry-topic-request.hex");
    assert_eq!(retry_route.decode_header::<GetRouteInfoRequestHeader>().unwrap().topic, "%RETRY%CompatConsumerGroup");
}
