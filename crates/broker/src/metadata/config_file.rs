//! One JSON metadata file under `<storePathRootDir>/config/`, loaded and persisted the way
//! RocketMQ does it (pretty JSON, a `<file>.bak` holding the previous version, falling back to
//! it on load), but crash-safe. Java: `ConfigManager#load`/`#persist`, `MixAll#string2File`.
//!
//! Persisting writes `<file>.tmp`, syncs it, copies the current file to `<file>.bak` (synced),
//! renames the temporary file over the file and syncs the directory: after a crash the file is
//! either the old or the new version, never a torn mix. Java writes the file in place, so a
//! crash can leave it truncated; the `.bak` fallback on load covers files written that way.
//!
//! Loading never drops metadata silently: a file that exists but does not parse, with no
//! backup that parses, is an error, not an empty table.
//!
//! The file also carries a dirty flag, so periodic persistence writes only after a change.
//! This module knows nothing about what the files contain; the managers do.

use std::fs::File;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use serde::de::DeserializeOwned;
use serde::Serialize;
use tracing::{info, warn};

use ferromq_config::file::{parent_dir, sync_dir, with_suffix, write_synced};
use ferromq_protocol::json::parse_lenient;

use crate::metadata::MetadataError;

/// Suffix of the previous version of a file (Java's name).
pub const BACKUP_SUFFIX: &str = ".bak";
pub use ferromq_config::file::TEMP_SUFFIX;

/// Where [`ConfigFile::load`] found the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded<T> {
    /// The file parsed.
    Main(T),
    /// The file was missing, empty or corrupt; its `.bak` parsed (a warning was logged).
    Backup(T),
    /// Neither the file nor its backup exists (or both are empty): start from defaults.
    Missing,
}

impl<T> Loaded<T> {
    /// The table, if one was found.
    pub fn into_value(self) -> Option<T> {
        match self {
            Loaded::Main(value) | Loaded::Backup(value) => Some(value),
            Loaded::Missing => None,
        }
    }

    /// True unless the table came from the file itself, that is the file on disk does not hold
    /// what was loaded and should be rewritten.
    pub fn needs_rewrite(&self) -> bool {
        !matches!(self, Loaded::Main(_))
    }
}

/// One metadata file: its path, a lock that orders writers and a dirty flag.
#[derive(Debug)]
pub struct ConfigFile {
    path: PathBuf,
    write_state: Mutex<WriteState>,
    dirty: AtomicBool,
}

#[derive(Debug, Default)]
struct WriteState {
    /// The file on disk is corrupt and the table came from the backup: the next persist must
    /// not copy the corrupt file over the good backup.
    keep_backup: bool,
}

/// What reading one file found.
enum Contents {
    Missing,
    Empty,
    Bytes(Vec<u8>),
}

impl ConfigFile {
    /// A file at `path` (for example `<storePathRootDir>/config/topics.json`). Nothing is read
    /// or created yet.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), write_state: Mutex::new(WriteState::default()), dirty: AtomicBool::new(false) }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `<file>.bak`.
    pub fn backup_path(&self) -> PathBuf {
        with_suffix(&self.path, BACKUP_SUFFIX)
    }

    /// `<file>.tmp`.
    pub fn temp_path(&self) -> PathBuf {
        with_suffix(&self.path, TEMP_SUFFIX)
    }

