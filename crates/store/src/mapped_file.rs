//! One memory-mapped segment file with its write and flush positions.
//!
//! The file is named by its start offset in the queue (20 digits) and has a fixed size. One
//! writer appends (callers serialize appends); readers take zero-copy [`Bytes`] slices of the
//! bytes already written, which keep the mapping alive after the file is dropped from its
//! queue. Java: `DefaultMappedFile`.

#![allow(unsafe_code)] // The mapping is shared between one writer and many readers; see `Inner`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use memmap2::MmapRaw;
use tracing::{info, warn};

use crate::reserve;

/// Page size used for "least pages" flush accounting and pre-touching.
pub const OS_PAGE_SIZE: usize = 4096;

/// Staged appends ([`AppendPath::WriteCall`]) beyond this are written by the appender itself
/// instead of waiting for the next commit: the bound on a segment's staging memory.
pub const STAGED_LIMIT_BYTES: usize = 1024 * 1024;

/// Blocks reserved ahead of the writer at a time, for files opened without a
/// [`ReservePolicy`] of their own (consume queues, timer logs).
pub const DEFAULT_RESERVE_STEP: usize = 256 * 1024;

/// How a queue's files reserve their blocks ahead of the writer (see [`crate::reserve`]).
#[derive(Debug)]
pub struct ReservePolicy {
    /// Bytes reserved beyond the end of an append at a time (rounded to pages, capped at the
    /// file's end).
    step: usize,
    /// Free bytes a reservation must leave on the filesystem: a reservation that would go
    /// below shrinks to what the append needs, and fails if even that would. The CommitLog
    /// keeps room this way for the consume queues and the index of what it has accepted.
    keep_free: std::sync::atomic::AtomicU64,
    /// Percent of the disk (as the disk guard measures it: used + available to unprivileged
    /// users) a background reservation leaves free: a tenth more than the disk guard's
    /// `diskSpaceWarningLevelRatio` does, so blocks reserved ahead (counted as used) never
    /// make the guard refuse puts by themselves.
    background_free_percent: std::sync::atomic::AtomicU64,
    /// Reserve by writing zeros (and syncing them) rather than with `fallocate`: see
    /// [`reserve::reserve_zeroed`]. For files written by write calls and flushed often
    /// (the CommitLog under SYNC_FLUSH).
    zero_fill: AtomicBool,
    /// Map the files for random access (`MADV_RANDOM`): a page fault reads that page only,
    /// not the kernel's read-around window. For many small files read a few pages at a time
    /// (consume queues): with read-around, the first touch of each of 10,000 queues read (and,
    /// for reserved blocks, zero-filled) a window of pages, and a restart took 50 s.
    random_access: AtomicBool,
    /// Whether background reservations are held back by the disk's fill (see
    /// [`MappedFile::reserve_to`]): the operator hears when this starts and ends.
    background_held: AtomicBool,
}

impl ReservePolicy {
    /// Reserve `step` bytes at a time, keeping no space free.
    pub fn new(step: usize) -> ReservePolicy {
        ReservePolicy {
            step: step.max(OS_PAGE_SIZE),
            keep_free: std::sync::atomic::AtomicU64::new(0),
            background_free_percent: std::sync::atomic::AtomicU64::new(DEFAULT_BACKGROUND_FREE_PERCENT),
            zero_fill: AtomicBool::new(false),
            random_access: AtomicBool::new(false),
            background_held: AtomicBool::new(false),
        }
    }

    /// Whether the last background reservation was held back by the disk's fill.
    pub fn background_held(&self) -> bool {
        self.background_held.load(Ordering::Relaxed)
    }

    /// Logs when background reservations start or stop being held back by the disk's fill.
    /// Held back, appends reserve their own blocks and the kernel zero-fills each fresh page
    /// on the request path (measured: ~30 % more CPU per message); worth an operator's look.
    fn note_background_held(&self, held: bool, path: &Path, free: u64, usable_total: u64) {
        if self.background_held.swap(held, Ordering::Relaxed) == held {
            return;
        }
        let used_percent = 100 - (free.saturating_mul(100) / usable_total.max(1)).min(100);
        if held {
            warn!(
                file = %path.display(),
                used_percent,
                free_bytes = free,
                keeps_free_percent = self.background_free_percent(),
                "disk filling up: files are no longer reserved ahead of their writers; appends reserve and \
                 fault in their own pages (more CPU per message); free space on this filesystem"
            );
        } else {
            info!(file = %path.display(), used_percent, free_bytes = free, "disk has room again: files are reserved ahead of their writers");
        }
    }

    /// Maps the files opened from now on for random access (see the field).
    pub fn set_random_access(&self, random: bool) {
        self.random_access.store(random, Ordering::Relaxed);
    }

    fn random_access(&self) -> bool {
        self.random_access.load(Ordering::Relaxed)
    }

    /// Chooses zero-filling over `fallocate` for reservations from now on.
    pub fn set_zero_fill(&self, zero_fill: bool) {
        self.zero_fill.store(zero_fill, Ordering::Relaxed);
    }

    /// The step.
    pub fn step(&self) -> usize {
        self.step
    }

    /// Sets the free bytes a reservation must leave.
    pub fn set_keep_free(&self, bytes: u64) {
        self.keep_free.store(bytes, Ordering::Relaxed);
    }

    fn keep_free(&self) -> u64 {
        self.keep_free.load(Ordering::Relaxed)
    }

    /// Sets the percent of the disk background reservations leave free (at most 100).
    pub fn set_background_free_percent(&self, percent: u64) {
        self.background_free_percent.store(percent.min(100), Ordering::Relaxed);
    }

    fn background_free_percent(&self) -> u64 {
        self.background_free_percent.load(Ordering::Relaxed)
    }
}

impl Default for ReservePolicy {
    fn default() -> Self {
        ReservePolicy::new(DEFAULT_RESERVE_STEP)
    }
}

/// The most an append reserves past its end when it has to reserve inline.
const INLINE_RESERVE_MAX: usize = 1024 * 1024;

