//! JSON bodies and the RegisterBrokerBody stream on arbitrary bytes: `json::parse_lenient` into
//! TopicRouteData, HeartbeatData, ClusterInfo and TopicConfigSerializeWrapper;
//! `RegisterBrokerBody::decode` as JSON and compressed, for a 4.x and a 5.x broker version;
//! `TopicConfig::decode_text`.
//!
//! Checks:
//! - nothing panics;
//! - a body that decodes survives `encode` -> `decode` and `encode_fastjson` -> `decode`
//!   (fastjson's unquoted integer keys); TopicRouteData also survives `to_json_bytes` in both
//!   styles;
//! - a RegisterBrokerBody that decodes survives re-encoding in the same form and version;
//! - a TopicConfig text that decodes survives `encode_text` -> `decode_text`, unless an
//!   attribute holds a space, which the space-separated form cannot carry (Java has the same
//!   limit: the sixth field is then cut and the attributes read as empty).
#![no_main]

use std::fmt::Debug;

use ferromq_protocol::body::{
    ClusterInfo, HeartbeatData, JsonBody, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper, TopicRouteData,
};
use ferromq_protocol::json::parse_lenient;
use ferromq_protocol::version::{V4_0_0, V5_0_0};
use libfuzzer_sys::fuzz_target;

fn body_round_trip<T: JsonBody + PartialEq + Debug>(data: &[u8]) -> Option<T> {
    let value: T = parse_lenient(data).ok()?;
    let name = std::any::type_name::<T>();
    let standard = value.encode();
    let again = T::decode(&standard).unwrap_or_else(|e| panic!("{name}: standard JSON output does not decode: {e:?}"));
    assert_eq!(again, value, "{name}: encode -> decode changed the value");
    let fastjson = value.encode_fastjson();
    let again = T::decode(&fastjson).unwrap_or_else(|e| panic!("{name}: fastjson-style output does not decode: {e:?}"));
    assert_eq!(again, value, "{name}: encode_fastjson -> decode changed the value");
    Some(value)
}

fn register_body(data: &[u8], compressed: bool, version: i32) {
    let Ok(body) = RegisterBrokerBody::decode(data, compressed, version) else {
        return;
    };
    let encoded = body.encode(compressed, version);
    let again = RegisterBrokerBody::decode(&encoded, compressed, version).unwrap_or_else(|e| {
        panic!("RegisterBrokerBody (compressed={compressed}, version={version}) re-encoding does not decode: {e:?}")
    });
    // The compressed stream carries topics in the text form; see topic_config_text.
    let configs = body.topic_config_serialize_wrapper.topic_config_table.values();
    if !(compressed && configs.into_iter().any(attributes_have_space)) {
        assert_eq!(
            again, body,
            "RegisterBrokerBody (compressed={compressed}, version={version}) round trip changed it"
        );
    }
}

fn attributes_have_space(config: &TopicConfig) -> bool {
    config.attributes.iter().any(|(k, v)| k.contains(' ') || v.contains(' '))
}

fn topic_config_text(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(config) = TopicConfig::decode_text(&text) else {
        return;
    };
    let written = config.encode_text();
    let again = TopicConfig::decode_text(&written)
        .unwrap_or_else(|e| panic!("encode_text output does not decode: {e:?}; text {written:?}"));
    if !attributes_have_space(&config) {
        assert_eq!(again, config, "encode_text -> decode_text changed the config; text {written:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    if let Some(route) = body_round_trip::<TopicRouteData>(data) {
        for standard in [true, false] {
            let bytes = route.to_json_bytes(standard);
            let again: TopicRouteData = parse_lenient(&bytes)
                .unwrap_or_else(|e| panic!("to_json_bytes({standard}) output does not decode: {e:?}"));
            assert_eq!(again, route, "to_json_bytes({standard}) -> decode changed the route");
        }
    }
    body_round_trip::<HeartbeatData>(data);
    body_round_trip::<ClusterInfo>(data);
    body_round_trip::<TopicConfigSerializeWrapper>(data);
    body_round_trip::<TopicConfig>(data);

    // The version only matters to the compressed stream.
    register_body(data, false, V5_0_0);
    register_body(data, true, V4_0_0);
    register_body(data, true, V5_0_0);
    topic_config_text(data);
});
