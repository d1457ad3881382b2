//! AutoSwitchHA: replication in controller mode (controller-mode.md §5.2-§6). The wire
//! format is [`crate::autoswitch_frame`]; the epoch list is [`crate::epoch_file`].
//!
//! - [`AutoSwitchMaster`] runs on the master: a handshake gives each replica the master's
//!   epochs so it can cut what it wrote past the point both logs share; then CommitLog frames
//!   that each carry their epoch and the confirm offset. It keeps the SyncStateSet the
//!   controller agreed to, computes the confirm offset (what every member holds) and proposes
//!   members to add or remove.
//! - [`AutoSwitchSlave`] runs on a replica: handshake, truncation to the consistent point,
//!   then appending frames, recording new epochs, following the master's confirm offset.
//!
//! Roles are the broker's: it starts one or the other when the controller names it master or
//! slave, and stops it on the next change.

mod master;
mod slave;

pub use master::{AutoSwitchMaster, SyncStateSet};
pub use slave::AutoSwitchSlave;

use std::sync::{Arc, Mutex, MutexGuard};

use crate::epoch_file::EpochFile;

/// Why a role could not be taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RoleChangeError {
    /// The epoch file refused the entry or could not be written.
    #[error("epoch file")]
    Epochs(#[from] crate::epoch_file::EpochFileError),
    /// The HA listener's address cannot be read.
    #[error("HA listener")]
    Listener(#[source] std::io::Error),
}

/// The broker's epoch list, shared by whichever role runs.
pub type SharedEpochs = Arc<Mutex<EpochFile>>;

fn epochs(shared: &SharedEpochs) -> MutexGuard<'_, EpochFile> {
    // Changed only through its methods, each of which leaves the list whole.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}
