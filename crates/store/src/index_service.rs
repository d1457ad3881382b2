//! The store's message-key index: the IndexFiles in `index/`, oldest first, written by the
//! dispatch service and searched by key queries (fact sheet 4.4). Java: `IndexService`.
//!
//! Files are named by their creation time, `yyyyMMddHHmmssSSS`. Java formats local time;
//! FerroMQ formats UTC (no time-zone database needed), and never gives a new file a name at or
//! before the newest existing one, bumping the milliseconds instead, so names stay unique and
//! sort in creation order even when two files are created in the same millisecond or the
//! clock steps back. A directory written by a Java broker east of UTC therefore gets new names
//! bumped past its last (local-time) name until the UTC clock catches up.
//!
//! Locking: the file list is behind an `RwLock`, each file behind its own `RwLock`, always
//! taken in that order. Queries hold read locks; `build_index` write-locks only the file it
//! writes and is serialized with the other writers by a mutex.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::{debug, info, warn};

use ferromq_protocol::civil_date::{civil_from_days, days_from_civil};
use ferromq_protocol::message::keys::KEY_SEPARATOR;
use ferromq_protocol::message::sysflag::{transaction_value, TRANSACTION_ROLLBACK_TYPE};

use crate::config::StoreConfig;
use crate::dispatch_request::DispatchRequest;
use crate::index_file::{index_file_size, IndexFile};

/// How many names past a taken one a new file may try before giving up.
const NAME_ATTEMPTS_MAX: usize = 1000;
/// Length of an index file name, `yyyyMMddHHmmssSSS`.
const FILE_NAME_LEN: usize = 17;
/// The last instant a 17-digit name can hold: 9999-12-31 23:59:59.999 UTC.
const FILE_NAME_MS_MAX: i64 = 253_402_300_799_999;

type SharedFile = Arc<RwLock<IndexFile>>;

/// What a key query found. Java: `QueryOffsetResult`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryOffsetResult {
    /// CommitLog offsets of messages whose key hash matches, newest first; may include other
    /// keys with the same hash.
    pub phy_offsets: Vec<i64>,
    /// End timestamp of the newest index file (0 when there is none).
    pub index_last_update_timestamp: i64,
    /// End CommitLog offset of the newest index file (0 when there is none).
    pub index_last_update_phyoffset: i64,
}

/// The index files of one store.
#[derive(Debug)]
pub struct IndexService {
    dir: PathBuf,
    hash_slot_num: u32,
    index_num: u32,
    max_msgs_num_batch: usize,
    enabled: bool,
    /// Oldest first; the last one is written.
    files: RwLock<Vec<SharedFile>>,
    /// Held by `build_index`, `destroy` and file creation: one writer at a time.
    writer: Mutex<()>,
}

// The list and the files are only ever changed by whole operations (push, drain, one put
// whose header is written last), so a panic elsewhere cannot leave them half-updated.
fn read_list(lock: &RwLock<Vec<SharedFile>>) -> RwLockReadGuard<'_, Vec<SharedFile>> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write_list(lock: &RwLock<Vec<SharedFile>>) -> RwLockWriteGuard<'_, Vec<SharedFile>> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

fn read_file(file: &SharedFile) -> RwLockReadGuard<'_, IndexFile> {
    file.read().unwrap_or_else(PoisonError::into_inner)
}

fn write_file(file: &SharedFile) -> RwLockWriteGuard<'_, IndexFile> {
    file.write().unwrap_or_else(PoisonError::into_inner)
}

