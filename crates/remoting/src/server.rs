//! The accept loop, and each connection's set-up: plaintext or TLS by its first byte
//! ([`ServerTls::accept`]), on a port that hands gRPC over its first four bytes
//! ([`crate::handoff`]), then the connection machinery of `connection.rs`.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{info, warn};

use crate::config::ServerConfig;
use crate::connection;
use crate::error::RemotingError;
use crate::handler::RequestHandler;
use crate::handoff::{read_first_bytes, HandedConnection, HandedIo, Prefixed, HTTP2_PREFACE_START};
use crate::tls::{Accepted, ServerTls};

/// Serves remoting connections on a listener until shutdown.
#[derive(Clone)]
pub struct RemotingServer {
    config: ServerConfig,
    handler: Arc<dyn RequestHandler>,
}

impl std::fmt::Debug for RemotingServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemotingServer").field("config", &self.config).finish_non_exhaustive()
    }
}

impl RemotingServer {
    /// A server that hands requests to `handler`.
    pub fn new(config: ServerConfig, handler: Arc<dyn RequestHandler>) -> Self {
        RemotingServer { config, handler }
    }

    /// Accepts connections on `listener` until `shutdown` completes, then stops accepting,
    /// lets every connection finish its in-flight requests (up to the grace period) and
    /// returns when all connection tasks have ended.
    ///
    /// # Errors
    /// [`RemotingError::Accept`] if the listener fails for good.
    pub async fn serve(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) -> Result<(), RemotingError> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut connections = JoinSet::new();
        // Connections per client address, released when their task ends (even by a panic:
        // tasks are known by id).
        let mut per_ip: HashMap<IpAddr, usize> = HashMap::new();
        let mut task_ips: HashMap<tokio::task::Id, IpAddr> = HashMap::new();
        tokio::pin!(shutdown);
        let result = loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(pair) => pair,
                        Err(e) if is_transient(&e) => {
                            warn!(error = %e, "accept failed; continuing");
                            // Back off briefly so fd exhaustion does not spin the loop.
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                            continue;
                        }
                        Err(e) => break Err(RemotingError::Accept(e)),
                    };
                    if connections.len() >= self.config.max_connections {
                        warn!(remote_addr = %peer, max = self.config.max_connections, "connection limit reached; refusing");
                        drop(stream);
                        continue;
                    }
                    let held = per_ip.entry(peer.ip()).or_insert(0);
                    if *held >= self.config.max_connections_per_ip {
                        warn!(remote_addr = %peer, max = self.config.max_connections_per_ip,
                            "connection limit of this client address reached; refusing");
                        drop(stream);
                        continue;
                    }
                    *held += 1;
                    // Set-up waits for the peer (first byte, TLS handshake), so it runs on the
                    // connection's own task, counted against the limit from now on.
                    let serve = serve_connection(stream, peer, self.config.clone(), self.handler.clone(), stop_rx.clone());
                    let task = connections.spawn(serve);
                    task_ips.insert(task.id(), peer.ip());
                }
                Some(ended) = connections.join_next_with_id(), if !connections.is_empty() => {
                    let id = match ended {
                        Ok((id, ())) => id,
                        Err(e) => e.id(),
                    };
                    if let Some(ip) = task_ips.remove(&id) {
                        if let Some(held) = per_ip.get_mut(&ip) {
                            *held -= 1;
                            if *held == 0 {
                                per_ip.remove(&ip);
                            }
                        }
                    }
                }
                () = &mut shutdown => break Ok(()),
            }
        };
        drop(listener);
        info!(connections = connections.len(), "server stopping; draining connections");
        stop_tx.send_replace(true);
        while connections.join_next().await.is_some() {}
        result
    }
}

/// Classifies one accepted connection and runs it until it closes. A connection that is
/// refused, fails its handshake, or is still silent at shutdown is dropped (logged by
/// [`ServerTls::accept`]).
async fn serve_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    config: ServerConfig,
    handler: Arc<dyn RequestHandler>,
    shutdown: watch::Receiver<bool>,
) {
    let tls: ServerTls = config.tls.clone();
    let mut stopping = shutdown.clone();
    // A silent client is bounded like an idle one: Java's IdleStateHandler sits behind the
    // handshake handler, so it closes such a connection after the idle time too.
    // A load balancer's PROXY header first (it precedes TLS): the client's own address.
    let peer = tokio::select! {
        p = crate::proxy_protocol::accept(&mut stream, peer, &config.proxy_protocol_trusted, config.idle_timeout) => match p {
            Ok(p) => p,
            Err(()) => return,
        },
        _ = stopping.wait_for(|stop| *stop) => return,
    };
    let accepted = tokio::select! {
        accepted = tls.accept(stream, peer, config.idle_timeout) => accepted,
        _ = stopping.wait_for(|stop| *stop) => return,
    };
    match accepted {
        None => {}
        Some(Accepted::Plain(stream)) => {
            let local_addr = stream.local_addr().ok();
            let _ = stream.set_nodelay(true);
            let Some((stream, first)) = remoting_or_handed(stream, peer, (local_addr, false), &config, stopping).await
            else {
                return;
            };
            // `into_split` halves need no lock between the reader and the writer.
            let (reader, writer) = stream.into_split();
            let reader = Prefixed::new(first.bytes(), reader);
            let (_conn, task) = connection::start_io(reader, writer, (peer, local_addr), config, handler, shutdown);
            task.await;
        }
        Some(Accepted::Tls(stream)) => {
            let local_addr = stream.get_ref().0.local_addr().ok();
            let Some((stream, first)) = remoting_or_handed(stream, peer, (local_addr, true), &config, stopping).await
            else {
                return;
            };
            let (reader, writer) = tokio::io::split(*stream);
            let reader = Prefixed::new(first.bytes(), reader);
            let (_conn, task) = connection::start_io(reader, writer, (peer, local_addr), config, handler, shutdown);
            task.await;
        }
    }
}

/// The bytes a connection's classification read before its remoting frames.
struct FirstBytes([u8; 4], usize);

impl FirstBytes {
    fn bytes(&self) -> &[u8] {
        &self.0[..self.1]
    }
}

/// On a port with an [`crate::ServerConfig::http2_handoff`], reads a connection's first bytes and
/// hands it to the gRPC server when they start the HTTP/2 preface (`None`), or gives it back
/// with them to be served as remoting. Without one, gives it back at once. `None` too when the
/// connection ends, stays silent for the idle time, or the server stops first.
async fn remoting_or_handed<S: HandedIo>(
    mut stream: S,
    peer: SocketAddr,
    (local_addr, tls): (Option<SocketAddr>, bool),
    config: &ServerConfig,
    mut stopping: watch::Receiver<bool>,
) -> Option<(S, FirstBytes)> {
    let Some(handoff) = &config.http2_handoff else {
        return Some((stream, FirstBytes([0; 4], 0)));
    };
    let (first, n) = tokio::select! {
        first = read_first_bytes(&mut stream, peer, config.idle_timeout) => first?,
        _ = stopping.wait_for(|stop| *stop) => return None,
    };
    if first[..n] == HTTP2_PREFACE_START {
        let stream = Prefixed::new(&first[..n], stream).boxed();
        handoff.hand(HandedConnection { stream, peer, local_addr, tls });
        return None;
    }
    Some((stream, FirstBytes(first, n)))
}

fn is_transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted | WouldBlock)
        || e.raw_os_error().is_some_and(|code| code == 23 || code == 24) // ENFILE, EMFILE
}
