//! The strings POP consumption passes between broker, client and proxy: the per-message
//! extra info (`POP_CK` property; with the CommitLog offset appended, the gRPC receipt
//! handle), the pop response's `startOffsetInfo` / `msgOffsetInfo` / `orderCountInfo`, and
//! the names of pop retry topics. Java: `ExtraInfoUtil`, `KeyBuilder`, `ReceiptHandle`.

use std::collections::HashMap;
use std::fmt::Write as _;

/// The prefix of every retry topic (Java: `MixAll.RETRY_GROUP_TOPIC_PREFIX`).
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// The revive queue id that marks a FIFO pop (there is no such revive queue).
pub const POP_ORDER_REVIVE_QUEUE: i32 = 999;
/// Largest number of messages one pop returns (the checkpoint's count is a byte, its bitmap
/// 32 bits).
pub const POP_MAX_MSG_NUMS: i32 = 32;

/// Which kind of topic a popped message was read from: the extra info's retry flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryFlag {
    /// "0": the topic itself.
    Normal,
    /// "1": the pop retry topic `%RETRY%<group>_<topic>`.
    RetryV1,
    /// "2": the pop retry topic `%RETRY%<group>+<topic>`.
    RetryV2,
}

impl RetryFlag {
    /// The flag of a topic name, as Java derives it.
    pub fn of_topic(topic: &str) -> RetryFlag {
        if is_pop_retry_topic_v2(topic) {
            RetryFlag::RetryV2
        } else if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            RetryFlag::RetryV1
        } else {
            RetryFlag::Normal
        }
    }

    /// The wire text.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryFlag::Normal => "0",
            RetryFlag::RetryV1 => "1",
            RetryFlag::RetryV2 => "2",
        }
    }

    /// Parses the wire text.
    pub fn parse(text: &str) -> Option<RetryFlag> {
        match text {
            "0" => Some(RetryFlag::Normal),
            "1" => Some(RetryFlag::RetryV1),
            "2" => Some(RetryFlag::RetryV2),
            _ => None,
        }
    }

    /// The topic a message of `topic` read by `group` with this flag lives in.
    pub fn real_topic(self, topic: &str, group: &str) -> String {
        match self {
            RetryFlag::Normal => topic.to_owned(),
            RetryFlag::RetryV1 => pop_retry_topic_v1(topic, group),
            RetryFlag::RetryV2 => pop_retry_topic_v2(topic, group),
        }
    }
}

/// `%RETRY%<group>_<topic>`.
pub fn pop_retry_topic_v1(topic: &str, group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}")
}

/// `%RETRY%<group>+<topic>`.
pub fn pop_retry_topic_v2(topic: &str, group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}")
}

/// The pop retry topic new retries of (`topic`, `group`) go to.
pub fn pop_retry_topic(topic: &str, group: &str, v2: bool) -> String {
    if v2 {
        pop_retry_topic_v2(topic, group)
    } else {
        pop_retry_topic_v1(topic, group)
    }
}

/// Whether `topic` is a V2 pop retry topic.
pub fn is_pop_retry_topic_v2(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) && topic.contains('+')
}

/// The (group, topic) of a V2 pop retry topic (V1 names are ambiguous and not parsed).
pub fn parse_pop_retry_topic_v2(retry_topic: &str) -> Option<(&str, &str)> {
    let rest = retry_topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX)?;
    rest.split_once('+')
}

/// Why an extra info string (or receipt handle) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("extraInfo {text:?} is malformed: {reason}")]
pub struct ExtraInfoError {
    /// The string received.
    pub text: String,
    /// What is wrong.
    pub reason: &'static str,
}

/// A popped message's extra info: `ckQueueOffset popTime invisibleTime reviveQid retryFlag
/// brokerName queueId [queueOffset [commitLogOffset]]`, space separated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraInfo {
    /// The checkpoint's start offset (first offset popped from the queue in that pop).
    pub ck_queue_offset: i64,
    /// The pop's broker time, ms.
    pub pop_time: i64,
    /// Invisible time, ms.
    pub invisible_time: i64,
    /// Revive queue of the checkpoint; [`POP_ORDER_REVIVE_QUEUE`] for FIFO pops.
    pub revive_qid: i32,
    /// Which topic the message was read from.
    pub retry_flag: RetryFlag,
    /// The broker that served the pop.
    pub broker_name: String,
    /// The queue the message was read from (absent in the shortest form).
    pub queue_id: Option<i32>,
    /// The message's queue offset.
    pub queue_offset: Option<i64>,
    /// The message's CommitLog offset (receipt handles only).
    pub commit_log_offset: Option<i64>,
}

