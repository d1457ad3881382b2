//! Request signing (acl-and-tls.md section 1): golden values computed independently (Python's
//! `hmac`/`hashlib` over the values in key order plus the body), the round trip through a frame,
//! and the property that changing anything signed breaks verification.

use ferromq_protocol::signature::{self, SessionCredentials, VerifyError, SIGNATURE};
use ferromq_protocol::{decode_frame, encode_frame, request_code, RemotingCommand, SerializeType};
use proptest::prelude::*;

/// SEND_MESSAGE_V2 as a Java producer sends it, before signing.
fn send_v2() -> RemotingCommand {
    let mut r = RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_body(&b"Hello RocketMQ"[..]);
    for (k, v) in [
        ("a", "PID_ORDER"),
        ("b", "TopicTest"),
        ("c", "TBW102"),
        ("d", "4"),
        ("e", "2"),
        ("f", "0"),
        ("g", "1700000000000"),
        ("h", "0"),
        ("i", "KEYS\u{1}order-1\u{2}UNIQ_KEY\u{1}AC1100017F0018B4AAC2\u{2}"),
        ("j", "0"),
        ("k", "false"),
        ("m", "false"),
        ("n", "broker-a"),
    ] {
        r.ext_fields.insert(k.into(), v);
    }
    r
}

#[test]
fn signs_send_message_v2_like_the_java_client() {
    let mut r = send_v2();
    SessionCredentials::new("RocketMQ", "12345678").sign(&mut r);
    assert_eq!(r.ext("AccessKey"), Some("RocketMQ"));
    assert_eq!(r.ext(SIGNATURE), Some("ZKeGvq1DkZu3ZmoRUw87ISIby9o="));
    assert_eq!(signature::verify(&r, b"12345678"), Ok(()));
    assert_eq!(signature::verify(&r, b"87654321"), Err(VerifyError::Mismatch));
}

fn query_by_unique_key(version: i32) -> RemotingCommand {
    let mut r = RemotingCommand::request(request_code::QUERY_MESSAGE);
    r.version = version;
    for (k, v) in [
        ("topic", "TopicTest"),
        ("key", "order-1"),
        ("maxNum", "32"),
        ("beginTimestamp", "0"),
        ("endTimestamp", "9223372036854775807"),
        ("_UNIQUE_KEY_QUERY", "true"),
    ] {
        r.ext_fields.insert(k.into(), v);
    }
    r
}

#[test]
fn security_token_is_sent_and_signed_and_the_unique_key_flag_is_accepted_either_way() {
    let creds = SessionCredentials {
        access_key: "rocketmq2".into(),
        secret_key: "12345678".into(),
        security_token: Some("sts-token".into()),
    };
    let mut r = query_by_unique_key(ferromq_protocol::version::CURRENT);
    creds.sign(&mut r);
    assert_eq!(r.ext("SecurityToken"), Some("sts-token"));
    // Sorted keys: AccessKey SecurityToken _UNIQUE_KEY_QUERY beginTimestamp ... topic.
    assert_eq!(r.ext(SIGNATURE), Some("lc1ypSVWhKrZnmHD8ONu7DQFB2U="));
    assert_eq!(signature::verify(&r, b"12345678"), Ok(()));

    // A 4.9.3 client signed before adding the flag.
    let mut old = query_by_unique_key(ferromq_protocol::version::V4_9_3);
    old.ext_fields.insert("AccessKey".into(), "rocketmq2");
    old.ext_fields.insert("SecurityToken".into(), "sts-token");
    old.ext_fields.insert(SIGNATURE.into(), "mPR7BtQ3mq6AxRntUQpjJUfG65A=");
    assert_eq!(signature::verify(&old, b"12345678"), Ok(()));
    // So does a current client talking to a 4.9.8-style signer.
    let mut current = old.clone();
    current.version = ferromq_protocol::version::CURRENT;
    assert_eq!(signature::verify(&current, b"12345678"), Ok(()));
    // An old client's signature that counted the flag is not accepted (the old servers never did).
    let mut counted = r.clone();
    counted.version = ferromq_protocol::version::V4_9_3;
    assert_eq!(signature::verify(&counted, b"12345678"), Err(VerifyError::Mismatch));
}

