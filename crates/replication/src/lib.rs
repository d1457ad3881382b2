//! Master-to-slave CommitLog replication: RocketMQ's classic HA protocol (4.x, and 5.x
//! outside controller mode), wire-compatible with Java brokers.
//!
//! - [`HaService`] runs on a master: it accepts slaves on the HA port (`haListenPort`, the
//!   broker port + 1), ships each one raw CommitLog bytes from the offset it reports, and
//!   keeps what each slave acknowledged, so SYNC_MASTER puts can
//!   [wait for their replicas](HaService::wait_for_replicas).
//! - [`HaClient`] runs on a slave: it connects to the master's HA address, appends what the
//!   master ships with [`MessageStore::append_replicated`](ferromq_store::MessageStore::append_replicated)
//!   (the store's dispatch then builds ConsumeQueues and the index as on the master) and
//!   reports its offset back.
//! - [`HaConfig`] holds the RocketMQ keys; [`HaRuntimeInfo`] is the GET_BROKER_HA_STATUS body.
//!
//! The wire format is in [`frame`]. This crate does not decide roles, refuse writes on
//! slaves, or copy metadata between brokers: the broker does that.
//!
//! Controller mode (5.x) replicates with AutoSwitchHA ([`autoswitch`]): its frames
//! ([`autoswitch_frame`]), the epoch file with the consistent point a replica truncates to
//! ([`epoch_file`]), and the broker's identity files ([`identity_file`]).

pub mod autoswitch;
pub mod autoswitch_frame;
mod client;
mod config;
mod connection;
pub mod epoch_file;
mod error;
mod flow;
pub mod frame;
pub mod identity_file;
mod link;
mod net;
mod runtime_info;
mod service;

pub use client::{HaClient, HaClientOptions};
pub use config::HaConfig;
pub use error::ReplicaWaitError;
pub use link::{HaListener, ReplicaAuthenticator, AUTH_MAGIC};
pub use net::parse_white_list;
pub use runtime_info::{HaClientRuntimeInfo, HaConnectionRuntimeInfo, HaRuntimeInfo};
pub use service::{HaService, MAX_SLAVE_CONNECTIONS};

/// Resolves once `shutdown` turns true (or its sender is gone).
async fn stopped(shutdown: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}
