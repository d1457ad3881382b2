//! Property tests for the message formats: every encoder round-trips through its decoder, and
//! no decoder panics on arbitrary or corrupted input.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::{Bytes, BytesMut};
use ferromq_protocol::message::{
    crc32_masked, create_offset_msg_id, decode_batch, decode_offset_msg_id, encode_batch, iter_properties,
    patch_physical_offset, patch_queue_offset, patch_store_timestamp, peek_record_size, BatchEntry, MessageProperties,
    MessageVersion, RecordOrBlank, RecordView, StoredMessage, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR,
};
use proptest::prelude::*;

fn socket_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port)),
        (any::<[u8; 16]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port)),
    ]
}

/// Names without separators and values without 0x02: the entries that survive a round trip.
fn property_entries() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec(("[A-Za-z0-9_#.%]{1,16}", "[ -~\\x01é\u{1F600}]{1,24}"), 0..8)
}

fn properties() -> impl Strategy<Value = MessageProperties> {
    property_entries().prop_map(|entries| entries.into_iter().collect())
}

/// Topics of 1 to 300 bytes; V2 when they need it, otherwise either version.
fn topic_and_version() -> impl Strategy<Value = (String, MessageVersion)> {
    ("[A-Za-z0-9%_-]{1,300}", any::<bool>()).prop_map(|(topic, v2)| {
        let version = if topic.len() > 127 || v2 { MessageVersion::V2 } else { MessageVersion::V1 };
        (topic, version)
    })
}

prop_compose! {
    fn stored_message()(
        (topic, version) in topic_and_version(),
        props in properties(),
        body in prop::collection::vec(any::<u8>(), 0..512),
        body_crc in any::<Option<u32>>(),
        ints in any::<(i32, i32, i32, i32)>(),
        longs in any::<(i64, i64, i64, i64, i64)>(),
        born_host in socket_addr(),
        store_host in socket_addr(),
    ) -> StoredMessage {
        let (queue_id, flag, sys_flag, reconsume_times) = ints;
        let (queue_offset, physical_offset, born_timestamp_ms, store_timestamp_ms, prepared_transaction_offset) = longs;
        StoredMessage {
            version,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag,
            born_timestamp_ms,
            born_host,
            store_timestamp_ms,
            store_host,
            reconsume_times,
            prepared_transaction_offset,
            body: Bytes::from(body),
            topic,
            properties: props.encode(),
        }
    }
}

/// What decoding an encoded `msg` must give back: the CRC the encoder wrote and the SYSFLAG
/// with host bits matching the addresses.
fn as_decoded(msg: &StoredMessage) -> StoredMessage {
    StoredMessage {
        body_crc: Some(msg.body_crc.unwrap_or_else(|| crc32_masked(&msg.body))),
        sys_flag: msg.effective_sys_flag(),
        ..msg.clone()
    }
}

fn batch_entry() -> impl Strategy<Value = BatchEntry> {
    (any::<i32>(), prop::collection::vec(any::<u8>(), 0..256), properties())
        .prop_map(|(flag, body, props)| BatchEntry { flag, body: Bytes::from(body), properties: props.encode() })
}

