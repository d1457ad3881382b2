//! Opening the timer's files and making them consistent after a clean stop or a crash.
//! Java: `TimerMessageStore#recover`, `#recoverAndRevise`, `TimerWheel#checkPhyPos`.
//!
//! Steps:
//!
//! 1. Read `config/timercheck` (all zero if absent) and the `timerwheel` file.
//! 2. Scan the timerlog from the start of the segment holding `lastTimerLogFlushPos - one
//!    segment` (as Java does) to the first invalid unit; make each unit its slot's last unit
//!    (slots written to the wheel file after the scan start may be missing there); cut the
//!    log at the end found and zero the stale bytes after it.
//! 3. Resume reading at `lastReadTimeMs`, but never further back than the wheel spans
//!    (`now - slotsTotal + 60` slots): messages due during the downtime are then delivered
//!    at once.
//! 4. A live slot whose last unit lies beyond the recovered end (only possible if the log
//!    lost data the wheel had seen) is relinked from the log, or forgotten if all its units
//!    are gone.
//! 5. Recount every live slot by walking its chain, so `pending` is exact.
//! 6. Resume enqueuing at `lastTimerQueueOffset`, clamped to the timer queue's bounds.
//!    Everything from there on is enqueued again; messages whose units were found past
//!    `lastTimerLogFlushPos` in step 2 are already linked and are skipped once.

use std::collections::HashSet;
use std::path::Path;

use ferromq_store::MessageStore;
use tracing::{info, warn};

use crate::chain;
use crate::checkpoint::{CheckpointFile, TimerCheckpoint};
use crate::config::{TimerConfig, TIMER_BLANK_SLOTS, TIMER_TOPIC};
use crate::error::{io_err, TimerError};
use crate::timer_log::TimerLog;
use crate::wheel::TimerWheel;

/// Messages already in the timerlog when the enqueue task replays the timer queue from the
/// checkpoint: their CommitLog offsets, consulted below `until_queue_offset`.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    pub(crate) skip: HashSet<i64>,
    pub(crate) until_queue_offset: i64,
    /// Progress adopted from a master, until the queue offset passes its end.
    pub(crate) adopted: Option<Adopted>,
}

/// A master's progress that a replica adopted ([`crate::adopt_master_progress`]) and this
/// wheel starts from: that master linked every timer-queue message before `queue_end` and
/// delivered every one due before `read_time_ms`, so those are not delivered again. Told by
/// a checkpoint whose `masterTimerQueueOffset` is beyond its `lastTimerQueueOffset` (on a
/// master both are the same; Java's replicas write theirs this way too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Adopted {
    pub(crate) queue_end: i64,
    pub(crate) read_time_ms: i64,
}

impl Adopted {
    fn of(checkpoint: &TimerCheckpoint) -> Option<Adopted> {
        (checkpoint.master_timer_queue_offset > checkpoint.last_timer_queue_offset).then_some(Adopted {
            queue_end: checkpoint.master_timer_queue_offset,
            read_time_ms: checkpoint.last_read_time_ms,
        })
    }

    /// Whether the message at `queue_offset`, due at `deliver_ms`, was delivered by the
    /// master whose progress this is.
    pub(crate) fn delivered(&self, queue_offset: i64, deliver_ms: i64) -> bool {
        queue_offset < self.queue_end && deliver_ms < self.read_time_ms
    }
}

/// The recovered state the store starts from.
#[derive(Debug)]
pub(crate) struct Recovered {
    pub(crate) wheel: TimerWheel,
    pub(crate) log: TimerLog,
    pub(crate) checkpoint_file: CheckpointFile,
    pub(crate) checkpoint: TimerCheckpoint,
    pub(crate) read_time_ms: i64,
    pub(crate) queue_offset: i64,
    pub(crate) pending: i64,
    pub(crate) replay: Replay,
}

