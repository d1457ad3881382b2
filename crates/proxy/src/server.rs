//! Serving the proxy on a gRPC port: TLS and plaintext on one listener, the tonic server, and
//! the proxy's background work, until shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ferromq_remoting::{ClientConfig, RemotingClient};
use tokio::net::TcpListener;
use tracing::info;

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
    let incoming = GrpcIncoming::new(listener, config.tls_server_mode, tls_config, options)?;
    let limit = config.grpc_max_inbound_message_size;
    let service = MessagingServiceServer::new(MessagingServiceImpl::new(proxy.clone()))
        .max_decoding_message_size(limit)
        .max_encoding_message_size(usize::MAX);
    info!(addr, tls_mode = %config.tls_server_mode, proxy_mode = %config.proxy_mode, "gRPC proxy listening");
    let background = tokio::spawn(proxy.clone().run_background());
    let result = tonic::transport::Server::builder()
        .max_concurrent_streams(Some(config.grpc_max_concurrent_streams))
        .http2_keepalive_interval(Some(Duration::from_secs(60)))
        .tcp_nodelay(true)
        .serve_with_incoming_shutdown(service, incoming, shutdown)
        .await
        .map_err(|source| ServeError::Transport { addr, source });
    background.abort();
    let _ = background.await;
    proxy.brokers.shutdown().await;
    result
}

/// Cluster mode: a proxy that reaches the brokers of the name servers over the network.
pub fn cluster_proxy(config: ProxyConfig) -> Arc<Proxy> {
    let port = (!config.use_endpoint_port_from_request).then_some(config.grpc_server_port);
    Proxy::new(config, Advertise::RequestEndpoints { port }, |handler| {
        Arc::new(RemotingClient::with_handler(ClientConfig::default(), handler)) as Arc<dyn Connector>
    })
}

/// Cluster mode, served on `listener` (`ferromq proxy`).
///
/// # Errors
/// [`ServeError`].
pub async fn run_cluster(
    mut config: ProxyConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    if let Ok(a) = listener.local_addr() {
        config.grpc_server_port = a.port();
    }
    serve(cluster_proxy(config), listener, shutdown).await
}
