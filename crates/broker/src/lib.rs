//! The RocketMQ broker: serves producers and consumers over the remoting protocol on top of the
//! message store, keeps topic, subscription-group and consumer-offset metadata, parks pulls
//! (long polling), and registers itself with the name servers. Components in the broker's
//! process reach the same processors through a [`LocalAccess`], without a socket.

mod acl;
mod auth;
mod broker;
pub mod client;
mod config;
mod controller_mode;
mod filter;
mod ha;
mod local_access;
mod long_polling;
pub mod metadata;
mod metrics;
mod pop;
mod processor;
mod registration;
mod registration_queue;
pub mod replicas_manager;
mod schedule;
pub mod service;
mod slave_sync;
mod stats;
mod timer;
mod transaction;

pub use broker::{run, run_with_local_access, Broker, BrokerError};
pub use config::{check_max_message_size, BrokerConfig, BrokerRole, BrokerSettings, MAX_MESSAGE_SIZE_LIMIT};
pub use local_access::{LocalAccess, LocalCall, LOCAL_CALLS_MAX};
