//! Request handling: the `RequestHandler` trait and a dispatcher by request code.

use std::collections::{HashMap, HashSet};
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

    /// Whether the connection's reader may poll the handler of `code` once itself before
    /// giving it a task of its own. A handler that usually finishes without waiting (a send
    /// under ASYNC_FLUSH) then answers with no task, no channel message and no wake-up of its
    /// own, and its answer leaves with the others of the same read in one write; one that
    /// waits (a group commit, a replica) continues in its own task. Only for handlers whose
    /// first poll is short: the reader reads nothing else meanwhile.
    fn runs_inline(&self, _code: i32) -> bool {
        false
    }

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
    /// Codes whose handlers the reader polls first (see [`RequestHandler::runs_inline`]).
    inline: HashSet<i32>,
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
        self.inline.remove(&code);
        self
    }

    /// Serves `code` with an async function that the connection's reader polls once itself
    /// (see [`RequestHandler::runs_inline`]): for requests that are usually answered at once
    /// and whose first poll never blocks for long.
    pub fn register_inline<F, Fut>(&mut self, code: i32, f: F) -> &mut Self
    where
        F: Fn(Connection, RemotingCommand) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<RemotingCommand>> + Send + 'static,
    {
        self.register(code, f);
        self.inline.insert(code);
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
        self.inline.remove(&code);
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

    fn runs_inline(&self, code: i32) -> bool {
        // An unknown code's answer is ready at once too.
        self.inline.contains(&code) || !self.processors.contains_key(&code)
    }

    fn on_connection_closed(&self, conn: &Connection) {
        for hook in &self.close_hooks {
            hook(conn);
        }
    }
}
