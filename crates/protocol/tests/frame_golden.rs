//! Golden-byte tests of the remoting frame and both header serializations, with the expected
//! bytes built field by field from the fact sheet (sections 1.1-1.3).

use bytes::{BufMut, BytesMut};
use ferromq_protocol::header::{
    GetRouteInfoRequestHeader, RegisterBrokerRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
};
use ferromq_protocol::{
    decode_frame, encode_frame, encode_frame_head, request_code, CommandHeader, FrameError, HeaderError, LanguageCode,
    RemotingCommand, SerializeType, MAX_FRAME_BYTES,
};

fn route_request() -> RemotingCommand {
    let mut cmd = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_opaque(3);
    cmd.language = LanguageCode::Java;
    cmd.version = 479;
    cmd.with_header(&GetRouteInfoRequestHeader { topic: "TopicTest".into(), accept_standard_json_only: None })
}

fn frame_by_hand(type_code: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.put_i32((4 + header.len() + body.len()) as i32);
    v.put_u32((u32::from(type_code) << 24) | header.len() as u32);
    v.put_slice(header);
    v.put_slice(body);
    v
}

#[test]
fn a_body_in_parts_frames_as_its_bytes_in_order() {
    let header = br#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":479}"#;
    let expected = frame_by_hand(0, header, b"first;second;third");
    let parts = vec![
        bytes::Bytes::from_static(b"first;"),
        bytes::Bytes::from_static(b"second;"),
        bytes::Bytes::new(),
        bytes::Bytes::from_static(b"third"),
    ];
    let cmd = route_request().with_body_parts(parts);
    let mut out = BytesMut::new();
    encode_frame(&cmd, SerializeType::Json, &mut out).unwrap();
    assert_eq!(&out[..], &expected[..]);
    // The head: the length counts the whole body, the first part follows the header, the
    // tail is the writer's to append.
    let mut head = BytesMut::new();
    encode_frame_head(&cmd, SerializeType::Json, &mut head).unwrap();
    assert_eq!(&head[..], &expected[..expected.len() - b"second;third".len()]);
    let decoded = decode_frame(&mut out, MAX_FRAME_BYTES).unwrap().unwrap();
    assert_eq!((decoded.body.as_ref(), decoded.body_tail.len()), (&b"first;second;third"[..], 0));
}

#[test]
fn json_header_matches_fact_sheet_example() {
    let header = br#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":479}"#;
    let expected = frame_by_hand(0, header, b"");
    let mut out = BytesMut::new();
    encode_frame(&route_request(), SerializeType::Json, &mut out).unwrap();
    assert_eq!(&out[..], &expected[..], "\n got: {}", String::from_utf8_lossy(&out[8..]));
}

#[test]
fn binary_header_matches_layout_built_by_hand() {
    let mut cmd = route_request().with_body(&b"xyz"[..]);
    cmd.remark = Some("ok".into());
    let mut header = Vec::new();
    header.put_i16(105); // code
    header.put_u8(0); // language JAVA
    header.put_i16(479); // version
    header.put_i32(3); // opaque
    header.put_i32(0); // flag
    header.put_i32(2); // remark length
    header.put_slice(b"ok");
    let mut ext = Vec::new();
    ext.put_i16(5);
    ext.put_slice(b"topic");
    ext.put_i32(9);
    ext.put_slice(b"TopicTest");
    header.put_i32(ext.len() as i32);
    header.put_slice(&ext);
    // code 2 + language 1 + version 2 + opaque 4 + flag 4 + remark length 4 + ext length 4.
    assert_eq!(header.len(), 21 + 2 + ext.len());
    let expected = frame_by_hand(1, &header, b"xyz");

    let mut out = BytesMut::new();
    encode_frame(&cmd, SerializeType::RocketMq, &mut out).unwrap();
    assert_eq!(&out[..], &expected[..]);

    let mut buf = BytesMut::from(&expected[..]);
    let decoded = decode_frame(&mut buf, MAX_FRAME_BYTES).unwrap().unwrap();
    assert_eq!(decoded, cmd);
    assert!(buf.is_empty());
}

