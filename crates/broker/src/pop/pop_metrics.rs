//! POP revive figures for `/metrics` (Java: `PopMetricsManager`): checkpoint and ack records
//! written to and read from the revive queues, revived messages put back per topic and group,
//! and each revive queue's backlog. Bounded: a handful of record kinds, queue ids and put
//! statuses, and at most [`RETRY_KEYS_MAX`] topic-group pairs (the rest under `_other`).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use ferromq_metrics::families::{emit, Family, Folded, Kind, Series};
use ferromq_metrics::prometheus_client::encoding::DescriptorEncoder;

/// Topic-group pairs whose revived messages are counted by name.
pub(crate) const RETRY_KEYS_MAX: usize = 10_000;

/// A revive record's kind, as Java labels it (`revive_message_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ReviveKind {
    Ck,
    Ack,
}

impl ReviveKind {
    pub(crate) fn label(self) -> &'static str {
        match self {
            ReviveKind::Ck => "ck",
            ReviveKind::Ack => "ack",
        }
    }
}

/// One revive queue's backlog at the end of its last round.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ReviveProgress {
    /// Records of the queue not yet done with (read and revived, or acknowledged).
    pub(crate) lag: i64,
    /// How far past its revive time the oldest open checkpoint is (ms; 0 when none is due).
    pub(crate) latency_ms: i64,
}

