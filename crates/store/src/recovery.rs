//! CommitLog recovery at open.
//!
//! Normal (clean shutdown): walk from the third-to-last segment to the end of valid records,
//! truncate after it, and dispatch records the consume queues do not have yet. Abnormal (the
//! abort marker was left): start from the newest segment whose first record is older than the
//! checkpoint, verify every record (CRC when `checkCRCOnRecover`), re-dispatch them all
//! (consume queues ignore what they already hold), cut the torn tail and zero it. Java:
//! `CommitLog#recoverNormally`, `CommitLog#recoverAbnormally`.

use std::io;
use std::sync::Arc;

use tracing::warn;

use crate::checkpoint::Checkpoint;
use crate::commit_log::CommitLog;
use crate::config::StoreConfig;
use crate::consume_queue::ConsumeQueueStore;
use crate::dispatch::{check, scan, Found, Scanned};
use crate::dispatch_request::DispatchRequest;
use crate::DelayLevels;
use crate::MappedFile;

/// What recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RecoverySummary {
    pub files_scanned: usize,
    /// Bytes of records checked (from the first scanned segment's start to the recovered end).
    pub bytes_checked: u64,
    /// Bytes cut after the last whole record: a torn or corrupt tail, 0 after a clean stop (the
    /// rest of the last segment is unused space, not data).
    pub bytes_truncated: u64,
    pub redispatched: u64,
    pub max_phy_offset: i64,
}

/// The check of the last three segments after a clean stop, started before the consume queues
/// load ([`CheckAhead::start`]): it needs nothing from them, and at many queues their loading
/// and this check each take a good part of a restart.
#[derive(Debug)]
pub(crate) struct CheckAhead {
    /// Index of the first segment checked.
    first: usize,
    prefixes: std::thread::JoinHandle<Vec<usize>>,
}

impl CheckAhead {
    /// Checks each of the last three segments of `commit_log` from its start to the end of its
    /// valid records, on threads of its own; `None` if no thread could be started (recovery
    /// then checks as it goes).
    pub(crate) fn start(commit_log: &CommitLog, check_crc: bool) -> Option<CheckAhead> {
        let files = commit_log.queue().segments();
        let first = files.len().saturating_sub(3);
        let file_size = commit_log.queue().file_size();
        let files: Vec<_> = files[first..].to_vec();
        let prefixes = std::thread::Builder::new()
            .name("recovery-check".into())
            .spawn(move || checked_prefixes(&files, file_size, i64::MAX, check_crc))
            .ok()?;
        Some(CheckAhead { first, prefixes })
    }

    /// For each of `files[start..]`, the prefix the walk may skip: the segment's checked
    /// prefix when it ends by `dispatched_to` (all of it is in the consume queues, nothing to
    /// decode), else 0 (that segment is walked from its start, checked up to `dispatched_to`
    /// and decoded after it, as without the check ahead: rare after a clean stop, which lets
    /// dispatch finish).
    fn prefixes(self, files: &[Arc<MappedFile>], start: usize, dispatched_to: i64) -> Vec<usize> {
        let ahead = self.prefixes.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (start..files.len())
            .map(|i| {
                let Some(&prefix) = i.checked_sub(self.first).and_then(|k| ahead.get(k)) else { return 0 };
                if files[i].file_from_offset() + prefix as i64 <= dispatched_to {
                    prefix
                } else {
                    0
                }
            })
            .collect()
    }
}

