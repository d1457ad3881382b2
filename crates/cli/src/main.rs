//! The `ferromq` binary: parses arguments, sets up logging and calls a component's `run`.

mod admin;
mod bench;
mod bench_topics;
mod controller_cmd;
mod dashboard_cmd;
mod log_sink;
mod proxy_cmd;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Parser, Subcommand};
use ferromq_broker::BrokerSettings;
use ferromq_namesrv::{NamesrvConfig, RocketMqConfig};
use ferromq_remoting::tls::TlsConfig;
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
    /// Run a broker (like `mqbroker`).
    Broker(BrokerArgs),
    /// Run a NameServer, a broker and the gRPC proxy in one process with working defaults.
    Standalone(StandaloneArgs),
    /// Run the gRPC proxy for RocketMQ 5.x clients in front of brokers (like `mqproxy`).
    Proxy(proxy_cmd::ProxyArgs),
    /// Run a node of the controller group that elects broker masters (like `mqcontroller`).
    Controller(controller_cmd::ControllerArgs),
    /// Serve the web dashboard for a cluster (like rocketmq-dashboard).
    Dashboard(dashboard_cmd::DashboardArgs),
    /// Administration commands with mqadmin's names and flags.
    Admin(admin::AdminArgs),
    /// Load generator for any RocketMQ broker.
    Bench(bench::BenchArgs),
}

