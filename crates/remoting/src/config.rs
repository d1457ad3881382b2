//! Transport settings with RocketMQ's defaults.

use std::sync::Arc;
use std::time::Duration;

use ferromq_config::IpBlock;
use ferromq_protocol::header::{ZONE_MODE, ZONE_NAME};
use ferromq_protocol::signature::SessionCredentials;
use ferromq_protocol::{SerializeType, MAX_FRAME_BYTES};

use crate::tls::{ClientTls, ServerTls};

/// Commands a connection may queue for writing before senders wait.
pub const WRITE_QUEUE_CAPACITY: usize = 4096;

/// Server-side transport settings.
#[derive(Clone)]
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
    /// Connections one client address may hold at once (so one host cannot take every slot
    /// of `max_connections`); further ones from it are accepted and closed at once.
    pub max_connections_per_ip: usize,
    /// How long shutdown waits for in-flight requests to finish.
    pub shutdown_grace: Duration,
    /// Credentials every request sent on the connection is signed with (Java:
    /// `AclClientRPCHook`); `None` sends requests unsigned. Responses are never signed.
    pub credentials: Option<Arc<SessionCredentials>>,
    /// Which connections a server accepts (`tls.server.mode`) and its TLS configuration. A
    /// connection that sends nothing is closed after `idle_timeout`. The default is plaintext
    /// only; servers started from a config file build it with
    /// [`crate::tls::TlsConfig::server_tls`]. Unused by clients.
    pub tls: ServerTls,
    /// `proxyProtocolTrustedAddresses` (FerroMQ): the load balancers whose PROXY protocol
    /// headers are believed ([`crate::proxy_protocol`]); empty refuses every header.
    pub proxy_protocol_trusted: Arc<[IpBlock]>,
    /// Told of every request served (the `rocketmq_rpc_latency` metric); `None`: nobody.
    pub rpc_observer: Option<Arc<dyn crate::observe::RpcObserver>>,
    /// Where connections that start with the HTTP/2 preface go (the proxy's remoting port,
    /// `enableRemotingLocalProxyGrpc`; [`crate::handoff`]); `None`: every connection is remoting.
    pub http2_handoff: Option<crate::handoff::Http2Handoff>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_frame_bytes: MAX_FRAME_BYTES,
            idle_timeout: Duration::from_secs(120),
            serialize_type: SerializeType::Json,
            max_in_flight_per_connection: 1024,
            max_connections: 10_000,
            max_connections_per_ip: 1_000,
            shutdown_grace: Duration::from_secs(10),
            credentials: None,
            tls: ServerTls::disabled(),
            proxy_protocol_trusted: Arc::from(Vec::new()),
            rpc_observer: None,
            http2_handoff: None,
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("idle_timeout", &self.idle_timeout)
            .field("serialize_type", &self.serialize_type)
            .field("max_in_flight_per_connection", &self.max_in_flight_per_connection)
            .field("max_connections", &self.max_connections)
            .field("max_connections_per_ip", &self.max_connections_per_ip)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("credentials", &self.credentials)
            .field("tls", &self.tls)
            .field("proxy_protocol_trusted", &self.proxy_protocol_trusted)
            .field("rpc_observer", &self.rpc_observer.is_some())
            .field("http2_handoff", &self.http2_handoff.is_some())
            .finish()
    }
}

/// Environment variable naming the zone a broker or client runs in. Java:
/// `MixAll.ROCKETMQ_ZONE_ENV` (or the `rocketmq.zone` system property).
pub const ROCKETMQ_ZONE_ENV: &str = "ROCKETMQ_ZONE";
/// Environment variable asking for routes of the client's own zone only. Java:
/// `MixAll.ROCKETMQ_ZONE_MODE_ENV`.
pub const ROCKETMQ_ZONE_MODE_ENV: &str = "ROCKETMQ_ZONE_MODE";

/// Client-side transport settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Connect timeout (Java: `connectTimeoutMillis`, 3 s).
    pub connect_timeout: Duration,
    /// Per-connection settings shared with the server side.
    pub connection: ServerConfig,
    /// Header fields added to every request this client sends, replacing any of the same
    /// name (Java: an `RPCHook`'s `doBeforeRequest`).
    pub request_ext_fields: Vec<(&'static str, String)>,
    /// Connect with TLS (Java: `useTLS`); `None`: plaintext. The handshake counts against
    /// `connect_timeout`.
    pub tls: Option<ClientTls>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connect_timeout: Duration::from_secs(3),
            // Clients keep idle connections open; Java clients close them after 120 s too.
            connection: ServerConfig::default(),
            request_ext_fields: Vec::new(),
            tls: None,
        }
    }
}

impl ClientConfig {
    /// Adds the zone fields Java's brokers and clients send on every request when
    /// `ROCKETMQ_ZONE` / `ROCKETMQ_ZONE_MODE` are set (`DynamicalExtFieldRPCHook`): the name
    /// server records a registering broker's zone, and answers a client in zone mode with
    /// its zone's routes.
    pub fn with_zone_from_env(self) -> Self {
        self.with_zone(std::env::var(ROCKETMQ_ZONE_ENV).ok(), std::env::var(ROCKETMQ_ZONE_MODE_ENV).ok())
    }

    /// Signs every request with `credentials` (`None`: unsigned).
    pub fn with_credentials(mut self, credentials: Option<SessionCredentials>) -> Self {
        self.connection.credentials = credentials.map(Arc::new);
        self
    }

    /// Connects with TLS as `tls` says (`None`: plaintext).
    pub fn with_tls(mut self, tls: Option<ClientTls>) -> Self {
        self.tls = tls;
        self
    }

    /// Adds `__ZONE_NAME` and `__ZONE_MODE` fields for the non-blank values given.
    pub fn with_zone(mut self, zone: Option<String>, zone_mode: Option<String>) -> Self {
        let fields = [(ZONE_NAME, zone), (ZONE_MODE, zone_mode)];
        for (key, value) in fields {
            if let Some(value) = value.filter(|v| !v.trim().is_empty()) {
                self.request_ext_fields.retain(|(k, _)| *k != key);
                self.request_ext_fields.push((key, value));
            }
        }
        self
    }
}
