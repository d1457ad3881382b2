//! Transport errors.

use std::time::Duration;

/// What went wrong with a remote call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemotingError {
    /// No connection could be made.
    #[error("connect to {addr} failed")]
    Connect {
        /// Peer address.
        addr: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Connecting took longer than the configured connect timeout.
    #[error("connect to {addr} timed out after {timeout:?}")]
    ConnectTimeout {
        /// Peer address.
        addr: String,
        /// The limit.
        timeout: Duration,
    },
    /// No response arrived in time.
    #[error("request {opaque} to {addr} timed out after {timeout:?}")]
    Timeout {
        /// Peer address.
        addr: String,
        /// The request's correlation id.
        opaque: i32,
        /// The limit.
        timeout: Duration,
    },
    /// The connection closed before the response arrived, or was already closed.
    #[error("connection to {addr} is closed")]
    ConnectionClosed {
        /// Peer address.
        addr: String,
    },
    /// The command cannot be framed (too large).
    #[error("cannot encode request to {addr}")]
    Encode {
        /// Peer address.
        addr: String,
        /// The cause.
        #[source]
        source: ferromq_protocol::FrameError,
    },
    /// The TLS handshake with the server failed (refused certificate, a plaintext-only server,
    /// a server asking for a client certificate this side does not have).
    #[error("TLS handshake with {addr} failed")]
    Tls {
        /// Peer address.
        addr: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The address is not `host:port`.
    #[error("invalid address {0:?}")]
    InvalidAddress(String),
    /// The listener failed.
    #[error("accept failed")]
    Accept(#[source] std::io::Error),
}