impl ExtraInfo {
    /// Parses the POP_CK text or a receipt handle. The first six fields are required (the
    /// broker reads nothing further for an ack), the rest optional.
    ///
    /// # Errors
    /// [`ExtraInfoError`] naming what is wrong.
    pub fn parse(text: &str) -> Result<ExtraInfo, ExtraInfoError> {
        let err = |reason| ExtraInfoError { text: text.to_owned(), reason };
        let fields: Vec<&str> = text.split(' ').collect();
        if fields.len() < 6 {
            return Err(err("fewer than 6 space-separated fields"));
        }
        let int = |i: usize, reason| fields[i].parse::<i64>().map_err(|_| err(reason));
        let optional = |i: usize, reason| fields.get(i).map(|f| f.parse::<i64>().map_err(|_| err(reason))).transpose();
        Ok(ExtraInfo {
            ck_queue_offset: int(0, "checkpoint offset (field 1) is not an integer")?,
            pop_time: int(1, "pop time (field 2) is not an integer")?,
            invisible_time: int(2, "invisible time (field 3) is not an integer")?,
            revive_qid: fields[3].parse().map_err(|_| err("revive queue id (field 4) is not an integer"))?,
            retry_flag: RetryFlag::parse(fields[4]).ok_or_else(|| err("retry flag (field 5) is not 0, 1 or 2"))?,
            broker_name: fields[5].to_owned(),
            queue_id: optional(6, "queue id (field 7) is not an integer")?
                .map(|q| i32::try_from(q).map_err(|_| err("queue id (field 7) is out of range")))
                .transpose()?,
            queue_offset: optional(7, "queue offset (field 8) is not an integer")?,
            commit_log_offset: optional(8, "commit log offset (field 9) is not an integer")?,
        })
    }

    /// Whether the message came from a FIFO pop.
    pub fn is_order(&self) -> bool {
        self.revive_qid == POP_ORDER_REVIVE_QUEUE
    }

    /// When the message becomes visible again, ms.
    pub fn next_visible_time(&self) -> i64 {
        self.pop_time.saturating_add(self.invisible_time)
    }

    /// The text form, with as many optional fields as are present.
    pub fn render(&self) -> String {
        let mut s = format!(
            "{} {} {} {} {} {}",
            self.ck_queue_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.retry_flag.as_str(),
            self.broker_name
        );
        if let Some(q) = self.queue_id {
            let _ = write!(s, " {q}");
            if let Some(o) = self.queue_offset {
                let _ = write!(s, " {o}");
                if let Some(c) = self.commit_log_offset {
                    let _ = write!(s, " {c}");
                }
            }
        }
        s
    }
}

/// Appends `flag qid startOffset` for a queue read from `topic` (Java:
/// `buildStartOffsetInfo`).
pub fn append_start_offset_info(out: &mut String, topic: &str, queue_id: i32, start_offset: i64) {
    if !out.is_empty() {
        out.push(';');
    }
    let _ = write!(out, "{} {queue_id} {start_offset}", RetryFlag::of_topic(topic).as_str());
}

/// Appends `flag qid o1,o2,...` (Java: `buildMsgOffsetInfo`).
pub fn append_msg_offset_info(out: &mut String, topic: &str, queue_id: i32, offsets: &[i64]) {
    if !out.is_empty() {
        out.push(';');
    }
    let _ = write!(out, "{} {queue_id} ", RetryFlag::of_topic(topic).as_str());
    for (i, o) in offsets.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{o}");
    }
}

/// Appends `flag qid count` (Java: `buildQueueIdOrderCountInfo`).
pub fn append_queue_order_count_info(out: &mut String, topic: &str, queue_id: i32, count: i32) {
    if !out.is_empty() {
        out.push(';');
    }
    let _ = write!(out, "{} {queue_id} {count}", RetryFlag::of_topic(topic).as_str());
}

/// Appends `flag qo<qid>%<offset> count` (Java: `buildQueueOffsetOrderCountInfo`).
pub fn append_offset_order_count_info(out: &mut String, topic: &str, queue_id: i32, offset: i64, count: i32) {
    if !out.is_empty() {
        out.push(';');
    }
    let _ = write!(out, "{} qo{queue_id}%{offset} {count}", RetryFlag::of_topic(topic).as_str());
}

