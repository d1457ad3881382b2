//! Who may change the name server's tables: `brokerRegisterWhiteList` guards what brokers send
//! (registration, unregistration, heartbeats, topic registration), `adminRequestWhiteList`
//! what operators send (write permission, topic deletion, KV config, config updates). Each is
//! a comma-separated list of addresses and CIDR blocks; empty lets everyone through, as Java's
//! name server does. A refusal is NO_PERMISSION naming the address and the key.
//!
//! Java's name server has no such check: anyone who reaches it can register a fake master
//! for a broker name or unregister the real one (docs/decisions/0017).

use std::sync::Arc;

use ferromq_config::IpBlock;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{Connection, HandlerFuture, RequestHandler};
use tracing::warn;

/// Requests brokers send.
pub(crate) const BROKER_CODES: &[i32] = &[
    request_code::REGISTER_BROKER,
    request_code::UNREGISTER_BROKER,
    request_code::BROKER_HEARTBEAT,
    request_code::REGISTER_TOPIC_IN_NAMESRV,
];

/// Requests operators send that change the name server.
pub(crate) const ADMIN_CODES: &[i32] = &[
    request_code::WIPE_WRITE_PERM_OF_BROKER,
    request_code::ADD_WRITE_PERM_OF_BROKER,
    request_code::DELETE_TOPIC_IN_NAMESRV,
    request_code::PUT_KV_CONFIG,
    request_code::DELETE_KV_CONFIG,
    request_code::UPDATE_NAMESRV_CONFIG,
];

/// The name server's dispatcher behind the two lists.
pub struct AddressGate {
    inner: Arc<dyn RequestHandler>,
    brokers: Vec<IpBlock>,
    admins: Vec<IpBlock>,
}

impl std::fmt::Debug for AddressGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddressGate").field("brokers", &self.brokers).field("admins", &self.admins).finish()
    }
}

impl AddressGate {
    /// A gate; empty lists let everyone through.
    pub fn new(inner: Arc<dyn RequestHandler>, brokers: Vec<IpBlock>, admins: Vec<IpBlock>) -> Self {
        AddressGate { inner, brokers, admins }
    }
}

impl RequestHandler for AddressGate {
    fn handle(&self, conn: Connection, request: RemotingCommand) -> HandlerFuture {
        let (list, key) = if BROKER_CODES.contains(&request.code) {
            (&self.brokers, "brokerRegisterWhiteList")
        } else if ADMIN_CODES.contains(&request.code) {
            (&self.admins, "adminRequestWhiteList")
        } else {
            return self.inner.handle(conn, request);
        };
        let ip = conn.remote_addr().ip();
        if list.is_empty() || list.iter().any(|allowed| allowed.contains(ip)) {
            return self.inner.handle(conn, request);
        }
        warn!(remote_addr = %conn.remote_addr(), code = request.code, key, "request refused: address not in the white list");
        let answer = (!request.is_oneway()).then(|| {
            RemotingCommand::response_to(
                &request,
                response_code::NO_PERMISSION,
                Some(format!("{ip} is not in {key} of this name server")),
            )
        });
        Box::pin(std::future::ready(answer))
    }

    fn runs_inline(&self, code: i32) -> bool {
        self.inner.runs_inline(code)
    }

    fn on_connection_closed(&self, conn: &Connection) {
        self.inner.on_connection_closed(conn);
    }
}
