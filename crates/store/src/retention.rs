//! Retention: deletes old CommitLog segments, then the consume-queue segments and index files
//! that only pointed into them. Java: `DefaultMessageStore.CleanCommitLogService`,
//! `ConsumeQueueStore.CleanConsumeQueueService`, `MappedFileQueue#deleteExpiredFileByTime`.
//!
//! Every [`RETENTION_INTERVAL`] (after [`RETENTION_INITIAL_DELAY`]) a run decides whether to
//! delete CommitLog segments. It does when one of these holds:
//!
//! - the hour is one of `deleteWhen` (`;`-separated hours, default `04`). The hour is taken in
//!   UTC; Java uses the JVM's local time zone. Brokers run in UTC, where the two agree.
//! - the disk holding the CommitLog or the consume queues is used more than
//!   `diskMaxUsedSpaceRatio` percent;
//! - an operator asked for it ([`MessageStore::trigger_delete_files`], Java's
//!   `TRIGGER_DELETE_FILES`). As in Java, that makes the next [`MANUAL_DELETE_RUNS`] runs delete.
//!
//! A run deletes segments oldest first and stops at the first one it must keep. It keeps the
//! newest segment, any segment whose end the dispatch has not reached, and any segment modified
//! less than `fileReservedTime` hours ago, unless the disk is used more than
//! `diskSpaceCleanForciblyRatio` (85 %) and `cleanFileForciblyEnable` is on: then unexpired
//! segments go too, as in Java. Over `diskMaxUsedSpaceRatio` only expired segments go, but at
//! any hour. A run deletes at most [`DELETE_FILES_BATCH_MAX`] segments, as
//! Java's `deleteFileBatchMax` does. Java also sleeps `deleteCommitLogFilesInterval` (100 ms)
//! between two deletions; that is not done here.
//!
//! When the CommitLog's min offset has moved, each consume queue then deletes the segments that
//! lie wholly below it and corrects its min offset, and the index deletes its expired files.
//! Reads below a corrected min answer OFFSET_TOO_SMALL.
//!
//! Deleting a segment unlinks the file. A [`bytes::Bytes`] slice already handed to a reader
//! keeps the mapping alive until it is dropped. So Java's "hanged file" retry
//! (`reDeleteHangedFile`, `destroyMapedFileIntervalForcibly`) has no counterpart here.
//!
//! [`MessageStore::trigger_delete_files`]: crate::MessageStore::trigger_delete_files

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant, UNIX_EPOCH};

use tracing::{debug, info, warn};

use crate::commit_log::CommitLog;
use crate::config::StoreConfig;
use crate::consume_queue::ConsumeQueueStore;
use crate::index_service::IndexService;
use crate::mapped_file::MappedFile;

/// How often retention runs. Java: `cleanResourceInterval` (10 000 ms).
pub const RETENTION_INTERVAL: Duration = Duration::from_secs(10);

/// Delay before the first run after the store opens. Java: the clean task's initial delay
/// (60 s).
pub const RETENTION_INITIAL_DELAY: Duration = Duration::from_secs(60);

/// Most CommitLog segments one run deletes. Java: `deleteFileBatchMax` (10).
pub const DELETE_FILES_BATCH_MAX: usize = 10;

/// Runs that delete after one manual trigger. Java: `MAX_MANUAL_DELETE_FILE_TIMES` (20).
pub const MANUAL_DELETE_RUNS: u32 = 20;

const HOUR_MS: i64 = 60 * 60 * 1000;

/// Measures how full the disk holding a path is: used space in percent (0 to 100), or `None`
/// when it cannot tell. The default is [`default_disk_usage_probe`]; tests inject their own.
pub type DiskUsageProbe = Arc<dyn Fn(&Path) -> Option<f64> + Send + Sync>;

/// The environment variable that, set to `off`, stops the store from measuring its disks'
/// used ratios: neither `diskSpaceWarningLevelRatio` (refusing puts) nor
/// `diskMaxUsedSpaceRatio` / `diskSpaceCleanForciblyRatio` (deleting early) apply, while
/// time-based retention and the per-put block reservation (a put the disk has no room for is
/// refused) still do. The test suite sets it: its stores live in temp dirs on a disk shared
/// with other work, whose ratio says nothing about the few MiB a test writes.
pub const DISK_RATIO_CHECK_ENV: &str = "FERROMQ_DISK_RATIO_CHECK";

