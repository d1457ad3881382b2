//! Transport settings with RocketMQ's defaults.

use std::time::Duration;

use ferromq_protocol::{SerializeType, MAX_FRAME_BYTES};

/// Commands a connection may queue for writing before senders wait.
pub const WRITE_QUEUE_CAPACITY: usize = 4096;

/// Server-side transport settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest accepted frame, length field included (Java: `frameMaxLength`, 16 MiB).
    pub max_frame_bytes: usize,
    /// A connection with neither reads nor writes for this long is closed (Java:
    /// `serverChannelMaxIdleTimeSeconds`, 120 s).
    pub idle_timeout: Duration,
    /// Header serialization of the commands this side writes (Java default JSON).
    pub serialize_type: SerializeType,
    /// Requests of one connection processed at once; past it the connection is not read
    /// until one finishes.
    pub max_in_flight_per_connection: usize,
    /// Connections served at once; further ones are accepted and closed at once.
    pub max_connections: usize,
    /// How long shutdown waits for in-flight requests to finish.
    pub shutdown_grace: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_frame_bytes: MAX_FRAME_BYTES,
            idle_timeout: Duration::from_secs(120),
            serialize_type: SerializeType::Json,
            max_in_flight_per_connection: 1024,
            max_connections: 10_000,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Client-side transport settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Connect timeout (Java: `connectTimeoutMillis`, 3 s).
    pub connect_timeout: Duration,
    /// Per-connection settings shared with the server side.
    pub connection: ServerConfig,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connect_timeout: Duration::from_secs(3),
            // Clients keep idle connections open; Java clients close them after 120 s too.
            connection: ServerConfig::default(),
        }
    }
}
