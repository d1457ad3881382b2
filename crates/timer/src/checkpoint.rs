//! The timer checkpoint, `<root>/config/timercheck`: how far the wheel has read and the timer
//! queue has been consumed, as of the last flush. Java: `TimerCheckpoint`.
//!
//! Layout (big-endian), at the start of a 4096-byte file (Java maps one OS page):
//!
//! | offset | size | field                                                        |
//! |--------|------|--------------------------------------------------------------|
//! | 0      | 8    | lastReadTimeMs: every slot before it is delivered            |
//! | 8      | 8    | lastTimerLogFlushPos: timerlog bytes on disk                 |
//! | 16     | 8    | lastTimerQueueOffset: next `rmq_sys_wheel_timer` offset to enqueue |
//! | 24     | 8    | masterTimerQueueOffset (equal on a master)                   |
//! | 32     | 8    | DataVersion stateVersion                                     |
//! | 40     | 8    | DataVersion timestamp                                        |
//! | 48     | 8    | DataVersion counter                                          |
//!
//! The file is rewritten in place (56 bytes, one `pwrite` within one sector) and synced.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{io_err, TimerError};

/// Encoded checkpoint size.
pub const TIMER_CHECKPOINT_SIZE: usize = 56;
/// Length of the file Java creates (one mapped page).
pub const TIMER_CHECKPOINT_FILE_LEN: u64 = 4096;

/// Java's `DataVersion` as the checkpoint stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataVersion {
    /// State machine version (0 outside controller mode).
    pub state_version: i64,
    /// When the version last changed, ms.
    pub timestamp: i64,
    /// Changes so far.
    pub counter: i64,
}

/// The timer's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimerCheckpoint {
    /// Every slot before this time has been delivered.
    pub last_read_time_ms: i64,
    /// Timerlog offset below which units were on disk.
    pub last_timer_log_flush_pos: i64,
    /// Next offset of `rmq_sys_wheel_timer` queue 0 to enqueue.
    pub last_timer_queue_offset: i64,
    /// The master's queue offset (a slave follows it); equal to the above on a master.
    pub master_timer_queue_offset: i64,
    /// Bumped whenever the read time or queue offset changes.
    pub data_version: DataVersion,
}

impl TimerCheckpoint {
    /// The 56-byte record. Java: `TimerCheckpoint#encode`.
    pub fn encode(&self) -> [u8; TIMER_CHECKPOINT_SIZE] {
        let fields = [
            self.last_read_time_ms,
            self.last_timer_log_flush_pos,
            self.last_timer_queue_offset,
            self.master_timer_queue_offset,
            self.data_version.state_version,
            self.data_version.timestamp,
            self.data_version.counter,
        ];
        let mut out = [0u8; TIMER_CHECKPOINT_SIZE];
        for (i, v) in fields.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
        }
        out
    }

    /// Reads a record: the four offsets need 32 bytes; the data version is read when the 56
    /// are there (older files lack it). Java: `TimerCheckpoint#decode`.
    pub fn decode(bytes: &[u8]) -> Option<TimerCheckpoint> {
        let at = |i: usize| -> Option<i64> {
            let b = bytes.get(i * 8..i * 8 + 8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            Some(i64::from_be_bytes(a))
        };
        let mut cp = TimerCheckpoint {
            last_read_time_ms: at(0)?,
            last_timer_log_flush_pos: at(1)?,
            last_timer_queue_offset: at(2)?,
            master_timer_queue_offset: at(3)?,
            data_version: DataVersion::default(),
        };
        if let (Some(state_version), Some(timestamp), Some(counter)) = (at(4), at(5), at(6)) {
            cp.data_version = DataVersion { state_version, timestamp, counter };
        }
        Some(cp)
    }
}

/// The checkpoint file.
#[derive(Debug)]
pub(crate) struct CheckpointFile {
    file: File,
    path: PathBuf,
}

impl CheckpointFile {
    /// Opens (creating) the file; returns the checkpoint it held, `None` if it is new.
    ///
    /// # Errors
    /// I/O errors.
    pub(crate) fn open(path: &Path) -> Result<(CheckpointFile, Option<TimerCheckpoint>), TimerError> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        let existed = path.exists();
        let file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).map_err(io_err(path))?;
        let len = file.metadata().map_err(io_err(path))?.len();
        let mut found = None;
        if existed && len > 0 {
            let mut buf = vec![0u8; (len as usize).min(TIMER_CHECKPOINT_SIZE)];
            file.read_exact_at(&mut buf, 0).map_err(io_err(path))?;
            found = TimerCheckpoint::decode(&buf);
        }
        if len < TIMER_CHECKPOINT_FILE_LEN {
            file.set_len(TIMER_CHECKPOINT_FILE_LEN).map_err(io_err(path))?;
        }
        Ok((CheckpointFile { file, path: path.to_owned() }, found))
    }

    /// Writes the checkpoint and syncs it.
    ///
    /// # Errors
    /// The write or sync failure.
    pub(crate) fn write(&self, cp: &TimerCheckpoint) -> Result<(), TimerError> {
        self.file.write_all_at(&cp.encode(), 0).map_err(io_err(&self.path))?;
        self.file.sync_data().map_err(io_err(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_old_32_byte_records() {
        let cp = TimerCheckpoint {
            last_read_time_ms: 1_700_000_000_000,
            last_timer_log_flush_pos: 5200,
            last_timer_queue_offset: 77,
            master_timer_queue_offset: 77,
            data_version: DataVersion { state_version: 0, timestamp: 1_700_000_000_123, counter: 9 },
        };
        assert_eq!(TimerCheckpoint::decode(&cp.encode()), Some(cp));
        let old = TimerCheckpoint::decode(&cp.encode()[..32]).unwrap();
        assert_eq!(old.data_version, DataVersion::default());
        assert_eq!(old.last_timer_queue_offset, 77);
        assert_eq!(TimerCheckpoint::decode(&[0; 31]), None);
    }

    #[test]
    fn file_is_a_page_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config").join("timercheck");
        let (file, found) = CheckpointFile::open(&path).unwrap();
        assert_eq!(found, None);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 4096);
        let cp = TimerCheckpoint { last_read_time_ms: 5, last_timer_queue_offset: 3, ..TimerCheckpoint::default() };
        file.write(&cp).unwrap();
        drop(file);
        let (_, found) = CheckpointFile::open(&path).unwrap();
        assert_eq!(found, Some(cp));
    }
}