/// The probe a store measures its disks with: [`disk_used_percent`], or none at all (every
/// disk unmeasurable) when [`DISK_RATIO_CHECK_ENV`] is `off`.
pub fn default_disk_usage_probe() -> DiskUsageProbe {
    if !disk_ratio_check_off() {
        return Arc::new(disk_used_percent);
    }
    static TOLD: std::sync::Once = std::sync::Once::new();
    // INFO, not WARN: whoever set the variable asked for this.
    TOLD.call_once(|| {
        info!(
            env = DISK_RATIO_CHECK_ENV,
            "disk used ratios are not measured: puts are refused only when the disk has no room \
             for them, and segments are deleted only when expired"
        );
    });
    Arc::new(|_| None)
}

/// Whether [`DISK_RATIO_CHECK_ENV`] turns the ratio checks off.
fn disk_ratio_check_off() -> bool {
    std::env::var(DISK_RATIO_CHECK_ENV).is_ok_and(|v| v.eq_ignore_ascii_case("off"))
}

/// What one retention run saw and did.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RetentionReport {
    /// The hour was one of `deleteWhen`.
    pub time_up: bool,
    /// A manual trigger made this run delete.
    pub manual: bool,
    /// The fuller of the CommitLog's and the consume queues' disks, in percent; `None` when
    /// neither could be measured.
    pub disk_used_percent: Option<f64>,
    /// `disk_used_percent` was over `diskMaxUsedSpaceRatio`.
    pub disk_over_ratio: bool,
    /// `disk_used_percent` was over `diskSpaceCleanForciblyRatio` (with
    /// `cleanFileForciblyEnable`): unexpired segments were deletable.
    pub clean_forcibly: bool,
    /// CommitLog segments deleted.
    pub commit_log_segments_deleted: usize,
    /// Consume-queue segments deleted, over every queue.
    pub consume_queue_segments_deleted: usize,
    /// Index files deleted.
    pub index_files_deleted: usize,
    /// The CommitLog's min offset after the run.
    pub commit_log_min_offset: i64,
}

/// The parts of the store a run works on.
pub(crate) struct RetentionTargets<'a> {
    pub commit_log: &'a CommitLog,
    pub consume_queues: &'a ConsumeQueueStore,
    pub index: &'a IndexService,
    /// CommitLog offset up to which records are dispatched: segments ending beyond it stay.
    pub dispatched_offset: i64,
}

/// Why a CommitLog segment is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DeleteReason {
    Expired,
    CleanForcibly,
}

impl DeleteReason {
    fn as_str(self) -> &'static str {
        match self {
            DeleteReason::Expired => "older than fileReservedTime",
            DeleteReason::CleanForcibly => "disk used over diskSpaceCleanForciblyRatio",
        }
    }
}

/// State carried from run to run; the lock also keeps two runs (the thread's and a caller's)
/// from interleaving.
#[derive(Debug, Default)]
struct RunState {
    /// CommitLog min offset the consume queues and index were last cleaned against. Java:
    /// `CleanConsumeQueueService.lastPhysicalMinOffset`.
    last_physical_min: i64,
    /// The disk was over the ratio at the last run (log transitions only).
    disk_over: bool,
    /// Nothing was left to delete while over the ratio (logged once per episode).
    warned_nothing_to_delete: bool,
    /// The disk usage could not be measured (logged once).
    warned_unmeasurable: bool,
}

/// Decides when to delete and deletes. Owned by the store's `Shared`; its thread is started by
/// `MessageStore::open`.
pub(crate) struct RetentionService {
    file_reserved_ms: i64,
    delete_hours: [bool; 24],
    disk_max_used_percent: f64,
    /// Above it (and with `cleanFileForciblyEnable`) unexpired segments go too.
    clean_forcibly_percent: Option<f64>,
    /// Directories whose disks are watched: the CommitLog's and the consume queues'.
    watched_dirs: Vec<PathBuf>,
    manual_runs_left: AtomicU32,
    disk_usage: RwLock<DiskUsageProbe>,
    state: Mutex<RunState>,
}