    /// Reads the table: the file, else (missing, empty or unparsable) its `.bak`, else
    /// [`Loaded::Missing`]. Input is parsed leniently (fastjson's unquoted integer keys,
    /// unknown keys ignored). Java: `ConfigManager#load`.
    ///
    /// # Errors
    ///
    /// [`MetadataError::Io`] if a file exists but cannot be read;
    /// [`MetadataError::Corrupt`] if the file does not parse and there is no backup;
    /// [`MetadataError::BackupCorrupt`] if the backup is needed and does not parse.
    pub fn load<T: DeserializeOwned>(&self) -> Result<Loaded<T>, MetadataError> {
        let main_error = match read_contents(&self.path)? {
            Contents::Bytes(bytes) => match parse_lenient::<T>(&bytes) {
                Ok(value) => {
                    info!(path = %self.path.display(), "metadata file loaded");
                    return Ok(Loaded::Main(value));
                }
                Err(error) => Some(error),
            },
            Contents::Empty => {
                warn!(path = %self.path.display(), "metadata file is empty, trying its backup");
                None
            }
            Contents::Missing => None,
        };
        if let Some(error) = &main_error {
            warn!(path = %self.path.display(), error = %error, "metadata file is corrupt, trying its backup");
        }
        let backup_path = self.backup_path();
        match read_contents(&backup_path)? {
            Contents::Bytes(bytes) => match parse_lenient::<T>(&bytes) {
                Ok(value) => {
                    warn!(path = %backup_path.display(), "metadata loaded from backup file");
                    // Whatever is in the main file (nothing, blanks, garbage) is worse than the
                    // backup, so the next persist must not copy it over the backup.
                    self.lock_write_state().keep_backup = true;
                    Ok(Loaded::Backup(value))
                }
                Err(source) => Err(MetadataError::BackupCorrupt { path: self.path.clone(), backup_path, source }),
            },
            Contents::Missing | Contents::Empty => match main_error {
                Some(source) => Err(MetadataError::Corrupt { path: self.path.clone(), source }),
                None => {
                    info!(path = %self.path.display(), "metadata file absent, starting from defaults");
                    Ok(Loaded::Missing)
                }
            },
        }
    }

    /// Marks the table changed since the last persist.
    pub fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// True if the table changed since the last successful persist.
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    /// Writes `snapshot()` as pretty JSON, crash-safely (see the module docs), and clears the
    /// dirty flag. Writers are serialized and each takes its snapshot after the previous one
    /// finished, so the file never goes back to an older table.
    ///
    /// Mark the table dirty only after changing it, so a change made while a persist runs is
    /// either in its snapshot or leaves the flag set.
    ///
    /// # Errors
    ///
    /// [`MetadataError::Io`] or [`MetadataError::Encode`]; the table stays dirty, so the next
    /// periodic persist retries.
    pub fn persist<T: Serialize>(&self, snapshot: impl FnOnce() -> T) -> Result<(), MetadataError> {
        let mut state = self.lock_write_state();
        self.dirty.store(false, Ordering::Release);
        let result = serde_json::to_vec_pretty(&snapshot())
            .map_err(|source| MetadataError::Encode { path: self.path.clone(), source })
            .and_then(|json| self.write(&json, state.keep_backup));
        match result {
            Ok(()) => {
                state.keep_backup = false;
                Ok(())
            }
            Err(error) => {
                self.dirty.store(true, Ordering::Release);
                Err(error)
            }
        }
    }

    /// [`ConfigFile::persist`] if the table is dirty. Returns whether it wrote.
    ///
    /// # Errors
    ///
    /// As [`ConfigFile::persist`].
    pub fn persist_if_dirty<T: Serialize>(&self, snapshot: impl FnOnce() -> T) -> Result<bool, MetadataError> {
        if !self.is_dirty() {
            return Ok(false);
        }
        self.persist(snapshot).map(|()| true)
    }

    fn write(&self, json: &[u8], keep_backup: bool) -> Result<(), MetadataError> {
        let dir = parent_dir(&self.path);
        std::fs::create_dir_all(&dir).map_err(|source| MetadataError::Io { path: dir.clone(), source })?;
        let temp = self.temp_path();
        if let Err(error) = write_synced(&temp, json) {
            // Best effort: a stale temporary file is harmless (the next persist truncates it).
            let _ = std::fs::remove_file(&temp);
            return Err(error.into());
        }
        if !keep_backup {
            self.back_up_current()?;
        }
        std::fs::rename(&temp, &self.path).map_err(|source| MetadataError::Io { path: self.path.clone(), source })?;
        Ok(sync_dir(&dir)?)
    }

