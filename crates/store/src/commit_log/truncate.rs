//! Cutting the CommitLog back at runtime (controller mode): a replica whose log went past the
//! point it shares with the new master drops its tail before it replicates again. Java:
//! `CommitLog#truncateDirtyFiles`, `DefaultMessageStore#isOffsetAligned`.

use std::sync::atomic::Ordering;

use ferromq_protocol::message::{RecordOrBlank, RecordView};

use crate::commit_log::CommitLog;

/// Why the CommitLog was not cut.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TruncateError {
    /// The offset is not where an entry starts, so cutting there would leave half a record.
    #[error("physical offset {offset} is not the start of a CommitLog record or segment")]
    Unaligned {
        /// The offset asked for.
        offset: i64,
    },
    /// The offset is below what the CommitLog still holds.
    #[error("physical offset {offset} is below the CommitLog's first offset {min}")]
    BelowMin {
        /// The offset asked for.
        offset: i64,
        /// The first offset still stored.
        min: i64,
    },
    /// The store takes no writes (shut down, or poisoned by a failed flush).
    #[error("the store takes no writes: {reason}")]
    Unavailable {
        /// Why.
        reason: &'static str,
    },
    /// Deleting or zeroing a segment failed.
    #[error("cannot cut the CommitLog files")]
    Io(#[source] std::io::Error),
}

impl CommitLog {
    /// Whether an entry starts at `offset`: a segment boundary, the end of the log, or a record
    /// (or end-of-file blank marker) whose layout parses and, for a record, whose
    /// PHYSICALOFFSET says it was written there.
    pub fn is_offset_aligned(&self, offset: i64) -> bool {
        let size = self.queue.file_size() as i64;
        if offset == self.max_offset() || offset.rem_euclid(size) == 0 {
            return true;
        }
        let Some(file) = self.queue.find(offset) else { return false };
        let pos = (offset - file.file_from_offset()) as usize;
        let committed = file.committed_position();
        if pos >= committed {
            return false;
        }
        file.with_bytes(pos, committed - pos, |b| match RecordView::parse(b) {
            Ok(RecordOrBlank::Record(view)) => view.physical_offset == offset,
            Ok(RecordOrBlank::Blank { .. }) => true,
            Err(_) => false,
        })
        .unwrap_or(false)
    }

    /// Drops every byte at or after `offset`: later segments are deleted, the one holding
    /// `offset` is cut there and its tail zeroed (so no later recovery can read the old records
    /// back). A record head held back from a master is dropped too. Appends wait meanwhile.
    /// Readers holding slices of the cut bytes see zeros; the caller stops serving them first.
    /// Nothing happens when `offset` is at or past the end.
    ///
    /// # Errors
    /// [`TruncateError`]: an offset inside a record or below the first one, a store that takes
    /// no writes, or files that cannot be cut.
    pub fn truncate_to(&self, offset: i64) -> Result<(), TruncateError> {
        // Staged or pooled appends become part of the files first, so the cut sees them all.
        self.commit();
        let mut state = self.writer();
        if self.closed.load(Ordering::Acquire) {
            return Err(TruncateError::Unavailable { reason: "the message store is shut down" });
        }
        if self.is_poisoned() {
            return Err(TruncateError::Unavailable { reason: "the store is poisoned after a failed flush" });
        }
        state.replica_pending.clear();
        let max = self.queue.max_offset();
        if offset >= max {
            return Ok(());
        }
        let min = self.queue.min_offset();
        if offset < min {
            return Err(TruncateError::BelowMin { offset, min });
        }
        if !self.is_offset_aligned(offset) {
            return Err(TruncateError::Unaligned { offset });
        }
        tracing::warn!(
            physical_offset = offset,
            max_physical_offset = max,
            dropped_bytes = max - offset,
            "truncating the CommitLog"
        );
        self.queue.truncate(offset, true).map_err(TruncateError::Io)
    }
}
