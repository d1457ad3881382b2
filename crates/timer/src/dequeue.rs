//! The dequeue task: walks the read pointer one slot at a time, never reaching the write
//! time, and delivers each due slot. Java: `TimerDequeueGetService`, `#dequeue`,
//! `TimerDequeueGetMessageService`, `TimerDequeuePutMessageService`, `#convert`,
//! `#convertMessage`, `#doPut`.
//!
//! A slot is delivered in two passes over its chain: first the delete markers (collecting
//! the `<topic>+<uniqKey>` keys they cancel), then every other unit oldest first: a roll is
//! put back into the timer topic with TIMER_ROLL_TIMES + 1, a recalled message is skipped,
//! anything else goes to REAL_TOPIC / REAL_QID. Only then does the read pointer move past
//! the slot, so a stop or crash in the middle delivers the slot again (at least once).
//!
//! The re-put record keeps the stored properties as Java's does (Java clears REAL_TOPIC and
//! REAL_QID only on its in-memory copy, after the properties string that gets stored was
//! built) with WAIT as the producer sent it, and adds TIMER_ENQUEUE_MS and TIMER_DEQUEUE_MS;
//! the put does not wait for the flush (Java sets WAIT=false on its in-memory copy only).

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ferromq_protocol::message::{keys, MessageProperties, MessageVersion, StoredMessage};
use ferromq_store::PutMessageStatus;
use tracing::{debug, error, warn};

use crate::chain;
use crate::recall::delete_key;
use crate::slot::Slot;
use crate::store::{Counters, Shared};
use crate::timer_log::TimerLogUnit;

/// Empty slots passed in one go before yielding.
const EMPTY_SLOTS_PER_STEP: usize = 65_536;
/// Tries of a failing re-put before it is given up (unless `timerEnableRetryUntilSuccess`).
const PUT_TRIES_MAX: u32 = 3;

/// What became of a re-put.
pub(crate) enum Put {
    /// Stored.
    Stored,
    /// Given up (refused, unreadable, or failing too often); logged and counted.
    Dropped,
    /// The timer is stopping; the message was not stored.
    Stopped,
}

/// Java's pause before retrying a failed re-put: `500 * precision / 1000` ms.
pub(crate) fn retry_pause(shared: &Shared) -> Duration {
    Duration::from_millis((500 * shared.precision_ms / 1000).max(1) as u64)
}

pub(crate) async fn run(shared: Arc<Shared>) {
    while !shared.stopped() {
        let read = shared.read_time_ms.load(Ordering::Acquire);
        let write = shared.write_time_ms.load(Ordering::Acquire);
        if read >= write {
            tokio::select! {
                () = shared.write_moved.notified() => {}
                () = tokio::time::sleep(shared.idle_wait()) => {}
            }
            continue;
        }
        let slot = shared.core().wheel.slot(read);
        if slot.is_empty() {
            skip_empty_slots(&shared, read, write);
            tokio::task::yield_now().await;
            continue;
        }
        if !deliver_slot(&shared, &slot).await {
            return;
        }
        // The slot lies before the write time: nothing was linked into it meanwhile.
        shared.pending.fetch_sub(i64::from(slot.num), Ordering::AcqRel);
        shared.read_time_ms.store(read + shared.precision_ms, Ordering::Release);
    }
}

/// Moves the read pointer over consecutive empty slots below the write time.
fn skip_empty_slots(shared: &Shared, mut read: i64, write: i64) {
    let core = shared.core();
    for _ in 0..EMPTY_SLOTS_PER_STEP {
        if read >= write || !core.wheel.slot(read).is_empty() {
            break;
        }
        read += shared.precision_ms;
    }
    shared.read_time_ms.store(read, Ordering::Release);
}

/// Delivers one slot; returns false if the timer stopped before it was done.
async fn deliver_slot(shared: &Shared, slot: &Slot) -> bool {
    let units = chain::slot_units(&shared.log, slot, shared.precision_ms);
    if units.is_empty() {
        warn!(slot_time_ms = slot.time_ms, "timer slot due but its chain reads nothing");
    }
    let is_marker = |u: &TimerLogUnit| u.is_delete() && !u.is_roll();
    let mut recalled: HashSet<String> = HashSet::new();
    for (_, unit) in units.iter().filter(|(_, u)| is_marker(u)) {
        if let Some(msg) = read_message(shared, unit) {
            if let Some(key) = msg.property(keys::TIMER_DEL_UNIQKEY) {
                recalled.insert(key.to_owned());
            }
        }
    }
    // The chain runs newest first; deliver in the order the messages were enqueued.
    for (_, unit) in units.iter().rev().filter(|(_, u)| !is_marker(u)) {
        if shared.stopped() {
            return false;
        }
        let Some(msg) = read_message(shared, unit) else { continue };
        if !unit.is_roll() && !recalled.is_empty() {
            let real_topic = msg.property(keys::REAL_TOPIC).unwrap_or_default();
            let uniq = msg.property(keys::UNIQ_KEY).unwrap_or_default();
            if recalled.contains(&delete_key(real_topic, uniq)) {
                debug!(topic = real_topic, uniq_key = uniq, "timer message recalled");
                Counters::add(&shared.counters.recalled);
                shared.topic_metrics.dequeued(real_topic);
                continue;
            }
        }
        if let Put::Stopped = deliver(shared, &msg, unit.write_time_ms, unit.is_roll()).await {
            return false;
        }
        shared.topic_metrics.dequeued(msg.property(keys::REAL_TOPIC).unwrap_or_default());
    }
    true
}

