//! The RPC client: one connection per peer address, reconnecting on demand.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_protocol::RemotingCommand;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::debug;

use crate::config::ClientConfig;
use crate::connection::{self, Connection};
use crate::error::RemotingError;
use crate::handler::{Dispatcher, RequestHandler};

/// A connection's task, whichever transport it runs on.
type ConnectionTask = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Sends requests to remoting servers. Server-initiated requests (a broker calling a client)
/// go to the handler given at construction.
pub struct RemotingClient {
    config: ClientConfig,
    handler: Arc<dyn RequestHandler>,
    connections: tokio::sync::Mutex<HashMap<String, Connection>>,
    tasks: Mutex<JoinSet<()>>,
    stop_tx: watch::Sender<bool>,
}

impl std::fmt::Debug for RemotingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemotingClient").field("config", &self.config).finish_non_exhaustive()
    }
}

impl RemotingClient {
    /// A client whose peers' requests are all answered REQUEST_CODE_NOT_SUPPORTED.
    pub fn new(config: ClientConfig) -> Self {
        Self::with_handler(config, Arc::new(Dispatcher::new()))
    }

    /// A client serving server-initiated requests with `handler`.
    pub fn with_handler(config: ClientConfig, handler: Arc<dyn RequestHandler>) -> Self {
        let (stop_tx, _) = watch::channel(false);
        RemotingClient {
            config,
            handler,
            connections: tokio::sync::Mutex::new(HashMap::new()),
            tasks: Mutex::new(JoinSet::new()),
            stop_tx,
        }
    }

    /// The live connection to `addr`, connecting if there is none.
    ///
    /// # Errors
    /// [`RemotingError::Connect`] / [`RemotingError::ConnectTimeout`].
    pub async fn connection(&self, addr: &str) -> Result<Connection, RemotingError> {
        // The map lock is held across the connect so concurrent callers share one attempt.
        let mut map = self.connections.lock().await;
        if let Some(conn) = map.get(addr) {
            if !conn.is_closed() {
                return Ok(conn.clone());
            }
            map.remove(addr);
        }
        let timeout = self.config.connect_timeout;
        let timed_out = || RemotingError::ConnectTimeout { addr: addr.to_owned(), timeout };
        let deadline = tokio::time::Instant::now() + timeout;
        let stream = tokio::time::timeout_at(deadline, TcpStream::connect(addr))
            .await
            .map_err(|_| timed_out())?
            .map_err(|source| RemotingError::Connect { addr: addr.to_owned(), source })?;
        let (config, handler, stop) = (self.config.connection.clone(), self.handler.clone(), self.stop_tx.subscribe());
        let (conn, task) = match &self.config.tls {
            None => {
                let (conn, task) = connection::start(stream, config, handler, stop)
                    .map_err(|source| RemotingError::Connect { addr: addr.to_owned(), source })?;
                (conn, Box::pin(task) as ConnectionTask)
            }
            Some(tls) => {
                let _ = stream.set_nodelay(true);
                let peer =
                    stream.peer_addr().map_err(|source| RemotingError::Connect { addr: addr.to_owned(), source })?;
                let local = stream.local_addr().ok();
                let stream = tokio::time::timeout_at(deadline, tls.connect(addr, stream))
                    .await
                    .map_err(|_| timed_out())?
                    .map_err(|source| RemotingError::Tls { addr: addr.to_owned(), source })?;
                let (reader, writer) = tokio::io::split(stream);
                let (conn, task) = connection::start_io(reader, writer, (peer, local), config, handler, stop);
                (conn, Box::pin(task) as ConnectionTask)
            }
        };
        {
            let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
            // Reap finished connection tasks so the set does not grow with reconnects.
            while tasks.try_join_next().is_some() {}
            tasks.spawn(task);
        }
        debug!(remote_addr = addr, connection_id = conn.id(), tls = self.config.tls.is_some(), "connected");
        map.insert(addr.to_owned(), conn.clone());
        Ok(conn)
    }

    /// Sends `request` to `addr` and waits up to `timeout` for the response.
    ///
    /// # Errors
    /// Connect failures, [`RemotingError::Timeout`], [`RemotingError::ConnectionClosed`].
    pub async fn invoke(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, RemotingError> {
        let started = tokio::time::Instant::now();
        let conn = self.connection(addr).await?;
        let left = timeout.saturating_sub(started.elapsed());
        conn.invoke(self.with_request_fields(request), left).await
    }

    fn with_request_fields(&self, mut request: RemotingCommand) -> RemotingCommand {
        for (key, value) in &self.config.request_ext_fields {
            request.ext_fields.insert((*key).into(), value);
        }
        request
    }

    /// Sends `request` to `addr` as oneway.
    ///
    /// # Errors
    /// Connect failures and [`RemotingError::ConnectionClosed`].
    pub async fn invoke_oneway(&self, addr: &str, request: RemotingCommand) -> Result<(), RemotingError> {
        self.connection(addr).await?.invoke_oneway(self.with_request_fields(request)).await
    }

    /// Closes the connection to `addr`, if any.
    pub async fn close_connection(&self, addr: &str) {
        if let Some(conn) = self.connections.lock().await.remove(addr) {
            conn.close();
        }
    }

    /// Closes every connection and waits for their tasks to end.
    pub async fn shutdown(&self) {
        self.stop_tx.send_replace(true);
        self.connections.lock().await.clear();
        let mut tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        while tasks.join_next().await.is_some() {}
    }
}
