//! Message trace records as RocketMQ 4.x/5.x remoting clients write them to the trace topic
//! (`RMQ_SYS_TRACE_TOPIC`) and mqadmin and the dashboard read them (advanced-topics.md §6).
//!
//! A trace message's body is a run of records; a record's fields are separated by `\x01` and
//! the record ends with `\x02`. Its KEYS are the traced messages' ids and user keys, so a
//! QUERY_MESSAGE by key on the trace topic finds the traces of a message id.

/// Separates the fields of a record (Java: `TraceConstants.CONTENT_SPLITOR`).
pub const CONTENT_SPLITOR: char = '\u{1}';
/// Ends a record (Java: `TraceConstants.FIELD_SPLITOR`).
pub const FIELD_SPLITOR: char = '\u{2}';
/// The default trace topic.
pub const RMQ_SYS_TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";
/// The most bytes of records one trace message carries (Java: `maxMsgSize`, 128,000).
pub const MAX_TRACE_MESSAGE_BYTES: usize = 128_000;

/// Java's `MessageType` ordinals in Pub and EndTransaction records.
pub mod msg_type {
    /// `Normal_Msg`.
    pub const NORMAL: i32 = 0;
    /// `Trans_Msg_Half`.
    pub const TRANS_HALF: i32 = 1;
    /// `Trans_msg_Commit`.
    pub const TRANS_COMMIT: i32 = 2;
    /// `Delay_Msg`.
    pub const DELAY: i32 = 3;
    /// `Order_Msg`.
    pub const ORDER: i32 = 4;
}

/// How a consumer's listener ended (Java's `ConsumeReturnType` ordinal, SubAfter's
/// `contextCode`).
pub mod context_code {
    /// `SUCCESS`.
    pub const SUCCESS: i32 = 0;
    /// `TIME_OUT`.
    pub const TIME_OUT: i32 = 1;
    /// `EXCEPTION`.
    pub const EXCEPTION: i32 = 2;
    /// `RETURNNULL`.
    pub const RETURN_NULL: i32 = 3;
    /// `FAILED`.
    pub const FAILED: i32 = 4;
}

/// A send, as the producer saw it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pub {
    /// When the send started (ms since the epoch).
    pub timestamp: i64,
    /// The broker's region (`regionId` of the send result; `DefaultRegion`).
    pub region_id: String,
    /// Producer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// The message id (UNIQ_KEY).
    pub msg_id: String,
    /// Tags (`None` written as Java's `null`).
    pub tags: Option<String>,
    /// Keys (`None` written as Java's `null`).
    pub keys: Option<String>,
    /// The broker address that stored it.
    pub store_host: String,
    /// Body length.
    pub body_length: i64,
    /// How long the send took, ms.
    pub cost_time: i64,
    /// [`msg_type`].
    pub msg_type: i32,
    /// The offset message id (store host and CommitLog offset).
    pub offset_msg_id: String,
    /// Whether the broker answered SEND_OK.
    pub success: bool,
}

/// A message handed to a consumer's listener.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubBefore {
    /// When the listener was called (ms since the epoch).
    pub timestamp: i64,
    /// Region of the broker it came from.
    pub region_id: String,
    /// Consumer group.
    pub group: String,
    /// Pairs this record with its SubAfter.
    pub request_id: String,
    /// The message id.
    pub msg_id: String,
    /// Deliveries before this one.
    pub retry_times: i32,
    /// Keys.
    pub keys: Option<String>,
}

/// How the listener ended for a message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubAfter {
    /// The request id of its SubBefore.
    pub request_id: String,
    /// The message id.
    pub msg_id: String,
    /// How long the listener took for the batch, ms.
    pub cost_time: i64,
    /// Whether the listener consumed it.
    pub success: bool,
    /// Keys.
    pub keys: Option<String>,
    /// [`context_code`].
    pub context_code: i32,
    /// When it ended (ms since the epoch; absent in old and cloud-channel records).
    pub timestamp: Option<i64>,
    /// Consumer group (written with the timestamp; Java's readers take both or neither).
    pub group: Option<String>,
}

/// A delayed message recalled by its producer (5.3).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recall {
    /// When (ms since the epoch).
    pub timestamp: i64,
    /// Region.
    pub region_id: String,
    /// Producer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// The message id.
    pub msg_id: String,
    /// Whether the recall succeeded.
    pub success: bool,
}

