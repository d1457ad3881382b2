//! One connection as a full-duplex RPC endpoint, over a TCP stream or any other byte stream
//! (the in-process pair of `in_process.rs` runs the same machinery over memory).
//!
//! The connection task reads frames, runs each request's handler as a task of its own that
//! sends the response (so a parked long-polling pull does not stall the requests behind it),
//! completes the pending calls this side made, and closes on EOF, a bad frame, idleness or
//! shutdown. Writes go through a bounded queue drained by a writer that coalesces queued
//! frames into one write.
//! Java: `NettyRemotingAbstract`, `NettyRemotingServer`'s channel pipeline.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ferromq_protocol::signature::SessionCredentials;
use ferromq_protocol::{
    decode_frame, encode_frame, encode_frame_head, response_code, RemotingCommand, SerializeType, FLAG_ONEWAY,
    FLAG_RESPONSE,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{debug, info, trace, warn};

use crate::config::{ServerConfig, WRITE_QUEUE_CAPACITY};
use crate::error::RemotingError;
use crate::handler::{HandlerFuture, RequestHandler};
use crate::observe::{Rpc, RpcObserver, RpcResult};
use crate::outgoing::{Batch, Outgoing};

/// The write side of a connection's byte stream (TCP, TLS or an in-process pipe).
type Sink = Box<dyn AsyncWrite + Send + Unpin>;

/// Process-unique connection number, for logs and tables keyed by connection.
pub type ConnectionId = u64;

static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// Reads at most this much per socket read.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// A cheap, clonable handle to a live (or closed) connection.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

struct Inner {
    id: ConnectionId,
    remote_addr: SocketAddr,
    /// This side's address, when the transport knows it.
    local_addr: Option<SocketAddr>,
    /// Encoded frames waiting for the writer.
    outbound: mpsc::Sender<Outgoing>,
    /// The stream's write side: the writer's, and the reader's when it finds it free (answers
    /// the reader made itself then leave without a hop through the writer).
    sink: tokio::sync::Mutex<Sink>,
    serialize_type: SerializeType,
    /// Signs the requests this side sends.
    credentials: Option<Arc<SessionCredentials>>,
    pending: Mutex<HashMap<i32, oneshot::Sender<RemotingCommand>>>,
    next_opaque: AtomicI32,
    closed: AtomicBool,
    /// Flipped to true to ask the connection task to stop; also observed by waiters.
    close_tx: watch::Sender<bool>,
    /// Milliseconds since `epoch` of the last completed write, for the idle check.
    last_write_ms: AtomicU64,
    epoch: Instant,
    /// Told of each request served (the server's `rpc_observer`).
    observer: Option<Arc<dyn RpcObserver>>,
    /// Request tasks still working towards an answer (spawned, not yet answered). The writer
    /// waits for them to queue their answers (a group commit releases many at once) only
    /// when there are any.
    working: AtomicUsize,
    /// With an observer: the requests a handler held to answer later (a parked pull), by
    /// opaque, with their code and arrival, so their answer is observed as long polling.
    held: Mutex<HashMap<i32, (i32, Instant)>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("id", &self.inner.id)
            .field("remote_addr", &self.inner.remote_addr)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl PartialEq for Connection {
    fn eq(&self, other: &Self) -> bool {
        self.inner.id == other.inner.id
    }
}
impl Eq for Connection {}

impl Connection {
    /// Process-unique id of this connection.
    pub fn id(&self) -> ConnectionId {
        self.inner.id
    }

    /// The peer's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.inner.remote_addr
    }

    /// This side's address of the connection: for a server, the address the peer connected
    /// to. In-process connections give the addresses they were made with.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.inner.local_addr
    }

    /// Whether the connection has closed (or is closing). A connection whose task is gone
    /// (its writer's queue has no reader, as when the future that runs it was dropped) is
    /// closed too.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire) || self.inner.outbound.is_closed()
    }

    /// Asks the connection to close; queued writes are flushed first.
    pub fn close(&self) {
        self.inner.close_tx.send_replace(true);
    }

    /// Waits until the connection has closed.
    pub async fn closed(&self) {
        let mut rx = self.inner.close_tx.subscribe();
        while !*rx.borrow_and_update() && !self.is_closed() {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    fn addr_string(&self) -> String {
        self.inner.remote_addr.to_string()
    }

    fn fresh_opaque(&self) -> i32 {
        // Wraps after 2^31 requests, as Java's AtomicInteger does; pending ids never collide in
        // practice because calls time out long before.
        self.inner.next_opaque.fetch_add(1, Ordering::Relaxed)
    }

    /// Frames `cmd` in this connection's serialization. Encoding happens in the sending task,
    /// so the writer only copies bytes.
    fn encode(&self, cmd: &RemotingCommand) -> Result<Bytes, RemotingError> {
        let mut out = BytesMut::new();
        encode_frame(cmd, self.inner.serialize_type, &mut out)
            .map_err(|source| RemotingError::Encode { addr: self.addr_string(), source })?;
        Ok(out.freeze())
    }

    async fn enqueue(&self, frame: Outgoing) -> Result<(), RemotingError> {
        if self.is_closed() {
            return Err(RemotingError::ConnectionClosed { addr: self.addr_string() });
        }
        self.inner.outbound.send(frame).await.map_err(|_| RemotingError::ConnectionClosed { addr: self.addr_string() })
    }

    /// Sends `request` and waits for its response. A fresh `opaque` is assigned.
    ///
    /// # Errors
    /// [`RemotingError::Timeout`] when no response arrives within `timeout`,
    /// [`RemotingError::ConnectionClosed`] when the connection closes first,
    /// [`RemotingError::Encode`] when the request is too large to frame.
    pub async fn invoke(
        &self,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        let opaque = self.fresh_opaque();
        request.opaque = opaque;
        request.flag &= !(FLAG_RESPONSE | FLAG_ONEWAY);
        self.sign(&mut request);
        let frame = self.encode(&request)?;
        let (tx, rx) = oneshot::channel();
        self.pending().insert(opaque, tx);
        let outcome = tokio::time::timeout(timeout, async {
            self.enqueue(Outgoing::Frames(frame)).await?;
            rx.await.map_err(|_| RemotingError::ConnectionClosed { addr: self.addr_string() })
        })
        .await;
        match outcome {
            Ok(result) => {
                if result.is_err() {
                    self.pending().remove(&opaque);
                }
                result
            }
            Err(_) => {
                self.pending().remove(&opaque);
                Err(RemotingError::Timeout { addr: self.addr_string(), opaque, timeout })
            }
        }
    }

    /// Sends `request` as oneway: no response will come.
    ///
    /// # Errors
    /// [`RemotingError::ConnectionClosed`] when the connection is closed,
    /// [`RemotingError::Encode`] when the request is too large to frame.
    pub async fn invoke_oneway(&self, request: RemotingCommand) -> Result<(), RemotingError> {
        let mut request = request.into_oneway();
        request.opaque = self.fresh_opaque();
        self.sign(&mut request);
        let frame = self.encode(&request)?;
        self.enqueue(Outgoing::Frames(frame)).await
    }

    /// Signs `request` last, after every field is set (the signature covers them all).
    fn sign(&self, request: &mut RemotingCommand) {
        if let Some(credentials) = &self.inner.credentials {
            credentials.sign(request);
        }
    }

    /// Sends a response produced outside the handler's return value (a parked request answered
    /// later). The caller sets the request's `opaque`.
    ///
    /// A response too large to frame is replaced by a SYSTEM_ERROR response, so the peer is
    /// not left waiting for its timeout.
    ///
    /// # Errors
    /// [`RemotingError::ConnectionClosed`] when the connection is closed.
    pub async fn send_response(&self, response: RemotingCommand) -> Result<(), RemotingError> {
        let held = match &self.inner.observer {
            Some(_) => self.inner.held.lock().unwrap_or_else(|e| e.into_inner()).remove(&response.opaque),
            None => None,
        };
        let code = response.code;
        let sent = self.write_response(response).await;
        if let (Some(observer), Some((request_code, arrived))) = (&self.inner.observer, held) {
            observer.observe(&Rpc {
                request_code,
                response_code: Some(code),
                long_polling: true,
                result: if sent.is_ok() { RpcResult::Success } else { RpcResult::WriteChannelFailed },
                elapsed: arrived.elapsed(),
            });
        }
        sent
    }

    /// Frames and queues a response; a body in parts is queued as its parts, for the writer
    /// to write where they are.
    async fn write_response(&self, response: RemotingCommand) -> Result<(), RemotingError> {
        let mut out = BytesMut::new();
        let tail = self.frame_response(response, &mut out)?;
        let head = out.freeze();
        self.enqueue(if tail.is_empty() { Outgoing::Frames(head) } else { Outgoing::Parts(head, tail) }).await
    }

    /// Sends the answers the reader made: straight to the stream when the writer is not
    /// writing (no wake-up of another task), else through the writer's queue. Answers are
    /// matched by `opaque`, so their order against queued frames does not matter.
    async fn write_answers(&self, answers: Bytes) -> Result<(), RemotingError> {
        let Ok(mut sink) = self.inner.sink.try_lock() else {
            return self.enqueue(Outgoing::Frames(answers)).await;
        };
        if self.is_closed() {
            return Err(RemotingError::ConnectionClosed { addr: self.addr_string() });
        }
        // As much as the stream takes now; a stream that takes nothing leaves the answers to
        // the writer's queue (its buffering, not the socket's, absorbs a peer slow to read).
        let mut written = 0;
        let now = std::future::poll_fn(|cx| loop {
            match std::pin::Pin::new(&mut **sink).poll_write(cx, &answers[written..]) {
                std::task::Poll::Ready(Ok(0)) => {
                    return std::task::Poll::Ready(Err(std::io::Error::from(std::io::ErrorKind::WriteZero)))
                }
                std::task::Poll::Ready(Ok(n)) => {
                    written += n;
                    if written == answers.len() {
                        return std::task::Poll::Ready(Ok(()));
                    }
                }
                std::task::Poll::Ready(Err(e)) => return std::task::Poll::Ready(Err(e)),
                std::task::Poll::Pending => return std::task::Poll::Ready(Ok(())),
            }
        })
        .await;
        let outcome = match now {
            Ok(()) if written == 0 => {
                drop(sink);
                return self.enqueue(Outgoing::Frames(answers)).await;
            }
            // A frame begun must be finished before any other frame is written.
            Ok(()) if written < answers.len() => sink.write_all(&answers[written..]).await,
            other => other,
        };
        if let Err(e) = outcome {
            self.write_failed(&e);
            return Err(RemotingError::ConnectionClosed { addr: self.addr_string() });
        }
        self.touch_write();
        Ok(())
    }

    /// A write to the stream failed: the connection is closed (its tasks stop and drain).
    fn write_failed(&self, e: &std::io::Error) {
        debug!(connection_id = self.id(), error = %e, "write failed");
        self.inner.closed.store(true, Ordering::Release);
        self.inner.close_tx.send_replace(true);
    }

    /// Frames a response at the end of `out` up to its body's tail, and returns the tail
    /// ([`RemotingCommand::body_tail`]), which completes the frame. One too large to frame is
    /// replaced by a SYSTEM_ERROR response, so the peer is not left waiting for its timeout.
    fn frame_response(&self, mut response: RemotingCommand, out: &mut BytesMut) -> Result<Vec<Bytes>, RemotingError> {
        response.flag |= FLAG_RESPONSE;
        let mark = out.len();
        if let Err(e) = encode_frame_head(&response, self.inner.serialize_type, out) {
            out.truncate(mark);
            warn!(connection_id = self.id(), opaque = response.opaque, code = response.code, error = %e, "response cannot be framed");
            let mut replacement =
                RemotingCommand::response(response_code::SYSTEM_ERROR, format!("response cannot be framed: {e}"));
            replacement.opaque = response.opaque;
            replacement.flag |= FLAG_RESPONSE;
            encode_frame(&replacement, self.inner.serialize_type, out)
                .map_err(|source| RemotingError::Encode { addr: self.addr_string(), source })?;
            return Ok(Vec::new());
        }
        Ok(response.body_tail)
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<i32, oneshot::Sender<RemotingCommand>>> {
        // A poisoned map only means another task panicked while holding it; the map itself is
        // still consistent (single inserts and removes).
        self.inner.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn complete(&self, response: RemotingCommand) {
        let waiter = self.pending().remove(&response.opaque);
        match waiter {
            Some(tx) => {
                let _ = tx.send(response);
            }
            None => {
                debug!(opaque = response.opaque, remote_addr = %self.inner.remote_addr, "response without a pending request")
            }
        }
    }

    fn mark_closed(&self) {
        self.inner.closed.store(true, Ordering::Release);
        self.inner.close_tx.send_replace(true);
        // Dropping the senders fails every pending call with ConnectionClosed.
        self.pending().clear();
    }

    fn touch_write(&self) {
        let ms = self.inner.epoch.elapsed().as_millis() as u64;
        self.inner.last_write_ms.store(ms, Ordering::Relaxed);
    }

    fn last_write(&self) -> Instant {
        self.inner.epoch + Duration::from_millis(self.inner.last_write_ms.load(Ordering::Relaxed))
    }
}

/// Sets up the connection over `stream` and returns its handle and the future that runs it.
/// The caller owns the future (spawns it into a `JoinSet`), so every connection task has an
/// owner that awaits it on shutdown.
pub(crate) fn start(
    stream: TcpStream,
    config: ServerConfig,
    handler: Arc<dyn RequestHandler>,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<(Connection, impl std::future::Future<Output = ()> + Send)> {
    let remote_addr = stream.peer_addr()?;
    let local_addr = stream.local_addr().ok();
    let _ = stream.set_nodelay(true);
    // `into_split` halves need no lock between the reader and the writer.
    let (read_half, write_half) = stream.into_split();
    Ok(start_io(read_half, write_half, (remote_addr, local_addr), config, handler, shutdown))
}

/// Sets up a connection over any byte stream, split into `reader` and `writer`, whose peer is
/// `remote_addr` and whose own address, if it has one, is `local_addr`. Ownership of the returned future is the caller's, as with [`start`]. The
/// loops are generic, so a TCP connection pays nothing for the other transports.
pub(crate) fn start_io<R, W>(
    reader: R,
    writer: W,
    (remote_addr, local_addr): (SocketAddr, Option<SocketAddr>),
    config: ServerConfig,
    handler: Arc<dyn RequestHandler>,
    shutdown: watch::Receiver<bool>,
) -> (Connection, impl std::future::Future<Output = ()> + Send)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(WRITE_QUEUE_CAPACITY);
    let (close_tx, _) = watch::channel(false);
    let conn = Connection {
        inner: Arc::new(Inner {
            id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
            remote_addr,
            local_addr,
            outbound: tx,
            sink: tokio::sync::Mutex::new(Box::new(writer)),
            serialize_type: config.serialize_type,
            credentials: config.credentials.clone(),
            pending: Mutex::new(HashMap::new()),
            next_opaque: AtomicI32::new(1),
            closed: AtomicBool::new(false),
            close_tx,
            last_write_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            observer: config.rpc_observer.clone(),
            working: AtomicUsize::new(0),
            held: Mutex::new(HashMap::new()),
        }),
    };
    let task_conn = conn.clone();
    let fut = async move {
        let conn = task_conn;
        debug!(connection_id = conn.id(), remote_addr = %remote_addr, "connection opened");
        let writer = write_loop(conn.clone(), rx);
        let reader = read_loop(conn.clone(), reader, &config, handler.clone(), shutdown);
        let ((), ()) = tokio::join!(reader, writer);
        conn.mark_closed();
        handler.on_connection_closed(&conn);
        debug!(connection_id = conn.id(), remote_addr = %remote_addr, "connection closed");
    };
    (conn, fut)
}

/// Why the read side stopped.
enum Stop {
    Eof,
    Idle,
    Shutdown,
    Closed,
}

async fn read_loop<R: AsyncRead + Unpin>(
    conn: Connection,
    mut read_half: R,
    config: &ServerConfig,
    handler: Arc<dyn RequestHandler>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    // The answers of the requests the reader served itself during one read, written as one.
    let mut answers = BytesMut::new();
    // The reader's own waker, for polling inline handlers (see `RequestHandler::runs_inline`).
    let waker = std::future::poll_fn(|cx| std::task::Poll::Ready(cx.waker().clone())).await;
    // Each request runs as a task of its own that sends its own response, so a finished
    // request does not wake this loop; finished tasks are reaped as the loop goes round, and
    // the set bounds how many run and lets close wait for (or abort) them.
    let mut in_flight: JoinSet<()> = JoinSet::new();
    let mut close_rx = conn.inner.close_tx.subscribe();
    let mut last_read = Instant::now();
    // One timer for the connection's life, moved as traffic pushes the deadline: a fresh
    // timer per loop turn would register and cancel a timer entry for every request.
    let idle = tokio::time::sleep_until(last_read + config.idle_timeout);
    tokio::pin!(idle);
    let stop = loop {
        while in_flight.try_join_next().is_some() {}
        let idle_deadline = last_read.max(conn.last_write()) + config.idle_timeout;
        if idle.deadline() != idle_deadline {
            idle.as_mut().reset(idle_deadline);
        }
        let can_read = in_flight.len() < config.max_in_flight_per_connection;
        if buf.capacity() - buf.len() < READ_CHUNK_BYTES / 4 {
            buf.reserve(READ_CHUNK_BYTES);
        }
        tokio::select! {
            read = read_half.read_buf(&mut buf), if can_read => {
                match read {
                    Ok(0) => break Stop::Eof,
                    Ok(n) => {
                        trace!(connection_id = conn.id(), bytes = n, "read");
                        last_read = Instant::now();
                    }
                    Err(e) => {
                        debug!(connection_id = conn.id(), error = %e, "read failed");
                        break Stop::Eof;
                    }
                }
                let mut reader = Reader { conn: &conn, handler: &handler, in_flight: &mut in_flight, answers: &mut answers, waker: &waker };
                let dispatched = reader.dispatch_frames(&mut buf, config);
                // Answers already made go out even when the read ends on a bad frame.
                if !answers.is_empty() && conn.write_answers(answers.split().freeze()).await.is_err() {
                    break Stop::Closed;
                }
                if let Err(reason) = dispatched {
                    warn!(connection_id = conn.id(), remote_addr = %conn.remote_addr(), error = %reason, "closing connection on bad frame");
                    break Stop::Closed;
                }
            }
            // At the in-flight bound only: wait for a request to finish before reading on.
            Some(done) = in_flight.join_next(), if !can_read => log_join(&conn, done),
            _ = &mut idle => {
                if Instant::now() >= last_read.max(conn.last_write()) + config.idle_timeout {
                    break Stop::Idle;
                }
            }
            _ = shutdown.changed() => break Stop::Shutdown,
            _ = close_rx.changed() => break Stop::Closed,
        }
    };
    match stop {
        Stop::Idle => info!(connection_id = conn.id(), remote_addr = %conn.remote_addr(), "closing idle connection"),
        Stop::Eof | Stop::Shutdown | Stop::Closed => {}
    }
    // Drain: requests already accepted get their responses, within the grace period.
    let drain = async {
        while let Some(done) = in_flight.join_next().await {
            log_join(&conn, done);
        }
    };
    if tokio::time::timeout(config.shutdown_grace, drain).await.is_err() {
        warn!(connection_id = conn.id(), abandoned = in_flight.len(), "in-flight requests abandoned at close");
        in_flight.abort_all();
    }
    // Stop the writer once everything queued so far is flushed.
    conn.inner.close_tx.send_replace(true);
}

fn log_join(conn: &Connection, done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done {
        debug!(connection_id = conn.id(), error = %e, "request task ended abnormally");
    }
}

/// What the read loop lends to the requests of one read.
struct Reader<'a> {
    conn: &'a Connection,
    handler: &'a Arc<dyn RequestHandler>,
    in_flight: &'a mut JoinSet<()>,
    /// Answers of the requests served inline, framed back to back.
    answers: &'a mut BytesMut,
    waker: &'a std::task::Waker,
}

impl Reader<'_> {
    fn dispatch_frames(
        &mut self,
        buf: &mut BytesMut,
        config: &ServerConfig,
    ) -> Result<(), ferromq_protocol::FrameError> {
        let conn = self.conn;
        while let Some(cmd) = decode_frame(buf, config.max_frame_bytes)? {
            if cmd.is_response() {
                trace!(connection_id = conn.id(), opaque = cmd.opaque, code = cmd.code, "response");
                conn.complete(cmd);
                continue;
            }
            debug!(connection_id = conn.id(), request_code = cmd.code, opaque = cmd.opaque, "request");
            let call = Call { opaque: cmd.opaque, code: cmd.code, oneway: cmd.is_oneway(), arrived: Instant::now() };
            let inline = self.handler.runs_inline(cmd.code);
            let fut = self.handler.handle(conn.clone(), cmd);
            if !inline {
                self.in_flight.spawn(finish_request(Working::start(conn), CatchUnwind(fut), call));
                continue;
            }
            let mut fut = CatchUnwind(fut);
            let mut cx = std::task::Context::from_waker(self.waker);
            match std::future::Future::poll(std::pin::Pin::new(&mut fut), &mut cx) {
                std::task::Poll::Ready(outcome) => {
                    if let Some((response, failed)) = settle(conn, call, outcome) {
                        let code = response.code;
                        // An inline answer is small (a send's): a body in parts is copied in.
                        let framed = conn.frame_response(response, self.answers).map(|tail| {
                            for part in tail {
                                self.answers.extend_from_slice(&part);
                            }
                        });
                        observe(conn, call, Some(code), answered(failed, framed.is_ok()));
                    }
                }
                // Waiting (a group commit, a replica): the rest runs in a task of its own,
                // which polls it again with its own waker.
                std::task::Poll::Pending => {
                    self.in_flight.spawn(finish_request(Working::start(conn), fut, call));
                }
            }
        }
        Ok(())
    }
}

/// What the serving task knows of its request.
#[derive(Debug, Clone, Copy)]
struct Call {
    opaque: i32,
    code: i32,
    oneway: bool,
    arrived: Instant,
}

/// The most held requests remembered per connection for observation; past it a held
/// request's answer is not observed.
const HELD_MAX: usize = 4096;

/// A request task counted in `Inner::working` until it has its answer (or is dropped).
struct Working(Connection);

impl Working {
    fn start(conn: &Connection) -> Working {
        conn.inner.working.fetch_add(1, Ordering::AcqRel);
        Working(conn.clone())
    }

    /// The connection, no longer counted as working.
    fn done(self) -> Connection {
        let conn = self.0.clone();
        drop(self);
        conn
    }
}

impl Drop for Working {
    fn drop(&mut self) {
        self.0.inner.working.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Awaits a handler (perhaps polled before by the reader) and sends its response. A handler
/// that panics gets its request answered with SYSTEM_ERROR, so the peer is not left waiting
/// for its timeout.
async fn finish_request(working: Working, handler: CatchUnwind, call: Call) {
    let outcome = handler.await;
    // Uncounted before the answer is queued, so the writer that takes it sees only the others.
    let conn = working.done();
    if let Some((response, failed)) = settle(&conn, call, outcome) {
        let code = response.code;
        let sent = conn.write_response(response).await;
        if sent.is_err() {
            debug!(connection_id = conn.id(), opaque = call.opaque, "response dropped: connection closed");
        }
        observe(&conn, call, Some(code), answered(failed, sent.is_ok()));
    }
}

/// What a finished handler leaves to send: its response with the request's opaque, and
/// whether the handler panicked; `None` when nothing is sent now (a oneway request, or a
/// request held to be answered later through `send_response`).
fn settle(conn: &Connection, call: Call, outcome: HandlerOutcome) -> Option<(RemotingCommand, bool)> {
    let Call { opaque, code, oneway, arrived } = call;
    let (response, failed) = match outcome {
        Ok(response) => (response, false),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panicked".to_owned());
            warn!(connection_id = conn.id(), opaque, panic = %what, "request handler panicked");
            (
                Some(RemotingCommand::response(response_code::SYSTEM_ERROR, format!("request handler failed: {what}"))),
                true,
            )
        }
    };
    if oneway {
        observe(conn, call, None, RpcResult::Oneway);
        return None;
    }
    match response {
        Some(mut response) => {
            response.opaque = opaque;
            Some((response, failed))
        }
        None => {
            if conn.inner.observer.is_some() {
                // Held to be answered later through `send_response`.
                let mut held = conn.inner.held.lock().unwrap_or_else(|e| e.into_inner());
                if held.len() < HELD_MAX {
                    held.insert(opaque, (code, arrived));
                }
            }
            None
        }
    }
}

/// Tells the observer of a request served.
fn observe(conn: &Connection, call: Call, response_code: Option<i32>, result: RpcResult) {
    if let Some(observer) = &conn.inner.observer {
        observer.observe(&Rpc {
            request_code: call.code,
            response_code,
            long_polling: false,
            result,
            elapsed: call.arrived.elapsed(),
        });
    }
}

/// The result observed for an answered request: whether its handler panicked, whether its
/// answer was queued.
fn answered(failed: bool, sent: bool) -> RpcResult {
    match (failed, sent) {
        (true, _) => RpcResult::ProcessRequestFailed,
        (false, true) => RpcResult::Success,
        (false, false) => RpcResult::WriteChannelFailed,
    }
}

/// A handler's response, or the panic that ended it.
type HandlerOutcome = Result<Option<RemotingCommand>, Box<dyn std::any::Any + Send>>;

/// Polls a handler future, turning a panic into an error value.
struct CatchUnwind(HandlerFuture);

impl std::future::Future for CatchUnwind {
    type Output = HandlerOutcome;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        // The future is dropped right after a panic and never polled again, so no broken
        // state of it is observed.
        let fut = &mut self.0;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(std::task::Poll::Ready(response)) => std::task::Poll::Ready(Ok(response)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        }
    }
}

async fn write_loop(conn: Connection, mut rx: mpsc::Receiver<Outgoing>) {
    let mut close_rx = conn.inner.close_tx.subscribe();
    let mut batch = Batch::default();
    loop {
        let first = tokio::select! {
            biased;
            cmd = rx.recv() => cmd,
            _ = close_rx.wait_for(|closing| *closing) => None,
        };
        let Some(first) = first else { break };
        // While request tasks are still working, let those that are ready run first: a burst
        // of responses (a group commit releases dozens of sends at once) then leaves in one
        // write instead of one system call each. A waking task takes the scheduler's next
        // slot, so without this yield the writer would run after each response in turn. With
        // none working (answers made by the reader, one request in flight) the write goes at
        // once: a yield costs a turn of the scheduler (and a poll of the I/O driver).
        if conn.inner.working.load(Ordering::Acquire) > 0 {
            tokio::task::yield_now().await;
        }
        batch.push(first);
        // Coalesce whatever else is queued into the same write.
        while !batch.is_full() {
            match rx.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
        let mut sink = conn.inner.sink.lock().await;
        if let Err(e) = batch.write_to(&mut *sink).await {
            *sink = Box::new(tokio::io::sink());
            conn.write_failed(&e);
            return;
        }
        drop(sink);
        conn.touch_write();
    }
    // Closing: flush what is still queued, then end the stream.
    while let Ok(item) = rx.try_recv() {
        batch.push(item);
    }
    let mut sink = conn.inner.sink.lock().await;
    if !batch.is_empty() {
        let _ = batch.write_to(&mut *sink).await;
    }
    let _ = sink.shutdown().await;
    // The stream itself goes now, not with the last handle of the connection (handles live on
    // in tables and parked requests): a later write finds an empty sink and the closed flag.
    *sink = Box::new(tokio::io::sink());
}