/// The key the parsed info maps use: `flag@qid` (or `flag@qo<qid>%<offset>`).
pub fn info_key(flag: RetryFlag, queue_id: i32) -> String {
    format!("{}@{queue_id}", flag.as_str())
}

/// The per-message key of `orderCountInfo`.
pub fn offset_info_key(flag: RetryFlag, queue_id: i32, offset: i64) -> String {
    format!("{}@qo{queue_id}%{offset}", flag.as_str())
}

/// The extra info Java's client builds for one record of a POP_MESSAGE answer
/// (`MQClientAPIImpl#processPopResponse`): the retry flag of the broker's `POP_CK` when the
/// record carries one (a retried message), else "0"; the start offset of `flag@queue_id` in
/// the parsed `startOffsetInfo`; the pop's time, invisible time and revive queue from the
/// header; `broker_name`, the broker popped from. None when `starts` has no entry for it.
pub fn popped_extra_info(
    h: &crate::header::PopMessageResponseHeader,
    starts: &HashMap<String, i64>,
    broker_name: &str,
    pop_ck: Option<&str>,
    queue_id: i32,
    queue_offset: i64,
) -> Option<ExtraInfo> {
    let retry_flag = pop_ck.and_then(|ck| ExtraInfo::parse(ck).ok()).map_or(RetryFlag::Normal, |ck| ck.retry_flag);
    Some(ExtraInfo {
        ck_queue_offset: *starts.get(&info_key(retry_flag, queue_id))?,
        pop_time: h.pop_time,
        invisible_time: h.invisible_time,
        revive_qid: h.revive_qid,
        retry_flag,
        broker_name: broker_name.to_owned(),
        queue_id: Some(queue_id),
        queue_offset: Some(queue_offset),
        commit_log_offset: None,
    })
}

/// Why an info string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pop response info {text:?} is malformed: {reason}")]
pub struct InfoError {
    /// The string.
    pub text: String,
    /// What is wrong.
    pub reason: &'static str,
}

fn parse_entries<T>(text: &str, mut value: impl FnMut(&str) -> Option<T>) -> Result<HashMap<String, T>, InfoError> {
    let err = |reason| InfoError { text: text.to_owned(), reason };
    let mut map = HashMap::new();
    if text.is_empty() {
        return Ok(map);
    }
    for entry in text.split(';') {
        let parts: Vec<&str> = entry.split(' ').collect();
        if parts.len() != 3 {
            return Err(err("an entry does not have 3 space-separated fields"));
        }
        let key = format!("{}@{}", parts[0], parts[1]);
        let v = value(parts[2]).ok_or_else(|| err("a value is not a number"))?;
        if map.insert(key, v).is_some() {
            return Err(err("duplicate entry"));
        }
    }
    Ok(map)
}

/// Parses `startOffsetInfo` into `flag@qid -> startOffset`.
///
/// # Errors
/// [`InfoError`] for malformed text.
pub fn parse_start_offset_info(text: &str) -> Result<HashMap<String, i64>, InfoError> {
    parse_entries(text, |v| v.parse().ok())
}

/// Parses `msgOffsetInfo` into `flag@qid -> offsets`.
///
/// # Errors
/// [`InfoError`] for malformed text.
pub fn parse_msg_offset_info(text: &str) -> Result<HashMap<String, Vec<i64>>, InfoError> {
    parse_entries(text, |v| v.split(',').map(|o| o.parse().ok()).collect())
}

