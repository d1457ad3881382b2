//! The timer wheel: `2 * slotsTotal` slots, one per precision step, indexed by
//! `(timeMs / precision) % (2 * slotsTotal)`. The whole wheel lives in memory; the
//! `timerwheel` file is its durable copy, written slot by slot (only slots changed since the
//! last flush) and synced by the flusher. Java: `TimerWheel`.
//!
//! A slot entry belongs to one revolution: its stored time says which. Looking up a time
//! whose slot holds another revolution's time gives [`Slot::EMPTY`], so entries never need
//! clearing once their time has passed.
//!
//! This module does not decide what goes into a slot (see `enqueue.rs`), nor when the file
//! is flushed relative to the timerlog and checkpoint (see `flush.rs`).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{io_err, TimerError};
use crate::slot::{Slot, SLOT_SIZE};

/// Slots written by one `pwrite` at most when flushing a run of changed slots.
const FLUSH_RUN_SLOTS_MAX: usize = 4096;

/// The in-memory wheel and its file.
#[derive(Debug)]
pub(crate) struct TimerWheel {
    slots: Vec<Slot>,
    /// One bit per slot changed since the last [`take_dirty`](Self::take_dirty).
    dirty: Vec<u64>,
    precision_ms: i64,
    file: std::sync::Arc<File>,
    path: PathBuf,
}

/// Changed slots taken from the wheel, to be written without holding the wheel's lock.
#[derive(Debug, Default)]
pub(crate) struct DirtySlots {
    /// Runs of consecutive slots: first index and their encoded records.
    runs: Vec<(usize, Vec<u8>)>,
}

impl DirtySlots {
    /// Slots in the runs.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.runs.iter().map(|(_, bytes)| bytes.len() / SLOT_SIZE).sum()
    }
}

