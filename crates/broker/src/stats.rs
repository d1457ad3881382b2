//! Per-topic and per-group message counters and their rate over the last minute, for the
//! `topicPutTps` of GET_TOPIC_STATS_INFO and the `consumeTps` of GET_CONSUME_STATS, and their
//! minute, hour and day totals for VIEW_BROKER_STATS_DATA.
//! Java: `BrokerStatsManager` (`TOPIC_PUT_NUMS`, `GROUP_GET_NUMS`) and `StatsItem`.
//!
//! Java samples each counter every 10 s and reports the rate between the oldest and newest
//! sample of the last minute, so a fresh counter reads 0 for the first 10 s. Here the live
//! value counts too: the rate is (now − oldest sample) over at least one second, so it is
//! right from the first message and still a one-minute average once the broker has run.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// The wall clock in milliseconds, as the counters take it.
pub(crate) fn clock_ms() -> u64 {
    u64::try_from(crate::broker::now_ms()).unwrap_or(0)
}

/// How often the periodic task samples every counter. Java: `StatsItem#init` (10 s).
pub(crate) const SAMPLE_INTERVAL_MS: u64 = 10_000;

/// The window a rate covers. Java: `getStatsDataInMinute`.
const WINDOW_MS: u64 = 60_000;

/// The shortest span a rate is divided by, so a burst right after a counter appears does not
/// read as millions per second.
const MIN_SPAN_MS: u64 = 1_000;

/// At most this many counters per set; past it new keys are not counted (and a warning is
/// logged once), so a client inventing topic or group names cannot grow the broker without
/// bound. Far above any real broker's topic-group pairs; each key keeps about 40 samples over
/// its three windows (about 1 KiB), so the bound is some 20 MiB.
const MAX_KEYS: usize = 20_000;

/// One sample of a counter: when, its value, and how many additions made it.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at_ms: u64,
    value: u64,
    times: u64,
}

/// A counter's totals over one window. Java: `StatsSnapshot`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Snapshot {
    /// What was added within the window.
    pub(crate) sum: u64,
    /// `sum` per second.
    pub(crate) tps: f64,
    /// `sum` per addition (messages per put or pull).
    pub(crate) avgpt: f64,
}

/// Samples of one window, oldest first: one every `every_ms`, enough to cover `span_ms`.
#[derive(Debug)]
struct Window {
    every_ms: u64,
    span_ms: u64,
    samples: VecDeque<Sample>,
}

impl Window {
    fn new(every_ms: u64, span_ms: u64, first: Sample) -> Window {
        Window { every_ms, span_ms, samples: VecDeque::from([first]) }
    }

    fn sample(&mut self, now: Sample) {
        // The task ticks every SAMPLE_INTERVAL_MS with some jitter: a sample is due when the
        // next tick would be later than `every_ms`.
        let due = self
            .samples
            .back()
            .is_none_or(|last| now.at_ms.saturating_sub(last.at_ms) + SAMPLE_INTERVAL_MS / 2 >= self.every_ms);
        if !due {
            return;
        }
        self.samples.push_back(now);
        // Keep one sample at or before the window's start, so the window is always covered.
        while self.samples.len() > 1 && self.samples[1].at_ms + self.span_ms <= now.at_ms {
            self.samples.pop_front();
        }
    }

    /// From the oldest sample to the live values: the live value counts, so a fresh counter
    /// reads right from its first addition.
    fn snapshot(&self, now: Sample) -> Snapshot {
        let Some(base) = self.samples.front() else { return Snapshot::default() };
        let sum = now.value.saturating_sub(base.value);
        let span = now.at_ms.saturating_sub(base.at_ms).max(MIN_SPAN_MS);
        let times = now.times.saturating_sub(base.times);
        Snapshot {
            sum,
            tps: sum as f64 * 1000.0 / span as f64,
            avgpt: if times > 0 { sum as f64 / times as f64 } else { 0.0 },
        }
    }
}

/// The windows Java reports: the last minute (sampled every 10 s), hour (every 10 minutes)
/// and day (every hour). Java: `StatsItem#getStatsDataInMinute` / `InHour` / `InDay`.
const MINUTE: usize = 0;
const HOUR: usize = 1;
const DAY: usize = 2;

