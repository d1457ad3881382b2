//! The NameServer: a stateless route registry.
//!
//! Brokers register their topics every 30 s and are dropped when silent for their timeout
//! (120 s) or when their connection closes; clients ask which brokers serve a topic. State is
//! in memory except the KV config table and updated settings, which persist as RocketMQ's
//! files do. [`run`] serves one listener until shutdown.

pub mod address_gate;
mod auth_gate;
mod config;
mod kv_config;
mod metrics;
mod processor;
mod route_table;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use ferromq_auth::plain::PlainAccessValidator;
use ferromq_auth::v2::{config_json, AuthMetadata, AuthService};
use ferromq_remoting::tls::TlsConfig;
use ferromq_remoting::{RemotingServer, RequestHandler, ServerConfig};
use tokio::net::TcpListener;
use tracing::{error, info, warn};

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
    let proxy_protocol_trusted =
        ferromq_config::IpBlock::parse_list("proxyProtocolTrustedAddresses", &config.proxy_protocol_trusted_addresses)
            .map_err(NamesrvError::Config)?
            .into();
    let mut server_config = ServerConfig {
        idle_timeout: config.idle_timeout(),
        tls,
        proxy_protocol_trusted,
        max_connections: config.server_max_connections.max(1),
        max_connections_per_ip: config.server_max_connections_per_address.max(1),
        ..ServerConfig::default()
    };
    let mut metrics = metrics::setup(&config, listener.local_addr().ok(), &mut server_config).await?;
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
    let (v2, plain) = access_control(&state_config)?;
    let mut handler: Arc<dyn RequestHandler> = Arc::new(processor::dispatcher(state.clone()));
    if v2.is_some() || plain.is_some() {
        handler = Arc::new(auth_gate::AuthGate::new(handler, v2.clone(), plain.clone()));
    }
    if !brokers.is_empty() || !admins.is_empty() {
        info!(brokers = brokers.len(), admins = admins.len(), "name server white lists in force");
        handler = Arc::new(address_gate::AddressGate::new(handler, brokers, admins));
    }
    let exporter = match metrics.take() {
        Some((listener, mut registry)) => {
            registry.register_collector(Box::new(metrics::NamesrvCollector { state: Arc::downgrade(&state) }));
            Some(ferromq_metrics::exporter::serve(listener, Arc::new(registry), std::future::pending::<()>()))
        }
        None => None,
    };
    let exporter = async move {
        match exporter {
            Some(serving) => serving.await,
            None => std::future::pending().await,
        }
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
    // The loops never end by themselves; they stop when the server has drained.
    tokio::select! {
        result = server.serve(listener, shutdown) => result?,
        () = scan => {}
        () = reload_access_control(v2, plain) => {}
        () = exporter => {}
    }
    info!("name server stopped");
    Ok(())
}

/// How often the ACL files are looked at for changes.
const ACL_RELOAD_INTERVAL: Duration = Duration::from_millis(500);

/// The ACL 2.0 and ACL 1.0 checks a name server runs, each when configured.
type AccessControl = (Option<Arc<AuthService>>, Option<Arc<PlainAccessValidator>>);

/// The ACL 2.0 and ACL 1.0 checks `config` asks for.
fn access_control(config: &NamesrvConfig) -> Result<AccessControl, NamesrvError> {
    let mut v2 = None;
    if config.authentication_enabled || config.authorization_enabled {
        let dir = &config.auth_config_path;
        let store =
            |e: ferromq_auth::v2::AuthError| NamesrvError::Config(format!("authConfigPath={}: {e}", dir.display()));
        std::fs::create_dir_all(dir)
            .map_err(|e| NamesrvError::Config(format!("authConfigPath={}: cannot create it: {e}", dir.display())))?;
        let metadata = AuthMetadata::open(dir).map_err(store)?;
        if let Some((user, password)) =
            config_json::init_user(&config.init_authentication_user).map_err(NamesrvError::Config)?
        {
            metadata.ensure_super_user(&user, &password).map_err(store)?;
        }
        if metadata.snapshot().users.is_empty() {
            warn!(auth_config_path = %dir.display(),
                "authenticationEnabled=true but there is no user: every registration will be refused; set initAuthenticationUser");
        }
        info!(auth_config_path = %dir.display(), "ACL 2.0: registrations and admin changes need a signing user");
        v2 = Some(Arc::new(AuthService::new(auth_gate::v2_settings(), Arc::new(metadata))));
    }
    let mut plain = None;
    if config.acl_enable {
        let (file, dir) = config.plain_acl_paths();
        let validator =
            PlainAccessValidator::load(file, dir).map_err(|e| NamesrvError::Config(format!("aclEnable=true: {e}")))?;
        info!("ACL 1.0: registrations and admin changes need an admin account or a global white address");
        plain = Some(Arc::new(validator));
    }
    Ok((v2, plain))
}

/// Rereads the users, ACLs and ACL 1.0 files when they change; a broken file leaves the
/// previous rules in force. Never returns.
async fn reload_access_control(v2: Option<Arc<AuthService>>, plain: Option<Arc<PlainAccessValidator>>) {
    if v2.is_none() && plain.is_none() {
        return std::future::pending().await;
    }
    let mut tick = tokio::time::interval(ACL_RELOAD_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (v2, plain) = (v2.clone(), plain.clone());
        // File reads off the runtime's worker threads.
        let reloaded = tokio::task::spawn_blocking(move || {
            if let Some(Err(e)) = v2.map(|s| s.metadata().reload_if_changed()) {
                error!(error = %e, "ACL 2.0 users or ACLs changed but cannot be read; the previous ones stay in force");
            }
            if let Some(Err(e)) = plain.map(|p| p.reload_if_changed()) {
                error!(error = %e, "ACL files changed but cannot be loaded; the previous rules stay in force");
            }
        })
        .await;
        if let Err(e) = reloaded {
            error!(error = %e, "ACL reload task failed");
        }
    }
}
