//! An append-only change log next to a metadata file (`<file>.journal`, one JSON record per
//! line), so a change costs one small append instead of rewriting the whole file: creating the
//! 10,000th topic then costs what the first did. The periodic persist (compaction) writes the
//! whole table to the file and drops the records it covers.
//!
//! Invariant: the file's table plus the journal's records, applied in order, is the table as it
//! is in memory. Records are appended in the order of the changes they describe, so replaying
//! records the file already covers is harmless: each topic ends up as its last record says,
//! which is what the file holds for it too.
//!
//! Durability: [`JournalWriter::append`] returns once the line is written, so a killed process
//! keeps it (the page cache does); a background thread fdatasyncs the journal right after,
//! one sync covering every line appended before it ([`crate::metadata::journal_sync`]). Java
//! rewrites the whole file on every change and never syncs.
//!
//! Java has no such file: a Java broker started on this store directory after a crash reads
//! only the file, without the changes since the last compaction (a clean shutdown compacts,
//! leaving an empty journal).

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::warn;

use ferromq_config::file::{parent_dir, sync_dir, with_suffix, write_synced};

use crate::metadata::config_file::ConfigFile;
use crate::metadata::journal_sync::Syncer;
use crate::metadata::MetadataError;

/// Suffix of a metadata file's journal.
pub const JOURNAL_SUFFIX: &str = ".journal";

/// The change log of one metadata file.
#[derive(Debug)]
pub struct ConfigJournal {
    path: PathBuf,
    writer: Mutex<JournalWriter>,
}

/// Holds the journal's lock: a table change made while holding it and appended through it is
/// ordered with every other change.
#[derive(Debug)]
pub struct JournalWriter {
    path: PathBuf,
    file: Arc<File>,
    /// Bytes in the file: every complete record.
    len: u64,
    syncer: Syncer,
    /// The last append's sequence number, for [`JournalWriter::wait_durable`].
    last_seq: u64,
}