/// Parses `orderCountInfo` into `flag@qid -> count` and `flag@qo<qid>%<offset> -> count`.
///
/// # Errors
/// [`InfoError`] for malformed text.
pub fn parse_order_count_info(text: &str) -> Result<HashMap<String, i32>, InfoError> {
    parse_entries(text, |v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_info_round_trips_in_every_form() {
        for text in [
            "100 1700000000000 60000 3 0 broker-a",
            "100 1700000000000 60000 3 0 broker-a 1",
            "100 1700000000000 60000 3 1 broker-a 1 105",
            "100 1700000000000 60000 999 2 broker-a 1 105 4096",
        ] {
            let info = ExtraInfo::parse(text).unwrap();
            assert_eq!(info.render(), text);
        }
        let info = ExtraInfo::parse("100 1700000000000 60000 999 2 broker-a 1 105 4096").unwrap();
        assert!(info.is_order());
        assert_eq!(info.retry_flag, RetryFlag::RetryV2);
        assert_eq!(info.commit_log_offset, Some(4096));
        assert_eq!(info.next_visible_time(), 1_700_000_060_000);
    }

    #[test]
    fn malformed_extra_info_says_what_is_wrong() {
        for (text, reason) in [
            ("", "fewer than 6 space-separated fields"),
            ("1 2 3 4 0", "fewer than 6 space-separated fields"),
            ("x 2 3 4 0 b", "checkpoint offset (field 1) is not an integer"),
            ("1 2 3 4 7 b", "retry flag (field 5) is not 0, 1 or 2"),
            ("1 2 3 4 0 b q", "queue id (field 7) is not an integer"),
            ("1 2 3 4 0 b 99999999999", "queue id (field 7) is out of range"),
        ] {
            assert_eq!(ExtraInfo::parse(text).unwrap_err().reason, reason, "{text:?}");
        }
    }

    #[test]
    fn info_strings_match_java() {
        let mut start = String::new();
        append_start_offset_info(&mut start, "T", 1, 100);
        append_start_offset_info(&mut start, "%RETRY%G_T", 0, 7);
        append_start_offset_info(&mut start, "%RETRY%G+T", 0, 9);
        assert_eq!(start, "0 1 100;1 0 7;2 0 9");
        let mut msg = String::new();
        append_msg_offset_info(&mut msg, "T", 1, &[100, 101, 103]);
        append_msg_offset_info(&mut msg, "%RETRY%G_T", 0, &[7]);
        assert_eq!(msg, "0 1 100,101,103;1 0 7");
        let mut order = String::new();
        append_offset_order_count_info(&mut order, "T", 1, 100, 2);
        append_queue_order_count_info(&mut order, "T", 1, 0);
        assert_eq!(order, "0 qo1%100 2;0 1 0");

        assert_eq!(parse_start_offset_info(&start).unwrap()["1@0"], 7);
        assert_eq!(parse_msg_offset_info(&msg).unwrap()["0@1"], vec![100, 101, 103]);
        let counts = parse_order_count_info(&order).unwrap();
        assert_eq!(counts[&offset_info_key(RetryFlag::Normal, 1, 100)], 2);
        assert_eq!(counts[&info_key(RetryFlag::Normal, 1)], 0);
        assert!(parse_start_offset_info("0 1").is_err());
        assert!(parse_start_offset_info("0 1 2;0 1 3").is_err());
        assert!(parse_msg_offset_info("0 1 2,x").is_err());
    }

    #[test]
    fn extra_info_of_a_popped_record_uses_the_retry_flag_of_its_pop_ck() {
        let h = crate::header::PopMessageResponseHeader {
            pop_time: 7,
            invisible_time: 60_000,
            revive_qid: 3,
            ..Default::default()
        };
        let starts = parse_start_offset_info("0 1 100;1 0 5").unwrap();
        let normal = popped_extra_info(&h, &starts, "b", None, 1, 102).unwrap();
        assert_eq!(normal.render(), "100 7 60000 3 0 b 1 102");
        let retried = popped_extra_info(&h, &starts, "b", Some("5 7 60000 3 1 b 0 6"), 0, 6).unwrap();
        assert_eq!(retried.render(), "5 7 60000 3 1 b 0 6");
        assert!(popped_extra_info(&h, &starts, "b", None, 0, 6).is_none(), "no 0@0 entry");
    }

    #[test]
    fn retry_topic_names() {
        assert_eq!(pop_retry_topic("T", "G", false), "%RETRY%G_T");
        assert_eq!(pop_retry_topic("T", "G", true), "%RETRY%G+T");
        assert_eq!(RetryFlag::of_topic("%RETRY%G_T"), RetryFlag::RetryV1);
        assert_eq!(RetryFlag::of_topic("%RETRY%G+T"), RetryFlag::RetryV2);
        assert_eq!(RetryFlag::of_topic("T"), RetryFlag::Normal);
        assert_eq!(RetryFlag::RetryV1.real_topic("T", "G"), "%RETRY%G_T");
        assert_eq!(parse_pop_retry_topic_v2("%RETRY%G+T"), Some(("G", "T")));
        assert_eq!(parse_pop_retry_topic_v2("%RETRY%G_T"), None);
    }
}
