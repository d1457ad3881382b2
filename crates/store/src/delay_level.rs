//! Delay levels (`messageDelayLevel`): level N (1-based) waits the N-th duration of the list.
//! The store needs them because a message of the schedule topic is dispatched to its
//! ConsumeQueue with its delivery time as tagsCode; the broker's schedule service reads that
//! time back to know when the message is due. Java: `DefaultMessageStore#parseDelayLevel`,
//! `computeDeliverTimestamp`, the schedule-topic branch of `CommitLog#checkMessageAndReturnSize`.

/// The topic holding delayed messages until they are due, queue `level - 1`.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";

/// RocketMQ's 18 default levels.
pub const DEFAULT_MESSAGE_DELAY_LEVEL: &str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

/// Parsed `messageDelayLevel`: the text as configured and each level's delay in ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayLevels {
    text: String,
    millis: Vec<i64>,
}

impl Default for DelayLevels {
    fn default() -> Self {
        DelayLevels::parse(DEFAULT_MESSAGE_DELAY_LEVEL).unwrap_or_else(|_| unreachable!("the default levels parse"))
    }
}

impl DelayLevels {
    /// Parses space-separated durations, each a whole number followed by `s`, `m`, `h` or `d`.
    ///
    /// # Errors
    /// The token that is not a duration, or an empty list.
    pub fn parse(text: &str) -> Result<DelayLevels, String> {
        let mut millis = Vec::new();
        for token in text.split_whitespace() {
            let unit_ms: i64 = match token.chars().last() {
                Some('s') => 1_000,
                Some('m') => 60_000,
                Some('h') => 3_600_000,
                Some('d') => 86_400_000,
                _ => return Err(format!("delay level `{token}` does not end in s, m, h or d")),
            };
            let number: i64 = token[..token.len() - 1]
                .parse()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| format!("delay level `{token}` is not a whole number of its unit"))?;
            let ms = number.checked_mul(unit_ms).ok_or_else(|| format!("delay level `{token}` is too long"))?;
            millis.push(ms);
        }
        if millis.is_empty() {
            return Err("no delay levels".into());
        }
        Ok(DelayLevels { text: text.trim().to_owned(), millis })
    }

    /// The highest level (the number of durations).
    pub fn max_level(&self) -> i32 {
        self.millis.len() as i32
    }

    /// The delay of `level` (1-based), if it exists.
    pub fn delay_ms(&self, level: i32) -> Option<i64> {
        usize::try_from(level).ok().and_then(|l| l.checked_sub(1)).and_then(|i| self.millis.get(i)).copied()
    }

    /// Delivery time of a message of `level` stored at `store_timestamp_ms`; levels above the
    /// highest count as the highest, as Java clamps them.
    pub fn deliver_timestamp(&self, level: i32, store_timestamp_ms: i64) -> Option<i64> {
        self.delay_ms(level.min(self.max_level())).map(|d| store_timestamp_ms.saturating_add(d))
    }

    /// The tagsCode a record gets in its ConsumeQueue: for the schedule topic, the delivery
    /// time computed from its DELAY property; otherwise `None` (the tag hash applies).
    pub(crate) fn schedule_tags_code(&self, topic: &str, delay: Option<&str>, store_timestamp_ms: i64) -> Option<i64> {
        if topic != SCHEDULE_TOPIC {
            return None;
        }
        let level: i32 = delay?.trim().parse().ok()?;
        if level <= 0 {
            return None;
        }
        self.deliver_timestamp(level, store_timestamp_ms)
    }

    /// The DELAY property value as a level (0 when absent or not a number, as Java reads it).
    pub fn level_of(delay: Option<&str>) -> i32 {
        delay.and_then(|d| d.trim().parse().ok()).unwrap_or(0)
    }
}

impl ferromq_config::ConfigValue for DelayLevels {
    const EXPECTED: &'static str = "durations such as `1s 5s 10s 30s 1m 2h 1d`";
    fn parse_value(text: &str) -> Option<Self> {
        DelayLevels::parse(text).ok()
    }
    fn render(&self) -> String {
        self.text.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_levels_are_rocketmqs_eighteen() {
        let l = DelayLevels::default();
        assert_eq!(l.max_level(), 18);
        assert_eq!(l.delay_ms(1), Some(1_000));
        assert_eq!(l.delay_ms(3), Some(10_000));
        assert_eq!(l.delay_ms(5), Some(60_000));
        assert_eq!(l.delay_ms(17), Some(3_600_000));
        assert_eq!(l.delay_ms(18), Some(7_200_000));
        assert_eq!(l.delay_ms(0), None);
        assert_eq!(l.delay_ms(19), None);
        assert_eq!(l.deliver_timestamp(40, 1_000), Some(7_201_000), "clamped to the last level");
    }

    #[test]
    fn custom_levels_and_errors() {
        let l = DelayLevels::parse(" 2s  1d ").unwrap();
        assert_eq!(l.max_level(), 2);
        assert_eq!(l.delay_ms(2), Some(86_400_000));
        assert!(DelayLevels::parse("1x").unwrap_err().contains("1x"));
        assert!(DelayLevels::parse("s").is_err());
        assert!(DelayLevels::parse("-1s").is_err());
        assert!(DelayLevels::parse("").is_err());
    }

    #[test]
    fn only_schedule_topic_records_with_a_level_get_a_delivery_time() {
        let l = DelayLevels::default();
        assert_eq!(l.schedule_tags_code(SCHEDULE_TOPIC, Some("2"), 10_000), Some(15_000));
        assert_eq!(l.schedule_tags_code("TopicA", Some("2"), 10_000), None);
        assert_eq!(l.schedule_tags_code(SCHEDULE_TOPIC, None, 10_000), None);
        assert_eq!(l.schedule_tags_code(SCHEDULE_TOPIC, Some("0"), 10_000), None);
        assert_eq!(l.schedule_tags_code(SCHEDULE_TOPIC, Some("x"), 10_000), None);
    }
}
