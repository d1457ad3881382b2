//! Appending CommitLog bytes shipped by a master (a replica's side of HA).
//!
//! The master ships raw bytes: a frame may cut a record anywhere and may carry a segment's
//! end-of-file blank marker and the unused space after it. This module writes them at exactly
//! the replica's own end, so replica files are byte-for-byte the master's. Only whole records
//! are written, each run with its first TOTALSIZE last; the head of a record whose rest has
//! not arrived waits in memory. A crash therefore never leaves a torn record, and the dispatch
//! thread only ever sees whole records. Every record is checked before it is written: its
//! layout must parse, and its PHYSICALOFFSET must be where it lands, so diverged logs are
//! refused rather than mixed. Java: `CommitLog#appendData`,
//! `DefaultMessageStore#appendToCommitLog` (which write the bytes as they come).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ferromq_protocol::message::{peek_record_size, MessageError, RecordOrBlank, RecordView, BLANK_MARKER_LEN};

use crate::commit_log::CommitLog;
use crate::mapped_file::MappedFile;

/// Why replicated bytes were refused. The replica's files are unchanged by the refused part;
/// records before it in the same call are kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicaAppendError {
    /// The bytes do not start where the replica's CommitLog ends.
    #[error("master pushed physical offset {received}, but the replica's CommitLog ends at {expected}")]
    OffsetMismatch {
        /// Where the next bytes must start.
        expected: i64,
        /// Where the master said they start.
        received: i64,
    },
    /// An empty replica can only start at a segment boundary.
    #[error(
        "an empty replica must start at a segment boundary, not at physical offset {offset} (segment size {file_size})"
    )]
    Unaligned {
        /// The offset offered.
        offset: i64,
        /// The replica's segment size.
        file_size: usize,
    },
    /// The bytes are not a CommitLog record or blank marker.
    #[error("bytes at physical offset {offset} are not a CommitLog record")]
    Corrupt {
        /// Where the entry starts.
        offset: i64,
        /// What is wrong with it.
        #[source]
        source: MessageError,
    },
    /// A record or blank marker does not fit the segment it falls in (different segment sizes
    /// on master and replica, or a corrupt size).
    #[error("entry of {size} bytes at physical offset {offset} does not fit its {file_size}-byte segment")]
    Misfit {
        /// Where the entry starts.
        offset: i64,
        /// Its TOTALSIZE.
        size: usize,
        /// The replica's segment size.
        file_size: usize,
    },
    /// A record says it was written elsewhere: the master's log and this one diverged.
    #[error("record at physical offset {offset} carries PHYSICALOFFSET {recorded}: the logs diverged")]
    Diverged {
        /// Where it would land.
        offset: i64,
        /// Where the master wrote it.
        recorded: i64,
    },
    /// The store takes no writes (shut down, or poisoned by a failed flush).
    #[error("the store takes no writes: {reason}")]
    Unavailable {
        /// Why.
        reason: &'static str,
    },
    /// A segment could not be created or an empty one removed.
    #[error("cannot prepare a CommitLog segment")]
    Io(#[source] std::io::Error),
}

/// Where a replica stands after an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaAppend {
    /// Where the master's next bytes must start: the written end plus any record head held
    /// back.
    pub next_offset: i64,
    /// The end of the whole records written (what the replica reports to its master).
    pub max_phy_offset: i64,
}

impl CommitLog {
    /// Appends bytes a master shipped from its CommitLog at `offset`. `offset` must be where
    /// the previous call's bytes ended ([`ReplicaAppend::next_offset`]) or where the whole
    /// records end (a new connection restarting there; a held-back record head is dropped).
    /// An empty CommitLog starts at `offset` (a segment boundary). Empty `bytes` only checks
    /// the offset (a heartbeat).
    ///
    /// # Errors
    /// [`ReplicaAppendError`]: a wrong offset, bytes that are not records at this position,
    /// a store that takes no writes, or a segment that cannot be created.
    pub fn append_replicated(&self, offset: i64, bytes: &[u8]) -> Result<ReplicaAppend, ReplicaAppendError> {
        let mut state = self.writer();
        if self.closed.load(Ordering::Acquire) {
            return Err(ReplicaAppendError::Unavailable { reason: "the message store is shut down" });
        }
        if self.is_poisoned() {
            return Err(ReplicaAppendError::Unavailable { reason: "the store is poisoned after a failed flush" });
        }
        let written_end = self.queue.max_offset();
        let pending = &mut state.replica_pending;
        let expected = written_end + pending.len() as i64;
        let start = if offset == expected {
            written_end
        } else if offset == written_end {
            pending.clear();
            written_end
        } else if self.queue.clear_if_empty().map_err(ReplicaAppendError::Io)? {
            let file_size = self.queue.file_size();
            if offset.rem_euclid(file_size as i64) != 0 {
                return Err(ReplicaAppendError::Unaligned { offset, file_size });
            }
            pending.clear();
            offset
        } else {
            return Err(ReplicaAppendError::OffsetMismatch { expected, received: offset });
        };
        let written = self.write_replicated(pending, start, bytes);
        if written.is_err() {
            pending.clear();
        }
        let pending_len = pending.len() as i64;
        drop(state);
        // With the transient pool the bytes become readable when committed; do it now so the
        // replica's reported end and its readable end agree.
        self.commit();
        let at = written?;
        Ok(ReplicaAppend { next_offset: at + pending_len, max_phy_offset: self.queue.max_offset() })
    }

