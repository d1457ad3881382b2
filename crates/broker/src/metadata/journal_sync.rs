//! Group fsync of a journal: appends return once written (in the page cache, so they survive
//! the process being killed), and one background thread makes them durable, each fdatasync
//! covering every append made before it started. Appends made while a sync runs share the next
//! one, so a burst of N appends costs about two syncs, not N.
//!
//! [`SyncProgress`] is the bookkeeping, kept free of I/O so its coalescing is unit-tested;
//! [`Syncer`] runs it on a thread.

use std::fs::File;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use tracing::warn;

/// Which appends are written and which are durable, by sequence number (1 for the first
/// append; 0 means none).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct SyncProgress {
    appended: u64,
    synced: u64,
    /// The append a running sync covers, up to and including.
    in_flight: Option<u64>,
}

impl SyncProgress {
    /// Records one more append; returns its sequence number.
    pub(crate) fn on_append(&mut self) -> u64 {
        self.appended += 1;
        self.appended
    }

    /// Starts a sync if appends wait for one and none runs: returns the last append it covers.
    pub(crate) fn start(&mut self) -> Option<u64> {
        if self.in_flight.is_some() || self.appended == self.synced {
            return None;
        }
        self.in_flight = Some(self.appended);
        self.in_flight
    }

    /// The sync started by [`SyncProgress::start`] finished; `ok` is false if it failed, and
    /// then its appends stay waiting (the next one retries).
    pub(crate) fn finish(&mut self, ok: bool) {
        if let Some(upto) = self.in_flight.take() {
            if ok {
                self.synced = self.synced.max(upto);
            }
        }
    }

    /// True once append `seq` is durable.
    pub(crate) fn is_synced(&self, seq: u64) -> bool {
        self.synced >= seq
    }
}

struct Shared {
    state: Mutex<SyncState>,
    wake: Condvar,
}

struct SyncState {
    progress: SyncProgress,
    /// The journal's current file (replaced when the journal is rewritten).
    file: Option<Arc<File>>,
    stop: bool,
}

/// The background thread syncing one journal.
pub(crate) struct Syncer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Syncer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Syncer").field("progress", &self.lock().progress).finish()
    }
}

impl Syncer {
    /// Starts the thread; `name` labels it and its log lines.
    pub(crate) fn start(name: &str) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(SyncState { progress: SyncProgress::default(), file: None, stop: false }),
            wake: Condvar::new(),
        });
        let worker = shared.clone();
        let label = name.to_owned();
        let thread = std::thread::Builder::new()
            .name(format!("{name}-sync"))
            .spawn(move || run(&worker, &label))
            .map_err(|e| warn!(journal = name, error = %e, "cannot start the journal sync thread; syncs wait for compaction"))
            .ok();
        Self { shared, thread }
    }

    /// The file appends go to from now on.
    pub(crate) fn set_file(&self, file: Arc<File>) {
        self.lock().file = Some(file);
    }

    /// Records an append to the current file and wakes the thread; returns its sequence.
    pub(crate) fn appended(&self) -> u64 {
        let seq = self.lock().progress.on_append();
        self.shared.wake.notify_all();
        seq
    }

    /// Blocks until append `seq` is durable.
    pub(crate) fn wait_synced(&self, seq: u64) {
        let mut state = self.lock();
        while !state.progress.is_synced(seq) && !state.stop && self.thread.is_some() {
            state = self.shared.wake.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn lock(&self) -> MutexGuard<'_, SyncState> {
        lock(&self.shared)
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, SyncState> {
    // The state is counters and a handle, valid after any panic.
    shared.state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn run(shared: &Shared, name: &str) {
    let mut state = lock(shared);
    loop {
        let file = state.file.clone();
        if let Some(file) = file.filter(|_| state.progress.start().is_some()) {
            drop(state);
            let result = file.sync_data();
            if let Err(e) = &result {
                // Not retried at once: after a failed fsync the page cache's state is unknown;
                // the next append or compaction (which rewrites the file) tries again.
                warn!(journal = name, error = %e, "journal fdatasync failed");
            }
            state = lock(shared);
            state.progress.finish(result.is_ok());
            shared.wake.notify_all();
            if result.is_err() {
                state = shared.wake.wait(state).unwrap_or_else(PoisonError::into_inner);
            }
            continue;
        }
        if state.stop {
            return;
        }
        state = shared.wake.wait(state).unwrap_or_else(PoisonError::into_inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_during_a_sync_share_the_next_one() {
        let mut p = SyncProgress::default();
        assert_eq!(p.start(), None, "nothing to sync");
        let first = p.on_append();
        assert_eq!(p.start(), Some(first));
        assert_eq!(p.start(), None, "one sync at a time");
        let later: Vec<u64> = (0..100).map(|_| p.on_append()).collect();
        p.finish(true);
        assert!(p.is_synced(first) && !p.is_synced(later[0]));
        assert_eq!(p.start(), Some(*later.last().unwrap()), "one sync covers all 100");
        p.finish(true);
        assert!(later.iter().all(|s| p.is_synced(*s)));
        assert_eq!(p.start(), None);
    }

    #[test]
    fn a_failed_sync_leaves_its_appends_waiting() {
        let mut p = SyncProgress::default();
        let seq = p.on_append();
        p.start();
        p.finish(false);
        assert!(!p.is_synced(seq));
        assert_eq!(p.start(), Some(seq), "retried");
        p.finish(true);
        assert!(p.is_synced(seq));
    }

    #[test]
    fn syncer_makes_appends_durable() {
        let dir = tempfile::tempdir().unwrap();
        let file = Arc::new(File::create(dir.path().join("j")).unwrap());
        let syncer = Syncer::start("test");
        syncer.set_file(file);
        let seqs: Vec<u64> = (0..10).map(|_| syncer.appended()).collect();
        syncer.wait_synced(*seqs.last().unwrap());
        assert!(syncer.lock().progress.is_synced(10));
    }
}
