//! The transport over real loopback TCP: correlation, timeouts, oneway, server-initiated
//! requests, reconnects, idle close and graceful drain.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferromq_protocol::{request_code, response_code, RemotingCommand, SerializeType};
use ferromq_remoting::{
    ClientConfig, Connection, Dispatcher, RemotingClient, RemotingError, RemotingServer, ServerConfig,
};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

const ECHO: i32 = 9001;
const SLOW: i32 = 9002;
const NOTE: i32 = 9003;
const CALL_BACK: i32 = 9004;

struct Server {
    addr: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), RemotingError>>,
}

impl Server {
    async fn start(config: ServerConfig, dispatcher: Dispatcher) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = RemotingServer::new(config, Arc::new(dispatcher));
        let task = tokio::spawn(async move {
            server
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await
        });
        Server { addr, stop: Some(stop), task }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(15), &mut self.task).await.expect("server drains").unwrap().unwrap();
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
    d
}

fn echo(text: &str) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(ECHO).with_body(text.to_owned().into_bytes());
    cmd.remark = Some(text.to_owned());
    cmd
}

#[tokio::test]
async fn concurrent_requests_are_correlated_by_opaque_in_both_serializations() {
    for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
        let config = ServerConfig { serialize_type, ..ServerConfig::default() };
        let server = Server::start(config.clone(), echo_dispatcher()).await;
        let client = Arc::new(RemotingClient::new(ClientConfig { connection: config, ..ClientConfig::default() }));
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..200 {
            let client = client.clone();
            let addr = server.addr.clone();
            calls.spawn(async move {
                let r = client.invoke(&addr, echo(&format!("m{i}")), Duration::from_secs(5)).await.unwrap();
                assert_eq!(r.body, format!("m{i}").into_bytes());
                assert_eq!(r.remark.as_deref(), Some(format!("m{i}").as_str()));
            });
        }
        while let Some(done) = calls.join_next().await {
            done.unwrap();
        }
        client.shutdown().await;
        server.stop().await;
    }
}

