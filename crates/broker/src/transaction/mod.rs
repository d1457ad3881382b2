//! Transactional messages. A producer sends a half (prepared) message, which the broker keeps
//! in `RMQ_SYS_TRANS_HALF_TOPIC` where no consumer sees it; END_TRANSACTION then commits it
//! (a copy goes to its real topic and queue) or rolls it back. Either way an op message in
//! `RMQ_SYS_TRANS_OP_HALF_TOPIC` (tag `d`, body: half queue offsets) marks the half message
//! done. Half messages left undecided past `transactionTimeOut` are checked back: the broker
//! asks a live producer of the group with CHECK_TRANSACTION_STATE, and discards them to
//! `TRANS_CHECK_MAX_TIME_TOPIC` after `transactionCheckMax` checks. Progress of the check is
//! kept as consumer offsets of group `CID_RMQ_SYS_TRANS`. Java: `broker/transaction/*`,
//! `EndTransactionProcessor`, `TransactionalMessageBridge#parseHalfMessageInner`.
//!
//! Files: `end.rs` serves END_TRANSACTION, `op_writer.rs` batches the op messages,
//! `check.rs` is the check-back service.

pub(crate) mod check;
pub(crate) mod end;
pub(crate) mod op_writer;
pub(crate) mod resume;

use ferromq_protocol::message::{keys, sysflag, MessageProperties};

use crate::metadata::RMQ_SYS_TRANS_HALF_TOPIC;

/// The consumer group whose offsets record how far the check has gone.
pub(crate) const CID_RMQ_SYS_TRANS: &str = "CID_RMQ_SYS_TRANS";
/// Tag of op messages (Java: `TransactionalMessageUtil.REMOVE_TAG`).
pub(crate) const REMOVE_TAG: &str = "d";

/// How long (ms) a half message whose producer set CHECK_IMMUNITY_TIME_IN_SECONDS to `value`
/// is spared a check: that many seconds, but at least `transaction_timeout_ms` (also when the
/// value does not parse). Java: `TransactionalMessageUtil#getImmunityTime`.
pub(crate) fn check_immunity_ms(value: &str, transaction_timeout_ms: i64) -> i64 {
    value.trim().parse::<i64>().map_or(0, |secs| secs.saturating_mul(1_000)).max(transaction_timeout_ms)
}

/// Turns a prepared message into a half message: REAL_TOPIC / REAL_QID keep where it goes,
/// `__transactionId__` is its UNIQ_KEY, it moves to the half topic's queue 0, and its system
/// flag loses the transaction bits so that it is dispatched to the half queue (which only the
/// broker reads). Returns the new system flag. Java: `parseHalfMessageInner`.
pub(crate) fn to_half_queue(
    topic: &mut String,
    queue_id: &mut i32,
    props: &mut MessageProperties,
    sys_flag: i32,
) -> i32 {
    if let Some(uniq) = props.get(keys::UNIQ_KEY).filter(|u| !u.is_empty()).map(str::to_owned) {
        props.insert(keys::TRANSACTION_ID, uniq);
    }
    props.insert(keys::REAL_TOPIC, std::mem::replace(topic, RMQ_SYS_TRANS_HALF_TOPIC.to_owned()));
    props.insert(keys::REAL_QID, queue_id.to_string());
    *queue_id = 0;
    sysflag::with_transaction_value(sys_flag, sysflag::TRANSACTION_NOT_TYPE)
}

/// Half messages waiting for their end, per real topic, for `rocketmq_half_messages`. Java:
/// `TransactionMetrics`, which also persists the counts in `config/transactionMetrics`; these
/// live in memory, so half messages stored before a restart are not counted (and their ends
/// do not take a count below zero).
#[derive(Debug, Default)]
pub(crate) struct HalfMessages {
    counts: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
}

/// Topics whose half messages are counted by name; the rest under `_other`.
pub(crate) const HALF_TOPICS_MAX: usize = 10_000;

