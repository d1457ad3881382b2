//! A connection whose two ends live in one process, joined by an in-memory pipe instead of a
//! socket.
//!
//! A component inside a server's process (the gRPC proxy in the broker's "local mode") talks
//! to that server's handler through it without a loopback TCP hop, and the server cannot tell
//! it from a remote client: both ends are ordinary [`Connection`]s running the TCP machinery
//! (frames encoded and decoded, bounded write queue, in-flight bound, idle close, drain), so the
//! same processors answer and may call the client back on the connection they were given.
//!
//! What it deliberately does not do: count against the server's connection limit (it has no
//! accept loop), or skip the frame encoding (one code path for every transport).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;

use crate::config::ServerConfig;
use crate::connection::{self, Connection};
use crate::handler::RequestHandler;

/// Bytes the in-memory pipe holds in each direction before a writer waits for the reader, as
/// a socket's buffers bound a TCP connection.
pub const IN_PROCESS_BUFFER_BYTES: usize = 1024 * 1024;

/// The serving end of an in-process connection: the side a remote client would reach through
/// the server's listener.
#[derive(Clone)]
pub struct InProcessServer {
    /// Serves the client end's requests.
    pub handler: Arc<dyn RequestHandler>,
    /// Settings of both ends (frame limit, idle timeout, serialization, in-flight bound,
    /// drain grace), as the server's accepted TCP connections use them.
    pub config: ServerConfig,
    /// Turns true when the server shuts down; the server end then stops reading and drains
    /// its in-flight requests, as a TCP connection of the server does.
    pub shutdown: watch::Receiver<bool>,
    /// The server's address: the client end's [`Connection::remote_addr`].
    pub addr: SocketAddr,
}

impl std::fmt::Debug for InProcessServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessServer")
            .field("config", &self.config)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// The calling end of an in-process connection.
#[derive(Clone)]
pub struct InProcessClient {
    /// Serves the requests the server end sends (CHECK_TRANSACTION_STATE,
    /// NOTIFY_CONSUMER_IDS_CHANGED, ...).
    pub handler: Arc<dyn RequestHandler>,
    /// The address the server sees for this client: the server end's
    /// [`Connection::remote_addr`], which processors record as the client's address.
    pub addr: SocketAddr,
}

impl std::fmt::Debug for InProcessClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcessClient").field("addr", &self.addr).finish_non_exhaustive()
    }
}

/// Both ends of a connection that lives in memory: returns the client end, whose
/// [`Connection::invoke`] reaches `server.handler`, and the future that runs both ends.
///
/// The future ends when both ends have closed; closing either one (its [`Connection::close`],
/// idleness, a bad frame, or `server.shutdown`) closes the other, and each end's handler gets
/// its [`RequestHandler::on_connection_closed`]. The caller owns the future: spawn it into a
/// `JoinSet` that is awaited at shutdown. Dropping it unpolled leaves a closed connection.
pub fn in_process_pair(
    server: InProcessServer,
    client: InProcessClient,
) -> (Connection, impl Future<Output = ()> + Send + 'static) {
    let (client_io, server_io) = tokio::io::duplex(IN_PROCESS_BUFFER_BYTES);
    // The halves share one lock, but a connection's reader and writer are polled by the same
    // task (joined), so it is never contended.
    let (server_read, server_write) = tokio::io::split(server_io);
    let (client_read, client_write) = tokio::io::split(client_io);
    let (_server_end, server_fut) = connection::start_io(
        server_read,
        server_write,
        (client.addr, Some(server.addr)),
        server.config.clone(),
        server.handler,
        server.shutdown,
    );
    // The client end ends when the server end does (end of stream), never on the server's
    // shutdown signal: like a TCP client, it must keep reading the answers the server end
    // sends while it drains. Its sender lives as long as the future, since a dropped sender
    // would read as a shutdown.
    let (client_stop_tx, client_stop_rx) = watch::channel(false);
    let (client_end, client_fut) = connection::start_io(
        client_read,
        client_write,
        (server.addr, Some(client.addr)),
        server.config,
        client.handler,
        client_stop_rx,
    );
    let fut = async move {
        let ((), ()) = tokio::join!(server_fut, client_fut);
        drop(client_stop_tx);
    };
    (client_end, fut)
}
