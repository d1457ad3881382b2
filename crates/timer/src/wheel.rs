//! The timer wheel: `2 * slotsTotal` slots, one per precision step, indexed by
//! `(timeMs / precision) % (2 * slotsTotal)`. The `timerwheel` file holds the wheel and is
//! mapped read-only (38 MB with Java's defaults: page cache, not process memory). The file is
//! sparse: a page of it is read through the mapping only once it is known to have blocks (a
//! fault on a hole of a full tmpfs kills the process); a hole reads as empty slots; slots changed
//! since they were last written live in an in-memory overlay until a flush has written them
//! (`pwrite`, synced by the flusher) and confirmed it. Java: `TimerWheel` (which maps the file
//! read-write).
//!
//! A slot entry belongs to one revolution: its stored time says which. Looking up a time
//! whose slot holds another revolution's time gives [`Slot::EMPTY`], so entries never need
//! clearing once their time has passed.
//!
//! This module does not decide what goes into a slot (see `enqueue.rs`), nor when the file
//! is flushed relative to the timerlog and checkpoint (see `flush.rs`).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use ferromq_store::reserve::PageSet;

use crate::error::{io_err, TimerError};
use crate::slot::{Slot, SLOT_SIZE};

/// Slots written by one `pwrite` at most when flushing a run of changed slots.
const FLUSH_RUN_SLOTS_MAX: usize = 4096;

/// The wheel: its file, mapped for reading, and the slots changed since they were written.
pub(crate) struct TimerWheel {
    /// The file's bytes. Only this wheel writes the file, and only at slots whose newest value
    /// is in `changed` until the write has completed, so a read of the mapping never sees a
    /// slot being written.
    map: memmap2::Mmap,
    slot_count: usize,
    /// Newest value of every slot changed since it was last written (and confirmed).
    changed: HashMap<usize, Slot>,
    /// One bit per slot changed since the last [`take_dirty`](Self::take_dirty).
    dirty: Vec<u64>,
    precision_ms: i64,
    /// The pages of the file known to hold data (written, or found with data at open): only
    /// those are read through the mapping.
    pages: PageSet,
    file: std::sync::Arc<File>,
    path: PathBuf,
}

impl std::fmt::Debug for TimerWheel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimerWheel")
            .field("path", &self.path)
            .field("slots", &self.slot_count)
            .field("changed", &self.changed.len())
            .finish()
    }
}

