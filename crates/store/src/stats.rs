//! Store statistics as a broker reports them: put and get counts, TPS, put latency. Java:
//! `StoreStatsService`.
//!
//! The hot path only bumps atomic counters. Once a second a sampler records the cumulative
//! counters into a ring of [`SAMPLES_MAX`] samples. A TPS over a window of n seconds is the
//! difference between the newest sample and the one n samples before it, divided by the time
//! between them, as in Java. The ring holds enough samples for Java's 10 s, 60 s and 600 s
//! windows, which `putTps` and the other TPS keys report. A 1 s window is added for callers.
//!
//! Compared with Java:
//! - counts are not kept per topic;
//! - the latency distribution counts from boot, where Java reports the previous minute;
//! - `putMessageTimesTotal` reports the real count, where Java reports 1 before the first put;
//! - the percentiles (`putLatency99`, `putLatency999`) and `dispatchMaxBuffer` are not reported;
//! - the `[STORETPS]` and `[PAGECACHERT]` log lines are not written.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::get_result::{GetMessageResult, GetMessageStatus};
use crate::put_result::PutMessageResult;

/// How often the sampler records the counters. Java: `FREQUENCY_OF_SAMPLING` (1000 ms).
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// Samples kept: ten minutes at one a second, plus one. Java: `MAX_RECORDS_OF_SAMPLING + 1`.
pub const SAMPLES_MAX: usize = 601;

/// Names of the put latency buckets, as RocketMQ prints them. Java:
/// `StoreStatsService.PUT_MESSAGE_ENTIRE_TIME_MAX_DESC`.
pub const PUT_LATENCY_BUCKET_NAMES: [&str; 13] = [
    "[<=0ms]",
    "[0~10ms]",
    "[10~50ms]",
    "[50~100ms]",
    "[100~200ms]",
    "[200~500ms]",
    "[500ms~1s]",
    "[1~2s]",
    "[2~3s]",
    "[3~4s]",
    "[4~5s]",
    "[5~10s]",
    "[10s~]",
];

/// Exclusive upper bounds (ms) of buckets 1 to 11. Bucket 0 is exactly 0 ms, bucket 12 is
/// everything from 10 s up. Java: `StoreStatsService#setPutMessageEntireTimeMax`.
const PUT_LATENCY_BOUNDS_MS: [u64; 11] = [10, 50, 100, 200, 500, 1_000, 2_000, 3_000, 4_000, 5_000, 10_000];

/// The bucket index for a put that took `ms` milliseconds.
fn put_latency_bucket(ms: u64) -> usize {
    if ms == 0 {
        return 0;
    }
    1 + PUT_LATENCY_BOUNDS_MS.iter().position(|&bound| ms < bound).unwrap_or(PUT_LATENCY_BOUNDS_MS.len())
}

fn millis(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}

/// Cumulative counters at one instant.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    at_ms: i64,
    put: u64,
    get_found: u64,
    get_miss: u64,
    get_transferred: u64,
}

/// Transactions per second over the last 1, 10, 60 and 600 seconds: `None` until enough
/// samples exist.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tps {
    /// Over the last second.
    pub last_1s: Option<f64>,
    /// Over the last 10 seconds.
    pub last_10s: Option<f64>,
    /// Over the last minute.
    pub last_60s: Option<f64>,
    /// Over the last 10 minutes.
    pub last_600s: Option<f64>,
}

impl Tps {
    fn from_samples(samples: &VecDeque<Sample>, counter: impl Fn(&Sample) -> u64) -> Tps {
        let over = |seconds: usize| {
            let last = samples.back()?;
            let begin = samples.get(samples.len().checked_sub(seconds + 1)?)?;
            let elapsed_ms = last.at_ms - begin.at_ms;
            (elapsed_ms > 0).then(|| counter(last).saturating_sub(counter(begin)) as f64 * 1000.0 / elapsed_ms as f64)
        };
        Tps { last_1s: over(1), last_10s: over(10), last_60s: over(60), last_600s: over(600) }
    }

    /// Java's rendering: the 10 s, 60 s and 600 s values separated by spaces, a missing value
    /// being empty.
    fn to_java(self) -> String {
        let show = |v: Option<f64>| v.map(java_double).unwrap_or_default();
        format!("{} {} {}", show(self.last_10s), show(self.last_60s), show(self.last_600s))
    }
}

