//! Golden-byte tests for the message formats (fact sheet sections 3.1 to 3.7).
//!
//! Every expected buffer here is built by hand, one field at a time with explicit big-endian
//! pushes, straight from the fact sheet tables. The codec output must match it byte for byte,
//! and decoding the hand-built bytes must give back the value that produced them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::{BufMut, Bytes, BytesMut};
use ferromq_protocol::message::{
    blank_marker, crc32_masked, create_offset_msg_id, decode_batch, decode_offset_msg_id, encode_batch,
    java_string_hash, keys, patch_physical_offset, patch_queue_offset, patch_store_timestamp, store_timestamp_pos,
    sysflag, tags_code, BatchEntry, MessageError, MessageProperties, MessageVersion, RecordOrBlank, RecordView,
    StoredMessage, UniqIdGenerator, BLANK_MAGIC_CODE, PHYSICAL_OFFSET_POS, QUEUE_OFFSET_POS,
};

const MAGIC_V1: u32 = 0xDAA3_20A7;
const MAGIC_V2: u32 = 0xDAA3_20AB;

fn v4(a: u8, b: u8, c: u8, d: u8, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(a, b, c, d)), port)
}

fn v6(ip: Ipv6Addr, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V6(ip), port)
}

/// The single check for records: the encoder output equals `expected`, `encoded_len` agrees,
/// and decoding `expected` gives back `msg` (with the CRC the encoder filled in) and consumes
/// exactly the whole buffer.
fn check_record(msg: &StoredMessage, expected: &[u8]) {
    let mut out = BytesMut::new();
    msg.encode_into(&mut out).expect("golden message is encodable");
    assert_eq!(hex(&out), hex(expected), "encoded bytes differ");
    assert_eq!(msg.encoded_len(), expected.len());

    let (decoded, used) = StoredMessage::decode(expected).expect("golden bytes decode");
    assert_eq!(used, expected.len());
    let mut want = msg.clone();
    want.body_crc = Some(crc32_masked(&msg.body));
    want.sys_flag = msg.effective_sys_flag();
    assert_eq!(decoded, want);
    decoded.verify_body_crc().expect("golden body CRC is right");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

#[test]
fn crc32_masked_matches_known_vectors() {
    // CRC-32/IEEE check value for "123456789" is 0xCBF43926; RocketMQ clears the top bit.
    assert_eq!(crc32_masked(b"123456789"), 0xCBF4_3926 & 0x7FFF_FFFF);
    assert_eq!(crc32_masked(b"123456789"), 0x4BF4_3926);
    assert_eq!(crc32_masked(b"Hello"), 0x77D1_8982);
    assert_eq!(crc32_masked(b""), 0);
}

#[test]
fn java_string_hash_matches_java_values() {
    // h = 31*h + c: T=84, a=97, g=103, A=65 -> 84, 2701, 83834, 2598919.
    assert_eq!(java_string_hash("TagA"), 2_598_919);
    assert_eq!(java_string_hash("hello"), 99_162_322);
    assert_eq!(java_string_hash(""), 0);
    // U+1F600 is the surrogate pair D83D DE00: 0xD83D * 31 + 0xDE00.
    assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
    assert_eq!(java_string_hash("\u{1F600}"), 1_772_899);
    // A well-known wrap-around: this string hashes to Integer.MIN_VALUE.
    assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    assert_eq!(java_string_hash("Aa"), java_string_hash("BB"));
    assert_eq!(tags_code(Some("TagA")), 2_598_919);
    assert_eq!(tags_code(Some("polygenelubricants")), i64::from(i32::MIN));
    assert_eq!(tags_code(Some("")), 0);
    assert_eq!(tags_code(None), 0);
}

#[test]
fn v1_ipv4_record_matches_hand_built_bytes() {
    let msg = StoredMessage {
        version: MessageVersion::V1,
        body_crc: None,
        queue_id: 3,
        flag: 16,
        queue_offset: 42,
        physical_offset: 0x1234_5678,
        sys_flag: 0,
        born_timestamp_ms: 1_700_000_000_123,
        born_host: v4(192, 168, 1, 20, 53122),
        store_timestamp_ms: 1_700_000_000_456,
        store_host: v4(10, 0, 0, 7, 10911),
        reconsume_times: 1,
        prepared_transaction_offset: 0,
        body: Bytes::from_static(b"Hello"),
        topic: "TopicTest".to_owned(),
        properties: "TAGS\u{1}TagA\u{2}".to_owned(),
    };

    let mut e = BytesMut::new();
    e.put_i32(115); // TOTALSIZE = 91 + 5 + 9 + 10
    e.put_u32(MAGIC_V1);
    e.put_u32(0x77D1_8982); // masked CRC of "Hello"
    e.put_i32(3); // QUEUEID
    e.put_i32(16); // FLAG
    e.put_i64(42); // QUEUEOFFSET
    e.put_i64(0x1234_5678); // PHYSICALOFFSET
    e.put_i32(0); // SYSFLAG
    e.put_i64(1_700_000_000_123); // BORNTIMESTAMP
    e.put_slice(&[192, 168, 1, 20]);
    e.put_i32(53122); // BORNHOST
    e.put_i64(1_700_000_000_456); // STORETIMESTAMP
    e.put_slice(&[10, 0, 0, 7]);
    e.put_i32(10911); // STOREHOSTADDRESS
    e.put_i32(1); // RECONSUMETIMES
    e.put_i64(0); // PREPARED TRANSACTION OFFSET
    e.put_i32(5);
    e.put_slice(b"Hello");
    e.put_u8(9);
    e.put_slice(b"TopicTest");
    e.put_i16(10);
    e.put_slice(b"TAGS\x01TagA\x02");
    assert_eq!(e.len(), 115);

    check_record(&msg, &e);

    // The header view reads the same fields without allocating.
    let RecordOrBlank::Record(view) = RecordView::parse(&e).unwrap() else {
        panic!("expected a record");
    };
    assert_eq!(view.total_size, 115);
    assert_eq!(view.version, MessageVersion::V1);
    assert_eq!(view.queue_id, 3);
    assert_eq!(view.queue_offset, 42);
    assert_eq!(view.physical_offset, 0x1234_5678);
    assert_eq!(view.store_timestamp_ms, 1_700_000_000_456);
    assert_eq!(view.body, b"Hello");
    assert_eq!(view.topic, b"TopicTest");
    assert_eq!(view.properties, b"TAGS\x01TagA\x02");
    assert_eq!(view.property(keys::TAGS).unwrap(), Some("TagA"));
    assert_eq!(view.tags_code().unwrap(), 2_598_919);
}

#[test]
fn store_fields_can_be_patched_at_fixed_positions() {
    assert_eq!(QUEUE_OFFSET_POS, 20);
    assert_eq!(PHYSICAL_OFFSET_POS, 28);
    assert_eq!(store_timestamp_pos(0), 56);
    assert_eq!(store_timestamp_pos(sysflag::BORNHOST_V6_FLAG), 68);
    // The store-host flag does not move STORETIMESTAMP, only the born-host flag does.
    assert_eq!(store_timestamp_pos(sysflag::STOREHOSTADDRESS_V6_FLAG), 56);

    for born_host in [v4(1, 2, 3, 4, 5), v6(Ipv6Addr::LOCALHOST, 6)] {
        let filled = StoredMessage {
            queue_offset: 9_000,
            physical_offset: 1 << 40,
            store_timestamp_ms: 1_700_000_000_999,
            born_host,
            body: Bytes::from_static(b"payload"),
            topic: "T".to_owned(),
            ..StoredMessage::default()
        };
        let blank = StoredMessage { queue_offset: 0, physical_offset: 0, store_timestamp_ms: 0, ..filled.clone() };
        let mut want = BytesMut::new();
        filled.encode_into(&mut want).unwrap();
        let mut got = BytesMut::new();
        blank.encode_into(&mut got).unwrap();
        assert_ne!(got, want);
        patch_queue_offset(&mut got, 9_000).unwrap();
        patch_physical_offset(&mut got, 1 << 40).unwrap();
        patch_store_timestamp(&mut got, 1_700_000_000_999).unwrap();
        assert_eq!(got, want);
    }

    let mut short = [0u8; 30];
    assert!(matches!(patch_physical_offset(&mut short, 1), Err(MessageError::Truncated { .. })));
    assert!(matches!(patch_store_timestamp(&mut short, 1), Err(MessageError::Truncated { .. })));
}

#[test]
fn v2_record_uses_two_byte_topic_length() {
    let topic = format!("%RETRY%{}", "G".repeat(130));
    assert_eq!(topic.len(), 137);
    assert_eq!(MessageVersion::for_topic_len(topic.len()), MessageVersion::V2);
    assert_eq!(MessageVersion::for_topic_len(127), MessageVersion::V1);
    let msg = StoredMessage {
        version: MessageVersion::V2,
        body_crc: None,
        queue_id: 0,
        flag: 0,
        queue_offset: 7,
        physical_offset: 4096,
        sys_flag: sysflag::TRANSACTION_COMMIT_TYPE,
        born_timestamp_ms: 1,
        born_host: v4(127, 0, 0, 1, 40000),
        store_timestamp_ms: 2,
        store_host: v4(127, 0, 0, 1, 10911),
        reconsume_times: 0,
        prepared_transaction_offset: 777,
        body: Bytes::new(),
        topic: topic.clone(),
        properties: "UNIQ_KEY\u{1}ABC\u{2}".to_owned(),
    };

    let mut e = BytesMut::new();
    e.put_i32(91 + 1 + 137 + 13); // V2 topic length is 2 bytes: one more than V1
    e.put_u32(MAGIC_V2);
    e.put_u32(0); // CRC of the empty body
    e.put_i32(0);
    e.put_i32(0);
    e.put_i64(7);
    e.put_i64(4096);
    e.put_i32(0x8);
    e.put_i64(1);
    e.put_slice(&[127, 0, 0, 1]);
    e.put_i32(40000);
    e.put_i64(2);
    e.put_slice(&[127, 0, 0, 1]);
    e.put_i32(10911);
    e.put_i32(0);
    e.put_i64(777);
    e.put_i32(0); // empty body
    e.put_i16(137);
    e.put_slice(topic.as_bytes());
    e.put_i16(13);
    e.put_slice(b"UNIQ_KEY\x01ABC\x02");
    assert_eq!(e.len(), 242);

    check_record(&msg, &e);
}

#[test]
fn v1_rejects_topics_longer_than_127_bytes() {
    let msg = StoredMessage { topic: "t".repeat(128), ..StoredMessage::default() };
    let mut out = BytesMut::new();
    assert!(matches!(msg.encode_into(&mut out), Err(MessageError::TooLong { field: "TOPIC", length: 128, max: 127 })));
    assert!(out.is_empty(), "nothing is written on error");
}

#[test]
fn ipv6_record_sets_host_flags_from_addresses() {
    let born = v6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), 40000);
    let store = v6(Ipv6Addr::LOCALHOST, 10911);
    let msg = StoredMessage {
        version: MessageVersion::V1,
        body_crc: None,
        queue_id: 1,
        flag: 0,
        queue_offset: 0,
        physical_offset: 0,
        sys_flag: 0, // the encoder must set 0x10 | 0x20 itself
        born_timestamp_ms: 10,
        born_host: born,
        store_timestamp_ms: 20,
        store_host: store,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: Bytes::from_static(b"x"),
        topic: "T".to_owned(),
        properties: String::new(),
    };
    assert_eq!(msg.effective_sys_flag(), 0x30);

    let mut e = BytesMut::new();
    e.put_i32(91 + 12 + 12 + 1 + 1); // two 20-byte hosts instead of 8-byte ones
    e.put_u32(MAGIC_V1);
    e.put_u32(0x0CDC_1683); // masked CRC of "x"
    e.put_i32(1);
    e.put_i32(0);
    e.put_i64(0);
    e.put_i64(0);
    e.put_i32(0x30);
    e.put_i64(10);
    e.put_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    e.put_i32(40000);
    assert_eq!(e.len(), 68, "STORETIMESTAMP sits at 68 after an IPv6 born host");
    e.put_i64(20);
    e.put_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    e.put_i32(10911);
    e.put_i32(0);
    e.put_i64(0);
    e.put_i32(1);
    e.put_slice(b"x");
    e.put_u8(1);
    e.put_slice(b"T");
    e.put_i16(0);
    assert_eq!(e.len(), 117);

    check_record(&msg, &e);

    // A stale V6 flag on an IPv4 host is cleared, so the layout always matches the address.
    let mixed = StoredMessage { born_host: v4(1, 1, 1, 1, 1), sys_flag: 0x30 | 0x1, ..msg };
    assert_eq!(mixed.effective_sys_flag(), 0x20 | 0x1);
}

