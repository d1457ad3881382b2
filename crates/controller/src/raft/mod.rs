//! The controller's Raft storage on openraft (ADR 0015): the log, the vote and the state machine
//! with its snapshots, in files under `controllerStorePath`.
//!
//! - [`LogStore`]: `raft/log` (one record per entry: `u32 length | u32 CRC32 | JSON entry`,
//!   appended and fdatasync'ed before openraft is told the entry is stored), `raft/vote` and
//!   `raft/purged` (replaced atomically: temporary file, fsync, rename, directory fsync). A
//!   record torn by a crash is cut off when the log is opened: it was never acknowledged.
//! - [`StateMachine`]: the [`ReplicaState`](crate::ReplicaState) with the last applied log id
//!   and membership, snapshotted to `raft/snapshot` (atomically) every
//!   [`SNAPSHOT_EVERY`] entries, after which openraft purges the log up to the snapshot.
//!
//! Entries carry a [`Command`]: the events one request produced, committed together.

mod log_store;
mod state_machine;

use std::io::Cursor;

use serde::{Deserialize, Serialize};

pub use log_store::LogStore;
pub use state_machine::StateMachine;

use crate::event::Event;

/// Entries between snapshots (openraft's `SnapshotPolicy::LogsSinceLast`); the log is purged
/// up to each snapshot, which bounds it.
pub const SNAPSHOT_EVERY: u64 = 1000;

/// What one log entry asks the state machine to apply: the events of one request, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// The events, each as [`Event::encode`] writes it would be read back by [`Event::decode`].
    pub events: Vec<Event>,
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} event(s)", self.events.len())
    }
}

openraft::declare_raft_types!(
    /// The controller's Raft types: node ids are the numbers of `controllerDLegerPeers`
    /// (`n0` -> 0), entries carry [`Command`]s, snapshots are bytes in memory (the state is small).
    pub TypeConfig:
        D = Command,
        R = (),
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
);

/// A storage failure in openraft's terms.
pub type StorageError = openraft::StorageError<u64>;