/// Sum of two TPS, as Java's `getTotalTps` adds found and miss (a missing value counts 0).
fn add_tps(a: Tps, b: Tps) -> Tps {
    let add = |x: Option<f64>, y: Option<f64>| Some(x.unwrap_or(0.0) + y.unwrap_or(0.0));
    Tps {
        last_1s: add(a.last_1s, b.last_1s),
        last_10s: add(a.last_10s, b.last_10s),
        last_60s: add(a.last_60s, b.last_60s),
        last_600s: add(a.last_600s, b.last_600s),
    }
}

/// A double as Java's `Double.toString` writes ordinary values: `12.0`, `0.5`.
pub fn java_double(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e7 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

/// A snapshot of the store's statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreStats {
    /// When the store opened (ms since the epoch).
    pub boot_timestamp_ms: i64,
    /// When the snapshot was taken (ms since the epoch).
    pub timestamp_ms: i64,
    /// Messages stored (a batch counts each message).
    pub put_messages_total: u64,
    /// Bytes stored (whole records).
    pub put_bytes_total: u64,
    /// Puts that stored nothing.
    pub put_failures_total: u64,
    /// Slowest stored put, append and flush wait included (ms).
    pub put_latency_max_ms: u64,
    /// Stored puts per latency bucket (see [`PUT_LATENCY_BUCKET_NAMES`]), since boot.
    pub put_latency_distribution: [u64; 13],
    /// Reads that returned messages.
    pub get_found_total: u64,
    /// Reads that returned none.
    pub get_miss_total: u64,
    /// Messages returned by reads.
    pub get_transferred_messages_total: u64,
    /// Slowest read (ms).
    pub get_latency_max_ms: u64,
    /// Messages stored per second.
    pub put_tps: Tps,
    /// Reads that found messages per second.
    pub get_found_tps: Tps,
    /// Reads that found none per second.
    pub get_miss_tps: Tps,
    /// Messages returned by reads per second.
    pub get_transferred_tps: Tps,
    /// The put and transferred-message totals at the last two midnights (UTC), zero before
    /// the first midnight the store saw. Java: `BrokerStats`.
    pub daily: DailyTotals,
}

/// Totals recorded at midnight, so tools can show today's and yesterday's traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DailyTotals {
    /// `msgPutTotalTodayMorning`.
    pub put_today_morning: u64,
    /// `msgPutTotalYesterdayMorning`.
    pub put_yesterday_morning: u64,
    /// `msgGetTotalTodayMorning`.
    pub get_today_morning: u64,
    /// `msgGetTotalYesterdayMorning`.
    pub get_yesterday_morning: u64,
}

const DAY_MS: i64 = 86_400_000;

/// [`DailyTotals`] and the day they were last rolled on.
#[derive(Debug, Default)]
struct DailyMarks {
    /// Days since the epoch (UTC) of the last sample; `None` before the first.
    day: Option<i64>,
    totals: DailyTotals,
}

impl DailyMarks {
    /// At a sample on a new day, today's morning totals become yesterday's and `now` today's.
    fn roll(&mut self, now: &Sample) {
        let day = now.at_ms.div_euclid(DAY_MS);
        if self.day.is_some_and(|d| day > d) {
            let t = &mut self.totals;
            t.put_yesterday_morning = t.put_today_morning;
            t.get_yesterday_morning = t.get_today_morning;
            t.put_today_morning = now.put;
            t.get_today_morning = now.get_transferred;
        }
        self.day = Some(day);
    }
}

