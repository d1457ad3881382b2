//! The proxy's remoting port (`remotingListenPort`, 8080; cluster mode): RocketMQ remoting
//! clients (4.x and 5.x) served through the proxy as if it were the name server and every
//! broker (Java: `RemotingProtocolServer`). See ADR 0014.
//!
//! Every request first passes the proxy's ACL 2.0 when it has one ([`gate`]). The proxy
//! answers routes (every broker at the proxy's address), heartbeats, unregistration and the
//! consumer list of a group itself ([`local`]), and relays the messaging requests to the broker
//! group they name ([`relay`]), signed as the proxy when it has credentials of its own. Requests brokers send back on the proxy's connections
//! (transaction checks, consumer running info, consume-directly) reach the remoting client
//! they are meant for.

pub mod clients;
pub mod gate;
pub mod local;
pub mod relay;

use std::future::Future;
use std::sync::Arc;

use ferromq_protocol::request_code;
use ferromq_remoting::tls::ServerTls;
use ferromq_remoting::{Connection, Dispatcher, Http2Handoff, RemotingError, RemotingServer, ServerConfig};
use tokio::net::TcpListener;
use tracing::info;

use crate::proxy::Proxy;

pub use clients::RemotingClients;

/// The request codes relayed to a broker.
pub const RELAYED: &[i32] = &[
    request_code::SEND_MESSAGE,
    request_code::SEND_MESSAGE_V2,
    request_code::SEND_BATCH_MESSAGE,
    request_code::CONSUMER_SEND_MSG_BACK,
    request_code::END_TRANSACTION,
    request_code::RECALL_MESSAGE,
    request_code::PULL_MESSAGE,
    request_code::LITE_PULL_MESSAGE,
    request_code::POP_MESSAGE,
    request_code::ACK_MESSAGE,
    request_code::CHANGE_MESSAGE_INVISIBLETIME,
    request_code::QUERY_CONSUMER_OFFSET,
    request_code::UPDATE_CONSUMER_OFFSET,
    request_code::GET_MIN_OFFSET,
    request_code::GET_MAX_OFFSET,
    request_code::SEARCH_OFFSET_BY_TIMESTAMP,
    request_code::GET_EARLIEST_MSG_STORETIME,
    request_code::LOCK_BATCH_MQ,
    request_code::UNLOCK_BATCH_MQ,
];

/// The remoting port's request handler; every other code gets REQUEST_CODE_NOT_SUPPORTED.
pub fn handler(proxy: &Arc<Proxy>) -> Dispatcher {
    let mut d = Dispatcher::new();
    let p = proxy.clone();
    d.register(request_code::GET_ROUTEINFO_BY_TOPIC, move |conn: Connection, req| {
        let p = p.clone();
        async move { Some(local::route(&p, &conn, &req).await) }
    });
    let p = proxy.clone();
    d.register(request_code::HEART_BEAT, move |conn: Connection, req| {
        let p = p.clone();
        async move { Some(local::heartbeat(&p, &conn, &req).await) }
    });
    let p = proxy.clone();
    d.register(request_code::UNREGISTER_CLIENT, move |conn: Connection, req| {
        let p = p.clone();
        async move { Some(local::unregister(&p, &conn, &req).await) }
    });
    let p = proxy.clone();
    d.register_sync(request_code::GET_CONSUMER_LIST_BY_GROUP, move |_conn, req| Some(local::consumer_list(&p, req)));
    let p = proxy.clone();
    d.register_sync(request_code::GET_CONSUMER_CONNECTION_LIST, move |_conn, req| {
        Some(local::consumer_connection_list(&p, req))
    });
    let p = proxy.clone();
    d.register(request_code::CHECK_CLIENT_CONFIG, move |conn: Connection, req| {
        let p = p.clone();
        async move { local::check_client_config(&p, &conn, req).await }
    });
    for &code in RELAYED {
        let p = proxy.clone();
        d.register(code, move |conn: Connection, req| {
            let p = p.clone();
            async move { relay::relay(&p, &conn, req).await }
        });
    }
    let p = Arc::downgrade(proxy);
    d.on_close(move |conn| {
        let Some(p) = p.upgrade() else { return };
        let conn = conn.clone();
        tokio::spawn(async move { local::closed(&p, &conn).await });
    });
    d
}

/// How the remoting port serves its connections.
pub struct Serving {
    /// Which connections it takes (`tls.server.mode`).
    pub tls: ServerTls,
    /// Told of each request served.
    pub rpc_observer: Option<Arc<dyn ferromq_remoting::RpcObserver>>,
    /// Where gRPC connections go (`enableRemotingLocalProxyGrpc`); `None`: remoting only.
    pub http2_handoff: Option<Http2Handoff>,
}

impl std::fmt::Debug for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving")
            .field("tls", &self.tls)
            .field("rpc_observer", &self.rpc_observer.is_some())
            .field("http2_handoff", &self.http2_handoff.is_some())
            .finish()
    }
}

/// Serves the remoting port on `listener` until `shutdown` completes.
///
/// # Errors
/// [`RemotingError::Accept`] when the listener fails for good.
pub async fn serve(
    proxy: Arc<Proxy>,
    listener: TcpListener,
    Serving { tls, rpc_observer, http2_handoff }: Serving,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RemotingError> {
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let grpc_too = http2_handoff.is_some();
    info!(addr, tls = %tls, grpc_too, "proxy remoting port listening (RocketMQ remoting clients)");
    let gated = gate::AuthGate::new(handler(&proxy), proxy.clone());
    let config = ServerConfig { tls, rpc_observer, http2_handoff, ..ServerConfig::default() };
    let server = RemotingServer::new(config, Arc::new(gated));
    server.serve(listener, shutdown).await
}
