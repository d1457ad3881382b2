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

use ferromq_remoting::handoff::{HandedConnection, HandedIo, Prefixed, HTTP2_PREFACE_START};
use ferromq_remoting::tls::TLS_HANDSHAKE_RECORD;

use crate::tls::{TlsError, TlsMode};

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
    /// From the remoting port ([`ferromq_remoting::handoff`]), its TLS (if any) already removed.
    Handed(Prefixed<Box<dyn HandedIo>>),
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
        self.info.tls
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
            Io::Handed(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for MaybeTlsStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Io::Handed(s) => Pin::new(s).poll_write(cx, buf),
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
            Io::Handed(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
            Io::Handed(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Io::Handed(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Io::Handed(s) => Pin::new(s).poll_shutdown(cx),
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
        let shared = Arc::new(shared(mode, tls, &options)?);
        let max_connections = options.max_connections.clamp(1, Semaphore::MAX_PERMITS);
        let slots = Arc::new(Semaphore::new(max_connections));
        let (tx, ready) = mpsc::channel(options.channel_capacity.max(1));
        let source = Source::Listener { listener, backoff: options.accept_error_backoff };
        let accept_task = tokio::spawn(accept_loop(source, shared, Arc::clone(&slots), max_connections, tx));
        Ok(GrpcIncoming { ready, accept_task, slots, max_connections, mode })
    }

    /// Splits the port's connections over `parts` streams, so each can be served on a runtime
    /// (a thread) of its own: one task (on the current runtime) accepts and hands each new
    /// connection, round robin, to a part; the part classifies it and runs its TLS handshake
    /// on the runtime it is started on ([`IncomingPart::start`]), so a connection's I/O, its
    /// HTTP/2 connection task and its streams share one thread. The limits of `options` hold
    /// for the port as a whole. Accepting stops when every part is dropped.
    ///
    /// # Errors
    /// As [`GrpcIncoming::new`].
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn partitioned(
        listener: TcpListener,
        mode: TlsMode,
        tls: Option<Arc<ServerConfig>>,
        options: ListenerOptions,
        parts: usize,
    ) -> Result<Vec<IncomingPart>, TlsError> {
        GrpcIncoming::partitioned_with_handoff(listener, mode, tls, options, parts, None)
    }

    /// [`GrpcIncoming::partitioned`], also serving the connections a remoting port hands over
    /// on `handed` ([`ferromq_remoting::Http2Handoff`]): each takes a slot of the port's
    /// `max_connections` and goes to the parts in turn, as the port's own do.
    ///
    /// # Errors
    /// As [`GrpcIncoming::new`].
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn partitioned_with_handoff(
        listener: TcpListener,
        mode: TlsMode,
        tls: Option<Arc<ServerConfig>>,
        options: ListenerOptions,
        parts: usize,
        handed: Option<mpsc::Receiver<HandedConnection>>,
    ) -> Result<Vec<IncomingPart>, TlsError> {
        let shared = Arc::new(shared(mode, tls, &options)?);
        let max_connections = options.max_connections.clamp(1, Semaphore::MAX_PERMITS);
        let slots = Arc::new(Semaphore::new(max_connections));
        let capacity = options.channel_capacity.max(1);
        let mut senders = Vec::new();
        let mut readies = Vec::new();
        let mut out = Vec::new();
        for _ in 0..parts.max(1) {
            let (tx, rx) = mpsc::channel(capacity);
            let (ready_tx, ready_rx) = mpsc::channel(capacity);
            senders.push(tx);
            readies.push(ready_tx.downgrade());
            out.push(IncomingPart {
                accepted: rx,
                shared: Arc::clone(&shared),
                slots: Arc::clone(&slots),
                max_connections,
                ready: (ready_tx, ready_rx),
            });
        }
        if let Some(handed) = handed {
            tokio::spawn(distribute_handed(handed, readies, Arc::clone(&slots), max_connections));
        }
        tokio::spawn(distribute(listener, senders, slots, max_connections, options.accept_error_backoff));
        Ok(out)
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

/// A connection accepted by a partitioned port's distributor, with its connection slot.
type Handed = (std::net::TcpStream, SocketAddr, OwnedSemaphorePermit);

/// One part of a partitioned port (see [`GrpcIncoming::partitioned`]); [`IncomingPart::start`]
/// it on the runtime that serves its connections.
pub struct IncomingPart {
    accepted: mpsc::Receiver<Handed>,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    max_connections: usize,
    /// Its connections ready for tonic (made here so handed-over ones can queue before start).
    ready: (mpsc::Sender<MaybeTlsStream>, mpsc::Receiver<MaybeTlsStream>),
}

impl fmt::Debug for IncomingPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IncomingPart").field("mode", &self.shared.mode).finish_non_exhaustive()
    }
}

impl IncomingPart {
    /// The part's connections, classified and handshaken on the current runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(self) -> GrpcIncoming {
        let (tx, ready) = self.ready;
        let mode = self.shared.mode;
        let accept_task = tokio::spawn(accept_loop(
            Source::Handed(self.accepted),
            self.shared,
            Arc::clone(&self.slots),
            self.max_connections,
            tx,
        ));
        GrpcIncoming { ready, accept_task, slots: self.slots, max_connections: self.max_connections, mode }
    }
}

fn shared(mode: TlsMode, tls: Option<Arc<ServerConfig>>, options: &ListenerOptions) -> Result<Shared, TlsError> {
    let acceptor = match (mode.accepts_tls(), tls) {
        (true, Some(config)) => Some(TlsAcceptor::from(config)),
        (true, None) => return Err(TlsError::MissingConfig { mode }),
        (false, _) => None,
    };
    Ok(Shared { mode, acceptor, handshake_timeout: options.handshake_timeout })
}

/// Where an accept loop's connections come from.
enum Source {
    /// Accepted here.
    Listener { listener: TcpListener, backoff: Duration },
    /// Accepted by a partitioned port's distributor (slot already taken).
    Handed(mpsc::Receiver<Handed>),
}

/// A connection from a [`Source`]: the socket, the peer and the slot if one was taken.
type Next = (TcpStream, SocketAddr, Option<OwnedSemaphorePermit>);

/// Accepts one connection; `Ok(None)` when the listener failed transiently (logged, paused)
/// or the connection could not be taken over; `Err(())` when the source has ended.
async fn next_connection(source: &mut Source, warning: &mut Throttle) -> Result<Option<Next>, ()> {
    match source {
        Source::Listener { listener, backoff } => match listener.accept().await {
            Ok((socket, peer)) => Ok(Some((socket, peer, None))),
            Err(e) if is_connection_error(&e) => {
                tracing::debug!(error = %e, "a gRPC connection was gone before accept");
                Ok(None)
            }
            Err(e) => {
                if let Some(suppressed) = warning.allow() {
                    tracing::warn!(
                        error = %e,
                        backoff_ms = backoff.as_millis() as u64,
                        suppressed,
                        "accepting on the gRPC port failed; pausing before retrying"
                    );
                }
                tokio::time::sleep(*backoff).await;
                Ok(None)
            }
        },
        Source::Handed(rx) => {
            let Some((socket, peer, slot)) = rx.recv().await else { return Err(()) };
            match TcpStream::from_std(socket) {
                Ok(socket) => Ok(Some((socket, peer, Some(slot)))),
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "cannot serve a gRPC connection on this runtime");
                    Ok(None)
                }
            }
        }
    }
}