#[derive(Debug, clap::Args)]
struct BrokerArgs {
    /// Broker config file (Java properties, RocketMQ's `broker.conf` keys).
    #[arg(short = 'c', long = "configFile")]
    config_file: Option<PathBuf>,
    /// Name server address list, `;`-separated (overrides `namesrvAddr`).
    #[arg(short = 'n', long = "namesrvAddr")]
    namesrv_addr: Option<String>,
    /// Print the effective configuration and exit.
    #[arg(short = 'p', long = "printConfigItem")]
    print_config: bool,
    /// Also serve RocketMQ 5.x gRPC clients from this process (proxy local mode).
    #[arg(long = "enable-proxy")]
    enable_proxy: bool,
    /// Proxy config file (JSON, `rmq-proxy.json` keys), with --enable-proxy.
    #[arg(long = "pc", alias = "proxyConfigPath")]
    proxy_config: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct StandaloneArgs {
    /// Where the store and metadata live.
    #[arg(long, default_value = "./ferromq-data")]
    data_dir: PathBuf,
    /// NameServer port.
    #[arg(long, default_value_t = 9876)]
    namesrv_port: u16,
    /// Broker port.
    #[arg(long, default_value_t = 10911)]
    broker_port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    bind: String,
    /// Extra broker config file applied over the standalone defaults.
    #[arg(short = 'c', long = "configFile")]
    config_file: Option<PathBuf>,
    /// gRPC port for RocketMQ 5.x clients (TLS and plaintext on one port).
    #[arg(long, default_value_t = 8081)]
    grpc_port: u16,
    /// Do not serve RocketMQ 5.x gRPC clients.
    #[arg(long)]
    no_proxy: bool,
    /// Proxy config file (JSON, `rmq-proxy.json` keys).
    #[arg(long = "pc", alias = "proxyConfigPath")]
    proxy_config: Option<PathBuf>,
    /// Port of the Prometheus metrics (`/metrics`; default 5557, `metricsPromExporterPort`).
    /// `metricsExporterType=DISABLE` in the config file turns them off.
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Port of the web dashboard (rocketmq-dashboard's default, 8082).
    #[arg(long, default_value_t = ferromq_dashboard::DEFAULT_PORT)]
    dashboard_port: u16,
    /// Do not serve the web dashboard.
    #[arg(long)]
    no_dashboard: bool,
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

/// mqadmin's two-letter short options (`-bn`) as the long options clap knows (clap reads
/// `-bn` as `-b -n`). Only under `admin`.
fn mqadmin_short_options(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let args: Vec<std::ffi::OsString> = args.collect();
    if args.get(1).and_then(|a| a.to_str()) != Some("admin") {
        return args;
    }
    args.into_iter()
        .map(|a| match a.to_str() {
            Some("-bn") => "--brokerName".into(),
            Some("-qn") => "--totalQueueNum".into(),
            Some("-mf") => "--mapFile".into(),
            Some("-fr") => "--forceReplace".into(),
            _ => a,
        })
        .collect()
}

fn main() {
    let cli = Cli::parse_from(mqadmin_short_options(std::env::args_os()));
    // Tools print their results on stdout; their logs stay quiet unless asked for.
    let quiet = matches!(cli.command, Command::Admin(_) | Command::Bench(_));
    init_logging(if quiet { "warn" } else { "info" });
    let result = match cli.command {
        Command::Namesrv(args) => namesrv(args),
        Command::Broker(args) => broker(args),
        Command::Standalone(args) => standalone(args),
        Command::Proxy(args) => proxy_cmd::proxy(args),
        Command::Controller(args) => controller_cmd::controller(args),
        Command::Dashboard(args) => dashboard_cmd::dashboard(args),
        Command::Admin(args) => admin::run(args),
        Command::Bench(args) => bench::run(args),
    };
    log_sink::drain(std::time::Duration::from_secs(1));
    let (dropped, failed) = log_sink::lost_lines();
    if dropped + failed > 0 {
        let _ = writeln!(
            std::io::stderr(),
            "{dropped} log lines dropped (queue full), {failed} not written (stderr failed)"
        );
    }
    if let Err(e) = result {
        // Not `eprintln!`, which panics when stderr cannot be written (a full disk).
        let _ = writeln!(std::io::stderr(), "Error: {e:#}");
        std::process::exit(1);
    }
}

fn init_logging(default_level: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(log_sink::LogSink::stderr())
        .init();
}

/// Prints a start-up line on stdout. A failed write (stdout on a full disk) is not fatal.
fn banner(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout();
    let _ = out.write_fmt(line).and_then(|()| out.write_all(b"\n")).and_then(|()| out.flush());
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")
}

fn namesrv(args: NamesrvArgs) -> anyhow::Result<()> {
    let mut config = NamesrvConfig::default();
    let mut controller = None;
    if let Some(path) = &args.config_file {
        let mut unknown = config.load_file(path)?;
        if config.enable_controller_in_namesrv {
            // The controller's keys live in the same file: unknown means unknown to both.
            let mut c = ferromq_controller::ControllerConfig::default();
            let not_controller = c.load_file(path)?;
            unknown.retain(|k| not_controller.contains(k));
            // One `configStorePath` key serves both: the controller's updates must not
            // overwrite the name server's stored settings.
            if c.config_store_path == config.config_store_path {
                c.config_store_path = c.config_store_path.with_file_name("controller.properties");
            }
            controller = Some(c);
        }
        // `tls.*` and `metrics*` keys are read when the server starts.
        let metrics_keys = ferromq_metrics::MetricsConfig::KEYS;
        for key in unknown.into_iter().filter(|k| !TlsConfig::is_tls_key(k) && !metrics_keys.contains(&k.as_str())) {
            warn!(key = %key, "unknown name server config key ignored");
        }
    } else if config.enable_controller_in_namesrv {
        controller = Some(ferromq_controller::ControllerConfig::default());
    }
    if args.print_config {
        print!("{}", config.to_text());
        if let Some(c) = &controller {
            print!("{}", c.to_text());
        }
        return Ok(());
    }
    let addr = format!("{}:{}", config.bind_address, config.listen_port);
    runtime()?.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"))?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            shutdown_signal().await;
            let _ = stop.send(true);
        });
        let until_stopped = || {
            let mut stopped = stopped.clone();
            async move {
                let _ = stopped.wait_for(|s| *s).await;
            }
        };
        let controller = match controller {
            Some(c) => {
                let me = c.self_peer()?;
                let l = tokio::net::TcpListener::bind(&me.addr).await.with_context(|| {
                    format!("cannot listen on {} (controller {} in controllerDLegerPeers)", me.addr, me.name)
                })?;
                banner(format_args!(
                    "The Controller in the Name Server boot success. node={}, address={}",
                    me.name, me.addr
                ));
                Some(tokio::spawn(ferromq_controller::run(c, l, until_stopped())))
            }
            None => None,
        };
        banner(format_args!("The Name Server boot success. serializeType=JSON, address={addr}"));
        let served = ferromq_namesrv::run(config, listener, until_stopped()).await;
        if let Some(c) = controller {
            if served.is_err() {
                // The name server failed on its own: no signal will stop the controller.
                c.abort();
            } else {
                c.await.context("the controller task failed")??;
            }
        }
        served?;
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

/// Reads a broker.conf over `settings`; UPDATE_BROKER_CONFIG then writes back to that file
/// unless it names another `brokerConfigPath` (as Java's `-c`).
fn load_broker_conf(settings: &mut BrokerSettings, path: &Path) -> anyhow::Result<()> {
    // `tls.*` keys are the TLS settings' (read when the broker starts).
    for key in settings.load_file(path)?.into_iter().filter(|k| !TlsConfig::is_tls_key(k)) {
        warn!(key = %key, "unknown broker config key ignored");
    }
    if settings.broker.broker_config_path.is_empty() {
        settings.broker.broker_config_path = path.display().to_string();
    }
    Ok(())
}

fn broker_settings(config_file: Option<&PathBuf>) -> anyhow::Result<BrokerSettings> {
    let mut settings = BrokerSettings::default();
    if let Some(path) = config_file {
        load_broker_conf(&mut settings, path)?;
    }
    Ok(settings)
}

fn broker(args: BrokerArgs) -> anyhow::Result<()> {
    let mut settings = broker_settings(args.config_file.as_ref())?;
    if let Some(addr) = args.namesrv_addr {
        settings.broker.namesrv_addr = addr;
    }
    if args.print_config {
        print!("{}", settings.to_text());
        return Ok(());
    }
    let addr = format!("{}:{}", settings.broker.bind_address, settings.broker.listen_port);
    let proxy_config = if args.enable_proxy { Some(proxy_cmd::load_config(args.proxy_config.as_ref())?) } else { None };
    runtime()?.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"))?;
        banner(format_args!(
            "The broker[{}, {}] boot success. serializeType=JSON and name server is {}",
            settings.broker.broker_name,
            settings.broker.broker_addr(),
            settings.broker.namesrv_addr
        ));
        let Some(proxy_config) = proxy_config else {
            ferromq_broker::run(settings, listener, shutdown_signal()).await?;
            return Ok(());
        };
        let grpc_addr = format!("{}:{}", settings.broker.bind_address, proxy_config.grpc_server_port);
        let grpc_listener = tokio::net::TcpListener::bind(&grpc_addr)
            .await
            .with_context(|| format!("cannot listen on {grpc_addr} (grpcServerPort of the proxy config)"))?;
        let namesrv = settings.broker.namesrv_addr.clone();
        let port = proxy_config.grpc_server_port;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let signal = tokio::spawn(async move {
            shutdown_signal().await;
            let _ = stop_tx.send(true);
        });
        let outcome = run_with_proxy(settings, listener, grpc_listener, stop_rx, move |access| {
            proxy_cmd::local_proxy(proxy_config, access, &namesrv, ferromq_proxy::Advertise::BrokerHost { port })
        })
        .await;
        signal.abort();
        outcome
    })
}