impl ConfigJournal {
    /// Opens (creating if needed) the journal of the metadata file at `file_path` and returns
    /// the records it holds. A torn or unparsable line ends the log: it and anything after it
    /// is cut off with a warning (only a crash in the middle of an append, never acknowledged,
    /// leaves one).
    ///
    /// # Errors
    ///
    /// [`MetadataError::Io`] if the journal cannot be read, cut or opened.
    pub fn open<R: DeserializeOwned>(file_path: &Path) -> Result<(Self, Vec<R>), MetadataError> {
        let path = with_suffix(file_path, JOURNAL_SUFFIX);
        let io = |source| MetadataError::Io { path: path.clone(), source };
        let dir = parent_dir(&path);
        std::fs::create_dir_all(&dir).map_err(|source| MetadataError::Io { path: dir.clone(), source })?;
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(&path).map_err(io)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        let (records, valid) = parse_records::<R>(&bytes, &path);
        if valid < bytes.len() {
            warn!(path = %path.display(), kept = valid, dropped = bytes.len() - valid,
                "metadata journal ends with an incomplete record; cut off");
            file.set_len(valid as u64).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        let file = Arc::new(file);
        let name = file_path.file_name().map_or_else(|| "journal".to_owned(), |n| n.to_string_lossy().into_owned());
        let syncer = Syncer::start(&name);
        syncer.set_file(file.clone());
        let writer = JournalWriter { path: path.clone(), file, len: valid as u64, syncer, last_seq: 0 };
        Ok((Self { path, writer: Mutex::new(writer) }, records))
    }

    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Locks the journal for a change.
    pub fn lock(&self) -> MutexGuard<'_, JournalWriter> {
        // A panic mid-append leaves at worst a torn last line, which `open` cuts off.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A metadata file kept with its journal (topics.json, subscriptionGroup.json): each change
/// is made in memory and appended to the journal under its lock ([`JournaledFile::lock`],
/// [`JournaledFile::append`]); a persist writes the whole table and drops the records it
/// covers. The table itself stays with its manager.
#[derive(Debug)]
pub struct JournaledFile {
    file: ConfigFile,
    journal: ConfigJournal,
    /// Serializes compactions (the periodic persist against shutdown or a slave's sync).
    compaction: Mutex<()>,
}

impl JournaledFile {
    /// `file` (loaded already) with the journal beside it, and the changes the journal holds,
    /// to be replayed over what the file held; when there are any the file is marked dirty, so
    /// the next persist writes them into it.
    ///
    /// # Errors
    /// As [`ConfigJournal::open`].
    pub fn open<R: DeserializeOwned>(file: ConfigFile) -> Result<(JournaledFile, Vec<R>), MetadataError> {
        let (journal, changes) = ConfigJournal::open::<R>(file.path())?;
        if !changes.is_empty() {
            file.mark_dirty();
        }
        Ok((JournaledFile { file, journal, compaction: Mutex::new(()) }, changes))
    }

    /// The metadata file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The journal's path.
    pub fn journal_path(&self) -> &Path {
        self.journal.path()
    }

    /// Locks the journal for a change: make it in memory, then [`JournaledFile::append`] it,
    /// both while holding this.
    pub fn lock(&self) -> MutexGuard<'_, JournalWriter> {
        self.journal.lock()
    }

    /// Appends `change` (already made in memory) to the journal and marks the file dirty.
    ///
    /// # Errors
    /// As [`JournalWriter::append`] (the change stays in memory; the next persist writes it).
    pub fn append<R: Serialize>(&self, journal: &mut JournalWriter, change: &R) -> Result<(), MetadataError> {
        self.file.mark_dirty();
        journal.append(change)
    }

    /// Marks the file as behind the table.
    pub fn mark_dirty(&self) {
        self.file.mark_dirty();
    }

    /// Writes the file now (synced, crash-safe) and drops the journal records it covers.
    /// Changes go on meanwhile: `snapshot` copies the table under the journal's lock, the file is
    /// written without it, and only the records appended before the copy are dropped.
    ///
    /// # Errors
    /// As [`ConfigFile::persist`]; journal rewrite failures (the journal then keeps records the
    /// file covers, which replay harmlessly).
    pub fn persist<T: Serialize>(&self, snapshot: impl FnOnce() -> T) -> Result<(), MetadataError> {
        let _compacting = self.compaction.lock().unwrap_or_else(PoisonError::into_inner);
        let (snapshot, mark) = {
            let journal = self.journal.lock();
            (snapshot(), journal.len())
        };
        self.file.persist(|| snapshot)?;
        let mut journal = self.journal.lock();
        journal.drop_before(mark)?;
        if !journal.is_empty() {
            // Changes made after the copy: the file does not hold them yet.
            self.file.mark_dirty();
        }
        Ok(())
    }

    /// [`JournaledFile::persist`] if the table changed since the last write; returns whether
    /// it wrote.
    ///
    /// # Errors
    /// As [`JournaledFile::persist`].
    pub fn persist_if_dirty<T: Serialize>(&self, snapshot: impl FnOnce() -> T) -> Result<bool, MetadataError> {
        if !self.file.is_dirty() {
            return Ok(false);
        }
        self.persist(snapshot).map(|()| true)
    }

    /// Blocks until every change made so far is on disk (the journal's background sync
    /// covers it).
    pub fn wait_durable(&self) {
        self.journal.lock().wait_durable();
    }

    /// Changes the whole table without journal records (a slave taking its master's table):
    /// `change` runs with the journal locked and returns `None` when there is nothing to do;
    /// otherwise the file is rewritten from `snapshot` and the journal emptied before the lock
    /// is let go, so no change can slip in between.
    ///
    /// # Errors
    /// As [`JournaledFile::persist`] (the changed table stays in memory and the file dirty).
    pub fn replace<S, T: Serialize>(
        &self,
        change: impl FnOnce() -> Option<S>,
        snapshot: impl FnOnce() -> T,
    ) -> Result<Option<S>, MetadataError> {
        let _compacting = self.compaction.lock().unwrap_or_else(PoisonError::into_inner);
        let mut journal = self.journal.lock();
        let Some(summary) = change() else { return Ok(None) };
        self.file.mark_dirty();
        self.file.persist(snapshot)?;
        let end = journal.len();
        journal.drop_before(end)?;
        Ok(Some(summary))
    }
}

impl JournalWriter {
    /// Appends `record` as one line; returns once it is written (not yet synced). A failed
    /// write is cut back off, so the journal never holds a torn line followed by good ones.
    ///
    /// # Errors
    ///
    /// Encoding or I/O failures.
    pub fn append<R: Serialize>(&mut self, record: &R) -> Result<(), MetadataError> {
        let mut line =
            serde_json::to_vec(record).map_err(|source| MetadataError::Encode { path: self.path.clone(), source })?;
        line.push(b'\n');
        if let Err(source) = (&*self.file).write_all(&line) {
            // Best effort; if this fails too, `open` cuts the torn line at the next start.
            let _ = self.file.set_len(self.len);
            return Err(MetadataError::Io { path: self.path.clone(), source });
        }
        self.len += line.len() as u64;
        self.last_seq = self.syncer.appended();
        Ok(())
    }

