//! Per-topic pull and consume rates of one consumer group, reported in the status table of
//! GET_CONSUMER_RUNNING_INFO: rates and mean times over the last minute, failed messages over
//! the last hour. Java: `ConsumerStatsManager` (whose `StatsItemSet`s sample every 10 s; here
//! events land in one-second buckets).
//!
//! The clock is passed in, so the arithmetic is tested without waiting.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferromq_protocol::body::ConsumeStatus;

use crate::client_instance::lock;

/// The window of the rates and mean times.
const MINUTE_SECS: u64 = 60;
/// The window of the failed-message count, in minutes.
const HOUR_MINUTES: u64 = 60;

/// Milliseconds since the epoch, now.
pub(crate) fn epoch_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// What happened in one second.
#[derive(Debug, Default, Clone, Copy)]
struct Second {
    /// Seconds since the stats were created.
    at: u64,
    pulls: u64,
    pull_rt_ms: u64,
    pulled_msgs: u64,
    consumes: u64,
    consume_rt_ms: u64,
    ok_msgs: u64,
    failed_msgs: u64,
}

#[derive(Debug, Default)]
struct TopicStats {
    /// At most [`MINUTE_SECS`] buckets, oldest first.
    seconds: VecDeque<Second>,
    /// (minute since creation, failed messages), at most [`HOUR_MINUTES`], oldest first.
    failed_by_minute: VecDeque<(u64, u64)>,
}

impl TopicStats {
    fn bucket(&mut self, at: u64) -> &mut Second {
        while self.seconds.front().is_some_and(|b| b.at + MINUTE_SECS <= at) {
            self.seconds.pop_front();
        }
        if self.seconds.back().is_none_or(|b| b.at != at) {
            self.seconds.push_back(Second { at, ..Second::default() });
        }
        self.seconds.back_mut().expect("a bucket was pushed above if there was none")
    }

    fn add_failed(&mut self, minute: u64, n: u64) {
        while self.failed_by_minute.front().is_some_and(|(m, _)| m + HOUR_MINUTES <= minute) {
            self.failed_by_minute.pop_front();
        }
        match self.failed_by_minute.back_mut() {
            Some((m, count)) if *m == minute => *count += n,
            _ => self.failed_by_minute.push_back((minute, n)),
        }
    }
}

/// The rates of one consumer group, by topic (the queue's topic: retry topics count apart).
#[derive(Debug)]
pub(crate) struct ConsumerStats {
    created: Instant,
    topics: Mutex<HashMap<String, TopicStats>>,
}

impl ConsumerStats {
    pub(crate) fn new(now: Instant) -> Self {
        ConsumerStats { created: now, topics: Mutex::new(HashMap::new()) }
    }

