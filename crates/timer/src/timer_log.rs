//! The timerlog: an append-only log of fixed 52-byte units in segments named by their
//! 20-digit start offset (`<root>/timerlog/`). Each unit records one message placed in the
//! wheel and links back to the previous unit of the same slot. Java: `TimerLog`, the unit
//! writing in `TimerMessageStore#doEnqueue`, its recovery scan in `#recoverAndRevise`.
//!
//! Unit layout (big-endian):
//!
//! | offset | size | field                                                          |
//! |--------|------|----------------------------------------------------------------|
//! | 0      | 4    | size, always 52                                                |
//! | 4      | 8    | prevPos: previous unit of the same slot, -1 for the first      |
//! | 12     | 4    | magic: 1 default, 2 roll, 4 delete (bits; 0xF mask)            |
//! | 16     | 8    | writeTimeMs: the wheel's write time when enqueued              |
//! | 24     | 4    | delay: slot time - writeTimeMs                                 |
//! | 28     | 8    | commitLogOffset of the message in `rmq_sys_wheel_timer`        |
//! | 36     | 4    | msgSize: its record size                                       |
//! | 40     | 4    | Java `String#hashCode` of its REAL_TOPIC (0 when absent)       |
//! | 44     | 8    | reserved, 0                                                    |
//!
//! A segment ends with a 16-byte blank marker (`int32 remaining | int64 0 | int32
//! BLANK_MAGIC_CODE`) once fewer than 52 + 16 bytes are left. A unit is written with its
//! size field last, so a torn unit reads as size 0 and recovery stops there.
//!
//! This module stores and scans units; it does not decide slots or flush order.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use ferromq_store::{MappedFile, MappedFileQueue};

/// Bytes per unit. Java: `TimerLog.UNIT_SIZE`.
pub const UNIT_SIZE: usize = 52;
/// Offset of `commitLogOffset` inside a unit. Java: `TimerLog.UNIT_PRE_SIZE_FOR_MSG`.
pub const UNIT_PRE_SIZE_FOR_MSG: usize = 28;
/// Bytes of the end-of-segment blank marker. Java: `TimerLog.MIN_BLANK_LEN`.
pub const MIN_BLANK_LEN: usize = 16;
/// Magic of the blank marker: Java's `0xBBCCDDEE ^ 1880681586 + 8` (`+` binds first).
pub const BLANK_MAGIC_CODE: i32 = (0xBBCC_DDEE_u32 as i32) ^ (1_880_681_586 + 8);

/// Unit magic bit of a message placed in its own slot. Java: `MAGIC_DEFAULT`.
pub const MAGIC_DEFAULT: i32 = 1;
/// Unit magic bit of a message parked in a nearer slot, to be re-enqueued from there.
/// Java: `MAGIC_ROLL`.
pub const MAGIC_ROLL: i32 = 1 << 1;
/// Unit magic bit of a recall's delete marker. Java: `MAGIC_DELETE`.
pub const MAGIC_DELETE: i32 = 1 << 2;

/// Whether `magic` is a unit magic (only the low four bits set). Java: `isMagicOK`.
pub fn is_magic_ok(magic: i32) -> bool {
    (magic | 0xF) == 0xF
}

/// One timerlog unit, without its constant size field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerLogUnit {
    /// Offset of the previous unit of the same slot, -1 for the first.
    pub prev_pos: i64,
    /// [`MAGIC_DEFAULT`] with [`MAGIC_ROLL`] and/or [`MAGIC_DELETE`].
    pub magic: i32,
    /// The wheel's write time (ms, a multiple of the precision) when the unit was written.
    pub write_time_ms: i64,
    /// Slot time minus `write_time_ms`.
    pub delay_ms: i32,
    /// CommitLog offset of the message (in the timer topic).
    pub commit_log_offset: i64,
    /// Its record size.
    pub msg_size: i32,
    /// Java `String#hashCode` of its REAL_TOPIC, for per-topic metrics.
    pub topic_hash: i32,
    /// Reserved, written as 0.
    pub reserved: i64,
}

impl TimerLogUnit {
    /// The time the unit is filed under: `write_time_ms + delay_ms`.
    pub fn slot_time_ms(&self) -> i64 {
        self.write_time_ms + i64::from(self.delay_ms)
    }

    /// Whether the unit parks a message to be re-enqueued.
    pub fn is_roll(&self) -> bool {
        self.magic & MAGIC_ROLL != 0
    }

    /// Whether the unit is a recall's delete marker.
    pub fn is_delete(&self) -> bool {
        self.magic & MAGIC_DELETE != 0
    }