#[derive(Debug, Default)]
pub(crate) struct PopMetrics {
    revive_in: Mutex<BTreeMap<(ReviveKind, i32, &'static str), u64>>,
    revive_out: Mutex<BTreeMap<(ReviveKind, i32), u64>>,
    retries: Mutex<BTreeMap<(String, String, &'static str), u64>>,
    progress: Mutex<BTreeMap<i32, ReviveProgress>>,
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PopMetrics {
    /// A record written to revive queue `qid` with `put_status`.
    pub(crate) fn revive_in(&self, kind: ReviveKind, qid: i32, put_status: &'static str) {
        *guard(&self.revive_in).entry((kind, qid, put_status)).or_default() += 1;
    }

    /// A record read from revive queue `qid` by the revive service.
    pub(crate) fn revive_out(&self, kind: ReviveKind, qid: i32) {
        *guard(&self.revive_out).entry((kind, qid)).or_default() += 1;
    }

    /// `n` revived messages of `topic` and `group` put back (to the retry topic) with `put_status`.
    pub(crate) fn retried(&self, topic: &str, group: &str, put_status: &'static str, n: u64) {
        let mut retries = guard(&self.retries);
        let key = (topic.to_owned(), group.to_owned(), put_status);
        if retries.contains_key(&key) || retries.len() < RETRY_KEYS_MAX {
            *retries.entry(key).or_default() += n;
        } else {
            *retries.entry(("_other".to_owned(), "_other".to_owned(), put_status)).or_default() += n;
        }
    }

    /// Revive queue `qid`'s backlog after a round.
    pub(crate) fn progress(&self, qid: i32, progress: ReviveProgress) {
        guard(&self.progress).insert(qid, progress);
    }

    /// `(kind, queue id, put status, count)` of the records written.
    pub(crate) fn revive_in_rows(&self) -> Vec<(ReviveKind, i32, &'static str, u64)> {
        guard(&self.revive_in).iter().map(|((k, q, s), n)| (*k, *q, *s, *n)).collect()
    }

    /// `(kind, queue id, count)` of the records read.
    pub(crate) fn revive_out_rows(&self) -> Vec<(ReviveKind, i32, u64)> {
        guard(&self.revive_out).iter().map(|((k, q), n)| (*k, *q, *n)).collect()
    }

    /// `(topic, group, put status, count)` of the messages revived.
    pub(crate) fn retry_rows(&self) -> Vec<(String, String, &'static str, u64)> {
        guard(&self.retries).iter().map(|((t, g, s), n)| (t.clone(), g.clone(), *s, *n)).collect()
    }

    /// Each revive queue's backlog.
    pub(crate) fn progress_rows(&self) -> Vec<(i32, ReviveProgress)> {
        guard(&self.progress).iter().map(|(q, p)| (*q, *p)).collect()
    }

    /// Writes the revive families (Java's names and labels) at scrape time.
    pub(crate) fn encode(
        &self,
        encoder: &mut DescriptorEncoder<'_>,
        limit: usize,
        folded: &mut Folded,
    ) -> Result<(), std::fmt::Error> {
        let counter = |name, help| Family { name, help, unit: None, kind: Kind::Counter };
        let gauge = |name, help, unit| Family { name, help, unit, kind: Kind::Gauge };
        let input = self
            .revive_in_rows()
            .into_iter()
            .map(|(k, q, s, n)| {
                let labels = vec![
                    ("revive_message_type", k.label().to_owned()),
                    ("queue_id", q.to_string()),
                    ("put_status", s.to_owned()),
                ];
                Series::new(labels, n)
            })
            .collect();
        let help = "Checkpoint and ack records written to the revive queues";
        emit(encoder, counter("rocketmq_pop_revive_in_message", help), input, limit, folded)?;
        let output = self
            .revive_out_rows()
            .into_iter()
            .map(|(k, q, n)| {
                Series::new(vec![("revive_message_type", k.label().to_owned()), ("queue_id", q.to_string())], n)
            })
            .collect();
        let help = "Checkpoint and ack records read by the revive service";
        emit(encoder, counter("rocketmq_pop_revive_out_message", help), output, limit, folded)?;
        let retries = self
            .retry_rows()
            .into_iter()
            .map(|(t, g, s, n)| Series::new(vec![("topic", t), ("consumer_group", g), ("put_status", s.to_owned())], n))
            .collect();
        let help = "Popped messages not acknowledged in time, put back for another delivery";
        emit(encoder, counter("rocketmq_pop_revive_retry_messages", help), retries, limit, folded)?;
        let progress = self.progress_rows();
        let lag = progress.iter().map(|(q, p)| Series::new(vec![("queue_id", q.to_string())], p.lag)).collect();
        let help = "Records of a revive queue not yet done with";
        emit(encoder, gauge("rocketmq_pop_revive_lag", help, None), lag, limit, folded)?;
        let latency =
            progress.iter().map(|(q, p)| Series::new(vec![("queue_id", q.to_string())], p.latency_ms)).collect();
        let help = "How far past its revive time a revive queue's oldest open checkpoint is";
        emit(encoder, gauge("rocketmq_pop_revive_latency", help, Some("milliseconds")), latency, limit, folded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_counted_and_retry_pairs_bounded() {
        let m = PopMetrics::default();
        m.revive_in(ReviveKind::Ck, 0, "PUT_OK");
        m.revive_in(ReviveKind::Ck, 0, "PUT_OK");
        m.revive_in(ReviveKind::Ack, 1, "PUT_OK");
        m.revive_out(ReviveKind::Ck, 0);
        assert_eq!(m.revive_in_rows(), vec![(ReviveKind::Ck, 0, "PUT_OK", 2), (ReviveKind::Ack, 1, "PUT_OK", 1)]);
        assert_eq!(m.revive_out_rows(), vec![(ReviveKind::Ck, 0, 1)]);
        for i in 0..RETRY_KEYS_MAX + 3 {
            m.retried(&format!("t{i}"), "g", "PUT_OK", 2);
        }
        let rows = m.retry_rows();
        assert_eq!(rows.len(), RETRY_KEYS_MAX + 1);
        assert_eq!(rows.iter().find(|r| r.0 == "_other").unwrap().3, 6);
        m.progress(3, ReviveProgress { lag: 5, latency_ms: 10 });
        assert_eq!(m.progress_rows(), vec![(3, ReviveProgress { lag: 5, latency_ms: 10 })]);
    }
}
