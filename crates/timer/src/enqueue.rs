//! The enqueue task: follows `rmq_sys_wheel_timer` queue 0 and files each message in the
//! wheel. Java: `TimerEnqueueGetService`, `TimerEnqueuePutService`, `#enqueue`,
//! `#doEnqueue`.
//!
//! For each message, with `W` the write time (now, rounded down to the precision):
//!
//! * due before `W`: its slot may already have been read, so it is delivered at once, with
//!   TIMER_ENQUEUE_MS = `Long.MAX_VALUE` ("never enqueued"); a delete marker this late is
//!   dropped;
//! * due within the roll window (`timerRollWindowSlot` slots from `W`): a unit in its slot;
//! * further: a roll unit in a nearer slot (the window's end, or its middle when the message
//!   is due less than a third of a window beyond it, so the next roll lands well inside);
//!   when that slot is due, the message is put back into the timer topic and comes here
//!   again.
//!
//! A message carrying TIMER_DEL_UNIQKEY (a recall) gets the delete bit in its unit.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ferromq_protocol::message::{java_string_hash, keys, RecordOrBlank, RecordView, StoredMessage};
use ferromq_store::CqUnit;
use tracing::{error, info, warn};

use crate::config::TIMER_TOPIC;
use crate::dequeue::{self, Put};
use crate::store::{Counters, Shared};
use crate::timer_log::{TimerLogUnit, MAGIC_DEFAULT, MAGIC_DELETE, MAGIC_ROLL};

/// Timer-queue units read at a time.
const UNITS_PER_READ: usize = 256;

/// Where a unit is filed: the slot time and whether it is a roll. Java: the roll rule of
/// `doEnqueue`.
pub(crate) fn place(deliver_ms: i64, write_time_ms: i64, window_slots: i64, precision_ms: i64) -> (i64, bool) {
    let window_ms = window_slots * precision_ms;
    if deliver_ms - write_time_ms < window_ms {
        return (deliver_ms, false);
    }
    if deliver_ms - write_time_ms - window_ms < window_slots / 3 * precision_ms {
        (write_time_ms + window_slots / 2 * precision_ms, true)
    } else {
        (write_time_ms + window_ms, true)
    }
}

/// Why a batch stopped early.
enum Interrupt {
    /// Try the same message again after a pause.
    Retry,
    /// The timer is stopping.
    Stopped,
}

pub(crate) async fn run(shared: Arc<Shared>) {
    while !shared.stopped() {
        move_write_time(&shared);
        match enqueue_batch(&shared).await {
            Ok(true) => tokio::task::yield_now().await,
            Ok(false) => wait_for_arrival(&shared).await,
            Err(Interrupt::Retry) => tokio::time::sleep(dequeue::retry_pause(&shared)).await,
            Err(Interrupt::Stopped) => return,
        }
    }
}

/// Advances the write time to now (rounded down) and wakes the dequeue task if it moved.
fn move_write_time(shared: &Shared) {
    let now = shared.floor_ms(shared.now_ms());
    if now > shared.write_time_ms.load(Ordering::Acquire) {
        shared.write_time_ms.store(now, Ordering::Release);
        shared.write_moved.notify_one();
    }
}

/// Waits for a timer-topic arrival, the next slot boundary (to move the write time), or
/// Java's idle interval, whichever comes first.
async fn wait_for_arrival(shared: &Shared) {
    let now = shared.now_ms();
    let to_boundary = (shared.floor_ms(now) + shared.precision_ms - now).max(1) as u64;
    let wait = shared.idle_wait().min(std::time::Duration::from_millis(to_boundary));
    tokio::select! {
        () = shared.arrivals.notified() => {}
        () = tokio::time::sleep(wait) => {}
    }
}

