//! The JSON header decoder against a reference built on `serde_json::Value`: generated headers
//! (Java-like ones, odd-but-valid ones, and byte-level corruptions of both) must decode to the
//! same command, or be refused by both. The encoder's strings, escapes included, read back
//! through the reference as they were.

use bytes::{BufMut, BytesMut};
use ferromq_protocol::{
    decode_frame, encode_frame, ExtFields, LanguageCode, RemotingCommand, SerializeType, MAX_FRAME_BYTES,
};
use proptest::prelude::*;
use serde_json::Value;

/// What a header decodes to, field by field.
type Decoded = (i32, i32, i32, i32, LanguageCode, Option<String>, ExtFields);

fn ours(json: &[u8]) -> Option<Decoded> {
    let mut buf = BytesMut::new();
    buf.put_u32(4 + json.len() as u32);
    buf.put_u32(json.len() as u32);
    buf.put_slice(json);
    let cmd: RemotingCommand = decode_frame(&mut buf, MAX_FRAME_BYTES).ok()?.expect("whole frame");
    Some((cmd.code, cmd.flag, cmd.opaque, cmd.version, cmd.language, cmd.remark, cmd.ext_fields))
}

/// Equal, except that a float may differ in its last bits: serde_json's default float parser
/// is not correctly rounded, the decoder's (`str::parse`) is.
fn same(a: &Option<Decoded>, b: &Option<Decoded>) -> bool {
    let (Some(a), Some(b)) = (a, b) else { return a.is_none() && b.is_none() };
    let close = |x: &str, y: &str| {
        x == y
            || matches!((x.parse::<f64>(), y.parse::<f64>()), (Ok(p), Ok(q)) if (p - q).abs() <= 1e-12 * p.abs().max(q.abs()))
    };
    (a.0, a.1, a.2, a.3, a.4, &a.5) == (b.0, b.1, b.2, b.3, b.4, &b.5)
        && a.6.len() == b.6.len()
        && a.6.iter().zip(b.6.iter()).all(|((ka, va), (kb, vb))| ka == kb && close(va, vb))
}

fn number_text(n: &serde_json::Number) -> Option<String> {
    if let Some(i) = n.as_i64() {
        return Some(i.to_string());
    }
    if let Some(u) = n.as_u64() {
        return Some(u.to_string());
    }
    n.as_f64().map(|f| f.to_string())
}

fn scalar_text(v: &Value) -> Result<Option<String>, ()> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        Value::Bool(b) => Ok(Some(b.to_string())),
        Value::Number(n) => number_text(n).map(Some).ok_or(()),
        _ => Err(()),
    }
}

fn reference(json: &[u8]) -> Option<Decoded> {
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(json) else { return None };
    let int = |k: &str| -> Result<i32, ()> {
        match map.get(k) {
            None => Ok(0),
            Some(v) => v.as_i64().and_then(|i| i32::try_from(i).ok()).ok_or(()),
        }
    };
    let language = match map.get("language").map(scalar_text) {
        None => LanguageCode::Java,
        Some(Ok(None)) => LanguageCode::Other,
        Some(Ok(Some(s))) => s.parse::<u8>().map_or_else(|_| LanguageCode::from_name(&s), LanguageCode::from_code),
        Some(Err(())) => return None,
    };
    let remark = match map.get("remark") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return None,
    };
    let mut ext = ExtFields::new();
    match map.get("extFields") {
        None | Some(Value::Null) => {}
        Some(Value::Object(fields)) => {
            for (k, v) in fields {
                if let Some(text) = scalar_text(v).ok()? {
                    ext.insert(k.clone().into(), &text);
                }
            }
        }
        Some(_) => return None,
    }
    Some((int("code").ok()?, int("flag").ok()?, int("opaque").ok()?, int("version").ok()?, language, remark, ext))
}

