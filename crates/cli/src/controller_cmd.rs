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
    if let Some(path) = &args.config_file {
        // `tls.*` keys are the TLS settings' (read when the node starts).
        for key in config.load_file(path)?.into_iter().filter(|k| !TlsConfig::is_tls_key(k)) {
            warn!(key = %key, "unknown controller config key ignored");
        }
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
        crate::banner(format_args!("The Controller boot success. node={}, address={}", me.name, me.addr));
        ferromq_controller::run(config, listener, crate::shutdown_signal()).await?;
        Ok(())
    })
}
