//! The tokio transport of RocketMQ's remoting protocol.
//!
//! A [`Connection`] is a full-duplex RPC endpoint over one TCP stream: it decodes frames,
//! dispatches requests to a [`RequestHandler`], correlates responses with the requests it sent
//! (by `opaque`), and writes through one bounded queue. [`RemotingServer`] accepts connections;
//! [`RemotingClient`] keeps one connection per address and reconnects. Both sides can send
//! requests, which is how brokers call clients (NOTIFY_CONSUMER_IDS_CHANGED,
//! CHECK_TRANSACTION_STATE). [`in_process_pair`] joins a client and a server handler in one
//! process through memory, with the same connection machinery, for components that run inside
//! a server (the proxy's local mode). [`tls`] adds TLS to both sides: servers tell TLS from
//! plaintext by each connection's first byte (`tls.server.mode`), clients connect with TLS when
//! their [`ClientConfig::tls`] says so.
//!
//! This crate knows frames and codes, not what any request means.

mod client;
mod config;
mod connection;
mod error;
mod handler;
pub mod handoff;
mod in_process;
mod observe;
mod outgoing;
pub mod proxy_protocol;
mod server;
pub mod tls;

pub use client::RemotingClient;
pub use config::{ClientConfig, ServerConfig, ROCKETMQ_ZONE_ENV, ROCKETMQ_ZONE_MODE_ENV};
pub use connection::{Connection, ConnectionId};
pub use error::RemotingError;
pub use handler::{Dispatcher, HandlerFuture, RequestHandler};
pub use handoff::{HandedConnection, Http2Handoff};
pub use in_process::{in_process_pair, InProcessClient, InProcessServer, IN_PROCESS_BUFFER_BYTES};
pub use observe::{Rpc, RpcObserver, RpcResult};
pub use server::RemotingServer;