async fn accept_loop(
    mut source: Source,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    max_connections: usize,
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
            next = next_connection(&mut source, &mut accept_warning) => {
                let Ok(next) = next else { return };
                let Some((socket, peer, slot)) = next else { continue };
                let slot = match slot {
                    Some(slot) => slot,
                    None => match take_slot(&slots, max_connections, peer, &mut full_warning) {
                        Some(slot) => slot,
                        None => continue,
                    },
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
        }
    }
}

/// A connection slot, or `None` (logged, throttled) when the port is at its limit.
fn take_slot(
    slots: &Arc<Semaphore>,
    max_connections: usize,
    peer: SocketAddr,
    warning: &mut Throttle,
) -> Option<OwnedSemaphorePermit> {
    let slot = Arc::clone(slots).try_acquire_owned().ok();
    if slot.is_none() {
        if let Some(suppressed) = warning.allow() {
            tracing::warn!(
                %peer,
                max_connections,
                suppressed,
                "gRPC port at its connection limit (grpcMaxConnections); closing the new connection"
            );
        }
    }
    slot
}

/// A partitioned port's accept loop: takes the connection's slot and hands the socket to the
/// parts in turn (one whose channel is full or gone is skipped). Ends when every part is gone.
async fn distribute(
    listener: TcpListener,
    mut parts: Vec<mpsc::Sender<Handed>>,
    slots: Arc<Semaphore>,
    max_connections: usize,
    backoff: Duration,
) {
    let mut source = Source::Listener { listener, backoff };
    let (mut full_warning, mut accept_warning) = (Throttle::new(), Throttle::new());
    let mut next_part = 0usize;
    loop {
        parts.retain(|p| !p.is_closed());
        if parts.is_empty() {
            return;
        }
        let Ok(next) = next_connection(&mut source, &mut accept_warning).await else { return };
        let Some((socket, peer, _)) = next else { continue };
        let Some(slot) = take_slot(&slots, max_connections, peer, &mut full_warning) else { continue };
        let socket = match socket.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "cannot hand a gRPC connection over");
                continue;
            }
        };
        if offer_in_turn(&parts, &mut next_part, (socket, peer, slot)).is_err() {
            tracing::warn!(%peer, "every gRPC serving thread is busy taking connections; closing the new one");
        }
    }
}

