//! The gRPC proxy in both of Java's modes: `ferromq proxy` (cluster mode, in front of any
//! brokers) and local mode inside `ferromq broker --enable-proxy` and `ferromq standalone`,
//! where requests reach the broker's processors through an in-process connection.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use ferromq_broker::LocalAccess;
use ferromq_config::RocketMqConfig;
use ferromq_proxy::brokers::Connector;
use ferromq_proxy::{Advertise, Proxy, ProxyConfig};
use ferromq_remoting::tls::TlsConfig;
use ferromq_remoting::{ClientConfig, Connection, RemotingClient, RemotingError, RequestHandler};
use tracing::warn;

#[derive(Debug, clap::Args)]
pub struct ProxyArgs {
    /// Proxy config file (JSON, `rmq-proxy.json` keys).
    #[arg(short = 'c', long = "pc", alias = "proxyConfigPath")]
    pub config_file: Option<PathBuf>,
    /// Name server address list, `;`-separated (overrides `namesrvAddr`).
    #[arg(short = 'n', long = "namesrvAddr")]
    pub namesrv_addr: Option<String>,
    /// Print the effective configuration and exit.
    #[arg(short = 'p', long = "printConfigItem")]
    pub print_config: bool,
}

/// Reads `rmq-proxy.json` over the defaults.
pub fn load_config(path: Option<&PathBuf>) -> anyhow::Result<ProxyConfig> {
    let mut config = ProxyConfig::default();
    if let Some(path) = path {
        let metrics_keys = ferromq_metrics::MetricsConfig::KEYS;
        for key in config
            .load_json_file(path)?
            .into_iter()
            .filter(|k| !TlsConfig::is_tls_key(k) && !metrics_keys.contains(&k.as_str()))
        {
            warn!(key = %key, file = %path.display(), "unknown proxy config key ignored");
        }
    }
    Ok(config)
}

/// `ferromq proxy`: cluster mode.
pub fn proxy(args: ProxyArgs) -> anyhow::Result<()> {
    let mut config = load_config(args.config_file.as_ref())?;
    if let Some(addr) = args.namesrv_addr {
        config.namesrv_addr = addr;
    }
    if args.print_config {
        print!("{}", config.to_text());
        return Ok(());
    }
    if config.namesrv_addr.trim().is_empty() {
        anyhow::bail!("no name server: pass -n host:9876 or set namesrvAddr in the proxy config (or NAMESRV_ADDR)");
    }
    config.proxy_mode = "cluster".to_owned();
    // Bad ACL 2.0 keys stop the start before any port is taken.
    ferromq_proxy::auth::ProxyAuthConfig::from_config(&config)?;
    let bind = config.bind_address.trim().to_owned();
    let addr = format!("{bind}:{}", config.grpc_server_port);
    let remoting_addr = (config.remoting_listen_port != 0).then(|| format!("{bind}:{}", config.remoting_listen_port));
    crate::runtime()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&addr).await.with_context(|| {
            format!("cannot listen on {addr} (grpcServerPort); set another port in the proxy config")
        })?;
        let remoting = match &remoting_addr {
            Some(a) => Some(tokio::net::TcpListener::bind(a).await.with_context(|| {
                format!(
                    "cannot listen on {a} (remotingListenPort, for remoting clients); set another port in the \
                     proxy config, or 0 to serve gRPC only"
                )
            })?),
            None => None,
        };
        let remoting_text = match &remoting_addr {
            Some(a) => format!(", remoting on {a}"),
            None => String::new(),
        };
        crate::banner(format_args!(
            "The proxy boot success: gRPC on {addr}{remoting_text}, name server {}",
            config.namesrv_addr
        ));
        ferromq_proxy::run_cluster(config, listener, remoting, crate::shutdown_signal()).await?;
        Ok(())
    })
}

/// Local mode's connections: the local broker in process, any other broker over the network.
struct LocalConnector {
    access: LocalAccess,
    handler: Arc<dyn RequestHandler>,
    client_addr: SocketAddr,
    local: tokio::sync::Mutex<Option<Connection>>,
    remote: RemotingClient,
}

impl Connector for LocalConnector {
    fn connect<'a>(
        &'a self,
        addr: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Connection, RemotingError>> + Send + 'a>> {
        Box::pin(async move {
            if addr != self.access.broker_addr() {
                return self.remote.connection(addr).await;
            }
            let mut local = self.local.lock().await;
            if let Some(c) = local.as_ref().filter(|c| !c.is_closed()) {
                return Ok(c.clone());
            }
            let c = self.access.connect(self.handler.clone(), self.client_addr);
            *local = Some(c.clone());
            Ok(c)
        })
    }

    fn local_service(&self, addr: &str) -> Option<ferromq_broker::LocalCall> {
        if addr != self.access.broker_addr() {
            return None;
        }
        self.access.service()
    }
}

/// A local-mode proxy over `access`. `advertise` says where routes send clients.
pub fn local_proxy(
    mut config: ProxyConfig,
    access: LocalAccess,
    namesrv_addr: &str,
    advertise: Advertise,
) -> Arc<Proxy> {
    config.proxy_mode = "local".to_owned();
    config.namesrv_addr = namesrv_addr.to_owned();
    config.rocketmq_cluster_name = access.cluster_name().to_owned();
    let client_addr = SocketAddr::from(([127, 0, 0, 1], config.grpc_server_port));
    let auth = access.auth();
    // Name servers and other brokers are reached as the broker reaches them (TLS or not).
    let client_tls = access.client_tls();
    let remote = ClientConfig::default().with_tls(client_tls);
    let proxy = Proxy::new(config, advertise, remote.clone(), move |handler| {
        Arc::new(LocalConnector {
            access,
            remote: RemotingClient::with_handler(remote, handler.clone()),
            handler,
            client_addr,
            local: tokio::sync::Mutex::new(None),
        }) as Arc<dyn Connector>
    });
    if let Some(auth) = auth {
        // The broker's users and ACLs decide for the gRPC clients too.
        let _ = proxy.auth.set(auth);
    }
    proxy
}
