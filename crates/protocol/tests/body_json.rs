//! Golden and property tests for the JSON bodies, fastjson's dialect, the compressed
//! RegisterBrokerBody stream, the TopicConfig text form and `.properties` text, all through
//! the crate's public API.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use flate2::write::ZlibEncoder;
use flate2::Compression;
use proptest::prelude::*;
use serde_json::{json, Value};

use ferromq_protocol::body::{
    BodyError, BrokerData, ClusterInfo, ConsumeFromWhere, ConsumeType, ConsumerData, DataVersion, HeartbeatData,
    JsonBody, KVTable, LockBatchRequestBody, MessageModel, ProducerData, QueueData, RegisterBrokerBody,
    SubscriptionData, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType, TopicList, TopicRouteData,
    MAX_INFLATED_REGISTER_BODY_BYTES,
};
use ferromq_protocol::json::{parse_lenient, quote_bare_integer_keys, to_fastjson_string};
use ferromq_protocol::properties_text;
use ferromq_protocol::version::{V4_9_4, V5_0_0};

/// The TopicRouteData example of the fact sheet (section 2.6), verbatim.
const FACT_SHEET_ROUTE: &str = r#"
{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},
                 "brokerName":"broker-a","cluster":"DefaultCluster",
                 "enableActingMaster":false,"zoneName":null}],
 "filterServerTable":{},
 "orderTopicConf":null,
 "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,
                "topicSysFlag":0,"writeQueueNums":4}],
 "topicQueueMappingByBroker":null}
"#;

/// The HeartbeatData example of the fact sheet (section 2.8), with its `//` comment removed
/// and the elided `codeSet` filled with the Java hash codes of the two tags.
const FACT_SHEET_HEARTBEAT: &str = r#"
{"clientID":"10.0.0.5@12345#987654321",
 "consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",
                     "consumeType":"CONSUME_PASSIVELY","groupName":"g1",
                     "messageModel":"CLUSTERING","unitMode":false,
                     "subscriptionDataSet":[{"classFilterMode":false,"codeSet":[3552231,3552232],
                        "expressionType":"TAG","subString":"tagA || tagB",
                        "subVersion":1700000000000,"tagsSet":["tagA","tagB"],
                        "topic":"T1"}]}],
 "heartbeatFingerprint":0,
 "producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"},{"groupName":"p1"}],
 "withoutSub":false}
"#;

fn fact_sheet_route_value() -> TopicRouteData {
    TopicRouteData {
        broker_datas: vec![BrokerData::new(
            "DefaultCluster",
            "broker-a",
            BTreeMap::from([(0, "10.0.0.1:10911".to_owned()), (1, "10.0.0.2:10911".to_owned())]),
        )],
        queue_datas: vec![QueueData {
            broker_name: "broker-a".into(),
            perm: 6,
            read_queue_nums: 4,
            topic_sys_flag: 0,
            write_queue_nums: 4,
        }],
        ..TopicRouteData::default()
    }
}

#[test]
fn fact_sheet_route_data_parses() {
    let route = TopicRouteData::decode(FACT_SHEET_ROUTE.as_bytes()).unwrap();
    assert_eq!(route, fact_sheet_route_value());
    assert_eq!(route.broker_datas[0].select_broker_addr(), Some("10.0.0.1:10911"));
}

