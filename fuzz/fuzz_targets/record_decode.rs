//! The stored message record parsers on arbitrary bytes: `peek_record_size`,
//! `RecordView::parse`, `StoredMessage::decode` / `decode_or_blank` / `decode_shared`,
//! `decode_all` and `iter_shared`.
//!
//! Input: byte 0 is a mode; the rest is the buffer. Mode bit 0 set overwrites TOTALSIZE with
//! the buffer length (when it has 4 bytes), so the fuzzer reaches the inner fields without
//! having to keep TOTALSIZE consistent itself. Checks:
//! - nothing panics;
//! - the parsers agree with each other (peek size = view size = decoded length; a view whose
//!   topic and properties are UTF-8 decodes to an owned record; shared and copying decodes
//!   are equal);
//! - a decoded record encodes back to exactly the bytes it was read from, singly and as the
//!   concatenation `decode_all` read.
#![no_main]

use bytes::Bytes;
use ferromq_protocol::message::{peek_record_size, MessageError, RecordOrBlank, RecordView, StoredMessage};
use libfuzzer_sys::fuzz_target;

fn exercise(msg: &StoredMessage) {
    // Accessors must not panic on any decoded record.
    let _ = msg.verify_body_crc();
    let _ = msg.tags_code();
    let _ = msg.offset_msg_id();
    let _ = msg.properties_map();
    let _ = msg.effective_sys_flag();
    assert!(msg.validate().is_ok(), "a decoded record fails validate(): {msg:?}");
}

fn check_view(view: &RecordView<'_>, buf: &[u8]) {
    assert_eq!(view.bytes.len(), view.total_size);
    assert_eq!(view.bytes, &buf[..view.total_size]);
    assert_eq!(view.body, &buf[view.body_pos()..view.body_pos() + view.body.len()]);
    assert_eq!(view.topic, &buf[view.topic_pos()..view.topic_pos() + view.topic.len()]);
    assert_eq!(view.properties, &buf[view.properties_pos()..view.properties_pos() + view.properties.len()]);
    let _ = view.verify_body_crc();
    let _ = view.tags_code();
    let _ = view.property("TAGS");
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut buf = rest.to_vec();
    if mode & 1 == 1 && buf.len() >= 4 {
        let len = i32::try_from(buf.len()).unwrap_or(i32::MAX);
        buf[..4].copy_from_slice(&len.to_be_bytes());
    }
    let buf = &buf[..];

    let peeked = peek_record_size(buf);
    let parsed = RecordView::parse(buf);
    match (&peeked, &parsed) {
        (Ok(RecordOrBlank::Blank { remaining: a }), Ok(RecordOrBlank::Blank { remaining: b })) => assert_eq!(a, b),
        (Ok(RecordOrBlank::Record(size)), Ok(RecordOrBlank::Record(view))) => {
            assert_eq!(*size, view.total_size);
            check_view(view, buf);
        }
        (Ok(RecordOrBlank::Record(size)), Err(_)) => assert!(*size >= 91),
        (Err(a), Err(b)) => assert_eq!(a, b, "peek and parse disagree on the prefix error"),
        (a, b) => panic!("peek_record_size {a:?} but RecordView::parse {b:?}"),
    }

    let decoded = StoredMessage::decode(buf);
    match (&parsed, &decoded) {
        (Ok(RecordOrBlank::Record(view)), Ok((msg, len))) => {
            assert_eq!(*len, view.total_size);
            assert_eq!(&msg.body[..], view.body);
            exercise(msg);
            let encoded = msg.encode().expect("a decoded record re-encodes");
            assert_eq!(&encoded[..], &buf[..*len], "re-encoding changed the record bytes");
        }
        (Ok(RecordOrBlank::Record(view)), Err(e)) => {
            assert!(matches!(e, MessageError::InvalidUtf8 { .. }), "view parsed but decode failed with {e:?}");
            assert!(view.topic_str().is_err() || view.properties_str().is_err());
        }
        (Ok(RecordOrBlank::Blank { .. }), Err(MessageError::UnexpectedBlank { offset: 0, .. })) => {}
        (Err(a), Err(b)) => assert_eq!(a, b),
        (a, b) => panic!("RecordView::parse {a:?} but StoredMessage::decode {b:?}"),
    }

    let shared_buf = Bytes::copy_from_slice(buf);
    let shared = StoredMessage::decode_shared(&shared_buf);
    assert_eq!(shared, decoded, "decode_shared and decode disagree");
    match StoredMessage::decode_or_blank(buf) {
        Ok(RecordOrBlank::Record(pair)) => assert_eq!(Ok(pair), decoded),
        Ok(RecordOrBlank::Blank { .. }) => assert!(matches!(parsed, Ok(RecordOrBlank::Blank { .. }))),
        Err(e) => assert_eq!(Err(e), decoded),
    }

    // The whole buffer as a concatenation of records (a pull response body).
    let all = StoredMessage::decode_all(buf);
    let iterated: Result<Vec<StoredMessage>, MessageError> = StoredMessage::iter_shared(shared_buf).collect();
    assert_eq!(all, iterated, "decode_all and iter_shared disagree");
    if let Ok(records) = all {
        let mut encoded = Vec::with_capacity(buf.len());
        for msg in &records {
            exercise(msg);
            encoded.extend_from_slice(&msg.encode().expect("a decoded record re-encodes"));
        }
        assert_eq!(encoded, buf, "re-encoding decode_all's records changed the bytes");
        if let Some(first) = records.first() {
            assert_eq!(Ok(first), decoded.as_ref().map(|(m, _)| m));
        }
    }
});
