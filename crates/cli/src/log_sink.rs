//! Where the servers' log lines go: stderr, through a bounded queue drained by one thread.
//!
//! Logging must never stop service. tracing-subscriber's own writer reports a failed write
//! with `eprintln!`, which panics when stderr is on a full disk (in every task that logs), and
//! a write to a stalled pipe or terminal blocks the task that logs. Here a task only hands the
//! finished line to the queue (`try_send`: never waits); a full queue drops the line, a failed
//! write drops it too, and both are counted, not fatal.

use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::time::{Duration, Instant};

/// Lines the queue holds before new ones are dropped.
pub const QUEUE_LINES: usize = 8192;

/// Lines dropped because the queue was full.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Lines whose write to stderr failed (a full disk, a closed pipe).
static FAILED: AtomicU64 = AtomicU64::new(0);
/// Lines queued and not yet written (or dropped).
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Lines lost so far: dropped for a full queue, and failed writes.
pub fn lost_lines() -> (u64, u64) {
    (DROPPED.load(Ordering::Relaxed), FAILED.load(Ordering::Relaxed))
}

/// Makes the per-event writers of the tracing subscriber.
#[derive(Debug, Clone)]
pub struct LogSink {
    tx: SyncSender<Vec<u8>>,
}

impl LogSink {
    /// Starts the thread that writes queued lines to stderr. Without a thread (the system
    /// refused one) lines are written in place, errors ignored.
    pub fn stderr() -> LogSink {
        let (tx, rx) = sync_channel::<Vec<u8>>(QUEUE_LINES);
        // Should the system refuse the thread, the receiver goes with the closure: `try_send`
        // then fails and each writer falls back to writing in place.
        let _ = std::thread::Builder::new().name("log-writer".into()).spawn(move || {
            let mut stderr = std::io::stderr();
            for line in rx {
                if stderr.write_all(&line).is_err() {
                    FAILED.fetch_add(1, Ordering::Relaxed);
                }
                PENDING.fetch_sub(1, Ordering::Release);
            }
        });
        LogSink { tx }
    }
}

/// One event's line, sent to the queue when the subscriber drops the writer.
#[derive(Debug)]
pub struct LineWriter {
    line: Vec<u8>,
    tx: SyncSender<Vec<u8>>,
}

impl Write for LineWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if self.line.is_empty() {
            return;
        }
        PENDING.fetch_add(1, Ordering::AcqRel);
        match self.tx.try_send(std::mem::take(&mut self.line)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                PENDING.fetch_sub(1, Ordering::Release);
                DROPPED.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(line)) => {
                PENDING.fetch_sub(1, Ordering::Release);
                if std::io::stderr().write_all(&line).is_err() {
                    FAILED.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogSink {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter { line: Vec::with_capacity(256), tx: self.tx.clone() }
    }
}

/// Waits (up to `within`) until the queued lines are written: before the process exits, so
/// its last words are not lost.
pub fn drain(within: Duration) {
    let deadline = Instant::now() + within;
    while PENDING.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let (tx, rx) = sync_channel::<Vec<u8>>(1);
        let before = lost_lines().0;
        for _ in 0..3 {
            let mut w = LineWriter { line: Vec::new(), tx: tx.clone() };
            w.write_all(b"line\n").unwrap();
        }
        assert_eq!(lost_lines().0 - before, 2, "one line queued, two dropped");
        assert_eq!(rx.try_recv().unwrap(), b"line\n");
    }
}
