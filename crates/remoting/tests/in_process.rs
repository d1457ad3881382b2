//! The in-process pair: requests and server-initiated calls through memory, each end's peer
//! address, closes in both directions, shutdown drain, idleness and the frame limit, with the
//! same handlers a TCP server would use.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ferromq_protocol::{request_code, response_code, RemotingCommand, SerializeType};
use ferromq_remoting::{
    in_process_pair, Connection, Dispatcher, InProcessClient, InProcessServer, RemotingError, ServerConfig,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

const ECHO: i32 = 9001;
const SLOW: i32 = 9002;
const CALL_BACK: i32 = 9004;
const WHO_AM_I: i32 = 9006;
const HANG_UP: i32 = 9007;

const T: Duration = Duration::from_secs(5);

fn client_addr() -> SocketAddr {
    "10.1.2.3:45678".parse().unwrap()
}

fn server_addr() -> SocketAddr {
    "10.9.8.7:10911".parse().unwrap()
}

/// The pair's client end, the task running both ends, and the server's shutdown switch.
struct Pair {
    conn: Connection,
    task: JoinHandle<()>,
    shutdown: watch::Sender<bool>,
}

impl Pair {
    fn start(config: ServerConfig, server_side: Dispatcher, client_side: Dispatcher) -> Pair {
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (conn, fut) = in_process_pair(
            InProcessServer { handler: Arc::new(server_side), config, shutdown: shutdown_rx, addr: server_addr() },
            InProcessClient { handler: Arc::new(client_side), addr: client_addr() },
        );
        Pair { conn, task: tokio::spawn(fut), shutdown }
    }

    /// Waits for the future running both ends to finish.
    async fn ended(self) {
        tokio::time::timeout(T, self.task).await.expect("both ends close").unwrap();
    }
}

fn echo_dispatcher() -> Dispatcher {
    let mut d = Dispatcher::new();
    d.register_sync(ECHO, |_c, req| {
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, req.remark.clone()).with_body(req.body.clone()))
    });
    d.register(SLOW, |_c, req| async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Some(RemotingCommand::response_to(&req, response_code::SUCCESS, Some("slow".to_owned())))
    });
    d.register_sync(WHO_AM_I, |conn, req| {
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, Some(conn.remote_addr().to_string())))
    });
    d.register_sync(HANG_UP, |conn, req| {
        conn.close();
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, None))
    });
    d
}

/// A dispatcher that reports each connection it sees close, by the peer address.
fn reporting_closes(mut d: Dispatcher) -> (Dispatcher, mpsc::UnboundedReceiver<SocketAddr>) {
    let (tx, rx) = mpsc::unbounded_channel();
    d.on_close(move |c| {
        let _ = tx.send(c.remote_addr());
    });
    (d, rx)
}

fn echo(text: &str) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(ECHO).with_body(text.to_owned().into_bytes());
    cmd.remark = Some(text.to_owned());
    cmd
}

async fn next_close(rx: &mut mpsc::UnboundedReceiver<SocketAddr>) -> SocketAddr {
    tokio::time::timeout(T, rx.recv()).await.expect("on_connection_closed runs").unwrap()
}

#[tokio::test]
async fn concurrent_requests_through_the_pair_reach_the_server_handler_in_both_serializations() {
    for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
        let config = ServerConfig { serialize_type, ..ServerConfig::default() };
        let pair = Pair::start(config, echo_dispatcher(), Dispatcher::new());
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..200 {
            let conn = pair.conn.clone();
            calls.spawn(async move {
                // Bodies larger than the pipe's buffer too, so writers wait for the reader.
                let body = format!("m{i}-").repeat(if i % 50 == 0 { 300_000 } else { 1 });
                let mut req = RemotingCommand::request(ECHO).with_body(body.clone().into_bytes());
                req.remark = Some(format!("m{i}"));
                let r = conn.invoke(req, T).await.unwrap();
                assert_eq!(r.body, body.into_bytes());
                assert_eq!(r.remark.as_deref(), Some(format!("m{i}").as_str()));
            });
        }
        while let Some(done) = calls.join_next().await {
            done.unwrap();
        }
        let r = pair.conn.invoke(RemotingCommand::request(4242), T).await.unwrap();
        assert_eq!(r.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
        pair.conn.close();
        pair.ended().await;
    }
}

#[tokio::test]
async fn the_server_end_calls_back_the_client_handler() {
    let mut server_side = Dispatcher::new();
    server_side.register(CALL_BACK, |conn: Connection, req| async move {
        let answer = conn.invoke(RemotingCommand::request(request_code::CHECK_TRANSACTION_STATE), T).await;
        let remark = match answer {
            Ok(a) => String::from_utf8_lossy(&a.body).into_owned(),
            Err(e) => e.to_string(),
        };
        Some(RemotingCommand::response_to(&req, response_code::SUCCESS, Some(remark)))
    });
    let mut client_side = Dispatcher::new();
    client_side.register_sync(request_code::CHECK_TRANSACTION_STATE, |conn, req| {
        let body = format!("checked from {}", conn.remote_addr());
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(body.into_bytes()))
    });
    let pair = Pair::start(ServerConfig::default(), server_side, client_side);
    let r = pair.conn.invoke(RemotingCommand::request(CALL_BACK), T).await.unwrap();
    assert_eq!(r.remark, Some(format!("checked from {}", server_addr())));
    pair.conn.close();
    pair.ended().await;
}

