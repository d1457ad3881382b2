//! Latency-based fault avoidance: brokers that failed or answered slowly are skipped for a
//! while. Java: `MQFaultStrategy` and `LatencyFaultToleranceImpl`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Latency thresholds (ms) ...
const LATENCY_MAX_MS: [u64; 7] = [50, 100, 550, 1_000, 2_000, 3_000, 15_000];
/// ... and how long a broker is avoided after a call that slow (ms).
const NOT_AVAILABLE_MS: [u64; 7] = [0, 0, 30_000, 60_000, 120_000, 180_000, 600_000];
/// Latency charged for a failed call (Java: 30 s when isolating).
const ISOLATION_LATENCY_MS: u64 = 30_000;

/// When each broker becomes usable again.
#[derive(Debug, Default)]
pub(crate) struct FaultTable {
    until: Mutex<HashMap<String, Instant>>,
}

impl FaultTable {
    /// Records a call to `broker_name` that took `latency`; `isolation` marks a failure.
    pub(crate) fn update(&self, broker_name: &str, latency: Duration, isolation: bool) {
        let ms = if isolation { ISOLATION_LATENCY_MS } else { latency.as_millis() as u64 };
        let pause = not_available_for(ms);
        let mut map = self.until.lock().unwrap_or_else(|e| e.into_inner());
        if pause.is_zero() {
            map.remove(broker_name);
        } else {
            map.insert(broker_name.to_owned(), Instant::now() + pause);
        }
    }

    /// Whether `broker_name` may be used now.
    pub(crate) fn is_available(&self, broker_name: &str) -> bool {
        let map = self.until.lock().unwrap_or_else(|e| e.into_inner());
        map.get(broker_name).is_none_or(|until| Instant::now() >= *until)
    }
}

/// Java: `MQFaultStrategy#computeNotAvailableDuration`.
fn not_available_for(latency_ms: u64) -> Duration {
    let i = LATENCY_MAX_MS.iter().rposition(|max| latency_ms >= *max);
    Duration::from_millis(i.map_or(0, |i| NOT_AVAILABLE_MS[i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_or_failed_brokers_are_avoided() {
        assert_eq!(not_available_for(10), Duration::ZERO);
        assert_eq!(not_available_for(600), Duration::from_secs(30));
        assert_eq!(not_available_for(20_000), Duration::from_secs(600));
        let t = FaultTable::default();
        t.update("a", Duration::from_millis(5), false);
        assert!(t.is_available("a"));
        t.update("a", Duration::ZERO, true);
        assert!(!t.is_available("a"));
        t.update("a", Duration::from_millis(1), false);
        assert!(t.is_available("a"));
    }
}