#[test]
fn unsigned_request_is_missing_not_mismatched() {
    assert_eq!(signature::verify(&send_v2(), b"12345678"), Err(VerifyError::Missing));
}

#[test]
fn a_signed_request_verifies_after_a_trip_through_both_header_serializations() {
    for serialize in [SerializeType::Json, SerializeType::RocketMq] {
        let mut r = send_v2();
        SessionCredentials::new("RocketMQ", "12345678").sign(&mut r);
        let mut frame = bytes::BytesMut::new();
        encode_frame(&r, serialize, &mut frame).expect("encode");
        let decoded = decode_frame(&mut frame, usize::MAX).expect("decode").expect("whole frame");
        assert_eq!(signature::verify(&decoded, b"12345678"), Ok(()), "{serialize:?}");
    }
}

#[test]
fn keys_beyond_ascii_sort_by_utf16_code_units_as_java_does() {
    // U+FF21 (one UTF-16 unit, 0xFF21) sorts after U+1F600 (surrogates 0xD83D..) in Java,
    // while its UTF-8 bytes (EF ..) sort before the emoji's (F0 ..).
    let mut r = RemotingCommand::request(request_code::HEART_BEAT);
    r.ext_fields.insert("\u{FF21}".into(), "second");
    r.ext_fields.insert("\u{1F600}".into(), "first");
    let creds = SessionCredentials::new("ak-unicode", "secret-unicode");
    creds.sign(&mut r);
    let content = "ak-unicode".to_owned() + "first" + "second";
    assert_eq!(r.ext(SIGNATURE), Some(signature::sign_bytes(b"secret-unicode", content.as_bytes()).as_str()));
}

fn field_value() -> impl Strategy<Value = String> {
    "[ -~]{0,12}"
}

proptest! {
    #[test]
    fn any_change_to_a_signed_field_or_the_body_fails(
        fields in proptest::collection::btree_map("[A-Za-z_]{1,8}", field_value(), 1..10),
        body in proptest::collection::vec(any::<u8>(), 0..64),
        which in any::<prop::sample::Index>(),
        replacement in field_value(),
        flip in any::<prop::sample::Index>(),
    ) {
        let mut r = RemotingCommand::request(request_code::SEND_MESSAGE).with_body(body.clone());
        for (k, v) in &fields {
            r.ext_fields.insert(k.clone().into(), v);
        }
        SessionCredentials::new("ak-prop", "sk-prop").sign(&mut r);
        prop_assert_eq!(signature::verify(&r, b"sk-prop"), Ok(()));

        // A changed value (signed fields only: `Signature` itself is not content).
        let keys: Vec<String> = r.ext_fields.keys().filter(|k| *k != SIGNATURE).map(str::to_owned).collect();
        let key = &keys[which.index(keys.len())];
        if r.ext(key) != Some(replacement.as_str()) {
            let mut changed = r.clone();
            changed.ext_fields.insert(key.clone().into(), &replacement);
            prop_assert_eq!(signature::verify(&changed, b"sk-prop"), Err(VerifyError::Mismatch));
        }
        // A changed body byte, or one more byte.
        let mut changed = r.clone();
        let mut b = body.clone();
        if b.is_empty() { b.push(0) } else { let i = flip.index(b.len()); b[i] ^= 0x01; }
        changed.body = b.into();
        prop_assert_eq!(signature::verify(&changed, b"sk-prop"), Err(VerifyError::Mismatch));
        // Another access key with the same signature.
        let mut changed = r.clone();
        changed.ext_fields.insert("AccessKey".into(), "ak-other");
        prop_assert_eq!(signature::verify(&changed, b"sk-prop"), Err(VerifyError::Mismatch));
    }
}
