//! Per-topic timer figures for `/metrics`: how many messages of each topic entered the wheel
//! and left it, and how late due messages were delivered. Java: `TimerMetrics` (which also
//! persists its counts in `config/timermetrics`; these live in memory only, so after a
//! restart the per-topic figures start again from zero while the wheel keeps its messages).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

/// Topics counted by name; further topics are counted under [`OTHER`].
pub const TOPICS_MAX: usize = 1_000;
/// The key of the topics past [`TOPICS_MAX`].
pub const OTHER: &str = "_other";
/// Upper bounds (seconds) of the delivery-latency buckets; a last bucket takes the rest.
pub const LATENCY_BOUNDS_S: [f64; 6] = [1.0, 5.0, 10.0, 60.0, 600.0, 3_600.0];

/// One topic's messages into and out of the wheel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopicTimerCounts {
    /// Messages linked into the wheel (each roll counts again).
    pub enqueued: u64,
    /// Messages taken out of the wheel when due (delivered, rolled on, or recalled).
    pub dequeued: u64,
}

impl TopicTimerCounts {
    /// Messages of the topic in the wheel now (never below zero: counts restart at zero).
    pub fn timing(&self) -> u64 {
        self.enqueued.saturating_sub(self.dequeued)
    }
}

/// How late due messages were delivered: `now − TIMER_OUT_MS`, in seconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DelayLatency {
    /// Deliveries per bucket of [`LATENCY_BOUNDS_S`] (not cumulative), plus one past the last.
    pub buckets: [u64; LATENCY_BOUNDS_S.len() + 1],
    /// Sum of the latencies (seconds).
    pub sum_s: f64,
    /// Deliveries.
    pub count: u64,
}

#[derive(Debug, Default)]
pub(crate) struct TopicMetrics {
    topics: Mutex<BTreeMap<String, TopicTimerCounts>>,
    latency: Mutex<DelayLatency>,
}

impl TopicMetrics {
    fn with_topic(&self, topic: &str, f: impl FnOnce(&mut TopicTimerCounts)) {
        let mut topics = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = topics.get_mut(topic) {
            f(c);
            return;
        }
        let key = if topics.len() < TOPICS_MAX { topic } else { OTHER };
        f(topics.entry(key.to_owned()).or_default());
    }

    pub(crate) fn enqueued(&self, topic: &str) {
        self.with_topic(topic, |c| c.enqueued += 1);
    }

    pub(crate) fn dequeued(&self, topic: &str) {
        self.with_topic(topic, |c| c.dequeued += 1);
    }

    pub(crate) fn delivered_late(&self, late_ms: i64) {
        let seconds = late_ms.max(0) as f64 / 1_000.0;
        let bucket = LATENCY_BOUNDS_S.iter().position(|b| seconds <= *b).unwrap_or(LATENCY_BOUNDS_S.len());
        let mut latency = self.latency.lock().unwrap_or_else(PoisonError::into_inner);
        latency.buckets[bucket] += 1;
        latency.sum_s += seconds;
        latency.count += 1;
    }

    pub(crate) fn topics(&self) -> Vec<(String, TopicTimerCounts)> {
        let topics = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        topics.iter().map(|(t, c)| (t.clone(), *c)).collect()
    }

    pub(crate) fn latency(&self) -> DelayLatency {
        self.latency.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_counted_and_bounded() {
        let m = TopicMetrics::default();
        m.enqueued("a");
        m.enqueued("a");
        m.dequeued("a");
        m.dequeued("b");
        let topics = m.topics();
        assert_eq!(topics[0], ("a".to_owned(), TopicTimerCounts { enqueued: 2, dequeued: 1 }));
        assert_eq!(topics[0].1.timing(), 1);
        assert_eq!(topics[1].1.timing(), 0, "never below zero");
        for i in 0..TOPICS_MAX + 5 {
            m.enqueued(&format!("t{i}"));
        }
        let topics = m.topics();
        assert_eq!(topics.len(), TOPICS_MAX + 1);
        assert_eq!(topics.iter().find(|(t, _)| t == OTHER).unwrap().1.enqueued, 7);
    }

    #[test]
    fn latencies_fall_into_their_buckets() {
        let m = TopicMetrics::default();
        m.delivered_late(200);
        m.delivered_late(7_000);
        m.delivered_late(-5);
        m.delivered_late(10_000_000);
        let l = m.latency();
        assert_eq!(l.buckets, [2, 0, 1, 0, 0, 0, 1]);
        assert_eq!(l.count, 4);
        assert!((l.sum_s - 10_007.2).abs() < 1e-9);
    }
}