#[test]
fn blank_marker_is_remaining_then_blank_magic() {
    assert_eq!(BLANK_MAGIC_CODE, 0xCBD4_3194);
    let mut e = BytesMut::new();
    e.put_i32(4096);
    e.put_u32(0xCBD4_3194);
    assert_eq!(blank_marker(4096).unwrap().as_slice(), &e[..]);

    // The blank is recognised with only its 8 bytes present: the rest of the file may be unmapped.
    assert_eq!(StoredMessage::decode_or_blank(&e).unwrap(), RecordOrBlank::Blank { remaining: 4096 });
    assert_eq!(RecordView::parse(&e).unwrap(), RecordOrBlank::Blank { remaining: 4096 });
    assert!(matches!(StoredMessage::decode(&e), Err(MessageError::UnexpectedBlank { offset: 0, remaining: 4096 })));
    assert!(blank_marker(7).is_err(), "a blank always covers its own 8 bytes");
}

#[test]
fn batch_body_matches_hand_built_bytes() {
    let entries = vec![
        BatchEntry { flag: 0, body: Bytes::from_static(b"a"), properties: "UNIQ_KEY\u{1}X\u{2}".to_owned() },
        BatchEntry { flag: 7, body: Bytes::new(), properties: String::new() },
    ];
    let mut e = BytesMut::new();
    e.put_i32(34); // 4+4+4+4 + 4+1 + 2+11
    e.put_i32(0); // MAGICCODE sent as 0
    e.put_i32(0); // BODYCRC sent as 0
    e.put_i32(0); // FLAG
    e.put_i32(1);
    e.put_slice(b"a");
    e.put_i16(11);
    e.put_slice(b"UNIQ_KEY\x01X\x02");
    e.put_i32(22);
    e.put_i32(0);
    e.put_i32(0);
    e.put_i32(7);
    e.put_i32(0);
    e.put_i16(0);

    let out = encode_batch(&entries).unwrap();
    assert_eq!(hex(&out), hex(&e));
    assert_eq!(decode_batch(&e.freeze()).unwrap(), entries);
}

