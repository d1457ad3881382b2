//! Serving the proxy on a gRPC port: TLS and plaintext on one listener, the tonic server, and
//! the proxy's background work, until shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ferromq_protocol::signature::SessionCredentials;
use ferromq_remoting::handoff::HANDOFF_QUEUE;
use ferromq_remoting::tls::{ClientTls, ServerTls};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_remoting::{HandedConnection, Http2Handoff};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::auth::{AuthConfigError, ProxyAuthConfig};
use crate::brokers::Connector;
use crate::config::ProxyConfig;
use crate::listener::{GrpcIncoming, ListenerOptions};
use crate::pb::messaging_service_server::MessagingServiceServer;
use crate::proxy::Proxy;
use crate::route::Advertise;
use crate::service::MessagingServiceImpl;
use crate::tls::{self, TlsError, TlsMode};

/// Why the gRPC server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The TLS settings are unusable.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The ACL 2.0 settings are unusable.
    #[error(transparent)]
    Auth(#[from] AuthConfigError),
    /// The remoting port failed.
    #[error("proxy remoting port: {source}")]
    Remoting {
        /// What failed.
        #[source]
        source: ferromq_remoting::RemotingError,
    },
    /// A serving thread (or its runtime) could not be started.
    #[error("cannot start a gRPC serving thread: {source}")]
    Thread {
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// The metrics settings are unusable, or their port cannot be bound.
    #[error("{0}")]
    Metrics(String),
    /// The listener failed.
    #[error("gRPC server on {addr}: {source}")]
    Transport {
        /// The port's address.
        addr: String,
        /// What failed.
        #[source]
        source: tonic::transport::Error,
    },
}

/// Serves `proxy` on `listener` until `shutdown` completes.
///
/// # Errors
/// [`ServeError`] when TLS cannot be set up or the server fails.
pub async fn serve(
    proxy: Arc<Proxy>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    serve_with_handoff(proxy, listener, None, shutdown).await
}

/// [`serve`], also serving the gRPC connections the remoting port hands over on `handed`.
async fn serve_with_handoff(
    proxy: Arc<Proxy>,
    listener: TcpListener,
    handed: Option<tokio::sync::mpsc::Receiver<HandedConnection>>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let config = &proxy.config;
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let tls_config = match config.tls_server_mode {
        TlsMode::Disabled => None,
        _ => Some(tls::server_config_from_settings(
            config.tls_test_mode_enable,
            &config.tls_cert_path,
            &config.tls_key_path,
        )?),
    };
    let options = ListenerOptions { max_connections: config.grpc_max_connections, ..ListenerOptions::default() };
    let threads = match config.grpc_server_threads {
        0 => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
        n => n,
    };
    let parts =
        GrpcIncoming::partitioned_with_handoff(listener, config.tls_server_mode, tls_config, options, threads, handed)?;
    let limit = config.grpc_max_inbound_message_size;
    let service = MessagingServiceServer::new(MessagingServiceImpl::new(proxy.clone()))
        .max_decoding_message_size(limit)
        .max_encoding_message_size(usize::MAX);
    info!(addr, threads, tls_mode = %config.tls_server_mode, proxy_mode = %config.proxy_mode, "gRPC proxy listening");
    let background = tokio::spawn(proxy.clone().run_background());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut servers = tokio::task::JoinSet::new();
    let mut result = Ok(());
    for (i, part) in parts.into_iter().enumerate() {
        let (service, mut stop, addr) = (service.clone(), stop_rx.clone(), addr.clone());
        let streams = config.grpc_max_concurrent_streams;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new().name(format!("ferromq-grpc-{i}")).spawn(move || {
            let out = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt.block_on(async move {
                    tonic::transport::Server::builder()
                        .max_concurrent_streams(Some(streams))
                        .http2_keepalive_interval(Some(Duration::from_secs(60)))
                        .tcp_nodelay(true)
                        .serve_with_incoming_shutdown(service, part.start(), async move {
                            let _ = stop.wait_for(|s| *s).await;
                        })
                        .await
                        .map_err(|source| ServeError::Transport { addr, source })
                }),
                Err(source) => Err(ServeError::Thread { source }),
            };
            let _ = tx.send(out);
        });
        match spawned {
            Ok(_) => {
                servers.spawn(async move {
                    rx.await.unwrap_or_else(|_| {
                        Err(ServeError::Thread { source: std::io::Error::other("a gRPC serving thread panicked") })
                    })
                });
            }
            Err(source) => {
                result = Err(ServeError::Thread { source });
                break;
            }
        }
    }
    if result.is_ok() {
        tokio::pin!(shutdown);
        // Until the shutdown, or until a serving thread ends on its own (a failure).
        tokio::select! {
            () = &mut shutdown => {}
            Some(ended) = servers.join_next() => {
                result = ended.unwrap_or(Ok(()));
            }
        }
    }
    stop_tx.send_replace(true);
    while let Some(ended) = servers.join_next().await {
        if let (Ok(()), Ok(Err(e))) = (&result, ended) {
            result = Err(e);
        }
    }
    background.abort();
    let _ = background.await;
    proxy.brokers.shutdown().await;
    result
}

