//! The gRPC port's connections: TLS and plaintext on one socket, as Java's proxy serves them.
//!
//! RocketMQ 5.x clients enable TLS by default (trusting any certificate) and some users turn it
//! off, so with `tls.server.mode=permissive` (the default) both must work on the same port.
//! [`GrpcIncoming`] accepts on a bound [`TcpListener`], looks at the first byte of every
//! connection (`0x16` starts a TLS ClientHello; anything else is plaintext, normally the
//! HTTP/2 preface `PRI * HTTP/2.0`), runs the TLS handshake when needed, and yields the
//! connections as a stream for tonic:
//!
//! ```no_run
//! # use tonic::codegen::{http, Service};
//! # async fn f<S>(svc: S) -> Result<(), Box<dyn std::error::Error>>
//! # where
//! #     S: Service<http::Request<tonic::body::Body>, Response = http::Response<tonic::body::Body>>,
//! #     S: Clone + Send + 'static,
//! #     S::Future: Send,
//! #     S::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
//! # {
//! use ferromq_proxy::listener::{GrpcIncoming, ListenerOptions};
//! use ferromq_proxy::tls::{server_config, TlsMode};
//!
//! let listener = tokio::net::TcpListener::bind("0.0.0.0:8081").await?;
//! let tls = server_config(None, None)?; // self-signed, as with tlsTestModeEnable=true
//! let incoming = GrpcIncoming::new(listener, TlsMode::Permissive, Some(tls), ListenerOptions::default())?;
//! // `svc` is e.g. the generated `MessagingServiceServer` (tonic's `router` feature, needed
//! // for `add_service`, is not enabled in this crate).
//! tonic::transport::Server::builder().serve_with_incoming(svc, incoming).await?;
//! # Ok(()) }
//! ```
//!
//! # Peer address in request handlers
//!
//! tonic calls [`Connected::connect_info`] once per connection and inserts the result into the
//! extensions of every request on it, keyed by its type. Handlers therefore read
//! `request.extensions().get::<GrpcConnectInfo>()` (or [`GrpcConnectInfo::of`]) to learn the
//! client's address and whether TLS was used. tonic's own `Request::remote_addr()` only knows
//! its `TcpConnectInfo`/`TlsConnectInfo` types and returns `None` for connections from here.
//!
//! # Bounds
//!
//! Everything a client can make the server hold is bounded ([`ListenerOptions`]): connections
//! served at once (beyond it new connections are closed right away), the time from accept to the
//! end of the TLS handshake (a client that connects and sends nothing is closed then), and the
//! connections ready but not yet taken by tonic. Handshakes run on their own tasks, so a slow
//! client never delays the accept loop or other clients. Failures are logged with the peer
//! address and never end the stream; accept errors such as EMFILE pause the loop briefly.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_stream::Stream;
use tonic::transport::server::Connected;

use crate::tls::{TlsError, TlsMode};

/// The TLS record type of a handshake record: the first byte of every ClientHello.
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// The start of the HTTP/2 connection preface a plaintext gRPC client sends first.
const HTTP2_PREFACE_START: &[u8] = b"PRI ";

/// Limits of a [`GrpcIncoming`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerOptions {
    /// Connections open at once, counted from accept until tonic drops the connection
    /// (`grpcMaxConnections`); further connections are closed immediately. At least 1.
    pub max_connections: usize,
    /// Time from accept until the first byte has arrived and, for TLS, the handshake is done;
    /// the connection is closed when it runs out.
    pub handshake_timeout: Duration,
    /// Connections ready for tonic but not yet taken; handshakes wait beyond it. At least 1.
    pub channel_capacity: usize,
    /// Pause after an accept error that is not about one connection (e.g. EMFILE, out of file
    /// descriptors), so the loop does not spin while the condition lasts.
    pub accept_error_backoff: Duration,
}

impl Default for ListenerOptions {
    fn default() -> Self {
        ListenerOptions {
            max_connections: 10_000,
            handshake_timeout: Duration::from_secs(10),
            channel_capacity: 128,
            accept_error_backoff: Duration::from_millis(100),
        }
    }
}

/// What a request handler learns about its connection; tonic puts it into every request's
/// extensions (see the [module docs](self#peer-address-in-request-handlers)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrpcConnectInfo {
    /// The client's address.
    pub remote_addr: SocketAddr,
    /// The local address the client connected to, when the socket could tell.
    pub local_addr: Option<SocketAddr>,
    /// Whether the connection is TLS.
    pub tls: bool,
}

impl GrpcConnectInfo {
    /// The connection info of a request served over a [`GrpcIncoming`]; `None` for requests
    /// that did not come through one (e.g. tests calling a handler directly).
    pub fn of<T>(request: &tonic::Request<T>) -> Option<&GrpcConnectInfo> {
        request.extensions().get::<GrpcConnectInfo>()
    }
}