#[test]
fn binary_header_with_null_remark_and_no_ext_fields_is_twenty_one_bytes() {
    let cmd = RemotingCommand::response(0, None).with_opaque(-7);
    let mut out = BytesMut::new();
    encode_frame(&cmd, SerializeType::RocketMq, &mut out).unwrap();
    // The fact sheet's "17 bytes" leaves out the two length words; Java's calTotalLen counts 21.
    assert_eq!(out.len(), 4 + 4 + 21);
    assert_eq!(&out[4..8], &[1, 0, 0, 21]);
    assert_eq!(&out[8..10], &[0, 0]); // code SUCCESS
    assert_eq!(out[10], 0); // JAVA
    assert_eq!(&out[13..17], &(-7i32).to_be_bytes()); // opaque
    assert_eq!(&out[17..21], &1i32.to_be_bytes()); // response flag
}

#[test]
fn json_frame_from_a_client_decodes_with_body() {
    let header = br#"{"code":310,"extFields":{"a":"pg","b":"T","c":"TBW102","d":"4","e":"-1","f":0,"g":"1700000000000","h":"0","i":"TAGS\u0001a\u0002"},"flag":0,"language":"CPP","opaque":9,"version":401}"#;
    let bytes = frame_by_hand(0, header, b"hello");
    let mut buf = BytesMut::from(&bytes[..]);
    let cmd = decode_frame(&mut buf, MAX_FRAME_BYTES).unwrap().unwrap();
    assert_eq!(cmd.code, 310);
    assert_eq!(cmd.language, LanguageCode::Cpp);
    assert_eq!(&cmd.body[..], b"hello");
    // A number where a string is usual is accepted as its decimal text.
    assert_eq!(cmd.ext("f"), Some("0"));
    let send = SendMessageRequestHeader::decode_for(cmd.code, &cmd.ext_fields).unwrap();
    assert_eq!(send.topic, "T");
    assert_eq!(send.queue_id, -1);
    assert_eq!(send.properties.as_deref(), Some("TAGS\u{1}a\u{2}"));
    assert_eq!(send.born_timestamp, 1_700_000_000_000);
}

#[test]
fn partial_frames_wait_for_more_bytes() {
    let mut full = BytesMut::new();
    encode_frame(&route_request().with_body(&b"body"[..]), SerializeType::Json, &mut full).unwrap();
    for cut in 0..full.len() {
        let mut buf = BytesMut::from(&full[..cut]);
        assert!(decode_frame(&mut buf, MAX_FRAME_BYTES).unwrap().is_none(), "cut at {cut}");
        assert_eq!(buf.len(), cut, "nothing consumed at cut {cut}");
    }
    // Two frames back to back come out one at a time.
    let mut two = full.clone();
    two.extend_from_slice(&full);
    assert!(decode_frame(&mut two, MAX_FRAME_BYTES).unwrap().is_some());
    assert!(decode_frame(&mut two, MAX_FRAME_BYTES).unwrap().is_some());
    assert!(two.is_empty());
}

#[test]
fn oversized_and_malformed_frames_are_errors() {
    let mut big = BytesMut::new();
    big.put_i32(17 * 1024 * 1024);
    assert!(matches!(decode_frame(&mut big, MAX_FRAME_BYTES), Err(FrameError::TooLarge { .. })));

    let mut short = BytesMut::new();
    short.put_i32(2);
    short.put_u16(0);
    assert!(matches!(decode_frame(&mut short, MAX_FRAME_BYTES), Err(FrameError::TooShort { .. })));

    let mut negative = BytesMut::new();
    negative.put_i32(-5);
    assert!(matches!(decode_frame(&mut negative, MAX_FRAME_BYTES), Err(FrameError::TooShort { .. })));

    let mut bad_type = BytesMut::from(&frame_by_hand(7, b"{}", b"")[..]);
    assert!(matches!(decode_frame(&mut bad_type, MAX_FRAME_BYTES), Err(FrameError::UnknownSerializeType(7))));

    let mut header_past_end = BytesMut::new();
    header_past_end.put_i32(8);
    header_past_end.put_u32(100);
    header_past_end.put_u32(0);
    assert!(matches!(
        decode_frame(&mut header_past_end, MAX_FRAME_BYTES),
        Err(FrameError::HeaderLengthExceedsFrame { header_length: 100, .. })
    ));

    let mut bad_json = BytesMut::from(&frame_by_hand(0, b"{\"code\":", b"")[..]);
    assert!(matches!(decode_frame(&mut bad_json, MAX_FRAME_BYTES), Err(FrameError::JsonHeader { .. })));

    let mut truncated_binary = BytesMut::from(&frame_by_hand(1, &[0, 105, 0], b"")[..]);
    assert!(matches!(
        decode_frame(&mut truncated_binary, MAX_FRAME_BYTES),
        Err(FrameError::BinaryHeaderTruncated { .. })
    ));
}