#[test]
fn fact_sheet_route_data_parses_with_fastjson_unquoted_keys() {
    let fastjson = FACT_SHEET_ROUTE.replace(r#""0":"10"#, r#"0:"10"#).replace(r#""1":"10"#, r#"1:"10"#);
    assert!(fastjson.contains(r#"{0:"10.0.0.1:10911",1:"#));
    let route = TopicRouteData::decode(fastjson.as_bytes()).unwrap();
    assert_eq!(route, fact_sheet_route_value());
}

#[test]
fn fact_sheet_heartbeat_parses() {
    let heartbeat = HeartbeatData::decode(FACT_SHEET_HEARTBEAT.as_bytes()).unwrap();
    assert_eq!(heartbeat.client_id, "10.0.0.5@12345#987654321");
    assert_eq!(heartbeat.heartbeat_fingerprint, 0);
    assert!(!heartbeat.without_sub);
    let producers: Vec<&str> = heartbeat.producer_data_set.iter().map(|p| p.group_name.as_str()).collect();
    assert_eq!(producers, ["CLIENT_INNER_PRODUCER", "p1"]);

    let consumer = &heartbeat.consumer_data_set[0];
    assert_eq!(consumer.group_name, "g1");
    assert_eq!(consumer.consume_from_where, ConsumeFromWhere::ConsumeFromLastOffset);
    assert_eq!(consumer.consume_type, ConsumeType::ConsumePassively);
    assert_eq!(consumer.message_model, MessageModel::Clustering);
    assert!(!consumer.unit_mode);

    let subscription = &consumer.subscription_data_set[0];
    assert_eq!(subscription.topic, "T1");
    assert_eq!(subscription.sub_string, "tagA || tagB");
    assert_eq!(subscription.sub_version, 1_700_000_000_000);
    assert_eq!(subscription.expression_type, "TAG");
    assert_eq!(subscription.code_set, BTreeSet::from([3_552_231, 3_552_232]));
    assert_eq!(subscription.tags_set, BTreeSet::from(["tagA".to_owned(), "tagB".to_owned()]));
}

#[test]
fn heartbeat_encodes_like_fastjson() {
    let heartbeat = HeartbeatData::decode(FACT_SHEET_HEARTBEAT.as_bytes()).unwrap();
    let expected = concat!(
        r#"{"clientID":"10.0.0.5@12345#987654321","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","#,
        r#""consumeType":"CONSUME_PASSIVELY","groupName":"g1","messageModel":"CLUSTERING","subscriptionDataSet":["#,
        r#"{"classFilterMode":false,"codeSet":[3552231,3552232],"expressionType":"TAG","subString":"tagA || tagB","#,
        r#""subVersion":1700000000000,"tagsSet":["tagA","tagB"],"topic":"T1"}],"unitMode":false}],"#,
        r#""heartbeatFingerprint":0,"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"},{"groupName":"p1"}],"#,
        r#""withoutSub":false}"#
    );
    assert_eq!(String::from_utf8(heartbeat.encode()).unwrap(), expected);
}

#[test]
fn route_data_standard_and_fastjson_encodings() {
    let mut route = fact_sheet_route_value();
    route.broker_datas[0].broker_addrs.insert(10, "10.0.0.3:10911".into());
    let standard = concat!(
        r#"{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911","10":"10.0.0.3:10911"},"#,
        r#""brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"#,
        r#""filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"#,
        r#""topicSysFlag":0,"writeQueueNums":4}]}"#
    );
    let fastjson = concat!(
        r#"{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911",10:"10.0.0.3:10911"},"#,
        r#""brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"#,
        r#""filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"#,
        r#""topicSysFlag":0,"writeQueueNums":4}]}"#
    );
    assert_eq!(String::from_utf8(route.to_json_bytes(true)).unwrap(), standard);
    assert_eq!(String::from_utf8(route.to_json_bytes(false)).unwrap(), fastjson);
    assert_eq!(TopicRouteData::decode(fastjson.as_bytes()).unwrap(), route);
}

#[test]
fn route_data_with_optional_fields_in_both_styles() {
    let mut route = fact_sheet_route_value();
    route.order_topic_conf = Some("broker-a:4".into());
    route.broker_datas[0].zone_name = Some("zone-1".into());
    route.filter_server_table.insert("10.0.0.1:10911".into(), vec!["10.0.0.1:30000".into()]);
    route.topic_queue_mapping_by_broker =
        Some(BTreeMap::from([("broker-a".to_owned(), json!({"currIdMap": {"0": 0, "1": 1}, "topic": "T"}))]));
    let fastjson = String::from_utf8(route.to_json_bytes(false)).unwrap();
    assert!(fastjson.contains(r#""zoneName":"zone-1""#));
    assert!(fastjson.contains(r#""orderTopicConf":"broker-a:4""#));
    assert!(fastjson.contains(r#""currIdMap":{0:0,1:1}"#));
    assert!(fastjson.contains(r#""filterServerTable":{"10.0.0.1:10911":["10.0.0.1:30000"]}"#));
    assert_eq!(TopicRouteData::decode(fastjson.as_bytes()).unwrap(), route);
    assert_eq!(TopicRouteData::decode(&route.to_json_bytes(true)).unwrap(), route);
}

#[test]
fn topics_json_file_with_fastjson_dialect_loads() {
    let file = r#"{
	"dataVersion":{
		"counter":3,
		"stateVersion":0,
		"timestamp":1700000000123
	},
	"topicConfigTable":{
		"TopicTest":{
			"attributes":{},
			"order":false,
			"perm":6,
			"readQueueNums":4,
			"topicFilterType":"SINGLE_TAG",
			"topicName":"TopicTest",
			"topicSysFlag":0,
			"writeQueueNums":4
		}
	}
}"#;
    let wrapper = TopicConfigSerializeWrapper::decode(file.as_bytes()).unwrap();
    assert_eq!(wrapper.data_version.counter, 3);
    assert_eq!(wrapper.topic_config_table["TopicTest"], TopicConfig::new("TopicTest", 4, 4));
}

#[test]
fn cluster_info_and_small_bodies_decode() {
    let info = ClusterInfo::decode(
        br#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"a:1",1:"b:1"},"brokerName":"broker-a","cluster":"C"}},"clusterAddrTable":{"C":["broker-a"]}}"#,
    )
    .unwrap();
    assert_eq!(info.addrs_in_cluster("C"), vec!["a:1", "b:1"]);
    let list = TopicList::decode(br#"{"brokerAddr":"a:1","topicList":["T2","T1"]}"#).unwrap();
    assert_eq!(list.broker_addr.as_deref(), Some("a:1"));
    assert_eq!(list.topic_list.iter().next().map(String::as_str), Some("T1"));
    let table = KVTable::decode(br#"{"table":{"k":"v"},"extra":[1,2]}"#).unwrap();
    assert_eq!(table.table["k"], "v");
    let lock = LockBatchRequestBody::decode(
        br#"{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"T","brokerName":"b","queueId":"3"}]}"#,
    )
    .unwrap();
    assert_eq!(lock.mq_set.iter().next().map(|q| q.queue_id), Some(3));
    assert!(!lock.only_this_broker);
}

// ---------------------------------------------------------------------------------------
// TopicConfig text form

#[test]
fn topic_config_text_golden_strings() {
    let plain = TopicConfig::new("TopicTest", 4, 4);
    assert_eq!(plain.encode_text(), "TopicTest 4 4 6 SINGLE_TAG");

    let mut read_only = TopicConfig::new("%RETRY%group", 1, 1);
    read_only.perm = 4;
    read_only.topic_filter_type = TopicFilterType::MultiTag;
    assert_eq!(read_only.encode_text(), "%RETRY%group 1 1 4 MULTI_TAG");

    let mut fifo = TopicConfig::new("Orders", 8, 8);
    fifo.attributes.insert("message.type".into(), "FIFO".into());
    assert_eq!(fifo.encode_text(), r#"Orders 8 8 6 SINGLE_TAG {"message.type":"FIFO"}"#);

    for (text, expected) in [
        ("TopicTest 4 4 6 SINGLE_TAG", &plain),
        ("TopicTest 4 4 6 SINGLE_TAG {}", &plain),
        ("TopicTest 4 4 6 SINGLE_TAG ", &plain),
        ("%RETRY%group 1 1 4 MULTI_TAG", &read_only),
        (r#"Orders 8 8 6 SINGLE_TAG {"message.type":"FIFO"}"#, &fifo),
    ] {
        assert_eq!(&TopicConfig::decode_text(text).unwrap(), expected, "{text:?}");
    }
}

#[test]
fn topic_config_text_ignores_unparseable_attributes_like_java() {
    // An attribute value with a space splits the JSON; Java drops the attributes then.
    let config = TopicConfig::decode_text(r#"T 1 1 6 SINGLE_TAG {"k":"a b"}"#).unwrap();
    assert!(config.attributes.is_empty());
    assert_eq!(config.topic_name, "T");
}

#[test]
fn topic_config_text_errors() {
    assert!(matches!(TopicConfig::decode_text(""), Err(BodyError::TopicConfigFields { fields: 0, .. })));
    assert!(matches!(
        TopicConfig::decode_text("T  4 4 6 SINGLE_TAG"),
        Err(BodyError::TopicConfigNumber { field: "readQueueNums", .. })
    ));
    assert!(matches!(TopicConfig::decode_text("T 4 4 6 TAG"), Err(BodyError::UnknownTopicFilterType { .. })));
}

// ---------------------------------------------------------------------------------------
// RegisterBrokerBody

fn sample_register_body() -> RegisterBrokerBody {
    let mut body = RegisterBrokerBody::default();
    let wrapper = &mut body.topic_config_serialize_wrapper;
    wrapper.data_version = DataVersion { counter: 42, state_version: 0, timestamp: 1_700_000_000_000 };
    for (name, queues) in [("TopicTest", 4), ("SELF_TEST_TOPIC", 1), ("BenchmarkTest", 1024)] {
        wrapper.topic_config_table.insert(name.into(), TopicConfig::new(name, queues, queues));
    }
    let mut fifo = TopicConfig::new("Orders", 8, 8);
    fifo.attributes.insert("message.type".into(), "FIFO".into());
    wrapper.topic_config_table.insert("Orders".into(), fifo);
    wrapper.topic_queue_mapping_info_map.insert(
        "Static".into(),
        json!({"bname":"broker-a","currIdMap":{"0":0},"epoch":3,"topic":"Static","totalQueues":1}),
    );
    body
}

#[test]
fn register_body_compressed_round_trip() {
    let body = sample_register_body();
    let compressed = body.encode(true, V5_0_0);
    assert_eq!(compressed[0], 0x78, "zlib header");
    assert!(compressed.len() < body.encode(false, V5_0_0).len());
    assert_eq!(RegisterBrokerBody::decode(&compressed, true, V5_0_0).unwrap(), body);
}

#[test]
fn register_body_uncompressed_round_trip() {
    let body = sample_register_body();
    let json = body.encode(false, V5_0_0);
    assert_eq!(RegisterBrokerBody::decode(&json, false, V5_0_0).unwrap(), body);
}

fn put_int(stream: &mut ZlibEncoder<Vec<u8>>, value: i32) {
    stream.write_all(&value.to_be_bytes()).unwrap();
}

fn put_chunk(stream: &mut ZlibEncoder<Vec<u8>>, bytes: &[u8]) {
    put_int(stream, i32::try_from(bytes.len()).unwrap());
    stream.write_all(bytes).unwrap();
}

/// A stream laid out field by field as a Java 5.x broker writes it: text forms with the
/// trailing `{}`, fastjson's unquoted keys in the mapping, HashMap topic order.
fn java_style_stream() -> Vec<u8> {
    let mut stream = ZlibEncoder::new(Vec::new(), Compression::best());
    put_chunk(&mut stream, br#"{"counter":5,"stateVersion":0,"timestamp":1700000000000}"#);
    put_int(&mut stream, 2);
    put_chunk(&mut stream, b"TopicTest 4 4 6 SINGLE_TAG {}");
    put_chunk(&mut stream, br#"%RETRY%g1 1 1 6 SINGLE_TAG {"message.type":"NORMAL"}"#);
    put_chunk(&mut stream, br#"["10.0.0.1:30000"]"#);
    put_int(&mut stream, 1);
    put_chunk(
        &mut stream,
        br#"{"bname":"broker-a","currIdMap":{0:0},"dirty":false,"epoch":0,"scope":"__global__","topic":"TopicTest","totalQueues":4}"#,
    );
    stream.finish().unwrap()
}

#[test]
fn register_body_hand_built_stream_decodes() {
    let body = RegisterBrokerBody::decode(&java_style_stream(), true, V5_0_0).unwrap();
    let wrapper = &body.topic_config_serialize_wrapper;
    assert_eq!(wrapper.data_version, DataVersion { counter: 5, state_version: 0, timestamp: 1_700_000_000_000 });
    assert_eq!(wrapper.topic_config_table.len(), 2);
    assert_eq!(wrapper.topic_config_table["TopicTest"], TopicConfig::new("TopicTest", 4, 4));
    assert_eq!(wrapper.topic_config_table["%RETRY%g1"].attributes["message.type"], "NORMAL");
    assert_eq!(body.filter_server_list, ["10.0.0.1:30000"]);
    let mapping = &wrapper.topic_queue_mapping_info_map["TopicTest"];
    assert_eq!(mapping["currIdMap"]["0"], 0);
    assert_eq!(mapping["bname"], "broker-a");
}

#[test]
fn register_body_hand_built_stream_read_as_4x_skips_mappings() {
    let body = RegisterBrokerBody::decode(&java_style_stream(), true, V4_9_4).unwrap();
    assert_eq!(body.topic_config_serialize_wrapper.topic_config_table.len(), 2);
    assert!(body.topic_config_serialize_wrapper.topic_queue_mapping_info_map.is_empty());
}

#[test]
fn register_body_bad_filter_server_list_reads_as_empty() {
    let mut stream = ZlibEncoder::new(Vec::new(), Compression::fast());
    put_chunk(&mut stream, b"{}");
    put_int(&mut stream, 0);
    put_chunk(&mut stream, b"not json");
    let bytes = stream.finish().unwrap();
    let body = RegisterBrokerBody::decode(&bytes, true, V4_9_4).unwrap();
    assert!(body.filter_server_list.is_empty());
}

/// A zlib stream of `1 + 258 * matches` zero bytes, written by hand as one fixed-Huffman
/// deflate block: a literal 0, then `matches` copies of (length 258, distance 1). Building it
/// directly takes milliseconds where compressing the zeros would take seconds.
fn zeros_zlib_stream(matches: usize) -> Vec<u8> {
    struct Bits {
        out: Vec<u8>,
        acc: u64,
        count: u32,
    }
    impl Bits {
        fn put(&mut self, value: u64, count: u32) {
            self.acc |= value << self.count;
            self.count += count;
            while self.count >= 8 {
                self.out.push(self.acc.to_le_bytes()[0]);
                self.acc >>= 8;
                self.count -= 8;
            }
        }
        /// Huffman codes go most-significant bit first.
        fn put_code(&mut self, code: u32, len: u32) {
            self.put(u64::from(code.reverse_bits() >> (32 - len)), len);
        }
    }
    let mut bits = Bits { out: vec![0x78, 0x01], acc: 0, count: 0 };
    bits.put(1, 1); // BFINAL
    bits.put(1, 2); // BTYPE = fixed Huffman
    bits.put_code(0x30, 8); // literal 0
    for _ in 0..matches {
        bits.put_code(0xC5, 8); // length symbol 285 = 258 bytes
        bits.put_code(0, 5); // distance symbol 0 = 1 byte back
    }
    bits.put_code(0, 7); // end of block
    if bits.count > 0 {
        bits.put(0, 8 - bits.count); // pad to a byte boundary
    }
    let total = 1 + 258 * matches as u64;
    let adler = ((total % 65_521) << 16) | 1;
    bits.out.extend_from_slice(&u32::try_from(adler).unwrap().to_be_bytes());
    bits.out
}

#[test]
fn hand_built_zeros_stream_is_valid_zlib() {
    use std::io::Read;
    let mut inflated = Vec::new();
    flate2::read::ZlibDecoder::new(&zeros_zlib_stream(10)[..]).read_to_end(&mut inflated).unwrap();
    assert_eq!(inflated, vec![0_u8; 1 + 2580]);
}

#[test]
fn register_body_zip_bomb_is_rejected() {
    // About 200 MiB of zeros in about 1.3 MB of zlib.
    let bomb = zeros_zlib_stream(200 * 1024 * 1024 / 258);
    assert!(bomb.len() < 2 * 1024 * 1024);
    match RegisterBrokerBody::decode(&bomb, true, V5_0_0) {
        Err(BodyError::InflatedTooLarge { limit_bytes }) => {
            assert_eq!(limit_bytes, MAX_INFLATED_REGISTER_BODY_BYTES);
        }
        other => panic!("zip bomb not rejected: {other:?}"),
    }
}

#[test]
fn compressed_zeros_over_the_limit_are_rejected() {
    // The same through flate2's own encoder, kept small: 4 KiB against a 4095-byte bound.
    let mut stream = ZlibEncoder::new(Vec::new(), Compression::fast());
    stream.write_all(&[0_u8; 4096]).unwrap();
    let bytes = stream.finish().unwrap();
    assert!(matches!(
        RegisterBrokerBody::decode_with_limit(&bytes, true, V5_0_0, 4095),
        Err(BodyError::InflatedTooLarge { limit_bytes: 4095 })
    ));
}

// ---------------------------------------------------------------------------------------
// Properties text

#[test]
fn properties_text_namesrv_config_body() {
    let body = "#Mon Jan 01 00:00:00 CST 2024\nlistenPort=9876\n  rocketmqHome = /opt/rocketmq\n\
                kvConfigPath:/root/namesrv/kvConfig.json\norderMessageEnable false\nempty=\n";
    let map = properties_text::parse_map(body).unwrap();
    assert_eq!(map["listenPort"], "9876");
    assert_eq!(map["rocketmqHome"], "/opt/rocketmq");
    assert_eq!(map["kvConfigPath"], "/root/namesrv/kvConfig.json");
    assert_eq!(map["orderMessageEnable"], "false");
    assert_eq!(map["empty"], "");
    assert_eq!(map.len(), 5);
}

#[test]
fn properties_text_writes_java_lines() {
    let text = properties_text::to_text([("brokerName", "broker-a"), ("storePathRootDir", "C:\\store")]);
    assert_eq!(text, "brokerName=broker-a\nstorePathRootDir=C:\\\\store\n");
    assert_eq!(
        properties_text::parse(&text).unwrap(),
        vec![("brokerName".to_owned(), "broker-a".to_owned()), ("storePathRootDir".to_owned(), "C:\\store".to_owned())]
    );
}

#[test]
fn properties_text_bad_escape_is_an_error() {
    assert!(matches!(properties_text::parse("ok=1\nbad=\\uZZZZ"), Err(BodyError::PropertiesUnicodeEscape { line: 2 })));
}

// ---------------------------------------------------------------------------------------
// Property tests

fn name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_%@.:-]{0,12}"
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![name(), "\\PC{0,10}", any::<String>()]
}

fn broker_data() -> impl Strategy<Value = BrokerData> {
    (
        prop::collection::btree_map(any::<i64>(), name(), 0..4),
        name(),
        name(),
        any::<bool>(),
        prop::option::of(any_text()),
    )
        .prop_map(|(broker_addrs, broker_name, cluster, enable_acting_master, zone_name)| BrokerData {
            broker_addrs,
            broker_name,
            cluster,
            enable_acting_master,
            zone_name,
        })
}

fn queue_data() -> impl Strategy<Value = QueueData> {
    (name(), any::<i32>(), any::<i32>(), any::<i32>(), any::<i32>()).prop_map(
        |(broker_name, perm, read_queue_nums, topic_sys_flag, write_queue_nums)| QueueData {
            broker_name,
            perm,
            read_queue_nums,
            topic_sys_flag,
            write_queue_nums,
        },
    )
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any_text().prop_map(Value::from),
    ]
}

fn json_tree() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(any::<i32>().prop_map(|k| k.to_string()), inner.clone(), 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            prop::collection::btree_map(any_text(), inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn topic_route_data() -> impl Strategy<Value = TopicRouteData> {
    (
        prop::collection::vec(broker_data(), 0..3),
        prop::collection::btree_map(name(), prop::collection::vec(name(), 0..3), 0..3),
        prop::option::of(any_text()),
        prop::collection::vec(queue_data(), 0..3),
        prop::option::of(prop::collection::btree_map(name(), json_tree(), 0..3)),
    )
        .prop_map(|(broker_datas, filter_server_table, order_topic_conf, queue_datas, mappings)| TopicRouteData {
            broker_datas,
            filter_server_table,
            order_topic_conf,
            queue_datas,
            topic_queue_mapping_by_broker: mappings,
        })
}

fn topic_config() -> impl Strategy<Value = TopicConfig> {
    (
        prop::collection::btree_map(any_text(), any_text(), 0..3),
        any::<bool>(),
        any::<i32>(),
        any::<i32>(),
        prop::sample::select(TopicFilterType::ALL),
        any_text(),
        any::<i32>(),
        any::<i32>(),
    )
        .prop_map(|(attributes, order, perm, read, filter, topic_name, sys_flag, write)| TopicConfig {
            attributes,
            order,
            perm,
            read_queue_nums: read,
            topic_filter_type: filter,
            topic_name,
            topic_sys_flag: sys_flag,
            write_queue_nums: write,
        })
}

fn subscription_data() -> impl Strategy<Value = SubscriptionData> {
    (
        any::<bool>(),
        prop::collection::btree_set(any::<i32>(), 0..4),
        prop_oneof![Just("TAG".to_owned()), Just("SQL92".to_owned())],
        any_text(),
        any::<i64>(),
        prop::collection::btree_set(any_text(), 0..4),
        name(),
    )
        .prop_map(|(class_filter_mode, code_set, expression_type, sub_string, sub_version, tags_set, topic)| {
            SubscriptionData {
                class_filter_mode,
                code_set,
                expression_type,
                filter_class_source: None,
                sub_string,
                sub_version,
                tags_set,
                topic,
            }
        })
}

fn heartbeat_data() -> impl Strategy<Value = HeartbeatData> {
    let consumer = (
        prop::sample::select(ConsumeFromWhere::ALL),
        prop::sample::select(ConsumeType::ALL),
        name(),
        prop::sample::select(MessageModel::ALL),
        prop::collection::vec(subscription_data(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(from, kind, group_name, model, subscriptions, unit_mode)| ConsumerData {
            consume_from_where: from,
            consume_type: kind,
            group_name,
            message_model: model,
            subscription_data_set: subscriptions,
            unit_mode,
        });
    (
        any_text(),
        prop::collection::vec(consumer, 0..3),
        any::<i32>(),
        prop::collection::vec(name().prop_map(|group_name| ProducerData { group_name }), 0..3),
        any::<bool>(),
    )
        .prop_map(|(client_id, consumers, fingerprint, producers, without_sub)| HeartbeatData {
            client_id,
            consumer_data_set: consumers,
            heartbeat_fingerprint: fingerprint,
            producer_data_set: producers,
            without_sub,
        })
}

/// Text made mostly of JSON punctuation, to reach the key rewriter's corner cases.
fn jsonish() -> impl Strategy<Value = String> {
    "[{}\\[\\],:\"\\\\0-9a -]{0,64}"
}

proptest! {
    #[test]
    fn topic_route_data_round_trips_in_both_styles(route in topic_route_data()) {
        prop_assert_eq!(&TopicRouteData::decode(&route.to_json_bytes(true)).unwrap(), &route);
        prop_assert_eq!(&TopicRouteData::decode(&route.to_json_bytes(false)).unwrap(), &route);
    }

    #[test]
    fn topic_config_round_trips(config in topic_config()) {
        prop_assert_eq!(&TopicConfig::decode(&config.encode()).unwrap(), &config);
        prop_assert_eq!(&TopicConfig::decode(&config.encode_fastjson()).unwrap(), &config);
    }

    #[test]
    fn topic_config_text_round_trips_for_valid_names(
        topic_name in "[A-Za-z0-9_%|-]{1,16}",
        read in any::<i32>(),
        write in any::<i32>(),
        perm in any::<i32>(),
        filter in prop::sample::select(TopicFilterType::ALL),
        attributes in prop::collection::btree_map("[a-z.]{1,8}", "[A-Za-z0-9]{0,8}", 0..3),
    ) {
        let config = TopicConfig {
            attributes,
            perm,
            read_queue_nums: read,
            topic_filter_type: filter,
            topic_name,
            write_queue_nums: write,
            ..TopicConfig::default()
        };
        prop_assert_eq!(TopicConfig::decode_text(&config.encode_text()).unwrap(), config);
    }

    #[test]
    fn heartbeat_round_trips(heartbeat in heartbeat_data()) {
        prop_assert_eq!(&HeartbeatData::decode(&heartbeat.encode()).unwrap(), &heartbeat);
    }

    #[test]
    fn fastjson_text_parses_back_to_the_same_value(value in json_tree()) {
        let text = to_fastjson_string(&value);
        prop_assert_eq!(parse_lenient::<Value>(text.as_bytes()).unwrap(), value);
    }

    #[test]
    fn valid_json_is_never_rewritten(text in jsonish()) {
        if serde_json::from_str::<Value>(&text).is_ok() {
            prop_assert!(matches!(
                quote_bare_integer_keys(text.as_bytes()),
                std::borrow::Cow::Borrowed(_)
            ));
        }
    }

    #[test]
    fn register_body_compressed_round_trips(
        configs in prop::collection::vec(("[A-Za-z0-9_%-]{1,12}", 0..64_i32, 0..64_i32), 0..8),
        filter_servers in prop::collection::vec(any_text(), 0..3),
        counter in any::<i64>(),
    ) {
        let mut body = RegisterBrokerBody { filter_server_list: filter_servers, ..RegisterBrokerBody::default() };
        let wrapper = &mut body.topic_config_serialize_wrapper;
        wrapper.data_version.counter = counter;
        for (topic, read, write) in configs {
            wrapper.topic_config_table.insert(topic.clone(), TopicConfig::new(topic, read, write));
        }
        let bytes = body.encode(true, V5_0_0);
        prop_assert_eq!(RegisterBrokerBody::decode(&bytes, true, V5_0_0).unwrap(), body);
    }

    #[test]
    fn properties_text_round_trips(entries in prop::collection::vec((any::<String>(), any::<String>()), 0..6)) {
        let text = properties_text::to_text(entries.iter().map(|(k, v)| (k, v)));
        prop_assert_eq!(properties_text::parse(&text).unwrap(), entries);
    }

    #[test]
    fn arbitrary_bytes_never_panic_any_decoder(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_lenient::<Value>(&bytes);
        let _ = quote_bare_integer_keys(&bytes);
        let _ = TopicRouteData::decode(&bytes);
        let _ = HeartbeatData::decode(&bytes);
        let _ = ClusterInfo::decode(&bytes);
        let _ = RegisterBrokerBody::decode(&bytes, false, V5_0_0);
        let _ = RegisterBrokerBody::decode(&bytes, true, V5_0_0);
        let text = String::from_utf8_lossy(&bytes);
        let _ = properties_text::parse(&text);
        let _ = TopicConfig::decode_text(&text);
    }

    #[test]
    fn jsonish_text_never_panics_the_lenient_parser(text in jsonish()) {
        let _ = parse_lenient::<Value>(text.as_bytes());
        let _ = TopicRouteData::decode(text.as_bytes());
    }

    #[test]
    fn arbitrary_inflated_streams_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..256),
        version in prop::sample::select(vec![V4_9_4, V5_0_0]),
    ) {
        let mut stream = ZlibEncoder::new(Vec::new(), Compression::fast());
        stream.write_all(&bytes).unwrap();
        let compressed = stream.finish().unwrap();
        let _ = RegisterBrokerBody::decode(&compressed, true, version);
    }

    #[test]
    fn structured_inflated_streams_never_panic(
        lengths in prop::collection::vec(-4..40_i32, 1..8),
        filler in prop::collection::vec(any::<u8>(), 0..128),
    ) {
        // Plausible length fields with arbitrary content between them.
        let mut stream = ZlibEncoder::new(Vec::new(), Compression::fast());
        let mut filler = filler.into_iter().cycle();
        for length in lengths {
            put_int(&mut stream, length);
            let content: Vec<u8> = filler.by_ref().take(usize::try_from(length).unwrap_or(0)).collect();
            stream.write_all(&content).unwrap();
        }
        let compressed = stream.finish().unwrap();
        let _ = RegisterBrokerBody::decode(&compressed, true, V5_0_0);
    }
}
