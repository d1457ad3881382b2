//! Delayed messages by level (`messageDelayLevel`). A send carrying `DELAY` = N is stored in
//! `SCHEDULE_TOPIC_XXXX` queue N-1 with its real topic and queue in REAL_TOPIC / REAL_QID; the
//! store indexes it by delivery time (tagsCode). One task per level follows its queue from the
//! offset kept in delayOffset.json and re-puts each message to its real queue once due.
//! Consumer retries (CONSUMER_SEND_MSG_BACK) take the same path with level 3 + reconsume times.
//! Java: `ScheduleMessageService`, `HookUtils#handleScheduleMessage`.
//!
//! Delivery is at least once: progress is persisted periodically (and at shutdown), so after
//! a crash the messages delivered since the last persist are delivered again, as in RocketMQ.

use std::sync::Arc;
use std::time::Duration;

use ferromq_protocol::message::{keys, MessageProperties, StoredMessage};
use ferromq_store::{CqUnit, DelayLevels, PutMessageStatus, SCHEDULE_TOPIC};
use tracing::{debug, error, info, warn};

use crate::broker::{now_ms, Broker};
use crate::metadata::RMQ_SYS_TRANS_HALF_TOPIC;

/// Pause when a level's queue has nothing more (Java: `DELAY_FOR_A_WHILE`).
const IDLE_PAUSE: Duration = Duration::from_millis(100);
/// Pause after a failed re-put before trying the same message again (Java:
/// `DELAY_FOR_A_PERIOD`).
const FAILURE_PAUSE: Duration = Duration::from_secs(10);
/// Units read from the level's queue at a time.
const UNITS_PER_READ: usize = 32;
/// First run after start (Java: `FIRST_DELAY_TIME`).
const FIRST_DELAY: Duration = Duration::from_secs(1);

/// Moves a message with a positive DELAY level to the schedule topic: the level is clamped to
/// the highest, REAL_TOPIC / REAL_QID keep where it goes, and `topic` / `queue_id` become the
/// level's schedule queue. Returns whether it was moved. Callers apply this only to plain and
/// committed (not half) messages. Java: `HookUtils#transformDelayLevelMessage`.
pub(crate) fn to_schedule_queue(
    topic: &mut String,
    queue_id: &mut i32,
    props: &mut MessageProperties,
    levels: &DelayLevels,
) -> bool {
    let level = DelayLevels::level_of(props.get(keys::DELAY));
    if level <= 0 {
        return false;
    }
    let level = level.min(levels.max_level());
    props.insert(keys::DELAY, level.to_string());
    props.insert(keys::REAL_TOPIC, std::mem::replace(topic, SCHEDULE_TOPIC.to_owned()));
    props.insert(keys::REAL_QID, queue_id.to_string());
    *queue_id = level - 1;
    true
}

/// Java's guard against clock jumps: a delivery time further away than the level's own
/// delay cannot be right, so the message is due now.
fn corrected_deliver_time(now: i64, deliver_at: i64, level_delay_ms: i64) -> i64 {
    if deliver_at > now.saturating_add(level_delay_ms) {
        now
    } else {
        deliver_at
    }
}

/// What became of one due unit.
enum Delivery {
    /// Stored in its real queue (or dropped for good); go on with the next unit.
    Done,
    /// The store refused it for now: try the same unit again later.
    Retry,
}

/// Starts one task per delay level on `tasks` (masters only; Java starts the service when the
/// broker is not a slave).
pub(crate) fn start(broker: &Arc<Broker>, tasks: &mut tokio::task::JoinSet<()>) {
    let levels = broker.store.config().message_delay_level.clone();
    for level in 1..=levels.max_level() {
        let Some(delay_ms) = levels.delay_ms(level) else { continue };
        let b = broker.clone();
        tasks.spawn(async move { run_level(b, level, delay_ms).await });
    }
    info!(levels = levels.max_level(), "delay-level schedule started");
}

async fn run_level(broker: Arc<Broker>, level: i32, delay_ms: i64) {
    tokio::time::sleep(FIRST_DELAY).await;
    let queue_id = level - 1;
    let store = &broker.store;
    let mut offset = broker.delay_offsets().get(level).unwrap_or(0);
    loop {
        // The queue may have been cut by retention (or the table be ahead of a rebuilt queue):
        // keep the offset inside what exists, as Java's `correctDelayOffset` does.
        let min = store.min_offset_in_queue(SCHEDULE_TOPIC, queue_id);
        let max = store.max_offset_in_queue(SCHEDULE_TOPIC, queue_id);
        let corrected = offset.clamp(min, max.max(min));
        if corrected != offset {
            warn!(level, from = offset, to = corrected, min, max, "delay offset corrected");
            offset = corrected;
            broker.delay_offsets().set(level, offset);
        }
        let units = store.consume_queue_units(SCHEDULE_TOPIC, queue_id, offset, UNITS_PER_READ);
        if units.is_empty() {
            tokio::time::sleep(IDLE_PAUSE).await;
            continue;
        }
        let mut pause = None;
        for unit in &units {
            if !unit.is_blank() {
                let now = now_ms();
                let deliver_at = corrected_deliver_time(now, unit.tags_code, delay_ms);
                if deliver_at > now {
                    // Later units of this level are due no earlier: sleep until this one is.
                    pause = Some(Duration::from_millis((deliver_at - now) as u64));
                    break;
                }
                if let Delivery::Retry = deliver(&broker, level, unit).await {
                    pause = Some(FAILURE_PAUSE);
                    break;
                }
            }
            offset = unit.queue_offset + 1;
            broker.delay_offsets().set(level, offset);
        }
        if let Some(pause) = pause {
            tokio::time::sleep(pause).await;
        }
    }
}

