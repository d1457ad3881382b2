//! CommitLog flushing: group commit for SYNC_FLUSH, a periodic flusher for ASYNC_FLUSH.
//!
//! Group commit: a put registers the offset its bytes end at; the flush thread takes every
//! waiting request, forces everything written so far with one `msync`, and releases all the
//! requests it covered together, so concurrent writers share each flush. A failed flush
//! poisons the CommitLog and fails its waiters; nothing is acknowledged that is not durable.
//!
//! A put that finds nobody flushing and nobody waiting flushes for itself, on its own thread
//! ([`FlushService::inline`]): alone, it would otherwise pay two thread wake-ups (the flush
//! thread's, then its own) on top of the device's flush. Puts that come while any flush runs
//! queue for the group commit as before, so under load flushes are still shared.
//! Java: `GroupCommitService`, `FlushRealTimeService`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tracing::{debug, warn};

use crate::checkpoint::Checkpoint;
use crate::commit_log::CommitLog;
use crate::config::{FlushDiskType, StoreConfig};

/// How long the group-commit thread waits for requests before looking again.
const GROUP_COMMIT_WAIT: Duration = Duration::from_millis(10);

/// A put flushes for itself only while the last flush took less than this: on a device that
/// has turned slow (or stopped), puts wait for the group commit, whose wait is bounded by
/// `syncFlushTimeout`, instead of blocking their thread for the device.
const OWN_FLUSH_MAX: Duration = Duration::from_millis(20);

/// Outcome delivered to a waiting put.
pub(crate) type FlushOutcome = bool;

struct Shared {
    requests: Mutex<Vec<(i64, oneshot::Sender<FlushOutcome>)>>,
    /// The flush thread waits for requests (guarded by `requests`' lock): only then does a
    /// request pay for a wake-up system call.
    waiting: AtomicBool,
    wake: Condvar,
    stop: AtomicBool,
    /// Test hook: the group-commit thread takes no requests, as if the disk stopped answering.
    stalled: AtomicBool,
    /// Flushes performed, for the fsyncs-per-ack figure.
    flush_count: std::sync::atomic::AtomicU64,
    /// Of those, flushes puts did for themselves.
    own_flush_count: std::sync::atomic::AtomicU64,
    /// How long the last flush took, in microseconds.
    last_flush_us: std::sync::atomic::AtomicU64,
    /// Puts the last flush answered. More than one: puts come in groups (their answers leave
    /// together, so the next ones arrive together), and the first of a group to arrive must not
    /// flush alone while the rest queue behind it.
    last_flush_puts: std::sync::atomic::AtomicUsize,
    /// Held by whoever flushes, the group-commit thread or a put flushing for itself: one
    /// flush at a time, and a put that finds it held queues for the group commit instead.
    flushing: Mutex<()>,
    commit_log: Arc<CommitLog>,
    checkpoint: Arc<Checkpoint>,
}

impl Shared {
    /// Writes what is staged and flushes everything written, the caller holding `flushing`.
    /// `None` when the CommitLog is poisoned or the flush failed (which poisons it).
    fn flush_written(&self) -> Option<i64> {
        let began = Instant::now();
        self.commit_log.commit();
        let ts = self.commit_log.last_store_timestamp();
        let flushed = if self.commit_log.is_poisoned() { None } else { self.commit_log.flush().ok() };
        let took = u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.last_flush_us.store(took, Ordering::Relaxed);
        self.flush_count.fetch_add(1, Ordering::Relaxed);
        if flushed.is_some() {
            self.checkpoint.set_physic_msg_timestamp(ts);
        }
        flushed
    }
}

/// A put's own flush (see [`FlushService::inline`]).
pub(crate) struct InlineFlush(Arc<Shared>);