/// Runs a broker with a local-mode proxy on `grpc_listener` until `stop_rx` says stop; either
/// failing stops both. The proxy stops first, so its last requests still reach the broker.
async fn run_with_proxy(
    settings: BrokerSettings,
    listener: tokio::net::TcpListener,
    grpc_listener: tokio::net::TcpListener,
    mut stop_rx: tokio::sync::watch::Receiver<bool>,
    make_proxy: impl FnOnce(ferromq_broker::LocalAccess) -> std::sync::Arc<ferromq_proxy::Proxy>,
) -> anyhow::Result<()> {
    let (access_tx, access_rx) = tokio::sync::oneshot::channel();
    let (stop_broker_tx, mut stop_broker_rx) = tokio::sync::watch::channel(false);
    let mut broker = tokio::spawn(ferromq_broker::run_with_local_access(
        settings,
        listener,
        async move {
            let _ = stop_broker_rx.wait_for(|s| *s).await;
        },
        access_tx,
    ));
    let access = tokio::select! {
        a = access_rx => a.ok(),
        ended = &mut broker => {
            ended.context("broker task")?.context("the broker stopped")?;
            anyhow::bail!("the broker stopped before serving");
        }
    };
    let Some(access) = access else {
        broker.await.context("broker task")??;
        anyhow::bail!("the broker stopped before serving");
    };
    let proxy = make_proxy(access);
    let mut proxy_stop = stop_rx.clone();
    let stop_seen = stop_rx.clone();
    let mut grpc = tokio::spawn(ferromq_proxy::serve(proxy, grpc_listener, async move {
        let _ = proxy_stop.wait_for(|s| *s).await;
    }));
    // The proxy's own stop future watches the same signal, so on SIGTERM both branches can be
    // ready at once: `biased` polls the stop first, and a proxy that ended because of the stop
    // is never reported as a failure.
    let outcome = tokio::select! {
        biased;
        _ = stop_rx.wait_for(|s| *s) => Ok(()),
        ended = &mut grpc => match ended {
            Ok(Ok(())) if *stop_seen.borrow() => Ok(()),
            Ok(Ok(())) => Err(anyhow::anyhow!("the gRPC proxy stopped unexpectedly")),
            Ok(Err(e)) => Err(anyhow::Error::new(e).context("the gRPC proxy stopped")),
            Err(e) => Err(anyhow::Error::new(e).context("gRPC proxy task")),
        },
        ended = &mut broker => {
            grpc.abort();
            ended.context("broker task")?.context("the broker stopped")?;
            anyhow::bail!("the broker stopped unexpectedly");
        }
    };
    if !grpc.is_finished() {
        let _ = grpc.await;
    }
    let _ = stop_broker_tx.send(true);
    broker.await.context("broker task")??;
    outcome
}

