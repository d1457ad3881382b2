//! ACL 2.0 in front of the remoting port's handler (Java: the proxy's remoting
//! `AuthenticationPipeline` and `AuthorizationPipeline`): every request is authenticated and
//! authorized as a broker would do it, with the proxy's users and ACLs, before the proxy
//! answers it or relays it; a refusal is NO_PERMISSION with Java's remark (a oneway request is
//! dropped).
//!
//! A request let through and relayed to a broker goes under the proxy's own identity: the
//! broker connections sign every request with `innerClientAuthenticationCredentials`, which
//! replaces the client's `AccessKey` and `Signature` (Java's proxy re-signs the same way).
//! Without those credentials the client's signature is relayed as it came.

use std::sync::Arc;

use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::{Connection, Dispatcher, HandlerFuture, RequestHandler};

use crate::proxy::Proxy;

/// The remoting port's handler behind the proxy's ACL 2.0 (`proxy.auth`; when it is not set
/// every request goes through).
pub struct AuthGate {
    inner: Dispatcher,
    proxy: Arc<Proxy>,
}

impl std::fmt::Debug for AuthGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthGate").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl AuthGate {
    /// `inner` behind `proxy`'s checks.
    pub fn new(inner: Dispatcher, proxy: Arc<Proxy>) -> Self {
        AuthGate { inner, proxy }
    }
}

impl RequestHandler for AuthGate {
    fn handle(&self, conn: Connection, request: RemotingCommand) -> HandlerFuture {
        if let Some(auth) = self.proxy.auth.get() {
            let ip = conn.remote_addr().ip();
            if let Err(denial) = auth.check(&request, ip) {
                self.proxy.denials.log(&denial, request.code, ip, "2.0");
                let answer = (!request.is_oneway())
                    .then(|| RemotingCommand::response_to(&request, response_code::NO_PERMISSION, Some(denial.reason)));
                return Box::pin(std::future::ready(answer));
            }
        }
        self.inner.handle(conn, request)
    }

    fn runs_inline(&self, code: i32) -> bool {
        self.inner.runs_inline(code)
    }

    fn on_connection_closed(&self, conn: &Connection) {
        self.inner.on_connection_closed(conn);
    }
}
