//! Request handling: the `RequestHandler` trait and a dispatcher by request code.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use ferromq_protocol::{response_code, RemotingCommand};

use crate::connection::Connection;

/// The future a handler returns: the response, or `None` to send nothing (oneway requests,
/// or a response sent later through [`Connection::send_response`]).
pub type HandlerFuture = Pin<Box<dyn Future<Output = Option<RemotingCommand>> + Send + 'static>>;

/// Serves the requests arriving on connections.
pub trait RequestHandler: Send + Sync + 'static {
    /// Handles one request. The transport fixes the response's `opaque` and response flag.
    fn handle(&self, conn: Connection, request: RemotingCommand) -> HandlerFuture;

    /// Called once when a connection has closed.
    fn on_connection_closed(&self, _conn: &Connection) {}
}

type Processor = Arc<dyn Fn(Connection, RemotingCommand) -> HandlerFuture + Send + Sync>;
type CloseHook = Arc<dyn Fn(&Connection) + Send + Sync>;

/// Routes requests to processors by request code; unknown codes get
/// `REQUEST_CODE_NOT_SUPPORTED` as the Java servers answer it.
#[derive(Default, Clone)]
pub struct Dispatcher {
    processors: HashMap<i32, Processor>,
    close_hooks: Vec<CloseHook>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut codes: Vec<_> = self.processors.keys().collect();
        codes.sort();
        f.debug_struct("Dispatcher").field("codes", &codes).finish()
    }
}

impl Dispatcher {
    /// An empty dispatcher: every code is unsupported.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `code` with an async function.
    pub fn register<F, Fut>(&mut self, code: i32, f: F) -> &mut Self
    where
        F: Fn(Connection, RemotingCommand) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<RemotingCommand>> + Send + 'static,
    {
        self.processors.insert(code, Arc::new(move |conn, req| Box::pin(f(conn, req))));
        self
    }

    /// Serves `code` with a synchronous function. It runs in the request's own task, not in
    /// the connection's reader, so a handler that touches a file (metadata persistence) delays
    /// only its own answer, never the requests behind it on the connection.
    pub fn register_sync<F>(&mut self, code: i32, f: F) -> &mut Self
    where
        F: Fn(&Connection, &RemotingCommand) -> Option<RemotingCommand> + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        self.processors.insert(
            code,
            Arc::new(move |conn, req| {
                let f = f.clone();
                Box::pin(async move { f(&conn, &req) })
            }),
        );
        self
    }

    /// Runs `hook` whenever a connection closes.
    pub fn on_close(&mut self, hook: impl Fn(&Connection) + Send + Sync + 'static) -> &mut Self {
        self.close_hooks.push(Arc::new(hook));
        self
    }

    /// Whether `code` has a processor.
    pub fn supports(&self, code: i32) -> bool {
        self.processors.contains_key(&code)
    }
}

/// The answer to a request code nobody serves.
pub fn not_supported(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(
        request,
        response_code::REQUEST_CODE_NOT_SUPPORTED,
        format!(" request type {} not supported", request.code),
    )
}

impl RequestHandler for Dispatcher {
    fn handle(&self, conn: Connection, request: RemotingCommand) -> HandlerFuture {
        match self.processors.get(&request.code) {
            Some(p) => p(conn, request),
            None => Box::pin(std::future::ready(Some(not_supported(&request)))),
        }
    }

    fn on_connection_closed(&self, conn: &Connection) {
        for hook in &self.close_hooks {
            hook(conn);
        }
    }
}
