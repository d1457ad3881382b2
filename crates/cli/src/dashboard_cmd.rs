//! `ferromq dashboard`: the web dashboard for a cluster (what rocketmq-dashboard serves), and
//! the same dashboard inside `ferromq standalone`.

use std::sync::Arc;

use anyhow::Context;
use ferromq_dashboard::{Dashboard, DashboardConfig};

#[derive(Debug, clap::Args)]
pub(crate) struct DashboardArgs {
    /// Name server address list, `;`-separated (default: the NAMESRV_ADDR environment variable).
    #[arg(short = 'n', long = "namesrvAddr")]
    namesrv_addr: Option<String>,
    /// Port of the dashboard (rocketmq-dashboard's default).
    #[arg(long, default_value_t = ferromq_dashboard::DEFAULT_PORT)]
    port: u16,
    /// Address to listen on. The dashboard has no login: keep it on loopback, or behind a
    /// proxy that authenticates, unless every user of the network may administer the cluster.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Sign admin requests with this access key (brokers with ACL on).
    #[arg(long = "accessKey", requires = "secret_key")]
    access_key: Option<String>,
    /// The secret key that goes with --accessKey.
    #[arg(long = "secretKey", requires = "access_key")]
    secret_key: Option<String>,
    /// Read the access and secret key from this file (mqadmin's conf/tools.yml format).
    #[arg(long = "credentialsFile", conflicts_with = "access_key")]
    credentials_file: Option<std::path::PathBuf>,
    /// Connect to name servers and brokers with TLS.
    #[arg(long = "useTLS")]
    use_tls: bool,
    /// The trace topic the message trace page searches (`msgTrackTopicName`).
    #[arg(long = "traceTopic", default_value = ferromq_dashboard::DEFAULT_TRACE_TOPIC)]
    trace_topic: String,
}

pub(crate) fn dashboard(args: DashboardArgs) -> anyhow::Result<()> {
    let namesrv = match args.namesrv_addr.or_else(|| std::env::var("NAMESRV_ADDR").ok()) {
        Some(n) if !n.trim().is_empty() => n,
        _ => anyhow::bail!("no name server address: give -n host:port or set NAMESRV_ADDR"),
    };
    let credentials = crate::admin::credentials(args.access_key, args.secret_key, args.credentials_file)?;
    let tls = crate::client_tls(args.use_tls)?;
    let mut config = DashboardConfig::new(namesrv);
    config.client = config.client.with_credentials(credentials).with_tls(tls);
    config.trace_topic = args.trace_topic;
    let addr = ferromq_metrics::exporter::listen_address(&args.bind, &args.bind, args.port);
    crate::runtime()?.block_on(async move {
        let listener = ferromq_dashboard::bind(&addr).await.map_err(anyhow::Error::msg)?;
        let local = listener.local_addr().context("dashboard address")?;
        crate::banner(format_args!(
            "FerroMQ dashboard: {} (name servers {})",
            ferromq_dashboard::url(local),
            config.namesrv_addr
        ));
        let dashboard = Arc::new(Dashboard::new(config));
        ferromq_dashboard::serve(listener, dashboard, crate::shutdown_signal()).await;
        Ok(())
    })
}

/// Serves the dashboard of a standalone on `listener`, talking to its own name server, until
/// `stop` says so.
pub(crate) async fn serve_in_standalone(
    listener: tokio::net::TcpListener,
    namesrv_addr: String,
    client: ferromq_remoting::ClientConfig,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut config = DashboardConfig::new(namesrv_addr);
    config.client = client;
    let dashboard = Arc::new(Dashboard::new(config));
    ferromq_dashboard::serve(listener, dashboard, async move {
        let _ = stop.wait_for(|s| *s).await;
    })
    .await;
}