enum Io {
    Plain(TcpStream),
    // Boxed: a rustls connection is large, and plaintext connections should not pay for it.
    Tls(Box<TlsStream<TcpStream>>),
}

/// One accepted connection, plaintext or TLS (handshake done), as tonic serves it.
///
/// It holds its slot of [`ListenerOptions::max_connections`] until dropped, which tonic does
/// when the connection ends.
pub struct MaybeTlsStream {
    io: Io,
    info: GrpcConnectInfo,
    _slot: OwnedSemaphorePermit,
}

impl MaybeTlsStream {
    /// The connection's addresses and TLS flag.
    pub fn connect_info(&self) -> GrpcConnectInfo {
        self.info
    }

    /// Whether the connection is TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self.io, Io::Tls(_))
    }
}

impl fmt::Debug for MaybeTlsStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaybeTlsStream").field("info", &self.info).finish_non_exhaustive()
    }
}

impl Connected for MaybeTlsStream {
    type ConnectInfo = GrpcConnectInfo;

    fn connect_info(&self) -> GrpcConnectInfo {
        self.info
    }
}

impl AsyncRead for MaybeTlsStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for MaybeTlsStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The gRPC port's connections as a stream for tonic's `serve_with_incoming` /
/// `serve_with_incoming_shutdown` (see the [module docs](self)).
///
/// The stream never ends and never yields an error (the `io::Error` in the item type is what
/// tonic asks for): failed connections are logged and skipped. Dropping it stops accepting and
/// aborts the handshakes in progress; connections already handed to tonic are unaffected.
pub struct GrpcIncoming {
    ready: mpsc::Receiver<MaybeTlsStream>,
    accept_task: JoinHandle<()>,
    slots: Arc<Semaphore>,
    max_connections: usize,
    mode: TlsMode,
}

/// What the accept loop and the handshake tasks share.
struct Shared {
    mode: TlsMode,
    acceptor: Option<TlsAcceptor>,
    handshake_timeout: Duration,
}

impl GrpcIncoming {
    /// Starts accepting on `listener` (on the current tokio runtime).
    ///
    /// `tls` is required unless `mode` is [`TlsMode::Disabled`], and ignored then.
    ///
    /// # Errors
    /// [`TlsError::MissingConfig`] when `mode` serves TLS and `tls` is `None`.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn new(
        listener: TcpListener,
        mode: TlsMode,
        tls: Option<Arc<ServerConfig>>,
        options: ListenerOptions,
    ) -> Result<GrpcIncoming, TlsError> {
        let acceptor = match (mode.accepts_tls(), tls) {
            (true, Some(config)) => Some(TlsAcceptor::from(config)),
            (true, None) => return Err(TlsError::MissingConfig { mode }),
            (false, _) => None,
        };
        let max_connections = options.max_connections.clamp(1, Semaphore::MAX_PERMITS);
        let slots = Arc::new(Semaphore::new(max_connections));
        let (tx, ready) = mpsc::channel(options.channel_capacity.max(1));
        let shared = Arc::new(Shared { mode, acceptor, handshake_timeout: options.handshake_timeout });
        let accept_task = tokio::spawn(accept_loop(
            listener,
            shared,
            Arc::clone(&slots),
            max_connections,
            options.accept_error_backoff,
            tx,
        ));
        Ok(GrpcIncoming { ready, accept_task, slots, max_connections, mode })
    }

    /// Connections open now: accepted (handshaking, waiting for tonic, or served) and not yet
    /// closed.
    pub fn open_connections(&self) -> usize {
        self.max_connections - self.slots.available_permits()
    }
}

impl fmt::Debug for GrpcIncoming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcIncoming")
            .field("mode", &self.mode)
            .field("open_connections", &self.open_connections())
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

impl Stream for GrpcIncoming {
    type Item = Result<MaybeTlsStream, io::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().ready.poll_recv(cx).map(|conn| conn.map(Ok))
    }
}

impl Drop for GrpcIncoming {
    fn drop(&mut self) {
        // The accept task owns the handshake tasks (its JoinSet), so this aborts them too.
        self.accept_task.abort();
    }
}

