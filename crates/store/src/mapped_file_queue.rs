//! A queue of contiguous segments: the CommitLog's or one ConsumeQueue's files.
//!
//! Segments are named by start offset and laid end to end. The queue finds the segment for an
//! offset, rolls to a new one when the last is full, flushes dirty segments, and truncates or
//! deletes segments. The next CommitLog segment is created and pre-touched by a background
//! thread so a roll never waits for file creation. Java: `MappedFileQueue`,
//! `AllocateMappedFileService`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;

use tracing::{debug, info};

use crate::mapped_file::{AppendPath, MappedFile, ReservePolicy, SharedAppendPath};

/// Where the segments that may hold uncommitted appends start: after the newest one that is
/// full and fully committed (commits go oldest first, so everything before it is committed).
fn uncommitted_tail_start(files: &[Arc<MappedFile>]) -> usize {
    files.iter().rposition(|f| f.is_full() && !f.has_uncommitted()).map_or(0, |i| i + 1)
}

/// Opens the segment at `from` for appending: with the queue's append path and, for a new
/// file under `warmMapedFileEnable`, zero-filled on disk first. Used for segments made on
/// demand and by the preallocator alike.
fn open_segment(
    dir: &Path,
    from: i64,
    file_size: usize,
    append_path: &SharedAppendPath,
    warm: &AtomicBool,
    policy: &Arc<ReservePolicy>,
) -> io::Result<MappedFile> {
    let file = MappedFile::open_with(dir, from, file_size, policy.clone())?;
    file.set_append_path(append_path.load());
    if warm.load(Ordering::Relaxed) && file.loaded_len() == 0 {
        if let Err(e) = file.write_zeros() {
            // Do not leave a half-written file for the next attempt (or the next start) to trip on.
            let _ = file.destroy();
            return Err(e);
        }
    }
    Ok(file)
}

/// The segments of one queue.
#[derive(Debug)]
pub struct MappedFileQueue {
    dir: PathBuf,
    file_size: usize,
    files: RwLock<Vec<Arc<MappedFile>>>,
    preallocator: Option<Preallocator>,
    /// The [`AppendPath`] of every segment; shared with the preallocator, which pre-faults
    /// new segments to suit it.
    append_path: Arc<SharedAppendPath>,
    /// Whether new segments are zero-filled on disk before use (see [`MappedFile::write_zeros`]);
    /// shared with the preallocator.
    warm: Arc<AtomicBool>,
    /// How every segment reserves its blocks (see [`crate::reserve`]); shared with the files.
    policy: Arc<ReservePolicy>,
    /// Start of the segment last asked of the preallocator (asked once each).
    next_requested: std::sync::atomic::AtomicI64,
}

impl MappedFileQueue {
    /// Opens the queue in `dir`, loading existing segments. Every loaded segment starts with
    /// its write position at its end; recovery sets the real positions.
    ///
    /// # Errors
    /// I/O errors, a file whose name is not an offset, or segments that are not contiguous.
    pub fn load(dir: &Path, file_size: usize, preallocate: bool) -> io::Result<MappedFileQueue> {
        MappedFileQueue::load_with(dir, file_size, preallocate, Arc::default())
    }