/// Offers `item` to each of `parts` once, in turn from `*next` (which moves on); gives it back
/// when every part is full or gone.
fn offer_in_turn<T>(parts: &[mpsc::Sender<T>], next: &mut usize, item: T) -> Result<(), T> {
    let mut item = item;
    for _ in 0..parts.len() {
        let part = &parts[*next % parts.len()];
        *next = next.wrapping_add(1);
        match part.try_send(item) {
            Ok(()) => return Ok(()),
            Err(mpsc::error::TrySendError::Full(back) | mpsc::error::TrySendError::Closed(back)) => item = back,
        }
    }
    Err(item)
}

/// Takes the connections a remoting port hands over until it stops handing or every part is
/// gone: each gets a slot and goes to the next part with room (closed, logged, when none has).
/// The parts are held weakly, so their streams still end when tonic drops them.
async fn distribute_handed(
    mut handed: mpsc::Receiver<HandedConnection>,
    parts: Vec<mpsc::WeakSender<MaybeTlsStream>>,
    slots: Arc<Semaphore>,
    max_connections: usize,
) {
    let mut full_warning = Throttle::new();
    let mut next_part = 0usize;
    while let Some(conn) = handed.recv().await {
        let HandedConnection { stream, peer, local_addr, tls } = conn;
        let Some(slot) = take_slot(&slots, max_connections, peer, &mut full_warning) else { continue };
        let info = GrpcConnectInfo { remote_addr: peer, local_addr, tls };
        let ready = MaybeTlsStream { io: Io::Handed(stream), info, _slot: slot };
        let live: Vec<_> = parts.iter().filter_map(mpsc::WeakSender::upgrade).collect();
        if live.is_empty() {
            return;
        }
        if offer_in_turn(&live, &mut next_part, ready).is_err() {
            tracing::warn!(%peer, "every gRPC serving thread is busy taking connections; closing one from the remoting port");
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
                http2_preface = seen.starts_with(&HTTP2_PREFACE_START),
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