/// Re-puts the message of `unit` into its real topic and queue. Java:
/// `DeliverDelayedMessageTimerTask#messageTimeUp` and the put after it.
async fn deliver(broker: &Broker, level: i32, unit: &CqUnit) -> Delivery {
    let Some(bytes) = broker.store.look_message_by_offset(unit.commit_log_offset) else {
        // Deleted by retention: nothing left to deliver.
        warn!(
            level,
            queue_offset = unit.queue_offset,
            physical_offset = unit.commit_log_offset,
            "delayed message no longer stored; skipped"
        );
        return Delivery::Done;
    };
    let delayed = match StoredMessage::decode_shared(&bytes) {
        Ok((m, _)) => m,
        Err(e) => {
            error!(level, physical_offset = unit.commit_log_offset, error = %e, "delayed message unreadable; skipped");
            return Delivery::Done;
        }
    };
    let Some(msg) = due_message(broker, &delayed) else {
        error!(
            level,
            physical_offset = unit.commit_log_offset,
            "delayed message without a usable REAL_TOPIC/REAL_QID; skipped"
        );
        return Delivery::Done;
    };
    let topic = msg.topic.clone();
    let result = broker.store.put_message_without_flush_wait(msg).await;
    match result.status {
        PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout => {
            if let Some(append) = &result.append {
                broker.stats.topic_put_nums.count(&topic, append.msg_num as u64);
            }
            debug!(level, topic = %topic, queue_offset = unit.queue_offset, "delayed message delivered");
            Delivery::Done
        }
        // These never succeed on a retry: waiting would stop the whole level.
        PutMessageStatus::MessageIllegal | PutMessageStatus::PropertiesSizeExceeded => {
            error!(level, topic = %topic, status = ?result.status, remark = ?result.remark, "delayed message refused by the store; dropped");
            Delivery::Done
        }
        status => {
            warn!(level, topic = %topic, ?status, remark = ?result.remark, "delayed message not stored; retrying in 10 s");
            Delivery::Retry
        }
    }
}

/// The message as it goes to its real queue, with the properties it was stored with, as
/// Java stores them (its `messageTimeUp` builds the stored properties before clearing DELAY on
/// its in-memory copy): DELAY (so `getDelayTimeLevel()` reads the level sent), REAL_TOPIC,
/// REAL_QID and WAIT as the producer sent it. The put itself does not wait for the flush.
/// Born information, flag, system flag and reconsume times unchanged.
fn due_message(broker: &Broker, delayed: &StoredMessage) -> Option<StoredMessage> {
    let props = MessageProperties::decode(&delayed.properties);
    let topic = props.get(keys::REAL_TOPIC)?.to_owned();
    let queue_id: i32 = props.get(keys::REAL_QID)?.trim().parse().ok()?;
    if topic == RMQ_SYS_TRANS_HALF_TOPIC {
        // Half messages are never delayed; one here would bypass the transaction check.
        return None;
    }
    Some(broker.stored_copy(delayed, topic, queue_id, &props))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_levels_move_to_the_schedule_queue() {
        let levels = DelayLevels::default();
        let mut topic = "TopicA".to_owned();
        let mut queue_id = 3;
        let mut props = MessageProperties::decode("DELAY\u{1}3\u{2}TAGS\u{1}t\u{2}");
        assert!(to_schedule_queue(&mut topic, &mut queue_id, &mut props, &levels));
        assert_eq!((topic.as_str(), queue_id), (SCHEDULE_TOPIC, 2));
        assert_eq!(props.get(keys::REAL_TOPIC), Some("TopicA"));
        assert_eq!(props.get(keys::REAL_QID), Some("3"));
        assert_eq!(props.get(keys::DELAY), Some("3"));

        let mut topic = "TopicA".to_owned();
        let mut props = MessageProperties::decode("DELAY\u{1}99\u{2}");
        assert!(to_schedule_queue(&mut topic, &mut queue_id, &mut props, &levels));
        assert_eq!(queue_id, 17, "clamped to level 18");
        assert_eq!(props.get(keys::DELAY), Some("18"));
    }

    #[test]
    fn zero_negative_and_garbage_levels_stay_put() {
        let levels = DelayLevels::default();
        for text in ["", "DELAY\u{1}0\u{2}", "DELAY\u{1}-1\u{2}", "DELAY\u{1}abc\u{2}"] {
            let mut topic = "T".to_owned();
            let mut queue_id = 1;
            let mut props = MessageProperties::decode(text);
            assert!(!to_schedule_queue(&mut topic, &mut queue_id, &mut props, &levels), "{text:?}");
            assert_eq!((topic.as_str(), queue_id), ("T", 1));
            assert!(props.get(keys::REAL_TOPIC).is_none());
        }
    }

    #[test]
    fn far_future_delivery_times_count_as_now() {
        assert_eq!(corrected_deliver_time(1_000, 2_000, 5_000), 2_000);
        assert_eq!(corrected_deliver_time(1_000, 6_000, 5_000), 6_000);
        assert_eq!(corrected_deliver_time(1_000, 6_001, 5_000), 1_000);
    }
}
