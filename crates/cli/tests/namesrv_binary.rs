//! The `ferromq namesrv` process: config file, `-p`, serving, and clean exit on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::free_port;

fn ferromq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferromq"))
}

#[test]
fn print_config_shows_rocketmq_keys_and_file_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("namesrv.conf");
    std::fs::write(&conf, "listenPort=19876\norderMessageEnable=true\nsomeJavaOnlyKey=1\n").unwrap();
    let out = ferromq().args(["namesrv", "-c"]).arg(&conf).arg("-p").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("listenPort=19876"), "{text}");
    assert!(text.contains("orderMessageEnable=true"), "{text}");
    assert!(text.contains("scanNotActiveBrokerInterval=5000"), "{text}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("someJavaOnlyKey"), "unknown keys are warned about: {stderr}");

    let defaults = ferromq().args(["namesrv", "-p"]).output().unwrap();
    assert!(String::from_utf8(defaults.stdout).unwrap().contains("listenPort=9876"));
}

#[test]
fn bad_config_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("namesrv.conf");
    std::fs::write(&conf, "listenPort=not-a-port\n").unwrap();
    let out = ferromq().args(["namesrv", "-c"]).arg(&conf).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("listenPort"), "{stderr}");
    let missing = ferromq().args(["namesrv", "-c", "/nonexistent/namesrv.conf"]).output().unwrap();
    assert!(!missing.status.success());
}

#[test]
fn namesrv_serves_and_exits_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let conf = dir.path().join("namesrv.conf");
    std::fs::write(
        &conf,
        format!(
            "listenPort={port}\nbindAddress=127.0.0.1\nkvConfigPath={}\n",
            dir.path().join("kvConfig.json").display()
        ),
    )
    .unwrap();
    let mut child =
        ferromq().args(["namesrv", "-c"]).arg(&conf).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains("boot success"), "{line}");

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = RemotingClient::new(ClientConfig::default());
        let addr = format!("127.0.0.1:{port}");
        let r = client
            .invoke(&addr, RemotingCommand::request(request_code::GET_NAMESRV_CONFIG), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(r.code, response_code::SUCCESS);
        assert!(String::from_utf8_lossy(&r.body).contains(&format!("listenPort={port}")));
        client.shutdown().await;
    });

    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "clean exit on SIGTERM: {status:?}");
            break;
        }
        assert!(Instant::now() < deadline, "namesrv did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}
