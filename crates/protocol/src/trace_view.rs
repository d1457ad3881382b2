//! Message trace records as Java clients write them into the trace topic (fact sheet
//! advanced-topics 6), decoded by [`crate::trace`] and flattened for showing (one struct for
//! every kind, as Java's `TraceView`): what mqadmin's queryMsgTraceById prints and the
//! dashboard's trace page draws.
//! Java: `TraceDataEncoder#decoderFromTraceDataString`, `TraceView#decodeFromTraceTransData`.

use std::fmt;

use crate::trace;

/// Ends each record. Java: `TraceConstants.FIELD_SPLITOR` (sic: the names are swapped there).
pub const RECORD_SEPARATOR: char = trace::FIELD_SPLITOR;

/// What a record traces. Java: `TraceType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceKind {
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
    pub fn name(self) -> &'static str {
        match self {
            TraceKind::Pub => "Pub",
            TraceKind::SubBefore => "SubBefore",
            TraceKind::SubAfter => "SubAfter",
            TraceKind::EndTransaction => "EndTransaction",
            TraceKind::Recall => "Recall",
        }
    }
}

/// One decoded record: Java's `TraceContext` and its one `TraceBean`, flattened. A field the
/// record's kind does not carry is `None` (or the Java default for the numbers and `success`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceView {
    pub kind: TraceKind,
    /// When the traced step happened (ms since the epoch); 0 for SubAfter records of old or
    /// cloud clients, which do not write it.
    pub timestamp_ms: i64,
    pub region_id: Option<String>,
    /// Producer group (Pub, EndTransaction, Recall) or consumer group (Sub*).
    pub group: Option<String>,
    pub request_id: Option<String>,
    pub topic: Option<String>,
    /// The traced message's id (its UNIQ_KEY).
    pub msg_id: String,
    pub tags: Option<String>,
    pub keys: Option<String>,
    pub store_host: Option<String>,
    pub body_length: Option<i32>,
    pub cost_time_ms: i32,
    /// Java's `MessageType` name (`Normal_Msg`, ...).
    pub msg_type: Option<&'static str>,
    pub offset_msg_id: Option<String>,
    /// Java's `TraceContext.isSuccess`, true unless the record says otherwise.
    pub success: bool,
    pub retry_times: Option<i32>,
    pub context_code: Option<i32>,
    pub transaction_id: Option<String>,
    pub transaction_state: Option<String>,
    pub from_transaction_check: Option<bool>,
}

impl TraceView {
    fn new(kind: TraceKind, msg_id: String) -> Self {
        TraceView {
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
    pub fn status(&self) -> &'static str {
        if self.success {
            "success"
        } else {
            "failed"
        }
    }
}

/// A record that cannot be read: which one (0-based, in the message body), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceDecodeError {
    pub record: usize,
    pub kind: &'static str,
    pub field: &'static str,
    pub value: Option<String>,
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

/// Decodes every record of a trace message body with `ferromq_protocol::trace` (the codec
/// the Rust client writes with). Records of unknown kinds and empty records are skipped, as
/// Java skips them; a record with a missing or unreadable field is reported in the second
/// list and the others are still returned (Java gives up on the whole body).
pub fn decode_records(body: &str) -> (Vec<TraceView>, Vec<TraceDecodeError>) {
    let mut records = Vec::new();
    let mut errors = Vec::new();
    for (index, text) in body.split(RECORD_SEPARATOR).enumerate() {
        match trace::TraceRecord::decode(text) {
            Ok(Some(record)) => records.push(TraceView::from(record)),
            Ok(None) => {}
            Err(e) => errors.push(TraceDecodeError { record: index, kind: e.kind, field: e.field, value: e.value }),
        }
    }
    (records, errors)
}

impl From<trace::TraceRecord> for TraceView {
    fn from(record: trace::TraceRecord) -> Self {
        let clamp = |v: i64| i32::try_from(v).unwrap_or(i32::MAX);
        match record {
            trace::TraceRecord::Pub(p) => TraceView {
                timestamp_ms: p.timestamp,
                region_id: Some(p.region_id),
                group: Some(p.group),
                topic: Some(p.topic),
                tags: p.tags,
                keys: p.keys,
                store_host: Some(p.store_host),
                body_length: Some(clamp(p.body_length)),
                cost_time_ms: clamp(p.cost_time),
                msg_type: trace::msg_type_name(p.msg_type),
                offset_msg_id: Some(p.offset_msg_id).filter(|id| !id.is_empty()),
                success: p.success,
                ..TraceView::new(TraceKind::Pub, p.msg_id)
            },
            trace::TraceRecord::SubBefore(b) => TraceView {
                timestamp_ms: b.timestamp,
                region_id: Some(b.region_id),
                group: Some(b.group),
                request_id: Some(b.request_id),
                retry_times: Some(b.retry_times),
                keys: b.keys,
                ..TraceView::new(TraceKind::SubBefore, b.msg_id)
            },
            trace::TraceRecord::SubAfter(a) => TraceView {
                // Clients of the CLOUD access channel (and old ones) write no time or group.
                timestamp_ms: a.timestamp.unwrap_or(0),
                group: a.group,
                request_id: Some(a.request_id),
                cost_time_ms: clamp(a.cost_time),
                success: a.success,
                keys: a.keys,
                context_code: Some(a.context_code),
                ..TraceView::new(TraceKind::SubAfter, a.msg_id)
            },
            trace::TraceRecord::EndTransaction(e) => TraceView {
                timestamp_ms: e.timestamp,
                region_id: Some(e.region_id),
                group: Some(e.group),
                topic: Some(e.topic),
                tags: e.tags,
                keys: e.keys,
                store_host: Some(e.store_host),
                msg_type: trace::msg_type_name(e.msg_type),
                transaction_id: Some(e.transaction_id),
                transaction_state: Some(e.transaction_state),
                from_transaction_check: Some(e.from_transaction_check),
                ..TraceView::new(TraceKind::EndTransaction, e.msg_id)
            },
            trace::TraceRecord::Recall(r) => TraceView {
                timestamp_ms: r.timestamp,
                region_id: Some(r.region_id),
                group: Some(r.group),
                topic: Some(r.topic),
                success: r.success,
                ..TraceView::new(TraceKind::Recall, r.msg_id)
            },
        }
    }
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
                "trace record 3 (SubBefore): field requestId is missing",
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
