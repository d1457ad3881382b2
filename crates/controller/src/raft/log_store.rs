//! The Raft log and vote in files (module docs of [`crate::raft`]).
//!
//! The controller's log is small (a few events per broker registration or election, and purged
//! at every snapshot), so every live entry is also kept in memory: reads never touch the disk,
//! and the rare truncation (a follower's conflicting suffix) or purge rewrites the file through
//! a temporary file.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use ferromq_config::file::{replace_file, sync_dir};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{LogId, OptionalSend, RaftLogId, RaftLogReader, StorageIOError, Vote};
use tracing::warn;

use super::{StorageError, TypeConfig};

type Entry = openraft::Entry<TypeConfig>;

/// Largest record accepted when reading the log back: anything larger is a torn or corrupt
/// length, not an entry (entries are a few events).
const MAX_RECORD: usize = 16 << 20;

struct Inner {
    dir: PathBuf,
    log: File,
    entries: BTreeMap<u64, Entry>,
    vote: Option<Vote<u64>>,
    committed: Option<LogId<u64>>,
    last_purged: Option<LogId<u64>>,
}

/// The log store; clones share it (openraft's log reader is a clone).
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<Inner>>,
}

impl Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore").finish_non_exhaustive()
    }
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| io_err(format!("{} does not parse: {e}", path.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(io_err)?;
    replace_file(path, &bytes).map_err(|e| io::Error::new(e.source.kind(), e.to_string()))
}

fn encode_record(entry: &Entry, out: &mut Vec<u8>) -> io::Result<()> {
    let json = serde_json::to_vec(entry).map_err(io_err)?;
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&json).to_le_bytes());
    out.extend_from_slice(&json);
    Ok(())
}

/// The entries of a log file, and the length of its valid prefix (a torn tail is dropped).
fn decode_records(bytes: &[u8]) -> (Vec<Entry>, usize) {
    let mut entries = Vec::new();
    let mut pos = 0;
    while bytes.len() - pos >= 8 {
        let len = u32::from_le_bytes([bytes[pos], bytes[pos + 1], bytes[pos + 2], bytes[pos + 3]]) as usize;
        let crc = u32::from_le_bytes([bytes[pos + 4], bytes[pos + 5], bytes[pos + 6], bytes[pos + 7]]);
        let Some(json) = bytes.get(pos + 8..pos + 8 + len).filter(|_| len <= MAX_RECORD) else { break };
        if crc32fast::hash(json) != crc {
            break;
        }
        let Ok(entry) = serde_json::from_slice::<Entry>(json) else { break };
        entries.push(entry);
        pos += 8 + len;
    }
    (entries, pos)
}

impl LogStore {
    /// Opens (or creates) the log under `dir`, cutting off a record torn by a crash.
    ///
    /// # Errors
    /// The directory or a file cannot be read or written; the vote or purge marker is corrupt.
    pub fn open(dir: &Path) -> io::Result<LogStore> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("log");
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let (list, valid) = decode_records(&bytes);
        let log = OpenOptions::new().create(true).append(true).open(&path)?;
        if valid < bytes.len() {
            warn!(file = %path.display(), at = valid, dropped = bytes.len() - valid, "cutting a torn record off the raft log");
            log.set_len(valid as u64)?;
            log.sync_all()?;
        }
        let last_purged: Option<LogId<u64>> = read_json(&dir.join("purged"))?;
        let entries = list
            .into_iter()
            .filter(|e| last_purged.is_none_or(|p| e.log_id.index > p.index))
            .map(|e| (e.log_id.index, e))
            .collect();
        Ok(LogStore {
            inner: Arc::new(Mutex::new(Inner {
                dir: dir.to_owned(),
                log,
                entries,
                vote: read_json(&dir.join("vote"))?,
                committed: read_json(&dir.join("committed"))?,
                last_purged,
            })),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    /// Replaces the log file with the entries held in memory.
    fn rewrite(&mut self) -> io::Result<()> {
        let mut bytes = Vec::new();
        for e in self.entries.values() {
            encode_record(e, &mut bytes)?;
        }
        let path = self.dir.join("log");
        replace_file(&path, &bytes).map_err(|e| io::Error::new(e.source.kind(), e.to_string()))?;
        self.log = OpenOptions::new().append(true).open(&path)?;
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(self.lock().entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let inner = self.lock();
        let last = inner.entries.values().next_back().map(|e| *e.get_log_id()).or(inner.last_purged);
        Ok(LogState { last_purged_log_id: inner.last_purged, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError> {
        let mut inner = self.lock();
        write_json(&inner.dir.join("vote"), vote).map_err(|e| StorageIOError::write_vote(&e))?;
        inner.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError> {
        Ok(self.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<(), StorageError> {
        let mut inner = self.lock();
        write_json(&inner.dir.join("committed"), &committed).map_err(|e| StorageIOError::write(&e))?;
        inner.committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, StorageError> {
        Ok(self.lock().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut inner = self.lock();
        let mut bytes = Vec::new();
        let mut added = Vec::new();
        for e in entries {
            encode_record(&e, &mut bytes).map_err(|err| StorageIOError::write_log_entry(*e.get_log_id(), &err))?;
            added.push(e);
        }
        // Durable before openraft counts the entries as stored (and a leader counts this node
        // toward a quorum).
        let written = inner.log.write_all(&bytes).and_then(|()| inner.log.sync_data());
        if let Err(e) = written {
            let err = StorageIOError::write_logs(&e);
            callback.log_io_completed(Err(e));
            return Err(err.into());
        }
        for e in added {
            inner.entries.insert(e.log_id.index, e);
        }
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), StorageError> {
        let mut inner = self.lock();
        inner.entries.split_off(&log_id.index);
        inner.rewrite().map_err(|e| StorageIOError::write_logs(&e))?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), StorageError> {
        let mut inner = self.lock();
        // The marker first: after a crash between the two writes, opening drops the purged
        // entries that are still in the file.
        write_json(&inner.dir.join("purged"), &log_id).map_err(|e| StorageIOError::write_logs(&e))?;
        inner.last_purged = Some(log_id);
        let keep = inner.entries.split_off(&(log_id.index + 1));
        inner.entries = keep;
        inner.rewrite().map_err(|e| StorageIOError::write_logs(&e))?;
        let dir = inner.dir.clone();
        sync_dir(&dir).map_err(|e| StorageIOError::write_logs(&io::Error::new(e.source.kind(), e.to_string())))?;
        Ok(())
    }
}
