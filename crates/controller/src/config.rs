//! `ControllerConfig`: the controller's settings under Java's keys (controller-mode.md §7.1),
//! from `controller.conf` (standalone) or `namesrv.conf` (embedded).

use std::path::PathBuf;

use ferromq_config::rocketmq_config;

fn home_dir() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."))
}

rocketmq_config! {
    /// The controller's settings. Field docs name the RocketMQ key.
    pub struct ControllerConfig {
        /// `controllerDLegerGroup`: the group's name (shown by GET_METADATA_INFO).
        group: String = "controllerDLegerGroup", default "ferromq-controller".to_owned();
        /// `controllerDLegerPeers`: `n0-host:port;n1-host:port;...`, every node's address;
        /// brokers and the other nodes reach a node there.
        peers: String = "controllerDLegerPeers", default "n0-127.0.0.1:9878".to_owned();
        /// `controllerDLegerSelfId`: this node (`n0`).
        self_id: String = "controllerDLegerSelfId", default "n0".to_owned();
        /// `controllerStorePath`: the Raft log, vote and snapshots.
        store_path: PathBuf = "controllerStorePath", default home_dir().join("DLedgerController");
        /// `scanNotActiveBrokerInterval` (ms): how often timed-out heartbeats are looked for.
        scan_not_active_broker_interval_ms: u64 = "scanNotActiveBrokerInterval", default 5_000;
        /// `scanInactiveMasterInterval` (ms): how often sets without a live master are looked for.
        scan_inactive_master_interval_ms: u64 = "scanInactiveMasterInterval", default 5_000;
        /// `electMasterMaxRetryCount`.
        elect_master_max_retry_count: u32 = "electMasterMaxRetryCount", default 3;
        /// `enableElectUncleanMaster`: allow a master from outside the SyncStateSet (can lose
        /// messages).
        enable_elect_unclean_master: bool = "enableElectUncleanMaster", default false;
        /// `notifyBrokerRoleChanged`: push NOTIFY_BROKER_ROLE_CHANGED after an election.
        notify_broker_role_changed: bool = "notifyBrokerRoleChanged", default true;
        /// `controllerHeartBeatTimeoutMills` (the broker key, read here too): how long a broker
        /// counts as alive after a heartbeat that names no timeout, and how long a new leader
        /// waits for heartbeats before it judges which masters are dead.
        broker_heartbeat_timeout_ms: u64 = "controllerHeartBeatTimeoutMills", default 10_000;
        /// `configStorePath`: where UPDATE_CONTROLLER_CONFIG writes the settings.
        config_store_path: PathBuf = "configStorePath", default home_dir().join("controller").join("controller.properties");
        /// `configBlackList`: keys UPDATE_CONTROLLER_CONFIG refuses, `;`-separated.
        config_black_list: String = "configBlackList", default "configBlackList;configStorePath".to_owned();
        /// `controllerType`: `DLedger` or `jRaft` in Java; FerroMQ runs Raft (openraft) either way.
        controller_type: String = "controllerType", default "DLedger".to_owned();
    }
}

/// A bad `controllerDLegerPeers` / `controllerDLegerSelfId`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("controllerDLegerPeers / controllerDLegerSelfId: {0}")]
pub struct PeersError(pub String);

/// One node of the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// `n0` -> 0.
    pub id: u64,
    /// Its name as configured (`n0`).
    pub name: String,
    /// `host:port`.
    pub addr: String,
}

impl ControllerConfig {
    /// The peers of `controllerDLegerPeers`, in order.
    ///
    /// # Errors
    /// An entry that is not `n<number>-host:port`, or two with one id.
    pub fn peer_list(&self) -> Result<Vec<Peer>, PeersError> {
        let mut out: Vec<Peer> = Vec::new();
        for entry in self.peers.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, addr) =
                entry.split_once('-').ok_or_else(|| PeersError(format!("{entry:?} is not n<id>-host:port")))?;
            let id = peer_id(name)?;
            if !addr.contains(':') {
                return Err(PeersError(format!("{entry:?}: {addr:?} is not host:port")));
            }
            if out.iter().any(|p| p.id == id) {
                return Err(PeersError(format!("node {name} is listed twice")));
            }
            out.push(Peer { id, name: name.to_owned(), addr: addr.to_owned() });
        }
        if out.is_empty() {
            return Err(PeersError("no peers".to_owned()));
        }
        Ok(out)
    }

    /// This node's id.
    ///
    /// # Errors
    /// `controllerDLegerSelfId` is not `n<number>` or not among the peers.
    pub fn self_peer(&self) -> Result<Peer, PeersError> {
        let id = peer_id(&self.self_id)?;
        self.peer_list()?
            .into_iter()
            .find(|p| p.id == id)
            .ok_or_else(|| PeersError(format!("{} is not in {}", self.self_id, self.peers)))
    }
}

fn peer_id(name: &str) -> Result<u64, PeersError> {
    name.trim()
        .strip_prefix('n')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| PeersError(format!("node name {name:?} is not n<number>")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse_as_java_writes_them() {
        let c = ControllerConfig {
            peers: "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858".into(),
            self_id: "n1".into(),
            ..Default::default()
        };
        let peers = c.peer_list().unwrap();
        assert_eq!(peers.len(), 3);
        assert_eq!((peers[2].id, peers[2].addr.as_str()), (2, "127.0.0.1:9858"));
        assert_eq!(c.self_peer().unwrap().addr, "127.0.0.1:9868");
        let bad = |peers: &str, me: &str| {
            ControllerConfig { peers: peers.into(), self_id: me.into(), ..Default::default() }.self_peer().is_err()
        };
        assert!(bad("x0-127.0.0.1:1", "n0"));
        assert!(bad("n0-127.0.0.1:1;n0-127.0.0.1:2", "n0"));
        assert!(bad("n0-127.0.0.1:1", "n1"));
        assert!(bad("n0-nowhere", "n0"));
        assert!(bad("", "n0"));
    }
}
