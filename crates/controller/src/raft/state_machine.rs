//! The replicated [`ReplicaState`] behind openraft, with its snapshot file (module docs of
//! [`crate::raft`]).

use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use ferromq_config::file::replace_file;
use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, StorageIOError, StoredMembership};
use serde::{Deserialize, Serialize};

use super::{StorageError, TypeConfig};
use crate::state::ReplicaState;

type Entry = openraft::Entry<TypeConfig>;
type Membership = StoredMembership<u64, openraft::BasicNode>;

/// What the snapshot file holds.
#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta<u64, openraft::BasicNode>,
    state: ReplicaState,
}

struct Inner {
    path: PathBuf,
    state: ReplicaState,
    last_applied: Option<LogId<u64>>,
    membership: Membership,
    snapshot: Option<SnapshotFile>,
    snapshots_built: u64,
}

/// The state machine; clones share it (the snapshot builder is a clone, and the controller
/// reads the state through [`StateMachine::read`]).
#[derive(Clone)]
pub struct StateMachine {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for StateMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateMachine").finish_non_exhaustive()
    }
}

fn file_err(e: ferromq_config::file::FileError) -> io::Error {
    io::Error::new(e.source.kind(), e.to_string())
}

impl StateMachine {
    /// Opens the state machine under `dir`: the state of the last snapshot, if any (openraft
    /// then applies the committed entries after it).
    ///
    /// # Errors
    /// The snapshot file cannot be read or does not parse.
    pub fn open(dir: &Path) -> io::Result<StateMachine> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("snapshot");
        let snapshot: Option<SnapshotFile> = match std::fs::read(&path) {
            Ok(bytes) => Some(serde_json::from_slice(&bytes).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("{} does not parse: {e}", path.display()))
            })?),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let (state, last_applied, membership) = match &snapshot {
            Some(s) => (s.state.clone(), s.meta.last_log_id, s.meta.last_membership.clone()),
            None => (ReplicaState::default(), None, Membership::default()),
        };
        Ok(StateMachine {
            inner: Arc::new(Mutex::new(Inner { path, state, last_applied, membership, snapshot, snapshots_built: 0 })),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the applied state.
    pub fn read<T>(&self, f: impl FnOnce(&ReplicaState) -> T) -> T {
        f(&self.lock().state)
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let mut inner = self.lock();
        inner.snapshots_built += 1;
        let id = match inner.last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id, l.index, inner.snapshots_built),
            None => format!("none-{}", inner.snapshots_built),
        };
        let file = SnapshotFile {
            meta: SnapshotMeta {
                last_log_id: inner.last_applied,
                last_membership: inner.membership.clone(),
                snapshot_id: id,
            },
            state: inner.state.clone(),
        };
        let bytes =
            serde_json::to_vec(&file).map_err(|e| StorageIOError::write_snapshot(Some(file.meta.signature()), &e))?;
        replace_file(&inner.path, &bytes)
            .map_err(|e| StorageIOError::write_snapshot(Some(file.meta.signature()), &file_err(e)))?;
        let meta = file.meta.clone();
        inner.snapshot = Some(file);
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId<u64>>, Membership), StorageError> {
        let inner = self.lock();
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut inner = self.lock();
        let mut replies = Vec::new();
        for entry in entries {
            inner.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(command) => {
                    for event in &command.events {
                        inner.state.apply(event);
                    }
                }
                EntryPayload::Membership(m) => inner.membership = StoredMembership::new(Some(entry.log_id), m),
            }
            replies.push(());
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let bytes = snapshot.into_inner();
        let received: SnapshotFile =
            serde_json::from_slice(&bytes).map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        let file = SnapshotFile { meta: meta.clone(), state: received.state };
        let encoded =
            serde_json::to_vec(&file).map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        let mut inner = self.lock();
        replace_file(&inner.path, &encoded)
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &file_err(e)))?;
        inner.state = file.state.clone();
        inner.last_applied = meta.last_log_id;
        inner.membership = meta.last_membership.clone();
        inner.snapshot = Some(file);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let inner = self.lock();
        let Some(file) = &inner.snapshot else { return Ok(None) };
        let bytes =
            serde_json::to_vec(file).map_err(|e| StorageIOError::read_snapshot(Some(file.meta.signature()), &e))?;
        Ok(Some(Snapshot { meta: file.meta.clone(), snapshot: Box::new(Cursor::new(bytes)) }))
    }
}