impl RetentionService {
    /// A service for `config`'s `fileReservedTime`, `deleteWhen` and `diskMaxUsedSpaceRatio`.
    pub(crate) fn new(config: &StoreConfig) -> RetentionService {
        let reserved_hours = i64::try_from(config.file_reserved_time_hours).unwrap_or(i64::MAX);
        let mut watched_dirs = vec![config.commit_log_dir()];
        if config.consume_queue_dir() != config.commit_log_dir() {
            watched_dirs.push(config.consume_queue_dir());
        }
        RetentionService {
            file_reserved_ms: reserved_hours.saturating_mul(HOUR_MS),
            delete_hours: parse_delete_when(&config.delete_when),
            disk_max_used_percent: config.disk_max_used_space_ratio as f64,
            clean_forcibly_percent: config
                .clean_file_forcibly_enable
                .then(|| config.disk_space_clean_forcibly_percent()),
            watched_dirs,
            manual_runs_left: AtomicU32::new(0),
            disk_usage: RwLock::new(default_disk_usage_probe()),
            state: Mutex::new(RunState::default()),
        }
    }

    /// Makes the next [`MANUAL_DELETE_RUNS`] runs delete expired segments whatever the hour.
    /// Java: `executeDeleteFilesManually`.
    pub(crate) fn trigger_delete(&self) {
        self.manual_runs_left.store(MANUAL_DELETE_RUNS, Ordering::Release);
        info!(runs = MANUAL_DELETE_RUNS, "file deletion triggered manually");
    }

    /// Replaces how disk usage is measured.
    pub(crate) fn set_disk_usage_probe(&self, probe: DiskUsageProbe) {
        *self.disk_usage.write().unwrap_or_else(|e| e.into_inner()) = probe;
    }

    fn is_delete_hour(&self, now_utc_ms: i64) -> bool {
        self.delete_hours[utc_hour(now_utc_ms)]
    }

    /// One run at `now_utc_ms` (ms since the epoch), as the periodic thread does it.
    pub(crate) fn run_once(&self, targets: &RetentionTargets<'_>, now_utc_ms: i64) -> RetentionReport {
        // The state is a few counters and flags, each written in one step.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let time_up = self.is_delete_hour(now_utc_ms);
        let disk_used_percent = self.measure_disk(&mut state);
        let disk_over_ratio = disk_used_percent.is_some_and(|p| p > self.disk_max_used_percent);
        let clean_forcibly =
            disk_used_percent.zip(self.clean_forcibly_percent).is_some_and(|(used, forcibly)| used > forcibly);
        let manual =
            self.manual_runs_left.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok();
        if disk_over_ratio != state.disk_over {
            state.disk_over = disk_over_ratio;
            state.warned_nothing_to_delete = false;
            match disk_used_percent {
                Some(used) if disk_over_ratio => warn!(
                    used_percent = used,
                    max_percent = self.disk_max_used_percent,
                    "store disk used over diskMaxUsedSpaceRatio; deleting expired commit log segments at once \
                     (unexpired ones too over diskSpaceCleanForciblyRatio)"
                ),
                _ => info!(used_percent = ?disk_used_percent, "store disk usage back under diskMaxUsedSpaceRatio"),
            }
        }

        let mut report = RetentionReport {
            time_up,
            manual,
            disk_used_percent,
            disk_over_ratio,
            clean_forcibly,
            ..RetentionReport::default()
        };
        if time_up || disk_over_ratio || manual {
            report.commit_log_segments_deleted = self.delete_commit_log_segments(targets, now_utc_ms, clean_forcibly);
            if clean_forcibly && report.commit_log_segments_deleted == 0 && !state.warned_nothing_to_delete {
                state.warned_nothing_to_delete = true;
                warn!("store disk used over diskSpaceCleanForciblyRatio but no commit log segment can be deleted");
            }
        }
        let (cq_deleted, index_deleted) = clean_logics(targets, &mut state);
        report.consume_queue_segments_deleted = cq_deleted;
        report.index_files_deleted = index_deleted;
        report.commit_log_min_offset = targets.commit_log.min_offset();
        if report.commit_log_segments_deleted + cq_deleted + index_deleted > 0 {
            info!(
                commit_log_segments = report.commit_log_segments_deleted,
                consume_queue_segments = cq_deleted,
                index_files = index_deleted,
                min_physical_offset = report.commit_log_min_offset,
                time_up,
                manual,
                disk_over_ratio,
                "retention run deleted files"
            );
        }
        report
    }

    /// The fuller watched disk, in percent. An unmeasurable disk does not count as full
    /// (Java treats it as over the ratio, which here would delete unexpired data).
    fn measure_disk(&self, state: &mut RunState) -> Option<f64> {
        let probe = self.disk_usage.read().unwrap_or_else(|e| e.into_inner()).clone();
        let used = self
            .watched_dirs
            .iter()
            .filter_map(|dir| probe(dir))
            .fold(None, |max: Option<f64>, p| Some(max.map_or(p, |m| m.max(p))));
        if used.is_none() && !state.warned_unmeasurable && !disk_ratio_check_off() {
            state.warned_unmeasurable = true;
            warn!(dirs = ?self.watched_dirs, "cannot measure store disk usage; diskMaxUsedSpaceRatio is not enforced");
        }
        used
    }