    fn second(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.created).as_secs()
    }

    /// One pull answered after `rt` with `msgs` messages. Java: `incPullRT` + `incPullTPS`.
    pub(crate) fn record_pull(&self, topic: &str, rt: Duration, msgs: usize, now: Instant) {
        let at = self.second(now);
        let mut topics = lock(&self.topics);
        let b = topics.entry(topic.to_owned()).or_default().bucket(at);
        b.pulls += 1;
        b.pull_rt_ms += millis(rt);
        b.pulled_msgs += msgs as u64;
    }

    /// One listener call that took `rt`, with `ok` messages consumed and `failed` not.
    /// Java: `incConsumeRT` + `incConsumeOKTPS` + `incConsumeFailedTPS`.
    pub(crate) fn record_consume(&self, topic: &str, rt: Duration, ok: usize, failed: usize, now: Instant) {
        let at = self.second(now);
        let mut topics = lock(&self.topics);
        let t = topics.entry(topic.to_owned()).or_default();
        let b = t.bucket(at);
        b.consumes += 1;
        b.consume_rt_ms += millis(rt);
        b.ok_msgs += ok as u64;
        b.failed_msgs += failed as u64;
        if failed > 0 {
            t.add_failed(at / 60, failed as u64);
        }
    }

    /// The topic's rates over the last minute (or since creation, when younger) and its failed
    /// messages over the last hour. Java: `ConsumerStatsManager#consumeStatus`.
    pub(crate) fn status(&self, topic: &str, now: Instant) -> ConsumeStatus {
        let at = self.second(now);
        let topics = lock(&self.topics);
        let Some(t) = topics.get(topic) else { return ConsumeStatus::default() };
        let mut sum = Second::default();
        for b in t.seconds.iter().filter(|b| b.at + MINUTE_SECS > at) {
            sum.pulls += b.pulls;
            sum.pull_rt_ms += b.pull_rt_ms;
            sum.pulled_msgs += b.pulled_msgs;
            sum.consumes += b.consumes;
            sum.consume_rt_ms += b.consume_rt_ms;
            sum.ok_msgs += b.ok_msgs;
            sum.failed_msgs += b.failed_msgs;
        }
        let window = (at + 1).min(MINUTE_SECS) as f64;
        let mean = |total: u64, n: u64| if n == 0 { 0.0 } else { total as f64 / n as f64 };
        let minute = at / 60;
        ConsumeStatus {
            consume_failed_msgs: t
                .failed_by_minute
                .iter()
                .filter(|(m, _)| m + HOUR_MINUTES > minute)
                .map(|(_, n)| i64::try_from(*n).unwrap_or(i64::MAX))
                .sum(),
            consume_failed_tps: sum.failed_msgs as f64 / window,
            consume_ok_tps: sum.ok_msgs as f64 / window,
            consume_rt: mean(sum.consume_rt_ms, sum.consumes),
            pull_rt: mean(sum.pull_rt_ms, sum.pulls),
            pull_tps: sum.pulled_msgs as f64 / window,
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_cover_the_last_minute_and_failures_the_last_hour() {
        let t0 = Instant::now();
        let stats = ConsumerStats::new(t0);
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        assert_eq!(stats.status("T", t0), ConsumeStatus::default());

        stats.record_pull("T", Duration::from_millis(10), 8, at(0));
        stats.record_pull("T", Duration::from_millis(30), 2, at(1));
        stats.record_consume("T", Duration::from_millis(4), 3, 0, at(1));
        stats.record_consume("T", Duration::from_millis(6), 0, 2, at(1));
        let s = stats.status("T", at(1));
        // Two seconds old: the window is two seconds.
        assert_eq!((s.pull_tps, s.pull_rt), (5.0, 20.0));
        assert_eq!((s.consume_ok_tps, s.consume_failed_tps, s.consume_rt), (1.5, 1.0, 5.0));
        assert_eq!(s.consume_failed_msgs, 2);

        let s = stats.status("T", at(59));
        assert_eq!(s.pull_tps, 10.0 / 60.0);
        let s = stats.status("T", at(61));
        assert_eq!((s.pull_tps, s.pull_rt, s.consume_ok_tps), (0.0, 0.0, 0.0));
        assert_eq!(s.consume_failed_msgs, 2, "failures count for an hour");
        stats.record_consume("T", Duration::ZERO, 0, 1, at(3_000));
        assert_eq!(stats.status("T", at(3_000)).consume_failed_msgs, 3);
        assert_eq!(stats.status("T", at(3_700)).consume_failed_msgs, 1);
        assert_eq!(stats.status("other", at(1)), ConsumeStatus::default());
    }

    #[test]
    fn buckets_stay_bounded() {
        let t0 = Instant::now();
        let stats = ConsumerStats::new(t0);
        for s in 0..10_000 {
            stats.record_consume("T", Duration::ZERO, 1, 1, t0 + Duration::from_secs(s));
        }
        let topics = lock(&stats.topics);
        assert!(topics["T"].seconds.len() <= MINUTE_SECS as usize);
        assert!(topics["T"].failed_by_minute.len() <= HOUR_MINUTES as usize);
    }
}