/// A transaction's end, as the producer decided it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EndTransaction {
    /// When (ms since the epoch).
    pub timestamp: i64,
    /// Region.
    pub region_id: String,
    /// Producer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// The message id.
    pub msg_id: String,
    /// Tags.
    pub tags: Option<String>,
    /// Keys.
    pub keys: Option<String>,
    /// The broker address.
    pub store_host: String,
    /// [`msg_type`].
    pub msg_type: i32,
    /// The transaction id.
    pub transaction_id: String,
    /// `COMMIT_MESSAGE`, `ROLLBACK_MESSAGE` or `UNKNOW` (Java's `LocalTransactionState`).
    pub transaction_state: String,
    /// Whether it answered a check-back.
    pub from_transaction_check: bool,
}

/// One trace record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceRecord {
    /// `Pub`.
    Pub(Pub),
    /// `SubBefore`.
    SubBefore(SubBefore),
    /// `SubAfter`.
    SubAfter(SubAfter),
    /// `EndTransaction`.
    EndTransaction(EndTransaction),
    /// `Recall` (5.3).
    Recall(Recall),
}

fn opt(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("null")
}

impl TraceRecord {
    /// The record's text, ending with [`FIELD_SPLITOR`].
    pub fn encode(&self) -> String {
        let fields: Vec<String> = match self {
            TraceRecord::Pub(p) => vec![
                "Pub".into(),
                p.timestamp.to_string(),
                p.region_id.clone(),
                p.group.clone(),
                p.topic.clone(),
                p.msg_id.clone(),
                opt(&p.tags).into(),
                opt(&p.keys).into(),
                p.store_host.clone(),
                p.body_length.to_string(),
                p.cost_time.to_string(),
                p.msg_type.to_string(),
                p.offset_msg_id.clone(),
                p.success.to_string(),
            ],
            TraceRecord::SubBefore(s) => vec![
                "SubBefore".into(),
                s.timestamp.to_string(),
                s.region_id.clone(),
                s.group.clone(),
                s.request_id.clone(),
                s.msg_id.clone(),
                s.retry_times.to_string(),
                opt(&s.keys).into(),
            ],
            TraceRecord::SubAfter(s) => {
                let mut f = vec![
                    "SubAfter".into(),
                    s.request_id.clone(),
                    s.msg_id.clone(),
                    s.cost_time.to_string(),
                    s.success.to_string(),
                    opt(&s.keys).into(),
                    s.context_code.to_string(),
                ];
                // Java writes time and group together, or neither (cloud channel).
                if let Some(t) = s.timestamp {
                    f.push(t.to_string());
                    f.push(s.group.clone().unwrap_or_default());
                }
                f
            }
            TraceRecord::EndTransaction(e) => vec![
                "EndTransaction".into(),
                e.timestamp.to_string(),
                e.region_id.clone(),
                e.group.clone(),
                e.topic.clone(),
                e.msg_id.clone(),
                opt(&e.tags).into(),
                opt(&e.keys).into(),
                e.store_host.clone(),
                e.msg_type.to_string(),
                e.transaction_id.clone(),
                e.transaction_state.clone(),
                e.from_transaction_check.to_string(),
            ],
            TraceRecord::Recall(r) => vec![
                "Recall".into(),
                r.timestamp.to_string(),
                r.region_id.clone(),
                r.group.clone(),
                r.topic.clone(),
                r.msg_id.clone(),
                r.success.to_string(),
            ],
        };
        let mut text = fields.join(&CONTENT_SPLITOR.to_string());
        text.push(FIELD_SPLITOR);
        text
    }

    /// The message id the record traces.
    pub fn msg_id(&self) -> &str {
        match self {
            TraceRecord::Pub(p) => &p.msg_id,
            TraceRecord::SubBefore(s) => &s.msg_id,
            TraceRecord::SubAfter(s) => &s.msg_id,
            TraceRecord::EndTransaction(e) => &e.msg_id,
            TraceRecord::Recall(r) => &r.msg_id,
        }
    }

    /// The traced message's user keys, if any.
    pub fn keys(&self) -> Option<&str> {
        match self {
            TraceRecord::Pub(p) => p.keys.as_deref(),
            TraceRecord::SubBefore(s) => s.keys.as_deref(),
            TraceRecord::SubAfter(s) => s.keys.as_deref(),
            TraceRecord::EndTransaction(e) => e.keys.as_deref(),
            TraceRecord::Recall(_) => None,
        }
    }

    /// Decodes a trace message's body. Records of types this build does not know are skipped;
    /// the first malformed record is an error.
    ///
    /// # Errors
    /// The first record that does not parse.
    pub fn decode_all(body: &str) -> Result<Vec<TraceRecord>, TraceFieldError> {
        body.split(FIELD_SPLITOR).filter_map(|r| Self::decode(r).transpose()).collect()
    }

