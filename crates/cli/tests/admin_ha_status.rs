//! `ferromq admin haStatus` against a real master and slave (`ferromq namesrv` and two
//! `ferromq broker` processes): the master's table lists the connected slave, the slave
//! names its master, `-c` asks every master of the cluster, `--json` keeps Java's field
//! names and `-i` prints again until stopped.

use ferromq_testkit::{free_port, spawn_with_config, ChildProcess};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
const T: Duration = Duration::from_secs(30);

fn spawn(args: &[&str], conf: &Path, text: &str) -> ChildProcess {
    spawn_with_config(BIN, args, conf, text)
}

fn admin(ns: &str, args: &[&str]) -> Output {
    Command::new(BIN).arg("admin").args(args).args(["-n", ns]).env("RUST_LOG", "warn").output().unwrap()
}

/// Runs `admin args` until it succeeds with output that `done` accepts; returns that output.
fn until(ns: &str, args: &[&str], done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + T;
    loop {
        let out = admin(ns, args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && done(&stdout) {
            return stdout;
        }
        assert!(
            Instant::now() < deadline,
            "admin {args:?} never gave the expected output; last stdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The value after `#key\t` in mqadmin's `#Key\tvalue` lines.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| l.strip_prefix(&format!("#{key}\t")))
}

#[test]
fn ha_status_shows_the_master_with_its_slave_and_the_slave_with_its_master() {
    let dir = tempfile::tempdir().unwrap();
    let (ns_port, master_port, master_ha, slave_port) = (free_port(), free_port(), free_port(), free_port());
    let ns = format!("127.0.0.1:{ns_port}");
    let master = format!("127.0.0.1:{master_port}");
    let slave = format!("127.0.0.1:{slave_port}");
    let _ns = spawn(&["namesrv"], &dir.path().join("ns.conf"), &format!("listenPort={ns_port}\n"));
    let conf = |port: u16, id: u32, role: &str, store: &str, extra: &str| {
        format!(
            "brokerClusterName=HaStatusCluster\nbrokerName=broker-hs\nbrokerId={id}\nbrokerRole={role}\n\
             listenPort={port}\nbrokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\nnamesrvAddr={ns}\nstorePathRootDir={}\n\
             mapedFileSizeCommitLog=1048576\n{extra}",
            dir.path().join(store).display()
        )
    };
    let _master = spawn(
        &["broker"],
        &dir.path().join("master.conf"),
        &conf(master_port, 0, "ASYNC_MASTER", "m", &format!("haListenPort={master_ha}\n")),
    );
    let _slave = spawn(
        &["broker"],
        &dir.path().join("slave.conf"),
        &conf(slave_port, 1, "SLAVE", "s", &format!("haMasterAddress=127.0.0.1:{master_ha}\n")),
    );

    // A message, so the slave has something to catch up to.
    until(&ns, &["sendMessage", "-t", "TBW102", "-p", "ha status"], |_| true);

    let text = until(&ns, &["haStatus", "-b", &master], |t| field(t, "SlaveNum") == Some("1"));
    assert_eq!(field(&text, "MasterAddr"), Some(master.as_str()), "{text}");
    assert!(field(&text, "MasterCommitLogMaxOffset").is_some_and(|o| o.parse::<i64>().unwrap() > 0), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("#SlaveAddr")).expect("the slave table header");
    assert!(lines[header].contains("#SlaveAckOffset") && lines[header].contains("#TransferFromWhere"), "{text}");
    let row: Vec<&str> = lines[header + 1].split_whitespace().collect();
    assert!(row[0].starts_with("127.0.0.1:"), "the slave's address: {text}");
    assert!(row[4] == "OK" || (row[4] == "Fall" && row[5] == "Behind"), "a status: {text}");

    let text = until(&ns, &["haStatus", "-b", &slave], |t| {
        field(t, "CommitLogMaxOffset").is_some_and(|o| o.parse::<i64>().unwrap_or(0) > 0)
    });
    assert_eq!(field(&text, "MasterAddr"), Some(format!("127.0.0.1:{master_ha}").as_str()), "{text}");
    for key in ["TransferSpeed(KB/s)", "LastReadTime", "LastWriteTime", "MasterFlushOffset"] {
        assert!(field(&text, key).is_some(), "{key} in {text}");
    }

    // -c asks the cluster's masters only.
    let text = until(&ns, &["haStatus", "-c", "HaStatusCluster"], |t| field(t, "SlaveNum") == Some("1"));
    assert_eq!(field(&text, "MasterAddr"), Some(master.as_str()), "{text}");
    assert!(field(&text, "CommitLogMaxOffset").is_none(), "no slave section: {text}");

    let json = until(&ns, &["haStatus", "-b", &master, "--json"], |t| t.contains("haConnectionInfo"));
    let value: ferromq_client::admin::JsonValue = ferromq_client::admin::json_from_str(&json).unwrap();
    let info = &value[master.as_str()];
    assert_eq!(info["master"], true, "{json}");
    assert_eq!(info["haConnectionInfo"].as_array().map(Vec::len), Some(1), "{json}");
    assert!(info["haConnectionInfo"][0]["slaveAckOffset"].is_i64(), "{json}");

    // -i prints a round, waits, prints again: two rounds, then stop it.
    let mut child = Command::new(BIN)
        .args(["admin", "haStatus", "-b", &slave, "-i", "1", "-n", &ns])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut rounds = 0;
    let mut line = String::new();
    while rounds < 2 {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "haStatus -i ended on its own after {rounds} rounds");
        rounds += usize::from(line.starts_with("#MasterFlushOffset"));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn ha_status_without_a_target_fails_with_a_hint() {
    let out = admin("127.0.0.1:1", &["haStatus"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("-b") && stderr.contains("-c"), "{stderr}");
}