/// The percent of the disk a background reservation leaves free unless told otherwise: that of
/// Java's default `diskSpaceWarningLevelRatio`, 90.
const DEFAULT_BACKGROUND_FREE_PERCENT: u64 = background_free_percent(90);

/// The percent of the disk background reservations leave free for a disk guard refusing puts
/// above `warning_percent` used: ten points more, so reserving ahead alone never crosses it.
pub(crate) const fn background_free_percent(warning_percent: u64) -> u64 {
    let warning = if warning_percent < 100 { warning_percent } else { 100 };
    let free = 100 - warning + 10;
    if free < 100 {
        free
    } else {
        100
    }
}

/// What the background reserves under one hold of the reservation lock.
const RESERVE_CHUNK: usize = 4 * 1024 * 1024;

/// Zeros handed out for the never-written tail of a sealed segment (replication ships it).
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

fn page_up(n: usize) -> usize {
    n.div_ceil(OS_PAGE_SIZE) * OS_PAGE_SIZE
}

/// How appends that no transient buffer takes reach the file.
///
/// Writing through the mapping leaves the pages writable in the process's page tables, so each
/// `msync` has to write-protect the pages it cleans (a TLB shootdown: an inter-processor
/// interrupt to every core running the process) and the next append into such a page takes a
/// write fault. Write calls put the bytes into the page cache with no writable mapping. That
/// wins when flushes are frequent and small (SYNC_FLUSH group commit: one flush per few
/// pages); with periodic flushes of many pages (ASYNC_FLUSH) the copy into the mapping is
/// cheaper. Measured in docs/benchmarks.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendPath {
    /// Copy into the shared mapping.
    Mapping,
    /// Staged in memory and written with one `pwrite` per [`MappedFile::commit_staged`] (a
    /// group commit writes everything appended since the last one in a single system call);
    /// readers see the bytes once committed. Pre-faulting maps pages read-only.
    WriteCall,
}

/// An [`AppendPath`] that can be switched while segments are in service (appends are
/// serialized with the switch by their callers, so relaxed ordering is enough).
#[derive(Debug, Default)]
pub(crate) struct SharedAppendPath(AtomicBool);

impl SharedAppendPath {
    pub(crate) fn load(&self) -> AppendPath {
        if self.0.load(Ordering::Relaxed) {
            AppendPath::WriteCall
        } else {
            AppendPath::Mapping
        }
    }

    pub(crate) fn store(&self, path: AppendPath) {
        self.0.store(path == AppendPath::WriteCall, Ordering::Relaxed);
    }
}

/// Locks a staging buffer. A panic while holding one cannot leave it inconsistent with the
/// positions (they are updated after the buffer, under the same lock).
fn lock(m: &Mutex<Vec<u8>>) -> std::sync::MutexGuard<'_, Vec<u8>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A segment's 20-digit file name for `offset` (Java: `UtilAll.offset2FileName`).
pub fn offset_to_file_name(offset: i64) -> String {
    format!("{offset:020}")
}

/// The mapping shared by the file and every slice handed out.
///
/// Soundness: bytes below the file's write position are never written again while the file is
/// in service (the store only appends), so shared slices of `[0, wrote)` never alias a write.
/// Writes go through the raw pointer to `[wrote, size)`, by one writer at a time (the owner of
/// the queue's append lock). Recovery truncation and zeroing happen before any reader exists.
struct Inner {
    map: MmapRaw,
}

/// A segment-sized anonymous buffer of the transient store pool. The same soundness rule as
/// `Inner` holds: the writer writes above the write position, `commit` reads below it.
pub struct TransientBuffer {
    map: MmapRaw,
}

impl std::fmt::Debug for TransientBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransientBuffer").field("len", &self.map.len()).finish()
    }
}

impl TransientBuffer {
    /// A zeroed buffer of `len` bytes (anonymous memory: pages are taken when first written).
    ///
    /// # Errors
    /// The mapping failed.
    pub fn new(len: usize) -> io::Result<TransientBuffer> {
        let map = memmap2::MmapOptions::new().len(len).map_anon()?;
        Ok(TransientBuffer { map: map.into() })
    }
}

/// Copies `len` bytes from `src` to `dst` with the first 4 bytes written last (see
/// [`MappedFile::append_size_last`]).
///
/// # Safety
/// Both ranges must be valid for `len` bytes, not overlap, and not be accessed concurrently.
unsafe fn copy_size_last(src: *const u8, dst: *mut u8, len: usize) {
    if len <= 4 {
        std::ptr::copy_nonoverlapping(src, dst, len);
        return;
    }
    std::ptr::copy_nonoverlapping(src.add(4), dst.add(4), len - 4);
    // Keep the size store after the other stores (compiler and CPU order).
    std::sync::atomic::fence(Ordering::Release);
    std::ptr::copy_nonoverlapping(src, dst, 4);
}

/// A read-only window of the mapping; the owner behind a zero-copy [`Bytes`].
struct Window {
    inner: Arc<Inner>,
    start: usize,
    len: usize,
}

impl AsRef<[u8]> for Window {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `start + len` is within the mapping and below the write position when the
        // window was made (checked in `MappedFile::slice`), or inside a sealed file nothing
        // writes any more (`MappedFile::slice_sealed`); that region is immutable (see Inner).
        unsafe { std::slice::from_raw_parts(self.inner.map.as_ptr().add(self.start), self.len) }
    }
}