#[test]
fn missing_required_header_field_names_the_field() {
    let cmd = RemotingCommand::request(request_code::REGISTER_BROKER);
    let err = cmd.decode_header::<RegisterBrokerRequestHeader>().unwrap_err();
    assert_eq!(err, HeaderError::MissingField { header: "RegisterBrokerRequestHeader", field: "brokerName" });
    assert!(err.to_string().contains("brokerName"));

    let mut cmd = RemotingCommand::request(request_code::REGISTER_BROKER);
    for (k, v) in
        [("brokerName", "b"), ("brokerAddr", "a"), ("clusterName", "c"), ("haServerAddr", "h"), ("brokerId", "x1")]
    {
        cmd.ext_fields.insert(k.into(), v);
    }
    let err = cmd.decode_header::<RegisterBrokerRequestHeader>().unwrap_err();
    assert!(matches!(err, HeaderError::InvalidValue { field: "brokerId", .. }), "{err}");
}

#[test]
fn send_header_v2_uses_one_letter_keys() {
    let h = SendMessageRequestHeader {
        producer_group: "pg".into(),
        topic: "T".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 2,
        sys_flag: 0,
        born_timestamp: 5,
        flag: 0,
        properties: None,
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(true),
        max_reconsume_times: None,
        broker_name: Some("broker-a".into()),
    };
    let v2: SendMessageRequestHeaderV2 = h.clone().into();
    let ext = v2.to_ext_fields();
    let keys: Vec<&str> = ext.keys().collect();
    assert_eq!(keys, ["a", "b", "c", "d", "e", "f", "g", "h", "j", "k", "m", "n"]);
    assert_eq!(SendMessageRequestHeader::decode_for(request_code::SEND_BATCH_MESSAGE, &ext).unwrap(), h);
    assert_eq!(SendMessageRequestHeader::decode_for(request_code::SEND_MESSAGE, &h.to_ext_fields()).unwrap(), h);
    // A V2 request read with long keys is missing producerGroup.
    assert!(SendMessageRequestHeader::decode_for(request_code::SEND_MESSAGE, &ext).is_err());
}

#[test]
fn json_header_escapes_control_characters_and_round_trips() {
    let mut cmd = RemotingCommand::response(1, Some("line1\n\"quoted\"\\ tab\t é".to_owned()));
    cmd.ext_fields.insert("i".into(), "TAGS\u{1}a\u{2}KEYS\u{1}k\u{2}");
    let mut out = BytesMut::new();
    encode_frame(&cmd, SerializeType::Json, &mut out).unwrap();
    let header = String::from_utf8(out[8..].to_vec()).unwrap();
    assert!(header.contains(r#""i":"TAGS\u0001a\u0002KEYS\u0001k\u0002""#), "{header}");
    assert!(header.contains(r#""remark":"line1\n\"quoted\"\\ tab\t é""#), "{header}");
    let decoded = decode_frame(&mut out, MAX_FRAME_BYTES).unwrap().unwrap();
    assert_eq!(decoded, cmd);
}

#[test]
fn binary_header_refuses_keys_its_int16_length_cannot_hold() {
    // Found by the frame_decode fuzz target: Java writes `(short) key.length`, so a 65541-byte
    // key would wrap to 5 and the rest of the key would be read as made-up fields.
    let mut cmd = RemotingCommand::request(105);
    cmd.ext_fields.insert("k".repeat(65_541).into(), "v");
    let mut out = BytesMut::new();
    assert!(matches!(
        encode_frame(&cmd, SerializeType::RocketMq, &mut out),
        Err(FrameError::FieldTooLong { length: 65_541, .. })
    ));
    assert!(out.is_empty(), "nothing is written on error");
    // JSON has no such limit.
    encode_frame(&cmd, SerializeType::Json, &mut out).unwrap();
    assert!(decode_frame(&mut out, MAX_FRAME_BYTES).unwrap().is_some());
}