/// The message a unit points at, if still stored and readable.
fn read_message(shared: &Shared, unit: &TimerLogUnit) -> Option<StoredMessage> {
    let Some(bytes) = shared.store.look_message_by_offset(unit.commit_log_offset) else {
        warn!(physical_offset = unit.commit_log_offset, "due timer message no longer stored; skipped");
        Counters::add(&shared.counters.dropped);
        return None;
    };
    match StoredMessage::decode_shared(&bytes) {
        Ok((msg, _)) => Some(msg),
        Err(e) => {
            error!(physical_offset = unit.commit_log_offset, error = %e, "due timer message unreadable; skipped");
            Counters::add(&shared.counters.dropped);
            None
        }
    }
}

/// Re-puts a due message: to its real queue, or (`roll`) back to the timer topic.
/// `enqueue_ms` becomes TIMER_ENQUEUE_MS (`i64::MAX` for a message never linked).
pub(crate) async fn deliver(shared: &Shared, msg: &StoredMessage, enqueue_ms: i64, roll: bool) -> Put {
    // A delete marker only ever travels as a roll; anywhere else it is dropped. Java: `doPut`.
    if !roll && msg.property(keys::TIMER_DEL_UNIQKEY).is_some() {
        debug!(physical_offset = msg.physical_offset, "late delete marker dropped");
        return Put::Dropped;
    }
    let Some(out) = delivery_message(msg, enqueue_ms, roll, shared.now_ms()) else {
        error!(physical_offset = msg.physical_offset, "timer message without a usable REAL_TOPIC/REAL_QID; dropped");
        Counters::add(&shared.counters.dropped);
        return Put::Dropped;
    };
    let result = put_with_retry(shared, out).await;
    if let Put::Stored = result {
        Counters::add(if roll { &shared.counters.rolled } else { &shared.counters.delivered });
        if !roll {
            if let Some(due) = msg.property(keys::TIMER_OUT_MS).and_then(|v| v.parse::<i64>().ok()) {
                shared.topic_metrics.delivered_late(shared.now_ms() - due);
            }
        }
    }
    result
}

/// Puts `msg`, retrying what may succeed later. Java: `TimerDequeuePutMessageService#run`,
/// `#doPut`.
async fn put_with_retry(shared: &Shared, msg: StoredMessage) -> Put {
    let mut tries = 0;
    loop {
        let result = shared.store.put_message_without_flush_wait(msg.clone()).await;
        match result.status {
            // Nothing waits for the flush; a timeout still means stored.
            PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout => return Put::Stored,
            PutMessageStatus::MessageIllegal | PutMessageStatus::PropertiesSizeExceeded => {
                error!(topic = %msg.topic, status = ?result.status, "timer message refused by the store; dropped");
                Counters::add(&shared.counters.dropped);
                return Put::Dropped;
            }
            status => {
                tries += 1;
                if !shared.config.timer_enable_retry_until_success && tries >= PUT_TRIES_MAX {
                    error!(topic = %msg.topic, ?status, tries, "timer message not stored after retries; dropped");
                    Counters::add(&shared.counters.dropped);
                    return Put::Dropped;
                }
                warn!(topic = %msg.topic, ?status, tries, "timer message not stored; retrying");
                tokio::time::sleep(retry_pause(shared)).await;
                if shared.stopped() {
                    return Put::Stopped;
                }
            }
        }
    }
}