/// Whether some object repeats a field: the reference keeps only the last value, the decoder
/// reads (and checks) each and, inside extFields, a later null does not remove an earlier
/// value. Such inputs are not compared.
fn repeats_a_field(json: &[u8]) -> bool {
    struct Repeats(bool);
    impl<'de> serde::Deserialize<'de> for Repeats {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Repeats;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("any value")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Repeats, A::Error> {
                    let (mut keys, mut nested) = (Vec::new(), false);
                    while let Some((k, Repeats(r))) = map.next_entry::<String, Repeats>()? {
                        keys.push(k);
                        nested |= r;
                    }
                    let n = keys.len();
                    keys.sort();
                    keys.dedup();
                    Ok(Repeats(nested || keys.len() != n))
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Repeats, A::Error> {
                    let mut any = false;
                    while let Some(Repeats(r)) = seq.next_element()? {
                        any |= r;
                    }
                    Ok(Repeats(any))
                }
                fn visit_bool<E>(self, _: bool) -> Result<Repeats, E> {
                    Ok(Repeats(false))
                }
                fn visit_i64<E>(self, _: i64) -> Result<Repeats, E> {
                    Ok(Repeats(false))
                }
                fn visit_u64<E>(self, _: u64) -> Result<Repeats, E> {
                    Ok(Repeats(false))
                }
                fn visit_f64<E>(self, _: f64) -> Result<Repeats, E> {
                    Ok(Repeats(false))
                }
                fn visit_str<E>(self, _: &str) -> Result<Repeats, E> {
                    Ok(Repeats(false))
                }
                fn visit_unit<E>(self) -> Result<Repeats, E> {
                    Ok(Repeats(false))
                }
            }
            d.deserialize_any(V)
        }
    }
    serde_json::from_slice::<Repeats>(json).is_ok_and(|r| r.0)
}

/// A JSON string literal for `s`, each character written raw or as a `\u` escape (a surrogate
/// pair beyond the BMP) as `escapes` picks.
fn literal(s: &str, escapes: &[bool]) -> String {
    let mut out = String::from("\"");
    for (i, c) in s.chars().enumerate() {
        let escape = escapes.get(i % escapes.len().max(1)).copied().unwrap_or(false);
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str(if escape { "\\u005c" } else { "\\\\" }),
            '/' if escape => out.push_str("\\/"),
            c if (c as u32) < 0x20 || escape => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{:04x}", u));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9_%]{0,12}",
        "\\PC{0,8}",
        proptest::collection::vec(
            prop_oneof![
                Just('\u{1}'),
                Just('\u{2}'),
                Just('"'),
                Just('\\'),
                Just('/'),
                Just('é'),
                Just('😀'),
                Just('\n'),
                Just('a')
            ],
            0..10
        )
        .prop_map(|cs| cs.into_iter().collect()),
    ]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i32>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        (any::<i32>(), 0u32..1000).prop_map(|(a, b)| format!("{a}.{b}")),
        (-20i32..20, -30i32..30).prop_map(|(a, e)| format!("{a}e{e}")),
        Just("18446744073709551616".to_owned()),
        Just("-0".to_owned()),
        Just("1E+2".to_owned()),
    ]
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        (text(), proptest::collection::vec(any::<bool>(), 1..4)).prop_map(|(s, e)| literal(&s, &e)),
        number(),
        Just("true".to_owned()),
        Just("false".to_owned()),
        Just("null".to_owned()),
    ]
}

fn value() -> impl Strategy<Value = String> {
    scalar().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(|vs| format!("[{}]", vs.join(","))),
            proptest::collection::vec((text().prop_map(|k| literal(&k, &[false])), inner), 0..4).prop_map(object),
        ]
    })
}

/// An object from members; a repeated key keeps its first value only, so generated objects
/// do not repeat fields (see `repeats_a_field`).
fn object(members: Vec<(String, String)>) -> String {
    let mut seen = std::collections::HashSet::new();
    let members: Vec<String> =
        members.into_iter().filter(|(k, _)| seen.insert(k.clone())).map(|(k, v)| format!("{k}:{v}")).collect();
    format!("{{{}}}", members.join(","))
}

