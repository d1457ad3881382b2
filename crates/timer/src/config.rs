//! `TimerConfig`: the timer wheel's settings under RocketMQ's `MessageStoreConfig` names, with
//! Java's defaults, and the derived values the wheel works with (snapped precision, clamped
//! roll window). Reading them from `broker.conf` is the broker's business, not this module's.
//! Java: `MessageStoreConfig` (timer keys), the constants of `TimerMessageStore`.

use crate::error::TimerError;

/// The system topic timer messages are stored in until due (always queue 0).
/// Java: `TimerMessageStore.TIMER_TOPIC`.
pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";

/// Days the wheel spans at 1000 ms precision. Java: `TimerMessageStore.TIMER_WHEEL_TTL_DAY`.
pub const TIMER_WHEEL_TTL_DAY: u32 = 7;

/// Slots of one wheel revolution: `7 * 86400`. The file holds twice as many.
pub const DEFAULT_SLOTS_TOTAL: u32 = TIMER_WHEEL_TTL_DAY * 24 * 3600;

/// Slots kept free between the read pointer and the far end of the wheel.
/// Java: `TimerMessageStore.TIMER_BLANK_SLOTS`.
pub const TIMER_BLANK_SLOTS: i64 = 60;

/// Default timerlog segment size (`mappedFileSizeTimerLog`): 100 MiB.
pub const DEFAULT_TIMER_LOG_FILE_SIZE: usize = 100 * 1024 * 1024;

/// Precisions Java accepts; `setTimerPrecisionMs` snaps any other value down to one of them.
pub const PRECISION_CANDIDATES_MS: [i64; 4] = [100, 200, 500, 1000];

/// The timer wheel's settings. Field docs name the RocketMQ key; `Default` holds Java's
/// defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerConfig {
    /// `timerWheelEnable`: when false, timer messages are refused (WHEEL_TIMER_NOT_ENABLE).
    pub timer_wheel_enable: bool,
    /// `timerPrecisionMs`: width of one slot. Snapped to 100, 200, 500 or 1000 (see
    /// [`precision_ms`](Self::precision_ms)).
    pub timer_precision_ms: u32,
    /// `timerRollWindowSlot`: messages due further than this many slots ahead are parked in a
    /// nearer slot and re-enqueued from there ("rolled"). Clamped, see
    /// [`roll_window_slots`](Self::roll_window_slots).
    pub timer_roll_window_slot: u32,
    /// `timerMaxDelaySec`: the furthest delivery time a send may ask for.
    pub timer_max_delay_sec: u32,
    /// `timerFlushIntervalMs`: how often the timerlog, the wheel and the checkpoint are flushed.
    pub timer_flush_interval_ms: u64,
    /// `mappedFileSizeTimerLog`: bytes per timerlog segment.
    pub mapped_file_size_timer_log: usize,
    /// `timerEnableRetryUntilSuccess`: retry a failed re-put forever instead of three times.
    pub timer_enable_retry_until_success: bool,
    /// `timerCongestNumEachSlot`: above this many messages in one slot, sends to it are
    /// throttled (see `TimerMessageStore::is_reject`).
    pub timer_congest_num_each_slot: i32,
    /// Slots of one revolution; the `timerwheel` file holds twice as many. Not a RocketMQ key
    /// (Java fixes it at `7 * 86400`); smaller values make small files for tests. A wheel file
    /// written with another value is refused.
    pub timer_slots_total: u32,
}

impl Default for TimerConfig {
    fn default() -> Self {
        TimerConfig {
            timer_wheel_enable: true,
            timer_precision_ms: 1000,
            timer_roll_window_slot: 3600 * 24 * 2,
            timer_max_delay_sec: 3600 * 24 * 3,
            timer_flush_interval_ms: 1000,
            mapped_file_size_timer_log: DEFAULT_TIMER_LOG_FILE_SIZE,
            timer_enable_retry_until_success: false,
            timer_congest_num_each_slot: i32::MAX,
            timer_slots_total: DEFAULT_SLOTS_TOTAL,
        }
    }
}

impl TimerConfig {
    /// The slot width in ms, snapped as Java's setter does: below 200 gives 100, below 500
    /// gives 200, below 1000 gives 500, anything else 1000.
    pub fn precision_ms(&self) -> i64 {
        snap_precision_ms(i64::from(self.timer_precision_ms))
    }

