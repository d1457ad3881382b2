//! In-process access to a running broker's request processors, for components that run in
//! the broker's process (the gRPC proxy in local mode).
//!
//! Each [`LocalAccess::connect`] opens an in-process remoting connection
//! (`ferromq_remoting::in_process_pair`) to the broker's own [`Dispatcher`], the one its
//! listeners serve: the same processors answer, the client tables record the connection like a
//! TCP one (under the caller's `client_addr`), and the broker can call the client back on it
//! (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED). No loopback socket is involved.
//!
//! [`LocalAccess::service`] reaches the broker's [`Service`] directly, with no frame at all:
//! the proxy's hot paths (send) call it, the rest goes over the connection.
//!
//! The connections' tasks belong to the [`LocalAccess`]; the broker drains them at shutdown,
//! alongside its listeners' connections, before it stops the store. It does not decide what
//! the in-process component sends, nor keep it from outliving the broker: once the broker has
//! stopped, new connections are born closed.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use ferromq_remoting::tls::ClientTls;
use ferromq_remoting::{
    in_process_pair, Connection, Dispatcher, InProcessClient, InProcessServer, RequestHandler, ServerConfig,
};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::service::Service;

/// The most service calls in flight through one [`LocalAccess`]; past it
/// [`LocalAccess::service`] answers `None` and the caller uses the connection (bounded too).
pub const LOCAL_CALLS_MAX: u32 = 65_536;

/// A handle for in-process components to reach the broker's processors. Cheap to clone; all
/// clones share the broker's connections.
#[derive(Clone)]
pub struct LocalAccess {
    shared: Arc<Shared>,
}

struct Shared {
    /// `brokerIP1:listenPort`, as registered with the name servers.
    broker_addr: String,
    broker_name: String,
    cluster_name: String,
    /// The broker's address as a socket address: the in-process client's remote address.
    server_addr: SocketAddr,
    /// The settings of the broker's accepted connections (idle timeout, frame limit, grace).
    server_config: ServerConfig,
    /// ACL 2.0 as the broker enforces it, for the proxy to check its own clients with.
    auth: Option<Arc<ferromq_auth::v2::AuthService>>,
    /// How the broker's own clients connect (TLS or not), for components in its process that
    /// reach other servers (the local proxy's name-server and broker connections).
    client_tls: Option<ClientTls>,
    /// Turns true when the broker shuts down; each connection's server end follows it.
    stop_tx: watch::Sender<bool>,
    /// Service calls hold a permit while they run, so shutdown can wait for them before the
    /// store stops.
    calls: Arc<Semaphore>,
    state: Mutex<State>,
}

struct State {
    /// The broker's dispatcher while it runs; `None` once it has stopped, so a handle that
    /// outlives the broker does not keep its store and tables alive.
    dispatcher: Option<Arc<Dispatcher>>,
    /// The broker's service while it runs (`None` after, for the same reason).
    service: Option<Service>,
    /// Owner of every in-process connection's task.
    connections: JoinSet<()>,
}

/// What [`LocalAccess::new`] needs of the broker.
pub(crate) struct LocalAccessParts {
    pub(crate) dispatcher: Arc<Dispatcher>,
    pub(crate) server_config: ServerConfig,
    pub(crate) client_tls: Option<ClientTls>,
    pub(crate) broker_addr: String,
    pub(crate) server_addr: SocketAddr,
    pub(crate) broker_name: String,
    pub(crate) cluster_name: String,
    pub(crate) service: Service,
    pub(crate) auth: Option<Arc<ferromq_auth::v2::AuthService>>,
}

impl std::fmt::Debug for LocalAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.shared;
        f.debug_struct("LocalAccess")
            .field("broker_addr", &s.broker_addr)
            .field("broker_name", &s.broker_name)
            .field("cluster_name", &s.cluster_name)
            .field("running", &self.state().dispatcher.is_some())
            .finish_non_exhaustive()
    }
}

impl LocalAccess {
    pub(crate) fn new(parts: LocalAccessParts) -> LocalAccess {
        let (stop_tx, _) = watch::channel(false);
        LocalAccess {
            shared: Arc::new(Shared {
                broker_addr: parts.broker_addr,
                broker_name: parts.broker_name,
                cluster_name: parts.cluster_name,
                server_addr: parts.server_addr,
                server_config: parts.server_config,
                auth: parts.auth,
                client_tls: parts.client_tls,
                stop_tx,
                calls: Arc::new(Semaphore::new(LOCAL_CALLS_MAX as usize)),
                state: Mutex::new(State {
                    dispatcher: Some(parts.dispatcher),
                    service: Some(parts.service),
                    connections: JoinSet::new(),
                }),
            }),
        }
    }

    /// How the broker's own clients connect to other servers: TLS when its `useTLS`,
    /// `tls.enable` or `tls.server.mode=enforcing` say so, else `None` (plaintext).
    pub fn client_tls(&self) -> Option<ClientTls> {
        self.shared.client_tls.clone()
    }