/// One counter, how many additions made it, and its recent samples per window.
#[derive(Debug)]
struct StatsItem {
    value: AtomicU64,
    times: AtomicU64,
    windows: Mutex<[Window; 3]>,
}

impl StatsItem {
    fn new(now_ms: u64) -> StatsItem {
        let first = Sample { at_ms: now_ms, value: 0, times: 0 };
        StatsItem {
            value: AtomicU64::new(0),
            times: AtomicU64::new(0),
            windows: Mutex::new([
                Window::new(SAMPLE_INTERVAL_MS, WINDOW_MS, first),
                Window::new(10 * 60_000, 3_600_000, first),
                Window::new(3_600_000, 86_400_000, first),
            ]),
        }
    }

    fn now(&self, now_ms: u64) -> Sample {
        Sample { at_ms: now_ms, value: self.value.load(Ordering::Relaxed), times: self.times.load(Ordering::Relaxed) }
    }

    fn sample(&self, now_ms: u64) {
        let now = self.now(now_ms);
        for window in self.windows.lock().unwrap_or_else(|e| e.into_inner()).iter_mut() {
            window.sample(now);
        }
    }

    fn snapshots(&self, now_ms: u64) -> [Snapshot; 3] {
        let now = self.now(now_ms);
        let windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        [windows[MINUTE].snapshot(now), windows[HOUR].snapshot(now), windows[DAY].snapshot(now)]
    }

    fn rate(&self, now_ms: u64) -> f64 {
        let now = self.now(now_ms);
        self.windows.lock().unwrap_or_else(|e| e.into_inner())[MINUTE].snapshot(now).tps
    }
}

/// Counters by key, each with its one-minute rate.
#[derive(Debug, Default)]
pub(crate) struct StatsItemSet {
    items: RwLock<HashMap<String, Arc<StatsItem>>>,
    full_warned: std::sync::atomic::AtomicBool,
}

impl StatsItemSet {
    /// Adds `n` to the counter of `key`, creating it now: the clock is read only then.
    pub(crate) fn count(&self, key: &str, n: u64) {
        self.add_created_at(key, n, clock_ms);
    }

    /// Adds `n` to the counter of `key`, creating it at `now_ms` (tests set the clock).
    #[cfg(test)]
    pub(crate) fn add(&self, key: &str, n: u64, now_ms: u64) {
        self.add_created_at(key, n, || now_ms);
    }

    /// Adds `n` to the counter of `key`, creating it at the time `now` gives.
    fn add_created_at(&self, key: &str, n: u64, now: impl FnOnce() -> u64) {
        if let Some(item) = self.items.read().unwrap_or_else(|e| e.into_inner()).get(key) {
            item.value.fetch_add(n, Ordering::Relaxed);
            item.times.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut items = self.items.write().unwrap_or_else(|e| e.into_inner());
        if items.len() >= MAX_KEYS && !items.contains_key(key) {
            if !self.full_warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(max = MAX_KEYS, key, "stats counters full; new keys are not counted");
            }
            return;
        }
        let item = items.entry(key.to_owned()).or_insert_with(|| Arc::new(StatsItem::new(now())));
        item.value.fetch_add(n, Ordering::Relaxed);
        item.times.fetch_add(1, Ordering::Relaxed);
    }

    /// Messages per second of `key` over the last minute; 0 for an unknown key.
    pub(crate) fn rate(&self, key: &str, now_ms: u64) -> f64 {
        self.items.read().unwrap_or_else(|e| e.into_inner()).get(key).map_or(0.0, |item| item.rate(now_ms))
    }

    /// The minute, hour and day totals of `key`; `None` for a key never counted.
    pub(crate) fn snapshots(&self, key: &str, now_ms: u64) -> Option<[Snapshot; 3]> {
        self.items.read().unwrap_or_else(|e| e.into_inner()).get(key).map(|item| item.snapshots(now_ms))
    }

    /// Records every counter's value at `now_ms` (the periodic task, every [`SAMPLE_INTERVAL_MS`]).
    pub(crate) fn sample(&self, now_ms: u64) {
        let items: Vec<Arc<StatsItem>> =
            self.items.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        for item in items {
            item.sample(now_ms);
        }
    }

