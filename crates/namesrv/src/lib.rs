//! The NameServer: a stateless route registry.
//!
//! Brokers register their topics every 30 s and are dropped when silent for their timeout
//! (120 s) or when their connection closes; clients ask which brokers serve a topic. State is
//! in memory except the KV config table and updated settings, which persist as RocketMQ's
//! files do. [`run`] serves one listener until shutdown.

pub mod address_gate;
mod config;
mod kv_config;
mod processor;
mod route_table;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use ferromq_remoting::tls::TlsConfig;
use ferromq_remoting::{RemotingServer, ServerConfig};
use tokio::net::TcpListener;
use tracing::info;

pub use config::NamesrvConfig;
pub use ferromq_config::{ConfigError, RocketMqConfig};
pub use kv_config::{KvConfig, KvConfigError, NAMESPACE_ORDER_TOPIC_CONFIG};
pub use route_table::{BrokerAddrInfo, BrokerRegistration, RegisterError, RegisterResult, RouteTable};

/// Why the name server stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NamesrvError {
    /// The KV config table could not be loaded.
    #[error("cannot load the kv config")]
    KvConfig(#[from] KvConfigError),
    /// A setting is invalid.
    #[error("{0}")]
    Config(String),
    /// The transport failed.
    #[error("remoting server failed")]
    Remoting(#[from] ferromq_remoting::RemotingError),
    /// The `tls.*` settings are unusable (a bad value, an unreadable certificate).
    #[error("name server TLS: {0}")]
    Tls(#[from] ferromq_remoting::tls::TlsError),
}

/// Serves the name server on `listener` until `shutdown` completes. The `tls.*` keys of the
/// config (kept among its unknown keys) and of `tls.config.file` say which connections it takes
/// (`tls.server.mode`, Java's default `permissive`).
///
/// # Errors
/// [`NamesrvError`] when the KV table cannot be loaded, the TLS settings are unusable or the
/// listener fails.
pub async fn run(
    config: NamesrvConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), NamesrvError> {
    let kv = KvConfig::load(&config.kv_config_path)?;
    let state_config = config.clone();
    let tls = TlsConfig::load(config.unknown.iter().map(|(k, v)| (k.as_str(), v.as_str())))?
        .server_tls("FerroMQ name server (self-signed)")?;
    let server_config = ServerConfig { idle_timeout: config.idle_timeout(), tls, ..ServerConfig::default() };
    let state = Arc::new(processor::NamesrvState {
        config: RwLock::new(config),
        routes: RwLock::new(RouteTable::new()),
        kv: Mutex::new(kv),
        broker_connections: Mutex::new(HashMap::new()),
    });
    let brokers =
        ferromq_config::IpBlock::parse_list("brokerRegisterWhiteList", &state_config.broker_register_white_list)
            .map_err(NamesrvError::Config)?;
    let admins = ferromq_config::IpBlock::parse_list("adminRequestWhiteList", &state_config.admin_request_white_list)
        .map_err(NamesrvError::Config)?;
    let dispatcher = Arc::new(processor::dispatcher(state.clone()));
    let handler: Arc<dyn ferromq_remoting::RequestHandler> = if brokers.is_empty() && admins.is_empty() {
        dispatcher
    } else {
        info!(brokers = brokers.len(), admins = admins.len(), "name server white lists in force");
        Arc::new(address_gate::AddressGate::new(dispatcher, brokers, admins))
    };
    let tls = server_config.tls.to_string();
    let server = RemotingServer::new(server_config, handler);
    info!(addr = ?listener.local_addr().ok(), tls = %tls, "name server listening");
    let scan_state = state.clone();
    let scan = async move {
        loop {
            let interval_ms = scan_state.config.read().map_or(5_000, |c| c.scan_not_active_broker_interval_ms).max(100);
            tokio::time::sleep(Duration::from_millis(interval_ms)).await;
            processor::scan_not_active_brokers(&scan_state);
        }
    };
    // The scan loop never ends by itself; it stops when the server has drained.
    tokio::select! {
        result = server.serve(listener, shutdown) => result?,
        () = scan => {}
    }
    info!("name server stopped");
    Ok(())
}
