//! Reading and writing the JSON dialect of fastjson 1.2.x, which Java RocketMQ uses for every
//! remoting body and config file.
//!
//! fastjson writes maps with `Integer`/`Long` keys with *unquoted* keys
//! (`{"brokerAddrs":{0:"10.0.0.1:10911"}}`), which is not JSON. [`parse_lenient`] quotes such
//! keys in one pass and hands the result to serde_json; [`to_fastjson_string`] writes that style
//! for peers that expect it (old clients asking for route data). Everything else is standard
//! JSON. This module knows nothing about particular bodies; `crate::body` defines those.

use std::any::type_name;
use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::body::BodyError;

/// Deepest nesting the key rewriter tracks. serde_json refuses deeper documents anyway
/// (its recursion limit is 128), so past this the rewriter stops and lets serde_json report.
const MAX_TRACKED_DEPTH: u32 = 128;

/// Parses JSON as fastjson would accept it from a Java peer: standard JSON plus bare integer
/// object keys such as `{0:"a",-1:"b"}`.
///
/// When the input has no bare keys it is parsed in place without copying.
///
/// # Errors
///
/// [`BodyError::Json`] if the text is not valid JSON for `T` after quoting bare keys.
pub fn parse_lenient<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyError> {
    let text = quote_bare_integer_keys(bytes);
    serde_json::from_slice(&text).map_err(|source| BodyError::Json { target: type_name::<T>(), source })
}

/// Returns the input with every bare integer object key (`-?[0-9]+` in key position, outside
/// strings) wrapped in double quotes. Borrows the input when nothing needs quoting.
///
/// The scan only looks at structure (`{ } [ ] , "` and backslash escapes inside strings), so
/// text such as `"{0:"` inside a string value is left alone. Malformed input is passed through
/// for serde_json to reject.
pub fn quote_bare_integer_keys(input: &[u8]) -> Cow<'_, [u8]> {
    let mut rewritten: Option<Vec<u8>> = None;
    let mut copied_upto = 0;
    let mut nesting = Nesting::default();
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
            b'{' | b'[' => {
                if !nesting.push(byte == b'{') {
                    break;
                }
                key_position = byte == b'{';
            }
            b'}' | b']' => {
                nesting.pop();
                key_position = false;
            }
            b',' => key_position = nesting.in_object(),
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'-' | b'0'..=b'9' if key_position => {
                let end = integer_end(input, i);
                if end > i {
                    let out = rewritten.get_or_insert_with(|| Vec::with_capacity(input.len() + 16));
                    out.extend_from_slice(&input[copied_upto..i]);
                    out.push(b'"');
                    out.extend_from_slice(&input[i..end]);
                    out.push(b'"');
                    copied_upto = end;
                    i = end;
                    key_position = false;
                    continue;
                }
                key_position = false;
            }
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