    /// One record (without its [`FIELD_SPLITOR`]); `Ok(None)` for an empty record or a type
    /// this build does not know. Trailing empty fields do not count, as Java's `split` drops
    /// them (the length tells optional fields apart).
    ///
    /// # Errors
    /// A missing or malformed field, named.
    pub fn decode(record: &str) -> Result<Option<TraceRecord>, TraceFieldError> {
        let mut fields: Vec<&str> = record.split(CONTENT_SPLITOR).collect();
        while fields.last().is_some_and(|f| f.is_empty()) {
            fields.pop();
        }
        let kind: &'static str = match fields.first().copied() {
            Some("Pub") => "Pub",
            Some("SubBefore") => "SubBefore",
            Some("SubAfter") => "SubAfter",
            Some("EndTransaction") => "EndTransaction",
            Some("Recall") => "Recall",
            _ => return Ok(None),
        };
        let f = Fields { kind, fields: &fields };
        Ok(Some(match kind {
            "Pub" => {
                let mut p = Pub {
                    timestamp: f.number(1, "timestamp")?,
                    region_id: f.text(2, "regionId")?,
                    group: f.text(3, "producerGroup")?,
                    topic: f.text(4, "topic")?,
                    msg_id: f.text(5, "msgId")?,
                    tags: f.optional(6, "tags")?,
                    keys: f.optional(7, "keys")?,
                    store_host: f.text(8, "storeHost")?,
                    body_length: f.number(9, "bodyLength")?,
                    cost_time: f.number(10, "costTime")?,
                    msg_type: f.msg_type(11)?,
                    offset_msg_id: String::new(),
                    success: true,
                };
                // Old clients wrote no offset message id (13 fields); some wrote their host
                // after the success flag (15), which readers ignore.
                match fields.len() {
                    13 => p.success = f.boolean(12, "success")?,
                    n if n >= 14 => {
                        p.offset_msg_id = f.text(12, "offsetMsgId")?;
                        p.success = f.boolean(13, "success")?;
                    }
                    _ => {}
                }
                TraceRecord::Pub(p)
            }
            "SubBefore" => TraceRecord::SubBefore(SubBefore {
                timestamp: f.number(1, "timestamp")?,
                region_id: f.text(2, "regionId")?,
                group: f.text(3, "consumerGroup")?,
                request_id: f.text(4, "requestId")?,
                msg_id: f.text(5, "msgId")?,
                retry_times: f.number(6, "retryTimes")?,
                keys: f.optional(7, "keys")?,
            }),
            "SubAfter" => {
                let mut a = SubAfter {
                    request_id: f.text(1, "requestId")?,
                    msg_id: f.text(2, "msgId")?,
                    cost_time: f.number(3, "costTime")?,
                    success: f.boolean(4, "success")?,
                    keys: f.optional(5, "keys")?,
                    context_code: 0,
                    timestamp: None,
                    group: None,
                };
                if fields.len() >= 7 {
                    a.context_code = f.number(6, "contextCode")?;
                }
                // Clients of the CLOUD access channel (and old ones) leave out time and group.
                if fields.len() >= 9 {
                    a.timestamp = Some(f.number(7, "timestamp")?);
                    a.group = f.optional(8, "consumerGroup")?;
                }
                TraceRecord::SubAfter(a)
            }
            "EndTransaction" => {
                let state = f.text(11, "transactionState")?;
                if !["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"].contains(&state.as_str()) {
                    return Err(f.error("transactionState", Some(&state)));
                }
                TraceRecord::EndTransaction(EndTransaction {
                    timestamp: f.number(1, "timestamp")?,
                    region_id: f.text(2, "regionId")?,
                    group: f.text(3, "producerGroup")?,
                    topic: f.text(4, "topic")?,
                    msg_id: f.text(5, "msgId")?,
                    tags: f.optional(6, "tags")?,
                    keys: f.optional(7, "keys")?,
                    store_host: f.text(8, "storeHost")?,
                    msg_type: f.msg_type(9)?,
                    transaction_id: f.text(10, "transactionId")?,
                    transaction_state: state,
                    from_transaction_check: f.boolean(12, "fromTransactionCheck")?,
                })
            }
            _ => TraceRecord::Recall(Recall {
                timestamp: f.number(1, "timestamp")?,
                region_id: f.text(2, "regionId")?,
                group: f.text(3, "group")?,
                topic: f.text(4, "topic")?,
                msg_id: f.text(5, "msgId")?,
                success: f.boolean(6, "success")?,
            }),
        }))
    }
}

