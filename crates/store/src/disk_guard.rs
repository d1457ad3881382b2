//! The disk-full guard: refuses puts while the disk holding the CommitLog or the consume
//! queues is fuller than `diskSpaceWarningLevelRatio`, and takes them again by itself once it
//! is back under `diskSpaceCleanForciblyRatio` (the same hysteresis as Java's
//! `CleanCommitLogService#isSpaceToDelete` and its `DISK_FULL_BIT`).
//!
//! Java measures every 10 s, which lets a fast producer fill the last tenth of a disk in
//! between; the guard measures every [`CHECK_INTERVAL`] (one `statvfs` per watched directory).
//! Whatever the ratios say, a put the disk has no room for is refused when its blocks are
//! reserved (see [`crate::reserve`]), before any byte is written.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tracing::{error, info};

use crate::config::StoreConfig;
use crate::retention::DiskUsageProbe;

/// How often the guard measures the disks.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Java's `RunningFlags.DISK_FULL_BIT`.
pub const DISK_FULL_BIT: i32 = 1 << 4;

/// Watches the store's disks.
pub struct DiskGuard {
    dirs: Vec<PathBuf>,
    warning_percent: f64,
    clean_forcibly_percent: f64,
    probe: RwLock<DiskUsageProbe>,
    full: AtomicBool,
    /// Last measured used percent of the CommitLog's and the consume queues' disks, as f64
    /// bits; negative when unmeasurable.
    commit_log_percent: AtomicU64,
    consume_queue_percent: AtomicU64,
}

impl std::fmt::Debug for DiskGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskGuard")
            .field("dirs", &self.dirs)
            .field("warning_percent", &self.warning_percent)
            .field("full", &self.is_full())
            .finish()
    }
}

impl DiskGuard {
    /// A guard of `config`'s CommitLog and consume-queue directories, measuring with `probe`.
    pub fn new(config: &StoreConfig, probe: DiskUsageProbe) -> DiskGuard {
        DiskGuard {
            dirs: vec![config.commit_log_dir(), config.consume_queue_dir()],
            warning_percent: config.disk_space_warning_level_percent(),
            clean_forcibly_percent: config.disk_space_clean_forcibly_percent(),
            probe: RwLock::new(probe),
            full: AtomicBool::new(false),
            commit_log_percent: AtomicU64::new((-1f64).to_bits()),
            consume_queue_percent: AtomicU64::new((-1f64).to_bits()),
        }
    }

    /// Replaces how disk usage is measured (tests).
    pub fn set_probe(&self, probe: DiskUsageProbe) {
        *self.probe.write().unwrap_or_else(|e| e.into_inner()) = probe;
    }

    /// Whether puts are refused.
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    /// Java's running-flag bits this guard owns: [`DISK_FULL_BIT`] or 0.
    pub fn flag_bits(&self) -> i32 {
        if self.is_full() {
            DISK_FULL_BIT
        } else {
            0
        }
    }

    /// The last measured used fractions (0 to 1) of the CommitLog's and the consume queues'
    /// disks; -1 when unmeasured.
    pub fn ratios(&self) -> (f64, f64) {
        let get = |a: &AtomicU64| {
            let p = f64::from_bits(a.load(Ordering::Acquire));
            if p < 0.0 {
                -1.0
            } else {
                p / 100.0
            }
        };
        (get(&self.commit_log_percent), get(&self.consume_queue_percent))
    }

    /// The remark of a put refused while full, in Java's words with the ratios.
    pub fn remark(&self) -> String {
        let (cl, cq) = self.ratios();
        format!(
            "the broker's disk is full: CommitLog disk {:.2}, ConsumeQueue disk {:.2} used, over \
             diskSpaceWarningLevelRatio {:.2}; puts are accepted again below diskSpaceCleanForciblyRatio {:.2}",
            cl,
            cq,
            self.warning_percent / 100.0,
            self.clean_forcibly_percent / 100.0
        )
    }

    /// Measures the disks once and updates the flag. Returns whether the disk is full now.
    pub fn check(&self) -> bool {
        let probe = self.probe.read().unwrap_or_else(|e| e.into_inner()).clone();
        let mut worst: Option<f64> = None;
        for (dir, slot) in self.dirs.iter().zip([&self.commit_log_percent, &self.consume_queue_percent]) {
            let used = probe(dir);
            slot.store(used.unwrap_or(-1.0).to_bits(), Ordering::Release);
            if let Some(p) = used {
                worst = Some(worst.map_or(p, |w| w.max(p)));
            }
        }
        // An unmeasurable disk keeps the flag as it is.
        let Some(used) = worst else { return self.is_full() };
        if used > self.warning_percent {
            if !self.full.swap(true, Ordering::AcqRel) {
                error!(
                    used_percent = used,
                    disk_space_warning_level_ratio = self.warning_percent / 100.0,
                    dirs = ?self.dirs,
                    "store disk may be full soon; marking the disk full: puts are refused until usage \
                     falls under diskSpaceCleanForciblyRatio (free space or delete old data)"
                );
            }
        } else if used <= self.clean_forcibly_percent && self.full.swap(false, Ordering::AcqRel) {
            info!(used_percent = used, "store disk space OK again; marking the disk ok: puts are accepted");
        }
        self.is_full()
    }
}

/// Runs `guard.check()` every [`CHECK_INTERVAL`] until `stop` is set.
pub(crate) fn run(guard: &Arc<DiskGuard>, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        guard.check();
        std::thread::sleep(CHECK_INTERVAL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn full_above_the_warning_ratio_and_ok_again_only_at_or_below_clean_forcibly() {
        let used = Arc::new(Mutex::new(50.0));
        let probe_used = used.clone();
        let guard = DiskGuard::new(
            &StoreConfig::with_root("/nonexistent"),
            Arc::new(move |_| Some(*probe_used.lock().unwrap())),
        );
        let at = |p: f64| {
            *used.lock().unwrap() = p;
            guard.check()
        };
        assert!(!at(50.0));
        assert!(!at(90.0), "not over 90 %");
        assert!(at(90.5));
        assert!(at(86.0), "stays full between the ratios");
        assert!(!at(85.0));
        assert!(!at(89.0), "stays ok between the ratios");
        assert_eq!(guard.flag_bits(), 0);
        assert!(at(99.0));
        assert_eq!(guard.flag_bits(), DISK_FULL_BIT);
        assert!(guard.remark().contains("0.99"), "{}", guard.remark());
    }

    #[test]
    fn ratios_are_clamped_to_java_bounds() {
        let config = StoreConfig {
            disk_space_warning_level_ratio: 99,
            disk_space_clean_forcibly_ratio: 10,
            ..StoreConfig::with_root("/nonexistent")
        };
        let guard = DiskGuard::new(&config, Arc::new(|_| None));
        assert_eq!((guard.warning_percent, guard.clean_forcibly_percent), (90.0, 30.0));
        assert!(!guard.check(), "unmeasurable keeps the flag");
    }
}