/// Opens and recovers the files under `root`.
///
/// # Errors
/// I/O errors and a wheel file of the wrong size.
pub(crate) fn recover(
    config: &TimerConfig,
    root: &Path,
    store: &MessageStore,
    now_ms: i64,
) -> Result<Recovered, TimerError> {
    let precision = config.precision_ms();
    let slots_total = i64::from(config.timer_slots_total);
    let (checkpoint_file, found) = CheckpointFile::open(&root.join("config").join("timercheck"))?;
    let checkpoint = found.unwrap_or_default();
    let mut wheel = TimerWheel::open(&root.join("timerwheel"), slots_total, precision)?;
    let log_dir = root.join("timerlog");
    let log = TimerLog::load(&log_dir, config.mapped_file_size_timer_log).map_err(io_err(&log_dir))?;

    let flush_pos = checkpoint.last_timer_log_flush_pos;
    let scan_from = (flush_pos - log.file_size() as i64).max(0);
    let mut skip = HashSet::new();
    let scan = log.scan(scan_from, None, |pos, unit| {
        wheel.revise_slot(unit.slot_time_ms(), pos);
        if pos >= flush_pos {
            skip.insert(unit.commit_log_offset);
        }
    });
    let zeroed = log.truncate(scan.end).map_err(io_err(&log_dir))?;

    let floor_now = now_ms.div_euclid(precision) * precision;
    let read_time_ms =
        checkpoint.last_read_time_ms.max(floor_now - slots_total * precision + TIMER_BLANK_SLOTS * precision);
    let relinked = repair_dangling(&mut wheel, &log, read_time_ms, scan.end);
    let pending = recount(&mut wheel, &log, read_time_ms, precision);

    let min = store.min_offset_in_queue(TIMER_TOPIC, 0);
    let max = store.max_offset_in_queue(TIMER_TOPIC, 0);
    let queue_offset = checkpoint.last_timer_queue_offset.clamp(min, max.max(min));
    if queue_offset != checkpoint.last_timer_queue_offset {
        warn!(
            queue_offset = checkpoint.last_timer_queue_offset,
            min, max, "timer queue offset outside the timer queue; corrected"
        );
    }
    let adopted = Adopted::of(&checkpoint);
    if let Some(a) = adopted {
        info!(queue_end = a.queue_end, read_time_ms = a.read_time_ms, "timer wheel starts from a master's progress");
    }
    info!(
        units_scanned = scan.units,
        timer_log_end = scan.end,
        bytes_zeroed = zeroed,
        relinked_slots = relinked,
        pending,
        read_time_ms,
        queue_offset,
        replay_skips = skip.len(),
        "timer wheel recovered"
    );
    Ok(Recovered {
        wheel,
        log,
        checkpoint_file,
        checkpoint,
        read_time_ms,
        queue_offset,
        pending,
        replay: Replay { skip, until_queue_offset: max, adopted },
    })
}

/// Indices of slots still to be delivered: their time is at or after `read_time_ms` and
/// within one file's span of it (two times a whole file apart share an index).
fn live_slots(wheel: &TimerWheel, read_time_ms: i64) -> impl Iterator<Item = usize> + '_ {
    let span_ms = wheel.slot_count() as i64 * wheel.precision_ms();
    (0..wheel.slot_count()).filter(move |&i| {
        let time = wheel.at(i).time_ms;
        time >= read_time_ms && time - read_time_ms < span_ms && wheel.slot_index(time) == i
    })
}

/// Relinks or forgets live slots pointing at or beyond `end`; returns how many were found.
fn repair_dangling(wheel: &mut TimerWheel, log: &TimerLog, read_time_ms: i64, end: i64) -> usize {
    let dangling: Vec<usize> = live_slots(wheel, read_time_ms).filter(|&i| wheel.at(i).last_pos >= end).collect();
    if dangling.is_empty() {
        return 0;
    }
    let mut min_first = i64::MAX;
    for &i in &dangling {
        let slot = wheel.at(i);
        if slot.first_pos >= end {
            wheel.clear_index(i);
        } else {
            min_first = min_first.min(slot.first_pos);
        }
    }
    warn!(slots = dangling.len(), from = min_first, end, "timer wheel points past the timerlog; relinking");
    if min_first < end {
        log.scan(min_first, Some(end), |pos, unit| wheel.revise_slot(unit.slot_time_ms(), pos));
    }
    dangling.len()
}

/// Sets every live slot's count from its chain; returns the total.
fn recount(wheel: &mut TimerWheel, log: &TimerLog, read_time_ms: i64, precision_ms: i64) -> i64 {
    let live: Vec<usize> = live_slots(wheel, read_time_ms).collect();
    let mut total = 0i64;
    for i in live {
        let units = chain::slot_units(log, &wheel.at(i), precision_ms);
        let num = chain::count(&units);
        wheel.set_num(i, num);
        total += i64::from(num);
    }
    total
}