/// A record that cannot be read: its type, the field, and the value if there was one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceFieldError {
    /// The record type (`Pub`, ...).
    pub kind: &'static str,
    /// Java's name of the field.
    pub field: &'static str,
    /// The text found (`None`: the field is missing).
    pub value: Option<String>,
}

impl std::fmt::Display for TraceFieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.value {
            Some(v) => write!(f, "{} record: field {} is not valid: {v:?}", self.kind, self.field),
            None => write!(f, "{} record: field {} is missing", self.kind, self.field),
        }
    }
}

impl std::error::Error for TraceFieldError {}

/// The fields of one record, with accessors that name the field on failure.
struct Fields<'a> {
    kind: &'static str,
    fields: &'a [&'a str],
}

impl Fields<'_> {
    fn error(&self, field: &'static str, value: Option<&str>) -> TraceFieldError {
        TraceFieldError { kind: self.kind, field, value: value.map(str::to_owned) }
    }

    fn text(&self, i: usize, field: &'static str) -> Result<String, TraceFieldError> {
        self.fields.get(i).map(|s| (*s).to_owned()).ok_or_else(|| self.error(field, None))
    }

    /// Java writes an absent value as `null`.
    fn optional(&self, i: usize, field: &'static str) -> Result<Option<String>, TraceFieldError> {
        self.text(i, field).map(|v| (v != "null" && !v.is_empty()).then_some(v))
    }

    fn number<T: std::str::FromStr>(&self, i: usize, field: &'static str) -> Result<T, TraceFieldError> {
        let text = self.fields.get(i).ok_or_else(|| self.error(field, None))?;
        text.trim().parse().map_err(|_| self.error(field, Some(text)))
    }

    /// Java's `Boolean.parseBoolean`: `true` in any case is true, anything else false.
    fn boolean(&self, i: usize, field: &'static str) -> Result<bool, TraceFieldError> {
        self.text(i, field).map(|t| t.trim().eq_ignore_ascii_case("true"))
    }

    fn msg_type(&self, i: usize) -> Result<i32, TraceFieldError> {
        let ordinal: i32 = self.number(i, "msgType")?;
        if (msg_type::NORMAL..=msg_type::ORDER).contains(&ordinal) {
            Ok(ordinal)
        } else {
            Err(self.error("msgType", self.fields.get(i).copied()))
        }
    }
}

/// Java's `MessageType` name of a [`msg_type`] ordinal.
pub fn msg_type_name(ordinal: i32) -> Option<&'static str> {
    ["Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg"]
        .get(usize::try_from(ordinal).ok()?)
        .copied()
}

