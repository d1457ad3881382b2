//! Child processes of the `ferromq` binary, for process-level tests (crash tests, the CLI).

use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A child process that is killed (SIGKILL) and reaped when dropped, pass or fail. The child
/// is public so a crash test can kill it at a moment of its choosing.
#[derive(Debug)]
pub struct ChildProcess(pub Child);

impl Drop for ChildProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes `config` to `conf` and starts `bin args... -c conf`. Its output is discarded (and
/// `RUST_LOG` is `warn` unless set) unless `FERROMQ_TEST_LOGS` is set, which shows it.
///
/// # Panics
/// When the file cannot be written or the process not started: a test cannot go on.
pub fn spawn_with_config(bin: &str, args: &[&str], conf: &Path, config: &str) -> ChildProcess {
    std::fs::File::create(conf)
        .and_then(|mut f| f.write_all(config.as_bytes()))
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", conf.display()));
    let logs = std::env::var_os("FERROMQ_TEST_LOGS").is_some();
    let output = || if logs { Stdio::inherit() } else { Stdio::null() };
    let mut command = Command::new(bin);
    command.args(args).arg("-c").arg(conf).stdout(output()).stderr(output());
    if std::env::var_os("RUST_LOG").is_none() {
        command.env("RUST_LOG", "warn");
    }
    ChildProcess(command.spawn().unwrap_or_else(|e| panic!("cannot start {bin}: {e}")))
}

/// A `ferromq standalone` (name server and broker) on free ports, with a data directory of its
/// own; killed and reaped when dropped.
#[derive(Debug)]
pub struct Standalone {
    /// The process.
    pub child: ChildProcess,
    /// `127.0.0.1:<port>` of its name server.
    pub namesrv: String,
    /// `127.0.0.1:<port>` of its broker.
    pub broker: String,
    /// `127.0.0.1:<port>` of its gRPC proxy (RocketMQ 5.x clients).
    pub grpc: String,
    /// `127.0.0.1:<port>` of its Prometheus metrics (`/metrics`).
    pub metrics: String,
    /// `127.0.0.1:<port>` of its web dashboard.
    pub dashboard: String,
    /// Its data directory (the process output goes to `standalone.log` in it).
    pub data: tempfile::TempDir,
}

/// Starts `bin standalone` on free ports and waits until its name server accepts
/// connections. Another process can take a chosen port before the server binds it: such a
/// start is retried on fresh ports (three tries). Any other early exit panics with the
/// server's output, so a failure says why. `FERROMQ_TEST_LOGS` shows the output instead.
///
/// # Panics
/// When the server does not come up.
pub fn start_standalone(bin: &str) -> Standalone {
    start_standalone_with_env(bin, &[])
}

/// [`start_standalone`] with extra environment variables for the server.
///
/// # Panics
/// When the server does not come up.
pub fn start_standalone_with_env(bin: &str, env: &[(&str, &str)]) -> Standalone {
    start_standalone_with(bin, env, None, None)
}

/// [`start_standalone`] with `proxy_json` (`rmq-proxy.json` keys) for its gRPC proxy.
///
/// # Panics
/// When the server does not come up.
pub fn start_standalone_with_proxy_conf(bin: &str, proxy_json: &str) -> Standalone {
    start_standalone_with(bin, &[], None, Some(proxy_json))
}

/// [`start_standalone`] with `broker_conf` (broker.conf text) applied over the standalone
/// defaults.
///
/// # Panics
/// When the server does not come up.
pub fn start_standalone_with_conf(bin: &str, broker_conf: &str) -> Standalone {
    start_standalone_with(bin, &[], Some(broker_conf), None)
}

fn start_standalone_with(
    bin: &str,
    env: &[(&str, &str)],
    broker_conf: Option<&str>,
    proxy_json: Option<&str>,
) -> Standalone {
    const TRIES: usize = 3;
    let logs = std::env::var_os("FERROMQ_TEST_LOGS").is_some();
    for attempt in 1..=TRIES {
        let data = tempfile::tempdir().expect("temporary directory");
        let log_path = data.path().join("standalone.log");
        let (ns_port, broker_port, grpc_port) = (crate::free_port(), crate::free_broker_port(), crate::free_port());
        let metrics_port = crate::free_port();
        let dashboard_port = crate::free_port();
        let log = std::fs::File::create(&log_path).expect("log file");
        let mut command = Command::new(bin);
        command
            .args(["standalone", "--bind", "127.0.0.1", "--data-dir"])
            .arg(data.path().join("data"))
            .args(["--namesrv-port", &ns_port.to_string(), "--broker-port", &broker_port.to_string()])
            .args(["--grpc-port", &grpc_port.to_string()])
            .args(["--metrics-port", &metrics_port.to_string()])
            .args(["--dashboard-port", &dashboard_port.to_string()])
            .envs(env.iter().copied())
            .stdout(Stdio::null());
        if logs {
            command.stderr(Stdio::inherit());
        } else {
            command.stderr(log);
        }
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "warn");
        }
        if let Some(conf) = broker_conf {
            let path = data.path().join("broker.conf");
            std::fs::write(&path, conf).expect("broker.conf");
            command.arg("-c").arg(path);
        }
        if let Some(json) = proxy_json {
            let path = data.path().join("rmq-proxy.json");
            std::fs::write(&path, json).expect("rmq-proxy.json");
            command.arg("--pc").arg(path);
        }
        let mut child = ChildProcess(command.spawn().unwrap_or_else(|e| panic!("cannot start {bin}: {e}")));
        let namesrv = format!("127.0.0.1:{ns_port}");
        let broker = format!("127.0.0.1:{broker_port}");
        let deadline = std::time::Instant::now() + crate::TIMEOUT * 2;
        loop {
            // Both listening: the broker binds after the name server, and a port of its taken
            // meanwhile ends the process, which the retry below then sees.
            if std::net::TcpStream::connect(&namesrv).is_ok() && std::net::TcpStream::connect(&broker).is_ok() {
                return Standalone {
                    child,
                    namesrv,
                    broker,
                    grpc: format!("127.0.0.1:{grpc_port}"),
                    metrics: format!("127.0.0.1:{metrics_port}"),
                    dashboard: format!("127.0.0.1:{dashboard_port}"),
                    data,
                };
            }
            if let Ok(Some(status)) = child.0.try_wait() {
                let output = std::fs::read_to_string(&log_path).unwrap_or_default();
                // "Address already in use (os error 98)" on Linux.
                if attempt < TRIES && output.to_ascii_lowercase().contains("in use") {
                    break; // a port was taken meanwhile: fresh ports
                }
                panic!("standalone exited ({status}) before serving:\n{output}");
            }
            assert!(std::time::Instant::now() < deadline, "standalone did not listen on {namesrv} in time");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    unreachable!("the last try returns or panics")
}