/// The record to re-put for a due (or rolled) timer message: its stored properties plus
/// TIMER_ENQUEUE_MS, TIMER_DEQUEUE_MS and TIMER_ROLL_TIMES + 1 for a roll (WAIT kept);
/// topic and queue from REAL_TOPIC / REAL_QID (the timer topic's for a roll); body, flags,
/// born time and host, store host and reconsume times unchanged. `None` without a usable
/// REAL_TOPIC / REAL_QID. Java: `TimerMessageStore#convert`, `#convertMessage`.
pub(crate) fn delivery_message(msg: &StoredMessage, enqueue_ms: i64, roll: bool, now_ms: i64) -> Option<StoredMessage> {
    let mut props = MessageProperties::decode(&msg.properties);
    props.insert(keys::TIMER_ENQUEUE_MS, enqueue_ms.to_string());
    if roll {
        let times = props.get(keys::TIMER_ROLL_TIMES).and_then(|v| v.parse::<i32>().ok()).unwrap_or(0);
        props.insert(keys::TIMER_ROLL_TIMES, times.saturating_add(1).to_string());
    }
    props.insert(keys::TIMER_DEQUEUE_MS, now_ms.to_string());
    let (topic, queue_id) = if roll {
        (msg.topic.clone(), msg.queue_id)
    } else {
        let topic = props.get(keys::REAL_TOPIC).filter(|t| !t.is_empty())?.to_owned();
        let queue_id = props.get(keys::REAL_QID)?.parse::<i32>().ok()?;
        (topic, queue_id)
    };
    Some(StoredMessage {
        version: MessageVersion::for_topic_len(topic.len()),
        topic,
        queue_id,
        flag: msg.flag,
        body: msg.body.clone(),
        properties: props.encode(),
        sys_flag: msg.sys_flag,
        born_timestamp_ms: msg.born_timestamp_ms,
        born_host: msg.born_host,
        store_host: msg.store_host,
        reconsume_times: msg.reconsume_times,
        ..StoredMessage::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timer_message(extra: &str) -> StoredMessage {
        StoredMessage {
            topic: crate::TIMER_TOPIC.into(),
            queue_id: 0,
            flag: 7,
            sys_flag: 0,
            reconsume_times: 2,
            born_timestamp_ms: 1_600_000_000_000,
            body: bytes::Bytes::from_static(b"hello"),
            properties: format!(
                "TIMER_OUT_MS\u{1}1700000005000\u{2}REAL_TOPIC\u{1}Orders\u{2}REAL_QID\u{1}3\u{2}UNIQ_KEY\u{1}U1\u{2}{extra}"
            ),
            ..StoredMessage::default()
        }
    }

    #[test]
    fn due_message_goes_to_its_real_queue_with_timer_stamps() {
        let out = delivery_message(&timer_message("WAIT\u{1}true\u{2}"), 1_700_000_001_000, false, 1_700_000_005_010)
            .unwrap();
        assert_eq!((out.topic.as_str(), out.queue_id), ("Orders", 3));
        assert_eq!((out.flag, out.reconsume_times, out.born_timestamp_ms), (7, 2, 1_600_000_000_000));
        assert_eq!(&out.body[..], b"hello");
        let props = MessageProperties::decode(&out.properties);
        assert_eq!(props.get(keys::TIMER_ENQUEUE_MS), Some("1700000001000"));
        assert_eq!(props.get(keys::TIMER_DEQUEUE_MS), Some("1700000005010"));
        assert_eq!(props.get(keys::WAIT), Some("true"), "stored as the producer sent it");
        assert_eq!(props.get(keys::REAL_TOPIC), Some("Orders"), "kept, as in Java's stored record");
        assert_eq!(props.get(keys::TIMER_OUT_MS), Some("1700000005000"));
        assert_eq!(props.get(keys::UNIQ_KEY), Some("U1"));
        assert_eq!(props.get(keys::TIMER_ROLL_TIMES), None);
    }

    #[test]
    fn roll_stays_in_the_timer_topic_and_counts_rolls() {
        let out = delivery_message(&timer_message(""), 5, true, 6).unwrap();
        assert_eq!((out.topic.as_str(), out.queue_id), (crate::TIMER_TOPIC, 0));
        let props = MessageProperties::decode(&out.properties);
        assert_eq!(props.get(keys::TIMER_ROLL_TIMES), Some("1"));
        let again = delivery_message(&out, 7, true, 8).unwrap();
        assert_eq!(MessageProperties::decode(&again.properties).get(keys::TIMER_ROLL_TIMES), Some("2"));
    }

    #[test]
    fn never_linked_messages_say_so_and_bad_targets_are_refused() {
        let out = delivery_message(&timer_message(""), i64::MAX, false, 1).unwrap();
        assert_eq!(MessageProperties::decode(&out.properties).get(keys::TIMER_ENQUEUE_MS), Some("9223372036854775807"));
        let mut bad = timer_message("");
        bad.properties = "REAL_TOPIC\u{1}Orders\u{2}REAL_QID\u{1}x\u{2}".into();
        assert!(delivery_message(&bad, 1, false, 1).is_none());
        bad.properties = "REAL_QID\u{1}1\u{2}".into();
        assert!(delivery_message(&bad, 1, false, 1).is_none());
    }
}