/// One segment.
pub struct MappedFile {
    path: PathBuf,
    file_from_offset: i64,
    file_size: usize,
    file: File,
    inner: Arc<Inner>,
    /// An [`AppendPath`], switchable while the file is in service (appends are serialized).
    append_path: SharedAppendPath,
    wrote_position: AtomicUsize,
    /// Bytes in the file mapping and visible to readers. Equal to the write position unless a
    /// transient-pool buffer takes the appends first.
    committed_position: AtomicUsize,
    flushed_position: AtomicUsize,
    /// With `transientStorePoolEnable`: appends go here, and `commit` copies them into the
    /// file mapping. Returned to the pool once the file is full and committed.
    write_buffer: Mutex<Option<Arc<TransientBuffer>>>,
    /// [`AppendPath::WriteCall`]: the bytes appended since the last commit; they start at
    /// the committed position (appends update both under this lock).
    staged: Mutex<Vec<u8>>,
    /// The buffer a commit swaps for `staged` and writes out; its lock serializes commits.
    spare: Mutex<Vec<u8>>,
    /// Set once the file is full (a blank marker written or exactly filled).
    full: AtomicBool,
    /// The file's length on disk when opened, before it was extended: bytes past it were
    /// never written (a file cut short), so recovery must not trust a record reaching there.
    loaded_len: usize,
    /// Bytes from the start whose blocks are allocated: the only part of the mapping that may
    /// be touched. Beyond it the file is a hole (reads as zeros, but a fault there may find no
    /// block). Grows by [`ensure_reserved`](Self::ensure_reserved) under `reserve_lock`.
    reserved: AtomicUsize,
    /// Bytes from the start that may hold data and may be read through the mapping: at least
    /// `reserved`, and, for a file of an earlier run, up to its first hole rounded up to a page
    /// (reading a partly allocated page faults in no block; writing it would, so `reserved`
    /// rounds down).
    readable: AtomicUsize,
    reserve_lock: Mutex<()>,
    policy: Arc<ReservePolicy>,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &self.path)
            .field("wrote", &self.wrote_position())
            .field("flushed", &self.flushed_position())
            .finish()
    }
}

impl MappedFile {
    /// Creates (or reuses, extending it to `file_size`) the segment starting at `from` in `dir`.
    ///
    /// # Errors
    /// I/O errors creating, sizing or mapping the file; a file larger than `file_size`.
    pub fn open(dir: &Path, from: i64, file_size: usize) -> io::Result<MappedFile> {
        MappedFile::open_with(dir, from, file_size, Arc::default())
    }