impl InlineFlush {
    /// Flushes everything written so far, on this thread, unless a flush is running already
    /// (`None`: the put then queues for the group commit). `Some(None)`: the flush failed or
    /// the CommitLog is poisoned. Blocks for the device's flush: the price of sparing the
    /// wake-ups, paid only while no one else needs a flush.
    pub(crate) fn run(&self) -> Option<Option<i64>> {
        let _flushing = self.0.flushing.try_lock().ok()?;
        if self.0.stalled.load(Ordering::Acquire) {
            return None;
        }
        self.0.own_flush_count.fetch_add(1, Ordering::Relaxed);
        self.0.last_flush_puts.store(1, Ordering::Relaxed);
        Some(self.0.flush_written())
    }
}

/// The flush thread and its request queue.
pub(crate) struct FlushService {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    sync: bool,
}

impl std::fmt::Debug for FlushService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlushService").field("sync", &self.sync).finish()
    }
}

impl FlushService {
    pub(crate) fn start(
        config: &StoreConfig,
        commit_log: Arc<CommitLog>,
        checkpoint: Arc<Checkpoint>,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            requests: Mutex::new(Vec::new()),
            waiting: AtomicBool::new(false),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
            flush_count: std::sync::atomic::AtomicU64::new(0),
            own_flush_count: std::sync::atomic::AtomicU64::new(0),
            last_flush_us: std::sync::atomic::AtomicU64::new(0),
            last_flush_puts: std::sync::atomic::AtomicUsize::new(0),
            flushing: Mutex::new(()),
            commit_log: commit_log.clone(),
            checkpoint: checkpoint.clone(),
        });
        let sync = config.flush_disk_type == FlushDiskType::SyncFlush;
        let worker = shared.clone();
        let interval = Duration::from_millis(config.flush_interval_commit_log_ms.max(1));
        let least_pages = config.flush_commit_log_least_pages as usize;
        let thorough = Duration::from_millis(config.flush_commit_log_thorough_interval_ms);
        let thread = std::thread::Builder::new().name("commitlog-flush".into()).spawn(move || {
            if sync {
                group_commit_loop(&worker);
            } else {
                periodic_flush_loop(&worker, &commit_log, &checkpoint, interval, least_pages, thorough);
            }
            // Final flush at shutdown.
            commit_log.commit();
            let ts = commit_log.last_store_timestamp();
            if commit_log.flush().is_ok() {
                checkpoint.set_physic_msg_timestamp(ts);
            }
            fail_all(&worker, false);
        })?;
        Ok(FlushService { shared, thread: Some(thread), sync })
    }

    /// Whether puts wait for flushes.
    pub(crate) fn is_sync(&self) -> bool {
        self.sync
    }

    /// Registers a put whose bytes end at `next_offset`; the receiver says whether they were
    /// flushed.
    pub(crate) fn request(&self, next_offset: i64) -> oneshot::Receiver<FlushOutcome> {
        let (tx, rx) = oneshot::channel();
        let mut requests = self.shared.requests.lock().unwrap_or_else(|e| e.into_inner());
        requests.push((next_offset, tx));
        if self.shared.waiting.load(Ordering::Relaxed) {
            self.shared.wake.notify_one();
        }
        rx
    }

    /// Under SYNC_FLUSH, when no put waits for the group commit, the last flush answered one
    /// put and the device answered it quickly: a handle for a put to flush its bytes itself.
    /// `None` otherwise (or while the test stall holds), and the put queues.
    pub(crate) fn inline(&self) -> Option<InlineFlush> {
        if !self.sync || self.shared.stalled.load(Ordering::Acquire) {
            return None;
        }
        if self.shared.last_flush_us.load(Ordering::Relaxed) >= OWN_FLUSH_MAX.as_micros() as u64
            || self.shared.last_flush_puts.load(Ordering::Relaxed) > 1
        {
            return None;
        }
        if !self.shared.requests.lock().unwrap_or_else(|e| e.into_inner()).is_empty() {
            return None;
        }
        Some(InlineFlush(self.shared.clone()))
    }

    /// Wakes the flusher without waiting (a WAIT=false put under SYNC_FLUSH).
    pub(crate) fn wake(&self) {
        self.shared.wake.notify_one();
    }

    /// Test hook: stops (or resumes) taking group-commit requests.
    pub(crate) fn stall(&self, stalled: bool) {
        self.shared.stalled.store(stalled, Ordering::Release);
        self.shared.wake.notify_one();
    }

    /// Number of flushes so far.
    pub(crate) fn flush_count(&self) -> u64 {
        self.shared.flush_count.load(Ordering::Relaxed)
    }

    /// Of [`flush_count`](Self::flush_count), the flushes puts did for themselves.
    pub(crate) fn own_flush_count(&self) -> u64 {
        self.shared.own_flush_count.load(Ordering::Relaxed)
    }

    /// Stops the thread after a final flush.
    pub(crate) fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for FlushService {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn fail_all(shared: &Shared, outcome: FlushOutcome) {
    let requests = std::mem::take(&mut *shared.requests.lock().unwrap_or_else(|e| e.into_inner()));
    for (_, tx) in requests {
        let _ = tx.send(outcome);
    }
}

fn group_commit_loop(shared: &Shared) {
    let commit_log = &shared.commit_log;
    while !shared.stop.load(Ordering::Acquire) {
        if shared.stalled.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let requests = {
            let mut requests = shared.requests.lock().unwrap_or_else(|e| e.into_inner());
            if requests.is_empty() {
                shared.waiting.store(true, Ordering::Relaxed);
                requests = shared
                    .wake
                    .wait_timeout(requests, GROUP_COMMIT_WAIT)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
                shared.waiting.store(false, Ordering::Relaxed);
            }
            // Checked under the lock: a request queued after a stall began is never taken.
            if shared.stalled.load(Ordering::Acquire) {
                continue;
            }
            std::mem::take(&mut *requests)
        };
        // After a put's own flush, if one is running: one flush at a time.
        let _flushing = shared.flushing.lock().unwrap_or_else(|e| e.into_inner());
        // Staged appends (SYNC_FLUSH writes them per group, not per put) reach the file here
        // unless the dispatch thread got to them first.
        commit_log.commit();
        if requests.is_empty() && commit_log.queue().dirty_pages() == 0 {
            continue;
        }
        if !requests.is_empty() {
            shared.last_flush_puts.store(requests.len(), Ordering::Relaxed);
        }
        match shared.flush_written() {
            Some(flushed) => {
                debug!(flushed, waiters = requests.len(), "group commit");
                for (next, tx) in requests {
                    let _ = tx.send(next <= flushed);
                }
            }
            None => {
                warn!(waiters = requests.len(), "flush failed: failing waiting puts");
                for (_, tx) in requests {
                    let _ = tx.send(false);
                }
            }
        }
    }
}

fn periodic_flush_loop(
    shared: &Shared,
    commit_log: &CommitLog,
    checkpoint: &Checkpoint,
    interval: Duration,
    least_pages: usize,
    thorough: Duration,
) {
    let mut last_thorough = Instant::now();
    while !shared.stop.load(Ordering::Acquire) {
        {
            let guard = shared.requests.lock().unwrap_or_else(|e| e.into_inner());
            let _ = shared.wake.wait_timeout(guard, interval);
        }
        commit_log.commit();
        let now = Instant::now();
        let dirty = commit_log.queue().dirty_pages();
        let thorough_due = now.duration_since(last_thorough) >= thorough;
        if dirty < least_pages.max(1) && !(thorough_due && commit_log.queue().flushed_where() < commit_log.max_offset())
        {
            continue;
        }
        if thorough_due {
            last_thorough = now;
        }
        let ts = commit_log.last_store_timestamp();
        if commit_log.is_poisoned() {
            continue;
        }
        if commit_log.flush().is_ok() {
            shared.flush_count.fetch_add(1, Ordering::Relaxed);
            checkpoint.set_physic_msg_timestamp(ts);
        }
    }
}