/// The KEYS of a trace message carrying `records`: every traced message id and user key,
/// once each, space-separated (a QUERY_MESSAGE by either finds it).
pub fn trace_keys<'a>(records: impl IntoIterator<Item = &'a TraceRecord>) -> String {
    let mut keys: Vec<&str> = Vec::new();
    for r in records {
        for k in std::iter::once(r.msg_id()).chain(r.keys()) {
            if !k.is_empty() && !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden text written from the fact sheet's field lists.
    #[test]
    fn records_encode_in_javas_field_order() {
        let p = TraceRecord::Pub(Pub {
            timestamp: 1_700_000_000_000,
            region_id: "DefaultRegion".into(),
            group: "pg".into(),
            topic: "T".into(),
            msg_id: "MSGID1".into(),
            tags: Some("TagA".into()),
            keys: None,
            store_host: "127.0.0.1:10911".into(),
            body_length: 5,
            cost_time: 3,
            msg_type: msg_type::NORMAL,
            offset_msg_id: "OFFSETID".into(),
            success: true,
        });
        assert_eq!(
            p.encode(),
            "Pub\u{1}1700000000000\u{1}DefaultRegion\u{1}pg\u{1}T\u{1}MSGID1\u{1}TagA\u{1}null\u{1}127.0.0.1:10911\u{1}5\u{1}3\u{1}0\u{1}OFFSETID\u{1}true\u{2}"
        );
        let before = TraceRecord::SubBefore(SubBefore {
            timestamp: 1_700_000_000_100,
            region_id: "DefaultRegion".into(),
            group: "cg".into(),
            request_id: "REQ".into(),
            msg_id: "MSGID1".into(),
            retry_times: 0,
            keys: Some("k1".into()),
        });
        assert_eq!(
            before.encode(),
            "SubBefore\u{1}1700000000100\u{1}DefaultRegion\u{1}cg\u{1}REQ\u{1}MSGID1\u{1}0\u{1}k1\u{2}"
        );
        let after = TraceRecord::SubAfter(SubAfter {
            request_id: "REQ".into(),
            msg_id: "MSGID1".into(),
            cost_time: 7,
            success: true,
            keys: Some("k1".into()),
            context_code: context_code::SUCCESS,
            timestamp: Some(1_700_000_000_107),
            group: Some("cg".into()),
        });
        assert_eq!(
            after.encode(),
            "SubAfter\u{1}REQ\u{1}MSGID1\u{1}7\u{1}true\u{1}k1\u{1}0\u{1}1700000000107\u{1}cg\u{2}"
        );
        let end = TraceRecord::EndTransaction(EndTransaction {
            timestamp: 1,
            region_id: "DefaultRegion".into(),
            group: "pg".into(),
            topic: "T".into(),
            msg_id: "M".into(),
            tags: None,
            keys: None,
            store_host: "h:1".into(),
            msg_type: msg_type::TRANS_HALF,
            transaction_id: "TX".into(),
            transaction_state: "COMMIT_MESSAGE".into(),
            from_transaction_check: false,
        });
        assert_eq!(
            end.encode(),
            "EndTransaction\u{1}1\u{1}DefaultRegion\u{1}pg\u{1}T\u{1}M\u{1}null\u{1}null\u{1}h:1\u{1}1\u{1}TX\u{1}COMMIT_MESSAGE\u{1}false\u{2}"
        );
        let body =
            [p.clone(), before.clone(), after.clone(), end.clone()].iter().map(TraceRecord::encode).collect::<String>();
        assert_eq!(TraceRecord::decode_all(&body).unwrap(), vec![p.clone(), before.clone(), after, end]);
        assert_eq!(trace_keys([&p, &before]), "MSGID1 k1");
    }

    #[test]
    fn old_and_unknown_records_are_read_and_garbage_is_refused() {
        // A Pub of an old client: no offset message id.
        let old = "Pub\u{1}1\u{1}R\u{1}pg\u{1}T\u{1}M\u{1}null\u{1}null\u{1}h:1\u{1}5\u{1}3\u{1}0\u{1}false";
        let TraceRecord::Pub(p) = TraceRecord::decode(old).unwrap().unwrap() else { panic!("not a Pub") };
        assert_eq!((p.offset_msg_id.as_str(), p.success, p.tags), ("", false, None));
        // A SubAfter without context code and time.
        let after = TraceRecord::decode("SubAfter\u{1}R\u{1}M\u{1}4\u{1}false\u{1}null").unwrap().unwrap();
        assert!(matches!(after, TraceRecord::SubAfter(SubAfter { context_code: 0, timestamp: None, .. })));
        let recall = TraceRecord::decode("Recall\u{1}1\u{1}R\u{1}g\u{1}T\u{1}M\u{1}true").unwrap().unwrap();
        assert!(matches!(&recall, TraceRecord::Recall(r) if r.success && r.msg_id == "M"));
        assert_eq!(format!("{}\u{2}", "Recall\u{1}1\u{1}R\u{1}g\u{1}T\u{1}M\u{1}true"), recall.encode());
        assert_eq!(TraceRecord::decode("Future\u{1}1").unwrap(), None);
        assert_eq!(
            TraceRecord::decode("Pub\u{1}x").unwrap_err().to_string(),
            "Pub record: field timestamp is not valid: \"x\""
        );
        let e = TraceRecord::decode_all("SubBefore\u{1}1\u{1}R\u{1}g\u{2}").unwrap_err();
        assert_eq!(e.to_string(), "SubBefore record: field requestId is missing");
        let bad_type = "Pub\u{1}1\u{1}R\u{1}G\u{1}T\u{1}M\u{1}\u{1}\u{1}h\u{1}1\u{1}1\u{1}9\u{1}O\u{1}true";
        assert_eq!(TraceRecord::decode(bad_type).unwrap_err().field, "msgType");
        // The cloud channel ends a SubAfter right after the context code's separator.
        let cloud = TraceRecord::decode("SubAfter\u{1}req\u{1}M\u{1}4\u{1}true\u{1}k\u{1}0\u{1}").unwrap().unwrap();
        assert!(matches!(cloud, TraceRecord::SubAfter(SubAfter { timestamp: None, group: None, .. })));
        assert_eq!(msg_type_name(msg_type::DELAY), Some("Delay_Msg"));
        assert_eq!(msg_type_name(7), None);
    }
}