    /// Drops the counters whose key satisfies `doomed` (a deleted topic or group).
    pub(crate) fn remove_where(&self, doomed: impl Fn(&str) -> bool) {
        self.items.write().unwrap_or_else(|e| e.into_inner()).retain(|k, _| !doomed(k));
    }
}

/// The broker's counters. Java: `BrokerStatsManager`.
#[derive(Debug, Default)]
pub(crate) struct BrokerStats {
    /// Messages stored, by topic. Java: `TOPIC_PUT_NUMS`.
    pub(crate) topic_put_nums: StatsItemSet,
    /// Messages pulled, by `topic@group`. Java: `GROUP_GET_NUMS`.
    pub(crate) group_get_nums: StatsItemSet,
    /// The timer wheel's enqueue and delivery rates for GET_BROKER_RUNTIME_INFO.
    pub(crate) timer_tps: IntervalRates,
}

/// Rates of two counters kept elsewhere (the timer wheel's enqueues and deliveries), from the
/// last two samples the broker's stats task takes every [`SAMPLE_INTERVAL_MS`]; 0 until there
/// are two. Reading does not move the window, so every caller sees the same rates.
#[derive(Debug, Default)]
pub(crate) struct IntervalRates {
    /// (at ms, a, b) of the previous and the latest sample.
    samples: Mutex<[Option<(u64, u64, u64)>; 2]>,
}

impl IntervalRates {
    /// Records the counters at `now_ms`.
    pub(crate) fn sample(&self, a: u64, b: u64, now_ms: u64) {
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        samples[0] = samples[1].take();
        samples[1] = Some((now_ms, a, b));
    }

    /// Per-second rates of both counters between the last two samples.
    pub(crate) fn rates(&self) -> (f64, f64) {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        match *samples {
            [Some((t0, a0, b0)), Some((t1, a1, b1))] if t1 > t0 => {
                let seconds = (t1 - t0) as f64 / 1000.0;
                (a1.saturating_sub(a0) as f64 / seconds, b1.saturating_sub(b0) as f64 / seconds)
            }
            _ => (0.0, 0.0),
        }
    }
}

impl BrokerStats {
    /// The `topic@group` key of the group counters (Java's order).
    pub(crate) fn group_key(topic: &str, group: &str) -> String {
        format!("{topic}@{group}")
    }

    /// The topic and group of a [`Self::group_key`] (a key without `@`: all topic, no group).
    pub(crate) fn split_group_key(key: &str) -> (&str, &str) {
        key.split_once('@').unwrap_or((key, ""))
    }

    /// Samples every counter.
    pub(crate) fn sample(&self, now_ms: u64) {
        self.topic_put_nums.sample(now_ms);
        self.group_get_nums.sample(now_ms);
    }

