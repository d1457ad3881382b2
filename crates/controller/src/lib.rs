//! The RocketMQ 5.x controller's replicated metadata (controller-mode.md): per broker set, the
//! replicas and their ids, the master and its epoch, the SyncStateSet and its epoch; the events
//! that change them (what the Raft log holds), the heartbeat table that says who is alive, the
//! election policy, and the decisions on each controller request.
//!
//! Everything here is deterministic and free of I/O: a request handler reads the state and the
//! heartbeat table and returns a reply with the events to commit; the Raft layer commits them
//! and applies them on every node with [`ReplicaState::apply`]. Times are passed in (ms).

pub mod body;
pub mod config;
pub mod elect;
pub mod error;
pub mod event;
pub mod live;
pub mod network;
pub mod node;
pub mod raft;
pub mod requests;
pub mod state;

pub use config::ControllerConfig;
pub use error::{ControllerError, EventDecodeError};
pub use event::Event;
pub use live::{BrokerLiveInfo, LiveTable};
pub use node::{run, ControllerNode, RunError, StartError};
pub use requests::Requests;
pub use state::{BrokerSet, ReplicaState};