impl TimerWheel {
    /// Opens (creating if absent) the wheel file of `2 * slots_total` slots and reads it.
    ///
    /// # Errors
    /// I/O errors; [`TimerError::WheelSizeMismatch`] when a non-empty file has another size
    /// (Java refuses it too).
    pub(crate) fn open(path: &Path, slots_total: i64, precision_ms: i64) -> Result<TimerWheel, TimerError> {
        let count = (2 * slots_total) as usize;
        let expected = (count * SLOT_SIZE) as u64;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        let file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).map_err(io_err(path))?;
        let len = file.metadata().map_err(io_err(path))?.len();
        if len != 0 && len != expected {
            return Err(TimerError::WheelSizeMismatch { path: path.to_owned(), found: len, expected });
        }
        if len == 0 {
            file.set_len(expected).map_err(io_err(path))?;
        }
        // Read in pieces: a whole-file buffer would double the wheel's memory at start (and an
        // allocator that keeps freed memory would keep the double).
        const READ_SLOTS: usize = 16 * 1024;
        let mut slots = Vec::with_capacity(count);
        let mut raw = vec![0u8; READ_SLOTS * SLOT_SIZE];
        let mut at = 0usize;
        while at < count {
            let n = READ_SLOTS.min(count - at);
            let chunk = &mut raw[..n * SLOT_SIZE];
            file.read_exact_at(chunk, (at * SLOT_SIZE) as u64).map_err(io_err(path))?;
            slots.extend(chunk.chunks_exact(SLOT_SIZE).map(|rec| {
                let mut rec_bytes = [0u8; SLOT_SIZE];
                rec_bytes.copy_from_slice(rec);
                Slot::decode(&rec_bytes, precision_ms)
            }));
            at += n;
        }
        Ok(TimerWheel {
            slots,
            dirty: vec![0; count.div_ceil(64)],
            precision_ms,
            file: std::sync::Arc::new(file),
            path: path.to_owned(),
        })
    }

    /// Slots in the file (`2 * slotsTotal`).
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// The slot width.
    pub(crate) fn precision_ms(&self) -> i64 {
        self.precision_ms
    }

    /// Index of the slot for `time_ms`. Java: `getSlotIndex`.
    pub(crate) fn slot_index(&self, time_ms: i64) -> usize {
        (time_ms / self.precision_ms).rem_euclid(self.slots.len() as i64) as usize
    }

    /// `time_ms` rounded down to its slot's time.
    pub(crate) fn slot_time(&self, time_ms: i64) -> i64 {
        time_ms.div_euclid(self.precision_ms) * self.precision_ms
    }

    /// The slot entry at `time_ms`'s index, whatever revolution it belongs to. Java:
    /// `getRawSlot`.
    pub(crate) fn raw_slot(&self, time_ms: i64) -> Slot {
        self.slots[self.slot_index(time_ms)]
    }

    /// The slot of `time_ms`, or [`Slot::EMPTY`] when its entry belongs to another revolution.
    /// Java: `getSlot`.
    pub(crate) fn slot(&self, time_ms: i64) -> Slot {
        let raw = self.raw_slot(time_ms);
        if raw.time_ms != self.slot_time(time_ms) {
            return Slot::EMPTY;
        }
        raw
    }

    /// Overwrites the slot of `time_ms`. Java: `putSlot` (five-argument form).
    pub(crate) fn put_slot(&mut self, time_ms: i64, first_pos: i64, last_pos: i64, num: i32, magic: i32) {
        let index = self.slot_index(time_ms);
        self.slots[index] = Slot { time_ms: self.slot_time(time_ms), first_pos, last_pos, num, magic };
        self.mark_dirty(index);
    }

    /// Recovery: makes the unit at `pos` (due at `time_ms`) the slot's last unit. A slot of
    /// another revolution starts over at `pos` with a zero count (recovery recounts units
    /// afterwards). Java: `reviseSlot(time, IGNORE, pos, true)`.
    pub(crate) fn revise_slot(&mut self, time_ms: i64, pos: i64) {
        let index = self.slot_index(time_ms);
        let time = self.slot_time(time_ms);
        let slot = &mut self.slots[index];
        if slot.time_ms == time {
            slot.last_pos = pos;
        } else {
            *slot = Slot { time_ms: time, first_pos: pos, last_pos: pos, num: 0, magic: 0 };
        }
        self.mark_dirty(index);
    }

    /// Forgets the slot at `index` (recovery, for a slot whose units are all gone).
    pub(crate) fn clear_index(&mut self, index: usize) {
        self.slots[index] = Slot { time_ms: 0, first_pos: -1, last_pos: -1, num: 0, magic: 0 };
        self.mark_dirty(index);
    }

    /// Sets the unit count of a live slot (recovery's recount).
    pub(crate) fn set_num(&mut self, index: usize, num: i32) {
        if self.slots[index].num != num {
            self.slots[index].num = num;
            self.mark_dirty(index);
        }
    }

    /// The entry at `index` (raw).
    pub(crate) fn at(&self, index: usize) -> Slot {
        self.slots[index]
    }

    fn mark_dirty(&mut self, index: usize) {
        self.dirty[index / 64] |= 1 << (index % 64);
    }

    /// Marks every slot changed (after a failed write, so the next flush rewrites them all).
    pub(crate) fn mark_all_dirty(&mut self) {
        for word in &mut self.dirty {
            *word = u64::MAX;
        }
    }

    /// Encodes the changed slots and clears their marks.
    pub(crate) fn take_dirty(&mut self) -> DirtySlots {
        let mut out = DirtySlots::default();
        let mut current: Option<(usize, Vec<u8>)> = None;
        for (w, word) in self.dirty.iter_mut().enumerate() {
            if *word == 0 {
                continue;
            }
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let index = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if index >= self.slots.len() {
                    break;
                }
                let rec = self.slots[index].encode(self.precision_ms);
                match &mut current {
                    Some((start, bytes))
                        if *start + bytes.len() / SLOT_SIZE == index
                            && bytes.len() < FLUSH_RUN_SLOTS_MAX * SLOT_SIZE =>
                    {
                        bytes.extend_from_slice(&rec)
                    }
                    _ => {
                        if let Some(run) = current.take() {
                            out.runs.push(run);
                        }
                        current = Some((index, rec.to_vec()));
                    }
                }
            }
        }
        if let Some(run) = current {
            out.runs.push(run);
        }
        out
    }

    /// A handle to write taken slots with while the wheel's lock is released.
    pub(crate) fn writer(&self) -> WheelWriter {
        WheelWriter { file: self.file.clone(), path: self.path.clone() }
    }
}