    /// Deletes CommitLog segments oldest first. Keeps the newest segment and any segment the
    /// dispatch has not passed. Keeps unexpired segments too, unless `clean_forcibly`.
    /// Deletes at most [`DELETE_FILES_BATCH_MAX`].
    fn delete_commit_log_segments(
        &self,
        targets: &RetentionTargets<'_>,
        now_utc_ms: i64,
        clean_forcibly: bool,
    ) -> usize {
        let queue = targets.commit_log.queue();
        let mut deleted = 0;
        while deleted < DELETE_FILES_BATCH_MAX {
            let segments = queue.segments();
            let [first, _, ..] = segments.as_slice() else { break };
            let end = first.file_from_offset() + first.file_size() as i64;
            if end > targets.dispatched_offset {
                debug!(
                    file = %first.path().display(),
                    dispatched = targets.dispatched_offset,
                    "oldest commit log segment not fully dispatched; kept"
                );
                break;
            }
            let modified_ms = modified_ms(first);
            let reason = match modified_ms {
                Some(m) if now_utc_ms >= m.saturating_add(self.file_reserved_ms) => DeleteReason::Expired,
                _ if clean_forcibly => DeleteReason::CleanForcibly,
                _ => break,
            };
            match queue.delete_first() {
                Ok(Some(gone)) => {
                    // Only this service deletes from the front, under the run lock.
                    debug_assert!(Arc::ptr_eq(&gone, first), "the oldest segment changed during a run");
                    info!(
                        file = %gone.path().display(),
                        physical_offset = gone.file_from_offset(),
                        age_hours = modified_ms.map(|m| (now_utc_ms - m) / HOUR_MS),
                        reason = reason.as_str(),
                        "commit log segment deleted"
                    );
                    deleted += 1;
                }
                Ok(None) => break,
                Err(e) => {
                    // The segment is already out of the queue (readers no longer find it); only
                    // the unlink failed.
                    warn!(file = %first.path().display(), error = %e, "cannot delete commit log segment");
                    break;
                }
            }
        }
        deleted
    }
}

/// When the CommitLog's min offset moved since the last clean, deletes consume-queue segments
/// and index files below it and corrects each queue's min offset. Returns (consume-queue
/// segments, index files) deleted. On a failure the next run tries again.
fn clean_logics(targets: &RetentionTargets<'_>, state: &mut RunState) -> (usize, usize) {
    let min = targets.commit_log.min_offset();
    if min <= state.last_physical_min {
        return (0, 0);
    }
    let mut failed = false;
    let mut cq_deleted = 0;
    for (topic, queue_id, cq) in targets.consume_queues.all() {
        match cq.delete_expired(min) {
            Ok(n) => cq_deleted += n,
            Err(e) => {
                failed = true;
                warn!(topic = %topic, queue_id, error = %e, "cannot delete expired consume queue segments");
            }
        }
        // `delete_expired` corrects the min too, but not after a failure; this is cheap when
        // the min is already right.
        cq.correct_min_offset(min);
    }
    // Closed light queues are not among `all()`; a million of them are visited here only when
    // a CommitLog segment went.
    match targets.consume_queues.delete_expired_light(min) {
        Ok(n) => cq_deleted += n,
        Err(e) => {
            failed = true;
            warn!(error = %e, "cannot list the light queues to delete their expired segments");
        }
    }
    let index_deleted = match targets.index.delete_expired(min) {
        Ok(n) => n,
        Err(e) => {
            failed = true;
            warn!(error = %e, "cannot delete expired index files");
            0
        }
    };
    if !failed {
        state.last_physical_min = min;
    }
    (cq_deleted, index_deleted)
}

/// Last modification time of a segment's file, in ms since the epoch.
fn modified_ms(file: &MappedFile) -> Option<i64> {
    let modified = std::fs::metadata(file.path()).and_then(|m| m.modified());
    let modified = match modified {
        Ok(t) => t,
        Err(e) => {
            warn!(file = %file.path().display(), error = %e, "cannot read segment modification time; kept");
            return None;
        }
    };
    Some(match modified.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    })
}

/// The hour of the day (0-23) in UTC.
fn utc_hour(now_utc_ms: i64) -> usize {
    now_utc_ms.div_euclid(HOUR_MS).rem_euclid(24) as usize
}