#[test]
fn offset_msg_id_is_upper_hex_of_host_port_offset() {
    // 127.0.0.1 = 7F000001, port 10911 = 0x2A9F, offset 0x1234.
    let id = create_offset_msg_id(v4(127, 0, 0, 1, 10911), 0x1234);
    assert_eq!(id, "7F00000100002A9F0000000000001234");
    assert_eq!(decode_offset_msg_id(&id).unwrap(), (v4(127, 0, 0, 1, 10911), 0x1234));
    assert_eq!(
        decode_offset_msg_id("7f00000100002a9f0000000000001234").unwrap(),
        (v4(127, 0, 0, 1, 10911), 0x1234),
        "lower-case hex is accepted, as Java upper-cases before parsing"
    );

    let id6 = create_offset_msg_id(v6(Ipv6Addr::LOCALHOST, 10911), 1);
    assert_eq!(id6, "00000000000000000000000000000001".to_owned() + "00002A9F" + "0000000000000001");
    assert_eq!(id6.len(), 56);
    assert_eq!(decode_offset_msg_id(&id6).unwrap(), (v6(Ipv6Addr::LOCALHOST, 10911), 1));

    assert!(decode_offset_msg_id("7F00000100002A9F000000000000123").is_err());
    assert!(decode_offset_msg_id("7F00000100002A9F000000000000123G").is_err());
    // Port 0x10000 does not fit a socket address.
    assert!(decode_offset_msg_id("7F000001000100000000000000001234").is_err());
}