    /// The 52-byte unit.
    pub fn encode(&self) -> [u8; UNIT_SIZE] {
        let mut out = [0u8; UNIT_SIZE];
        out[0..4].copy_from_slice(&(UNIT_SIZE as i32).to_be_bytes());
        out[4..12].copy_from_slice(&self.prev_pos.to_be_bytes());
        out[12..16].copy_from_slice(&self.magic.to_be_bytes());
        out[16..24].copy_from_slice(&self.write_time_ms.to_be_bytes());
        out[24..28].copy_from_slice(&self.delay_ms.to_be_bytes());
        out[28..36].copy_from_slice(&self.commit_log_offset.to_be_bytes());
        out[36..40].copy_from_slice(&self.msg_size.to_be_bytes());
        out[40..44].copy_from_slice(&self.topic_hash.to_be_bytes());
        out[44..52].copy_from_slice(&self.reserved.to_be_bytes());
        out
    }

    /// Reads a unit; `None` unless `bytes` holds 52 bytes with size 52 and a unit magic.
    pub fn decode(bytes: &[u8]) -> Option<TimerLogUnit> {
        let bytes = bytes.get(..UNIT_SIZE)?;
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
        if i32_at(0) != UNIT_SIZE as i32 || !is_magic_ok(i32_at(12)) {
            return None;
        }
        Some(TimerLogUnit {
            prev_pos: i64_at(4),
            magic: i32_at(12),
            write_time_ms: i64_at(16),
            delay_ms: i32_at(24),
            commit_log_offset: i64_at(28),
            msg_size: i32_at(36),
            topic_hash: i32_at(40),
            reserved: i64_at(44),
        })
    }
}

/// The end-of-segment marker for `remaining` free bytes.
pub fn blank_marker(remaining: usize) -> [u8; MIN_BLANK_LEN] {
    let mut out = [0u8; MIN_BLANK_LEN];
    out[0..4].copy_from_slice(&(remaining as i32).to_be_bytes());
    out[12..16].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
    out
}

/// Position of the last unit a full segment of `file_size` bytes holds. Java:
/// `TimerLog#getOffsetForLastUnit`.
pub fn offset_for_last_unit(file_size: usize) -> usize {
    file_size - (file_size - MIN_BLANK_LEN) % UNIT_SIZE - MIN_BLANK_LEN - UNIT_SIZE
}

/// What a recovery scan found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ScanSummary {
    /// Offset just past the last good unit (or at a final blank marker).
    pub end: i64,
    /// Units visited.
    pub units: u64,
}

/// The timerlog segments.
#[derive(Debug)]
pub(crate) struct TimerLog {
    queue: MappedFileQueue,
    file_size: usize,
}

impl TimerLog {
    /// Opens the segments in `dir` (creating it). Positions are unknown until
    /// [`scan`](Self::scan) and [`truncate`](Self::truncate) have run.
    pub(crate) fn load(dir: &Path, file_size: usize) -> io::Result<TimerLog> {
        Ok(TimerLog { queue: MappedFileQueue::load(dir, file_size, false)?, file_size })
    }

    /// The segments' directory.
    pub(crate) fn dir(&self) -> &Path {
        self.queue.dir()
    }

    /// Segment size.
    pub(crate) fn file_size(&self) -> usize {
        self.file_size
    }

    /// Offset just past the last unit written.
    pub(crate) fn max_offset(&self) -> i64 {
        self.queue.max_offset()
    }

    /// Offset of the oldest unit still stored.
    #[cfg(test)]
    pub(crate) fn min_offset(&self) -> i64 {
        self.queue.min_offset()
    }

    /// Appends a unit (rolling to a new segment behind a blank marker when needed) and
    /// returns its offset. One writer at a time.
    ///
    /// # Errors
    /// Creating the next segment failed.
    pub(crate) fn append(&self, unit: &[u8; UNIT_SIZE]) -> io::Result<i64> {
        let mut file = self.queue.last_or_create(0)?;
        if file.remaining() < UNIT_SIZE + MIN_BLANK_LEN {
            // Units start at multiples of 52 and are only written with 68 bytes free, so at
            // least the blank's 16 bytes remain; a recovered full segment may have none.
            if file.remaining() >= MIN_BLANK_LEN {
                file.append(&blank_marker(file.remaining()))?;
            }
            file.mark_full();
            file = self.queue.last_or_create(0)?;
        }
        let pos = file.file_from_offset() + file.wrote_position() as i64;
        file.append_size_last(unit)?;
        Ok(pos)
    }

    /// The unit at `pos`, if it is written, stored and valid.
    pub(crate) fn read_unit(&self, pos: i64) -> Option<TimerLogUnit> {
        let file = self.queue.find(pos)?;
        let at = usize::try_from(pos - file.file_from_offset()).ok()?;
        file.with_bytes(at, UNIT_SIZE, TimerLogUnit::decode)?
    }

    /// Flushes written units to disk; returns the offset below which everything is durable.
    ///
    /// # Errors
    /// The `msync` failure.
    pub(crate) fn flush(&self) -> io::Result<i64> {
        let end = self.queue.max_offset();
        self.queue.flush()?;
        Ok(end)
    }