    /// Forgets a deleted topic's counters.
    pub(crate) fn on_topic_deleted(&self, topic: &str) {
        self.topic_put_nums.remove_where(|k| k == topic);
        self.group_get_nums.remove_where(|k| k.split_once('@').is_some_and(|(t, _)| t == topic));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000;

    #[test]
    fn interval_rates_come_from_the_last_two_samples() {
        let rates = IntervalRates::default();
        assert_eq!(rates.rates(), (0.0, 0.0), "no sample yet");
        rates.sample(10, 5, T0);
        assert_eq!(rates.rates(), (0.0, 0.0), "one sample is no interval");
        rates.sample(30, 5, T0 + 2_000);
        assert_eq!(rates.rates(), (10.0, 0.0));
        assert_eq!(rates.rates(), (10.0, 0.0), "reading does not move the window");
        rates.sample(31, 13, T0 + 3_000);
        assert_eq!(rates.rates(), (1.0, 8.0));
    }

    #[test]
    fn rate_counts_from_the_first_message_over_at_least_one_second() {
        let set = StatsItemSet::default();
        assert_eq!(set.rate("t", T0), 0.0);
        set.add("t", 50, T0);
        // 50 messages within the first 10 ms are 50 per (at least one) second.
        assert!((set.rate("t", T0 + 10) - 50.0).abs() < 1e-9);
        set.add("t", 50, T0 + 1_000);
        assert!((set.rate("t", T0 + 4_000) - 25.0).abs() < 1e-9);
    }

    #[test]
    fn rate_is_a_one_minute_window_once_samples_age_out() {
        let set = StatsItemSet::default();
        set.add("t", 0, T0);
        // 10 messages a second for two minutes, sampled every 10 s.
        for tick in 1..=12u64 {
            set.add("t", 100, T0 + tick * SAMPLE_INTERVAL_MS);
            set.sample(T0 + tick * SAMPLE_INTERVAL_MS);
        }
        // Then silence for 30 s: the minute holds 30 s of traffic.
        let now = T0 + 12 * SAMPLE_INTERVAL_MS + 30_000;
        set.sample(now);
        let rate = set.rate("t", now);
        assert!((rate - 5.0).abs() < 1e-9, "{rate}");
        // Long silence: the rate drops to zero.
        let later = now + 2 * WINDOW_MS;
        set.sample(later - WINDOW_MS);
        set.sample(later);
        assert_eq!(set.rate("t", later), 0.0);
    }

    #[test]
    fn minute_hour_and_day_totals_cover_their_windows() {
        let set = StatsItemSet::default();
        assert!(set.snapshots("t", T0).is_none(), "an unknown key has no totals");
        set.add("t", 0, T0);
        // Two puts of 5 messages every 10 s for three hours: 1 message a second.
        let ticks = 3 * 360u64;
        for tick in 1..=ticks {
            let now = T0 + tick * SAMPLE_INTERVAL_MS;
            set.add("t", 5, now);
            set.add("t", 5, now);
            set.sample(now);
        }
        let now = T0 + ticks * SAMPLE_INTERVAL_MS;
        let [minute, hour, day] = set.snapshots("t", now).unwrap();
        assert_eq!(minute.sum, 60, "{minute:?}");
        assert!((minute.tps - 1.0).abs() < 1e-9, "{minute:?}");
        assert!((minute.avgpt - 5.0).abs() < 1e-9, "{minute:?}");
        // The hour window is sampled every 10 minutes: it spans 60 to 70 minutes.
        assert!((3_600..=4_200).contains(&hour.sum), "{hour:?}");
        assert!((hour.tps - 1.0).abs() < 1e-9, "{hour:?}");
        assert_eq!(day.sum, 3 * 3_600, "the whole run is within the day: {day:?}");
    }

    #[test]
    fn samples_stay_bounded() {
        let item = StatsItem::new(T0);
        for tick in 1..=1_000u64 {
            item.sample(T0 + tick * SAMPLE_INTERVAL_MS);
        }
        let windows = item.windows.lock().unwrap();
        let lens: Vec<usize> = windows.iter().map(|w| w.samples.len()).collect();
        assert!(lens[MINUTE] <= (WINDOW_MS / SAMPLE_INTERVAL_MS) as usize + 1, "{lens:?}");
        assert!(lens[HOUR] <= 7 && lens[DAY] <= 25, "{lens:?}");
    }

    #[test]
    fn deleting_a_topic_drops_its_topic_and_group_counters() {
        let stats = BrokerStats::default();
        stats.topic_put_nums.add("A", 1, T0);
        stats.topic_put_nums.add("AB", 1, T0);
        stats.group_get_nums.add(&BrokerStats::group_key("A", "g"), 1, T0);
        stats.group_get_nums.add(&BrokerStats::group_key("AB", "g"), 1, T0);
        stats.on_topic_deleted("A");
        assert_eq!(stats.topic_put_nums.rate("A", T0 + 1), 0.0);
        assert_eq!(stats.group_get_nums.rate("A@g", T0 + 1), 0.0);
        assert!(stats.topic_put_nums.rate("AB", T0 + 1) > 0.0);
        assert!(stats.group_get_nums.rate("AB@g", T0 + 1) > 0.0);
    }

    #[test]
    fn group_keys_split_back_into_topic_and_group() {
        assert_eq!(BrokerStats::group_key("T", "g"), "T@g");
        assert_eq!(BrokerStats::split_group_key("T@g"), ("T", "g"));
        assert_eq!(BrokerStats::split_group_key("T"), ("T", ""));
    }
}
