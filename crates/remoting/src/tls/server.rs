//! The server side of a port: which connections it accepts, told apart by their first byte
//! (Java: `NettyRemotingServer`'s `HandshakeHandler`), and the TLS handshake.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, trace, warn};

use crate::tls::{TlsError, TlsMode, TLS_HANDSHAKE_RECORD};

/// How long a TLS handshake may take once its first byte has arrived (Netty's `SslHandler`
/// default, which Java's servers keep).
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection a [`ServerTls`] let in.
#[derive(Debug)]
pub enum Accepted {
    /// Plaintext remoting frames.
    Plain(TcpStream),
    /// TLS, handshake done. Boxed: a rustls connection is large, and plaintext connections
    /// should not pay for it.
    Tls(Box<TlsStream<TcpStream>>),
}

/// The TLS side of one server port: its `tls.server.mode` and, unless disabled, the TLS
/// configuration. Cheap to clone.
#[derive(Clone)]
pub struct ServerTls {
    mode: TlsMode,
    acceptor: Option<TlsAcceptor>,
    handshake_timeout: Duration,
    description: Arc<str>,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls").field("mode", &self.mode).field("description", &self.description).finish()
    }
}

impl fmt::Display for ServerTls {
    /// For the start-up log: the mode and, when TLS is served, the certificate.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description)
    }
}

impl Default for ServerTls {
    /// Plaintext only ([`ServerTls::disabled`]): a library default that needs no certificate.
    /// Servers started from a config file use [`crate::tls::TlsConfig::server_tls`], whose
    /// default is Java's `permissive`.
    fn default() -> Self {
        ServerTls::disabled()
    }
}

impl ServerTls {
    /// `tls.server.mode=disabled`: plaintext connections only; a TLS ClientHello is closed.
    pub fn disabled() -> ServerTls {
        ServerTls {
            mode: TlsMode::Disabled,
            acceptor: None,
            handshake_timeout: TLS_HANDSHAKE_TIMEOUT,
            description: Arc::from(TlsMode::Disabled.as_str()),
        }
    }

    /// A port in `mode` serving TLS with `config` (ignored when `mode` is disabled).
    ///
    /// # Errors
    /// [`TlsError::MissingConfig`] when `mode` serves TLS and `config` is `None`.
    pub fn new(mode: TlsMode, config: Option<Arc<rustls::ServerConfig>>) -> Result<ServerTls, TlsError> {
        let acceptor = match (mode.accepts_tls(), config) {
            (true, Some(config)) => Some(TlsAcceptor::from(config)),
            (true, None) => return Err(TlsError::MissingConfig { mode }),
            (false, _) => None,
        };
        Ok(ServerTls {
            mode,
            acceptor,
            handshake_timeout: TLS_HANDSHAKE_TIMEOUT,
            description: Arc::from(mode.as_str()),
        })
    }

    /// Sets how long a TLS handshake may take.
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> ServerTls {
        self.handshake_timeout = timeout;
        self
    }

    pub(crate) fn with_description(mut self, description: String) -> ServerTls {
        self.description = Arc::from(description);
        self
    }

    /// The port's mode.
    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    /// Sets up one accepted connection: waits up to `first_byte_timeout` for its first byte,
    /// which says whether it is TLS (`0x16`), refuses what the mode does not serve, and runs
    /// the TLS handshake (bounded by the handshake timeout). `None` (logged with the peer's
    /// address) when the connection is refused, fails, or stays silent; the socket is then
    /// closed. No byte is consumed before the protocol is known: the first one is peeked.
    pub async fn accept(&self, socket: TcpStream, peer: SocketAddr, first_byte_timeout: Duration) -> Option<Accepted> {
        let mut first = [0u8; 1];
        match tokio::time::timeout(first_byte_timeout, socket.peek(&mut first)).await {
            Ok(Ok(0)) => {
                debug!(remote_addr = %peer, "connection closed before sending anything");
                return None;
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                debug!(remote_addr = %peer, error = %e, "reading the first byte of a connection failed");
                return None;
            }
            Err(_) => {
                debug!(
                    remote_addr = %peer,
                    timeout_ms = first_byte_timeout.as_millis() as u64,
                    "connection sent nothing in time; closing it"
                );
                return None;
            }
        }
        if first[0] != TLS_HANDSHAKE_RECORD {
            if !self.mode.accepts_plaintext() {
                warn!(
                    remote_addr = %peer,
                    "refusing a plaintext connection: tls.server.mode=enforcing accepts TLS only \
                     (enable TLS in the client: useTLS / tls.enable=true, or set tls.server.mode=permissive)"
                );
                return None;
            }
            trace!(remote_addr = %peer, "plaintext connection");
            return Some(Accepted::Plain(socket));
        }
        let Some(acceptor) = self.acceptor.as_ref() else {
            warn!(
                remote_addr = %peer,
                "refusing a TLS connection: tls.server.mode=disabled accepts plaintext only \
                 (disable TLS in the client, or set tls.server.mode=permissive)"
            );
            return None;
        };
        // Remoting frames are small and latency-bound; the handshake's flights too.
        if let Err(e) = socket.set_nodelay(true) {
            debug!(remote_addr = %peer, error = %e, "cannot set TCP_NODELAY");
        }
        let deadline = Instant::now() + self.handshake_timeout;
        match tokio::time::timeout_at(deadline, acceptor.accept(socket)).await {
            Ok(Ok(tls)) => {
                trace!(remote_addr = %peer, "TLS connection");
                Some(Accepted::Tls(Box::new(tls)))
            }
            Ok(Err(e)) => {
                warn!(remote_addr = %peer, error = %e, "TLS handshake failed; closing the connection");
                None
            }
            Err(_) => {
                warn!(
                    remote_addr = %peer,
                    timeout_ms = self.handshake_timeout.as_millis() as u64,
                    "TLS handshake timed out; closing the connection"
                );
                None
            }
        }
    }
}
