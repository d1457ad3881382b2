//! Running `ferromq admin ...` as a process against a test server and reading what it printed;
//! raw sends for the data the commands read.

#![allow(dead_code)] // each test file uses its own part

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ferromq_protocol::header::{GetRouteInfoRequestHeader, SendMessageResponseHeader};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{start_standalone, Standalone};

pub const BIN: &str = env!("CARGO_BIN_EXE_ferromq");

/// How long a command may keep giving the wrong answer while the server catches up (route
/// registration, index dispatch).
const CATCH_UP: Duration = Duration::from_secs(15);

/// A `ferromq standalone` process whose name server already serves a route (TBW102's).
pub fn start_server() -> Standalone {
    let server = start_standalone(BIN);
    wait_for_route(&server.namesrv, "TBW102");
    server
}

/// Runs `ferromq admin <args> -n <namesrv>`.
pub fn admin(namesrv: &str, args: &[&str]) -> Output {
    // Commands that write files to the temporary directory (updateStaticTopic's plans, as
    // Java's) write them under target/, not into the machine's /tmp.
    Command::new(BIN)
        .arg("admin")
        .args(args)
        .args(["-n", namesrv])
        .env("RUST_LOG", "warn")
        .env("TMPDIR", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .unwrap()
}

/// Runs a command that must succeed; returns its stdout.
pub fn ok(namesrv: &str, args: &[&str]) -> String {
    let out = admin(namesrv, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "admin {args:?} failed: {}\nstdout: {stdout}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// Runs a command that must fail; returns its stderr.
pub fn fails(namesrv: &str, args: &[&str]) -> String {
    let out = admin(namesrv, args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "admin {args:?} succeeded: {}", String::from_utf8_lossy(&out.stdout));
    stderr
}

/// Runs a command until it succeeds and its stdout satisfies `check`; returns the whole output.
pub fn until(namesrv: &str, args: &[&str], check: impl Fn(&str) -> bool) -> Output {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let out = admin(namesrv, args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && check(&stdout) {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "admin {args:?} never gave the expected output; last stdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn json(text: &str) -> ferromq_client::admin::JsonValue {
    ferromq_client::admin::json_from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// A current-thread runtime for the raw requests of a test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Polls the name server until it serves a route for `topic`.
pub fn wait_for_route(namesrv: &str, topic: &str) {
    runtime().block_on(async {
        let client = RemotingClient::new(ClientConfig::default());
        let deadline = Instant::now() + CATCH_UP;
        loop {
            let header = GetRouteInfoRequestHeader { topic: topic.to_owned(), accept_standard_json_only: Some(true) };
            let request = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC).with_header(&header);
            if let Ok(response) = client.invoke(namesrv, request, Duration::from_secs(1)).await {
                if response.code == response_code::SUCCESS {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "name server at {namesrv} never served a route for {topic}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        client.shutdown().await;
    });
}

/// Sends each request (SEND_MESSAGE_V2) to `broker` in order; returns each answer's offset
/// message id.
pub fn send_all(broker: &str, requests: Vec<RemotingCommand>) -> Vec<String> {
    runtime().block_on(async {
        let client = RemotingClient::new(ClientConfig::default());
        let mut ids = Vec::new();
        for request in requests {
            let response = client.invoke(broker, request, Duration::from_secs(5)).await.unwrap();
            assert_eq!(response.code, response_code::SUCCESS, "send refused: {:?}", response.remark);
            let header: SendMessageResponseHeader = response.decode_header().unwrap();
            ids.push(header.msg_id);
        }
        client.shutdown().await;
        ids
    })
}