    /// Visits the units from the start of the segment holding `from` (or the first segment)
    /// in order, stopping at the first invalid unit, at `limit`, or at the end. Blank markers
    /// move on to the next segment. Reads raw file bytes: meant for recovery, before the
    /// positions are set. Java: `recoverAndRevise`.
    pub(crate) fn scan(&self, from: i64, limit: Option<i64>, mut visit: impl FnMut(i64, &TimerLogUnit)) -> ScanSummary {
        let segments = self.queue.segments();
        let start = segments.iter().rposition(|s| s.file_from_offset() <= from).unwrap_or(0);
        let Some(first) = segments.get(start) else { return ScanSummary::default() };
        let mut summary = ScanSummary { end: first.file_from_offset(), units: 0 };
        for segment in &segments[start..] {
            let (pos, stopped) = self.scan_segment(segment, limit, &mut summary.units, &mut visit);
            summary.end = segment.file_from_offset() + pos as i64;
            if stopped {
                break;
            }
        }
        summary
    }

    /// Scans one segment; returns where it ended and whether the scan must stop there (an
    /// invalid unit or the limit) rather than go on with the next segment (a blank marker).
    fn scan_segment(
        &self,
        segment: &MappedFile,
        limit: Option<i64>,
        units: &mut u64,
        visit: &mut impl FnMut(i64, &TimerLogUnit),
    ) -> (usize, bool) {
        let base = segment.file_from_offset();
        let mut pos = 0usize;
        while pos + MIN_BLANK_LEN <= self.file_size {
            if limit.is_some_and(|l| base + pos as i64 >= l) {
                return (pos, true);
            }
            let magic = segment.with_raw(pos + 12, 4, |b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            if magic == Some(BLANK_MAGIC_CODE) {
                return (pos, false);
            }
            let unit = segment.with_raw(pos, UNIT_SIZE, TimerLogUnit::decode).flatten();
            let Some(unit) = unit else { return (pos, true) };
            visit(base + pos as i64, &unit);
            *units += 1;
            pos += UNIT_SIZE;
        }
        (pos, true)
    }

    /// Sets the end of the log at `end` (from a scan): later segments are deleted, and stale
    /// bytes after `end` in its segment (a torn unit, or units after a corrupt one) are zeroed
    /// so they can never be scanned as units again. Returns the bytes zeroed.
    ///
    /// # Errors
    /// Deleting or writing failed.
    pub(crate) fn truncate(&self, end: i64) -> io::Result<usize> {
        self.queue.truncate(end, false)?;
        let Some(segment) = self.queue.find(end) else { return Ok(0) };
        let from = (end - segment.file_from_offset()) as usize;
        let mut to = from;
        // Appends are sequential, so past the stale region the segment is zero: stop at the
        // first all-zero unit-sized chunk instead of rewriting the whole (sparse) tail.
        while to < self.file_size {
            let len = UNIT_SIZE.min(self.file_size - to);
            let stale = segment.with_raw(to, len, |b| b.iter().any(|&x| x != 0)).unwrap_or(false);
            if !stale {
                break;
            }
            to += len;
        }
        if to > from {
            zero_range(segment.path(), from, to - from)?;
        }
        Ok(to - from)
    }

    /// Deletes the oldest segments whose last unit points below `min_commit_log_offset`:
    /// their messages are gone from the CommitLog. The newest segment is kept. Java:
    /// `MappedFileQueue#deleteExpiredFileByOffsetForTimerLog`.
    ///
    /// # Errors
    /// Deleting failed.
    pub(crate) fn delete_expired(&self, min_commit_log_offset: i64) -> io::Result<Vec<Arc<MappedFile>>> {
        let last_unit = offset_for_last_unit(self.file_size);
        let mut deleted = Vec::new();
        loop {
            let segments = self.queue.segments();
            if segments.len() <= 1 {
                break;
            }
            let expired = segments[0]
                .with_bytes(last_unit, UNIT_SIZE, TimerLogUnit::decode)
                .flatten()
                .is_some_and(|u| u.commit_log_offset < min_commit_log_offset);
            if !expired {
                break;
            }
            match self.queue.delete_first()? {
                Some(f) => deleted.push(f),
                None => break,
            }
        }
        Ok(deleted)
    }
}

/// Writes zeros over `[at, at + len)` of a segment through its file descriptor (the same
/// page cache as the mapping) and syncs them.
fn zero_range(path: &Path, at: usize, len: usize) -> io::Result<()> {
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    file.write_all_at(&vec![0u8; len], at as u64)?;
    file.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(n: i64) -> TimerLogUnit {
        TimerLogUnit {
            prev_pos: -1,
            magic: MAGIC_DEFAULT,
            write_time_ms: 1_700_000_000_000,
            delay_ms: 1000,
            commit_log_offset: n * 100,
            msg_size: 100,
            topic_hash: 7,
            reserved: 0,
        }
    }

    #[test]
    fn blank_magic_matches_java_precedence() {
        assert_eq!(BLANK_MAGIC_CODE as u32, 0xCBD4_3194);
        assert!(!is_magic_ok(BLANK_MAGIC_CODE));
        assert!(is_magic_ok(MAGIC_DEFAULT | MAGIC_ROLL | MAGIC_DELETE));
    }

    #[test]
    fn last_unit_offset_is_the_last_unit_that_fits() {
        // 4096 - 16 = 4080 = 78 * 52 + 24: units at 0..=77*52 fit with 16 bytes to spare.
        assert_eq!(offset_for_last_unit(4096), 77 * 52);
        assert!(offset_for_last_unit(4096) + UNIT_SIZE + MIN_BLANK_LEN <= 4096);
        assert_eq!(offset_for_last_unit(52 + 16), 0);
    }

    #[test]
    fn appends_roll_behind_a_blank_and_scan_back() {
        let dir = tempfile::tempdir().unwrap();
        let size = 52 * 3 + 16 + 20; // three units, then 36 bytes: blank (remaining 36).
        let log = TimerLog::load(dir.path(), size).unwrap();
        let mut positions = Vec::new();
        for n in 0..7 {
            positions.push(log.append(&unit(n).encode()).unwrap());
        }
        assert_eq!(positions, vec![0, 52, 104, size as i64, size as i64 + 52, size as i64 + 104, 2 * size as i64]);
        assert_eq!(log.read_unit(52), Some(unit(1)));
        assert_eq!(log.read_unit(156), None, "the blank marker is not a unit");
        let mut seen = Vec::new();
        let summary = log.scan(0, None, |pos, u| seen.push((pos, u.commit_log_offset)));
        assert_eq!(summary.units, 7);
        assert_eq!(summary.end, 2 * size as i64 + 52);
        assert_eq!(seen[3], (size as i64, 300));
    }

    #[test]
    fn recovery_stops_at_a_torn_unit_and_zeroes_it() {
        let dir = tempfile::tempdir().unwrap();
        let size = 4096;
        {
            let log = TimerLog::load(dir.path(), size).unwrap();
            for n in 0..5 {
                log.append(&unit(n).encode()).unwrap();
            }
            log.flush().unwrap();
        }
        // A torn sixth unit: everything but its size field.
        let path = dir.path().join("00000000000000000000");
        let mut torn = unit(5).encode();
        torn[..4].copy_from_slice(&[0; 4]);
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().write_all_at(&torn, 5 * 52).unwrap();

        let log = TimerLog::load(dir.path(), size).unwrap();
        let summary = log.scan(0, None, |_, _| {});
        assert_eq!(summary, ScanSummary { end: 5 * 52, units: 5 });
        assert_eq!(log.truncate(summary.end).unwrap(), 52);
        assert_eq!(log.max_offset(), 5 * 52);
        assert_eq!(log.append(&unit(9).encode()).unwrap(), 5 * 52);
        assert_eq!(log.read_unit(5 * 52).unwrap().commit_log_offset, 900);
    }

    #[test]
    fn reopened_full_segment_rolls_on_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let size = 52 * 2 + 16;
        {
            let log = TimerLog::load(dir.path(), size).unwrap();
            log.append(&unit(0).encode()).unwrap();
            log.append(&unit(1).encode()).unwrap();
            log.append(&unit(2).encode()).unwrap(); // blank, then the second segment
        }
        let log = TimerLog::load(dir.path(), size).unwrap();
        let summary = log.scan(0, None, |_, _| {});
        assert_eq!(summary, ScanSummary { end: size as i64 + 52, units: 3 });
        log.truncate(summary.end).unwrap();
        assert_eq!(log.append(&unit(3).encode()).unwrap(), size as i64 + 52);
        assert_eq!(log.append(&unit(4).encode()).unwrap(), 2 * size as i64);
    }

    #[test]
    fn expired_segments_go_oldest_first_and_the_newest_stays() {
        let dir = tempfile::tempdir().unwrap();
        let size = 52 * 2 + 16;
        let log = TimerLog::load(dir.path(), size).unwrap();
        for n in 0..5 {
            log.append(&unit(n).encode()).unwrap();
        }
        // Segments: [0, 1], [2, 3], [4]; last units point at 100 and 300.
        assert_eq!(log.delete_expired(100).unwrap().len(), 0);
        assert_eq!(log.delete_expired(301).unwrap().len(), 2);
        assert_eq!(log.min_offset(), 2 * size as i64);
        assert_eq!(log.read_unit(2 * size as i64).unwrap().commit_log_offset, 400);
    }
}