/// Enqueues up to one read of units; returns whether there were any.
async fn enqueue_batch(shared: &Shared) -> Result<bool, Interrupt> {
    let store = &shared.store;
    let mut offset = shared.queue_offset.load(Ordering::Acquire);
    let min = store.min_offset_in_queue(TIMER_TOPIC, 0);
    if offset < min {
        warn!(queue_offset = offset, min, "timer queue offset below the queue's minimum; skipping ahead");
        offset = min;
        shared.queue_offset.store(offset, Ordering::Release);
    }
    let units = store.consume_queue_units(TIMER_TOPIC, 0, offset, UNITS_PER_READ);
    if units.is_empty() {
        return Ok(false);
    }
    for unit in &units {
        if shared.stopped() {
            return Err(Interrupt::Stopped);
        }
        if !unit.is_blank() {
            enqueue_one(shared, unit).await?;
        }
        shared.queue_offset.store(unit.queue_offset + 1, Ordering::Release);
    }
    end_replay(shared, units.last().map_or(offset, |u| u.queue_offset + 1));
    Ok(true)
}

/// Whether recovery found this message already in the timerlog.
fn already_linked(shared: &Shared, unit: &CqUnit) -> bool {
    if !shared.replaying.load(Ordering::Acquire) {
        return false;
    }
    let replay = shared.replay.lock().unwrap_or_else(|e| e.into_inner());
    unit.queue_offset < replay.until_queue_offset && replay.skip.contains(&unit.commit_log_offset)
}

/// Whether the master whose progress this wheel adopted delivered this message already.
fn delivered_by_master(shared: &Shared, unit: &CqUnit, deliver_ms: i64) -> bool {
    if !shared.replaying.load(Ordering::Acquire) {
        return false;
    }
    let replay = shared.replay.lock().unwrap_or_else(|e| e.into_inner());
    replay.adopted.is_some_and(|a| a.delivered(unit.queue_offset, deliver_ms))
}

/// Drops the replay set and the adopted progress once the queue offsets they cover are behind.
fn end_replay(shared: &Shared, next_offset: i64) {
    if !shared.replaying.load(Ordering::Acquire) {
        return;
    }
    let mut replay = shared.replay.lock().unwrap_or_else(|e| e.into_inner());
    if !replay.skip.is_empty() && next_offset >= replay.until_queue_offset {
        replay.skip = Default::default();
    }
    if replay.adopted.is_some_and(|a| next_offset >= a.queue_end) {
        replay.adopted = None;
        info!(queue_offset = next_offset, "timer queue replayed past the adopted master progress");
    }
    if replay.skip.is_empty() && replay.adopted.is_none() {
        shared.replaying.store(false, Ordering::Release);
    }
}

async fn enqueue_one(shared: &Shared, unit: &CqUnit) -> Result<(), Interrupt> {
    if already_linked(shared, unit) {
        return Ok(());
    }
    let Some(bytes) = shared.store.look_message_by_offset(unit.commit_log_offset) else {
        warn!(
            physical_offset = unit.commit_log_offset,
            queue_offset = unit.queue_offset,
            "timer message no longer stored; skipped"
        );
        Counters::add(&shared.counters.dropped);
        return Ok(());
    };
    let Ok(RecordOrBlank::Record(view)) = RecordView::parse(&bytes) else {
        error!(physical_offset = unit.commit_log_offset, "timer message unreadable; skipped");
        Counters::add(&shared.counters.dropped);
        return Ok(());
    };
    let property = |name| view.property(name).ok().flatten();
    let Some(deliver_ms) = property(keys::TIMER_OUT_MS).and_then(|v| v.parse::<i64>().ok()) else {
        // Java would stall the queue on this; skipping keeps the rest of the queue moving.
        error!(physical_offset = unit.commit_log_offset, "timer message without a usable TIMER_OUT_MS; skipped");
        Counters::add(&shared.counters.dropped);
        return Ok(());
    };
    if delivered_by_master(shared, unit, deliver_ms) {
        return Ok(());
    }
    let topic_hash = property(keys::REAL_TOPIC).map_or(0, java_string_hash);
    let is_delete = property(keys::TIMER_DEL_UNIQKEY).is_some();
    let write_time = shared.write_time_ms.load(Ordering::Acquire);
    if deliver_ms < write_time {
        let msg = match StoredMessage::decode_shared(&bytes) {
            Ok((m, _)) => m,
            Err(e) => {
                error!(physical_offset = unit.commit_log_offset, error = %e, "timer message unreadable; skipped");
                Counters::add(&shared.counters.dropped);
                return Ok(());
            }
        };
        return match dequeue::deliver(shared, &msg, i64::MAX, false).await {
            Put::Stopped => Err(Interrupt::Stopped),
            Put::Stored | Put::Dropped => Ok(()),
        };
    }
    let filed = append_unit(shared, write_time, deliver_ms, unit, topic_hash, is_delete);
    if filed.is_ok() && !is_delete {
        shared.topic_metrics.enqueued(property(keys::REAL_TOPIC).unwrap_or_default());
    }
    filed.map(|_| ()).map_err(|e| {
        error!(physical_offset = unit.commit_log_offset, error = %e, "timerlog append failed; retrying");
        Interrupt::Retry
    })
}

