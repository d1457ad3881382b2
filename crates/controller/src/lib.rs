//! The RocketMQ 5.x controller's replicated metadata (controller-mode.md): per broker set, the
//! replicas and their ids, the master and its epoch, the SyncStateSet and its epoch; the events
//! that change them (what the Raft log holds), the heartbeat table that says who is alive, the
//! election policy, and the decisions on each controller request.
//!
//! The decisions ([`state`], [`event`], [`live`], [`elect`], [`requests`]) are deterministic and
//! free of I/O: a request handler reads the state and the heartbeat table and returns a reply
//! with the events to commit; times are passed in (ms). Around them: [`raft`] (openraft storage
//! in files: the log of events, the vote, snapshots), [`network`] (Raft traffic over the
//! controller's remoting port) and [`node`] (a controller node: Raft member, request handlers on
//! the leader, the dead-master scan; [`run`] serves one on a listener).

pub mod body;
pub mod config;
pub mod elect;
pub mod error;
pub mod event;
pub mod live;
pub mod metrics;
pub mod network;
pub mod node;
pub mod raft;
pub mod requests;
pub mod state;

pub use config::ControllerConfig;
pub use error::{ControllerError, EventDecodeError};
pub use event::Event;
pub use live::{BrokerLiveInfo, LiveTable};
pub use node::{run, run_with_metrics, ControllerNode, RunError, StartError};
pub use requests::Requests;
pub use state::{BrokerSet, ReplicaState};
