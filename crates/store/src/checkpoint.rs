//! The `checkpoint` file: how far the CommitLog, the ConsumeQueues and the index are known
//! to be flushed, by store time; abnormal recovery starts from it. One 4 KiB page:
//! physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp, masterFlushedOffset,
//! confirmPhyOffset (int64 each, big-endian). Java: `StoreCheckpoint`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};

const PAGE: u64 = 4096;

/// The checkpoint values and their file.
#[derive(Debug)]
pub struct Checkpoint {
    file: File,
    physic_msg_timestamp: AtomicI64,
    logics_msg_timestamp: AtomicI64,
    index_msg_timestamp: AtomicI64,
    master_flushed_offset: AtomicI64,
    confirm_phy_offset: AtomicI64,
}

fn read_i64(buf: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    i64::from_be_bytes(b)
}

impl Checkpoint {
    /// Opens (creating) the checkpoint at `path`.
    ///
    /// # Errors
    /// I/O errors.
    pub fn open(path: &Path) -> io::Result<Checkpoint> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        if file.metadata()?.len() < PAGE {
            file.set_len(PAGE)?;
            // Its block now, while there may be room: a checkpoint written later on a full
            // disk then overwrites an allocated block instead of failing for want of one.
            if let Err(e) = crate::reserve::reserve(&file, path, 0, PAGE) {
                tracing::warn!(file = %path.display(), error = %e, "checkpoint block not reserved");
            }
        }
        let mut buf = [0u8; 40];
        file.read_exact_at(&mut buf, 0)?;
        Ok(Checkpoint {
            file,
            physic_msg_timestamp: AtomicI64::new(read_i64(&buf, 0)),
            logics_msg_timestamp: AtomicI64::new(read_i64(&buf, 8)),
            index_msg_timestamp: AtomicI64::new(read_i64(&buf, 16)),
            master_flushed_offset: AtomicI64::new(read_i64(&buf, 24)),
            confirm_phy_offset: AtomicI64::new(read_i64(&buf, 32)),
        })
    }

    /// Store time of the newest flushed CommitLog record.
    pub fn physic_msg_timestamp(&self) -> i64 {
        self.physic_msg_timestamp.load(Ordering::Acquire)
    }

    /// Sets [`physic_msg_timestamp`](Self::physic_msg_timestamp).
    pub fn set_physic_msg_timestamp(&self, ts: i64) {
        self.physic_msg_timestamp.store(ts, Ordering::Release);
    }

    /// Store time of the newest record whose ConsumeQueue entry is flushed.
    pub fn logics_msg_timestamp(&self) -> i64 {
        self.logics_msg_timestamp.load(Ordering::Acquire)
    }

    /// Sets [`logics_msg_timestamp`](Self::logics_msg_timestamp).
    pub fn set_logics_msg_timestamp(&self, ts: i64) {
        self.logics_msg_timestamp.store(ts, Ordering::Release);
    }

    /// Store time covered by the last flushed index file.
    pub fn index_msg_timestamp(&self) -> i64 {
        self.index_msg_timestamp.load(Ordering::Acquire)
    }

    /// Sets [`index_msg_timestamp`](Self::index_msg_timestamp).
    pub fn set_index_msg_timestamp(&self, ts: i64) {
        self.index_msg_timestamp.store(ts, Ordering::Release);
    }

    /// 5.x: the master's flushed offset (replication).
    pub fn master_flushed_offset(&self) -> i64 {
        self.master_flushed_offset.load(Ordering::Acquire)
    }

    /// 5.x: the confirmed physical offset (replication).
    pub fn confirm_phy_offset(&self) -> i64 {
        self.confirm_phy_offset.load(Ordering::Acquire)
    }

    /// Sets the confirmed physical offset (written at the next [`flush`](Self::flush)).
    pub fn set_confirm_phy_offset(&self, offset: i64) {
        self.confirm_phy_offset.store(offset, Ordering::Release);
    }

    /// Where abnormal recovery may start: the older of the CommitLog and ConsumeQueue
    /// times, less 3 s of margin (Java: `getMinTimestamp`).
    pub fn min_timestamp(&self) -> i64 {
        (self.physic_msg_timestamp().min(self.logics_msg_timestamp()) - 3000).max(0)
    }

    /// Like [`min_timestamp`](Self::min_timestamp) but also no later than the index time, so
    /// a recovery starting there re-indexes everything the index may have lost (Java:
    /// `getMinTimestampIndex`).
    pub fn min_timestamp_index(&self) -> i64 {
        self.min_timestamp().min(self.index_msg_timestamp())
    }

    /// Writes the values and syncs the file.
    ///
    /// # Errors
    /// I/O errors.
    pub fn flush(&self) -> io::Result<()> {
        let mut buf = [0u8; 40];
        for (i, v) in [
            self.physic_msg_timestamp(),
            self.logics_msg_timestamp(),
            self.index_msg_timestamp(),
            self.master_flushed_offset(),
            self.confirm_phy_offset(),
        ]
        .into_iter()
        .enumerate()
        {
            buf[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
        }
        self.file.write_all_at(&buf, 0)?;
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_persist_at_rocketmq_positions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint");
        let c = Checkpoint::open(&path).unwrap();
        c.set_physic_msg_timestamp(10_000);
        c.set_logics_msg_timestamp(9_000);
        c.set_index_msg_timestamp(8_000);
        c.flush().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 4096);
        assert_eq!(&bytes[0..8], &10_000i64.to_be_bytes());
        assert_eq!(&bytes[8..16], &9_000i64.to_be_bytes());
        assert_eq!(&bytes[16..24], &8_000i64.to_be_bytes());
        let c = Checkpoint::open(&path).unwrap();
        assert_eq!(c.min_timestamp(), 6_000);
        assert_eq!(c.index_msg_timestamp(), 8_000);
    }
}
