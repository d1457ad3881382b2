//! The tokio transport of RocketMQ's remoting protocol.
//!
//! A [`Connection`] is a full-duplex RPC endpoint over one TCP stream: it decodes frames,
//! dispatches requests to a [`RequestHandler`], correlates responses with the requests it sent
//! (by `opaque`), and writes through one bounded queue. [`RemotingServer`] accepts connections;
//! [`RemotingClient`] keeps one connection per address and reconnects. Both sides can send
//! requests, which is how brokers call clients (NOTIFY_CONSUMER_IDS_CHANGED,
//! CHECK_TRANSACTION_STATE).
//!
//! This crate knows frames and codes, not what any request means.

mod client;
mod config;
mod connection;
mod error;
mod handler;
mod server;

pub use client::RemotingClient;
pub use config::{ClientConfig, ServerConfig, ROCKETMQ_ZONE_ENV, ROCKETMQ_ZONE_MODE_ENV};
pub use connection::{Connection, ConnectionId};
pub use error::RemotingError;
pub use handler::{Dispatcher, HandlerFuture, RequestHandler};
pub use server::RemotingServer;
