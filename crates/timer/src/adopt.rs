//! A replica's copy of its master's timer progress. The wheel runs on the master only; its
//! files (`timerwheel`, `timerlog/`) are not replicated, but the timer topic is. A replica
//! writes the master's checkpoint into its own `config/timercheck` as a replica's checkpoint
//! (read time and the master's queue offset, its own queue offset at zero), dropping timer
//! files left from an earlier time as master. When it becomes master, recovery sees the
//! adopted progress (`recovery::Adopted`): the wheel replays the timer queue from its start,
//! links what is still to come, and skips what the master had delivered, instead of
//! delivering every stored timer message a second time. Java keeps a replica's wheel
//! enqueuing behind the master's offset; the checkpoint fields are the same.
//!
//! The caller makes sure the replica's CommitLog holds what the master had written when the
//! checkpoint was read (the deliveries it counts), and that no wheel runs on `root`.

use std::path::Path;

use crate::checkpoint::{CheckpointFile, TimerCheckpoint};
use crate::error::{io_err, TimerError};

/// Makes `master`'s progress the starting point of a wheel opened later on `root`. Returns
/// whether anything changed.
///
/// # Errors
/// The file that could not be removed or written.
pub fn adopt_master_progress(root: &Path, master: &TimerCheckpoint) -> Result<bool, TimerError> {
    let (file, found) = CheckpointFile::open(&root.join("config").join("timercheck"))?;
    let adopted = TimerCheckpoint {
        last_read_time_ms: master.last_read_time_ms,
        last_timer_log_flush_pos: 0,
        last_timer_queue_offset: 0,
        // A master still replaying progress it adopted itself reports that progress's end.
        master_timer_queue_offset: master.last_timer_queue_offset.max(master.master_timer_queue_offset),
        data_version: master.data_version,
    };
    if found == Some(adopted) {
        return Ok(false);
    }
    // Files of an earlier time as master: older than the adopted progress, which the replay
    // rebuilds them from. Removed first, so a crash in between leaves the old checkpoint over
    // no files (a replay with duplicates, not losses).
    let wheel = root.join("timerwheel");
    if wheel.exists() {
        std::fs::remove_file(&wheel).map_err(io_err(&wheel))?;
    }
    let log = root.join("timerlog");
    if log.exists() {
        std::fs::remove_dir_all(&log).map_err(io_err(&log))?;
    }
    file.write(&adopted)?;
    Ok(true)
}
