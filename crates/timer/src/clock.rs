//! The wall clock the timer reads, behind a small trait so tests and a future simulator can
//! substitute their own. Sleeping is still tokio's; only "what time is it" goes through here.

use std::fmt::Debug;
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + Debug {
    /// The current time in ms since the epoch.
    fn now_ms(&self) -> i64;
}

/// The system clock (`System.currentTimeMillis()`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
    }
}