/// Rate limit for warnings a flood of connections could repeat many times a second.
struct Throttle {
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttle {
    const PERIOD: Duration = Duration::from_secs(1);

    fn new() -> Throttle {
        Throttle { last: None, suppressed: 0 }
    }

    /// `Some(number suppressed since the last one)` when a warning may be logged now.
    fn allow(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self.last.is_some_and(|last| now.duration_since(last) < Self::PERIOD) {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// Errors of `accept` that concern one connection (already gone) rather than the listener.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionRefused
    )
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    max_connections: usize,
    accept_error_backoff: Duration,
    ready: mpsc::Sender<MaybeTlsStream>,
) {
    let mut handshakes = JoinSet::new();
    let mut full_warning = Throttle::new();
    let mut accept_warning = Throttle::new();
    loop {
        tokio::select! {
            biased;
            Some(finished) = handshakes.join_next(), if !handshakes.is_empty() => {
                if let Err(e) = finished {
                    if e.is_panic() {
                        tracing::error!(error = %e, "a gRPC connection handshake task panicked");
                    }
                }
            }
            () = ready.closed() => return,
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                        if let Some(suppressed) = full_warning.allow() {
                            tracing::warn!(
                                %peer,
                                max_connections,
                                suppressed,
                                "gRPC port at its connection limit (grpcMaxConnections); closing the new connection"
                            );
                        }
                        drop(socket);
                        continue;
                    };
                    let shared = Arc::clone(&shared);
                    let ready = ready.clone();
                    handshakes.spawn(async move {
                        if let Some(conn) = prepare(socket, peer, slot, &shared).await {
                            // Fails only when the stream is gone, which drops the connection.
                            let _ = ready.send(conn).await;
                        }
                    });
                }
                Err(e) if is_connection_error(&e) => {
                    tracing::debug!(error = %e, "a gRPC connection was gone before accept");
                }
                Err(e) => {
                    if let Some(suppressed) = accept_warning.allow() {
                        tracing::warn!(
                            error = %e,
                            backoff_ms = accept_error_backoff.as_millis() as u64,
                            suppressed,
                            "accepting on the gRPC port failed; pausing before retrying"
                        );
                    }
                    tokio::time::sleep(accept_error_backoff).await;
                }
            },
        }
    }
}

/// Sets up one accepted connection: classifies it by its first byte and runs the TLS
/// handshake. `None` (logged) when it is refused or fails.
async fn prepare(
    socket: TcpStream,
    peer: SocketAddr,
    slot: OwnedSemaphorePermit,
    shared: &Shared,
) -> Option<MaybeTlsStream> {
    // gRPC sends many small frames (headers, acks); Nagle's algorithm would delay them.
    if let Err(e) = socket.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY on a gRPC connection");
    }
    let local_addr = socket.local_addr().ok();
    let timeout_ms = shared.handshake_timeout.as_millis() as u64;
    let deadline = Instant::now() + shared.handshake_timeout;

    // Peeking leaves the bytes in the socket for the TLS acceptor or HTTP/2.
    let mut first = [0u8; 4];
    let seen = match tokio::time::timeout_at(deadline, socket.peek(&mut first)).await {
        Ok(Ok(0)) => {
            tracing::debug!(%peer, "gRPC connection closed before sending anything");
            return None;
        }
        Ok(Ok(n)) => &first[..n],
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "reading the first byte of a gRPC connection failed");
            return None;
        }
        Err(_) => {
            tracing::debug!(%peer, timeout_ms, "gRPC connection sent nothing within the handshake timeout; closing it");
            return None;
        }
    };

    let info = |tls| GrpcConnectInfo { remote_addr: peer, local_addr, tls };
    if seen[0] != TLS_HANDSHAKE_RECORD {
        if !shared.mode.accepts_plaintext() {
            tracing::warn!(
                %peer,
                http2_preface = seen.starts_with(HTTP2_PREFACE_START),
                "refusing a plaintext gRPC connection: tls.server.mode=enforcing accepts TLS only \
                 (enable TLS in the client, or set tls.server.mode=permissive)"
            );
            return None;
        }
        tracing::trace!(%peer, "plaintext gRPC connection");
        return Some(MaybeTlsStream { io: Io::Plain(socket), info: info(false), _slot: slot });
    }

    let Some(acceptor) = shared.acceptor.as_ref().filter(|_| shared.mode.accepts_tls()) else {
        tracing::warn!(
            %peer,
            "refusing a TLS gRPC connection: tls.server.mode=disabled accepts plaintext only \
             (disable TLS in the client, e.g. enableSsl(false), or set tls.server.mode=permissive)"
        );
        return None;
    };
    match tokio::time::timeout_at(deadline, acceptor.accept(socket)).await {
        Ok(Ok(tls)) => {
            let alpn = tls.get_ref().1.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned());
            tracing::trace!(%peer, ?alpn, "TLS gRPC connection");
            Some(MaybeTlsStream { io: Io::Tls(Box::new(tls)), info: info(true), _slot: slot })
        }
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake of a gRPC connection failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, timeout_ms, "TLS handshake of a gRPC connection timed out; closing it");
            None
        }
    }
}
