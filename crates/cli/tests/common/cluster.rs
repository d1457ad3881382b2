//! Servers as real processes for the cluster tests: `ferromq namesrv`, broker masters that can
//! be SIGKILLed and started again on their store, and the process helpers under them.

#![allow(dead_code)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferromq_testkit::{free_broker_port, free_port, ChildProcess};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");

/// Writes `text` to `conf` and starts `ferromq args.. -c conf`, its output appended to `log`
/// (shown instead with `FERROMQ_TEST_LOGS`; `RUST_LOG` is `warn` unless set). Waits until
/// `port` accepts connections: `Err` with the log's tail if the process exits first.
pub fn spawn_listening(args: &[&str], conf: &Path, text: &str, log: &Path, port: u16) -> Result<ChildProcess, String> {
    spawn_listening_in(None, args, conf, text, log, &format!("127.0.0.1:{port}"))
}

/// As [`spawn_listening`], in the network namespace `netns` when given (`ip netns exec`, which
/// execs the server: the child is the server itself), waiting until `addr` accepts connections
/// as the calling thread reaches it.
pub fn spawn_listening_in(
    netns: Option<&str>,
    args: &[&str],
    conf: &Path,
    text: &str,
    log: &Path,
    addr: &str,
) -> Result<ChildProcess, String> {
    std::fs::write(conf, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", conf.display()));
    let mut command = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, BIN]);
            c
        }
        None => Command::new(BIN),
    };
    command.args(args).arg("-c").arg(conf).stdin(Stdio::null());
    if std::env::var_os("FERROMQ_TEST_LOGS").is_some() {
        command.stdout(Stdio::inherit()).stderr(Stdio::inherit());
    } else {
        let file = || std::fs::OpenOptions::new().create(true).append(true).open(log).expect("log file");
        command.stdout(file()).stderr(file());
    }
    if std::env::var_os("RUST_LOG").is_none() {
        command.env("RUST_LOG", "warn");
    }
    let mut child = ChildProcess(command.spawn().unwrap_or_else(|e| panic!("cannot start {BIN}: {e}")));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if std::net::TcpStream::connect(addr).is_ok() {
            return Ok(child);
        }
        if let Ok(Some(status)) = child.0.try_wait() {
            return Err(format!("ferromq {args:?} exited ({status}) before listening on {addr}:\n{}", tail(log, 40)));
        }
        if Instant::now() > deadline {
            return Err(format!("ferromq {args:?} did not listen on {addr} within 20 s:\n{}", tail(log, 40)));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `ferromq standalone` (no dashboard, no proxy, on 127.0.0.1) with its data under
/// `dir/data` and `conf` as its broker.conf, and waits until the broker port listens.
pub fn start_standalone(dir: &Path, namesrv: u16, broker: u16, conf: &str) -> ChildProcess {
    let data = dir.join("data");
    let (metrics, namesrv, broker_port) = (free_port().to_string(), namesrv.to_string(), broker.to_string());
    let args = [
        "standalone",
        "--no-dashboard",
        "--no-proxy",
        "--bind",
        "127.0.0.1",
        "--data-dir",
        data.to_str().expect("a UTF-8 temp dir"),
        "--metrics-port",
        &metrics,
        "--namesrv-port",
        &namesrv,
        "--broker-port",
        &broker_port,
    ];
    spawn_listening(&args, &dir.join("broker.conf"), conf, &dir.join("server.log"), broker)
        .unwrap_or_else(|e| panic!("{e}"))
}

pub fn tail(path: &Path, lines: usize) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("({}: {e})", path.display()),
    }
}

/// Starts a server on a port from `pick`, trying fresh ports when one was taken meanwhile
/// ("Address already in use"). Returns the process and its port.
pub fn start_on_free_port(
    mut pick: impl FnMut() -> u16,
    mut start: impl FnMut(u16) -> Result<ChildProcess, String>,
) -> (ChildProcess, u16) {
    for attempt in 1..=3 {
        let port = pick();
        match start(port) {
            Ok(child) => return (child, port),
            Err(e) if attempt < 3 && e.to_ascii_lowercase().contains("in use") => continue,
            Err(e) => panic!("{e}"),
        }
    }
    unreachable!("the last attempt returns or panics")
}

