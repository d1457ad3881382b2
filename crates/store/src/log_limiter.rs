//! A rate limit for log lines that a fault repeats on every request (a full disk refuses
//! every put and fails every dispatch until space is back).

use std::sync::atomic::{AtomicI64, Ordering};

/// Lets one log line through per interval.
#[derive(Debug)]
pub(crate) struct LogLimiter {
    last_ms: AtomicI64,
}

impl LogLimiter {
    const INTERVAL_MS: i64 = 10_000;

    /// A limiter that lets the first line through.
    pub(crate) const fn new() -> LogLimiter {
        LogLimiter { last_ms: AtomicI64::new(0) }
    }

    /// Whether a line may be logged now; then the next may in [`Self::INTERVAL_MS`].
    pub(crate) fn should_log(&self) -> bool {
        let now = crate::commit_log::now_ms();
        let last = self.last_ms.load(Ordering::Relaxed);
        now - last >= Self::INTERVAL_MS
            && self.last_ms.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }
}