impl IndexService {
    /// Opens the index in `dir` (normally [`StoreConfig::index_dir`]), loading its files in name
    /// order. After an abnormal exit (`last_exit_ok` false), files whose end timestamp is after
    /// `checkpoint_index_timestamp` are deleted: the dispatch service rebuilds them from the
    /// CommitLog. Empty files (a crash while creating one) are deleted. Java:
    /// `IndexService#load`.
    ///
    /// # Errors
    /// `InvalidInput` when `maxHashSlotNum` or `maxIndexNum` is out of range (`maxIndexNum`
    /// must be at least 2: entry 0 is never used); `InvalidData` for a file whose size does not
    /// match them; I/O errors.
    pub fn load(
        dir: &Path,
        config: &StoreConfig,
        last_exit_ok: bool,
        checkpoint_index_timestamp: i64,
    ) -> io::Result<IndexService> {
        let (hash_slot_num, index_num) = (config.max_hash_slot_num, config.max_index_num);
        let in_range = |n: u32| (1..=i32::MAX as u32).contains(&n);
        if !in_range(hash_slot_num) || !in_range(index_num) || index_num < 2 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "maxHashSlotNum {hash_slot_num} must be 1..=2147483647 and maxIndexNum {index_num} 2..=2147483647"
                ),
            ));
        }
        let size = index_file_size(hash_slot_num, index_num).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "index file size does not fit in memory addresses")
        })?;
        std::fs::create_dir_all(dir)?;
        let mut files = Vec::new();
        for path in index_file_paths(dir)? {
            if std::fs::metadata(&path)?.len() == 0 {
                warn!(file = %path.display(), "deleting empty index file left by an interrupted creation");
                std::fs::remove_file(&path)?;
                continue;
            }
            let file = IndexFile::load(&path, hash_slot_num, index_num)?;
            if !last_exit_ok && file.end_timestamp() > checkpoint_index_timestamp {
                info!(
                    file = %path.display(),
                    end_timestamp = file.end_timestamp(),
                    checkpoint_index_timestamp,
                    "deleting index file newer than the checkpoint after an abnormal exit"
                );
                file.destroy()?;
                continue;
            }
            debug!(file = %path.display(), "index file loaded");
            files.push(Arc::new(RwLock::new(file)));
        }
        if !files.is_empty() {
            info!(dir = %dir.display(), files = files.len(), file_size_bytes = size, "index files loaded");
        }
        Ok(IndexService {
            dir: dir.to_owned(),
            hash_slot_num,
            index_num,
            max_msgs_num_batch: config.max_msgs_num_batch as usize,
            enabled: config.message_index_enable,
            files: RwLock::new(files),
            writer: Mutex::new(()),
        })
    }

    /// Creates the first index file of an empty index ahead of the first message, so the
    /// first dispatch (and with it the first message's visibility to consumers) does not wait
    /// for a file to be created and mapped. A failure (a full disk) is left to the first
    /// dispatch, which tries again and reports it.
    pub fn prepare(&self) {
        if !self.enabled {
            return;
        }
        let _writer = self.lock_writer();
        if read_list(&self.files).is_empty() {
            if let Err(e) = self.create_file(0, 0) {
                debug!(dir = %self.dir.display(), error = %e, "first index file not prepared");
            }
        }
    }

    /// Indexes one dispatched record: `topic#UNIQ_KEY` when present and `topic#key` for each
    /// space-separated key in KEYS, rolling to a new file when the last is full. Does nothing
    /// when `messageIndexEnable` is false, for rolled-back transaction records, and for records
    /// before the last file's end offset (already indexed, re-dispatched after a crash). Java:
    /// `IndexService#buildIndex`.
    ///
    /// # Errors
    /// I/O errors creating a new file; keys put before the error stay indexed.
    pub fn build_index(&self, req: &DispatchRequest) -> io::Result<()> {
        if !self.enabled || transaction_value(req.sys_flag) == TRANSACTION_ROLLBACK_TYPE {
            return Ok(());
        }
        let uniq_key = req.uniq_key.as_deref().filter(|key| !key.is_empty());
        let keys = req.keys.as_deref().unwrap_or_default().split(KEY_SEPARATOR).filter(|key| !key.is_empty());
        let _writer = self.lock_writer();
        let mut file = read_list(&self.files).last().cloned();
        if let Some(last) = &file {
            let last = read_file(last);
            let end = last.end_phy_offset();
            // At the end offset itself: that record's keys are in already (a dispatch retried
            // after a consume-queue failure), unless the file is new and unseeded.
            let indexed = req.commit_log_offset == end && (last.index_count() > 1 || end > 0);
            if req.commit_log_offset < end || indexed {
                return Ok(());
            }
        }
        // One buffer for every `topic#key` of the record (`format!` grew a string per key,
        // reallocating it as it went).
        let mut index_key =
            String::with_capacity(req.topic.len() + 1 + req.keys.as_deref().map_or(0, str::len).max(32));
        for key in uniq_key.into_iter().chain(keys) {
            index_key.clear();
            index_key.push_str(&req.topic);
            index_key.push('#');
            index_key.push_str(key);
            file = Some(self.put_key(file, &index_key, req.commit_log_offset, req.store_timestamp)?);
        }
        Ok(())
    }

    /// Offsets of messages whose `topic#key` was indexed with a store time in `[begin_ms,
    /// end_ms]`, newest first, at most `max_num` (capped at `maxMsgsNumBatch`). Searches the
    /// files whose time range overlaps, newest first, and stops at the first file that begins
    /// before `begin_ms`. Java: `IndexService#queryOffset`.
    pub fn query_offsets(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> QueryOffsetResult {
        let max_num = max_num.min(self.max_msgs_num_batch);
        let index_key = format!("{topic}#{key}");
        let mut result = QueryOffsetResult { phy_offsets: Vec::with_capacity(max_num), ..QueryOffsetResult::default() };
        let files = read_list(&self.files);
        for (i, file) in files.iter().rev().enumerate() {
            let file = read_file(file);
            if i == 0 {
                result.index_last_update_timestamp = file.end_timestamp();
                result.index_last_update_phyoffset = file.end_phy_offset();
            }
            if file.is_time_matched(begin_ms, end_ms) {
                file.select_phy_offsets(&index_key, max_num, begin_ms, end_ms, &mut result.phy_offsets);
            }
            if file.begin_timestamp() < begin_ms || result.phy_offsets.len() >= max_num {
                break;
            }
        }
        result
    }

    /// Forces every file written since the last flush to disk, oldest first. Returns the end
    /// timestamp of the newest full file, which the caller may store as the checkpoint's
    /// `indexMsgTimestamp`; `None` while no file is full.
    ///
    /// The file still being written is flushed too but never moves the checkpoint: after an
    /// abnormal exit, [`load`](Self::load) deletes every file that ends after the checkpoint,
    /// and recovery re-dispatches from the checkpoint. A checkpoint inside the current file
    /// would lose that file's keys stored before it. (Java sets the checkpoint only when a
    /// full file is flushed, and flushes the current file only at shutdown.) Flushing the
    /// current file holds its read lock, so `build_index` waits for the `msync`.
    ///
    /// # Errors
    /// The first `msync` failure; later files are not flushed.
    pub fn flush(&self) -> io::Result<Option<i64>> {
        let files: Vec<SharedFile> = read_list(&self.files).clone();
        let mut newest_full_end = None;
        for file in &files {
            let file = read_file(file);
            file.flush()?;
            if file.is_full() {
                newest_full_end = Some(file.end_timestamp());
            }
        }
        Ok(newest_full_end)
    }

    /// Deletes the oldest files whose end offset is below `commit_log_min_offset` (their
    /// messages are gone from the CommitLog), stopping at the first that is not, and never the
    /// newest file. Returns how many were deleted. Java: `IndexService#deleteExpiredFile`.
    ///
    /// # Errors
    /// The first unlink failure (after trying every file); the files are out of service anyway.
    pub fn delete_expired(&self, commit_log_min_offset: i64) -> io::Result<usize> {
        let expired: Vec<SharedFile> = {
            let mut files = write_list(&self.files);
            let candidates = files.len().saturating_sub(1);
            let count = files[..candidates]
                .iter()
                .take_while(|file| read_file(file).end_phy_offset() < commit_log_min_offset)
                .count();
            files.drain(..count).collect()
        };
        let count = expired.len();
        remove_files(expired, "expired")?;
        Ok(count)
    }

    /// Deletes every index file.
    ///
    /// # Errors
    /// The first unlink failure (after trying every file).
    pub fn destroy(&self) -> io::Result<()> {
        let _writer = self.lock_writer();
        let files: Vec<SharedFile> = write_list(&self.files).drain(..).collect();
        remove_files(files, "destroyed")
    }

    /// Number of index files.
    pub fn file_count(&self) -> usize {
        read_list(&self.files).len()
    }

    /// Total size in bytes of the index files.
    pub fn total_size_bytes(&self) -> u64 {
        read_list(&self.files).iter().map(|file| read_file(file).file_size() as u64).sum()
    }

    fn lock_writer(&self) -> MutexGuard<'_, ()> {
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts `key` into `file`, or into a new file when there is none or it is full; returns the
    /// file that took the key. The caller holds the writer lock.
    fn put_key(
        &self,
        file: Option<SharedFile>,
        key: &str,
        phy_offset: i64,
        store_timestamp: i64,
    ) -> io::Result<SharedFile> {
        let file = match file {
            Some(file) => file,
            None => self.create_file(0, 0)?,
        };
        if write_file(&file).put_key(key, phy_offset, store_timestamp)? {
            return Ok(file);
        }
        let (end_phy_offset, end_timestamp) = {
            let full = read_file(&file);
            info!(file = %full.path().display(), "index file is full, creating another");
            (full.end_phy_offset(), full.end_timestamp())
        };
        let next = self.create_file(end_phy_offset, end_timestamp)?;
        if write_file(&next).put_key(key, phy_offset, store_timestamp)? {
            Ok(next)
        } else {
            // `load` refuses `maxIndexNum` < 2, so a new file has room for one key.
            Err(io::Error::other(format!("new index file {} refused a key", read_file(&next).path().display())))
        }
    }

    /// Creates a file named after the current time (bumped past the newest existing name),
    /// seeded with the previous file's end, and appends it to the list. The caller holds the
    /// writer lock. Java: `IndexService#getAndCreateLastIndexFile`.
    fn create_file(&self, end_phy_offset: i64, end_timestamp: i64) -> io::Result<SharedFile> {
        let newest_ms = read_list(&self.files).last().and_then(|file| {
            let file = read_file(file);
            file.path().file_name().and_then(|name| name.to_str()).and_then(file_name_to_ms)
        });
        let mut ms = now_ms();
        if let Some(newest_ms) = newest_ms {
            if newest_ms < FILE_NAME_MS_MAX {
                ms = ms.max(newest_ms + 1);
            }
        }
        for _ in 0..NAME_ATTEMPTS_MAX {
            let path = self.dir.join(ms_to_file_name(ms));
            match IndexFile::create(&path, self.hash_slot_num, self.index_num, end_phy_offset, end_timestamp) {
                Ok(file) => {
                    debug!(file = %path.display(), end_phy_offset, end_timestamp, "index file created");
                    let file = Arc::new(RwLock::new(file));
                    write_list(&self.files).push(file.clone());
                    return Ok(file);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => ms += 1,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("no free index file name in {} after {NAME_ATTEMPTS_MAX} attempts", self.dir.display()),
        ))
    }
}

/// Unlinks files taken out of service; returns the first error after trying them all.
fn remove_files(files: Vec<SharedFile>, why: &str) -> io::Result<()> {
    let mut first_error = None;
    for file in files {
        let path = read_file(&file).path().to_owned();
        // Readers that cloned the file (a flush in progress) keep the mapping until they drop it.
        drop(file);
        match std::fs::remove_file(&path) {
            Ok(()) => info!(file = %path.display(), why, "index file deleted"),
            Err(e) => {
                warn!(file = %path.display(), error = %e, "failed to delete index file");
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Index file paths in `dir`, in name (creation) order; other files are ignored.
fn index_file_paths(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        match name.to_str() {
            Some(name) if name.len() == FILE_NAME_LEN && name.bytes().all(|b| b.is_ascii_digit()) => {
                paths.push(entry.path());
            }
            _ => debug!(dir = %dir.display(), file = ?name, "ignoring non-index file"),
        }
    }
    paths.sort();
    Ok(paths)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(FILE_NAME_MS_MAX))
}

/// `yyyyMMddHHmmssSSS` of `ms` after the epoch, in UTC, clamped to the years 1970..=9999.
/// Java: `UtilAll#timeMillisToHumanString` (which uses local time).
fn ms_to_file_name(ms: i64) -> String {
    let ms = ms.clamp(0, FILE_NAME_MS_MAX);
    let (days, ms_of_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (year, month, day) = civil_from_days(days);
    let (hour, minute) = (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60);
    let (second, milli) = (ms_of_day / 1000 % 60, ms_of_day % 1000);
    format!("{year:04}{month:02}{day:02}{hour:02}{minute:02}{second:02}{milli:03}")
}

/// The instant a `yyyyMMddHHmmssSSS` (UTC) name stands for, or `None` if it is not one.
fn file_name_to_ms(name: &str) -> Option<i64> {
    if name.len() != FILE_NAME_LEN || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let field = |range: std::ops::Range<usize>| name[range].parse::<i64>().ok();
    let (year, month, day) = (field(0..4)?, field(4..6)?, field(6..8)?);
    let (hour, minute, second, milli) = (field(8..10)?, field(10..12)?, field(12..14)?, field(14..17)?);
    let valid = (1..=12).contains(&month) && (1..=31).contains(&day) && hour < 24 && minute < 60 && second < 60;
    if !valid {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + milli)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_utc_yyyymmddhhmmsssss() {
        assert_eq!(ms_to_file_name(0), "19700101000000000");
        // 1700000000 s is 2023-11-14T22:13:20Z.
        assert_eq!(ms_to_file_name(1_700_000_000_123), "20231114221320123");
        // 2024 is a leap year: 2024-02-29T23:59:59.999Z.
        assert_eq!(ms_to_file_name(1_709_251_199_999), "20240229235959999");
        assert_eq!(ms_to_file_name(FILE_NAME_MS_MAX), "99991231235959999");
        assert_eq!(ms_to_file_name(-5), "19700101000000000");
    }

    #[test]
    fn file_names_parse_back_to_their_instant() {
        for ms in [0, 1_700_000_000_123, 1_709_251_199_999, 951_782_400_000, FILE_NAME_MS_MAX] {
            assert_eq!(file_name_to_ms(&ms_to_file_name(ms)), Some(ms), "{ms}");
        }
        assert_eq!(file_name_to_ms("20231314221320123"), None, "month 13");
        assert_eq!(file_name_to_ms("2023111422132012"), None, "16 digits");
        assert_eq!(file_name_to_ms("2023111422132012x"), None);
    }

    #[test]
    fn name_order_is_time_order() {
        let instants = [0, 999, 1000, 59_999, 86_399_999, 86_400_000, 1_700_000_000_123, FILE_NAME_MS_MAX];
        let names: Vec<String> = instants.iter().map(|ms| ms_to_file_name(*ms)).collect();
        assert!(names.windows(2).all(|pair| pair[0] < pair[1]), "{names:?}");
    }
}
