//! Why the timer store could not open or flush. Refusals of a send (the transform's verdicts)
//! are in `transform.rs`; a malformed recall handle is in `recall.rs`.

use std::path::PathBuf;

/// A failure of the timer store's files or configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TimerError {
    /// A file or directory could not be read, written, mapped or synced.
    #[error("timer store file {path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The `timerwheel` file was written with another number of slots.
    #[error("timer wheel {path} is {found} bytes, expected {expected} (timerSlotsTotal changed?)")]
    WheelSizeMismatch {
        /// The wheel file.
        path: PathBuf,
        /// Its length.
        found: u64,
        /// `2 * slotsTotal * 32`.
        expected: u64,
    },
    /// A setting the files or the arithmetic cannot work with.
    #[error("invalid timer config {key}: {reason}")]
    InvalidConfig {
        /// The RocketMQ key.
        key: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// An earlier flush failed: the checkpoint is frozen until a restart rebuilds the state.
    #[error("timer store poisoned by an earlier flush failure")]
    Poisoned,
}

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> TimerError {
    let path = path.into();
    move |source| TimerError::Io { path, source }
}
