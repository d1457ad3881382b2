//! The controller's Raft storage: openraft's own storage test suite, and a one-node Raft that
//! commits controller events, snapshots, purges its log and restarts from its files.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use ferromq_controller::event::{ApplyBrokerIdEvent, ElectMasterEvent};
use ferromq_controller::raft::{Command, LogStore, StateMachine, StorageError, TypeConfig};
use ferromq_controller::Event;
use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::storage::RaftLogStorage;
use openraft::testing::{StoreBuilder, Suite};
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for Builder {
    async fn build(&self) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError> {
        let dir = tempfile::tempdir().unwrap();
        let log = LogStore::open(&dir.path().join("raft")).unwrap();
        let sm = StateMachine::open(&dir.path().join("raft")).unwrap();
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(Builder).unwrap();
}

/// No peers: a one-node group never sends an RPC.
struct NoPeers;

impl RaftNetworkFactory<TypeConfig> for NoPeers {
    type Network = NoPeers;
    async fn new_client(&mut self, _target: u64, _node: &BasicNode) -> NoPeers {
        NoPeers
    }
}

fn unreachable<E: std::error::Error>() -> RPCError<u64, BasicNode, E> {
    RPCError::Unreachable(Unreachable::new(&io::Error::other("a one-node group has no peers")))
}

impl RaftNetwork<TypeConfig> for NoPeers {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        Err(unreachable())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>> {
        Err(unreachable())
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        Err(unreachable())
    }
}

async fn start(dir: &std::path::Path) -> (Raft<TypeConfig>, StateMachine, LogStore) {
    let config = Config {
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(5),
        max_in_snapshot_log_to_keep: 0,
        ..Default::default()
    };
    let log = LogStore::open(dir).unwrap();
    let sm = StateMachine::open(dir).unwrap();
    let raft = Raft::new(0, Arc::new(config.validate().unwrap()), NoPeers, log.clone(), sm.clone()).await.unwrap();
    (raft, sm, log)
}

/// Waits until the single node leads (it takes writes from then on).
async fn leader(raft: &Raft<TypeConfig>) {
    raft.wait(Some(Duration::from_secs(10)))
        .state(openraft::ServerState::Leader, "the single node leads")
        .await
        .expect("the node elects itself within 10 s");
}

fn apply_id(id: i64) -> Command {
    Command {
        events: vec![Event::ApplyBrokerId(ApplyBrokerIdEvent {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            broker_address: format!("10.0.0.{id}:10911"),
            register_check_code: format!("10.0.0.{id}:10911;1"),
            new_broker_id: id,
        })],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_commits_snapshots_purges_and_restarts_from_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let raft_dir = dir.path().join("raft");
    {
        let (raft, sm, _log) = start(&raft_dir).await;
        raft.initialize(BTreeMap::from([(0, BasicNode::new("127.0.0.1:9878"))])).await.unwrap();
        leader(&raft).await;
        for id in 1..=12 {
            raft.client_write(apply_id(id)).await.unwrap();
        }
        raft.client_write(Command {
            events: vec![Event::ElectMaster(ElectMasterEvent {
                new_master_elected: true,
                broker_name: "b".into(),
                new_master_broker_id: Some(3),
            })],
        })
        .await
        .unwrap();
        let set = sm.read(|s| s.set("b").cloned()).unwrap();
        assert_eq!((set.replicas.len(), set.master_broker_id, set.master_epoch), (12, Some(3), 1));
        // Snapshots every 5 entries: the log was purged up to one.
        let snapshot = raft_dir.join("snapshot");
        tokio::time::timeout(Duration::from_secs(10), async {
            while !snapshot.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("a snapshot within 10 s");
        raft.shutdown().await.unwrap();
    }

    // A record torn by a crash at the end of the log is cut off on open.
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .append(true)
        .open(raft_dir.join("log"))
        .unwrap()
        .write_all(&[9, 0, 0, 0, 1, 2, 3, 4, b'{'])
        .unwrap();

    let (raft, sm, mut log) = start(&raft_dir).await;
    let state = log.get_log_state().await.unwrap();
    assert!(state.last_purged_log_id.is_some(), "the log was purged up to a snapshot: {state:?}");
    assert!(state.last_log_id.unwrap().index >= 14, "{state:?}");
    // The one node elects itself again and applies what was committed after the snapshot.
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let done = sm.read(|s| s.set("b").is_some_and(|b| b.master_broker_id == Some(3) && b.replicas.len() == 12));
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the state is back within 10 s");
    // The state comes back from the files before the node has elected itself: writes wait
    // for that (under load the election timeout may not have run out yet).
    leader(&raft).await;
    raft.client_write(apply_id(13)).await.unwrap();
    assert_eq!(sm.read(|s| s.set("b").unwrap().next_assign_broker_id), 14);
    raft.shutdown().await.unwrap();
}
