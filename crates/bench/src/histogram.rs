//! A log-linear latency histogram: values below 512 are exact, larger ones fall in buckets
//! 1/256 of their power of two wide (relative error under 0.4%), like an HdrHistogram with
//! two to three significant digits. Fixed size (about 70 KB), so memory is bounded whatever the
//! run length.

use serde::{Deserialize, Serialize};

/// Sub-buckets per power of two (8 bits of precision).
const SUB_BITS: u32 = 8;
const SUB: u64 = 1 << SUB_BITS;
/// Largest recordable value; larger values are clamped to it (2^40 µs is about 12 days).
pub const MAX_VALUE: u64 = (1 << 40) - 1;
const BUCKETS: usize = bucket_index(MAX_VALUE) + 1;

const fn bucket_index(v: u64) -> usize {
    if v < 2 * SUB {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= SUB_BITS + 1
    let shift = exp - SUB_BITS;
    let mantissa = v >> shift; // SUB..2*SUB
    (2 * SUB + (shift as u64 - 1) * SUB + (mantissa - SUB)) as usize
}

/// Highest value that falls in bucket `index`.
const fn bucket_high(index: usize) -> u64 {
    let i = index as u64;
    if i < 2 * SUB {
        return i;
    }
    let shift = (i - 2 * SUB) / SUB + 1;
    let mantissa = (i - 2 * SUB) % SUB + SUB;
    ((mantissa + 1) << shift) - 1
}

/// Counts of recorded values.
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram").field("count", &self.count).field("min", &self.min).field("max", &self.max).finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram { counts: vec![0; BUCKETS], count: 0, sum: 0, min: u64::MAX, max: 0 }
    }

    /// Records one value (clamped to [`MAX_VALUE`]).
    pub fn record(&mut self, value: u64) {
        self.record_n(value, 1);
    }

    /// Records `n` occurrences of `value`.
    pub fn record_n(&mut self, value: u64, n: u64) {
        if n == 0 {
            return;
        }
        let v = value.min(MAX_VALUE);
        self.counts[bucket_index(v)] += n;
        self.count += n;
        self.sum += u128::from(v) * u128::from(n);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The value at quantile `q` (0..=1): the smallest recorded value (to bucket precision,
    /// rounded up, never above the maximum) such that at least `ceil(q * count)` values are at
    /// or below it. 0 when empty.
    pub fn value_at_quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let q = q.clamp(0.0, 1.0);
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_high(i).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// Count, min, mean, percentiles and max.
    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            count: self.count,
            min: if self.count == 0 { 0 } else { self.min },
            mean: if self.count == 0 { 0.0 } else { self.sum as f64 / self.count as f64 },
            p50: self.value_at_quantile(0.5),
            p90: self.value_at_quantile(0.9),
            p99: self.value_at_quantile(0.99),
            p999: self.value_at_quantile(0.999),
            max: self.max,
        }
    }
}

/// Latency percentiles, in the unit the histogram was fed (the report names it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample.
    pub min: u64,
    /// Mean of the samples.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest sample.
    pub max: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_histogram_reports_zeros() {
        let h = Histogram::new();
        assert_eq!(h.summary(), LatencySummary::default());
    }

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::new();
        for v in 1..=100 {
            h.record(v);
        }
        let s = h.summary();
        assert_eq!((s.count, s.min, s.max), (100, 1, 100));
        assert_eq!(s.p50, 50);
        assert_eq!(s.p90, 90);
        assert_eq!(s.p99, 99);
        assert_eq!(s.p999, 100);
        assert!((s.mean - 50.5).abs() < 1e-9);
    }

    #[test]
    fn percentiles_match_exact_sort_within_bucket_precision() {
        // A skewed, deterministic sample over six decades.
        let mut values: Vec<u64> = (0..100_000u64).map(|i| (i * 7919 % 100_003) * (1 + i % 13) * 37 + 1).collect();
        let mut h = Histogram::new();
        for &v in &values {
            h.record(v);
        }
        values.sort_unstable();
        for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
            let rank = ((q * values.len() as f64).ceil() as usize).max(1);
            let exact = values[rank - 1];
            let got = h.value_at_quantile(q);
            assert!(got >= exact, "q={q}: {got} < {exact}");
            assert!((got - exact) as f64 <= exact as f64 / 256.0 + 1.0, "q={q}: {got} vs {exact}");
        }
        assert_eq!(h.summary().max, *values.last().unwrap());
    }

    #[test]
    fn buckets_are_contiguous_and_cover_the_range() {
        let mut prev_high = None;
        for i in 0..BUCKETS {
            let high = bucket_high(i);
            if let Some(p) = prev_high {
                assert_eq!(bucket_index(p + 1), i, "value after bucket {} lands in {i}", i - 1);
            }
            assert_eq!(bucket_index(high), i);
            prev_high = Some(high);
        }
        assert_eq!(prev_high, Some(MAX_VALUE));
    }

    #[test]
    fn merge_and_clamp() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        a.record(10);
        b.record_n(u64::MAX, 2);
        a.merge(&b);
        let s = a.summary();
        assert_eq!((s.count, s.min, s.max), (3, 10, MAX_VALUE));
        assert_eq!(s.p50, MAX_VALUE);
    }
}