/// `deleteWhen`: `;`-separated hours of the day, e.g. `04` or `04;16`. Invalid entries are
/// logged and ignored (Java's `Integer.parseInt` would throw on every run instead).
fn parse_delete_when(text: &str) -> [bool; 24] {
    let mut hours = [false; 24];
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        match part.parse::<usize>() {
            Ok(hour) if hour < 24 => hours[hour] = true,
            _ => warn!(delete_when = text, entry = part, "ignoring invalid deleteWhen hour"),
        }
    }
    hours
}

/// Used space of the filesystem holding `path`, in percent, as Java's
/// `UtilAll.getDiskPartitionSpaceUsedPercent` computes it: used / (used + available to
/// unprivileged users), where used = total - free. Java rounds up to a whole percent. Against
/// a whole-percent ratio, `>` gives the same answer either way. `None` when `statvfs` fails.
pub fn disk_used_percent(path: &Path) -> Option<f64> {
    disk_space(path)?.used_percent()
}

/// Block counts of the filesystem holding a path (`statvfs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskSpace {
    /// Bytes per block.
    pub block_size: u64,
    /// Blocks in all.
    pub blocks: u64,
    /// Free blocks, including those reserved for the superuser.
    pub free_blocks: u64,
    /// Free blocks available to unprivileged users.
    pub available_blocks: u64,
}

impl DiskSpace {
    /// Total bytes (Java: `File#getTotalSpace`).
    pub fn total_bytes(&self) -> u64 {
        self.blocks.saturating_mul(self.block_size)
    }

    /// Unallocated bytes (Java: `File#getFreeSpace`).
    pub fn free_bytes(&self) -> u64 {
        self.free_blocks.saturating_mul(self.block_size)
    }

    /// Used space in percent, as [`disk_used_percent`] reports it.
    pub fn used_percent(&self) -> Option<f64> {
        used_percent(self.blocks, self.free_blocks, self.available_blocks)
    }
}

/// The block counts of the filesystem holding `path`; `None` when `statvfs` fails.
#[cfg(unix)]
#[allow(unsafe_code)] // One `statvfs` call; see the SAFETY comment.
#[allow(clippy::unnecessary_cast)] // `fsblkcnt_t` is u32 on some targets and u64 on others.
pub fn disk_space(path: &Path) -> Option<DiskSpace> {
    use std::os::unix::ffi::OsStrExt;

    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut buf = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a NUL-terminated string alive for the call, and `buf` is writable
    // memory of the type `statvfs` fills in. It is read only after the call reported success
    // (0), which means every field was written.
    let stat = unsafe {
        if libc::statvfs(c_path.as_ptr(), buf.as_mut_ptr()) != 0 {
            return None;
        }
        buf.assume_init()
    };
    Some(DiskSpace {
        block_size: stat.f_frsize as u64,
        blocks: stat.f_blocks as u64,
        free_blocks: stat.f_bfree as u64,
        available_blocks: stat.f_bavail as u64,
    })
}

/// Disk space is not measured on non-Unix targets.
#[cfg(not(unix))]
pub fn disk_space(_path: &Path) -> Option<DiskSpace> {
    None
}

/// Used percent from block counts: total, free (including reserved blocks), available to
/// unprivileged users.
fn used_percent(blocks: u64, free: u64, available: u64) -> Option<f64> {
    let used = blocks.checked_sub(free)?;
    let entire = used.checked_add(available)?;
    (blocks > 0 && entire > 0).then(|| used as f64 * 100.0 / entire as f64)
}

/// Sleeps until `deadline`. Returns early, with `false`, once `stop` is set. The condvar is
/// notified, under its mutex, after `stop` is set.
pub(crate) fn park_until(stop: &AtomicBool, wake: &(Mutex<()>, Condvar), deadline: Instant) -> bool {
    let mut guard = wake.0.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if stop.load(Ordering::Acquire) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        guard = wake.1.wait_timeout(guard, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
    }
}