/// Recovers the CommitLog and re-dispatches records past what the consume queues hold.
/// `ahead`, after a clean stop, is the segments' check started earlier.
pub(crate) fn recover(
    config: &StoreConfig,
    commit_log: &CommitLog,
    checkpoint: &Checkpoint,
    consume_queues: &ConsumeQueueStore,
    last_exit_ok: bool,
    ahead: Option<CheckAhead>,
    mut dispatch: impl FnMut(&DispatchRequest),
) -> io::Result<RecoverySummary> {
    let files = commit_log.queue().segments();
    let mut summary = RecoverySummary::default();
    let Some(last) = files.last() else {
        // Nothing stored: consume queues pointing anywhere are stale.
        return Ok(summary);
    };
    let file_size = commit_log.queue().file_size();
    let dispatched_to = consume_queues.max_physic_offset();
    let mut start = if last_exit_ok {
        files.len().saturating_sub(3)
    } else {
        let min = if config.message_index_safe { checkpoint.min_timestamp_index() } else { checkpoint.min_timestamp() };
        start_by_checkpoint(&files, min)
    };
    // Never start after the first record the consume queues are missing.
    if let Some(i) = files.iter().position(|f| f.file_from_offset() + file_size as i64 > dispatched_to) {
        start = start.min(i);
    }
    let check_crc = config.check_crc_on_recover;
    let delays = &config.message_delay_level;
    let mut end = files[start].file_from_offset();
    let mut torn = false;
    // After a clean stop the segments' checks run side by side first; the walk below then
    // starts each segment where its check stopped.
    let checked = match (last_exit_ok, ahead) {
        (true, Some(ahead)) => ahead.prefixes(&files, start, dispatched_to),
        (true, None) => checked_prefixes(&files[start..], file_size, dispatched_to, check_crc),
        (false, _) => vec![0; files.len() - start],
    };
    'files: for (file, &checked) in files[start..].iter().zip(&checked) {
        summary.files_scanned += 1;
        let from = file.file_from_offset();
        // A file cut short on disk holds nothing valid past its original length, even if the
        // zeros that replace the missing bytes happen to complete a record's layout.
        let valid_len = file.loaded_len().min(file_size);
        let mut pos = checked;
        if pos > 0 {
            end = from + pos as i64;
        }
        loop {
            if pos >= file.readable() {
                // Past the allocated prefix the file is a hole: no record was ever written
                // there (appends reserve first), so this is the end of the data.
                break 'files;
            }
            let at = from + pos as i64;
            // After a clean stop the consume queues hold the records before `dispatched_to`:
            // those are checked, not decoded into dispatch requests.
            let decode = !last_exit_ok || at >= dispatched_to;
            let found = file.with_allocated(pos, valid_len.saturating_sub(pos), |bytes| match decode {
                true => scan(bytes, at, check_crc, delays, false).map(|req| (req.msg_size as usize, Some(req))),
                false => check(bytes, check_crc).map(|size| (size, None)),
            });
            match found {
                Some(Found::Record((size, req))) => {
                    pos += size;
                    end = from + pos as i64;
                    if let Some(req) = req {
                        dispatch(&req);
                        summary.redispatched += 1;
                    }
                }
                Some(Found::Blank) => {
                    end = from + file_size as i64;
                    continue 'files;
                }
                Some(Found::End(reason)) => {
                    if let Some(e) = reason {
                        torn = true;
                        warn!(physical_offset = at, error = %e, "invalid record: recovery ends here");
                    }
                    break 'files;
                }
                None => break 'files,
            }
        }
    }
    summary.bytes_checked = (end - files[start].file_from_offset()).max(0) as u64;
    // What a torn tail held: up to the last segment's allocated bytes, which bound anything
    // written (the rest of a segment is never written before it is reserved).
    let written_end = last.file_from_offset() + last.readable().min(file_size) as i64;
    summary.bytes_truncated = if torn { (written_end - end).max(0) as u64 } else { 0 };
    // After an unclean stop, zero the cut tail so stale bytes can never pass for records.
    commit_log.queue().truncate(end, !last_exit_ok || torn)?;
    summary.max_phy_offset = end;
    if summary.bytes_truncated > 0 && torn {
        warn!(physical_offset = end, "commit log tail truncated");
    }
    Ok(summary)
}

/// For each of `files`, the length of its prefix of valid records that start before `limit`
/// (records the consume queues hold after a clean stop): where the sequential walk of
/// [`recover`] would stop merely checking in that segment (at a blank, an invalid record, the
/// end of its data, or `limit`), so it can start there. The segments are checked side by side
/// ([`crate::parallel::map`]): a clean restart re-checks up to three 1 GiB segments.
fn checked_prefixes(files: &[Arc<MappedFile>], file_size: usize, limit: i64, check_crc: bool) -> Vec<usize> {
    let prefix = |file: &Arc<MappedFile>| {
        let from = file.file_from_offset();
        let valid_len = file.loaded_len().min(file_size);
        let mut pos = 0usize;
        while pos < file.readable() && from + (pos as i64) < limit {
            match file.with_allocated(pos, valid_len.saturating_sub(pos), |bytes| check(bytes, check_crc)) {
                Some(Found::Record(size)) => pos += size,
                _ => break,
            }
        }
        pos
    };
    crate::parallel::map(files, true, prefix)
}

/// Index of the newest segment whose first record was stored before `min_timestamp` (all
/// later data may be missing from consume queues and index), or the first segment.
fn start_by_checkpoint(files: &[std::sync::Arc<crate::MappedFile>], min_timestamp: i64) -> usize {
    for (i, file) in files.iter().enumerate().rev() {
        let first_ts = file.with_allocated(0, file.file_size(), |bytes| {
            match scan(bytes, file.file_from_offset(), false, &DelayLevels::default(), false) {
                Scanned::Record(req) => Some(req.store_timestamp),
                _ => None,
            }
        });
        if let Some(Some(ts)) = first_ts {
            if ts <= min_timestamp {
                return i;
            }
        }
    }
    0
}
