//! Maps keyed by a [`MessageQueue`]: Java's `Map<MessageQueue, V>` fields of TopicStatsTable,
//! ConsumeStats and ResetOffsetBody.
//!
//! fastjson writes such a key as the queue's JSON object, not as a string:
//! `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{..}}}`. That is not JSON, so
//! serde_json can neither write nor read it. [`write_map`] writes it, and the bodies holding such
//! maps write their whole JSON by hand around it. [`decode`] first turns every object in key
//! position into a JSON string holding that object's text, then parses leniently; the field's
//! [`deserialize`] reads each such string back as a queue. Through serde alone ([`serialize`])
//! the keys come out as those strings (`{"{\"brokerName\":..}":..}`, fastjson's
//! `WriteNonStringKeyAsString` form): valid JSON, and read back here too.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use crate::body::{BodyError, MessageQueue};
use crate::json::parse_lenient;

/// Deepest nesting the key rewriter tracks; past it the input goes to serde_json unchanged,
/// which refuses documents nested deeper than 128 anyway.
const MAX_TRACKED_DEPTH: usize = 128;

/// Appends `map` as fastjson writes it: `{` then `key:value` pairs separated by `,`, each key
/// the queue's JSON object (fields in alphabetical order), in queue order.
pub(crate) fn write_map<V: Serialize>(map: &BTreeMap<MessageQueue, V>, out: &mut Vec<u8>) {
    out.push(b'{');
    for (index, (queue, value)) in map.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_value(queue, out);
        out.push(b':');
        write_value(value, out);
    }
    out.push(b'}');
}

/// Appends `value` as standard JSON. Non-finite floats come out as `null`, as fastjson writes
/// them.
pub(crate) fn write_value<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, value)
        .expect("body values hold only strings, numbers and string-keyed maps, which always serialize");
}

/// serde `serialize_with`: the map with each key written as its queue's JSON text.
pub(crate) fn serialize<S, V>(map: &BTreeMap<MessageQueue, V>, serializer: S) -> Result<S::Ok, S::Error>
where
    S: Serializer,
    V: Serialize,
{
    let mut out = serializer.serialize_map(Some(map.len()))?;
    for (queue, value) in map {
        let key = serde_json::to_string(queue).expect("a MessageQueue holds only strings and an integer");
        out.serialize_entry(&key, value)?;
    }
    out.end()
}

/// serde `deserialize_with`: a map whose keys are strings holding a queue's JSON (what
/// [`decode`] makes of fastjson's object keys); `null` reads as an empty map.
pub(crate) fn deserialize<'de, D, V>(deserializer: D) -> Result<BTreeMap<MessageQueue, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    deserializer.deserialize_any(QueueMapVisitor(PhantomData))
}

struct QueueMapVisitor<V>(PhantomData<V>);

impl<'de, V: Deserialize<'de>> Visitor<'de> for QueueMapVisitor<V> {
    type Value = BTreeMap<MessageQueue, V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map keyed by MessageQueue objects, or null")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut map = BTreeMap::new();
        while let Some((key, value)) = access.next_entry::<String, V>()? {
            let queue: MessageQueue = serde_json::from_str(&key)
                .map_err(|e| de::Error::custom(format_args!("map key {key:?} is not a MessageQueue: {e}")))?;
            map.insert(queue, value);
        }
        Ok(map)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(BTreeMap::new())
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(BTreeMap::new())
    }
}

/// Reads a body that may hold object-keyed maps: fastjson's form, the string-keyed form, and
/// everything [`parse_lenient`] accepts.
///
/// # Errors
///
/// [`BodyError::Json`] when the text is not JSON of `T`'s shape after the key rewriting.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyError> {
    parse_lenient(&quote_object_keys(bytes))
}