#[tokio::test]
async fn each_end_sees_the_other_ends_address() {
    let pair = Pair::start(ServerConfig::default(), echo_dispatcher(), Dispatcher::new());
    assert_eq!(pair.conn.remote_addr(), server_addr());
    let r = pair.conn.invoke(RemotingCommand::request(WHO_AM_I), T).await.unwrap();
    assert_eq!(r.remark, Some(client_addr().to_string()), "the server end's remote_addr is the client's");
    pair.conn.close();
    pair.ended().await;
}

#[tokio::test]
async fn closing_the_client_end_closes_the_server_end_and_both_handlers_hear_of_it() {
    let (server_side, mut server_closes) = reporting_closes(echo_dispatcher());
    let (client_side, mut client_closes) = reporting_closes(Dispatcher::new());
    let pair = Pair::start(ServerConfig::default(), server_side, client_side);
    assert_eq!(pair.conn.invoke(echo("hi"), T).await.unwrap().body, &b"hi"[..]);
    pair.conn.close();
    assert_eq!(next_close(&mut server_closes).await, client_addr());
    assert_eq!(next_close(&mut client_closes).await, server_addr());
    assert!(pair.conn.is_closed());
    let err = pair.conn.invoke(echo("after"), T).await.unwrap_err();
    assert!(matches!(err, RemotingError::ConnectionClosed { .. }), "{err}");
    pair.ended().await;
}

#[tokio::test]
async fn closing_the_server_end_closes_the_client_end_and_both_handlers_hear_of_it() {
    let (server_side, mut server_closes) = reporting_closes(echo_dispatcher());
    let (client_side, mut client_closes) = reporting_closes(Dispatcher::new());
    let pair = Pair::start(ServerConfig::default(), server_side, client_side);
    // The server end answers, then closes: the answer is flushed before the stream ends.
    let r = pair.conn.invoke(RemotingCommand::request(HANG_UP), T).await.unwrap();
    assert_eq!(r.code, response_code::SUCCESS);
    tokio::time::timeout(T, pair.conn.closed()).await.expect("client end closes");
    assert_eq!(next_close(&mut server_closes).await, client_addr());
    assert_eq!(next_close(&mut client_closes).await, server_addr());
    pair.ended().await;
}

#[tokio::test]
async fn server_shutdown_answers_in_flight_requests_then_closes_both_ends() {
    let (client_side, mut client_closes) = reporting_closes(Dispatcher::new());
    let pair = Pair::start(ServerConfig::default(), echo_dispatcher(), client_side);
    let pending = {
        let conn = pair.conn.clone();
        tokio::spawn(async move { conn.invoke(RemotingCommand::request(SLOW), T).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    pair.shutdown.send_replace(true);
    let r = pending.await.unwrap().expect("in-flight request answered during shutdown");
    assert_eq!(r.remark.as_deref(), Some("slow"));
    assert_eq!(next_close(&mut client_closes).await, server_addr());
    pair.ended().await;
}

#[tokio::test]
async fn an_idle_pair_is_closed() {
    let config = ServerConfig { idle_timeout: Duration::from_millis(200), ..ServerConfig::default() };
    let (server_side, mut server_closes) = reporting_closes(echo_dispatcher());
    let pair = Pair::start(config, server_side, Dispatcher::new());
    assert_eq!(pair.conn.invoke(echo("hi"), T).await.unwrap().body, &b"hi"[..]);
    assert_eq!(next_close(&mut server_closes).await, client_addr());
    tokio::time::timeout(T, pair.conn.closed()).await.expect("client end closes");
    pair.ended().await;
}

#[tokio::test]
async fn a_frame_over_the_server_limit_closes_the_pair_as_on_tcp() {
    let config = ServerConfig { max_frame_bytes: 4096, ..ServerConfig::default() };
    let (server_side, mut server_closes) = reporting_closes(echo_dispatcher());
    let pair = Pair::start(config, server_side, Dispatcher::new());
    assert_eq!(pair.conn.invoke(echo("small"), T).await.unwrap().body, &b"small"[..]);
    let big = RemotingCommand::request(ECHO).with_body(vec![0u8; 8192]);
    let err = pair.conn.invoke(big, T).await.unwrap_err();
    assert!(matches!(err, RemotingError::ConnectionClosed { .. }), "{err}");
    assert_eq!(next_close(&mut server_closes).await, client_addr());
    pair.ended().await;
}

#[tokio::test]
async fn a_pair_whose_future_is_dropped_is_closed() {
    let (conn, fut) = in_process_pair(
        InProcessServer {
            handler: Arc::new(echo_dispatcher()),
            config: ServerConfig::default(),
            shutdown: watch::channel(false).1,
            addr: server_addr(),
        },
        InProcessClient { handler: Arc::new(Dispatcher::new()), addr: client_addr() },
    );
    drop(fut);
    assert!(conn.is_closed());
    tokio::time::timeout(T, conn.closed()).await.expect("closed() returns at once");
    let err = conn.invoke(echo("x"), T).await.unwrap_err();
    assert!(matches!(err, RemotingError::ConnectionClosed { .. }), "{err}");
}