/// Calls `tick` after `first_delay` and then every `interval` (at a fixed rate, skipping
/// missed ticks) until `stop` is set. The body of the store's periodic threads (retention,
/// stats sampling).
pub(crate) fn run_periodically(
    stop: &AtomicBool,
    wake: &(Mutex<()>, Condvar),
    first_delay: Duration,
    interval: Duration,
    mut tick: impl FnMut(),
) {
    let mut next = Instant::now() + first_delay;
    while park_until(stop, wake, next) {
        tick();
        next += interval;
        let now = Instant::now();
        if next < now {
            next = now + interval;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use bytes::Bytes;
    use ferromq_protocol::message::StoredMessage;

    use super::*;
    use crate::mapped_file_queue::MappedFileQueue;

    const SEGMENT: usize = 1024;

    #[test]
    fn delete_when_lists_hours_and_ignores_bad_entries() {
        let hours = parse_delete_when("04; 16;;x;24");
        let set: Vec<usize> = (0..24).filter(|&h| hours[h]).collect();
        assert_eq!(set, [4, 16]);
        assert_eq!(parse_delete_when("").iter().filter(|&&h| h).count(), 0);
    }

    #[test]
    fn hour_is_taken_in_utc() {
        // 2030-01-01T00:00:00Z
        let midnight = 1_893_456_000_000;
        assert_eq!(utc_hour(midnight), 0);
        assert_eq!(utc_hour(midnight + 4 * HOUR_MS + 59 * 60_000), 4);
        assert_eq!(utc_hour(midnight - 1), 23);
        assert_eq!(utc_hour(-1), 23);
    }

    #[test]
    fn used_percent_follows_java() {
        // 100 blocks, 30 free of which 25 available: used 70 of 95 usable.
        let p = used_percent(100, 30, 25).unwrap();
        assert!((p - 70.0 * 100.0 / 95.0).abs() < 1e-9);
        assert_eq!(used_percent(0, 0, 0), None);
        assert_eq!(used_percent(10, 20, 5), None);
    }

    #[test]
    fn real_disk_usage_is_a_percentage() {
        let dir = tempfile::tempdir().unwrap();
        let p = disk_used_percent(dir.path()).expect("statvfs works on a temp dir");
        assert!((0.0..=100.0).contains(&p), "{p}");
        assert_eq!(disk_used_percent(&dir.path().join("missing")), None);
    }

    #[test]
    fn park_returns_false_once_stopped() {
        let stop = AtomicBool::new(false);
        let wake = (Mutex::new(()), Condvar::new());
        assert!(park_until(&stop, &wake, Instant::now()));
        stop.store(true, Ordering::Release);
        let started = Instant::now();
        assert!(!park_until(&stop, &wake, Instant::now() + Duration::from_secs(60)));
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    fn message(i: usize) -> StoredMessage {
        StoredMessage {
            topic: "T".into(),
            body: Bytes::from(vec![b'x'; 200]),
            born_host: "127.0.0.1:5555".parse().unwrap(),
            store_host: "127.0.0.1:10911".parse().unwrap(),
            properties: format!("UNIQ_KEY\u{1}U{i}\u{2}"),
            ..StoredMessage::default()
        }
    }

    /// A CommitLog of several full segments with the given dispatch offset: segments the
    /// dispatch has not passed stay, even when the disk is full.
    #[test]
    fn segments_beyond_the_dispatched_offset_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let queue = MappedFileQueue::load(&dir.path().join("commitlog"), SEGMENT, false).unwrap();
        let commit_log = CommitLog::new(queue, 4096, host);
        for i in 0..20 {
            commit_log.append(&message(i)).unwrap();
        }
        let segments = commit_log.queue().segments().len();
        assert!(segments >= 4, "{segments} segments");
        let config = StoreConfig::with_root(dir.path());
        let consume_queues = ConsumeQueueStore::load(&config.consume_queue_dir(), 20 * 16).unwrap();
        let index = IndexService::load(&config.index_dir(), &config, true, 0).unwrap();
        let service = RetentionService::new(&config);
        service.set_disk_usage_probe(Arc::new(|_| Some(99.0)));
        // Dispatched up to the middle of the second segment: only the first may go.
        let targets = RetentionTargets {
            commit_log: &commit_log,
            consume_queues: &consume_queues,
            index: &index,
            dispatched_offset: SEGMENT as i64 + 10,
        };
        let report = service.run_once(&targets, 0);
        assert!(report.disk_over_ratio);
        assert_eq!(report.commit_log_segments_deleted, 1);
        assert_eq!(commit_log.min_offset(), SEGMENT as i64);
        // Fully dispatched: all but the newest go.
        let targets = RetentionTargets { dispatched_offset: commit_log.max_offset(), ..targets };
        let report = service.run_once(&targets, 0);
        assert_eq!(report.commit_log_segments_deleted, segments - 2);
        assert_eq!(commit_log.queue().segments().len(), 1);
    }
}