/// Writes slots to the wheel file.
#[derive(Debug)]
pub(crate) struct WheelWriter {
    file: std::sync::Arc<File>,
    path: PathBuf,
}

impl WheelWriter {
    /// Writes the slots and syncs the file.
    ///
    /// # Errors
    /// The write or sync failure; the caller must treat the file's content as unknown.
    pub(crate) fn write(&self, dirty: &DirtySlots) -> Result<(), TimerError> {
        for (index, bytes) in &dirty.runs {
            self.file.write_all_at(bytes, (*index * SLOT_SIZE) as u64).map_err(io_err(&self.path))?;
        }
        if !dirty.runs.is_empty() {
            self.file.sync_data().map_err(io_err(&self.path))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_of_other_revolutions_read_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let mut wheel = TimerWheel::open(&dir.path().join("timerwheel"), 100, 1000).unwrap();
        assert_eq!(wheel.slot_count(), 200);
        let t = 1_700_000_000_000;
        assert!(wheel.slot(t).is_empty(), "a zeroed file holds no slot");
        wheel.put_slot(t + 400, 0, 52, 2, 0);
        assert_eq!(wheel.slot(t + 999), Slot { time_ms: t, first_pos: 0, last_pos: 52, num: 2, magic: 0 });
        // 200 slots later the same index belongs to another revolution.
        assert!(wheel.slot(t + 200_000).is_empty());
        assert_eq!(wheel.raw_slot(t + 200_000).time_ms, t);
    }

    #[test]
    fn flushed_slots_survive_a_reopen_and_the_size_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("timerwheel");
        let t = 1_700_000_000_000;
        {
            let mut wheel = TimerWheel::open(&path, 100, 100).unwrap();
            wheel.put_slot(t, 104, 208, 3, 0);
            wheel.put_slot(t + 100, 260, 260, 1, 0);
            wheel.put_slot(t + 500, 312, 312, 1, 0);
            let dirty = wheel.take_dirty();
            assert_eq!(dirty.len(), 3);
            assert_eq!(dirty.runs.len(), 2, "adjacent slots are written in one run");
            wheel.writer().write(&dirty).unwrap();
            assert_eq!(wheel.take_dirty().len(), 0);
        }
        let wheel = TimerWheel::open(&path, 100, 100).unwrap();
        assert_eq!(wheel.slot(t).last_pos, 208);
        assert_eq!(wheel.slot(t + 100).num, 1);
        assert_eq!(wheel.slot(t + 500).first_pos, 312);
        drop(wheel);
        assert!(matches!(TimerWheel::open(&path, 99, 100), Err(TimerError::WheelSizeMismatch { .. })));
    }

    #[test]
    fn revise_links_the_newest_unit_and_restarts_stale_slots() {
        let dir = tempfile::tempdir().unwrap();
        let mut wheel = TimerWheel::open(&dir.path().join("w"), 100, 1000).unwrap();
        let t = 1_700_000_000_000;
        wheel.put_slot(t, 0, 0, 1, 0);
        wheel.revise_slot(t, 52);
        assert_eq!(wheel.slot(t), Slot { time_ms: t, first_pos: 0, last_pos: 52, num: 1, magic: 0 });
        wheel.revise_slot(t + 200_000, 104);
        assert_eq!(
            wheel.slot(t + 200_000),
            Slot { time_ms: t + 200_000, first_pos: 104, last_pos: 104, num: 0, magic: 0 }
        );
    }
}