    /// Bytes of records in the journal: a mark for [`JournalWriter::drop_before`].
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if the journal holds no record.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Blocks until every record appended so far is on disk.
    pub fn wait_durable(&self) {
        self.syncer.wait_synced(self.last_seq);
    }

    /// Drops the records before byte `mark` (a compaction wrote a file covering them), keeping
    /// those appended since. With none since, the journal is truncated; otherwise the kept
    /// records are written to a new file (synced) that replaces it. A crash in between leaves
    /// the old journal, whose extra records the file already covers.
    ///
    /// # Errors
    ///
    /// I/O failures; the journal is then left as it was.
    pub fn drop_before(&mut self, mark: u64) -> Result<(), MetadataError> {
        let io = |source| MetadataError::Io { path: self.path.clone(), source };
        let mark = mark.min(self.len);
        if mark == 0 {
            return Ok(());
        }
        if mark == self.len {
            self.file.set_len(0).map_err(io)?;
            self.file.sync_all().map_err(io)?;
            self.len = 0;
            return Ok(());
        }
        let mut tail = Vec::with_capacity((self.len - mark) as usize);
        let mut reader = File::open(&self.path).map_err(io)?;
        reader.seek(SeekFrom::Start(mark)).map_err(io)?;
        reader.take(self.len - mark).read_to_end(&mut tail).map_err(io)?;
        let temp = with_suffix(&self.path, ".tmp");
        write_synced(&temp, &tail)?;
        std::fs::rename(&temp, &self.path).map_err(io)?;
        sync_dir(&parent_dir(&self.path))?;
        let file = OpenOptions::new().read(true).append(true).open(&self.path).map_err(io)?;
        self.file = Arc::new(file);
        self.syncer.set_file(self.file.clone());
        self.len = tail.len() as u64;
        Ok(())
    }
}

/// The records of `bytes` and the length of the part made of complete, parsable lines.
fn parse_records<R: DeserializeOwned>(bytes: &[u8], path: &Path) -> (Vec<R>, usize) {
    let mut records = Vec::new();
    let mut valid = 0;
    while valid < bytes.len() {
        let Some(end) = bytes[valid..].iter().position(|b| *b == b'\n') else { break };
        match serde_json::from_slice::<R>(&bytes[valid..valid + end]) {
            Ok(record) => records.push(record),
            Err(e) => {
                warn!(path = %path.display(), offset = valid, error = %e, "unreadable metadata journal record");
                break;
            }
        }
        valid += end + 1;
    }
    (records, valid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_reopen_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config/t.json");
        let (journal, records) = ConfigJournal::open::<u32>(&file).unwrap();
        assert!(records.is_empty());
        for i in 0..5u32 {
            journal.lock().append(&i).unwrap();
        }
        journal.lock().wait_durable();
        drop(journal);
        let path = with_suffix(&file, JOURNAL_SUFFIX);
        let mut raw = OpenOptions::new().append(true).open(&path).unwrap();
        raw.write_all(b"12").unwrap(); // a crash in the middle of an append
        drop(raw);
        let (journal, records) = ConfigJournal::open::<u32>(&file).unwrap();
        assert_eq!(records, [0, 1, 2, 3, 4]);
        journal.lock().append(&5).unwrap();
        drop(journal);
        let (_, records) = ConfigJournal::open::<u32>(&file).unwrap();
        assert_eq!(records, [0, 1, 2, 3, 4, 5], "the torn line was cut before the next append");
    }

    #[test]
    fn drop_before_keeps_only_later_records() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.json");
        let (journal, _) = ConfigJournal::open::<u32>(&file).unwrap();
        let mut w = journal.lock();
        w.append(&1).unwrap();
        w.append(&2).unwrap();
        let mark = w.len();
        w.append(&3).unwrap();
        w.drop_before(mark).unwrap();
        w.append(&4).unwrap();
        drop(w);
        drop(journal);
        let (journal, records) = ConfigJournal::open::<u32>(&file).unwrap();
        assert_eq!(records, [3, 4]);
        let mut w = journal.lock();
        let end = w.len();
        w.drop_before(end).unwrap();
        assert!(w.is_empty());
        drop(w);
        drop(journal);
        assert!(ConfigJournal::open::<u32>(&file).unwrap().1.is_empty());
    }
}