/// Cluster mode: a proxy that reaches the name servers and brokers over the network, with TLS
/// when `client_tls` says so, signing every request with `credentials` when given
/// (`innerClientAuthenticationCredentials`; the requests it relays for remoting clients too).
pub fn cluster_proxy(
    config: ProxyConfig,
    client_tls: Option<ClientTls>,
    credentials: Option<SessionCredentials>,
) -> Arc<Proxy> {
    let port = (!config.use_endpoint_port_from_request).then_some(config.grpc_server_port);
    let client = ClientConfig::default().with_tls(client_tls).with_credentials(credentials);
    let brokers = client.clone();
    Proxy::new(config, Advertise::RequestEndpoints { port }, client, |handler| {
        Arc::new(RemotingClient::with_handler(brokers, handler)) as Arc<dyn Connector>
    })
}

/// Warns about ACL 2.0 settings that work but leave a hole or cannot work with brokers that
/// check.
fn warn_about(auth: &ProxyAuthConfig) {
    let s = &auth.settings;
    match &auth.inner_credentials {
        None if auth.enabled() => warn!(
            "proxy ACL 2.0 on without innerClientAuthenticationCredentials: brokers that check refuse the proxy's \
             unsigned requests, the reading of users and ACLs included"
        ),
        Some(c) if !s.authentication_enabled => warn!(
            inner_user = %c.access_key,
            "innerClientAuthenticationCredentials without authenticationEnabled: the proxy's clients reach the \
             brokers as this user, unchecked"
        ),
        _ => {}
    }
    if s.authorization_enabled && !s.authentication_enabled {
        warn!(
            "proxy authorizationEnabled without authenticationEnabled: the user a request names is trusted unchecked"
        );
    }
    if auth.enabled() && !s.authorization_enabled {
        warn!(
            "proxy authenticationEnabled without authorizationEnabled: any user of the brokers may do anything \
             through the proxy"
        );
    }
}

/// A cluster proxy ready to serve.
struct ClusterSetup {
    proxy: Arc<Proxy>,
    /// The remoting port's TLS.
    remoting_tls: ServerTls,
    /// The task copying the brokers' users and ACLs, when ACL 2.0 is on.
    auth_sync: Option<JoinHandle<()>>,
}

/// The cluster proxy of `config`, with its ACL 2.0 running: set before either port serves, so
/// no call meets the proxy without its checks.
fn cluster_setup(config: ProxyConfig) -> Result<ClusterSetup, ServeError> {
    // The remoting port and the connections to name servers and brokers follow the `tls.*`
    // settings (the gRPC port has its own, `serve`).
    let tls = config.tls_config()?;
    // gRPC over TLS on the remoting port needs `h2` negotiated; remoting clients ask for no
    // protocol and are served as before.
    let alpn: &[&[u8]] = match config.enable_remoting_local_proxy_grpc {
        true => &[b"h2", b"http/1.1"],
        false => &[],
    };
    let remoting_tls = tls.server_tls_with_alpn("FerroMQ proxy (self-signed)", alpn)?;
    let client_tls = if tls.server_process_clients_use_tls() { Some(tls.client_tls()?) } else { None };
    let auth = ProxyAuthConfig::from_config(&config)?;
    warn_about(&auth);
    let proxy = cluster_proxy(config, client_tls, auth.inner_credentials.clone());
    let auth_sync = crate::auth::sync::start(&proxy, &auth);
    Ok(ClusterSetup { proxy, remoting_tls, auth_sync })
}

