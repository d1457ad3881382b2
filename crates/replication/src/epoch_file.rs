//! The epoch file of controller mode (`epochFileCheckpoint`, controller-mode.md §6.2-6.3): which
//! master epoch wrote which range of the CommitLog. A slave compares it with its master's to find
//! the last offset both logs agree on and truncates what it wrote past that.
//!
//! The file is Java's `CheckpointFile` text, so a store moves between Java and FerroMQ brokers:
//!
//! ```text
//! 2            number of entries
//! 447245663    CRC32 of the entry lines (each with its "\n") & 0x7FFFFFFF; 0 = not checked
//! 1-0          <epoch>-<startOffset>, oldest first
//! 2-1048576
//! ```
//!
//! End offsets are not stored: an epoch ends where the next one starts, and the last one at the
//! CommitLog's max offset. Writing goes through `<file>.tmp` (synced, renamed over the file, the
//! directory synced) and keeps the previous version as `<file>.bak`; reading falls back to the
//! `.bak` when the file is missing its lines, fails its checksum or does not parse. When a
//! truncation empties the list the file and its backup are removed (Java leaves the file as it
//! was, so a restart would read epochs whose data is gone).

use std::path::{Path, PathBuf};

use ferromq_config::file::{parent_dir, replace_file, with_suffix, write_synced, FileError};
use ferromq_protocol::message::crc32_masked;

/// Suffix of the previous version (Java's name).
const BACKUP_SUFFIX: &str = ".bak";

/// One epoch: the master epoch and the first CommitLog offset it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The master epoch.
    pub epoch: i32,
    /// The first CommitLog offset written in it.
    pub start_offset: i64,
}

