//! Making progress durable: timerlog, then wheel, then checkpoint. Java: `TimerFlushService`,
//! `#prepareTimerCheckPoint`, and the timerlog cleaning task of `#start`.
//!
//! One flush cycle:
//!
//! 1. Read the read time `R` and the queue offset `Q`. Every slot before `R` is delivered
//!    and every timer-queue message before `Q` is linked (or delivered); both were published
//!    after the work they describe.
//! 2. Under the wheel lock, note the timerlog end `F` and take the changed slots. Units of
//!    the messages before `Q` lie below `F`, and their slot updates are among the slots
//!    taken (or were taken by an earlier cycle).
//! 3. Note the CommitLog end `P`: everything `R` and `Q` delivered or rolled lies below it.
//! 4. Flush the timerlog up to at least `F`, then write and sync the taken slots: the wheel
//!    file never points at units that are not on disk.
//! 5. Write `{R, F, Q}` to the checkpoint, but only once the CommitLog is on disk up to `P`
//!    (else keep it as a candidate and write the newest candidate that qualifies): the
//!    checkpoint never claims a delivery that a power cut could undo. At shutdown the
//!    newest is written at once; the store's own shutdown flushes the CommitLog right after.
//!
//! So after any crash the checkpoint is behind what the files hold, never ahead: recovery
//! re-links the timerlog tail, replays the queue from `Q` and re-reads slots from `R`, and
//! the worst outcome is a message delivered twice.
//!
//! A timerlog flush failure poisons the timer: the checkpoint stays frozen from then on
//! (deliveries go on; the next start replays from it). A wheel write failure marks the whole
//! wheel for rewriting and skips the checkpoint.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, error, info};

use crate::checkpoint::{DataVersion, TimerCheckpoint};
use crate::error::TimerError;
use crate::store::Shared;

/// How often expired timerlog segments are deleted. Java: 30 s.
const RETENTION_INTERVAL: Duration = Duration::from_secs(30);
/// How often the progress line is logged. Java: `timerProgressLogIntervalMs`.
const PROGRESS_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// Candidates kept while the CommitLog lags; beyond this, intermediate ones are merged away.
const CANDIDATES_MAX: usize = 64;

/// Progress flushed to the timer's files, waiting for the CommitLog to be durable.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate {
    read_time_ms: i64,
    log_flush_pos: i64,
    queue_offset: i64,
    /// `queue_offset`, or the end of a master's progress still being replayed.
    master_queue_offset: i64,
    commit_log_end: i64,
}

/// Starts the flusher thread. It stops when the timer's stop flag is set, without a final
/// flush (the caller of `shutdown` does that).
pub(crate) fn start_flusher(shared: Arc<Shared>) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("timer-flush".into()).spawn(move || flusher_loop(&shared))
}

fn flusher_loop(shared: &Shared) {
    let interval = Duration::from_millis(shared.config.timer_flush_interval_ms);
    let (mut last_retention, mut last_progress) = (Instant::now(), Instant::now());
    loop {
        {
            let guard = shared.flush_wake.0.lock().unwrap_or_else(|e| e.into_inner());
            if !shared.stopped() {
                let _ = shared.flush_wake.1.wait_timeout(guard, interval);
            }
        }
        if shared.stopped() {
            return;
        }
        match flush_cycle(shared, false) {
            Ok(_) | Err(TimerError::Poisoned) => {}
            Err(e) => error!(error = %e, "timer flush failed"),
        }
        if last_retention.elapsed() >= RETENTION_INTERVAL {
            last_retention = Instant::now();
            delete_expired_segments(shared);
        }
        if last_progress.elapsed() >= PROGRESS_LOG_INTERVAL {
            last_progress = Instant::now();
            debug!(
                read_time_ms = shared.read_time_ms.load(Ordering::Acquire),
                write_time_ms = shared.write_time_ms.load(Ordering::Acquire),
                queue_offset = shared.queue_offset.load(Ordering::Acquire),
                pending = shared.pending.load(Ordering::Acquire),
                "timer progress"
            );
        }
    }
}

/// Deletes timerlog segments whose messages the CommitLog no longer holds.
fn delete_expired_segments(shared: &Shared) {
    match shared.log.delete_expired(shared.store.min_phy_offset()) {
        Ok(deleted) if !deleted.is_empty() => info!(segments = deleted.len(), "expired timerlog segments deleted"),
        Ok(_) => {}
        Err(e) => error!(error = %e, "deleting expired timerlog segments failed"),
    }
}

/// One flush cycle (see the module docs); `last` writes the newest progress without waiting
/// for the CommitLog. Returns the checkpoint written last.
///
/// # Errors
/// The failing file, or [`TimerError::Poisoned`].
pub(crate) fn flush_cycle(shared: &Shared, last: bool) -> Result<TimerCheckpoint, TimerError> {
    let mut state = shared.flush.lock().unwrap_or_else(|e| e.into_inner());
    if shared.poisoned.load(Ordering::Acquire) {
        return Err(TimerError::Poisoned);
    }
    let read_time_ms = shared.read_time_ms.load(Ordering::Acquire);
    // Read before the queue offset: the enqueue task drops it only once past its end.
    let adopted = shared.replay.lock().unwrap_or_else(|e| e.into_inner()).adopted;
    let queue_offset = shared.queue_offset.load(Ordering::Acquire);
    let master_queue_offset = adopted.map_or(queue_offset, |a| a.queue_end.max(queue_offset));
    let (log_flush_pos, dirty, writer) = {
        let mut core = shared.core();
        (shared.log.max_offset(), core.wheel.take_dirty(), core.wheel.writer())
    };
    let commit_log_end = shared.store.max_phy_offset();

    if let Err(e) = shared.log.flush() {
        shared.poisoned.store(true, Ordering::Release);
        error!(error = %e, "timerlog flush failed; timer checkpoint frozen until restart");
        return Err(TimerError::Io { path: shared.log.dir().to_owned(), source: e });
    }
    if let Err(e) = writer.write(&dirty) {
        shared.core().wheel.mark_all_dirty();
        return Err(e);
    }
    shared.core().wheel.confirm_written(&dirty);
    state.candidates.push_back(Candidate {
        read_time_ms,
        log_flush_pos,
        queue_offset,
        master_queue_offset,
        commit_log_end,
    });
    let durable = if last { i64::MAX } else { shared.store.flushed_phy_offset() };
    let mut chosen = None;
    while state.candidates.front().is_some_and(|c| c.commit_log_end <= durable) {
        chosen = state.candidates.pop_front();
    }
    if state.candidates.len() > CANDIDATES_MAX {
        // Keep the oldest (next to qualify) and the newest; drop one in the middle.
        let middle = state.candidates.len() / 2;
        state.candidates.remove(middle);
    }
    if let Some(c) = chosen {
        let written = state.written;
        let progressed =
            c.read_time_ms != written.last_read_time_ms || c.queue_offset != written.last_timer_queue_offset;
        let data_version = if progressed {
            DataVersion { state_version: 0, timestamp: shared.now_ms(), counter: written.data_version.counter + 1 }
        } else {
            written.data_version
        };
        let cp = TimerCheckpoint {
            last_read_time_ms: c.read_time_ms,
            last_timer_log_flush_pos: c.log_flush_pos,
            last_timer_queue_offset: c.queue_offset,
            master_timer_queue_offset: c.master_queue_offset,
            data_version,
        };
        if cp != written {
            state.file.write(&cp)?;
            state.written = cp;
        }
    }
    Ok(state.written)
}
