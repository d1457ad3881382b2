//! Turning CommitLog records into dispatch requests, shared by the live dispatch (reput)
//! thread and recovery. Java: `CommitLog#checkMessageAndReturnSize`,
//! `ReputMessageService`.

use ferromq_protocol::message::{iter_properties, keys, sysflag, MessageError, RecordOrBlank, RecordView};

use crate::dispatch_request::DispatchRequest;
use crate::DelayLevels;

/// What is at a CommitLog position: a valid record (as `R` says it), the end-of-file blank, or
/// the end of the data.
#[derive(Debug)]
pub(crate) enum Found<R> {
    /// A valid record.
    Record(R),
    /// The end-of-file blank: the rest of the segment is unused.
    Blank,
    /// No valid record here: the end of the data (zeros) or a torn/corrupt record.
    End(Option<MessageError>),
}

/// A record decoded into its dispatch request ([`scan`]).
pub(crate) type Scanned = Found<DispatchRequest>;

/// A record checked, not decoded: its size ([`check`]).
pub(crate) type Checked = Found<usize>;

impl<R> Found<R> {
    /// The same finding with the record told by `f`.
    pub(crate) fn map<S>(self, f: impl FnOnce(R) -> S) -> Found<S> {
        match self {
            Found::Record(r) => Found::Record(f(r)),
            Found::Blank => Found::Blank,
            Found::End(reason) => Found::End(reason),
        }
    }
}

/// The record at the start of `bytes`, its body CRC verified with `check_crc`; what is there
/// instead when it is no valid record.
fn record_at<R>(bytes: &[u8], check_crc: bool) -> Result<RecordView<'_>, Found<R>> {
    if bytes.len() >= 4 && bytes[..4] == [0, 0, 0, 0] {
        return Err(Found::End(None));
    }
    let view = match RecordView::parse(bytes) {
        Ok(RecordOrBlank::Blank { .. }) => return Err(Found::Blank),
        Ok(RecordOrBlank::Record(v)) => v,
        Err(e) => return Err(Found::End(Some(e))),
    };
    if check_crc {
        view.verify_body_crc().map_err(|e| Found::End(Some(e)))?;
    }
    Ok(view)
}

/// Parses the record at the start of `bytes`, which sits at CommitLog `offset`. With
/// `check_crc` the body CRC must match. `delays` gives schedule-topic records their delivery
/// time as tagsCode.
pub(crate) fn scan(bytes: &[u8], offset: i64, check_crc: bool, delays: &DelayLevels, keep_properties: bool) -> Scanned {
    let view = match record_at(bytes, check_crc) {
        Ok(view) => view,
        Err(found) => return found,
    };
    match request_from(&view, offset, delays, keep_properties) {
        Ok(req) => Found::Record(req),
        Err(e) => Found::End(Some(e)),
    }
}

/// [`scan`] without building the dispatch request (recovery of records the consume queues
/// already hold): the same checks (layout, body CRC with `check_crc`, a UTF-8 topic and
/// properties) and no allocation.
pub(crate) fn check(bytes: &[u8], check_crc: bool) -> Checked {
    let view = match record_at(bytes, check_crc) {
        Ok(view) => view,
        Err(found) => return found,
    };
    match view.topic_str().and_then(|_| view.properties_str()) {
        Ok(_) => Found::Record(view.total_size),
        Err(e) => Found::End(Some(e)),
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
    let (mut light_names, mut light_offsets) = (None, None);
    for (name, value) in iter_properties(properties) {
        match name {
            keys::DELAY => delay = Some(value),
            keys::TAGS => tags = Some(value),
            keys::KEYS => message_keys = Some(value),
            keys::UNIQ_KEY => uniq_key = Some(value),
            keys::INNER_MULTI_DISPATCH => light_names = Some(value),
            keys::INNER_MULTI_QUEUE_OFFSET => light_offsets = Some(value),
            _ => {}
        }
    }
    let light_queues = match (light_names, light_offsets) {
        (Some(names), Some(offsets)) if crate::lmq::topic_allows_lmq(&topic) => {
            crate::lmq::dispatch_targets(names, offsets).unwrap_or_else(|| {
                tracing::warn!(
                    topic,
                    offset,
                    names,
                    offsets,
                    "record's light queue offsets do not match its light queues; not dispatched to them"
                );
                Vec::new()
            })
        }
        _ => Vec::new(),
    };
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
        light_queues,
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

    /// The outcome of `check` as `scan` would report it, for comparing the two.
    fn outcome_of_scan(bytes: &[u8], check_crc: bool) -> String {
        match scan(bytes, 0, check_crc, &DelayLevels::default(), false) {
            Scanned::Record(req) => format!("record {}", req.msg_size),
            Scanned::Blank => "blank".into(),
            Scanned::End(reason) => format!("end {}", reason.is_some()),
        }
    }

    fn outcome_of_check(bytes: &[u8], check_crc: bool) -> String {
        match check(bytes, check_crc) {
            Checked::Record(size) => format!("record {size}"),
            Checked::Blank => "blank".into(),
            Checked::End(reason) => format!("end {}", reason.is_some()),
        }
    }

    #[test]
    fn check_agrees_with_scan_on_good_blank_torn_and_corrupt_records() {
        let host = "127.0.0.1:10911".parse().unwrap();
        let msg = StoredMessage {
            topic: "TopicX".into(),
            body: bytes::Bytes::from_static(b"the body"),
            born_host: host,
            store_host: host,
            properties: "TAGS\u{1}a\u{2}".into(),
            ..StoredMessage::default()
        };
        let good = msg.encode().unwrap().to_vec();
        let mut bad_crc = good.clone();
        let body_at = good.windows(8).position(|w| w == b"the body").unwrap();
        bad_crc[body_at] ^= 0xFF;
        let mut bad_topic = good.clone();
        let topic_at = good.windows(6).position(|w| w == b"TopicX").unwrap();
        bad_topic[topic_at] = 0xFF;
        let mut blank = vec![0u8; 64];
        blank[..4].copy_from_slice(&64u32.to_be_bytes());
        blank[4..8].copy_from_slice(&ferromq_protocol::message::BLANK_MAGIC_CODE.to_be_bytes());
        let cases: [(&str, &[u8], bool, &str); 8] = [
            ("good", &good, true, "record"),
            ("zeros", &[0u8; 64], true, "end false"),
            ("blank", &blank, true, "blank"),
            ("torn", &good[..good.len() / 2], true, "end true"),
            ("bad CRC, checked", &bad_crc, true, "end true"),
            ("bad CRC, not checked", &bad_crc, false, "record"),
            ("topic not UTF-8", &bad_topic, true, "end true"),
            ("garbage", &[0x7F, 0xFF, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05], true, "end true"),
        ];
        for (what, bytes, check_crc, want) in cases {
            let (by_scan, by_check) = (outcome_of_scan(bytes, check_crc), outcome_of_check(bytes, check_crc));
            assert_eq!(by_check, by_scan, "{what}");
            assert!(by_check.starts_with(want), "{what}: {by_check}");
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