#[tokio::test]
async fn a_slow_request_does_not_block_the_next_one_on_the_same_connection() {
    let server = Server::start(ServerConfig::default(), echo_dispatcher()).await;
    let client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let slow = {
        let (client, addr) = (client.clone(), server.addr.clone());
        tokio::spawn(async move { client.invoke(&addr, RemotingCommand::request(SLOW), Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let fast = client.invoke(&server.addr, echo("fast"), Duration::from_secs(5)).await.unwrap();
    assert_eq!(fast.body, &b"fast"[..]);
    assert!(!slow.is_finished(), "the fast answer overtook the slow one");
    assert_eq!(slow.await.unwrap().unwrap().remark.as_deref(), Some("slow"));
    client.shutdown().await;
    server.stop().await;
}

#[tokio::test]
async fn unanswered_request_times_out_and_unknown_code_is_not_supported() {
    let server = Server::start(ServerConfig::default(), echo_dispatcher()).await;
    let client = RemotingClient::new(ClientConfig::default());
    let err = client.invoke(&server.addr, RemotingCommand::request(SLOW), Duration::from_millis(50)).await.unwrap_err();
    assert!(matches!(err, RemotingError::Timeout { .. }), "{err}");
    let r = client.invoke(&server.addr, RemotingCommand::request(4242), Duration::from_secs(5)).await.unwrap();
    assert_eq!(r.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    // The connection is still good after both.
    assert_eq!(client.invoke(&server.addr, echo("x"), Duration::from_secs(5)).await.unwrap().body, &b"x"[..]);
    client.shutdown().await;
    server.stop().await;
}

#[tokio::test]
async fn oneway_requests_are_handled_and_never_answered() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut d = echo_dispatcher();
    d.register_sync(NOTE, move |_c, req| {
        let _ = tx.send(req.body.clone());
        // Even if a handler returns a response, a oneway request gets none.
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, None))
    });
    let server = Server::start(ServerConfig::default(), d).await;
    let client = RemotingClient::new(ClientConfig::default());
    client.invoke_oneway(&server.addr, RemotingCommand::request(NOTE).with_body(&b"n1"[..])).await.unwrap();
    assert_eq!(tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap(), &b"n1"[..]);
    // The next request's answer is its own, not a stray answer to the oneway.
    assert_eq!(client.invoke(&server.addr, echo("after"), Duration::from_secs(5)).await.unwrap().body, &b"after"[..]);
    client.shutdown().await;
    server.stop().await;
}

#[tokio::test]
async fn server_calls_back_the_client_on_its_connection() {
    // The server answers CALL_BACK by first asking the client a question, as a broker asks a
    // consumer for its running info.
    let mut d = Dispatcher::new();
    d.register(CALL_BACK, |conn: Connection, req| async move {
        let answer = conn
            .invoke(RemotingCommand::request(request_code::GET_CONSUMER_RUNNING_INFO), Duration::from_secs(5))
            .await;
        let remark = match answer {
            Ok(a) => String::from_utf8_lossy(&a.body).into_owned(),
            Err(e) => e.to_string(),
        };
        Some(RemotingCommand::response_to(&req, response_code::SUCCESS, Some(remark)))
    });
    let server = Server::start(ServerConfig::default(), d).await;
    let mut client_side = Dispatcher::new();
    client_side.register_sync(request_code::GET_CONSUMER_RUNNING_INFO, |_c, req| {
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(&b"running"[..]))
    });
    let client = RemotingClient::with_handler(ClientConfig::default(), Arc::new(client_side));
    let r = client.invoke(&server.addr, RemotingCommand::request(CALL_BACK), Duration::from_secs(5)).await.unwrap();
    assert_eq!(r.remark.as_deref(), Some("running"));
    client.shutdown().await;
    server.stop().await;
}

#[tokio::test]
async fn client_reconnects_after_the_server_closes_its_connection() {
    let closes = Arc::new(AtomicUsize::new(0));
    let seen: Arc<Mutex<Vec<Connection>>> = Arc::default();
    let mut d = echo_dispatcher();
    let seen2 = seen.clone();
    d.register_sync(NOTE, move |conn, req| {
        seen2.lock().unwrap().push(conn.clone());
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, None))
    });
    let closes2 = closes.clone();
    d.on_close(move |_| {
        closes2.fetch_add(1, Ordering::SeqCst);
    });
    let server = Server::start(ServerConfig::default(), d).await;
    let client = RemotingClient::new(ClientConfig::default());
    client.invoke(&server.addr, RemotingCommand::request(NOTE), Duration::from_secs(5)).await.unwrap();
    let conn = seen.lock().unwrap()[0].clone();
    conn.close();
    tokio::time::timeout(Duration::from_secs(5), conn.closed()).await.unwrap();
    // The client notices and connects again on the next call.
    let mut ok = false;
    for _ in 0..100 {
        if client.invoke(&server.addr, echo("again"), Duration::from_secs(5)).await.is_ok() {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(ok, "client reconnected");
    assert!(closes.load(Ordering::SeqCst) >= 1);
    client.shutdown().await;
    server.stop().await;
}

#[tokio::test]
async fn idle_connections_are_closed() {
    let config = ServerConfig { idle_timeout: Duration::from_millis(200), ..ServerConfig::default() };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut d = echo_dispatcher();
    d.on_close(move |c| {
        let _ = tx.send(c.id());
    });
    let server = Server::start(config, d).await;
    let client = RemotingClient::new(ClientConfig::default());
    client.invoke(&server.addr, echo("hi"), Duration::from_secs(5)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("idle connection closed").unwrap();
    client.shutdown().await;
    server.stop().await;
}

#[tokio::test]
async fn shutdown_drains_in_flight_requests() {
    let server = Server::start(ServerConfig::default(), echo_dispatcher()).await;
    let client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let pending = {
        let (client, addr) = (client.clone(), server.addr.clone());
        tokio::spawn(async move { client.invoke(&addr, RemotingCommand::request(SLOW), Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.stop().await;
    let r = pending.await.unwrap().expect("in-flight request answered during shutdown");
    assert_eq!(r.remark.as_deref(), Some("slow"));
    client.shutdown().await;
}

#[tokio::test]
async fn oversized_requests_fail_fast_on_the_client() {
    let server = Server::start(ServerConfig::default(), echo_dispatcher()).await;
    let client = RemotingClient::new(ClientConfig::default());
    let big = RemotingCommand::request(ECHO).with_body(vec![0u8; 17 * 1024 * 1024]);
    let err = client.invoke(&server.addr, big, Duration::from_secs(5)).await.unwrap_err();
    assert!(matches!(err, RemotingError::Encode { .. }), "{err}");
    assert_eq!(client.invoke(&server.addr, echo("small"), Duration::from_secs(5)).await.unwrap().body, &b"small"[..]);
    client.shutdown().await;
    server.stop().await;
}

#[tokio::test]
async fn connecting_to_a_closed_port_is_an_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let client = RemotingClient::new(ClientConfig::default());
    let err = client.invoke(&addr, echo("x"), Duration::from_secs(5)).await.unwrap_err();
    assert!(matches!(err, RemotingError::Connect { .. }), "{err}");
}

#[tokio::test]
async fn a_panicking_handler_gets_system_error_and_the_connection_keeps_serving() {
    const PANIC: i32 = 9005;
    let mut dispatcher = echo_dispatcher();
    dispatcher.register(PANIC, |_c, _req| async move {
        tokio::task::yield_now().await;
        panic!("handler bug");
    });
    let server = Server::start(ServerConfig::default(), dispatcher).await;
    let client = RemotingClient::new(ClientConfig::default());
    let r = client.invoke(&server.addr, RemotingCommand::request(PANIC), Duration::from_secs(5)).await.unwrap();
    assert_eq!(r.code, response_code::SYSTEM_ERROR);
    assert!(r.remark.as_deref().unwrap_or_default().contains("handler bug"), "{:?}", r.remark);
    assert_eq!(client.invoke(&server.addr, echo("after"), Duration::from_secs(5)).await.unwrap().body, &b"after"[..]);
    client.shutdown().await;
    server.stop().await;
}

#[tokio::test]
async fn requests_past_the_in_flight_bound_wait_and_are_all_answered() {
    // Two slow requests fill the bound; the rest are read only as those finish.
    let config = ServerConfig { max_in_flight_per_connection: 2, ..ServerConfig::default() };
    let server = Server::start(config, echo_dispatcher()).await;
    let client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..6 {
        let (client, addr) = (client.clone(), server.addr.clone());
        calls.spawn(async move {
            let req = if i < 2 { RemotingCommand::request(SLOW) } else { echo(&format!("e{i}")) };
            let started = std::time::Instant::now();
            let r = client.invoke(&addr, req, Duration::from_secs(5)).await.unwrap();
            (i, r, started.elapsed())
        });
        if i < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    while let Some(done) = calls.join_next().await {
        let (i, r, waited) = done.unwrap();
        assert_eq!(r.code, response_code::SUCCESS);
        if i >= 2 {
            assert_eq!(r.body, format!("e{i}").into_bytes());
            // Not a timing claim about speed: the echo cannot have been read before a slow
            // request (300 ms) finished and freed a slot.
            assert!(waited >= Duration::from_millis(200), "request {i} answered after {waited:?}");
        }
    }
    client.shutdown().await;
    server.stop().await;
}

/// One client address cannot hold more than `max_connections_per_ip` connections; another
/// address still gets in, and a closed connection frees its slot.
#[tokio::test]
async fn one_address_cannot_take_every_connection() {
    let config = ServerConfig { max_connections_per_ip: 2, ..ServerConfig::default() };
    let server = Server::start(config, echo_dispatcher()).await;
    let open_from = |ip: &'static str| {
        let addr = server.addr.clone();
        async move {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind(format!("{ip}:0").parse().unwrap()).unwrap();
            socket.connect(addr.parse().unwrap()).await.unwrap()
        }
    };
    // Is the server still talking to this stream (an echo comes back), or did it close it?
    async fn served(stream: &mut tokio::net::TcpStream) -> bool {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut out = bytes::BytesMut::new();
        let mut req = echo("hi");
        req.opaque = 1;
        ferromq_protocol::encode_frame(&req, ferromq_protocol::SerializeType::Json, &mut out).unwrap();
        if stream.write_all(&out).await.is_err() {
            return false;
        }
        let mut buf = [0u8; 512];
        matches!(tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await, Ok(Ok(n)) if n > 0)
    }
    let mut a1 = open_from("127.0.0.1").await;
    let mut a2 = open_from("127.0.0.1").await;
    assert!(served(&mut a1).await && served(&mut a2).await);
    let mut a3 = open_from("127.0.0.1").await;
    assert!(!served(&mut a3).await, "a third connection from 127.0.0.1 is refused");
    let mut b1 = open_from("127.0.0.2").await;
    assert!(served(&mut b1).await, "another address is not affected");
    drop(a1);
    // The slot comes back once the server has seen the close.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = open_from("127.0.0.1").await;
        if served(&mut again).await {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the closed connection's slot never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop().await;
}

/// Records what the server tells its observer.
#[derive(Default)]
struct Recorder(Mutex<Vec<ferromq_remoting::Rpc>>);

impl ferromq_remoting::RpcObserver for Recorder {
    fn observe(&self, rpc: &ferromq_remoting::Rpc) {
        self.0.lock().unwrap().push(*rpc);
    }
}

/// The server tells its observer of each request: answered, oneway, held and answered later
/// (long polling, its time counted until the late answer), and failed handlers.
#[tokio::test]
async fn every_served_request_is_observed_with_its_outcome() {
    const HELD: i32 = 9005;
    const PANICS: i32 = 9006;
    let recorder = Arc::new(Recorder::default());
    let mut d = echo_dispatcher();
    d.register_sync(NOTE, |_c, _req| None);
    d.register(HELD, |conn, req| async move {
        let opaque = req.opaque;
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let mut late = RemotingCommand::response(response_code::PULL_NOT_FOUND, None);
            late.opaque = opaque;
            conn.send_response(late).await.unwrap();
        });
        None
    });
    d.register_sync(PANICS, |_c, _req| panic!("boom"));
    let config = ServerConfig {
        rpc_observer: Some(recorder.clone() as Arc<dyn ferromq_remoting::RpcObserver>),
        ..ServerConfig::default()
    };
    let server = Server::start(config, d).await;
    let client = RemotingClient::new(ClientConfig::default());
    let t = Duration::from_secs(5);
    client.invoke(&server.addr, echo("a"), t).await.unwrap();
    client.invoke_oneway(&server.addr, RemotingCommand::request(NOTE)).await.unwrap();
    let late = client.invoke(&server.addr, RemotingCommand::request(HELD), t).await.unwrap();
    assert_eq!(late.code, response_code::PULL_NOT_FOUND);
    let failed = client.invoke(&server.addr, RemotingCommand::request(PANICS), t).await.unwrap();
    assert_eq!(failed.code, response_code::SYSTEM_ERROR);
    let deadline = std::time::Instant::now() + t;
    while recorder.0.lock().unwrap().len() < 4 {
        assert!(std::time::Instant::now() < deadline, "observed {:?}", recorder.0.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seen = recorder.0.lock().unwrap().clone();
    let find =
        |code| seen.iter().find(|r| r.request_code == code).copied().unwrap_or_else(|| panic!("{code}: {seen:?}"));
    use ferromq_remoting::RpcResult;
    let echo_rpc = find(ECHO);
    assert_eq!((echo_rpc.response_code, echo_rpc.long_polling, echo_rpc.result), (Some(0), false, RpcResult::Success));
    let note = find(NOTE);
    assert_eq!((note.response_code, note.result), (None, RpcResult::Oneway));
    let held = find(HELD);
    assert_eq!(
        (held.response_code, held.long_polling, held.result),
        (Some(response_code::PULL_NOT_FOUND), true, RpcResult::Success)
    );
    assert!(held.elapsed >= Duration::from_millis(200), "{held:?}");
    let panicked = find(PANICS);
    assert_eq!(
        (panicked.response_code, panicked.result),
        (Some(response_code::SYSTEM_ERROR), RpcResult::ProcessRequestFailed)
    );
    client.shutdown().await;
    server.stop().await;
}

/// Handlers the reader polls itself (`register_inline`): answered at once, waiting, held for
/// a later answer, oneway and panicking, many at a time on one connection. Each is answered
/// (or not, for oneway) exactly as a handler in its own task would be, and a waiting one does
/// not hold up those behind it.
#[tokio::test]
async fn inline_handlers_answer_like_task_handlers_whether_ready_or_waiting() {
    const NOW: i32 = 9101;
    const LATER: i32 = 9102;
    const HELD: i32 = 9103;
    const ONEWAY: i32 = 9104;
    const PANICS: i32 = 9105;
    let oneways = Arc::new(AtomicUsize::new(0));
    let mut d = Dispatcher::new();
    d.register_inline(NOW, |_c, req| async move {
        Some(RemotingCommand::response_to(&req, response_code::SUCCESS, req.remark.clone()).with_body(req.body.clone()))
    });
    d.register_inline(LATER, |_c, req| async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Some(RemotingCommand::response_to(&req, response_code::SUCCESS, Some("later".to_owned())))
    });
    d.register_inline(HELD, |conn, req| async move {
        let opaque = req.opaque;
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let mut late = RemotingCommand::response(response_code::PULL_NOT_FOUND, None);
            late.opaque = opaque;
            conn.send_response(late).await.unwrap();
        });
        None
    });
    let counter = oneways.clone();
    d.register_inline(ONEWAY, move |_c, _req| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            None
        }
    });
    d.register_inline(PANICS, |_c, _req| async move { panic!("inline bug") });
    let server = Server::start(ServerConfig::default(), d).await;
    let client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let t = Duration::from_secs(5);

    // A waiting request first: the quick ones behind it on the same connection are answered
    // before it.
    let slow = {
        let (client, addr) = (client.clone(), server.addr.clone());
        tokio::spawn(async move { client.invoke(&addr, RemotingCommand::request(LATER), t).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..300 {
        let (client, addr) = (client.clone(), server.addr.clone());
        calls.spawn(async move {
            let mut req = RemotingCommand::request(NOW).with_body(format!("m{i}").into_bytes());
            req.remark = Some(format!("m{i}"));
            let r = client.invoke(&addr, req, t).await.unwrap();
            assert_eq!(
                (r.code, r.body.as_ref(), r.remark.as_deref()),
                (0, format!("m{i}").as_bytes(), Some(format!("m{i}").as_str()))
            );
        });
    }
    while let Some(done) = calls.join_next().await {
        done.unwrap();
    }
    assert!(!slow.is_finished(), "the waiting request cannot be answered before its 300 ms");
    assert_eq!(slow.await.unwrap().remark.as_deref(), Some("later"));

    let held = client.invoke(&server.addr, RemotingCommand::request(HELD), t).await.unwrap();
    assert_eq!(held.code, response_code::PULL_NOT_FOUND);
    for _ in 0..5 {
        client.invoke_oneway(&server.addr, RemotingCommand::request(ONEWAY)).await.unwrap();
    }
    let failed = client.invoke(&server.addr, RemotingCommand::request(PANICS), t).await.unwrap();
    assert_eq!(failed.code, response_code::SYSTEM_ERROR);
    assert!(failed.remark.as_deref().unwrap_or_default().contains("inline bug"), "{:?}", failed.remark);
    // The connection keeps serving after the panic, and the oneways (sent before it on the
    // same connection) were all handled.
    let after = client.invoke(&server.addr, RemotingCommand::request(NOW).with_body(&b"after"[..]), t).await.unwrap();
    assert_eq!(after.body, &b"after"[..]);
    assert_eq!(oneways.load(Ordering::SeqCst), 5);
    let unknown = client.invoke(&server.addr, RemotingCommand::request(9199), t).await.unwrap();
    assert_eq!(unknown.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    client.shutdown().await;
    server.stop().await;
}

/// A peer that sends many requests before reading any answer: the inline answers fill the
/// socket, the reader falls back to the writer's queue or finishes a frame it began, and once
/// the peer reads, every answer arrives whole, each exactly once.
#[tokio::test]
async fn inline_answers_to_a_peer_slow_to_read_arrive_whole_and_once() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const BIG: i32 = 9201;
    let mut d = Dispatcher::new();
    // 32 KiB answers: a few dozen fill the loopback socket's buffers.
    d.register_inline(BIG, |_c, req| async move {
        Some(RemotingCommand::response_to(&req, response_code::SUCCESS, None).with_body(vec![b'z'; 32 * 1024]))
    });
    let server = Server::start(ServerConfig::default(), d).await;
    let mut stream = tokio::net::TcpStream::connect(&server.addr).await.unwrap();
    const N: i32 = 600;
    let mut out = bytes::BytesMut::new();
    for opaque in 0..N {
        let mut req = RemotingCommand::request(BIG);
        req.opaque = opaque;
        ferromq_protocol::encode_frame(&req, SerializeType::Json, &mut out).unwrap();
    }
    stream.write_all(&out).await.unwrap();
    // Not reading for a while: the server's writes meet a full socket.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut seen = vec![false; N as usize];
    let mut buf = bytes::BytesMut::new();
    let mut answered = 0;
    while answered < N {
        let n =
            tokio::time::timeout(Duration::from_secs(10), stream.read_buf(&mut buf)).await.expect("answers").unwrap();
        assert!(n > 0, "closed after {answered} answers");
        while let Some(answer) = ferromq_protocol::decode_frame(&mut buf, 16 * 1024 * 1024).expect("whole frames") {
            assert_eq!((answer.code, answer.body.len()), (response_code::SUCCESS, 32 * 1024));
            assert!(answer.body.iter().all(|&b| b == b'z'));
            let slot = &mut seen[answer.opaque as usize];
            assert!(!*slot, "answer {} twice", answer.opaque);
            *slot = true;
            answered += 1;
        }
    }
    server.stop().await;
}

/// The body a PARTS request asks for: `count` parts of sizes cycling through the classes the
/// writer copies or writes where they are (70 KB ones only in bodies of under 100 parts, so a
/// frame stays under 16 MiB), each part's bytes derived from its index.
fn body_parts(seed: u32, count: usize) -> Vec<bytes::Bytes> {
    let classes = if count < 100 { 6 } else { 5 };
    (0..count)
        .map(|i| {
            let len = [0, 7, 255, 256, 1100, 70_000][(i + seed as usize) % classes];
            (0..len).map(|j| (seed as usize + i * 31 + j) as u8).collect::<Vec<u8>>().into()
        })
        .collect()
}

#[tokio::test]
async fn a_body_in_parts_arrives_whole_among_other_answers() {
    const PARTS: i32 = 9010;
    let mut d = echo_dispatcher();
    d.register_sync(PARTS, |_c, req| {
        let seed: u32 = req.remark.as_deref().unwrap_or("0").parse().unwrap();
        let count = if seed.is_multiple_of(10) { 1500 } else { (seed % 40) as usize };
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body_parts(body_parts(seed, count)))
    });
    let server = Server::start(ServerConfig::default(), d).await;
    let client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let mut calls = tokio::task::JoinSet::new();
    for seed in 0..120u32 {
        let client = client.clone();
        let addr = server.addr.clone();
        calls.spawn(async move {
            let mut req =
                if seed.is_multiple_of(3) { echo(&format!("e{seed}")) } else { RemotingCommand::request(PARTS) };
            if !seed.is_multiple_of(3) {
                req.remark = Some(seed.to_string());
            }
            let r = client.invoke(&addr, req, Duration::from_secs(10)).await.unwrap();
            assert_eq!(r.code, response_code::SUCCESS);
            if seed.is_multiple_of(3) {
                assert_eq!(r.body, format!("e{seed}").into_bytes());
            } else {
                let count = if seed.is_multiple_of(10) { 1500 } else { (seed % 40) as usize };
                let expected: Vec<u8> = body_parts(seed, count).concat();
                assert!(r.body == expected, "seed {seed}: {} bytes, expected {}", r.body.len(), expected.len());
            }
        });
    }
    while let Some(done) = calls.join_next().await {
        done.unwrap();
    }
    client.shutdown().await;
    server.stop().await;
}