fn ext_fields() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("topic".to_owned()),
        Just("a".to_owned()),
        Just("queueId".to_owned()),
        Just("properties".to_owned()),
        text()
    ];
    prop_oneof![
        4 => proptest::collection::vec((key.prop_map(|k| literal(&k, &[false])), scalar()), 0..8).prop_map(object),
        1 => value(),
    ]
}

fn member() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        2 => (prop_oneof![Just("code"), Just("flag"), Just("opaque"), Just("version")], prop_oneof![4 => number(), 1 => scalar()])
            .prop_map(|(k, v)| (format!("\"{k}\""), v)),
        1 => prop_oneof![Just("\"JAVA\"".to_owned()), Just("\"CPP\"".to_owned()), Just("8".to_owned()), scalar()]
            .prop_map(|v| ("\"language\"".to_owned(), v)),
        1 => scalar().prop_map(|v| ("\"remark\"".to_owned(), v)),
        3 => ext_fields().prop_map(|v| ("\"extFields\"".to_owned(), v)),
        1 => (text(), value()).prop_map(|(k, v)| (literal(&k, &[false]), v)),
    ]
}

fn header() -> impl Strategy<Value = String> {
    (proptest::collection::vec(member(), 0..8), prop_oneof![Just(""), Just(" "), Just("\n\t ")]).prop_map(
        |(members, ws)| {
            let body = object(members);
            // Whitespace around every structural character of the top level.
            let spaced = body.replacen('{', &format!("{{{ws}"), 1);
            format!("{ws}{spaced}{ws}")
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn agrees_with_the_reference(json in header()) {
        prop_assume!(!repeats_a_field(json.as_bytes()));
        let (a, b) = (ours(json.as_bytes()), reference(json.as_bytes()));
        prop_assert!(same(&a, &b), "{}\nours: {:?}\nreference: {:?}", json, a, b);
    }

    #[test]
    fn agrees_with_the_reference_on_corrupted_input(json in header(), at in any::<prop::sample::Index>(), byte in any::<u8>(), op in 0u8..3) {
        let mut bytes = json.into_bytes();
        let i = at.index(bytes.len() + 1);
        match op {
            0 if i < bytes.len() => bytes[i] = byte,
            1 => bytes.insert(i, byte),
            _ if i < bytes.len() => { bytes.remove(i); }
            _ => bytes.push(byte),
        }
        prop_assume!(!repeats_a_field(&bytes));
        // A number past f64's range is refused by the reference anywhere, by the decoder only
        // where it keeps the value (a skipped field's number is checked for syntax only).
        prop_assume!(!serde_json::from_slice::<Value>(&bytes).is_err_and(|e| e.to_string().contains("number out of range")));
        let (a, b) = (ours(&bytes), reference(&bytes));
        prop_assert!(same(&a, &b), "{:?}\nours: {:?}\nreference: {:?}", String::from_utf8_lossy(&bytes), a, b);
    }

    #[test]
    fn encoded_strings_read_back_through_the_reference(
        fields in proptest::collection::vec((text(), text()), 0..6),
        remark in proptest::option::of(text()),
    ) {
        let mut cmd = RemotingCommand::response(0, remark.clone());
        for (k, v) in &fields {
            cmd.ext_fields.insert(k.clone().into(), v);
        }
        let mut frame = BytesMut::new();
        encode_frame(&cmd, SerializeType::Json, &mut frame).unwrap();
        let header_len = (u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]) & 0xFF_FFFF) as usize;
        let Value::Object(map) = serde_json::from_slice::<Value>(&frame[8..8 + header_len]).unwrap() else {
            panic!("not an object")
        };
        prop_assert_eq!(map.get("remark").and_then(Value::as_str), remark.as_deref());
        let ext = map.get("extFields").and_then(Value::as_object);
        for (k, v) in cmd.ext_fields.iter() {
            prop_assert_eq!(ext.and_then(|e| e.get(k)).and_then(Value::as_str), Some(v));
        }
        prop_assert_eq!(ext.map_or(0, |e| e.len()), cmd.ext_fields.len());
    }
}
