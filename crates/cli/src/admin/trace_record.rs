//! Message trace records as Java clients write them into the trace topic (fact sheet
//! advanced-topics 6): records end with char 2, their fields are separated by char 1. This
//! module only reads them; finding the trace messages and printing them is `trace.rs`'s job.
//! Java: `TraceDataEncoder#decoderFromTraceDataString`, `TraceView#decodeFromTraceTransData`.

use std::fmt;

/// Separates the fields of one record. Java: `TraceConstants.CONTENT_SPLITOR`.
pub(crate) const FIELD_SEPARATOR: char = '\u{1}';
/// Ends each record. Java: `TraceConstants.FIELD_SPLITOR` (sic: the names are swapped there).
pub(crate) const RECORD_SEPARATOR: char = '\u{2}';

/// What a record traces. Java: `TraceType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TraceKind {
    /// A send.
    Pub,
    /// A consumer received the message (before its listener ran).
    SubBefore,
    /// The consumer's listener returned.
    SubAfter,
    /// A transactional message was committed or rolled back.
    EndTransaction,
    /// A delayed message was recalled (5.3).
    Recall,
}

impl TraceKind {
    /// Java's name of the kind, as it starts each record.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TraceKind::Pub => "Pub",
            TraceKind::SubBefore => "SubBefore",
            TraceKind::SubAfter => "SubAfter",
            TraceKind::EndTransaction => "EndTransaction",
            TraceKind::Recall => "Recall",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [TraceKind::Pub, TraceKind::SubBefore, TraceKind::SubAfter, TraceKind::EndTransaction, TraceKind::Recall]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

/// Java's `MessageType` names by ordinal, as Pub and EndTransaction records carry them.
const MESSAGE_TYPES: [&str; 5] = ["Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg"];

/// One decoded record: Java's `TraceContext` and its one `TraceBean`, flattened. A field the
/// record's kind does not carry is `None` (or the Java default for the numbers and `success`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TraceRecord {
    pub(crate) kind: TraceKind,
    /// When the traced step happened (ms since the epoch); 0 for SubAfter records of old or
    /// cloud clients, which do not write it.
    pub(crate) timestamp_ms: i64,
    pub(crate) region_id: Option<String>,
    /// Producer group (Pub, EndTransaction, Recall) or consumer group (Sub*).
    pub(crate) group: Option<String>,
    pub(crate) request_id: Option<String>,
    pub(crate) topic: Option<String>,
    /// The traced message's id (its UNIQ_KEY).
    pub(crate) msg_id: String,
    pub(crate) tags: Option<String>,
    pub(crate) keys: Option<String>,
    pub(crate) store_host: Option<String>,
    pub(crate) body_length: Option<i32>,
    pub(crate) cost_time_ms: i32,
    /// Java's `MessageType` name (`Normal_Msg`, ...).
    pub(crate) msg_type: Option<&'static str>,
    pub(crate) offset_msg_id: Option<String>,
    /// Java's `TraceContext.isSuccess`, true unless the record says otherwise.
    pub(crate) success: bool,
    pub(crate) retry_times: Option<i32>,
    pub(crate) context_code: Option<i32>,
    pub(crate) transaction_id: Option<String>,
    pub(crate) transaction_state: Option<String>,
    pub(crate) from_transaction_check: Option<bool>,
}

impl TraceRecord {
    fn new(kind: TraceKind, msg_id: String) -> Self {
        TraceRecord {
            kind,
            timestamp_ms: 0,
            region_id: None,
            group: None,
            request_id: None,
            topic: None,
            msg_id,
            tags: None,
            keys: None,
            store_host: None,
            body_length: None,
            cost_time_ms: 0,
            msg_type: None,
            offset_msg_id: None,
            success: true,
            retry_times: None,
            context_code: None,
            transaction_id: None,
            transaction_state: None,
            from_transaction_check: None,
        }
    }

    /// `success` or `failed`, as mqadmin prints a record's status.
    pub(crate) fn status(&self) -> &'static str {
        if self.success {
            "success"
        } else {
            "failed"
        }
    }
}

/// A record that cannot be read: which one (0-based, in the message body), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TraceDecodeError {
    pub(crate) record: usize,
    pub(crate) kind: &'static str,
    pub(crate) field: &'static str,
    pub(crate) value: Option<String>,
}

impl fmt::Display for TraceDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => {
                write!(f, "trace record {} ({}): field {} is not valid: {v:?}", self.record, self.kind, self.field)
            }
            None => write!(f, "trace record {} ({}): field {} is missing", self.record, self.kind, self.field),
        }
    }
}

impl std::error::Error for TraceDecodeError {}