/// The TLS of a tool's connections when `use_tls` (Java: `-Dtls.enable=true`): Java's client
/// settings (any server certificate trusted, none presented) unless the `tls.client.*` keys of
/// `/etc/rocketmq/tls.properties` (Java's default `tls.config.file`) say otherwise.
fn client_tls(use_tls: bool) -> anyhow::Result<Option<ferromq_remoting::tls::ClientTls>> {
    if !use_tls {
        return Ok(None);
    }
    let settings = TlsConfig::load(std::iter::empty()).context("TLS client settings")?;
    Ok(Some(settings.client_tls().context("TLS client settings")?))
}

/// What a `tls.server.mode` means for clients, for the start-up banner.
fn tls_mode_summary(mode: ferromq_remoting::tls::TlsMode) -> &'static str {
    use ferromq_remoting::tls::TlsMode;
    match mode {
        TlsMode::Permissive => "TLS and plaintext clients on the same ports",
        TlsMode::Enforcing => "TLS clients only: useTLS=true, or `ferromq admin --useTLS`",
        TlsMode::Disabled => "plaintext clients only",
    }
}

/// Standalone's name server checks registrations and admin changes as the broker checks
/// requests: ACL 2.0 with the broker's users (its `<storePathRootDir>/config`, reread when
/// they change), ACL 1.0 with the same `plain_acl.yml`. The broker signs its registrations with
/// `innerClientAuthenticationCredentials`, defaulting to `initAuthenticationUser`; without
/// either the name server stays open, as Java's always is, and says so.
fn share_access_control(settings: &mut BrokerSettings, namesrv: &mut NamesrvConfig) -> anyhow::Result<()> {
    let b = &mut settings.broker;
    let acl_2 = b.authentication_enabled || b.authorization_enabled;
    if !acl_2 && !b.acl_enable {
        return Ok(());
    }
    if b.inner_client_authentication_credentials.trim().is_empty() {
        if let Some((user, password)) =
            ferromq_auth::v2::config_json::init_user(&b.init_authentication_user).map_err(anyhow::Error::msg)?
        {
            b.inner_client_authentication_credentials =
                serde_json::json!({ "accessKey": user, "secretKey": password }).to_string();
        }
    }
    if b.inner_client_authentication_credentials.trim().is_empty() {
        tracing::warn!(
            "the name server does not check registrations: set innerClientAuthenticationCredentials (or initAuthenticationUser) so the broker can sign them"
        );
        return Ok(());
    }
    if acl_2 {
        namesrv.authentication_enabled = true;
        namesrv.auth_config_path = settings.store.store_path_root_dir.join("config");
    }
    if b.acl_enable {
        namesrv.acl_enable = true;
        namesrv.rocketmq_home = b.rocketmq_home.clone();
    }
    Ok(())
}