    /// As [`load`](Self::load), the segments reserving their blocks as `policy` says.
    ///
    /// # Errors
    /// As [`load`](Self::load).
    pub fn load_with(
        dir: &Path,
        file_size: usize,
        preallocate: bool,
        policy: Arc<ReservePolicy>,
    ) -> io::Result<MappedFileQueue> {
        std::fs::create_dir_all(dir)?;
        let mut names: Vec<(i64, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
                debug!(dir = %dir.display(), file = name, "ignoring non-segment file");
                continue;
            }
            let offset: i64 = name
                .parse()
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("bad segment name {name}")))?;
            names.push((offset, entry.path()));
        }
        names.sort();
        let mut files = Vec::with_capacity(names.len());
        for (i, (offset, path)) in names.iter().enumerate() {
            if offset % file_size as i64 != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} does not start on a {file_size}-byte segment boundary", path.display()),
                ));
            }
            if i > 0 && *offset != names[i - 1].0 + file_size as i64 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("segment {} does not follow {} (missing file?)", path.display(), names[i - 1].1.display()),
                ));
            }
            let f = MappedFile::open_with(dir, *offset, file_size, policy.clone())?;
            f.set_positions(file_size);
            files.push(Arc::new(f));
        }
        if !files.is_empty() {
            // One per consume queue at start: 10,000 queues would make 10,000 INFO lines (the
            // store logs totals).
            debug!(dir = %dir.display(), segments = files.len(), "segments loaded");
        }
        let append_path = Arc::new(SharedAppendPath::default());
        let warm = Arc::new(AtomicBool::new(false));
        let preallocator = preallocate
            .then(|| Preallocator::start(dir.to_owned(), file_size, append_path.clone(), warm.clone(), policy.clone()));
        Ok(MappedFileQueue {
            dir: dir.to_owned(),
            file_size,
            files: RwLock::new(files),
            preallocator,
            append_path,
            warm,
            policy,
            next_requested: std::sync::atomic::AtomicI64::new(-1),
        })
    }

    /// Chooses how appends reach every segment, present and future (see [`AppendPath`]).
    /// Callers serialize this with appends (set it before the queue is in service).
    pub fn set_append_path(&self, path: AppendPath) {
        self.append_path.store(path);
        for f in self.files().iter() {
            f.set_append_path(path);
        }
    }

    /// Zero-fills every segment created from now on before it is used (`warmMapedFileEnable`).
    /// A segment created on demand (the first one, or when the next was not prepared in time)
    /// is filled before the append that needs it.
    pub fn set_warm(&self, warm: bool) {
        self.warm.store(warm, Ordering::Relaxed);
    }

    /// Reserves (and pre-faults) the next step of `file` in the background when it has less
    /// than half a step reserved ahead of its writer; inline appends then rarely reserve.
    /// Without a preallocator thread this does nothing (appends reserve as they go).
    pub fn reserve_ahead(&self, file: &Arc<MappedFile>) {
        if let Some(p) = &self.preallocator {
            if file.wants_reserve_ahead() {
                p.prefault(file.clone());
            }
            if file.remaining() < 2 * self.policy.step() {
                self.request_next(p, file.file_from_offset());
            }
        }
    }

    /// Asks the preallocator for the segment after the one at `from`, once.
    fn request_next(&self, p: &Preallocator, from: i64) {
        let next = from + self.file_size as i64;
        if self.next_requested.swap(next, Ordering::AcqRel) != next {
            p.request(next);
        }
    }

    pub(crate) fn append_path(&self) -> AppendPath {
        self.append_path.load()
    }

    fn files(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<MappedFile>>> {
        // The vector is only ever pushed to, truncated or drained whole; a panic elsewhere
        // cannot leave it half-updated.
        self.files.read().unwrap_or_else(|e| e.into_inner())
    }

    fn files_mut(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Arc<MappedFile>>> {
        self.files.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Segment size.
    pub fn file_size(&self) -> usize {
        self.file_size
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A snapshot of the segments, oldest first.
    pub fn segments(&self) -> Vec<Arc<MappedFile>> {
        self.files().clone()
    }

    /// The newest segment.
    pub fn last(&self) -> Option<Arc<MappedFile>> {
        self.files().last().cloned()
    }

    /// The oldest segment.
    pub fn first(&self) -> Option<Arc<MappedFile>> {
        self.files().first().cloned()
    }

    /// The segment to append to: the last one unless it is full, else a new one after it
    /// (or at `start_offset` rounded down to a segment boundary when the queue is empty).
    ///
    /// # Errors
    /// Creating the segment failed.
    pub fn last_or_create(&self, start_offset: i64) -> io::Result<Arc<MappedFile>> {
        if let Some(last) = self.last() {
            if !last.is_full() {
                return Ok(last);
            }
        }
        let mut files = self.files_mut();
        if let Some(last) = files.last() {
            if !last.is_full() {
                return Ok(last.clone());
            }
        }
        let from = match files.last() {
            Some(last) => last.file_from_offset() + self.file_size as i64,
            None => start_offset - start_offset.rem_euclid(self.file_size as i64),
        };
        let file = match self.preallocator.as_ref().and_then(|p| p.take(from)) {
            Some(prepared) => prepared?,
            None => {
                let file = Arc::new(open_segment(
                    &self.dir,
                    from,
                    self.file_size,
                    &self.append_path,
                    &self.warm,
                    &self.policy,
                )?);
                // Not prepared in advance (the first segment): fault its pages in the
                // background, ahead of the writer.
                if let Some(p) = &self.preallocator {
                    p.prefault(file.clone());
                }
                file
            }
        };
        // The next segment is prepared once this one nears its end (`reserve_ahead`), not
        // now: its reservation and pre-faulting would compete with the first appends and
        // their dispatch, and a segment that is never filled needs no successor. A segment
        // of a few steps asks at once.
        if let Some(p) = &self.preallocator {
            if self.file_size <= 2 * self.policy.step() {
                self.request_next(p, from);
            }
        }
        debug!(file = %file.path().display(), "new segment");
        files.push(file.clone());
        Ok(file)
    }

    /// Faults in the unwritten pages of the newest segment in the background (after recovery,
    /// so the first appends of a restarted broker do not pay page faults).
    pub fn prefault_last(&self) {
        if let (Some(p), Some(last)) = (&self.preallocator, self.last()) {
            if !last.is_full() {
                p.prefault(last);
            }
        }
    }

    /// The segment holding `offset`, if any.
    pub fn find(&self, offset: i64) -> Option<Arc<MappedFile>> {
        let files = self.files();
        let first = files.first()?.file_from_offset();
        if offset < first {
            return None;
        }
        let index = ((offset - first) / self.file_size as i64) as usize;
        files.get(index).cloned()
    }

    /// Offset of the first byte still stored.
    pub fn min_offset(&self) -> i64 {
        self.first().map_or(0, |f| f.file_from_offset())
    }

    /// Offset just past the last written byte.
    pub fn max_offset(&self) -> i64 {
        self.last().map_or(0, |f| f.file_from_offset() + f.wrote_position() as i64)
    }

    /// Offset just past the last byte readers can see (see [`MappedFile::committed_position`]):
    /// the committed end of the oldest segment still waiting for a commit (after a roll the
    /// previous segment's tail may be, while the new one has nothing), else of the last one.
    pub fn max_committed_offset(&self) -> i64 {
        let files = self.files();
        let tail = &files[uncommitted_tail_start(&files)..];
        match tail.iter().find(|f| f.has_uncommitted()).or(files.last()) {
            Some(f) => f.file_from_offset() + f.committed_position() as i64,
            None => 0,
        }
    }

    /// Writes the staged appends of every segment holding some, oldest first (see
    /// [`AppendPath::WriteCall`]). Returns whether anything was written.
    ///
    /// # Errors
    /// The first failed write; later segments are left staged.
    pub fn commit_staged(&self) -> io::Result<bool> {
        let files = self.files();
        let mut any = false;
        for f in &files[uncommitted_tail_start(&files)..] {
            any |= f.commit_staged()? > 0;
        }
        Ok(any)
    }

    /// Offset up to which bytes are on disk.
    pub fn flushed_where(&self) -> i64 {
        let files = self.files();
        // The first segment with unflushed bytes bounds the flushed prefix.
        for f in files.iter() {
            if f.flushed_position() < f.wrote_position() || f.flushed_position() < f.file_size() {
                return f.file_from_offset() + f.flushed_position() as i64;
            }
        }
        files.last().map_or(0, |f| f.file_from_offset() + f.file_size() as i64)
    }

    /// Flushes every segment with dirty bytes. Returns the flushed offset.
    ///
    /// # Errors
    /// The first `msync` failure.
    pub fn flush(&self) -> io::Result<i64> {
        let files = self.segments();
        let mut flushed = self.min_offset();
        for f in files.iter() {
            if f.flushed_position() < f.wrote_position() {
                f.flush()?;
            }
            flushed = f.file_from_offset() + f.flushed_position() as i64;
        }
        Ok(flushed)
    }

    /// Dirty pages across segments.
    pub fn dirty_pages(&self) -> usize {
        self.files().iter().map(|f| f.dirty_pages()).sum()
    }

    /// Drops everything at or after `offset`: later segments are deleted, the segment holding
    /// `offset` gets its positions set there (and, when `zero`, its tail zeroed).
    ///
    /// # Errors
    /// Deleting or zeroing failed.
    pub fn truncate(&self, offset: i64, zero: bool) -> io::Result<()> {
        let mut files = self.files_mut();
        let mut keep = files.len();
        for (i, f) in files.iter().enumerate() {
            let from = f.file_from_offset();
            if from + self.file_size as i64 <= offset {
                continue;
            }
            if from >= offset && !(from == offset && i == 0) {
                keep = keep.min(i);
                continue;
            }
            let pos = (offset - from) as usize;
            f.set_positions(pos);
            if zero {
                f.zero_from(pos)?;
            }
        }
        if keep < files.len() {
            // A segment prepared to follow the old last one would not follow the new last one
            // (and a stray file breaks the contiguity check at the next load).
            if let Some(p) = &self.preallocator {
                p.discard()?;
                self.next_requested.store(-1, Ordering::Release);
            }
        }
        for f in files.drain(keep..) {
            // Usually the empty, pre-allocated next segment; after a crash, a torn tail.
            info!(file = %f.path().display(), "removing segment past the recovered end");
            f.destroy()?;
        }
        Ok(())
    }

    /// Deletes segments whose every byte is below `offset` (retention, or a consume queue whose
    /// data was deleted). The newest segment is always kept. Returns how many were deleted.
    ///
    /// # Errors
    /// Deleting failed.
    pub fn delete_before(&self, offset: i64) -> io::Result<usize> {
        let mut files = self.files_mut();
        let mut n = 0;
        while files.len() > 1 && files[0].file_from_offset() + self.file_size as i64 <= offset {
            let f = files.remove(0);
            f.destroy()?;
            info!(file = %f.path().display(), "segment deleted");
            n += 1;
        }
        Ok(n)
    }

    /// Deletes the oldest segment (retention); the newest is never deleted.
    ///
    /// # Errors
    /// Deleting failed.
    pub fn delete_first(&self) -> io::Result<Option<Arc<MappedFile>>> {
        let mut files = self.files_mut();
        if files.len() <= 1 {
            return Ok(None);
        }
        let f = files.remove(0);
        f.destroy()?;
        info!(file = %f.path().display(), "segment deleted");
        Ok(Some(f))
    }

    /// Deletes every segment if none holds a written byte, together with any segment prepared
    /// in advance (a stray file would break the contiguity check at the next load). Returns
    /// whether the queue is empty now. A replica uses it when its only segment was created but
    /// never written and its master ships from another offset.
    ///
    /// # Errors
    /// Deleting failed.
    pub fn clear_if_empty(&self) -> io::Result<bool> {
        let mut files = self.files_mut();
        if files.iter().any(|f| f.wrote_position() > 0) {
            return Ok(false);
        }
        if let Some(p) = &self.preallocator {
            p.discard()?;
            self.next_requested.store(-1, Ordering::Release);
        }
        for f in files.drain(..) {
            info!(file = %f.path().display(), "removing empty segment");
            f.destroy()?;
        }
        Ok(true)
    }

    /// Deletes every segment and the directory's segment files.
    ///
    /// # Errors
    /// Deleting failed.
    pub fn destroy(&self) -> io::Result<()> {
        let mut files = self.files_mut();
        for f in files.drain(..) {
            f.destroy()?;
        }
        Ok(())
    }
}

/// How long the preallocator stops taking prefault requests after a pass that could reserve
/// nothing ahead of the writer.
const PREFAULT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(200);

/// Creates and pre-touches the next segment on its own thread.
#[derive(Debug)]
struct Preallocator {
    shared: Arc<(Mutex<PreState>, Condvar)>,
    /// A prefault is asked for and not yet done. Appends ask on every put while the space
    /// ahead of them is short, and the worker takes a while (it reserves and faults a whole
    /// step): without this flag each of those puts would take the lock and make a wake-up
    /// system call.
    prefault_pending: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct PreState {
    requested: Option<i64>,
    /// An in-service segment whose pages should be faulted in ahead of the writer.
    prefault: Option<Arc<MappedFile>>,
    in_progress: Option<i64>,
    ready: Option<(i64, io::Result<Arc<MappedFile>>)>,
    stop: bool,
}

impl Preallocator {
    fn start(
        dir: PathBuf,
        file_size: usize,
        append_path: Arc<SharedAppendPath>,
        warm: Arc<AtomicBool>,
        policy: Arc<ReservePolicy>,
    ) -> Preallocator {
        let shared: Arc<(Mutex<PreState>, Condvar)> = Arc::default();
        let worker = shared.clone();
        let prefault_pending = Arc::new(AtomicBool::new(false));
        let pending = prefault_pending.clone();
        let thread = std::thread::Builder::new()
            .name("segment-prealloc".into())
            .spawn(move || {
                let (lock, cv) = &*worker;
                // After a pass that could not reserve (the disk's free space is below what
                // background reservations leave), puts are not heard again until then.
                let mut backoff_until: Option<std::time::Instant> = None;
                loop {
                    let from = {
                        let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
                        loop {
                            if st.stop {
                                return;
                            }
                            if backoff_until.is_some_and(|t| t <= std::time::Instant::now()) {
                                backoff_until = None;
                                pending.store(false, Ordering::Release);
                            }
                            if let Some(file) = st.prefault.take() {
                                drop(st);
                                // A failure here is left to the appender, which reserves what
                                // it needs inline and reports the error to the put.
                                let reserved = match file.reserve_ahead() {
                                    Ok(any) => any,
                                    Err(e) => {
                                        debug!(file = %file.path().display(), error = %e, "cannot reserve ahead");
                                        false
                                    }
                                };
                                if let Err(e) = file.prefault(file.wrote_position()) {
                                    debug!(error = %e, "page prefault unavailable");
                                }
                                if reserved || !file.wants_reserve_ahead() {
                                    // Done: the next put that finds the space ahead short asks
                                    // again (until then puts reserve inline what they need).
                                    pending.store(false, Ordering::Release);
                                } else {
                                    // Nothing could be reserved: every put would ask again at
                                    // once, each paying a wake-up of this thread for nothing.
                                    backoff_until = Some(std::time::Instant::now() + PREFAULT_BACKOFF);
                                }
                                st = lock.lock().unwrap_or_else(|e| e.into_inner());
                                continue;
                            }
                            if let Some(from) = st.requested.take() {
                                st.in_progress = Some(from);
                                break from;
                            }
                            st = match backoff_until {
                                Some(t) => {
                                    let wait = t.saturating_duration_since(std::time::Instant::now());
                                    cv.wait_timeout(st, wait).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0)
                                }
                                None => cv.wait(st).unwrap_or_else(|e| e.into_inner()),
                            };
                        }
                    };
                    let result = open_segment(&dir, from, file_size, &append_path, &warm, &policy).map(|f| {
                        // The first step only (the whole file is reserved when zero-filled);
                        // without room for it the segment waits, unreserved, for its appends.
                        if let Err(e) = f.reserve_ahead() {
                            debug!(file = %f.path().display(), error = %e, "next segment left unreserved");
                        }
                        f.pretouch();
                        Arc::new(f)
                    });
                    let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
                    st.in_progress = None;
                    st.ready = Some((from, result));
                    cv.notify_all();
                }
            })
            .ok();
        Preallocator { shared, prefault_pending, thread }
    }

    fn prefault(&self, file: Arc<MappedFile>) {
        if self.prefault_pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let (lock, cv) = &*self.shared;
        let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
        st.prefault = Some(file);
        cv.notify_all();
    }

    fn request(&self, from: i64) {
        let (lock, cv) = &*self.shared;
        let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
        if st.ready.as_ref().is_some_and(|(f, _)| *f == from) || st.in_progress == Some(from) {
            return;
        }
        st.requested = Some(from);
        cv.notify_all();
    }

    /// Forgets any requested segment and deletes the one prepared, waiting for one being made.
    fn discard(&self) -> io::Result<()> {
        let (lock, cv) = &*self.shared;
        let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
        st.requested = None;
        while st.in_progress.is_some() {
            st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        if let Some((_, Ok(file))) = st.ready.take() {
            file.destroy()?;
        }
        Ok(())
    }

    /// The pre-created segment at `from`, waiting for it if it is being made; `None` when it
    /// was not asked for (the caller creates it inline).
    fn take(&self, from: i64) -> Option<io::Result<Arc<MappedFile>>> {
        self.thread.as_ref()?;
        let (lock, cv) = &*self.shared;
        let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if st.ready.as_ref().is_some_and(|(f, _)| *f == from) {
                return st.ready.take().map(|(_, result)| result);
            }
            if st.in_progress == Some(from) || st.requested == Some(from) {
                st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            return None;
        }
    }
}

impl Drop for Preallocator {
    fn drop(&mut self) {
        {
            let (lock, cv) = &*self.shared;
            let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
            st.stop = true;
            cv.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
