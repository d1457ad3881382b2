//! Bytes moved per second on one HA connection, and the optional cap on a master's shipping
//! rate (`haFlowControlEnable`, `maxHaTransferByteInSecond`). Java: `FlowMonitor`, which
//! samples on its own thread each second; here the one-second window rolls when it is looked
//! at, so no task is needed.

use std::sync::Mutex;
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct Window {
    started: Instant,
    bytes: u64,
    last_full_second: u64,
}

impl Window {
    fn roll(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.started);
        if elapsed < WINDOW {
            return;
        }
        // A window that ended more than a second ago says nothing about the last second.
        self.last_full_second = if elapsed < 2 * WINDOW { self.bytes } else { 0 };
        self.bytes = 0;
        self.started = now;
    }
}

/// Per-connection transfer accounting.
#[derive(Debug)]
pub(crate) struct FlowMonitor {
    window: Mutex<Window>,
    cap_per_second: Option<u64>,
}

impl FlowMonitor {
    /// A monitor; with `cap_per_second`, [`allowance`](Self::allowance) enforces it.
    pub(crate) fn new(cap_per_second: Option<u64>) -> FlowMonitor {
        FlowMonitor {
            window: Mutex::new(Window { started: Instant::now(), bytes: 0, last_full_second: 0 }),
            cap_per_second,
        }
    }

    fn window(&self) -> std::sync::MutexGuard<'_, Window> {
        // Plain counters: a panic elsewhere cannot leave them inconsistent.
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts bytes moved.
    pub(crate) fn record(&self, bytes: usize) {
        let mut w = self.window();
        w.roll(Instant::now());
        w.bytes += bytes as u64;
    }

    /// Bytes moved in the last full second. Java: `getTransferredByteInSecond`.
    pub(crate) fn bytes_in_last_second(&self) -> u64 {
        let mut w = self.window();
        w.roll(Instant::now());
        w.last_full_second
    }

    /// How many bytes may be shipped now, or, when the cap is used up, when to look again.
    /// Java: `canTransferMaxByteNum`.
    pub(crate) fn allowance(&self) -> Result<usize, Instant> {
        let Some(cap) = self.cap_per_second else { return Ok(usize::MAX) };
        let now = Instant::now();
        let mut w = self.window();
        w.roll(now);
        match cap.saturating_sub(w.bytes) {
            0 => Err(w.started + WINDOW),
            left => Ok(usize::try_from(left).unwrap_or(usize::MAX)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_limits_a_window_and_uncapped_monitors_allow_everything() {
        let capped = FlowMonitor::new(Some(100));
        assert_eq!(capped.allowance(), Ok(100));
        capped.record(60);
        assert_eq!(capped.allowance(), Ok(40));
        capped.record(40);
        assert!(capped.allowance().is_err());
        assert_eq!(FlowMonitor::new(None).allowance(), Ok(usize::MAX));
    }
}
