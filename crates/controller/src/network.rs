//! Raft traffic between controller nodes over the controller's remoting port: each openraft
//! RPC is one remoting request with a FerroMQ code (not a RocketMQ one: Java controllers speak
//! DLedger or JRaft, which no FerroMQ node joins) and the openraft message as a JSON body; the
//! answer's body is the JSON of openraft's `Result`.

use std::sync::Arc;
use std::time::Duration;

use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::RemotingClient;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::raft::TypeConfig;

/// openraft AppendEntries (FerroMQ code).
pub const RAFT_APPEND_ENTRIES: i32 = 20_001;
/// openraft Vote (FerroMQ code).
pub const RAFT_VOTE: i32 = 20_002;
/// openraft InstallSnapshot (FerroMQ code).
pub const RAFT_INSTALL_SNAPSHOT: i32 = 20_003;

/// Makes a [`PeerClient`] per target; they share one remoting client (one connection per peer).
#[derive(Clone)]
pub struct Network {
    client: Arc<RemotingClient>,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for PeerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerClient").field("target", &self.target).field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Network {
    /// Raft traffic over `client`.
    pub fn new(client: Arc<RemotingClient>) -> Network {
        Network { client }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> PeerClient {
        PeerClient { client: self.client.clone(), target, addr: node.addr.clone() }
    }
}

/// Sends one node's RPCs.
pub struct PeerClient {
    client: Arc<RemotingClient>,
    target: u64,
    addr: String,
}

impl PeerClient {
    async fn call<Req: Serialize, Resp: DeserializeOwned, E: std::error::Error + DeserializeOwned>(
        &self,
        code: i32,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, RPCError<u64, BasicNode, E>> {
        let body = serde_json::to_vec(request).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let answer = self
            .client
            .invoke(&self.addr, RemotingCommand::request(code).with_body(body), timeout)
            .await
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        if answer.code != response_code::SUCCESS {
            let e = std::io::Error::other(format!(
                "controller {} answered {}: {}",
                self.addr,
                answer.code,
                answer.remark.unwrap_or_default()
            ));
            return Err(RPCError::Network(NetworkError::new(&e)));
        }
        let result: Result<Resp, E> =
            serde_json::from_slice(&answer.body).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.call(RAFT_APPEND_ENTRIES, &rpc, option.hard_ttl()).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>> {
        self.call(RAFT_INSTALL_SNAPSHOT, &rpc, option.hard_ttl()).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.call(RAFT_VOTE, &rpc, option.hard_ttl()).await
    }
}