    /// The roll window in slots: the configured value unless it is below 2 or beyond
    /// `slots_total - 60`, in which case `slots_total - 60` (Java's constructor rule).
    pub fn roll_window_slots(&self) -> i64 {
        let total = i64::from(self.timer_slots_total);
        let configured = i64::from(self.timer_roll_window_slot);
        if configured > total - TIMER_BLANK_SLOTS || configured < 2 {
            total - TIMER_BLANK_SLOTS
        } else {
            configured
        }
    }

    /// `timerMaxDelaySec` in ms.
    pub fn max_delay_ms(&self) -> i64 {
        i64::from(self.timer_max_delay_sec) * 1000
    }

    /// Checks the values the files and the arithmetic depend on.
    ///
    /// # Errors
    /// [`TimerError::InvalidConfig`] naming the first bad key.
    pub fn validate(&self) -> Result<(), TimerError> {
        let total = i64::from(self.timer_slots_total);
        if total < TIMER_BLANK_SLOTS + 2 {
            return Err(TimerError::InvalidConfig {
                key: "timerSlotsTotal",
                reason: "must leave at least two slots beyond the 60 blank ones",
            });
        }
        // A unit stores its delay (slot time - write time) as an int32.
        if total.saturating_mul(self.precision_ms()) >= i64::from(i32::MAX) {
            return Err(TimerError::InvalidConfig {
                key: "timerSlotsTotal",
                reason: "slots total times precision must fit an int32 of ms",
            });
        }
        let min_file = crate::timer_log::UNIT_SIZE + crate::timer_log::MIN_BLANK_LEN;
        if self.mapped_file_size_timer_log < min_file || self.mapped_file_size_timer_log > i32::MAX as usize {
            return Err(TimerError::InvalidConfig {
                key: "mappedFileSizeTimerLog",
                reason: "must hold at least one unit and its blank marker, and fit an int32",
            });
        }
        if self.timer_flush_interval_ms == 0 {
            return Err(TimerError::InvalidConfig { key: "timerFlushIntervalMs", reason: "must be positive" });
        }
        Ok(())
    }
}

/// Java's `MessageStoreConfig#setTimerPrecisionMs`.
pub fn snap_precision_ms(requested: i64) -> i64 {
    for pair in PRECISION_CANDIDATES_MS.windows(2) {
        if requested < pair[1] {
            return pair[0];
        }
    }
    PRECISION_CANDIDATES_MS[PRECISION_CANDIDATES_MS.len() - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_javas() {
        let c = TimerConfig::default();
        assert!(c.timer_wheel_enable);
        assert_eq!(c.precision_ms(), 1000);
        assert_eq!(c.roll_window_slots(), 172_800);
        assert_eq!(c.max_delay_ms(), 259_200_000);
        assert_eq!(c.timer_slots_total, 604_800);
        assert_eq!(c.mapped_file_size_timer_log, 104_857_600);
        c.validate().unwrap();
    }

    #[test]
    fn precision_snaps_down_like_the_java_setter() {
        for (asked, got) in [(0, 100), (99, 100), (100, 100), (199, 100), (200, 200), (499, 200), (500, 500)] {
            assert_eq!(snap_precision_ms(asked), got, "{asked}");
        }
        for (asked, got) in [(999, 500), (1000, 1000), (5000, 1000)] {
            assert_eq!(snap_precision_ms(asked), got, "{asked}");
        }
    }

    #[test]
    fn roll_window_is_clamped_to_the_wheel() {
        let mut c = TimerConfig { timer_slots_total: 1000, ..TimerConfig::default() };
        c.timer_roll_window_slot = 1;
        assert_eq!(c.roll_window_slots(), 940);
        c.timer_roll_window_slot = 941;
        assert_eq!(c.roll_window_slots(), 940);
        c.timer_roll_window_slot = 2;
        assert_eq!(c.roll_window_slots(), 2);
    }

    #[test]
    fn validation_rejects_unusable_sizes() {
        assert!(TimerConfig { timer_slots_total: 61, ..TimerConfig::default() }.validate().is_err());
        assert!(TimerConfig { mapped_file_size_timer_log: 67, ..TimerConfig::default() }.validate().is_err());
        assert!(TimerConfig { mapped_file_size_timer_log: 68, ..TimerConfig::default() }.validate().is_ok());
        assert!(TimerConfig { timer_slots_total: 3_000_000, ..TimerConfig::default() }.validate().is_err());
    }
}
