//! Replacing a settings or metadata file on disk so that a crash leaves either the old or the
//! new contents, never a torn mix: write a temporary file next to it, sync it, rename it over
//! the file, sync the directory. Java writes such files in place (`MixAll#string2File`), so
//! a crash there can leave one truncated.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Suffix of the file being written before it is renamed into place.
pub const TEMP_SUFFIX: &str = ".tmp";

/// An I/O failure on one file or directory.
#[derive(Debug, thiserror::Error)]
#[error("i/o error on {}", path.display())]
pub struct FileError {
    /// The file or directory.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

impl FileError {
    /// A closure that wraps an I/O error on `path`, for `map_err`.
    pub fn at(path: &Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
        move |source| FileError { path: path.to_owned(), source }
    }
}

/// `path` with `suffix` appended to its file name (`topics.json` -> `topics.json.tmp`).
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The directory holding `path` (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// Replaces `path` with `bytes`: written to `<path>.tmp` and synced, renamed over `path`, the
/// directory synced. Creates the directory if needed. A temporary file left by a failed
/// write is removed (best effort).
///
/// # Errors
///
/// [`FileError`] naming the file or directory that failed.
pub fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    let dir = parent_dir(path);
    std::fs::create_dir_all(&dir).map_err(FileError::at(&dir))?;
    let temp = with_suffix(path, TEMP_SUFFIX);
    if let Err(e) = write_synced(&temp, bytes) {
        let _ = std::fs::remove_file(&temp);
        return Err(e);
    }
    std::fs::rename(&temp, path).map_err(FileError::at(path))?;
    sync_dir(&dir)
}

/// Creates (or truncates) `path`, writes `bytes` and syncs the file.
///
/// # Errors
///
/// [`FileError`] naming the file.
pub fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    let mut file = File::create(path).map_err(FileError::at(path))?;
    file.write_all(bytes).map_err(FileError::at(path))?;
    file.sync_all().map_err(FileError::at(path))
}

/// Makes a rename in `dir` durable. Directories cannot be opened for syncing on every
/// platform; elsewhere this is a no-op.
///
/// # Errors
///
/// [`FileError`] naming the directory.
pub fn sync_dir(dir: &Path) -> Result<(), FileError> {
    #[cfg(unix)]
    {
        File::open(dir).and_then(|d| d.sync_all()).map_err(FileError::at(dir))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_contents_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("a.properties");
        replace_file(&path, b"one=1\n").unwrap();
        replace_file(&path, b"two=2\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two=2\n");
        assert!(!with_suffix(&path, TEMP_SUFFIX).exists());
    }

    #[test]
    fn a_failed_write_keeps_the_old_contents_and_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        replace_file(&path, b"{}").unwrap();
        // A directory where the temporary file goes makes its creation fail.
        std::fs::create_dir(with_suffix(&path, TEMP_SUFFIX)).unwrap();
        let err = replace_file(&path, b"{\"new\":1}").unwrap_err();
        assert_eq!(err.path, with_suffix(&path, TEMP_SUFFIX));
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
    }
}