    /// Writes `pending ++ input`, which starts at `at`, as whole entries; keeps an incomplete
    /// record head in `pending`. Returns where the written bytes end.
    fn write_replicated(
        &self,
        pending: &mut Vec<u8>,
        mut at: i64,
        mut input: &[u8],
    ) -> Result<i64, ReplicaAppendError> {
        let file_size = self.queue.file_size();
        let mut newest_store_timestamp = None;
        let result = loop {
            if input.is_empty() {
                break Ok(at);
            }
            let file = match self.replica_segment(at) {
                Ok(f) => f,
                Err(e) => break Err(e),
            };
            let pos = (at - file.file_from_offset()) as usize;
            if file.is_full() {
                // The unused space after the blank marker: copied as shipped (zeros).
                let n = input.len().min(file_size - pos);
                if let Err(e) = file.append(&input[..n]) {
                    break Err(ReplicaAppendError::Io(e));
                }
                at += n as i64;
                input = &input[n..];
                continue;
            }
            if pending.len() + input.len() < BLANK_MARKER_LEN {
                pending.extend_from_slice(input);
                break Ok(at);
            }
            let mut prefix = [0u8; BLANK_MARKER_LEN];
            prefix[..pending.len().min(BLANK_MARKER_LEN)]
                .copy_from_slice(&pending[..pending.len().min(BLANK_MARKER_LEN)]);
            if pending.len() < BLANK_MARKER_LEN {
                let from_input = BLANK_MARKER_LEN - pending.len();
                prefix[pending.len()..].copy_from_slice(&input[..from_input]);
            }
            let size = match peek_record_size(&prefix) {
                Ok(RecordOrBlank::Blank { remaining }) => {
                    if remaining as usize != file_size - pos {
                        break Err(ReplicaAppendError::Misfit { offset: at, size: remaining as usize, file_size });
                    }
                    input = &input[BLANK_MARKER_LEN.saturating_sub(pending.len())..];
                    pending.clear();
                    if let Err(e) = file.append_size_last(&prefix) {
                        break Err(ReplicaAppendError::Io(e));
                    }
                    file.mark_full();
                    at += BLANK_MARKER_LEN as i64;
                    continue;
                }
                Ok(RecordOrBlank::Record(size)) => size,
                Err(source) => break Err(ReplicaAppendError::Corrupt { offset: at, source }),
            };
            // A writer always leaves room for the blank marker after a record.
            if pos + size + BLANK_MARKER_LEN > file_size {
                break Err(ReplicaAppendError::Misfit { offset: at, size, file_size });
            }
            if !pending.is_empty() {
                let need = size - pending.len();
                if input.len() < need {
                    pending.extend_from_slice(input);
                    break Ok(at);
                }
                pending.extend_from_slice(&input[..need]);
                input = &input[need..];
                let record = std::mem::take(pending);
                match check_record(&record, at) {
                    Ok(ts) => newest_store_timestamp = Some(ts),
                    Err(e) => break Err(e),
                }
                if let Err(e) = file.append_size_last(&record) {
                    break Err(ReplicaAppendError::Io(e));
                }
                at += size as i64;
                continue;
            }
            // A run of whole records straight from the input, written with one copy.
            let mut run = 0usize;
            let mut bad = None;
            while let Some(rest) = input.get(run..).filter(|r| r.len() >= BLANK_MARKER_LEN) {
                let Ok(RecordOrBlank::Record(size)) = peek_record_size(rest) else { break };
                if size > rest.len() || pos + run + size + BLANK_MARKER_LEN > file_size {
                    break;
                }
                match check_record(&rest[..size], at + run as i64) {
                    Ok(ts) => newest_store_timestamp = Some(ts),
                    Err(e) => {
                        bad = Some(e);
                        break;
                    }
                }
                run += size;
            }
            if run > 0 {
                if let Err(e) = file.append_size_last(&input[..run]) {
                    break Err(ReplicaAppendError::Io(e));
                }
                at += run as i64;
                input = &input[run..];
            }
            if let Some(e) = bad {
                break Err(e);
            }
            if run == 0 {
                // The first record is incomplete (checked to fit above).
                pending.extend_from_slice(input);
                break Ok(at);
            }
        };
        if let Some(ts) = newest_store_timestamp {
            // Drives the checkpoint's physicMsgTimestamp after the next flush, as puts do.
            self.last_store_timestamp.fetch_max(ts, Ordering::AcqRel);
        }
        result
    }

    /// The segment the replica writes `at` into: the newest one, or a new one after it (or, in
    /// an empty queue, at `at`).
    fn replica_segment(&self, at: i64) -> Result<Arc<MappedFile>, ReplicaAppendError> {
        if let Some(last) = self.queue.last() {
            // Sealed by its blank marker, but the unused space after it is still arriving.
            let wrote = last.wrote_position();
            if last.is_full() && wrote < last.file_size() && last.file_from_offset() + wrote as i64 == at {
                return Ok(last);
            }
        }
        let file =
            self.segment_for_append_from(at).map_err(|e| ReplicaAppendError::Io(std::io::Error::other(e.reason)))?;
        let end = file.file_from_offset() + file.wrote_position() as i64;
        if end != at {
            return Err(ReplicaAppendError::OffsetMismatch { expected: end, received: at });
        }
        Ok(file)
    }
}

/// Checks a whole record shipped for `at`; returns its store time.
fn check_record(record: &[u8], at: i64) -> Result<i64, ReplicaAppendError> {
    match RecordView::parse(record) {
        Ok(RecordOrBlank::Record(view)) => {
            if view.physical_offset != at {
                return Err(ReplicaAppendError::Diverged { offset: at, recorded: view.physical_offset });
            }
            Ok(view.store_timestamp_ms)
        }
        Ok(RecordOrBlank::Blank { remaining }) => {
            Err(ReplicaAppendError::Misfit { offset: at, size: remaining as usize, file_size: record.len() })
        }
        Err(source) => Err(ReplicaAppendError::Corrupt { offset: at, source }),
    }
}