/// A valid record with a few bytes overwritten and possibly cut short.
fn corrupted_record() -> impl Strategy<Value = Vec<u8>> {
    (
        stored_message(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(msg, edits, cut)| {
            let mut bytes = msg.encode().expect("generated messages are encodable").to_vec();
            for (at, value) in edits {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            let keep = cut.index(bytes.len() + 1);
            if keep > bytes.len() / 2 {
                bytes.truncate(keep);
            }
            bytes
        })
}

proptest! {
    #[test]
    fn record_round_trips(msg in stored_message()) {
        let encoded = msg.encode().unwrap();
        prop_assert_eq!(encoded.len(), msg.encoded_len());
        prop_assert_eq!(peek_record_size(&encoded).unwrap(), RecordOrBlank::Record(encoded.len()));

        let (decoded, used) = StoredMessage::decode(&encoded).unwrap();
        prop_assert_eq!(used, encoded.len());
        prop_assert_eq!(&decoded, &as_decoded(&msg));
        prop_assert!(decoded.verify_body_crc().is_ok() || msg.body_crc.is_some());
        prop_assert_eq!(decoded.properties_map().encode(), msg.properties.clone());

        // Re-encoding what was decoded reproduces the bytes exactly.
        prop_assert_eq!(decoded.encode().unwrap(), encoded.clone());

        let (shared, _) = StoredMessage::decode_shared(&encoded.clone().freeze()).unwrap();
        prop_assert_eq!(shared, decoded);
    }

    #[test]
    fn record_view_agrees_with_decode(msg in stored_message()) {
        let encoded = msg.encode().unwrap();
        let RecordOrBlank::Record(view) = RecordView::parse(&encoded).unwrap() else {
            return Err(TestCaseError::fail("expected a record"));
        };
        let want = as_decoded(&msg);
        prop_assert_eq!(view.total_size, encoded.len());
        prop_assert_eq!(view.queue_offset, want.queue_offset);
        prop_assert_eq!(view.physical_offset, want.physical_offset);
        prop_assert_eq!(view.store_timestamp_ms, want.store_timestamp_ms);
        prop_assert_eq!(view.sys_flag, want.sys_flag);
        prop_assert_eq!(view.body, &want.body[..]);
        prop_assert_eq!(view.topic_str().unwrap(), want.topic.as_str());
        prop_assert_eq!(view.properties_str().unwrap(), want.properties.as_str());
        prop_assert_eq!(view.tags_code().unwrap(), want.tags_code());
    }

    #[test]
    fn patched_store_fields_decode(msg in stored_message(), queue_offset: i64, physical_offset: i64, store_ms: i64) {
        let mut encoded = msg.encode().unwrap();
        patch_queue_offset(&mut encoded, queue_offset).unwrap();
        patch_physical_offset(&mut encoded, physical_offset).unwrap();
        patch_store_timestamp(&mut encoded, store_ms).unwrap();
        let (decoded, _) = StoredMessage::decode(&encoded).unwrap();
        let want = StoredMessage { queue_offset, physical_offset, store_timestamp_ms: store_ms, ..as_decoded(&msg) };
        prop_assert_eq!(decoded, want);
    }

    #[test]
    fn concatenated_records_decode_in_order(msgs in prop::collection::vec(stored_message(), 0..5)) {
        let mut buf = BytesMut::new();
        for msg in &msgs {
            msg.encode_into(&mut buf).unwrap();
        }
        let want: Vec<StoredMessage> = msgs.iter().map(as_decoded).collect();
        prop_assert_eq!(StoredMessage::decode_all(&buf).unwrap(), want);
    }

    #[test]
    fn batch_round_trips(entries in prop::collection::vec(batch_entry(), 0..6)) {
        let encoded = encode_batch(&entries).unwrap();
        prop_assert_eq!(encoded.len(), entries.iter().map(BatchEntry::encoded_len).sum::<usize>());
        prop_assert_eq!(decode_batch(&encoded.freeze()).unwrap(), entries);
    }

    #[test]
    fn properties_round_trip(entries in property_entries()) {
        let props: MessageProperties = entries.iter().cloned().collect();
        let encoded = props.encode();
        prop_assert_eq!(encoded.len(), props.encoded_len());
        let decoded = MessageProperties::decode(&encoded);
        prop_assert_eq!(&decoded, &props);
        // Later duplicates win, so each name maps to its last generated value.
        for (name, _) in &entries {
            let last = entries.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
            prop_assert_eq!(decoded.get(name), last);
        }
    }

    #[test]
    fn offset_msg_id_round_trips(host in socket_addr(), offset: i64) {
        let id = create_offset_msg_id(host, offset);
        prop_assert_eq!(id.len(), if host.is_ipv4() { 32 } else { 56 });
        prop_assert!(id.bytes().all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c)));
        prop_assert_eq!(decode_offset_msg_id(&id).unwrap(), (host, offset));
        prop_assert_eq!(decode_offset_msg_id(&id.to_lowercase()).unwrap(), (host, offset));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = StoredMessage::decode(&bytes);
        let _ = StoredMessage::decode_or_blank(&bytes);
        let _ = StoredMessage::decode_all(&bytes);
        let _ = RecordView::parse(&bytes);
        let _ = peek_record_size(&bytes);
        let _ = decode_batch(&Bytes::from(bytes.clone()));
        let text = String::from_utf8_lossy(&bytes);
        let _ = MessageProperties::decode(&text);
        let _ = iter_properties(&text).count();
        let _ = decode_offset_msg_id(&text);
        let mut scratch = bytes.clone();
        let _ = patch_queue_offset(&mut scratch, 1);
        let _ = patch_physical_offset(&mut scratch, 1);
        let _ = patch_store_timestamp(&mut scratch, 1);
    }

    #[test]
    fn corrupted_records_never_panic_and_accepted_ones_re_encode_exactly(bytes in corrupted_record()) {
        if let Ok((msg, used)) = StoredMessage::decode(&bytes) {
            // Whatever the decoder accepts, it captured completely.
            prop_assert_eq!(&msg.encode().unwrap()[..], &bytes[..used]);
        }
        let _ = StoredMessage::decode_all(&bytes);
        let _ = decode_batch(&Bytes::from(bytes));
    }

    #[test]
    fn separator_heavy_strings_never_panic(text in "[\\x01\\x02a-c]{0,64}", id in "[0-9A-Fa-fG]{30,58}") {
        let props = MessageProperties::decode(&text);
        for (name, value) in props.iter() {
            prop_assert!(!name.is_empty() && !value.is_empty());
            let clean_name = !name.contains(NAME_VALUE_SEPARATOR) && !name.contains(PROPERTY_SEPARATOR);
            prop_assert!(clean_name && !value.contains(PROPERTY_SEPARATOR));
        }
        let _ = decode_offset_msg_id(&id);
    }
}