/// Decodes every record of a trace message body. Records of unknown kinds and empty records
/// are skipped, as Java skips them; a record with a missing or unreadable field is reported
/// in the second list and the others are still returned (Java gives up on the whole body).
pub(crate) fn decode_records(body: &str) -> (Vec<TraceRecord>, Vec<TraceDecodeError>) {
    let mut records = Vec::new();
    let mut errors = Vec::new();
    for (index, text) in body.split(RECORD_SEPARATOR).enumerate() {
        let mut fields: Vec<&str> = text.split(FIELD_SEPARATOR).collect();
        // Java's String#split drops trailing empty fields, so a record's length (which tells
        // the optional fields apart) is counted without them.
        while fields.last().is_some_and(|f| f.is_empty()) {
            fields.pop();
        }
        let Some(kind) = fields.first().and_then(|name| TraceKind::from_name(name)) else {
            continue;
        };
        match decode_record(kind, &Fields { index, kind, fields: &fields }) {
            Ok(record) => records.push(record),
            Err(e) => errors.push(e),
        }
    }
    (records, errors)
}

/// The fields of one record, with typed accessors that name the field on failure.
struct Fields<'a> {
    index: usize,
    kind: TraceKind,
    fields: &'a [&'a str],
}

impl Fields<'_> {
    fn len(&self) -> usize {
        self.fields.len()
    }

    fn error(&self, field: &'static str, value: Option<&str>) -> TraceDecodeError {
        TraceDecodeError { record: self.index, kind: self.kind.name(), field, value: value.map(str::to_owned) }
    }

    fn text(&self, i: usize, field: &'static str) -> Result<String, TraceDecodeError> {
        self.fields.get(i).map(|s| (*s).to_owned()).ok_or_else(|| self.error(field, None))
    }

    fn opt_text(&self, i: usize, field: &'static str) -> Result<Option<String>, TraceDecodeError> {
        self.text(i, field).map(Some)
    }

    fn number<T: std::str::FromStr>(&self, i: usize, field: &'static str) -> Result<T, TraceDecodeError> {
        let text = self.fields.get(i).ok_or_else(|| self.error(field, None))?;
        text.parse().map_err(|_| self.error(field, Some(text)))
    }

    /// Java's `Boolean.parseBoolean`: `true` in any case is true, anything else false.
    fn boolean(&self, i: usize, field: &'static str) -> Result<bool, TraceDecodeError> {
        self.text(i, field).map(|t| t.eq_ignore_ascii_case("true"))
    }

    fn msg_type(&self, i: usize) -> Result<&'static str, TraceDecodeError> {
        let ordinal: usize = self.number(i, "msgType")?;
        MESSAGE_TYPES.get(ordinal).copied().ok_or_else(|| self.error("msgType", self.fields.get(i).copied()))
    }
}

fn decode_record(kind: TraceKind, f: &Fields<'_>) -> Result<TraceRecord, TraceDecodeError> {
    match kind {
        TraceKind::Pub => decode_pub(f),
        TraceKind::SubBefore => {
            let mut r = TraceRecord::new(kind, f.text(5, "msgId")?);
            r.timestamp_ms = f.number(1, "timestamp")?;
            r.region_id = f.opt_text(2, "regionId")?;
            r.group = f.opt_text(3, "consumerGroup")?;
            r.request_id = f.opt_text(4, "requestId")?;
            r.retry_times = Some(f.number(6, "retryTimes")?);
            r.keys = f.opt_text(7, "keys")?;
            Ok(r)
        }
        TraceKind::SubAfter => {
            let mut r = TraceRecord::new(kind, f.text(2, "msgId")?);
            r.request_id = f.opt_text(1, "requestId")?;
            r.cost_time_ms = f.number(3, "costTime")?;
            r.success = f.boolean(4, "success")?;
            r.keys = f.opt_text(5, "keys")?;
            if f.len() >= 7 {
                r.context_code = Some(f.number(6, "contextCode")?);
            }
            // Clients of the CLOUD access channel (and old ones) leave out the last two.
            if f.len() >= 9 {
                r.timestamp_ms = f.number(7, "timestamp")?;
                r.group = f.opt_text(8, "consumerGroup")?;
            }
            Ok(r)
        }
        TraceKind::EndTransaction => {
            let mut r = TraceRecord::new(kind, f.text(5, "msgId")?);
            r.timestamp_ms = f.number(1, "timestamp")?;
            r.region_id = f.opt_text(2, "regionId")?;
            r.group = f.opt_text(3, "producerGroup")?;
            r.topic = f.opt_text(4, "topic")?;
            r.tags = f.opt_text(6, "tags")?;
            r.keys = f.opt_text(7, "keys")?;
            r.store_host = f.opt_text(8, "storeHost")?;
            r.msg_type = Some(f.msg_type(9)?);
            r.transaction_id = f.opt_text(10, "transactionId")?;
            let state = f.text(11, "transactionState")?;
            if !["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"].contains(&state.as_str()) {
                return Err(f.error("transactionState", Some(&state)));
            }
            r.transaction_state = Some(state);
            r.from_transaction_check = Some(f.boolean(12, "fromTransactionCheck")?);
            Ok(r)
        }
        TraceKind::Recall => {
            let mut r = TraceRecord::new(kind, f.text(5, "msgId")?);
            r.timestamp_ms = f.number(1, "timestamp")?;
            r.region_id = f.opt_text(2, "regionId")?;
            r.group = f.opt_text(3, "group")?;
            r.topic = f.opt_text(4, "topic")?;
            r.success = f.boolean(6, "success")?;
            Ok(r)
        }
    }
}

