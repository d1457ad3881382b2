//! One client connection as the broker's client tables record it: the connection, the client id
//! the client announced in its heartbeat, its language and version, and when it was last heard
//! from. Java: `ClientChannelInfo`.
//!
//! Time is passed in as epoch milliseconds; this module never reads the clock.

use ferromq_protocol::LanguageCode;
use ferromq_remoting::{Connection, ConnectionId};

/// A client not heard from for longer than this is dropped by the managers' scans and its
/// connection closed (Java: `ProducerManager.CHANNEL_EXPIRED_TIMEOUT`, and the broker config
/// `channelExpiredTimeout`, both 120 s).
pub const CHANNEL_EXPIRED_TIMEOUT_MS: i64 = 120_000;

/// A registered client connection.
#[derive(Debug, Clone)]
pub struct ClientChannelInfo {
    /// The broker's handle to the client's connection; also how the broker calls the client.
    pub connection: Connection,
    /// `ip@instanceName` as sent in the heartbeat (`clientID`).
    pub client_id: String,
    /// The client's implementation language, from its request.
    pub language: LanguageCode,
    /// The client's `MQVersion` ordinal, from its request.
    pub version: i32,
    /// When the client was last heard from, in epoch milliseconds.
    pub last_update_ms: i64,
}

impl ClientChannelInfo {
    /// A record of `connection` as `client_id`, heard from at `last_update_ms`.
    pub fn new(
        connection: Connection,
        client_id: impl Into<String>,
        language: LanguageCode,
        version: i32,
        last_update_ms: i64,
    ) -> Self {
        ClientChannelInfo { connection, client_id: client_id.into(), language, version, last_update_ms }
    }

    /// The id of the underlying connection, which keys the managers' tables.
    pub fn connection_id(&self) -> ConnectionId {
        self.connection.id()
    }

    /// Whether the client has been silent for more than [`CHANNEL_EXPIRED_TIMEOUT_MS`] at
    /// `now_ms`. A clock that went backwards never expires anyone.
    pub fn is_expired(&self, now_ms: i64) -> bool {
        now_ms.saturating_sub(self.last_update_ms) > CHANNEL_EXPIRED_TIMEOUT_MS
    }
}