#[test]
fn properties_string_matches_hand_built_bytes() {
    let mut props = MessageProperties::new();
    props.insert(keys::KEYS, "k1 k2");
    props.insert(keys::TAGS, "TagA");
    props.insert(keys::WAIT, "true");
    let mut e: Vec<u8> = Vec::new();
    e.extend_from_slice(b"KEYS");
    e.push(0x01);
    e.extend_from_slice(b"k1 k2");
    e.push(0x02);
    e.extend_from_slice(b"TAGS");
    e.push(0x01);
    e.extend_from_slice(b"TagA");
    e.push(0x02);
    e.extend_from_slice(b"WAIT");
    e.push(0x01);
    e.extend_from_slice(b"true");
    e.push(0x02);
    assert_eq!(props.encode().as_bytes(), &e[..]);
    assert_eq!(props.encoded_len(), e.len());
    assert_eq!(MessageProperties::decode(std::str::from_utf8(&e).unwrap()), props);
}

#[test]
fn properties_decode_is_tolerant_like_java() {
    // Empty segments, a segment without a key, a key without a value and a value-only segment are
    // all skipped; the last segment may lack its trailing separator.
    let props = MessageProperties::decode("\u{2}\u{2}ab\u{2}\u{1}x\u{2}k\u{1}\u{2}K\u{1}V");
    assert_eq!(props.iter().collect::<Vec<_>>(), vec![("K", "V")]);
    // A later duplicate wins, as with Java's HashMap.
    let dup = MessageProperties::decode("a\u{1}1\u{2}b\u{1}2\u{2}a\u{1}3\u{2}");
    assert_eq!(dup.iter().collect::<Vec<_>>(), vec![("a", "3"), ("b", "2")]);
    // Only the first 0x01 splits: the value keeps later ones.
    let sep = MessageProperties::decode("k\u{1}v\u{1}w\u{2}");
    assert_eq!(sep.get("k"), Some("v\u{1}w"));
    assert_eq!(keys::KEY_SEPARATOR, " ");
}

#[test]
fn uniq_id_layout_is_ip_pid_random_time_counter() {
    // 2024-03-01T00:00:00Z is 1_709_251_200_000 ms; 1.5 s later the month delta is 1500 = 0x5DC.
    let gen = UniqIdGenerator::with_parts(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 0x1234, 0x0A0B_0C0D);
    let now_ms = 1_709_251_200_000 + 1_500;
    assert_eq!(gen.next_id_at(now_ms), "0A000001".to_owned() + "1234" + "0A0B0C0D" + "000005DC" + "0000");
    assert_eq!(gen.next_id_at(now_ms), "0A000001".to_owned() + "1234" + "0A0B0C0D" + "000005DC" + "0001");

    let gen6 = UniqIdGenerator::with_parts(IpAddr::V6(Ipv6Addr::LOCALHOST), -1, -1);
    let id6 = gen6.next_id_at(now_ms);
    assert_eq!(id6.len(), 56);
    assert_eq!(&id6[32..36], "FFFF");

    let live = UniqIdGenerator::new(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let a = live.next_id();
    let b = live.next_id();
    assert_eq!(a.len(), 32);
    assert_ne!(a, b);
    assert!(a.bytes().all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c)));
}