/// Why an epoch file could not be read or an entry not added.
#[derive(Debug, thiserror::Error)]
pub enum EpochFileError {
    /// Reading or writing the file failed.
    #[error(transparent)]
    File(#[from] FileError),
    /// Neither the file nor its `.bak` holds a valid epoch list.
    #[error("epoch file {path} is corrupt ({reason}) and has no valid backup; move it away to start this broker's epochs afresh (it then copies its master from scratch)")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An entry that does not come after the last one.
    #[error("epoch {epoch} at offset {start_offset} does not follow epoch {last_epoch} at offset {last_start}")]
    NotAfterLast {
        /// The epoch offered.
        epoch: i32,
        /// Its start offset.
        start_offset: i64,
        /// The last epoch held.
        last_epoch: i32,
        /// Its start offset.
        last_start: i64,
    },
}

/// The epoch list, in memory, with the file it is kept in.
#[derive(Debug)]
pub struct EpochFile {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl EpochFile {
    /// Loads the list at `path` (falling back to `<path>.bak`); a missing file is an empty list.
    ///
    /// # Errors
    /// [`EpochFileError::Corrupt`] when the file exists but neither it nor its backup is valid.
    pub fn load(path: &Path) -> Result<EpochFile, EpochFileError> {
        let read = |p: &Path| match std::fs::read_to_string(p) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(FileError::at(p)(e)),
        };
        let entries = match read(path)?.as_deref().map(parse) {
            Some(Ok(entries)) => entries,
            main => match (read(&with_suffix(path, BACKUP_SUFFIX))?.as_deref().map(parse), main) {
                (Some(Ok(entries)), Some(Err(reason))) => {
                    tracing::warn!(file = %path.display(), reason, "epoch file corrupt, read its .bak");
                    entries
                }
                (Some(Ok(entries)), _) => entries,
                (_, Some(Err(reason))) => return Err(EpochFileError::Corrupt { path: path.to_owned(), reason }),
                (_, _) => Vec::new(),
            },
        };
        Ok(EpochFile { path: path.to_owned(), entries })
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest entry.
    pub fn last(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// Where epoch `epoch` ends: the next epoch's start, or `max_offset` for the newest.
    pub fn end_offset(&self, epoch: i32, max_offset: i64) -> Option<i64> {
        let i = self.entries.iter().position(|e| e.epoch == epoch)?;
        Some(self.entries.get(i + 1).map_or(max_offset, |next| next.start_offset))
    }

    /// Adds a new epoch (a broker became master, or its master's data of a newer epoch
    /// arrived) and persists the list.
    ///
    /// # Errors
    /// [`EpochFileError::NotAfterLast`] for an epoch not newer than the last, or starting
    /// before it; the file could not be written.
    pub fn append(&mut self, epoch: i32, start_offset: i64) -> Result<(), EpochFileError> {
        if let Some(last) = self.last() {
            if epoch <= last.epoch || start_offset < last.start_offset {
                return Err(EpochFileError::NotAfterLast {
                    epoch,
                    start_offset,
                    last_epoch: last.epoch,
                    last_start: last.start_offset,
                });
            }
        }
        self.entries.push(EpochEntry { epoch, start_offset });
        self.persist()
    }

    /// Drops every epoch that starts at or after `offset` (the CommitLog was truncated to
    /// `offset`) and persists the list.
    ///
    /// # Errors
    /// The file could not be written.
    pub fn truncate_from_offset(&mut self, offset: i64) -> Result<(), EpochFileError> {
        self.entries.retain(|e| e.start_offset < offset);
        self.persist()
    }

    /// The last offset this log (ending at `local_max`) and another (`other`, ending at
    /// `other_max`) agree on; see [`consistent_point`].
    pub fn consistent_point(&self, local_max: i64, other: &[EpochEntry], other_max: i64) -> Option<i64> {
        consistent_point(&self.entries, local_max, other, other_max)
    }

    /// Writes the list: `<file>.tmp`, then the current file copied to `<file>.bak`, then the
    /// rename. An empty list removes the file and its backup.
    fn persist(&self) -> Result<(), EpochFileError> {
        if self.entries.is_empty() {
            for p in [self.path.clone(), with_suffix(&self.path, BACKUP_SUFFIX)] {
                match std::fs::remove_file(&p) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(FileError::at(&p)(e).into()),
                    _ => {}
                }
            }
            return Ok(());
        }
        std::fs::create_dir_all(parent_dir(&self.path)).map_err(FileError::at(&parent_dir(&self.path)))?;
        match std::fs::read(&self.path) {
            Ok(previous) => write_synced(&with_suffix(&self.path, BACKUP_SUFFIX), &previous)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(FileError::at(&self.path)(e).into()),
        }
        replace_file(&self.path, encode(&self.entries).as_bytes())?;
        Ok(())
    }
}

/// The last offset two logs agree on, given their epochs (oldest first) and ends: the newest
/// epoch both hold with the same start offset, up to the earlier of its two ends (an epoch ends
/// where the next one starts, the newest at the log's end). `None` when they share no epoch:
/// the replica cannot be reconciled by truncation. Java: `EpochFileCache#findConsistentPoint`.
pub fn consistent_point(local: &[EpochEntry], local_max: i64, other: &[EpochEntry], other_max: i64) -> Option<i64> {
    let end = |list: &[EpochEntry], i: usize, max: i64| list.get(i + 1).map_or(max, |next| next.start_offset);
    for (i, l) in local.iter().enumerate().rev() {
        let Some(j) = other.iter().position(|o| o.epoch == l.epoch) else { continue };
        if other[j].start_offset != l.start_offset {
            continue;
        }
        return Some(end(local, i, local_max).min(end(other, j, other_max)));
    }
    None
}

/// The file's text for `entries`.
pub fn encode(entries: &[EpochEntry]) -> String {
    let lines: String = entries.iter().map(|e| format!("{}-{}\n", e.epoch, e.start_offset)).collect();
    format!("{}\n{}\n{lines}", entries.len(), crc32_masked(lines.as_bytes()))
}

/// Parses the file's text; the reason when it is not a valid list.
fn parse(text: &str) -> Result<Vec<EpochEntry>, String> {
    let mut lines = text.lines();
    let count: usize = lines.next().and_then(|l| l.trim().parse().ok()).ok_or("no entry count on line 1")?;
    let crc: u32 = lines.next().and_then(|l| l.trim().parse().ok()).ok_or("no checksum on line 2")?;
    let mut entries = Vec::with_capacity(count.min(1 << 16));
    let mut body = String::new();
    for line in lines.map(str::trim).filter(|l| !l.is_empty()) {
        let (epoch, start) = line.split_once('-').ok_or_else(|| format!("entry {line:?} is not <epoch>-<offset>"))?;
        let entry = EpochEntry {
            epoch: epoch.parse().map_err(|_| format!("epoch {epoch:?} is not a number"))?,
            start_offset: start.parse().map_err(|_| format!("offset {start:?} is not a number"))?,
        };
        entries.push(entry);
        body.push_str(line);
        body.push('\n');
    }
    if entries.len() != count {
        return Err(format!("{} entries where line 1 says {count}", entries.len()));
    }
    if crc != 0 && crc != crc32_masked(body.as_bytes()) {
        return Err(format!("checksum {crc} does not match the entries"));
    }
    if entries.is_empty() {
        return Err("no entries".to_owned());
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: &str = "2\n447245663\n1-0\n2-1048576\n";

    fn e(epoch: i32, start_offset: i64) -> EpochEntry {
        EpochEntry { epoch, start_offset }
    }

    #[test]
    fn golden_text_of_the_fact_sheet() {
        assert_eq!(encode(&[e(1, 0), e(2, 1_048_576)]), GOLDEN);
        assert_eq!(parse(GOLDEN).unwrap(), vec![e(1, 0), e(2, 1_048_576)]);
        // A checksum of 0 is not checked.
        assert_eq!(parse("1\n0\n3-5\n").unwrap(), vec![e(3, 5)]);
        assert!(parse("2\n447245663\n1-0\n2-1048577\n").unwrap_err().contains("checksum"));
        assert!(parse("3\n447245663\n1-0\n2-1048576\n").unwrap_err().contains("line 1 says 3"));
        assert!(parse("1\n0\nx-5\n").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn append_persist_reload_and_backup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store/epochFileCheckpoint");
        let mut f = EpochFile::load(&path).unwrap();
        assert!(f.entries().is_empty());
        f.append(1, 0).unwrap();
        f.append(2, 1_048_576).unwrap();
        assert!(matches!(f.append(2, 2_000_000), Err(EpochFileError::NotAfterLast { .. })));
        assert!(matches!(f.append(3, 10), Err(EpochFileError::NotAfterLast { .. })));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), GOLDEN);
        assert_eq!(std::fs::read_to_string(with_suffix(&path, BACKUP_SUFFIX)).unwrap(), "1\n1725254278\n1-0\n");
        assert_eq!(EpochFile::load(&path).unwrap().entries(), &[e(1, 0), e(2, 1_048_576)]);
        assert_eq!(f.end_offset(1, 9_999_999), Some(1_048_576));
        assert_eq!(f.end_offset(2, 9_999_999), Some(9_999_999));

        // A torn main file: the .bak is read.
        std::fs::write(&path, "2\n447245663\n1-0\n").unwrap();
        assert_eq!(EpochFile::load(&path).unwrap().entries(), &[e(1, 0)]);
        // Both bad: an error naming the file, not an empty list.
        std::fs::write(with_suffix(&path, BACKUP_SUFFIX), "garbage").unwrap();
        let err = EpochFile::load(&path).unwrap_err().to_string();
        assert!(err.contains("epochFileCheckpoint") && err.contains("corrupt"), "{err}");
    }

    #[test]
    fn truncation_and_the_consistent_point() {
        let dir = tempfile::tempdir().unwrap();
        let mut slave = EpochFile::load(&dir.path().join("epochFileCheckpoint")).unwrap();
        for (epoch, start) in [(1, 0), (2, 100), (3, 200)] {
            slave.append(epoch, start).unwrap();
        }
        // The master kept epochs 1 and 2 but its epoch 2 ended at 150, then epoch 4 began.
        let master = [e(1, 0), e(2, 100), e(4, 150)];
        assert_eq!(slave.consistent_point(260, &master, 400), Some(150));
        // Same epochs, the slave behind: its own end.
        assert_eq!(slave.consistent_point(260, &[e(1, 0), e(2, 100), e(3, 200)], 900), Some(260));
        // Epoch 2 started elsewhere on the master: fall back to epoch 1.
        assert_eq!(slave.consistent_point(260, &[e(1, 0), e(2, 90)], 400), Some(90));
        // Nothing in common.
        assert_eq!(slave.consistent_point(260, &[e(7, 0)], 400), None);

        let path = dir.path().join("epochFileCheckpoint");
        slave.truncate_from_offset(150).unwrap();
        assert_eq!(slave.entries(), &[e(1, 0), e(2, 100)]);
        slave.append(4, 150).unwrap();
        assert_eq!(EpochFile::load(&path).unwrap().entries(), &master);
        // Truncated to nothing: a restart finds no epochs either.
        slave.truncate_from_offset(0).unwrap();
        assert!(EpochFile::load(&path).unwrap().entries().is_empty());
    }
}