/// One broker group's master, as a `ferromq broker -c conf` process that can be killed and
/// started again on the same store.
pub struct Broker {
    pub name: &'static str,
    pub port: u16,
    pub dir: PathBuf,
    pub namesrv: String,
    /// More `broker.conf` lines.
    pub extra_conf: String,
    pub process: Option<ChildProcess>,
}

impl Broker {
    pub fn conf_text(&self) -> String {
        format!(
            "brokerClusterName=DefaultCluster\nbrokerName={}\nbrokerId=0\nbrokerRole=ASYNC_MASTER\n\
             listenPort={}\nbrokerIP1=127.0.0.1\nnamesrvAddr={}\nstorePathRootDir={}\n\
             mapedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\n{}",
            self.name,
            self.port,
            self.namesrv,
            self.dir.join(self.name).display(),
            self.extra_conf
        )
    }

    pub fn log(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.name))
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn try_start(&mut self) -> Result<(), String> {
        assert!(self.process.is_none(), "{} runs already", self.name);
        let conf = self.dir.join(format!("{}.conf", self.name));
        self.process = Some(spawn_listening(&["broker"], &conf, &self.conf_text(), &self.log(), self.port)?);
        Ok(())
    }

    /// Starts the broker on its port (and store) again.
    pub fn start(&mut self) {
        if let Err(e) = self.try_start() {
            panic!("{} did not start again: {e}", self.name);
        }
    }

    /// SIGKILL, and reaps the process.
    pub fn kill(&mut self) {
        let mut p = self.process.take().expect("the broker runs");
        p.0.kill().expect("SIGKILL");
        p.0.wait().expect("reaped");
    }

    pub fn running(&mut self) -> bool {
        self.process.as_mut().is_some_and(|p| matches!(p.0.try_wait(), Ok(None)))
    }
}

/// A name server on a free port in `dir`: the process and its port.
pub fn start_namesrv(dir: &Path) -> (ChildProcess, u16) {
    start_on_free_port(free_port, |port| {
        let text = format!(
            "listenPort={port}\nkvConfigPath={}\nconfigStorePath={}\n",
            dir.join("kvConfig.json").display(),
            dir.join("namesrv.properties").display()
        );
        spawn_listening(&["namesrv"], &dir.join("namesrv.conf"), &text, &dir.join("namesrv.log"), port)
    })
}

/// A free port at least 4 away from every port in `taken` (a broker takes listenPort,
/// listenPort + 1 for HA and listenPort - 2 for its VIP channel).
pub fn port_away_from(taken: &[u16], pick: impl Fn() -> u16) -> u16 {
    loop {
        let p = pick();
        if taken.iter().all(|t| t.abs_diff(p) > 3) {
            return p;
        }
    }
}

/// Starts one master per name in `names` (DefaultCluster, stores under `dir`), on free ports
/// away from `taken`, which gains their ports.
pub fn start_brokers<const N: usize>(
    dir: &Path,
    namesrv: &str,
    names: [&'static str; N],
    extra_conf: &str,
    taken: &mut Vec<u16>,
) -> [Broker; N] {
    let mut brokers = names.map(|name| Broker {
        name,
        port: 0,
        dir: dir.to_owned(),
        namesrv: namesrv.to_owned(),
        extra_conf: extra_conf.to_owned(),
        process: None,
    });
    for b in &mut brokers {
        for attempt in 1..=3 {
            b.port = port_away_from(taken, free_broker_port);
            match b.try_start() {
                Ok(()) => break,
                Err(e) if attempt < 3 && e.to_ascii_lowercase().contains("in use") => continue,
                Err(e) => panic!("{} did not start: {e}", b.name),
            }
        }
        taken.push(b.port);
    }
    brokers
}