/// Appends the unit and links it into its slot. Java: `doEnqueue`.
fn append_unit(
    shared: &Shared,
    write_time: i64,
    deliver_ms: i64,
    unit: &CqUnit,
    topic_hash: i32,
    is_delete: bool,
) -> std::io::Result<i64> {
    let (filed_ms, roll) = place(deliver_ms, write_time, shared.roll_window_slots, shared.precision_ms);
    let mut magic = MAGIC_DEFAULT;
    if roll {
        magic |= MAGIC_ROLL;
    }
    if is_delete {
        magic |= MAGIC_DELETE;
    }
    let mut core = shared.core();
    let slot = core.wheel.slot(filed_ms);
    let record = TimerLogUnit {
        prev_pos: slot.last_pos,
        magic,
        write_time_ms: write_time,
        delay_ms: (filed_ms - write_time) as i32,
        commit_log_offset: unit.commit_log_offset,
        msg_size: unit.size,
        topic_hash,
        reserved: 0,
    };
    let pos = shared.log.append(&record.encode())?;
    let first = if slot.first_pos == -1 { pos } else { slot.first_pos };
    let num = if is_delete { slot.num - 1 } else { slot.num + 1 };
    core.wheel.put_slot(filed_ms, first, pos, num, slot.magic);
    shared.pending.fetch_add(if is_delete { -1 } else { 1 }, Ordering::AcqRel);
    Counters::add(&shared.counters.enqueued);
    Ok(pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_within_the_window_keep_their_time() {
        assert_eq!(place(10_500, 10_000, 10, 100), (10_500, false));
        assert_eq!(place(10_999, 10_000, 10, 100), (10_999, false));
    }

    #[test]
    fn messages_beyond_the_window_roll_to_its_end_or_middle() {
        // Window 9 slots of 100 ms from 10_000: 10_900. A third of it is 300 ms.
        assert_eq!(place(10_900, 10_000, 9, 100), (10_400, true), "just beyond: the middle");
        assert_eq!(place(11_199, 10_000, 9, 100), (10_400, true));
        assert_eq!(place(11_200, 10_000, 9, 100), (10_900, true), "far beyond: the end");
        assert_eq!(place(99_000, 10_000, 9, 100), (10_900, true));
    }

    #[test]
    fn java_default_window_rolls_after_two_days() {
        let day = 86_400_000;
        let w = 1_700_000_000_000;
        assert_eq!(place(w + 2 * day - 1000, w, 172_800, 1000), (w + 2 * day - 1000, false));
        assert_eq!(place(w + 2 * day, w, 172_800, 1000), (w + day, true));
        assert_eq!(place(w + 3 * day, w, 172_800, 1000), (w + 2 * day, true));
    }
}