impl HalfMessages {
    fn counts(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<String, u64>> {
        self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A half message of `topic` was stored.
    pub(crate) fn prepared(&self, topic: &str) {
        let mut counts = self.counts();
        let key = if counts.contains_key(topic) || counts.len() < HALF_TOPICS_MAX { topic } else { "_other" };
        *counts.entry(key.to_owned()).or_default() += 1;
    }

    /// A half message of `topic` was committed, rolled back or discarded.
    pub(crate) fn ended(&self, topic: &str) {
        let mut counts = self.counts();
        let key = if counts.contains_key(topic) { topic } else { "_other" };
        if let Some(n) = counts.get_mut(key) {
            *n = n.saturating_sub(1);
        }
    }

    /// `(topic, pending)` of every topic counted.
    pub(crate) fn rows(&self) -> Vec<(String, u64)> {
        self.counts().iter().map(|(t, n)| (t.clone(), *n)).collect()
    }

    /// Forgets a deleted topic.
    pub(crate) fn forget(&self, topic: &str) {
        self.counts().remove(topic);
    }

    /// Writes `rocketmq_half_messages` at scrape time.
    pub(crate) fn encode(
        &self,
        encoder: &mut ferromq_metrics::prometheus_client::encoding::DescriptorEncoder<'_>,
        limit: usize,
        folded: &mut ferromq_metrics::families::Folded,
    ) -> Result<(), std::fmt::Error> {
        use ferromq_metrics::families::{emit, Family, Kind, Series};
        let series = self.rows().into_iter().map(|(t, n)| Series::new(vec![("topic", t)], n)).collect();
        let family = Family {
            name: "rocketmq_half_messages",
            help: "Half messages waiting for their transaction's end",
            unit: None,
            kind: Kind::Gauge,
        };
        emit(encoder, family, series, limit, folded)
    }
}

/// The half queue offsets an op message marks done: 5.x writes them comma-terminated
/// (`"12,13,"`), 4.x one per message (`"12"`); both read here. Tokens that are not numbers are
/// skipped, as Java skips them.
pub(crate) fn parse_op_body(body: &[u8]) -> Vec<i64> {
    String::from_utf8_lossy(body).split(',').filter_map(|t| t.trim().parse().ok()).collect()
}

/// Op message bodies for `offsets`, each at most `max_size` bytes (at least one offset each).
pub(crate) fn op_bodies(offsets: &[i64], max_size: usize) -> Vec<String> {
    let mut bodies = Vec::new();
    let mut body = String::new();
    for offset in offsets {
        let token = format!("{offset},");
        if !body.is_empty() && body.len() + token.len() > max_size {
            bodies.push(std::mem::take(&mut body));
        }
        body.push_str(&token);
    }
    if !body.is_empty() {
        bodies.push(body);
    }
    bodies
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_messages_are_counted_until_they_end() {
        let h = HalfMessages::default();
        h.prepared("T");
        h.prepared("T");
        h.ended("T");
        h.ended("Unknown");
        assert_eq!(h.rows(), vec![("T".to_owned(), 1)]);
        h.ended("T");
        h.ended("T");
        assert_eq!(h.rows(), vec![("T".to_owned(), 0)], "never below zero");
        h.forget("T");
        assert!(h.rows().is_empty());
    }

    #[test]
    fn half_message_keeps_its_destination_and_transaction_id() {
        let mut topic = "Orders".to_owned();
        let mut queue_id = 3;
        let mut props = MessageProperties::decode("TRAN_MSG\u{1}true\u{2}PGROUP\u{1}pg\u{2}UNIQ_KEY\u{1}ABC\u{2}");
        let flag = to_half_queue(&mut topic, &mut queue_id, &mut props, sysflag::TRANSACTION_PREPARED_TYPE | 1);
        assert_eq!((topic.as_str(), queue_id), (RMQ_SYS_TRANS_HALF_TOPIC, 0));
        assert_eq!(flag, 1, "transaction bits cleared, others kept");
        assert_eq!(props.get(keys::REAL_TOPIC), Some("Orders"));
        assert_eq!(props.get(keys::REAL_QID), Some("3"));
        assert_eq!(props.get(keys::TRANSACTION_ID), Some("ABC"));
        assert_eq!(props.get(keys::TRAN_MSG), Some("true"));
    }

    #[test]
    fn check_immunity_is_at_least_the_transaction_timeout() {
        assert_eq!(check_immunity_ms("10", 6_000), 10_000);
        assert_eq!(check_immunity_ms(" 1 ", 6_000), 6_000);
        assert_eq!(check_immunity_ms("soon", 6_000), 6_000);
    }

    #[test]
    fn op_bodies_read_both_forms_and_split_by_size() {
        assert_eq!(parse_op_body(b"123"), vec![123]);
        assert_eq!(parse_op_body(b"1,2,3,"), vec![1, 2, 3]);
        assert_eq!(parse_op_body(b"1,x,,3"), vec![1, 3]);
        assert_eq!(op_bodies(&[1, 2, 3], 4096), vec!["1,2,3,".to_owned()]);
        assert_eq!(op_bodies(&[100, 200, 300], 8), vec!["100,200,".to_owned(), "300,".to_owned()]);
        assert_eq!(op_bodies(&[123_456], 2), vec!["123456,".to_owned()], "one offset always fits");
        assert!(op_bodies(&[], 10).is_empty());
    }
}