impl StoreStats {
    /// The statistics under RocketMQ's runtime-info keys (Java:
    /// `StoreStatsService#getRuntimeInfo`), with Java's value formats, sorted by key.
    pub fn to_kv(&self) -> Vec<(String, String)> {
        let average = self.put_bytes_total as f64 / self.put_messages_total.max(1) as f64;
        let distribution: String = PUT_LATENCY_BUCKET_NAMES
            .iter()
            .zip(self.put_latency_distribution)
            .map(|(name, count)| format!("{name}:{count} "))
            .collect();
        let mut kv: Vec<(String, String)> = [
            ("bootTimestamp", self.boot_timestamp_ms.to_string()),
            ("getFoundTps", self.get_found_tps.to_java()),
            ("getMessageEntireTimeMax", self.get_latency_max_ms.to_string()),
            ("getMissTps", self.get_miss_tps.to_java()),
            ("getTotalTps", add_tps(self.get_found_tps, self.get_miss_tps).to_java()),
            ("getTransferredTps", self.get_transferred_tps.to_java()),
            ("putMessageAverageSize", java_double(average)),
            ("putMessageDistributeTime", distribution),
            ("putMessageEntireTimeMax", self.put_latency_max_ms.to_string()),
            ("putMessageFailedTimes", self.put_failures_total.to_string()),
            ("putMessageSizeTotal", self.put_bytes_total.to_string()),
            ("putMessageTimesTotal", self.put_messages_total.to_string()),
            ("putTps", self.put_tps.to_java()),
            ("runtime", self.runtime()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        kv.sort();
        kv
    }

    /// Time since boot, as Java writes it: `[ 0 days, 1 hours, 2 minutes, 3 seconds ]`.
    fn runtime(&self) -> String {
        let seconds = (self.timestamp_ms - self.boot_timestamp_ms).max(0) / 1000;
        format!(
            "[ {} days, {} hours, {} minutes, {} seconds ]",
            seconds / 86_400,
            seconds % 86_400 / 3_600,
            seconds % 3_600 / 60,
            seconds % 60
        )
    }
}

/// Collects the statistics. Recording is lock-free; [`sample`](Self::sample) and
/// [`snapshot`](Self::snapshot) take a lock that the hot path never touches.
#[derive(Debug)]
pub struct StatsRecorder {
    boot_timestamp_ms: i64,
    put_messages: AtomicU64,
    put_bytes: AtomicU64,
    put_failures: AtomicU64,
    put_latency_max_ms: AtomicU64,
    put_latency: [AtomicU64; 13],
    get_found: AtomicU64,
    get_miss: AtomicU64,
    get_transferred: AtomicU64,
    get_latency_max_ms: AtomicU64,
    samples: Mutex<VecDeque<Sample>>,
    daily: Mutex<DailyMarks>,
}

impl StatsRecorder {
    /// A recorder for a store that opened at `boot_timestamp_ms`.
    pub fn new(boot_timestamp_ms: i64) -> StatsRecorder {
        StatsRecorder {
            boot_timestamp_ms,
            put_messages: AtomicU64::new(0),
            put_bytes: AtomicU64::new(0),
            put_failures: AtomicU64::new(0),
            put_latency_max_ms: AtomicU64::new(0),
            put_latency: std::array::from_fn(|_| AtomicU64::new(0)),
            get_found: AtomicU64::new(0),
            get_miss: AtomicU64::new(0),
            get_transferred: AtomicU64::new(0),
            get_latency_max_ms: AtomicU64::new(0),
            samples: Mutex::new(VecDeque::with_capacity(SAMPLES_MAX)),
            daily: Mutex::new(DailyMarks::default()),
        }
    }

    /// Records a put that took `elapsed` (append and flush wait). Messages, bytes and latency
    /// count only when the bytes were stored. A put that stored nothing counts as a failure;
    /// FLUSH_DISK_TIMEOUT does not, as in Java.
    pub fn record_put(&self, result: &PutMessageResult, elapsed: Duration) {
        if !result.is_ok() {
            self.put_failures.fetch_add(1, Ordering::Relaxed);
        }
        let Some(append) = &result.append else { return };
        self.put_messages.fetch_add(append.msg_num as u64, Ordering::Relaxed);
        self.put_bytes.fetch_add(append.wrote_bytes as u64, Ordering::Relaxed);
        let ms = millis(elapsed);
        self.put_latency[put_latency_bucket(ms)].fetch_add(1, Ordering::Relaxed);
        self.put_latency_max_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// Records a read that took `elapsed`: found when it returned messages, a miss otherwise.
    pub fn record_get(&self, result: &GetMessageResult, elapsed: Duration) {
        if result.status == GetMessageStatus::Found {
            self.get_found.fetch_add(1, Ordering::Relaxed);
            self.get_transferred.fetch_add(result.messages.len() as u64, Ordering::Relaxed);
        } else {
            self.get_miss.fetch_add(1, Ordering::Relaxed);
        }
        self.get_latency_max_ms.fetch_max(millis(elapsed), Ordering::Relaxed);
    }

    fn current(&self, at_ms: i64) -> Sample {
        Sample {
            at_ms,
            put: self.put_messages.load(Ordering::Relaxed),
            get_found: self.get_found.load(Ordering::Relaxed),
            get_miss: self.get_miss.load(Ordering::Relaxed),
            get_transferred: self.get_transferred.load(Ordering::Relaxed),
        }
    }

    /// Records the counters at `now_ms` (the sampler does this every [`SAMPLE_INTERVAL`]),
    /// dropping the oldest sample beyond [`SAMPLES_MAX`].
    pub fn sample(&self, now_ms: i64) {
        let sample = self.current(now_ms);
        self.daily.lock().unwrap_or_else(|e| e.into_inner()).roll(&sample);
        // The ring is only pushed to and popped whole; a panic cannot leave it half-updated.
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if samples.len() == SAMPLES_MAX {
            samples.pop_front();
        }
        samples.push_back(sample);
    }

    /// The statistics at `now_ms`: counters as they are now, TPS from the samples.
    pub fn snapshot(&self, now_ms: i64) -> StoreStats {
        let (put_tps, get_found_tps, get_miss_tps, get_transferred_tps) = {
            let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
            (
                Tps::from_samples(&samples, |s| s.put),
                Tps::from_samples(&samples, |s| s.get_found),
                Tps::from_samples(&samples, |s| s.get_miss),
                Tps::from_samples(&samples, |s| s.get_transferred),
            )
        };
        let now = self.current(now_ms);
        StoreStats {
            boot_timestamp_ms: self.boot_timestamp_ms,
            timestamp_ms: now_ms,
            put_messages_total: now.put,
            put_bytes_total: self.put_bytes.load(Ordering::Relaxed),
            put_failures_total: self.put_failures.load(Ordering::Relaxed),
            put_latency_max_ms: self.put_latency_max_ms.load(Ordering::Relaxed),
            put_latency_distribution: std::array::from_fn(|i| self.put_latency[i].load(Ordering::Relaxed)),
            get_found_total: now.get_found,
            get_miss_total: now.get_miss,
            get_transferred_messages_total: now.get_transferred,
            get_latency_max_ms: self.get_latency_max_ms.load(Ordering::Relaxed),
            put_tps,
            get_found_tps,
            get_miss_tps,
            get_transferred_tps,
            daily: self.daily.lock().unwrap_or_else(|e| e.into_inner()).totals,
        }
    }
}

/// The sampler thread's body: a sample now and every [`SAMPLE_INTERVAL`] until `stop`.
pub(crate) fn run_sampler(recorder: &StatsRecorder, stop: &AtomicBool, wake: &(Mutex<()>, Condvar)) {
    crate::retention::run_periodically(stop, wake, Duration::ZERO, SAMPLE_INTERVAL, || {
        recorder.sample(crate::commit_log::now_ms());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_java_boundaries() {
        let cases = [
            (0, 0),
            (1, 1),
            (9, 1),
            (10, 2),
            (49, 2),
            (50, 3),
            (99, 3),
            (100, 4),
            (199, 4),
            (200, 5),
            (499, 5),
            (500, 6),
            (999, 6),
            (1_000, 7),
            (1_999, 7),
            (2_000, 8),
            (3_000, 9),
            (4_000, 10),
            (5_000, 11),
            (9_999, 11),
            (10_000, 12),
            (u64::MAX, 12),
        ];
        for (ms, bucket) in cases {
            assert_eq!(put_latency_bucket(ms), bucket, "{ms} ms");
        }
    }

    #[test]
    fn midnight_moves_today_to_yesterday_and_now_to_today() {
        let sample = |at_ms, put, got| Sample { at_ms, put, get_found: 0, get_miss: 0, get_transferred: got };
        let mut marks = DailyMarks::default();
        marks.roll(&sample(DAY_MS * 10 + 5, 7, 3));
        assert_eq!(marks.totals, DailyTotals::default(), "nothing before the first midnight");
        marks.roll(&sample(DAY_MS * 11 - 1, 9, 4));
        assert_eq!(marks.totals, DailyTotals::default());
        marks.roll(&sample(DAY_MS * 11 + 1, 10, 5));
        let day_one = DailyTotals {
            put_today_morning: 10,
            put_yesterday_morning: 0,
            get_today_morning: 5,
            get_yesterday_morning: 0,
        };
        assert_eq!(marks.totals, day_one);
        marks.roll(&sample(DAY_MS * 11 + 500, 20, 6));
        assert_eq!(marks.totals, day_one, "once a day");
        marks.roll(&sample(DAY_MS * 12, 30, 8));
        assert_eq!(
            marks.totals,
            DailyTotals {
                put_today_morning: 30,
                put_yesterday_morning: 10,
                get_today_morning: 8,
                get_yesterday_morning: 5
            }
        );
    }

    #[test]
    fn doubles_print_as_java_does() {
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(12.0), "12.0");
        assert_eq!(java_double(0.5), "0.5");
        assert_eq!(java_double(1234.25), "1234.25");
    }
}
