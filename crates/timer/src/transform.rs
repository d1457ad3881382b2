//! Deciding at send time whether a message goes to the timer wheel, and moving it there.
//! Pure: properties, topic and queue in, verdict out. Java: `HookUtils#checkIfTimerMessage`,
//! `#transformTimerMessage` (and the `isRolledTimerMessage` guard of
//! `#handleScheduleMessage`).
//!
//! The broker applies this to plain and committed messages only (not to transaction half
//! messages), before the delay-level transform, and checks the wheel's flow control
//! (`TimerMessageStore::is_reject`, WHEEL_TIMER_FLOW_CONTROL) on a [`TimerDecision::Wheel`]
//! verdict, as Java does between rounding and rewriting.

use ferromq_protocol::message::{keys, MessageProperties};
use ferromq_store::DelayLevels;

use crate::config::{TimerConfig, TIMER_TOPIC};

/// What becomes of a message at send time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerDecision {
    /// Not a timer message; store it as it is. A message with a positive DELAY level lands
    /// here too, with TIMER_DELIVER_MS, TIMER_DELAY_SEC and TIMER_DELAY_MS removed (DELAY wins).
    NotTimer,
    /// A timer message whose delivery time is not in the future: stored unchanged in its own
    /// queue, so it is consumable at once.
    DueNow {
        /// The delivery time it asked for.
        deliver_ms: i64,
    },
    /// Moved to the wheel: the topic is now `rmq_sys_wheel_timer`, the queue 0, and
    /// TIMER_OUT_MS, REAL_TOPIC and REAL_QID are set.
    Wheel {
        /// TIMER_OUT_MS: the delivery time rounded down to the precision (an exact multiple
        /// moves one step earlier, so the message is never delivered before it asked).
        timer_out_ms: i64,
    },
}

/// Why a timer message is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimerRefusal {
    /// `timerWheelEnable` is false. Maps to WHEEL_TIMER_NOT_ENABLE.
    #[error("timer wheel is not enabled")]
    NotEnabled,
    /// The timer properties are unusable. Maps to WHEEL_TIMER_MSG_ILLEGAL.
    #[error("illegal timer message: {reason}")]
    Illegal {
        /// What is wrong.
        reason: &'static str,
    },
}

/// Whether a message is a timer message, clearing the timer properties of a message with a
/// DELAY level (which wins). Messages already in the timer topic or already carrying
/// TIMER_OUT_MS are not. Java: `HookUtils#checkIfTimerMessage`.
pub fn is_timer_message(props: &mut MessageProperties, topic: &str) -> bool {
    if DelayLevels::level_of(props.get(keys::DELAY)) > 0 {
        props.remove(keys::TIMER_DELIVER_MS);
        props.remove(keys::TIMER_DELAY_SEC);
        props.remove(keys::TIMER_DELAY_MS);
        return false;
    }
    if topic == TIMER_TOPIC || props.contains_key(keys::TIMER_OUT_MS) {
        return false;
    }
    props.contains_key(keys::TIMER_DELIVER_MS)
        || props.contains_key(keys::TIMER_DELAY_MS)
        || props.contains_key(keys::TIMER_DELAY_SEC)
}

/// Applies the timer rules to a message about to be stored in `topic` / `queue_id` at
/// `now_ms`; on [`TimerDecision::Wheel`] the three are rewritten in place. Rules, in Java's
/// order:
///
/// 1. A message already in the timer topic (a roll) is left alone.
/// 2. DELAY > 0 wins: the TIMER_* request properties are removed; not a timer message.
/// 3. A message with TIMER_OUT_MS is not transformed again.
/// 4. Without TIMER_DELIVER_MS, TIMER_DELAY_MS or TIMER_DELAY_SEC it is not a timer message.
/// 5. `timerWheelEnable` false refuses it.
/// 6. The delivery time is `now + TIMER_DELAY_SEC * 1000`, else `now + TIMER_DELAY_MS`, else
///    TIMER_DELIVER_MS (absolute); a value that is not an integer is illegal.
/// 7. If it is in the future: more than `timerMaxDelaySec` ahead is illegal; otherwise it is
///    rounded down to the precision (an exact multiple moves one step earlier) and the
///    message moves to the wheel.
/// 8. If it is not in the future, the message is stored as is, unless it is a recall's
///    delete marker (TIMER_DEL_UNIQKEY), which is illegal then.
///
/// Arithmetic wraps as Java's `long` does. Java: `HookUtils#transformTimerMessage`.
///
/// # Errors
/// [`TimerRefusal::NotEnabled`] and [`TimerRefusal::Illegal`] as above.
pub fn timer_transform(
    props: &mut MessageProperties,
    topic: &mut String,
    queue_id: &mut i32,
    now_ms: impl FnOnce() -> i64,
    config: &TimerConfig,
) -> Result<TimerDecision, TimerRefusal> {
    if topic == TIMER_TOPIC || !is_timer_message(props, topic) {
        return Ok(TimerDecision::NotTimer);
    }
    // Read only for timer messages: most sends are not.
    let now_ms = now_ms();
    if !config.timer_wheel_enable {
        return Err(TimerRefusal::NotEnabled);
    }
    let deliver_ms = requested_deliver_ms(props, now_ms)?;
    if deliver_ms <= now_ms {
        if props.contains_key(keys::TIMER_DEL_UNIQKEY) {
            return Err(TimerRefusal::Illegal { reason: "recall of a message already due" });
        }
        return Ok(TimerDecision::DueNow { deliver_ms });
    }
    if deliver_ms.wrapping_sub(now_ms) > config.max_delay_ms() {
        return Err(TimerRefusal::Illegal { reason: "delivery time beyond timerMaxDelaySec" });
    }
    let timer_out_ms = round_deliver_ms(deliver_ms, config.precision_ms());
    props.insert(keys::TIMER_OUT_MS, timer_out_ms.to_string());
    props.insert(keys::REAL_TOPIC, std::mem::replace(topic, TIMER_TOPIC.to_owned()));
    props.insert(keys::REAL_QID, queue_id.to_string());
    *queue_id = 0;
    Ok(TimerDecision::Wheel { timer_out_ms })
}