fn standalone(args: StandaloneArgs) -> anyhow::Result<()> {
    let data = args.data_dir;
    std::fs::create_dir_all(&data).with_context(|| format!("cannot create {}", data.display()))?;
    let namesrv_config = NamesrvConfig {
        listen_port: args.namesrv_port,
        bind_address: args.bind.clone(),
        kv_config_path: data.join("namesrv").join("kvConfig.json"),
        config_store_path: data.join("namesrv").join("namesrv.properties"),
        ..NamesrvConfig::default()
    };
    let mut settings = BrokerSettings::default();
    settings.broker.listen_port = args.broker_port;
    settings.broker.namesrv_addr = format!("127.0.0.1:{}", args.namesrv_port);
    settings.store.store_path_root_dir = data.join("store");
    // Working defaults for a laptop: SQL92 subscriptions are served, message traces have
    // their topic, and Prometheus can scrape the broker.
    settings.broker.enable_property_filter = true;
    // Clients with message trace on find the trace topic.
    settings.broker.trace_topic_enable = true;
    settings.metrics.metrics_exporter_type = ferromq_metrics::ExporterType::Prom;
    settings.metrics.metrics_prom_exporter_host = args.bind.clone();
    if let Some(path) = &args.config_file {
        load_broker_conf(&mut settings, path)?;
    }
    if let Some(port) = args.metrics_port {
        settings.metrics.metrics_prom_exporter_port = port;
    }
    // One process, one set of TLS settings (Java's system properties are per process): the
    // name server takes the `tls.*` keys of the broker config too.
    let mut namesrv_config = namesrv_config;
    for (key, value) in settings.broker.unknown.iter().filter(|(k, _)| TlsConfig::is_tls_key(k)) {
        namesrv_config.unknown.insert(key.clone(), value.clone());
    }
    share_access_control(&mut settings, &mut namesrv_config)?;
    // The dashboard signs its admin requests as the broker signs its own when ACL is on.
    let dashboard_credentials =
        ferromq_auth::v2::config_json::inner_credentials(&settings.broker.inner_client_authentication_credentials)
            .map_err(anyhow::Error::msg)?
            .map(|(ak, sk)| ferromq_protocol::signature::SessionCredentials::new(ak, sk));
    let tls = settings.tls_config().context("TLS settings (tls.* keys, tls.config.file)")?;
    // Certificate files are checked before anything listens (the servers load them again).
    if tls.server_mode.accepts_tls() && !tls.test_mode_enable {
        tls.server_tls("check").context("TLS server settings")?;
    }
    if settings.broker.use_tls || tls.server_process_clients_use_tls() {
        tls.client_tls().context("TLS client settings")?;
    }
    let tls_mode = tls.server_mode;
    let metrics_url = (settings.metrics.metrics_exporter_type == ferromq_metrics::ExporterType::Prom).then(|| {
        let host = match settings.metrics.metrics_prom_exporter_host.as_str() {
            "" | "0.0.0.0" | "::" => "127.0.0.1",
            host => host,
        };
        format!(
            "http://{}/metrics",
            ferromq_metrics::exporter::listen_address(host, host, settings.metrics.metrics_prom_exporter_port)
        )
    });
    let dashboard_client = if args.no_dashboard {
        None
    } else {
        // The dashboard talks to this process's servers as the broker does (TLS when they
        // take TLS only, or tls.enable).
        let client_tls = if tls.server_process_clients_use_tls() {
            Some(tls.client_tls().context("TLS client settings")?)
        } else {
            None
        };
        Some(
            ferromq_remoting::ClientConfig::default()
                .with_zone_from_env()
                .with_credentials(dashboard_credentials)
                .with_tls(client_tls),
        )
    };
    let dashboard_addr = ferromq_metrics::exporter::listen_address(&args.bind, &args.bind, args.dashboard_port);
    let namesrv_addr = format!("{}:{}", args.bind, args.namesrv_port);
    let broker_addr = format!("{}:{}", args.bind, args.broker_port);
    let grpc_addr = format!("{}:{}", args.bind, args.grpc_port);
    let proxy_config = if args.no_proxy {
        None
    } else {
        let mut c = proxy_cmd::load_config(args.proxy_config.as_ref())?;
        c.grpc_server_port = args.grpc_port;
        Some(c)
    };
    runtime()?.block_on(async move {
        let broker_listener = tokio::net::TcpListener::bind(&broker_addr)
            .await
            .with_context(|| format!("cannot listen on {broker_addr}"))?;
        let grpc_listener = match &proxy_config {
            Some(_) => Some(tokio::net::TcpListener::bind(&grpc_addr).await.with_context(|| {
                format!("cannot listen on {grpc_addr} for gRPC clients; pass --grpc-port N or --no-proxy")
            })?),
            None => None,
        };
        let dashboard_listener = match &dashboard_client {
            Some(_) => Some(
                ferromq_dashboard::bind(&dashboard_addr)
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}; or start without it: --no-dashboard"))?,
            ),
            None => None,
        };
        // Last: a client (or a test) that finds the name server listening finds every other
        // port of this process listening too.
        let ns_listener = tokio::net::TcpListener::bind(&namesrv_addr)
            .await
            .with_context(|| format!("cannot listen on {namesrv_addr}"))?;
        let (stop_ns_tx, stop_ns_rx) = tokio::sync::watch::channel(false);
        let (stop_broker_tx, stop_broker_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        banner(format_args!(
            "FerroMQ standalone: name server on {namesrv_addr}, broker on {broker_addr}, data in {}",
            data.display()
        ));
        banner(format_args!(
            "Send a first message with any RocketMQ client: namesrvAddr=127.0.0.1:{} topic=TopicTest (auto-created)",
            args.namesrv_port
        ));
        banner(format_args!("Remoting TLS: tls.server.mode={tls_mode} ({})", tls_mode_summary(tls_mode)));
        if let Some(url) = &metrics_url {
            banner(format_args!("Prometheus metrics: {url}"));
        }
        let (stop_dashboard_tx, stop_dashboard_rx) = tokio::sync::watch::channel(false);
        let dashboard = match (dashboard_listener, dashboard_client) {
            (Some(listener), Some(client)) => {
                if let Ok(local) = listener.local_addr() {
                    banner(format_args!("Dashboard: {}", ferromq_dashboard::url(local)));
                }
                let namesrv = format!("127.0.0.1:{}", args.namesrv_port);
                Some(tokio::spawn(dashboard_cmd::serve_in_standalone(listener, namesrv, client, stop_dashboard_rx)))
            }
            _ => None,
        };
        let mut namesrv = tokio::spawn(ferromq_namesrv::run(namesrv_config, ns_listener, stopped(stop_ns_rx)));
        if proxy_config.is_some() {
            banner(format_args!(
                "RocketMQ 5.x clients: endpoints=127.0.0.1:{} (gRPC, TLS or plaintext)",
                grpc_listener.as_ref().and_then(|l| l.local_addr().ok()).map_or(args.grpc_port, |a| a.port())
            ));
        }
        let namesrv_for_proxy = format!("127.0.0.1:{}", args.namesrv_port);
        let mut broker = match (proxy_config, grpc_listener) {
            (Some(mut proxy_config), Some(grpc_listener)) => {
                let port = grpc_listener.local_addr().map_or(args.grpc_port, |a| a.port());
                proxy_config.grpc_server_port = port;
                tokio::spawn(run_with_proxy(settings, broker_listener, grpc_listener, stop_broker_rx, move |access| {
                    // One node: clients reach everything at the address they used.
                    proxy_cmd::local_proxy(
                        proxy_config,
                        access,
                        &namesrv_for_proxy,
                        ferromq_proxy::Advertise::RequestEndpoints { port: Some(port) },
                    )
                }))
            }
            _ => tokio::spawn(async move {
                ferromq_broker::run(settings, broker_listener, stopped(stop_broker_rx))
                    .await
                    .map_err(anyhow::Error::from)
            }),
        };
        // Either half failing (the store locked by another process, a port taken) ends the
        // whole process at once with its error: a name server without its broker would look
        // up and serve nothing.
        tokio::select! {
            () = shutdown_signal() => {}
            ended = &mut broker => {
                let _ = stop_ns_tx.send(true);
                let _ = namesrv.await;
                ended.context("broker task")?.context("the broker stopped")?;
                anyhow::bail!("the broker stopped unexpectedly");
            }
            ended = &mut namesrv => {
                let _ = stop_broker_tx.send(true);
                let _ = broker.await;
                ended.context("name server task")?.context("the name server stopped")?;
                anyhow::bail!("the name server stopped unexpectedly");
            }
        }
        let _ = stop_dashboard_tx.send(true);
        if let Some(dashboard) = dashboard {
            let _ = dashboard.await;
        }
        // The broker stops first so it can still unregister from the name server.
        let _ = stop_broker_tx.send(true);
        broker.await.context("broker task")??;
        let _ = stop_ns_tx.send(true);
        namesrv.await.context("name server task")??;
        Ok(())
    })
}
