//! The `ferromq` binary: parses arguments, sets up logging and calls a component's `run`.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ferromq_namesrv::{NamesrvConfig, RocketMqConfig};
use tracing::warn;

/// FerroMQ: Apache RocketMQ, rebuilt in Rust.
#[derive(Debug, Parser)]
#[command(name = "ferromq", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a NameServer (like `mqnamesrv`).
    Namesrv(NamesrvArgs),
}

#[derive(Debug, clap::Args)]
struct NamesrvArgs {
    /// Name server config file (Java properties, RocketMQ's `namesrv.conf` keys).
    #[arg(short = 'c', long = "configFile")]
    config_file: Option<PathBuf>,
    /// Print the effective configuration and exit.
    #[arg(short = 'p', long = "printConfigItem")]
    print_config: bool,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging();
    match cli.command {
        Command::Namesrv(args) => namesrv(args),
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")
}

fn namesrv(args: NamesrvArgs) -> anyhow::Result<()> {
    let mut config = NamesrvConfig::default();
    if let Some(path) = &args.config_file {
        let unknown = config.load_file(path)?;
        for key in unknown {
            warn!(key = %key, "unknown name server config key ignored");
        }
    }
    if args.print_config {
        print!("{}", config.to_text());
        return Ok(());
    }
    let addr = format!("{}:{}", config.bind_address, config.listen_port);
    runtime()?.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"))?;
        println!("The Name Server boot success. serializeType=JSON, address={addr}");
        ferromq_namesrv::run(config, listener, shutdown_signal()).await?;
        Ok(())
    })
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
