//! `MetadataError`: why a metadata file could not be loaded or persisted, or why a table change
//! was refused.
//!
//! Not mapped to RocketMQ response codes here; the processors do that.

use std::path::PathBuf;

use ferromq_protocol::body::BodyError;

/// A failure of the broker's metadata tables (topics, subscription groups, offsets).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataError {
    /// Reading, writing, syncing or renaming a file failed.
    #[error("i/o error on metadata file {path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file exists but does not parse, and there is no backup to fall back to.
    /// Nothing is loaded: starting with an empty table would silently drop metadata.
    #[error("metadata file {path} is corrupt and has no backup")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parse failure.
        #[source]
        source: BodyError,
    },
    /// The file was missing, empty or corrupt, and its backup does not parse either.
    #[error("metadata file {path} is unusable and its backup {backup_path} is corrupt")]
    BackupCorrupt {
        /// The main file.
        path: PathBuf,
        /// The backup (`<file>.bak`).
        backup_path: PathBuf,
        /// The backup's parse failure.
        #[source]
        source: BodyError,
    },
    /// A table could not be turned into JSON (a programming error: every table has string or
    /// integer keys).
    #[error("cannot encode metadata file {path}")]
    Encode {
        /// The file being written.
        path: PathBuf,
        /// The serializer's complaint.
        #[source]
        source: serde_json::Error,
    },
    /// A topic config without a usable name.
    #[error("invalid topic {topic:?}: {reason}")]
    InvalidTopic {
        /// The topic name given.
        topic: String,
        /// Why it was refused.
        reason: String,
    },
    /// A subscription group config without a usable name.
    #[error("invalid consumer group {group:?}: {reason}")]
    InvalidGroup {
        /// The group name given.
        group: String,
        /// Why it was refused.
        reason: String,
    },
}

impl From<ferromq_config::FileError> for MetadataError {
    fn from(e: ferromq_config::FileError) -> Self {
        MetadataError::Io { path: e.path, source: e.source }
    }
}