    /// As [`open`](Self::open), reserving blocks as `policy` says. No block is reserved here
    /// and no page is touched: the first append reserves what it needs (so opening never fails
    /// for want of space, and a file prepared in advance costs no disk until used).
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_with(dir: &Path, from: i64, file_size: usize, policy: Arc<ReservePolicy>) -> io::Result<MappedFile> {
        let path = dir.join(offset_to_file_name(from));
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
        let len = file.metadata()?.len();
        if len > file_size as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is {len} bytes, larger than the configured segment size {file_size}", path.display()),
            ));
        }
        if len < file_size as u64 {
            // A new file, or one cut short by a crash: the missing tail reads as zeros, which
            // recovery treats as the end of data.
            file.set_len(file_size as u64)?;
        }
        // Of a file written before (by an earlier run, or by Java, which maps files sparse),
        // only the allocated prefix may be touched until reserved.
        let data_end = if len == 0 { 0 } else { reserve::allocated_prefix(&file, file_size as u64)? as usize };
        let reserved = if data_end == file_size { data_end } else { data_end - data_end % OS_PAGE_SIZE };
        let readable = page_up(data_end).min(file_size);
        let map = MmapRaw::map_raw(&file)?;
        if policy.random_access() {
            // Advice only: without it reads are slower, never wrong.
            if let Err(e) = map.advise(memmap2::Advice::Random) {
                tracing::debug!(path = %path.display(), error = %e, "MADV_RANDOM refused");
            }
        }
        Ok(MappedFile {
            path,
            file_from_offset: from,
            file_size,
            file,
            inner: Arc::new(Inner { map }),
            append_path: SharedAppendPath::default(),
            wrote_position: AtomicUsize::new(0),
            committed_position: AtomicUsize::new(0),
            flushed_position: AtomicUsize::new(0),
            write_buffer: Mutex::new(None),
            staged: Mutex::new(Vec::new()),
            spare: Mutex::new(Vec::new()),
            full: AtomicBool::new(false),
            loaded_len: len as usize,
            reserved: AtomicUsize::new(reserved),
            readable: AtomicUsize::new(readable),
            reserve_lock: Mutex::new(()),
            policy,
        })
    }

    /// Bytes from the start whose blocks are allocated (see [`crate::reserve`]).
    pub fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Acquire)
    }

    /// Bytes from the start that may hold data: everything past them reads as zeros and was
    /// never written.
    pub fn readable(&self) -> usize {
        self.readable.load(Ordering::Acquire).max(self.reserved())
    }

    /// Makes sure the blocks of `[0, end)` are allocated, reserving up to a step beyond `end`
    /// (less when the policy's free space would not remain). Called before anything is written
    /// there, through the mapping or a write call.
    ///
    /// # Errors
    /// `StorageFull` naming the file and the free space, when even `end` does not fit; other
    /// I/O errors of the reservation. Nothing is written then.
    pub fn ensure_reserved(&self, end: usize) -> io::Result<()> {
        if end <= self.reserved() {
            return Ok(());
        }
        // Inline, a little ahead only: the writer waits for this (on tmpfs a reservation
        // zeroes its pages), and [`reserve_ahead`](Self::reserve_ahead) takes the full step
        // in the background where there is a preallocator.
        self.reserve_to(end, end.saturating_add(self.policy.step().min(INLINE_RESERVE_MAX)), false)
    }

    /// Reserves a step ahead of the write position, where the file has less than half a step
    /// reserved there (background preparation, so appends rarely reserve inline). Returns
    /// whether it reserved anything.
    ///
    /// # Errors
    /// As [`ensure_reserved`](Self::ensure_reserved).
    pub fn reserve_ahead(&self) -> io::Result<bool> {
        let wrote = self.wrote_position();
        let step = self.policy.step();
        if self.reserved() >= self.file_size || self.reserved() >= wrote + step / 2 {
            return Ok(false);
        }
        // In chunks, the lock released between them: an appender that catches up waits for
        // one chunk at most, not for the whole step (a zero-filled step is written and synced).
        let target = (wrote + step).min(self.file_size);
        let mut any = false;
        while self.reserved() < target {
            let before = self.reserved();
            self.reserve_to(before, (before + RESERVE_CHUNK).min(target), true)?;
            if self.reserved() == before {
                break; // no room to spare (the policy's free space): appends reserve inline
            }
            any = true;
        }
        Ok(any)
    }

    /// Whether the reserved space ahead of the writer is under half a step (so
    /// [`reserve_ahead`](Self::reserve_ahead) would reserve).
    pub fn wants_reserve_ahead(&self) -> bool {
        let reserved = self.reserved();
        reserved < self.file_size && reserved < self.wrote_position() + self.policy.step() / 2
    }

    /// Reserves `[reserved, want)`, or at least `[reserved, need)` when the policy's free
    /// space would not remain otherwise.
    ///
    /// A `background` reservation (ahead of need) also leaves a fifth of the disk free: blocks
    /// reserved count as used, and reserving far ahead must not by itself push the disk over
    /// `diskSpaceWarningLevelRatio` (puts refused while reserved room waits unused). Appends
    /// then reserve inline, a little at a time, up to the policy's own free space.
    fn reserve_to(&self, need: usize, want: usize, background: bool) -> io::Result<()> {
        let _guard = self.reserve_lock.lock().unwrap_or_else(|e| e.into_inner());
        let from = self.reserved();
        let need = page_up(need).min(self.file_size);
        let mut to = page_up(want).min(self.file_size).max(need);
        if to <= from {
            return Ok(());
        }
        let mut keep_free = self.policy.keep_free();
        if keep_free > 0 || background {
            if let Ok((free, usable_total)) = reserve::free_space(&self.file) {
                if background {
                    keep_free = keep_free.max(usable_total / 100 * self.policy.background_free_percent());
                    let held = free < (to - from) as u64 + keep_free;
                    self.policy.note_background_held(held, &self.path, free, usable_total);
                }
                if free < (to - from) as u64 + keep_free {
                    to = need.max(from);
                    if to == from {
                        return Ok(());
                    }
                    if free < (to - from) as u64 + keep_free {
                        return Err(reserve::storage_full(
                            &self.path,
                            (to - from) as u64,
                            Some(free),
                            &io::Error::other(format!("{keep_free} bytes are kept free for consume queues and index")),
                        ));
                    }
                }
            }
        }
        let reserved = match self.reserve_range(from, to) {
            // No room for the step: what the write needs may still fit.
            Err(e) if reserve::is_no_space(&e) && need > from && need < to => {
                self.reserve_range(from, need).map(|()| need).map_err(|_| e)
            }
            other => other.map(|()| to),
        }?;
        self.reserved.store(reserved, Ordering::Release);
        Ok(())
    }

    /// Allocates `[from, to)`, as the policy says. The caller holds `reserve_lock`.
    fn reserve_range(&self, from: usize, to: usize) -> io::Result<()> {
        if self.policy.zero_fill.load(Ordering::Relaxed) {
            // Zeros only past anything a file of an earlier run may hold (the page holding its
            // end may be part data); `fallocate` there, which changes no byte.
            let data_end = self.readable.load(Ordering::Acquire).clamp(from, to);
            reserve::reserve(&self.file, &self.path, from as u64, (data_end - from) as u64)?;
            reserve::reserve_zeroed(&self.file, &self.path, data_end as u64, (to - data_end) as u64)
        } else {
            reserve::reserve(&self.file, &self.path, from as u64, (to - from) as u64)
        }
    }

    /// The file's length on disk when it was opened (before any extension).
    pub fn loaded_len(&self) -> usize {
        self.loaded_len
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queue offset of the first byte.
    pub fn file_from_offset(&self) -> i64 {
        self.file_from_offset
    }

    /// Segment size in bytes.
    pub fn file_size(&self) -> usize {
        self.file_size
    }

    /// Bytes appended so far (possibly not yet committed to the mapping).
    pub fn wrote_position(&self) -> usize {
        self.wrote_position.load(Ordering::Acquire)
    }

    /// Bytes in the file mapping, visible to readers.
    pub fn committed_position(&self) -> usize {
        self.committed_position.load(Ordering::Acquire)
    }

    /// Bytes known to be on disk.
    pub fn flushed_position(&self) -> usize {
        self.flushed_position.load(Ordering::Acquire)
    }

    /// Free bytes after the write position.
    pub fn remaining(&self) -> usize {
        self.file_size - self.wrote_position()
    }

    /// Whether nothing more may be appended.
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire) || self.wrote_position() == self.file_size
    }

    /// Marks the file full (after its end-of-file blank).
    pub fn mark_full(&self) {
        self.full.store(true, Ordering::Release);
    }

    /// Appends `bytes` at the write position and publishes them to readers (or, with a
    /// transient buffer, to the next `commit`).
    ///
    /// Callers serialize appends (one writer per queue).
    ///
    /// # Panics
    /// If `bytes` does not fit; callers check [`remaining`](Self::remaining) first, so this is
    /// a broken invariant, not an operating condition.
    ///
    /// # Errors
    /// [`AppendPath::WriteCall`] only: staging was full and writing it out failed; the write
    /// position is unchanged and the file past the committed position may hold part of the
    /// staged bytes.
    pub fn append(&self, bytes: &[u8]) -> io::Result<()> {
        self.append_inner(bytes, false)
    }

    /// Appends one or more records so that the first record's leading 4 bytes (its TOTALSIZE)
    /// land last. The file beyond the write position is zero, so if the process dies in the
    /// middle of the copy, recovery finds a zero size where the record starts and treats it as
    /// the end of the data: a torn record can never pass for a whole one.
    ///
    /// # Errors
    /// As [`append`](Self::append).
    ///
    /// # Panics
    /// As [`append`](Self::append).
    pub fn append_size_last(&self, bytes: &[u8]) -> io::Result<()> {
        self.append_inner(bytes, true)
    }

    /// How appends reach the file.
    pub fn append_path(&self) -> AppendPath {
        self.append_path.load()
    }

    /// Chooses how appends reach the file. Callers serialize this with appends.
    pub fn set_append_path(&self, path: AppendPath) {
        self.append_path.store(path);
    }

    fn append_inner(&self, bytes: &[u8], size_last: bool) -> io::Result<()> {
        let pos = self.wrote_position.load(Ordering::Acquire);
        assert!(pos + bytes.len() <= self.file_size, "append past the end of {}", self.path.display());
        // Before anything is written, by either path: a hole touched through the mapping
        // could kill the process, and a write call into it could fail half done.
        self.ensure_reserved(pos + bytes.len())?;
        let buffer = self.write_buffer.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if buffer.is_none() && self.append_path() == AppendPath::WriteCall {
            // Whether `size_last` or not, a commit writes its run's first 4 bytes last, and a
            // run starts where an append started.
            let mut staged = lock(&self.staged);
            if !staged.is_empty() && staged.len() + bytes.len() > STAGED_LIMIT_BYTES {
                drop(staged);
                self.commit_staged()?;
                staged = lock(&self.staged);
            }
            staged.extend_from_slice(bytes);
            self.wrote_position.store(pos + bytes.len(), Ordering::Release);
            return Ok(());
        }
        let dst = match &buffer {
            Some(b) => b.map.as_mut_ptr(),
            None => self.inner.map.as_mut_ptr(),
        };
        // SAFETY: [pos, pos + len) is inside the mapping or buffer (both file_size long;
        // asserted above) and at or above the write position, so no reader or commit touches
        // it; appends are serialized by the caller.
        unsafe {
            if size_last {
                copy_size_last(bytes.as_ptr(), dst.add(pos), bytes.len());
            } else {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.add(pos), bytes.len());
            }
        }
        self.wrote_position.store(pos + bytes.len(), Ordering::Release);
        if buffer.is_none() {
            self.committed_position.store(pos + bytes.len(), Ordering::Release);
        }
        Ok(())
    }

    /// `pwrite`s `bytes` at `pos`. The kernel copies a write page by page and a killed process
    /// stops between pages, so a write inside one page lands whole or not at all; one crossing
    /// a page boundary is split so that its leading 4 bytes are written last (see
    /// [`append_size_last`](Self::append_size_last)).
    fn write_at(&self, bytes: &[u8], pos: usize) -> io::Result<()> {
        let crosses_page = bytes.len() > 4 && pos / OS_PAGE_SIZE != (pos + bytes.len() - 1) / OS_PAGE_SIZE;
        if crosses_page {
            self.file.write_all_at(&bytes[4..], (pos + 4) as u64)?;
            self.file.write_all_at(&bytes[..4], pos as u64)
        } else {
            self.file.write_all_at(bytes, pos as u64)
        }
    }

    /// Gives the file a transient-pool buffer to take its appends. Only for a file nothing has
    /// been appended to yet; returns the buffer back otherwise.
    pub fn attach_buffer(&self, buffer: Arc<TransientBuffer>) -> Result<(), Arc<TransientBuffer>> {
        if self.wrote_position() != 0 || buffer.map.len() < self.file_size {
            return Err(buffer);
        }
        *self.write_buffer.lock().unwrap_or_else(|e| e.into_inner()) = Some(buffer);
        Ok(())
    }

    /// Copies appended bytes from the transient buffer into the file mapping, making them
    /// visible to readers. Returns the buffer once the file is full and fully committed, for
    /// the pool to reuse. Java: `DefaultMappedFile#commit`.
    pub fn commit(&self) -> Option<Arc<TransientBuffer>> {
        let mut slot = self.write_buffer.lock().unwrap_or_else(|e| e.into_inner());
        let buffer = slot.as_ref()?.clone();
        let wrote = self.wrote_position();
        let committed = self.committed_position();
        if wrote > committed {
            // SAFETY: [committed, wrote) of the buffer is below the write position (the writer
            // does not touch it again) and [committed, wrote) of the mapping is above the
            // committed position (no reader sees it yet); only this call copies it, under the
            // buffer lock.
            unsafe {
                copy_size_last(
                    buffer.map.as_ptr().add(committed),
                    self.inner.map.as_mut_ptr().add(committed),
                    wrote - committed,
                );
            }
            self.committed_position.store(wrote, Ordering::Release);
        }
        if self.is_full() && self.committed_position() == self.wrote_position() {
            return slot.take();
        }
        None
    }

    /// Writes the staged appends ([`AppendPath::WriteCall`]) to the file with one `pwrite`
    /// (split so the run's leading 4 bytes land last when it crosses a page) and makes them
    /// visible to readers. Returns the bytes written.
    ///
    /// # Errors
    /// The write failed: the bytes stay staged and uncommitted (the caller poisons the log).
    pub fn commit_staged(&self) -> io::Result<usize> {
        let mut spare = lock(&self.spare);
        {
            let mut staged = lock(&self.staged);
            if staged.is_empty() {
                return Ok(0);
            }
            std::mem::swap(&mut *staged, &mut *spare);
        }
        // Appends move the write position and the staged bytes together under the staging
        // lock and commits are serialized by `spare`'s, so the run starts at the committed
        // position.
        let start = self.committed_position();
        let len = spare.len();
        if let Err(e) = self.write_at(&spare, start) {
            let mut staged = lock(&self.staged);
            spare.extend_from_slice(&staged);
            std::mem::swap(&mut *staged, &mut *spare);
            spare.clear();
            return Err(e);
        }
        self.committed_position.store(start + len, Ordering::Release);
        spare.clear();
        if self.is_full() {
            let mut staged = lock(&self.staged);
            if staged.is_empty() {
                // Nothing appends to a full file again: give the staging memory back.
                *spare = Vec::new();
                *staged = Vec::new();
            }
        }
        Ok(len)
    }

    /// Whether a transient buffer is attached (appends may be uncommitted).
    pub fn holds_buffer(&self) -> bool {
        self.write_buffer.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Whether appends wait for a commit (in a transient buffer or staged).
    pub fn has_uncommitted(&self) -> bool {
        self.committed_position() < self.wrote_position()
    }

    /// A zero-copy slice of written bytes, or `None` if the range is not fully written.
    pub fn slice(&self, pos: usize, len: usize) -> Option<Bytes> {
        let end = pos.checked_add(len)?;
        // A segment loaded from disk counts as committed to its end; past its first hole it
        // holds nothing, and reading a hole through the mapping could fault (see `Inner`).
        if end > self.committed_position().min(self.readable()) {
            return None;
        }
        Some(Bytes::from_owner(Window { inner: self.inner.clone(), start: pos, len }))
    }

    /// A zero-copy slice of a sealed file's bytes past its write position: the unused space
    /// after the end-of-file blank marker, which replication ships as part of the segment.
    /// `None` unless the file is full and fully committed (nothing writes it any more) and
    /// `[pos, pos + len)` lies inside the file.
    ///
    /// Past the allocated part (the unused tail was never written, so it is a hole) the
    /// answer is zeros that do not touch the mapping, possibly shorter than asked: the caller
    /// asks again from where it ends.
    pub fn slice_sealed(&self, pos: usize, len: usize) -> Option<Bytes> {
        let end = pos.checked_add(len)?;
        if end > self.file_size || !self.is_full() || self.committed_position() != self.wrote_position() {
            return None;
        }
        let readable = self.readable();
        if pos >= readable {
            return Some(Bytes::from_static(&ZEROS[..len.min(ZEROS.len())]));
        }
        let len = end.min(readable) - pos;
        Some(Bytes::from_owner(Window { inner: self.inner.clone(), start: pos, len }))
    }

    /// Reads written bytes into a borrowed view for the duration of `f` (no allocation).
    pub fn with_bytes<R>(&self, pos: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let end = pos.checked_add(len)?;
        if end > self.committed_position().min(self.readable()) {
            return None;
        }
        let window = Window { inner: self.inner.clone(), start: pos, len };
        Some(f(window.as_ref()))
    }

    /// Reads any bytes of the file, written or not: used by recovery before the write position
    /// is known, when no writer exists. Bytes past the allocated prefix are read with a
    /// write call's counterpart (`pread`), never through the mapping.
    pub fn with_raw<R>(&self, pos: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let end = pos.checked_add(len)?;
        if end > self.file_size {
            return None;
        }
        if end <= self.readable() {
            let window = Window { inner: self.inner.clone(), start: pos, len };
            return Some(f(window.as_ref()));
        }
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, pos as u64).ok()?;
        Some(f(&buf))
    }

    /// As [`with_raw`](Self::with_raw) from `pos`, but only over the allocated prefix (an
    /// empty slice when `pos` is past it): for scans that stop at the first zeros, which is
    /// what the rest of the file reads as, so they find the same end without reading it.
    pub fn with_allocated<R>(&self, pos: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let end = pos.checked_add(len)?.min(self.readable()).max(pos);
        self.with_raw(pos, end - pos, f)
    }

    /// Forces written-but-unflushed bytes to disk. Returns the new flushed position.
    ///
    /// # Errors
    /// The `msync` failure; the flushed position is then unchanged.
    pub fn flush(&self) -> io::Result<usize> {
        let wrote = self.committed_position();
        let flushed = self.flushed_position();
        if wrote > flushed {
            self.inner.map.flush_range(flushed, wrote - flushed)?;
            self.flushed_position.store(wrote, Ordering::Release);
        }
        Ok(wrote)
    }

    /// Pages written but not yet flushed.
    pub fn dirty_pages(&self) -> usize {
        (self.committed_position() / OS_PAGE_SIZE).saturating_sub(self.flushed_position() / OS_PAGE_SIZE)
    }

    /// Sets the write and flush positions (recovery). `full` is derived by the caller.
    pub fn set_positions(&self, pos: usize) {
        let pos = pos.min(self.file_size);
        lock(&self.staged).clear();
        self.wrote_position.store(pos, Ordering::Release);
        self.committed_position.store(pos, Ordering::Release);
        self.flushed_position.store(pos, Ordering::Release);
        self.full.store(false, Ordering::Release);
    }

    /// Zeros `[pos, end of file)` so stale bytes past a truncation point can never be read as
    /// records again. Recovery only: no reader or writer may be active. The range is punched
    /// out (`FALLOC_FL_PUNCH_HOLE`: whole blocks given back, a partial block zeroed in place),
    /// so nothing past `pos` is touched through the mapping or newly allocated; where holes
    /// cannot be punched, what may hold data is overwritten with zeros by write calls.
    pub fn zero_from(&self, pos: usize) -> io::Result<()> {
        if pos >= self.file_size {
            return Ok(());
        }
        let _guard = self.reserve_lock.lock().unwrap_or_else(|e| e.into_inner());
        if reserve::punch_hole(&self.file, pos as u64, (self.file_size - pos) as u64)? {
            // The page holding `pos` may have lost blocks: reserve it again before writing.
            let page_start = pos - pos % OS_PAGE_SIZE;
            self.reserved.fetch_min(page_start, Ordering::AcqRel);
            self.readable.store(page_up(pos).min(self.file_size), Ordering::Release);
        } else {
            let end = self.readable().max(pos);
            reserve::write_zeros(&self.file, pos as u64, (end - pos) as u64)?;
        }
        self.file.sync_data()
    }

    /// Writes zeros over the whole file and forces them to disk (`warmMapedFileEnable`), so
    /// its blocks are allocated and written before any record arrives: a later flush then
    /// writes data only, with no block allocation and so no inode update to force as well.
    /// Only for a file not yet in service (it would overwrite appended bytes).
    ///
    /// # Errors
    /// The write or the sync failed (`StorageFull` when the disk has no room); the caller
    /// deletes the half-written file.
    pub fn write_zeros(&self) -> io::Result<()> {
        let _guard = self.reserve_lock.lock().unwrap_or_else(|e| e.into_inner());
        reserve::reserve_zeroed(&self.file, &self.path, 0, self.file_size as u64)?;
        self.reserved.store(self.file_size, Ordering::Release);
        Ok(())
    }

    /// Pre-faults the reserved pages of a fresh file so the first appends do not pay page
    /// faults (the whole file when zero-filled by `warmMapedFileEnable`, else one reservation
    /// step). Only for a file not yet in service.
    pub fn pretouch(&self) {
        if self.prefault(0).is_ok() {
            return;
        }
        // Kernels without MADV_POPULATE_*: touch a byte per page instead (a read when write
        // calls fill the file, so the pages stay mapped read-only).
        let write = self.append_path() == AppendPath::Mapping;
        let mut pos = 0;
        let end = self.reserved();
        while pos < end {
            // SAFETY: the file is not in service yet (it is being prepared for a later roll),
            // so no reader or writer touches it; writing a zero leaves its content unchanged.
            // The page is below the reserved end, so its block exists.
            unsafe {
                let p = self.inner.map.as_mut_ptr().add(pos);
                if write {
                    std::ptr::write_volatile(p, 0);
                } else {
                    std::ptr::read_volatile(p);
                }
            }
            pos += OS_PAGE_SIZE;
        }
    }

    /// Pre-faults the reserved pages from `from` on: allocates their page-cache pages ahead of
    /// the writer without touching their content, so it is safe while the file is in
    /// service. Works in 1 MiB steps, and never past the reserved end (see
    /// [`crate::reserve`]): the window faulted in is bounded by the reservation step.
    ///
    /// With [`AppendPath::Mapping`] the pages are mapped writable (`MADV_POPULATE_WRITE`).
    /// With [`AppendPath::WriteCall`] they are mapped read-only (`MADV_POPULATE_READ`), so a
    /// flush has no writable mapping to write-protect again, and in single pages (readahead
    /// is off while populating): otherwise the kernel may build large folios, and every small
    /// write and every flush then walks all the blocks of a large folio.
    ///
    /// # Errors
    /// The kernel does not support the advice (Linux < 5.14), or the mapping failed.
    pub fn prefault(&self, from: usize) -> io::Result<()> {
        // Each call holds the process's mmap lock for its range: small steps let another
        // thread map a file (a new consume queue) in between.
        const STEP: usize = 1024 * 1024;
        let end = self.reserved();
        let mut pos = from - from % OS_PAGE_SIZE;
        if pos >= end {
            return Ok(());
        }
        let write_call = self.append_path() == AppendPath::WriteCall;
        if write_call {
            self.inner.map.advise(memmap2::Advice::Random)?;
        }
        let advice = if write_call { memmap2::Advice::PopulateRead } else { memmap2::Advice::PopulateWrite };
        let mut result = Ok(());
        while pos < end {
            let len = STEP.min(end - pos);
            result = self.inner.map.advise_range(advice, pos, len);
            if result.is_err() {
                break;
            }
            pos += len;
        }
        if write_call {
            // Readers of the file get readahead back.
            self.inner.map.advise(memmap2::Advice::Normal)?;
        }
        result
    }

    /// Deletes the file from disk; slices already handed out stay readable until dropped.
    ///
    /// # Errors
    /// The unlink failure.
    pub fn destroy(&self) -> io::Result<()> {
        std::fs::remove_file(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn background_reservations_stop_ten_points_before_the_disk_guard() {
        assert_eq!(background_free_percent(90), 20, "Java's default warning ratio");
        assert_eq!(background_free_percent(35), 75);
        assert_eq!(background_free_percent(100), 10);
        assert_eq!(background_free_percent(0), 100);
    }

    #[test]
    fn appends_are_readable_as_slices_that_outlive_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = MappedFile::open(dir.path(), 4096, 8192).unwrap();
        assert_eq!(f.path().file_name().unwrap(), "00000000000000004096");
        f.append(b"hello").unwrap();
        f.append(b" world").unwrap();
        assert_eq!(f.wrote_position(), 11);
        assert!(f.slice(0, 12).is_none(), "unwritten bytes are not readable");
        let s = f.slice(6, 5).unwrap();
        assert_eq!(&s[..], b"world");
        assert_eq!(f.dirty_pages(), 0);
        f.flush().unwrap();
        assert_eq!(f.flushed_position(), 11);
        f.destroy().unwrap();
        drop(f);
        assert_eq!(&s[..], b"world");
    }

    #[test]
    fn write_call_appends_are_staged_until_committed_then_land_in_the_file_and_the_mapping() {
        let dir = tempfile::tempdir().unwrap();
        let f = MappedFile::open(dir.path(), 0, 3 * OS_PAGE_SIZE).unwrap();
        f.set_append_path(AppendPath::WriteCall);
        f.prefault(0).unwrap();
        // One record inside the first page, committed alone; then one crossing into the second
        // page (the run is split, size last) and a plain append, committed together.
        let first: Vec<u8> = (0..100u32).map(|i| i as u8).collect();
        let crossing: Vec<u8> = (0..OS_PAGE_SIZE as u32).map(|i| (i % 251) as u8 + 1).collect();
        f.append_size_last(&first).unwrap();
        assert!(f.slice(0, first.len()).is_none(), "staged bytes are not readable");
        assert!(f.has_uncommitted());
        assert_eq!(f.commit_staged().unwrap(), first.len());
        assert_eq!(f.commit_staged().unwrap(), 0, "nothing left");
        f.append_size_last(&crossing).unwrap();
        f.append(b"tail").unwrap();
        let end = first.len() + crossing.len() + 4;
        assert_eq!(f.wrote_position(), end);
        assert_eq!(f.committed_position(), first.len());
        assert_eq!(f.commit_staged().unwrap(), crossing.len() + 4);
        assert_eq!(f.committed_position(), end);
        assert!(!f.has_uncommitted());
        assert_eq!(&f.slice(0, first.len()).unwrap()[..], &first[..]);
        assert_eq!(&f.slice(first.len(), crossing.len()).unwrap()[..], &crossing[..]);
        assert_eq!(&f.slice(end - 4, 4).unwrap()[..], b"tail");
        assert_eq!(f.flush().unwrap(), end);
        let on_disk = std::fs::read(f.path()).unwrap();
        assert_eq!(&on_disk[first.len()..first.len() + crossing.len()], &crossing[..]);
        assert!(on_disk[end..].iter().all(|&b| b == 0), "nothing written past the write position");
    }

    #[test]
    fn staging_is_bounded_by_writing_it_out_in_the_appender() {
        let dir = tempfile::tempdir().unwrap();
        let f = MappedFile::open(dir.path(), 0, 4 * STAGED_LIMIT_BYTES).unwrap();
        f.set_append_path(AppendPath::WriteCall);
        let chunk = vec![7u8; STAGED_LIMIT_BYTES / 2 + 1];
        f.append(&chunk).unwrap();
        assert_eq!(f.committed_position(), 0);
        f.append(&chunk).unwrap();
        assert_eq!(f.committed_position(), chunk.len(), "the first chunk was written to make room");
        assert_eq!(f.wrote_position(), 2 * chunk.len());
        assert_eq!(f.commit_staged().unwrap(), chunk.len());
        assert_eq!(&f.slice(chunk.len(), 3).unwrap()[..], &[7, 7, 7]);
    }

    #[test]
    fn a_failed_commit_keeps_the_bytes_staged_and_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let f = MappedFile::open(dir.path(), 0, OS_PAGE_SIZE).unwrap();
        f.set_append_path(AppendPath::WriteCall);
        f.append(b"kept").unwrap();
        f.commit_staged().unwrap();
        // A read-only descriptor in place of the file makes the next write fail.
        let ro = OpenOptions::new().read(true).open(f.path()).unwrap();
        let f = MappedFile { file: ro, ..f };
        f.append(b"lost").unwrap();
        assert!(f.commit_staged().is_err());
        assert_eq!(f.wrote_position(), 8);
        assert_eq!(f.committed_position(), 4);
        assert!(f.has_uncommitted(), "still staged");
        assert_eq!(&f.slice(0, 4).unwrap()[..], b"kept");
        assert!(f.slice(0, 8).is_none());
    }

    #[test]
    fn blocks_are_reserved_in_a_window_ahead_of_the_writer() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let step = 64 * 1024;
        let f = MappedFile::open_with(dir.path(), 0, 1 << 20, Arc::new(ReservePolicy::new(step))).unwrap();
        assert_eq!(f.reserved(), 0, "opening reserves nothing");
        f.append(&[7u8; 100]).unwrap();
        assert!(f.reserved() >= 100 && f.reserved() <= 100 + step + OS_PAGE_SIZE, "{}", f.reserved());
        assert!(f.reserve_ahead().is_ok());
        let allocated = std::fs::metadata(f.path()).unwrap().blocks() * 512;
        assert!(allocated < 1 << 20, "a window, not the whole segment: {allocated} bytes allocated");
    }

    /// A disk fuller than the background share holds reservations ahead back (appends then
    /// reserve their own), and the policy says so while it lasts.
    #[test]
    fn background_reservations_held_back_by_the_disk_fill_are_noted_and_resume() {
        let dir = tempfile::tempdir().unwrap();
        let policy = Arc::new(ReservePolicy::new(64 * 1024));
        let f = MappedFile::open_with(dir.path(), 0, 1 << 20, policy.clone()).unwrap();
        f.append(&[7u8; 100]).unwrap();
        // Writes up to just short of what is reserved, so the next reservation is ahead.
        let fill = |f: &MappedFile| f.append(&vec![7u8; f.reserved() - f.wrote_position() - 100]).unwrap();
        // No disk has 100 % free: everything ahead is held back.
        policy.set_background_free_percent(100);
        fill(&f);
        let reserved = f.reserved();
        assert!(!f.reserve_ahead().unwrap(), "nothing reserved ahead");
        assert_eq!(f.reserved(), reserved);
        assert!(policy.background_held(), "held back, and noted");
        f.append(&[7u8; 1000]).unwrap();
        assert!(f.reserved() > reserved, "the append reserved its own blocks");
        policy.set_background_free_percent(0);
        fill(&f);
        assert!(f.reserve_ahead().unwrap());
        assert!(!policy.background_held(), "resumed");
    }

    #[test]
    fn zero_filled_reservations_never_overwrite_what_an_earlier_run_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(offset_to_file_name(0));
        // An earlier run's data ending inside a page.
        let earlier: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8 + 1).collect();
        std::fs::write(&path, &earlier).unwrap();
        let policy = Arc::new(ReservePolicy::new(64 * 1024));
        policy.set_zero_fill(true);
        let f = MappedFile::open_with(dir.path(), 0, 1 << 20, policy).unwrap();
        assert!(f.readable() >= earlier.len(), "the partial page is readable: {}", f.readable());
        assert!(f.with_allocated(0, 1 << 20, |b| b.len()).unwrap() >= earlier.len());
        f.set_positions(earlier.len());
        f.append(b"next").unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(&on_disk[..earlier.len()], &earlier[..]);
        assert_eq!(&on_disk[earlier.len()..earlier.len() + 4], b"next");
    }

    #[test]
    fn short_file_is_extended_and_larger_file_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(offset_to_file_name(0)), b"abc").unwrap();
        let f = MappedFile::open(dir.path(), 0, 1024).unwrap();
        assert_eq!(std::fs::metadata(f.path()).unwrap().len(), 1024);
        assert_eq!(f.with_raw(0, 4, <[u8]>::to_vec).unwrap(), b"abc\0");
        drop(f);
        assert!(MappedFile::open(dir.path(), 0, 512).is_err());
    }
}