/// End of an optional `-` followed by at least one digit starting at `start`, or `start` if
/// there is no such integer.
fn integer_end(input: &[u8], start: usize) -> usize {
    let digits_start = if input[start] == b'-' { start + 1 } else { start };
    let digit_count = input[digits_start..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digit_count == 0 {
        start
    } else {
        digits_start + digit_count
    }
}

/// A stack of "is this container an object" bits, without allocation.
#[derive(Debug, Default)]
struct Nesting {
    bits: u128,
    depth: u32,
}

impl Nesting {
    /// Returns false when the document is nested deeper than we track.
    fn push(&mut self, is_object: bool) -> bool {
        if self.depth >= MAX_TRACKED_DEPTH {
            return false;
        }
        self.bits = (self.bits << 1) | u128::from(is_object);
        self.depth += 1;
        true
    }

    fn pop(&mut self) {
        if self.depth > 0 {
            self.bits >>= 1;
            self.depth -= 1;
        }
    }

    fn in_object(&self) -> bool {
        self.depth > 0 && self.bits & 1 == 1
    }
}

/// Writes a JSON value the way fastjson does by default: an object whose keys are all
/// integers gets unquoted keys in numeric order; every other object gets quoted keys in
/// alphabetical (byte) order. Java name servers answer old clients in this style.
///
/// "Integer" means the canonical decimal form of an `i64` (`0`, `-7`, not `007` or `+1`), so a
/// string-keyed map whose keys happen to be canonical integers is written unquoted too; the
/// RocketMQ bodies have no such maps.
pub fn to_fastjson_string(value: &Value) -> String {
    let mut out = String::new();
    write_fastjson(value, &mut out);
    out
}

/// Serializes `value` with serde and writes it in fastjson style (see [`to_fastjson_string`]).
///
/// # Errors
///
/// [`BodyError::Json`] if `value` cannot be represented as JSON (for example a map with
/// non-string, non-integer keys).
pub fn to_fastjson_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, BodyError> {
    let tree = serde_json::to_value(value).map_err(|source| BodyError::Json { target: type_name::<T>(), source })?;
    Ok(to_fastjson_string(&tree).into_bytes())
}

fn write_fastjson(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let integer_keys: Option<Vec<(i64, &Value)>> = if map.is_empty() {
                None
            } else {
                map.iter().map(|(k, v)| canonical_integer(k).map(|n| (n, v))).collect()
            };
            out.push('{');
            match integer_keys {
                Some(mut entries) => {
                    entries.sort_by_key(|(k, _)| *k);
                    for (index, (key, item)) in entries.into_iter().enumerate() {
                        if index > 0 {
                            out.push(',');
                        }
                        out.push_str(&key.to_string());
                        out.push(':');
                        write_fastjson(item, out);
                    }
                }
                None => {
                    // Sorted explicitly: serde_json's map keeps insertion order when another
                    // crate in the build enables its `preserve_order` feature.
                    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                    for (index, (key, item)) in entries.into_iter().enumerate() {
                        if index > 0 {
                            out.push(',');
                        }
                        write_json_string(key, out);
                        out.push(':');
                        write_fastjson(item, out);
                    }
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_fastjson(item, out);
            }
            out.push(']');
        }
        Value::String(text) => write_json_string(text, out),
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn write_json_string(text: &str, out: &mut String) {
    out.push_str(&Value::from(text).to_string());
}

/// The key as an `i64` if it is written exactly as Java's `Long.toString` would write it.
fn canonical_integer(key: &str) -> Option<i64> {
    let n: i64 = key.parse().ok()?;
    (n.to_string() == key).then_some(n)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    fn quoted(input: &str) -> String {
        String::from_utf8(quote_bare_integer_keys(input.as_bytes()).into_owned()).unwrap()
    }

    #[test]
    fn standard_json_is_borrowed_unchanged() {
        let input = br#"{"a":[1,2,-3],"b":{"0":"x"},"c":"{0:1}"}"#;
        assert!(matches!(quote_bare_integer_keys(input), Cow::Borrowed(_)));
    }

    #[test]
    fn bare_integer_keys_are_quoted() {
        assert_eq!(quoted(r#"{0:"addr",1:"x"}"#), r#"{"0":"addr","1":"x"}"#);
        assert_eq!(quoted(r#"{"offsetTable":{"T@G":{0:12,-1:7}}}"#), r#"{"offsetTable":{"T@G":{"0":12,"-1":7}}}"#);
    }

    #[test]
    fn whitespace_around_bare_keys_is_kept() {
        assert_eq!(quoted("{ 0 : \"a\" ,\n\t10:\"b\"}"), "{ \"0\" : \"a\" ,\n\t\"10\":\"b\"}");
    }

    #[test]
    fn numbers_in_arrays_and_values_are_not_keys() {
        let input = r#"{"list":[0,1,{2:3}],"n":-4,"m":[[5],6]}"#;
        assert_eq!(quoted(input), r#"{"list":[0,1,{"2":3}],"n":-4,"m":[[5],6]}"#);
    }

    #[test]
    fn brace_text_inside_strings_is_ignored() {
        let input = r#"{"s":"{0:\"x\",1:2}","t":"a\\","u":{3:"}"}}"#;
        assert_eq!(quoted(input), r#"{"s":"{0:\"x\",1:2}","t":"a\\","u":{"3":"}"}}"#);
    }

    #[test]
    fn escaped_quote_does_not_end_string() {
        let input = r#"{"k":"say \"{1:2}\" ,5:6",7:8}"#;
        assert_eq!(quoted(input), r#"{"k":"say \"{1:2}\" ,5:6","7":8}"#);
    }

    #[test]
    fn lone_minus_is_left_for_serde_to_reject() {
        assert_eq!(quoted("{-:1}"), "{-:1}");
        assert!(parse_lenient::<Value>(b"{-:1}").is_err());
    }

    #[test]
    fn parse_lenient_reads_nested_integer_maps() {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Offsets {
            offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
        }
        let parsed: Offsets = parse_lenient(br#"{"offsetTable":{"T@G":{0:12,-1:7}, "U@G" : { 3 : 4 }}}"#).unwrap();
        assert_eq!(parsed.offset_table["T@G"][&0], 12);
        assert_eq!(parsed.offset_table["T@G"][&-1], 7);
        assert_eq!(parsed.offset_table["U@G"][&3], 4);
    }

    #[test]
    fn parse_lenient_reports_target_type() {
        let err = parse_lenient::<BTreeMap<String, i32>>(b"{\"a\":").unwrap_err();
        match err {
            BodyError::Json { target, .. } => assert!(target.contains("BTreeMap")),
            other => panic!("unexpected error {other:?}"),
        }
    }

    #[test]
    fn deep_nesting_fails_cleanly() {
        let deep = "[".repeat(10_000);
        assert!(parse_lenient::<Value>(deep.as_bytes()).is_err());
        let deep_objects = "{0:".repeat(1_000);
        assert!(parse_lenient::<Value>(deep_objects.as_bytes()).is_err());
    }

    #[test]
    fn fastjson_style_unquotes_integer_keyed_objects_only() {
        let value = json!({
            "brokerAddrs": {"0": "a:1", "10": "c:1", "2": "b:1"},
            "name": "x",
            "empty": {},
            "mixed": {"0": 1, "a": 2},
            "padded": {"01": 1},
            "neg": {"-1": true}
        });
        assert_eq!(
            to_fastjson_string(&value),
            r#"{"brokerAddrs":{0:"a:1",2:"b:1",10:"c:1"},"empty":{},"mixed":{"0":1,"a":2},"name":"x","neg":{-1:true},"padded":{"01":1}}"#
        );
    }

    #[test]
    fn fastjson_style_escapes_strings() {
        let value = json!({"k\"": "line\nquote\" back\\"});
        assert_eq!(to_fastjson_string(&value), r#"{"k\"":"line\nquote\" back\\"}"#);
    }

    #[test]
    fn fastjson_output_parses_back_leniently() {
        let value = json!({"t": {"0": [1, {"5": null}], "-3": "x"}, "a": [{"1": 2.5}]});
        let text = to_fastjson_string(&value);
        let back: Value = parse_lenient(text.as_bytes()).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn to_fastjson_vec_serializes_structs() {
        let mut map = BTreeMap::new();
        map.insert(1_i64, "b");
        map.insert(0_i64, "a");
        assert_eq!(to_fastjson_vec(&map).unwrap(), br#"{0:"a",1:"b"}"#);
    }
}