    /// Opens an in-process connection to the broker and returns its client end: requests
    /// [`Connection::invoke`]d on it are served by the broker's processors, which see
    /// `client_addr` as the client's address (producer and consumer tables, connection lists);
    /// requests the broker sends on it are served by `client_handler`.
    ///
    /// The connection behaves as an accepted TCP connection: it closes when idle for
    /// `serverChannelMaxIdleTimeSeconds` (so a long-lived user sends heartbeats, as remote
    /// clients do), when either end is closed, and at broker shutdown, after its in-flight
    /// requests are answered. Once the broker has stopped, the connection returned is already
    /// closed: every call on it fails with `ConnectionClosed`.
    ///
    /// # Panics
    /// When called outside a Tokio runtime (the connection's task is spawned on it).
    pub fn connect(&self, client_handler: Arc<dyn RequestHandler>, client_addr: SocketAddr) -> Connection {
        let mut state = self.state();
        let running = state.dispatcher.clone();
        let handler: Arc<dyn RequestHandler> = match &running {
            Some(dispatcher) => dispatcher.clone(),
            // Never run: the connection only has to exist, closed.
            None => Arc::new(Dispatcher::new()),
        };
        let (conn, task) = in_process_pair(
            InProcessServer {
                handler,
                config: self.shared.server_config.clone(),
                shutdown: self.shared.stop_tx.subscribe(),
                addr: self.shared.server_addr,
            },
            InProcessClient { handler: client_handler, addr: client_addr },
        );
        if running.is_none() {
            debug!(remote_addr = %client_addr, "broker stopped; in-process connection born closed");
            drop(task);
            return conn;
        }
        // Reap finished connections so the set does not grow with reconnects.
        while state.connections.try_join_next().is_some() {}
        state.connections.spawn(task);
        debug!(remote_addr = %client_addr, connection_id = conn.id(), "in-process connection opened");
        conn
    }

    /// The broker's service for one call: `None` once the broker is stopping (or with
    /// [`LOCAL_CALLS_MAX`] calls in flight). Hold the [`LocalCall`] until the call's answer
    /// is in: the broker's shutdown waits for it (within the shutdown grace) before it stops
    /// the store.
    pub fn service(&self) -> Option<LocalCall> {
        let permit = self.shared.calls.clone().try_acquire_owned().ok()?;
        let service = self.state().service.clone()?;
        Some(LocalCall { service, _permit: permit })
    }

    /// ACL 2.0 as the broker enforces it (`None` when both switches are off): the proxy in
    /// local mode checks its gRPC clients against the broker's users and ACLs.
    pub fn auth(&self) -> Option<Arc<ferromq_auth::v2::AuthService>> {
        self.shared.auth.clone()
    }

    /// The broker's address, `brokerIP1:listenPort`, as it registers with the name servers
    /// and as routes name it.
    pub fn broker_addr(&self) -> &str {
        &self.shared.broker_addr
    }

    /// The broker's `brokerName`.
    pub fn broker_name(&self) -> &str {
        &self.shared.broker_name
    }

    /// The broker's `brokerClusterName`.
    pub fn cluster_name(&self) -> &str {
        &self.shared.cluster_name
    }

    /// Stops the in-process connections at broker shutdown: each server end stops reading and
    /// answers what it has accepted (within the shutdown grace), then both ends close; returns
    /// once every connection task has ended. Later [`LocalAccess::connect`]s get closed
    /// connections.
    pub(crate) async fn shutdown(&self) {
        let mut connections = {
            let mut state = self.state();
            // Under the lock, so no connection is spawned after the set is taken.
            state.dispatcher = None;
            state.service = None;
            self.shared.stop_tx.send_replace(true);
            std::mem::take(&mut state.connections)
        };
        info!(connections = connections.len(), "in-process connections draining");
        let calls = self.shared.calls.clone();
        let grace = self.shared.server_config.shutdown_grace;
        // Every permit back means no service call is running; closing then refuses new ones.
        match tokio::time::timeout(grace, calls.acquire_many(LOCAL_CALLS_MAX)).await {
            Ok(Ok(all)) => drop(all),
            Ok(Err(_)) => {}
            Err(_) => warn!(grace_ms = grace.as_millis() as u64, "in-process service calls still running at shutdown"),
        }
        calls.close();
        while connections.join_next().await.is_some() {}
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere while holding it; the state is a set
        // and an option, each left whole by every critical section.
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One call's hold on the broker's [`Service`] (see [`LocalAccess::service`]).
#[derive(Debug)]
pub struct LocalCall {
    service: Service,
    _permit: OwnedSemaphorePermit,
}

impl std::ops::Deref for LocalCall {
    type Target = Service;

    fn deref(&self) -> &Service {
        &self.service
    }
}
