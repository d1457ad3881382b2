//! Turning CommitLog records into dispatch requests, shared by the live dispatch (reput)
//! thread and recovery. Java: `CommitLog#checkMessageAndReturnSize`,
//! `ReputMessageService`.

use ferromq_protocol::message::{iter_properties, keys, sysflag, MessageError, RecordOrBlank, RecordView};

use crate::dispatch_request::DispatchRequest;
use crate::DelayLevels;

/// What is at a CommitLog position.
#[derive(Debug)]
pub(crate) enum Scanned {
    /// A valid record.
    Record(DispatchRequest),
    /// The end-of-file blank: the rest of the segment is unused.
    Blank,
    /// No valid record here: the end of the data (zeros) or a torn/corrupt record.
    End(Option<MessageError>),
}

/// Parses the record at the start of `bytes`, which sits at CommitLog `offset`. With
/// `check_crc` the body CRC must match. `delays` gives schedule-topic records their delivery
/// time as tagsCode.
pub(crate) fn scan(bytes: &[u8], offset: i64, check_crc: bool, delays: &DelayLevels, keep_properties: bool) -> Scanned {
    if bytes.len() >= 4 && bytes[..4] == [0, 0, 0, 0] {
        return Scanned::End(None);
    }
    let view = match RecordView::parse(bytes) {
        Ok(RecordOrBlank::Blank { .. }) => return Scanned::Blank,
        Ok(RecordOrBlank::Record(v)) => v,
        Err(e) => return Scanned::End(Some(e)),
    };
    if check_crc {
        if let Err(e) = view.verify_body_crc() {
            return Scanned::End(Some(e));
        }
    }
    match request_from(&view, offset, delays, keep_properties) {
        Ok(req) => Scanned::Record(req),
        Err(e) => Scanned::End(Some(e)),
    }
}

fn request_from(
    view: &RecordView<'_>,
    offset: i64,
    delays: &DelayLevels,
    keep_properties: bool,
) -> Result<DispatchRequest, MessageError> {
    let topic = view.topic_str()?.to_owned();
    // One pass over the properties for the four that dispatch reads (a repeated name keeps its
    // last value, as `find_property` and Java do).
    let properties = view.properties_str()?;
    let (mut delay, mut tags, mut message_keys, mut uniq_key) = (None, None, None, None);
    for (name, value) in iter_properties(properties) {
        match name {
            keys::DELAY => delay = Some(value),
            keys::TAGS => tags = Some(value),
            keys::KEYS => message_keys = Some(value),
            keys::UNIQ_KEY => uniq_key = Some(value),
            _ => {}
        }
    }
    let tags_code = match delays.schedule_tags_code(&topic, delay, view.store_timestamp_ms) {
        Some(deliver_at) => deliver_at,
        None => ferromq_protocol::message::tags_code(tags),
    };
    let keys = message_keys.map(str::to_owned);
    let uniq_key = uniq_key.map(str::to_owned);
    Ok(DispatchRequest {
        topic,
        queue_id: view.queue_id,
        commit_log_offset: offset,
        msg_size: view.total_size as i32,
        tags_code,
        store_timestamp: view.store_timestamp_ms,
        consume_queue_offset: view.queue_offset,
        keys,
        uniq_key,
        sys_flag: view.sys_flag,
        prepared_transaction_offset: view.prepared_transaction_offset,
        properties: keep_properties.then(|| properties.to_owned()),
    })
}

/// Whether the record belongs in its ConsumeQueue: half (prepared) and rolled-back
/// transaction records are not consumable.
pub(crate) fn goes_to_consume_queue(req: &DispatchRequest) -> bool {
    matches!(sysflag::transaction_value(req.sys_flag), sysflag::TRANSACTION_NOT_TYPE | sysflag::TRANSACTION_COMMIT_TYPE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferromq_protocol::message::StoredMessage;

    fn scanned(topic: &str, properties: &str) -> DispatchRequest {
        let host = "127.0.0.1:10911".parse().unwrap();
        let msg = StoredMessage {
            topic: topic.into(),
            body: bytes::Bytes::from_static(b"b"),
            born_host: host,
            store_host: host,
            store_timestamp_ms: 10_000,
            properties: properties.into(),
            ..StoredMessage::default()
        };
        let bytes = msg.encode().unwrap();
        let delays = DelayLevels::parse("1s 5s").unwrap();
        match scan(&bytes, 0, true, &delays, true) {
            Scanned::Record(req) => req,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn one_pass_reads_tags_keys_uniq_key_and_the_delay_of_schedule_records() {
        let req = scanned("T", "TAGS\u{1}a\u{2}KEYS\u{1}k1 k2\u{2}UNIQ_KEY\u{1}U\u{2}DELAY\u{1}2\u{2}TAGS\u{1}b\u{2}");
        assert_eq!(req.tags_code, ferromq_protocol::message::tags_code(Some("b")), "the last TAGS wins");
        assert_eq!((req.keys.as_deref(), req.uniq_key.as_deref()), (Some("k1 k2"), Some("U")));
        assert!(req.properties.as_deref().is_some_and(|p| p.starts_with("TAGS\u{1}a")));
        // On the schedule topic the tagsCode is the delivery time of the DELAY level.
        let req = scanned(crate::delay_level::SCHEDULE_TOPIC, "DELAY\u{1}2\u{2}TAGS\u{1}a\u{2}");
        assert_eq!(req.tags_code, 15_000);
        let req = scanned("T", "");
        assert_eq!((req.tags_code, req.keys, req.uniq_key), (0, None, None));
    }
}