    /// Copies the current file to `<file>.bak` and syncs the copy. No current file, no copy.
    fn back_up_current(&self) -> Result<(), MetadataError> {
        let backup = self.backup_path();
        match std::fs::copy(&self.path, &backup) {
            Ok(_) => {}
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
            Err(source) => return Err(MetadataError::Io { path: backup, source }),
        }
        File::open(&backup)
            .and_then(|file| file.sync_all())
            .map_err(|source| MetadataError::Io { path: backup, source })
    }

    fn lock_write_state(&self) -> std::sync::MutexGuard<'_, WriteState> {
        // The state is one flag that is always valid; a panic elsewhere cannot corrupt it.
        self.write_state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn read_contents(path: &Path) -> Result<Contents, MetadataError> {
    match std::fs::read(path) {
        Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Ok(Contents::Empty),
        Ok(bytes) => Ok(Contents::Bytes(bytes)),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(Contents::Missing),
        Err(source) => Err(MetadataError::Io { path: path.to_owned(), source }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    type Table = BTreeMap<String, i64>;

    fn table(entries: &[(&str, i64)]) -> Table {
        entries.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn missing_file_and_backup_load_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let file = ConfigFile::new(dir.path().join("config/t.json"));
        assert_eq!(file.load::<Table>().unwrap(), Loaded::Missing);
    }

    #[test]
    fn second_persist_keeps_first_version_as_backup() {
        let dir = tempfile::tempdir().unwrap();
        let file = ConfigFile::new(dir.path().join("config/t.json"));
        file.persist(|| table(&[("a", 1)])).unwrap();
        assert!(!file.backup_path().exists());
        file.persist(|| table(&[("a", 2)])).unwrap();
        let backup: Table = serde_json::from_slice(&std::fs::read(file.backup_path()).unwrap()).unwrap();
        assert_eq!(backup, table(&[("a", 1)]));
        assert_eq!(file.load::<Table>().unwrap(), Loaded::Main(table(&[("a", 2)])));
        assert!(!file.temp_path().exists());
    }

    #[test]
    fn persist_after_loading_from_backup_keeps_the_good_backup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let file = ConfigFile::new(&path);
        file.persist(|| table(&[("a", 1)])).unwrap();
        file.persist(|| table(&[("a", 2)])).unwrap();
        std::fs::write(&path, b"{\"a\":").unwrap();

        let file = ConfigFile::new(&path);
        assert_eq!(file.load::<Table>().unwrap(), Loaded::Backup(table(&[("a", 1)])));
        file.persist(|| table(&[("a", 3)])).unwrap();
        let backup: Table = serde_json::from_slice(&std::fs::read(file.backup_path()).unwrap()).unwrap();
        assert_eq!(backup, table(&[("a", 1)]), "the corrupt file must not replace the backup");
        file.persist(|| table(&[("a", 4)])).unwrap();
        let backup: Table = serde_json::from_slice(&std::fs::read(file.backup_path()).unwrap()).unwrap();
        assert_eq!(backup, table(&[("a", 3)]));
    }

    #[test]
    fn dirty_flag_is_cleared_by_persist_and_set_again_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        // The parent "directory" is a regular file, so writing fails.
        std::fs::write(dir.path().join("blocker"), b"x").unwrap();
        let file = ConfigFile::new(dir.path().join("blocker/t.json"));
        file.mark_dirty();
        assert!(matches!(file.persist_if_dirty(|| table(&[])), Err(MetadataError::Io { .. })));
        assert!(file.is_dirty());

        let file = ConfigFile::new(dir.path().join("ok/t.json"));
        assert!(!file.persist_if_dirty(|| table(&[])).unwrap());
        file.mark_dirty();
        assert!(file.persist_if_dirty(|| table(&[])).unwrap());
        assert!(!file.is_dirty());
    }

    #[test]
    fn output_is_pretty_json() {
        let dir = tempfile::tempdir().unwrap();
        let file = ConfigFile::new(dir.path().join("t.json"));
        file.persist(|| table(&[("a", 1)])).unwrap();
        assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "{\n  \"a\": 1\n}");
    }
}
