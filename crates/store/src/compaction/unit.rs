//! The compaction consume queue's unit (advanced-topics.md section 1; Java's
//! `BatchConsumeQueue` layout, which `SparseConsumeQueue` uses): 46 bytes, big-endian,
//! one per message kept, holding its original queue offset, so compacted-away offsets are
//! simply missing.
//!
//! ```text
//! 0  i64 position of the record in the compaction log
//! 8  i32 record size
//! 12 i64 tagsCode
//! 20 i64 store timestamp
//! 28 i64 queue offset of the message (msgBaseOffset)
//! 36 i16 batch size (always 1)
//! 38 i32 compacted offset (always -1)
//! 42 i32 reserved (0)
//! ```
//! A segment's last slot is kept for the end unit `(-1, 0, 0, 0, 0, 0, -1, 0)`; a zeroed
//! slot is invalid too, which is where reading a segment stops.

/// Bytes per unit. Java: `BatchConsumeQueue.CQ_STORE_UNIT_SIZE`.
pub(crate) const UNIT_SIZE: usize = 46;

/// One message's unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unit {
    pub position: i64,
    pub size: i32,
    pub tags_code: i64,
    pub store_timestamp: i64,
    pub queue_offset: i64,
}

impl Unit {
    pub(crate) fn encode(&self) -> [u8; UNIT_SIZE] {
        encode(self.position, self.size, self.tags_code, self.store_timestamp, self.queue_offset, 1)
    }

    /// The unit in `bytes`, or `None` for an end unit, a zeroed slot or anything else that is
    /// not a valid unit (Java: position >= 0, size > 0, base offset >= 0, batch > 0).
    pub(crate) fn decode(bytes: &[u8]) -> Option<Unit> {
        let bytes: &[u8; UNIT_SIZE] = bytes.get(..UNIT_SIZE)?.try_into().ok()?;
        let i64_at = |at: usize| i64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let i32_at = |at: usize| i32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let batch = i16::from_be_bytes([bytes[36], bytes[37]]);
        let unit = Unit {
            position: i64_at(0),
            size: i32_at(8),
            tags_code: i64_at(12),
            store_timestamp: i64_at(20),
            queue_offset: i64_at(28),
        };
        (unit.position >= 0 && unit.size > 0 && unit.queue_offset >= 0 && batch > 0).then_some(unit)
    }
}

/// The unit that closes a segment. Java: `SparseConsumeQueue#putEndPositionInfo`.
pub(crate) fn end_unit() -> [u8; UNIT_SIZE] {
    encode(-1, 0, 0, 0, 0, 0)
}

fn encode(position: i64, size: i32, tags_code: i64, store_timestamp: i64, base: i64, batch: i16) -> [u8; UNIT_SIZE] {
    let mut out = [0u8; UNIT_SIZE];
    out[0..8].copy_from_slice(&position.to_be_bytes());
    out[8..12].copy_from_slice(&size.to_be_bytes());
    out[12..20].copy_from_slice(&tags_code.to_be_bytes());
    out[20..28].copy_from_slice(&store_timestamp.to_be_bytes());
    out[28..36].copy_from_slice(&base.to_be_bytes());
    out[36..38].copy_from_slice(&batch.to_be_bytes());
    out[38..42].copy_from_slice(&(-1i32).to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes_of_a_unit_and_the_end_unit() {
        let unit =
            Unit { position: 0x0102, size: 300, tags_code: 7, store_timestamp: 1_700_000_000_000, queue_offset: 42 };
        let bytes = unit.encode();
        let expected: [u8; UNIT_SIZE] = [
            0, 0, 0, 0, 0, 0, 0x01, 0x02, // position
            0, 0, 0x01, 0x2c, // size 300
            0, 0, 0, 0, 0, 0, 0, 7, // tagsCode
            0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, // store time 1,700,000,000,000
            0, 0, 0, 0, 0, 0, 0, 42, // queue offset
            0, 1, // batch size
            0xff, 0xff, 0xff, 0xff, // compacted offset -1
            0, 0, 0, 0, // reserved
        ];
        assert_eq!(bytes, expected);
        assert_eq!(Unit::decode(&bytes), Some(unit));
        let end = end_unit();
        assert_eq!(&end[0..8], &[0xff; 8]);
        assert_eq!(&end[8..38], &[0; 30]);
        assert_eq!(Unit::decode(&end), None);
        assert_eq!(Unit::decode(&[0; UNIT_SIZE]), None);
        assert_eq!(Unit::decode(&bytes[..45]), None);
    }
}