/// Cluster mode (`ferromq proxy`): gRPC served on `listener` and, when given, the remoting port
/// on `remoting`, both until `shutdown` completes. Either failing stops both.
///
/// # Errors
/// [`ServeError`].
pub async fn run_cluster(
    mut config: ProxyConfig,
    listener: TcpListener,
    remoting: Option<TcpListener>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    if let Ok(a) = listener.local_addr() {
        config.grpc_server_port = a.port();
    }
    if let Some(a) = remoting.as_ref().and_then(|l| l.local_addr().ok()) {
        config.remoting_listen_port = a.port();
    }
    let metrics = crate::metrics::prepare(&config).await.map_err(ServeError::Metrics)?;
    let ClusterSetup { proxy, remoting_tls, auth_sync } = cluster_setup(config)?;
    let rpc_observer = metrics.as_ref().map(|m| Arc::new(m.rpc.clone()) as Arc<dyn ferromq_remoting::RpcObserver>);
    let exporter = metrics.map(|m| tokio::spawn(crate::metrics::serve(m, &proxy)));
    // Two signals: on shutdown the remoting port drains first (its relayed requests use the
    // broker connections), then gRPC, whose end closes the broker connections.
    let (stop_remoting, remoting_rx) = tokio::sync::watch::channel(false);
    let (stop_grpc, grpc_rx) = tokio::sync::watch::channel(false);
    let until = |rx: &tokio::sync::watch::Receiver<bool>| {
        let mut rx = rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    // gRPC clients may use the remoting port too (`enableRemotingLocalProxyGrpc`).
    let (handoff, handed) = match remoting.is_some() && proxy.config.enable_remoting_local_proxy_grpc {
        true => {
            let (handoff, handed) = Http2Handoff::channel(HANDOFF_QUEUE);
            (Some(handoff), Some(handed))
        }
        false => (None, None),
    };
    let mut remoting = remoting.map(|l| {
        let serving = crate::remoting::Serving { tls: remoting_tls, rpc_observer, http2_handoff: handoff };
        tokio::spawn(crate::remoting::serve(proxy.clone(), l, serving, until(&remoting_rx)))
    });
    let stopping = proxy.clone();
    let grpc = serve_with_handoff(proxy, listener, handed, until(&grpc_rx));
    tokio::pin!(grpc);
    tokio::pin!(shutdown);
    let mut remoting_result = None;
    let result = tokio::select! {
        r = &mut grpc => r,
        () = &mut shutdown => {
            stopping.stop();
            stop_remoting.send_replace(true);
            if let Some(task) = remoting.take() {
                remoting_result = Some(task.await);
            }
            stop_grpc.send_replace(true);
            (&mut grpc).await
        }
        // The remoting server's end (a failed listener) stops the gRPC server too.
        r = async { remoting.as_mut().expect("guarded").await }, if remoting.is_some() => {
            remoting_result = Some(r);
            remoting = None;
            stop_grpc.send_replace(true);
            (&mut grpc).await
        }
    };
    stopping.stop();
    stop_remoting.send_replace(true);
    if remoting_result.is_none() {
        if let Some(task) = remoting {
            remoting_result = Some(task.await);
        }
    }
    for task in [auth_sync, exporter].into_iter().flatten() {
        task.abort();
        let _ = task.await;
    }
    match remoting_result {
        Some(Ok(Err(source))) => return Err(ServeError::Remoting { source }),
        Some(Err(e)) if e.is_panic() => {
            tracing::error!(error = %e, "the proxy's remoting port task panicked");
        }
        _ => {}
    }
    result
}
