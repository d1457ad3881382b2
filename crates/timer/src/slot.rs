//! One slot of the timer wheel and its 32-byte big-endian record in the `timerwheel` file.
//! Java: `Slot`, `TimerWheel#putSlot` / `#getRawSlot`.
//!
//! | offset | size | field                                                       |
//! |--------|------|-------------------------------------------------------------|
//! | 0      | 8    | slot time / precision (the slot's time in precision units)  |
//! | 8      | 8    | firstPos: timerlog offset of the slot's first unit          |
//! | 16     | 8    | lastPos: timerlog offset of the slot's last unit (chain head)|
//! | 24     | 4    | num: units linked (deletes count -1)                        |
//! | 28     | 4    | magic: unused, kept as found                                |
//!
//! Older Java versions had a fixed 1000 ms precision and stored `timeMs / 1000`; storing the
//! time in precision units keeps those files readable.

/// Bytes per slot. Java: `Slot.SIZE`.
pub const SLOT_SIZE: usize = 32;

/// A slot as the wheel sees it, with its time in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The slot's time in ms (a multiple of the precision), or -1 for "no slot" (an empty or
    /// stale entry: one whose stored time belongs to another revolution).
    pub time_ms: i64,
    /// Timerlog offset of the first unit linked into this slot, or -1.
    pub first_pos: i64,
    /// Timerlog offset of the last unit linked into this slot, or -1. Units chain backwards
    /// from here through their `prev_pos`.
    pub last_pos: i64,
    /// Units linked into the slot; a delete marker counts -1.
    pub num: i32,
    /// Unused by Java ("just keep it"); carried through unchanged.
    pub magic: i32,
}

impl Slot {
    /// What Java's `getSlot` returns for a slot of another revolution: `Slot(-1, -1, -1)`.
    pub const EMPTY: Slot = Slot { time_ms: -1, first_pos: -1, last_pos: -1, num: 0, magic: 0 };

    /// Whether this is [`Slot::EMPTY`]'s "no slot".
    pub fn is_empty(&self) -> bool {
        self.time_ms == -1
    }

    /// The 32-byte record, with the time stored as `time_ms / precision_ms`.
    pub fn encode(&self, precision_ms: i64) -> [u8; SLOT_SIZE] {
        let mut out = [0u8; SLOT_SIZE];
        out[0..8].copy_from_slice(&(self.time_ms / precision_ms).to_be_bytes());
        out[8..16].copy_from_slice(&self.first_pos.to_be_bytes());
        out[16..24].copy_from_slice(&self.last_pos.to_be_bytes());
        out[24..28].copy_from_slice(&self.num.to_be_bytes());
        out[28..32].copy_from_slice(&self.magic.to_be_bytes());
        out
    }

    /// Reads a 32-byte record; the time comes back in ms (`stored * precision_ms`).
    pub fn decode(bytes: &[u8; SLOT_SIZE], precision_ms: i64) -> Slot {
        let i64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            i64::from_be_bytes(b)
        };
        let i32_at = |at: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&bytes[at..at + 4]);
            i32::from_be_bytes(b)
        };
        Slot {
            time_ms: i64_at(0).wrapping_mul(precision_ms),
            first_pos: i64_at(8),
            last_pos: i64_at(16),
            num: i32_at(24),
            magic: i32_at(28),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip_in_precision_units() {
        let slot = Slot { time_ms: 1_700_000_000_500, first_pos: 52, last_pos: 104, num: 2, magic: 0 };
        let bytes = slot.encode(500);
        assert_eq!(&bytes[0..8], &(1_700_000_000_500i64 / 500).to_be_bytes());
        assert_eq!(Slot::decode(&bytes, 500), slot);
    }
}