/// Returns the input with every object in key position (`{` right after `{` or after a `,`
/// inside an object, outside strings) replaced by a JSON string holding that object's text.
/// Borrows the input when there is none. Malformed input is passed through for serde_json to
/// reject.
fn quote_object_keys(input: &[u8]) -> Cow<'_, [u8]> {
    let mut rewritten: Option<Vec<u8>> = None;
    let mut copied_upto = 0;
    // One entry per open container: true for an object.
    let mut nesting: Vec<bool> = Vec::new();
    let mut in_string = false;
    // True right after `{` or after a `,` inside an object, until the next token starts.
    let mut key_position = false;
    let mut i = 0;
    while i < input.len() {
        let byte = input[i];
        if in_string {
            match byte {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match byte {
            b'"' => {
                in_string = true;
                key_position = false;
            }
            b'{' if key_position => {
                let Some(end) = container_end(input, i) else { break };
                let out = rewritten.get_or_insert_with(|| Vec::with_capacity(input.len() + 64));
                out.extend_from_slice(&input[copied_upto..i]);
                write_as_json_string(&input[i..end], out);
                copied_upto = end;
                i = end;
                key_position = false;
                continue;
            }
            b'{' | b'[' => {
                if nesting.len() >= MAX_TRACKED_DEPTH {
                    break;
                }
                nesting.push(byte == b'{');
                key_position = byte == b'{';
            }
            b'}' | b']' => {
                nesting.pop();
                key_position = false;
            }
            b',' => key_position = nesting.last() == Some(&true),
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => key_position = false,
        }
        i += 1;
    }
    match rewritten {
        None => Cow::Borrowed(input),
        Some(mut out) => {
            out.extend_from_slice(&input[copied_upto..]);
            Cow::Owned(out)
        }
    }
}

/// The index just past the container that opens at `start`, skipping strings; `None` when the
/// input ends first.
fn container_end(input: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0_usize;
    let mut in_string = false;
    let mut i = start;
    while i < input.len() {
        let byte = input[i];
        if in_string {
            match byte {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match byte {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
}

/// Appends `text` as a JSON string literal: quotes and backslashes escaped, control
/// characters (whitespace of a pretty-printed key) as `\u00XX`.
fn write_as_json_string(text: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &byte in text {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0..=0x1f => out.extend_from_slice(format!("\\u{byte:04x}").as_bytes()),
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn quoted(input: &str) -> String {
        String::from_utf8(quote_object_keys(input.as_bytes()).into_owned()).unwrap()
    }

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    struct Sample {
        #[serde(serialize_with = "serialize", deserialize_with = "deserialize")]
        offset_table: BTreeMap<MessageQueue, i64>,
    }

    #[test]
    fn json_without_object_keys_is_borrowed_unchanged() {
        let input = br#"{"a":{"b":[{"c":1}]},"s":"{{\"x\":1}:2}",0:{"k":{}}}"#;
        assert!(matches!(quote_object_keys(input), Cow::Borrowed(_)));
    }

    #[test]
    fn object_keys_become_strings_holding_their_text() {
        assert_eq!(
            quoted(r#"{"t":{{"brokerName":"b","queueId":0,"topic":"T"}:5, {"a":[1,{"b":"}"}]} :{"x":1}}}"#),
            r#"{"t":{"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}":5, "{\"a\":[1,{\"b\":\"}\"}]}" :{"x":1}}}"#
        );
    }

    #[test]
    fn escapes_and_whitespace_inside_keys_survive() {
        let parsed: Value = parse_lenient(&quote_object_keys(b"{{\n\"topic\":\"a\\\"b\\\\\"}:1}")).unwrap();
        let key = parsed.as_object().unwrap().keys().next().unwrap().clone();
        let inner: Value = serde_json::from_str(&key).unwrap();
        assert_eq!(inner["topic"], "a\"b\\");
    }

    #[test]
    fn unbalanced_or_deep_input_fails_cleanly() {
        assert!(decode::<Value>(b"{{\"topic\":").is_err());
        assert!(decode::<Value>(b"{\"a\":{{").is_err());
        assert!(decode::<Value>("[".repeat(10_000).as_bytes()).is_err());
        assert!(decode::<Value>("{\"a\":".repeat(1_000).as_bytes()).is_err());
        assert!(decode::<Sample>(br#"{"offsetTable":{"not a queue":1}}"#).is_err());
    }

    #[test]
    fn both_key_forms_read_back_and_null_is_empty() {
        let queue = MessageQueue::new("T", "b", 2);
        let sample = Sample { offset_table: BTreeMap::from([(queue.clone(), 9)]) };
        let string_keyed = serde_json::to_vec(&sample).unwrap();
        assert_eq!(string_keyed, br#"{"offsetTable":{"{\"brokerName\":\"b\",\"queueId\":2,\"topic\":\"T\"}":9}}"#);
        assert_eq!(decode::<Sample>(&string_keyed).unwrap(), sample);
        let mut object_keyed = b"{\"offsetTable\":".to_vec();
        write_map(&sample.offset_table, &mut object_keyed);
        object_keyed.push(b'}');
        assert_eq!(object_keyed, br#"{"offsetTable":{{"brokerName":"b","queueId":2,"topic":"T"}:9}}"#);
        assert_eq!(decode::<Sample>(&object_keyed).unwrap(), sample);
        assert_eq!(decode::<Sample>(br#"{"offsetTable":null}"#).unwrap(), Sample::default());
    }

    proptest::proptest! {
        #[test]
        fn any_input_decodes_without_panicking(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
            json_ish in "[{}\\[\\]:,\"\\\\0-9a \n]{0,64}",
        ) {
            let _ = decode::<Sample>(&bytes);
            let _ = decode::<Sample>(json_ish.as_bytes());
            let _ = decode::<Value>(json_ish.as_bytes());
        }

        #[test]
        fn object_keyed_maps_round_trip(
            entries in proptest::collection::btree_map(
                ("[a-z%{}\\\\\"]{0,8}", "[a-z-]{0,6}", 0..64_i32),
                proptest::prelude::any::<i64>(),
                0..8,
            ),
        ) {
            let sample = Sample {
                offset_table: entries.into_iter().map(|((t, b, q), v)| (MessageQueue::new(t, b, q), v)).collect(),
            };
            let mut text = b"{\"offsetTable\":".to_vec();
            write_map(&sample.offset_table, &mut text);
            text.push(b'}');
            proptest::prop_assert_eq!(decode::<Sample>(&text).unwrap(), sample);
        }
    }
}