fn decode_pub(f: &Fields<'_>) -> Result<TraceRecord, TraceDecodeError> {
    let mut r = TraceRecord::new(TraceKind::Pub, f.text(5, "msgId")?);
    r.timestamp_ms = f.number(1, "timestamp")?;
    r.region_id = f.opt_text(2, "regionId")?;
    r.group = f.opt_text(3, "producerGroup")?;
    r.topic = f.opt_text(4, "topic")?;
    r.tags = f.opt_text(6, "tags")?;
    r.keys = f.opt_text(7, "keys")?;
    r.store_host = f.opt_text(8, "storeHost")?;
    r.body_length = Some(f.number(9, "bodyLength")?);
    r.cost_time_ms = f.number(10, "costTime")?;
    r.msg_type = Some(f.msg_type(11)?);
    // Older clients wrote no offset message id (13 fields); some wrote a client host after
    // the success flag (15 fields), which mqadmin ignores: it shows the trace message's born host.
    match f.len() {
        13 => r.success = f.boolean(12, "success")?,
        n if n >= 14 => {
            r.offset_msg_id = f.opt_text(12, "offsetMsgId")?;
            r.success = f.boolean(13, "success")?;
        }
        _ => {}
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Joins fields with char 1 and ends the record with char 2, as the Java encoder does.
    fn record(fields: &[&str]) -> String {
        format!("{}{RECORD_SEPARATOR}", fields.join("\u{1}"))
    }

    const MSG_ID: &str = "7F0000010E1C18B4AAC2735A0F4A0000";

    #[test]
    fn decodes_a_pub_record_with_offset_msg_id() {
        let body = record(&[
            "Pub",
            "1700000000123",
            "DefaultRegion",
            "ProducerGroupA",
            "TopicTest",
            MSG_ID,
            "TagA",
            "order-1",
            "127.0.0.1:10911",
            "11",
            "7",
            "0",
            "7F00000100002A9F0000000000000C8E",
            "true",
        ]);
        let (records, errors) = decode_records(&body);
        assert!(errors.is_empty(), "{errors:?}");
        let r = &records[..];
        assert_eq!(r.len(), 1);
        let p = &r[0];
        assert_eq!(p.kind, TraceKind::Pub);
        assert_eq!(p.timestamp_ms, 1_700_000_000_123);
        assert_eq!(p.region_id.as_deref(), Some("DefaultRegion"));
        assert_eq!(p.group.as_deref(), Some("ProducerGroupA"));
        assert_eq!(p.topic.as_deref(), Some("TopicTest"));
        assert_eq!(p.msg_id, MSG_ID);
        assert_eq!(p.tags.as_deref(), Some("TagA"));
        assert_eq!(p.keys.as_deref(), Some("order-1"));
        assert_eq!(p.store_host.as_deref(), Some("127.0.0.1:10911"));
        assert_eq!(p.body_length, Some(11));
        assert_eq!(p.cost_time_ms, 7);
        assert_eq!(p.msg_type, Some("Normal_Msg"));
        assert_eq!(p.offset_msg_id.as_deref(), Some("7F00000100002A9F0000000000000C8E"));
        assert!(p.success);
        assert_eq!(p.status(), "success");
    }

    #[test]
    fn old_pub_records_without_offset_id_and_with_client_host_decode() {
        let short = record(&["Pub", "5", "R", "G", "T", MSG_ID, "", "", "h:1", "3", "2", "4", "FALSE"]);
        let (records, errors) = decode_records(&short);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(records[0].msg_type, Some("Order_Msg"));
        assert_eq!(records[0].offset_msg_id, None);
        assert!(!records[0].success);
        assert_eq!(records[0].status(), "failed");

        let long =
            record(&["Pub", "5", "R", "G", "T", MSG_ID, "t", "k", "h:1", "3", "2", "3", "OFF", "true", "10.0.0.9"]);
        let (records, _) = decode_records(&long);
        assert_eq!(records[0].msg_type, Some("Delay_Msg"));
        assert_eq!(records[0].offset_msg_id.as_deref(), Some("OFF"));
        assert!(records[0].success);
    }

    #[test]
    fn decodes_sub_before_and_sub_after_of_one_consume() {
        let body = [
            record(&["SubBefore", "1700000000200", "DefaultRegion", "ConsumerGroupA", "req-1", MSG_ID, "2", "order-1"]),
            record(&["SubAfter", "req-1", MSG_ID, "15", "false", "order-1", "1", "1700000000215", "ConsumerGroupA"]),
        ]
        .concat();
        let (records, errors) = decode_records(&body);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(records.len(), 2);
        let before = &records[0];
        assert_eq!(before.kind, TraceKind::SubBefore);
        assert_eq!(before.timestamp_ms, 1_700_000_000_200);
        assert_eq!(before.group.as_deref(), Some("ConsumerGroupA"));
        assert_eq!(before.request_id.as_deref(), Some("req-1"));
        assert_eq!(before.retry_times, Some(2));
        assert_eq!(before.keys.as_deref(), Some("order-1"));
        assert!(before.success, "SubBefore carries no status: Java's default (true)");
        let after = &records[1];
        assert_eq!(after.kind, TraceKind::SubAfter);
        assert_eq!(after.request_id.as_deref(), Some("req-1"));
        assert_eq!(after.msg_id, MSG_ID);
        assert_eq!(after.cost_time_ms, 15);
        assert!(!after.success);
        assert_eq!(after.context_code, Some(1));
        assert_eq!(after.timestamp_ms, 1_700_000_000_215);
        assert_eq!(after.group.as_deref(), Some("ConsumerGroupA"));
    }

    #[test]
    fn cloud_sub_after_records_have_no_time_or_group() {
        // The CLOUD channel ends the record right after the context code's separator.
        let body = format!("SubAfter\u{1}req\u{1}{MSG_ID}\u{1}4\u{1}true\u{1}k\u{1}0\u{1}{RECORD_SEPARATOR}");
        let (records, errors) = decode_records(&body);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(records[0].timestamp_ms, 0);
        assert_eq!(records[0].group, None);
        assert_eq!(records[0].context_code, Some(0));
    }

    #[test]
    fn decodes_end_transaction_and_recall_records() {
        let body = [
            record(&[
                "EndTransaction",
                "1700000000300",
                "R",
                "TxGroup",
                "TxTopic",
                MSG_ID,
                "TagT",
                "k1 k2",
                "127.0.0.1:10911",
                "1",
                "tx-9",
                "COMMIT_MESSAGE",
                "true",
            ]),
            record(&["Recall", "1700000000400", "R", "G", "T", MSG_ID, "false"]),
        ]
        .concat();
        let (records, errors) = decode_records(&body);
        assert!(errors.is_empty(), "{errors:?}");
        let end = &records[0];
        assert_eq!(end.kind, TraceKind::EndTransaction);
        assert_eq!(end.msg_type, Some("Trans_Msg_Half"));
        assert_eq!(end.transaction_id.as_deref(), Some("tx-9"));
        assert_eq!(end.transaction_state.as_deref(), Some("COMMIT_MESSAGE"));
        assert_eq!(end.from_transaction_check, Some(true));
        assert_eq!(end.keys.as_deref(), Some("k1 k2"));
        let recall = &records[1];
        assert_eq!(recall.kind, TraceKind::Recall);
        assert_eq!(recall.topic.as_deref(), Some("T"));
        assert!(!recall.success);
    }

    #[test]
    fn bad_records_are_reported_and_the_rest_kept() {
        let body = [
            record(&["Pub", "not-a-time", "R", "G", "T", MSG_ID, "", "", "h", "1", "1", "0", "O", "true"]),
            record(&["Unknown", "x"]),
            String::from("\u{2}"),
            record(&["SubBefore", "1", "R", "G"]),
            record(&["Pub", "1", "R", "G", "T", MSG_ID, "", "", "h", "1", "1", "9", "O", "true"]),
            record(&["EndTransaction", "1", "R", "G", "T", MSG_ID, "", "", "h", "1", "tx", "MAYBE", "true"]),
            record(&["SubAfter", "req", MSG_ID, "1", "true", "k", "0", "9", "G"]),
        ]
        .concat();
        let (records, errors) = decode_records(&body);
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0].kind, TraceKind::SubAfter);
        let described: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            described,
            [
                "trace record 0 (Pub): field timestamp is not valid: \"not-a-time\"",
                "trace record 3 (SubBefore): field msgId is missing",
                "trace record 4 (Pub): field msgType is not valid: \"9\"",
                "trace record 5 (EndTransaction): field transactionState is not valid: \"MAYBE\"",
            ]
        );
    }

    #[test]
    fn empty_body_has_no_records() {
        assert_eq!(decode_records(""), (Vec::new(), Vec::new()));
    }
}
