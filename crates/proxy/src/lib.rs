//! The RocketMQ 5.x gRPC proxy: `apache.rocketmq.v2.MessagingService` served on top of brokers
//! that speak the remoting protocol, either over the network (cluster mode, `ferromq proxy`) or
//! in process (local mode, inside `ferromq broker` and `ferromq standalone`).
//!
//! In cluster mode every RPC becomes remoting requests to brokers (POP for receives,
//! SEND_MESSAGE_V2 for sends...); in local mode the hot RPCs (send, receive, ack, change
//! invisible time) call the broker's service layer (`ferromq_broker::service`) in process, the
//! same code the broker's remoting processors call. Either way the broker is the one
//! implementation of the messaging semantics, whichever protocol the client speaks.

pub mod admin_relay;
pub mod auth;
pub mod brokers;
pub mod clients;
pub mod codec;
pub mod config;
pub mod consumer;
pub mod context;
pub mod convert;
pub mod filter;
pub mod listener;
pub mod metrics;
pub mod namespace;
pub mod offsets;
pub mod pb;
pub mod producer;
pub mod proxy;
pub mod remoting;
pub mod route;
pub mod server;
pub mod service;
pub mod status;
pub mod telemetry;
pub mod tls;
pub mod validate;

pub use config::ProxyConfig;
pub use proxy::Proxy;
pub use route::Advertise;
pub use server::{cluster_proxy, run_cluster, serve, ServeError};
