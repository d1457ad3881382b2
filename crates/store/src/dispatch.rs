//! Turning CommitLog records into dispatch requests, shared by the live dispatch (reput)
//! thread and recovery. Java: `CommitLog#checkMessageAndReturnSize`,
//! `ReputMessageService`.

use ferromq_protocol::message::{keys, sysflag, MessageError, RecordOrBlank, RecordView};

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
    let tags_code = match delays.schedule_tags_code(&topic, view.property(keys::DELAY)?, view.store_timestamp_ms) {
        Some(deliver_at) => deliver_at,
        None => view.tags_code()?,
    };
    let keys = view.property(keys::KEYS)?.map(str::to_owned);
    let uniq_key = view.property(keys::UNIQ_KEY)?.map(str::to_owned);
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
        properties: if keep_properties { Some(view.properties_str()?.to_owned()) } else { None },
    })
}

/// Whether the record belongs in its ConsumeQueue: half (prepared) and rolled-back
/// transaction records are not consumable.
pub(crate) fn goes_to_consume_queue(req: &DispatchRequest) -> bool {
    matches!(sysflag::transaction_value(req.sys_flag), sysflag::TRANSACTION_NOT_TYPE | sysflag::TRANSACTION_COMMIT_TYPE)
}