/// Changed slots taken from the wheel, to be written without holding the wheel's lock.
#[derive(Debug, Default)]
pub(crate) struct DirtySlots {
    /// Runs of consecutive slots: first index and their encoded records.
    runs: Vec<(usize, Vec<u8>)>,
    /// The slots in the runs with the values written, for [`TimerWheel::confirm_written`].
    slots: Vec<(usize, Slot)>,
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
        let map = map_read_only(&file).map_err(io_err(path))?;
        // Outward: a page that is part data is read through the mapping (a read of a hole
        // faults in no block where blocks are smaller than pages; tmpfs blocks are pages).
        let pages = PageSet::with_data(&file, expected as usize).map_err(io_err(path))?;
        Ok(TimerWheel {
            map,
            slot_count: count,
            changed: HashMap::new(),
            dirty: vec![0; count.div_ceil(64)],
            precision_ms,
            pages,
            file: std::sync::Arc::new(file),
            path: path.to_owned(),
        })
    }

    /// Slots in the file (`2 * slotsTotal`).
    pub(crate) fn slot_count(&self) -> usize {
        self.slot_count
    }

    /// The slot width.
    pub(crate) fn precision_ms(&self) -> i64 {
        self.precision_ms
    }

    /// Index of the slot for `time_ms`. Java: `getSlotIndex`.
    pub(crate) fn slot_index(&self, time_ms: i64) -> usize {
        (time_ms / self.precision_ms).rem_euclid(self.slot_count as i64) as usize
    }

    /// `time_ms` rounded down to its slot's time.
    pub(crate) fn slot_time(&self, time_ms: i64) -> i64 {
        time_ms.div_euclid(self.precision_ms) * self.precision_ms
    }

    /// The slot entry at `time_ms`'s index, whatever revolution it belongs to. Java:
    /// `getRawSlot`.
    pub(crate) fn raw_slot(&self, time_ms: i64) -> Slot {
        self.at(self.slot_index(time_ms))
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
        self.set(index, Slot { time_ms: self.slot_time(time_ms), first_pos, last_pos, num, magic });
    }

    /// Recovery: makes the unit at `pos` (due at `time_ms`) the slot's last unit. A slot of
    /// another revolution starts over at `pos` with a zero count (recovery recounts units
    /// afterwards). Java: `reviseSlot(time, IGNORE, pos, true)`.
    pub(crate) fn revise_slot(&mut self, time_ms: i64, pos: i64) {
        let index = self.slot_index(time_ms);
        let time = self.slot_time(time_ms);
        let mut slot = self.at(index);
        if slot.time_ms == time {
            slot.last_pos = pos;
        } else {
            slot = Slot { time_ms: time, first_pos: pos, last_pos: pos, num: 0, magic: 0 };
        }
        self.set(index, slot);
    }

    /// Forgets the slot at `index` (recovery, for a slot whose units are all gone).
    pub(crate) fn clear_index(&mut self, index: usize) {
        self.set(index, Slot { time_ms: 0, first_pos: -1, last_pos: -1, num: 0, magic: 0 });
    }

    /// Sets the unit count of a live slot (recovery's recount).
    pub(crate) fn set_num(&mut self, index: usize, num: i32) {
        let mut slot = self.at(index);
        if slot.num != num {
            slot.num = num;
            self.set(index, slot);
        }
    }

    /// The entry at `index` (raw).
    pub(crate) fn at(&self, index: usize) -> Slot {
        if let Some(slot) = self.changed.get(&index) {
            return *slot;
        }
        let mut rec = [0u8; SLOT_SIZE];
        let (from, to) = (index * SLOT_SIZE, (index + 1) * SLOT_SIZE);
        // A page not known to have blocks was a hole at open and has not been written since
        // (writes mark their pages once done; a slot being written is served from `changed`),
        // so it reads as zeros: an empty slot, with no need to touch the file.
        if self.pages.covers(from, to - from) {
            rec.copy_from_slice(&self.map[from..to]);
        }
        Slot::decode(&rec, self.precision_ms)
    }

    fn set(&mut self, index: usize, slot: Slot) {
        self.changed.insert(index, slot);
        self.dirty[index / 64] |= 1 << (index % 64);
    }

    /// Marks every slot not yet confirmed written as changed (after a failed write, whose
    /// slots are all among them, so the next flush rewrites them).
    pub(crate) fn mark_all_dirty(&mut self) {
        for &index in self.changed.keys() {
            self.dirty[index / 64] |= 1 << (index % 64);
        }
    }

    /// After `dirty` was written and synced: its slots that have not changed again since are
    /// read from the file from now on.
    pub(crate) fn confirm_written(&mut self, dirty: &DirtySlots) {
        // A completed write gave its pages blocks.
        for (first, bytes) in &dirty.runs {
            self.pages.insert_range(first * SLOT_SIZE, bytes.len());
        }
        for (index, written) in &dirty.slots {
            if self.changed.get(index) == Some(written) {
                self.changed.remove(index);
            }
        }
    }

    /// Slots held in memory (changed and not yet confirmed written).
    #[cfg(test)]
    pub(crate) fn changed_len(&self) -> usize {
        self.changed.len()
    }

    /// Encodes the changed slots and clears their marks.
    pub(crate) fn take_dirty(&mut self) -> DirtySlots {
        let mut out = DirtySlots::default();
        let mut current: Option<(usize, Vec<u8>)> = None;
        // Taken out for the loop (reads go through `self.at`); every word is zero afterwards.
        let mut dirty_bits = std::mem::take(&mut self.dirty);
        for (w, word) in dirty_bits.iter_mut().enumerate() {
            if *word == 0 {
                continue;
            }
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let index = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if index >= self.slot_count {
                    break;
                }
                let slot = self.at(index);
                out.slots.push((index, slot));
                let rec = slot.encode(self.precision_ms);
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
        self.dirty = dirty_bits;
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

/// Maps `file` read-only.
#[allow(unsafe_code)] // One read-only mapping; see the SAFETY comment.
fn map_read_only(file: &File) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: the mapping is read-only and the file is private to this wheel: the store's
    // directory lock keeps other brokers out, and this wheel writes only slots whose values it
    // serves from memory until the write has completed (see `TimerWheel::map`). The file's size
    // is fixed (checked at open) and never truncated while mapped.
    unsafe { memmap2::Mmap::map(file) }
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
            wheel.confirm_written(&dirty);
            assert_eq!(wheel.take_dirty().len(), 0);
        }
        let wheel = TimerWheel::open(&path, 100, 100).unwrap();
        assert_eq!(wheel.slot(t).last_pos, 208);
        assert_eq!(wheel.slot(t + 100).num, 1);
        assert_eq!(wheel.slot(t + 500).first_pos, 312);
        drop(wheel);
        assert!(matches!(TimerWheel::open(&path, 99, 100), Err(TimerError::WheelSizeMismatch { .. })));
    }

    /// A wheel of 200 slots of 100 ms in `dir` with two slots set, at `t` and `t + later_ms`.
    fn wheel_with_two_slots(dir: &Path, later_ms: i64) -> (TimerWheel, i64) {
        let mut wheel = TimerWheel::open(&dir.join("timerwheel"), 100, 100).unwrap();
        let t = 1_700_000_000_000;
        wheel.put_slot(t, 0, 52, 2, 0);
        wheel.put_slot(t + later_ms, 104, 104, 1, 0);
        (wheel, t)
    }

    #[test]
    fn written_slots_leave_memory_and_a_slot_changed_meanwhile_stays() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wheel, t) = wheel_with_two_slots(dir.path(), 100);
        assert_eq!(wheel.changed_len(), 2);
        let dirty = wheel.take_dirty();
        // Changed again while the flush writes the earlier value.
        wheel.put_slot(t + 100, 104, 156, 2, 0);
        wheel.writer().write(&dirty).unwrap();
        wheel.confirm_written(&dirty);
        assert_eq!(wheel.changed_len(), 1, "only the slot changed since stays in memory");
        assert_eq!(wheel.slot(t), Slot { time_ms: t, first_pos: 0, last_pos: 52, num: 2, magic: 0 });
        assert_eq!(wheel.slot(t + 100).last_pos, 156, "the newer value wins over the file");
        let dirty = wheel.take_dirty();
        assert_eq!(dirty.len(), 1);
        wheel.writer().write(&dirty).unwrap();
        wheel.confirm_written(&dirty);
        assert_eq!(wheel.changed_len(), 0);
        assert_eq!(wheel.slot(t + 100).last_pos, 156, "read back from the file");
    }

    #[test]
    fn slots_of_a_failed_write_are_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wheel, _) = wheel_with_two_slots(dir.path(), 500);
        let first = wheel.take_dirty();
        assert_eq!(wheel.take_dirty().len(), 0);
        // The write failed (not confirmed): every slot held in memory is written next time.
        wheel.mark_all_dirty();
        let again = wheel.take_dirty();
        assert_eq!(again.slots, first.slots);
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
