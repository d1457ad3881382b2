//! `ferromq controller`: a node of the 5.x controller group (like Java's `mqcontroller`).

use std::path::PathBuf;

use anyhow::Context;
use ferromq_config::RocketMqConfig as _;
use ferromq_controller::ControllerConfig;
use ferromq_remoting::tls::TlsConfig;
use tracing::warn;

#[derive(Debug, clap::Args)]
pub(crate) struct ControllerArgs {
    /// Controller config file (Java properties: `controllerDLegerGroup`, `controllerDLegerPeers`,
    /// `controllerDLegerSelfId`, `controllerStorePath`, ...).
    #[arg(short = 'c', long = "configFile")]
    config_file: Option<PathBuf>,
    /// Print the effective configuration and exit.
    #[arg(short = 'p', long = "printConfigItem")]
    print_config: bool,
}

pub(crate) fn controller(args: ControllerArgs) -> anyhow::Result<()> {
    let mut config = ControllerConfig::default();
    let mut metrics = ferromq_metrics::MetricsConfig::default();
    if let Some(path) = &args.config_file {
        // `tls.*` keys are the TLS settings' (read when the node starts), `metrics*` the
        // exporter's (Java's ControllerConfig has them too).
        let metrics_keys = ferromq_metrics::MetricsConfig::KEYS;
        for key in config
            .load_file(path)?
            .into_iter()
            .filter(|k| !TlsConfig::is_tls_key(k) && !metrics_keys.contains(&k.as_str()))
        {
            warn!(key = %key, "unknown controller config key ignored");
        }
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let entries = ferromq_protocol::properties_text::parse_map(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        metrics = ferromq_metrics::MetricsConfig::from_unknown(&entries)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    if args.print_config {
        print!("{}", config.to_text());
        return Ok(());
    }
    let me = config.self_peer()?;
    crate::runtime()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&me.addr).await.with_context(|| {
            format!("cannot listen on {} (controller {} in controllerDLegerPeers)", me.addr, me.name)
        })?;
        let node = ferromq_metrics::registry::Node {
            cluster: String::new(),
            node_type: "controller",
            node_id: me.name.clone(),
            extra: Vec::new(),
        };
        let host = me.addr.rsplit_once(':').map_or(me.addr.as_str(), |(h, _)| h);
        let exporter = ferromq_metrics::exporter::prepare(&metrics, &node, host).await.map_err(anyhow::Error::msg)?;
        crate::banner(format_args!("The Controller boot success. node={}, address={}", me.name, me.addr));
        ferromq_controller::run_with_metrics(config, listener, crate::shutdown_signal(), exporter).await?;
        Ok(())
    })
}
