//! The two "properties" text formats on arbitrary (lossily UTF-8) input: the message
//! properties string (`MessageProperties::decode`, `iter_properties`, `find_property`) and
//! Java `.properties` text (`properties_text::parse`, `parse_map`, `to_text`).
//!
//! Checks:
//! - nothing panics;
//! - `MessageProperties::decode` keeps exactly the names `iter_properties` yields, with the
//!   value `find_property` finds (last one wins), and survives `encode` -> `decode`;
//! - properties text that parses survives `to_text` -> `parse` pair for pair, and `parse_map`
//!   keeps the last value of each key.
#![no_main]

use std::collections::BTreeMap;

use ferromq_protocol::message::{find_property, iter_properties, MessageProperties};
use ferromq_protocol::properties_text;
use libfuzzer_sys::fuzz_target;

fn message_properties(text: &str) {
    let props = MessageProperties::decode(text);
    let pairs: Vec<(&str, &str)> = iter_properties(text).collect();
    let mut names: Vec<&str> = Vec::new();
    for (name, value) in &pairs {
        assert!(!name.is_empty() && !value.is_empty(), "iter_properties yielded an empty name or value");
        assert!(!name.contains(['\u{1}', '\u{2}']), "a name holds a separator");
        assert!(!value.contains('\u{2}'), "a value holds the property separator");
        if !names.contains(name) {
            names.push(name);
        }
    }
    assert_eq!(props.len(), names.len(), "decode kept a different number of names");
    for (i, (name, value)) in props.iter().enumerate() {
        assert_eq!(name, names[i], "decode changed the first-occurrence order");
        assert_eq!(Some(value), find_property(text, name), "decode and find_property disagree on {name:?}");
        assert_eq!(props.get(name), Some(value));
    }

    let encoded = props.encode();
    assert_eq!(encoded.len(), props.encoded_len());
    assert_eq!(MessageProperties::decode(&encoded), props, "encode -> decode changed the properties");
}

fn properties_text(text: &str) {
    let Ok(pairs) = properties_text::parse(text) else {
        assert!(properties_text::parse_map(text).is_err(), "parse failed but parse_map did not");
        return;
    };
    let map = properties_text::parse_map(text).expect("parse succeeded, so parse_map must");
    let last: BTreeMap<String, String> = pairs.iter().cloned().collect();
    assert_eq!(map, last, "parse_map does not keep the last value of each key");

    let written = properties_text::to_text(pairs.iter().map(|(k, v)| (k, v)));
    let reread = properties_text::parse(&written)
        .unwrap_or_else(|e| panic!("to_text output does not parse ({e}); text: {written:?}"));
    assert_eq!(reread, pairs, "to_text -> parse changed the pairs; text: {written:?}");
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    message_properties(&text);
    properties_text(&text);
});