/// The delivery time a message asks for; TIMER_DELAY_SEC first, then TIMER_DELAY_MS, then
/// TIMER_DELIVER_MS.
fn requested_deliver_ms(props: &MessageProperties, now_ms: i64) -> Result<i64, TimerRefusal> {
    let parse =
        |v: &str| v.parse::<i64>().map_err(|_| TimerRefusal::Illegal { reason: "timer property is not an integer" });
    if let Some(sec) = props.get(keys::TIMER_DELAY_SEC) {
        return Ok(now_ms.wrapping_add(parse(sec)?.wrapping_mul(1000)));
    }
    if let Some(ms) = props.get(keys::TIMER_DELAY_MS) {
        return Ok(now_ms.wrapping_add(parse(ms)?));
    }
    match props.get(keys::TIMER_DELIVER_MS) {
        Some(at) => parse(at),
        None => Err(TimerRefusal::Illegal { reason: "no timer property" }),
    }
}

/// TIMER_OUT_MS for a future delivery time: rounded down to the precision, and an exact
/// multiple moved one step earlier. The wheel delivers a slot once the clock has passed its
/// end, so the message is due at or after the time it asked for, never before.
pub fn round_deliver_ms(deliver_ms: i64, precision_ms: i64) -> i64 {
    if deliver_ms % precision_ms == 0 {
        deliver_ms - precision_ms
    } else {
        deliver_ms / precision_ms * precision_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_250;

    fn run(
        props: &str,
        topic: &str,
        config: &TimerConfig,
    ) -> (Result<TimerDecision, TimerRefusal>, MessageProperties, String, i32) {
        let mut props = MessageProperties::decode(props);
        let mut topic = topic.to_owned();
        let mut queue_id = 3;
        let r = timer_transform(&mut props, &mut topic, &mut queue_id, || NOW, config);
        (r, props, topic, queue_id)
    }

    #[test]
    fn absolute_time_moves_to_the_wheel_rounded_down() {
        let (r, props, topic, qid) = run("TIMER_DELIVER_MS\u{1}1700000005500\u{2}", "T", &TimerConfig::default());
        assert_eq!(r, Ok(TimerDecision::Wheel { timer_out_ms: 1_700_000_005_000 }));
        assert_eq!((topic.as_str(), qid), (TIMER_TOPIC, 0));
        assert_eq!(props.get(keys::TIMER_OUT_MS), Some("1700000005000"));
        assert_eq!(props.get(keys::REAL_TOPIC), Some("T"));
        assert_eq!(props.get(keys::REAL_QID), Some("3"));
        assert_eq!(props.get(keys::TIMER_DELIVER_MS), Some("1700000005500"), "the request stays");
    }

    #[test]
    fn exact_multiple_moves_one_step_earlier() {
        let (r, ..) = run("TIMER_DELIVER_MS\u{1}1700000005000\u{2}", "T", &TimerConfig::default());
        assert_eq!(r, Ok(TimerDecision::Wheel { timer_out_ms: 1_700_000_004_000 }));
        assert_eq!(round_deliver_ms(1_000, 100), 900);
        assert_eq!(round_deliver_ms(1_099, 100), 1_000);
    }

    #[test]
    fn relative_delays_count_from_now_and_seconds_win() {
        let c = TimerConfig::default();
        let (r, ..) = run("TIMER_DELAY_MS\u{1}3000\u{2}", "T", &c);
        assert_eq!(r, Ok(TimerDecision::Wheel { timer_out_ms: 1_700_000_003_000 }));
        let (r, ..) =
            run("TIMER_DELAY_SEC\u{1}10\u{2}TIMER_DELAY_MS\u{1}3000\u{2}TIMER_DELIVER_MS\u{1}1\u{2}", "T", &c);
        assert_eq!(r, Ok(TimerDecision::Wheel { timer_out_ms: 1_700_000_010_000 }));
        let (r, ..) = run("TIMER_DELAY_MS\u{1}3000\u{2}TIMER_DELIVER_MS\u{1}1\u{2}", "T", &c);
        assert_eq!(r, Ok(TimerDecision::Wheel { timer_out_ms: 1_700_000_003_000 }));
    }

    #[test]
    fn delay_level_wins_and_clears_the_timer_properties() {
        let (r, props, topic, qid) = run(
            "DELAY\u{1}2\u{2}TIMER_DELIVER_MS\u{1}1700000005500\u{2}TIMER_DELAY_SEC\u{1}1\u{2}TIMER_DELAY_MS\u{1}1\u{2}",
            "T",
            &TimerConfig::default(),
        );
        assert_eq!(r, Ok(TimerDecision::NotTimer));
        assert_eq!((topic.as_str(), qid), ("T", 3));
        assert!(!props.contains_key(keys::TIMER_DELIVER_MS));
        assert!(!props.contains_key(keys::TIMER_DELAY_SEC));
        assert!(!props.contains_key(keys::TIMER_DELAY_MS));
        assert_eq!(props.get(keys::DELAY), Some("2"));
    }

    #[test]
    fn past_times_are_not_transformed_unless_they_are_recalls() {
        let c = TimerConfig::default();
        let (r, props, topic, _) = run("TIMER_DELIVER_MS\u{1}1700000000250\u{2}", "T", &c);
        assert_eq!(r, Ok(TimerDecision::DueNow { deliver_ms: NOW }));
        assert_eq!(topic, "T");
        assert!(!props.contains_key(keys::TIMER_OUT_MS));
        let (r, ..) = run("TIMER_DELAY_SEC\u{1}-5\u{2}", "T", &c);
        assert_eq!(r, Ok(TimerDecision::DueNow { deliver_ms: NOW - 5000 }));
        let (r, ..) = run("TIMER_DELIVER_MS\u{1}1\u{2}TIMER_DEL_UNIQKEY\u{1}T+U\u{2}", "T", &c);
        assert!(matches!(r, Err(TimerRefusal::Illegal { .. })));
    }

    #[test]
    fn beyond_the_max_delay_or_garbage_is_illegal_and_disabled_wheel_refuses() {
        let c = TimerConfig::default();
        let max = c.max_delay_ms();
        let (r, ..) = run(&format!("TIMER_DELAY_MS\u{1}{max}\u{2}"), "T", &c);
        assert!(matches!(r, Ok(TimerDecision::Wheel { .. })), "exactly the max is allowed");
        let (r, ..) = run(&format!("TIMER_DELAY_MS\u{1}{}\u{2}", max + 1), "T", &c);
        assert!(matches!(r, Err(TimerRefusal::Illegal { .. })));
        let (r, ..) = run("TIMER_DELAY_SEC\u{1} 5\u{2}", "T", &c);
        assert!(matches!(r, Err(TimerRefusal::Illegal { .. })), "Long.parseLong does not trim");
        let (r, ..) = run("TIMER_DELAY_SEC\u{1}+5\u{2}", "T", &c);
        assert!(matches!(r, Ok(TimerDecision::Wheel { .. })), "a leading + parses in Java");
        let off = TimerConfig { timer_wheel_enable: false, ..TimerConfig::default() };
        assert_eq!(run("TIMER_DELAY_SEC\u{1}5\u{2}", "T", &off).0, Err(TimerRefusal::NotEnabled));
        assert_eq!(run("TAGS\u{1}a\u{2}", "T", &off).0, Ok(TimerDecision::NotTimer));
    }

    #[test]
    fn rolled_and_already_transformed_messages_are_left_alone() {
        let c = TimerConfig::default();
        let (r, props, ..) = run("TIMER_DELIVER_MS\u{1}1700000005500\u{2}", TIMER_TOPIC, &c);
        assert_eq!(r, Ok(TimerDecision::NotTimer));
        assert!(!props.contains_key(keys::TIMER_OUT_MS));
        let (r, ..) = run("TIMER_DELIVER_MS\u{1}1700000005500\u{2}TIMER_OUT_MS\u{1}1\u{2}", "T", &c);
        assert_eq!(r, Ok(TimerDecision::NotTimer));
    }

    #[test]
    fn precision_is_the_snapped_one() {
        let c = TimerConfig { timer_precision_ms: 150, ..TimerConfig::default() };
        let (r, ..) = run("TIMER_DELIVER_MS\u{1}1700000005550\u{2}", "T", &c);
        assert_eq!(r, Ok(TimerDecision::Wheel { timer_out_ms: 1_700_000_005_500 }));
    }
}
