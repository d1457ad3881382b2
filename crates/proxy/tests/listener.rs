//! The gRPC port's listener over real sockets: TLS and plaintext on one port, the modes, the
//! bounds, certificates from PEM files, and tonic serving HTTP/2 over both kinds of connection.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use ferromq_proxy::listener::{GrpcConnectInfo, GrpcIncoming, ListenerOptions, MaybeTlsStream};
use ferromq_proxy::tls::{server_config, TlsError, TlsMode};
use ferromq_remoting::tls::TrustAnyServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::client::TlsStream as ClientTlsStream;
use tokio_rustls::rustls::crypto;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{self, ClientConfig};
use tokio_rustls::TlsConnector;
use tokio_stream::StreamExt;
use tonic::codegen::{http, BoxFuture, Service};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const WAIT: Duration = Duration::from_secs(5);

fn tls_connector(alpn_h2: bool) -> TlsConnector {
    let provider = Arc::new(crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(TrustAnyServer::new(provider)))
        .with_no_client_auth();
    if alpn_h2 {
        config.alpn_protocols = vec![b"h2".to_vec()];
    }
    TlsConnector::from(Arc::new(config))
}

async fn tls_connect(addr: SocketAddr, alpn_h2: bool) -> std::io::Result<ClientTlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(WAIT, tls_connector(alpn_h2).connect(name, tcp)).await.expect("TLS handshake hung")
}

async fn start(mode: TlsMode, options: ListenerOptions) -> (SocketAddr, GrpcIncoming) {
    let tls = mode.accepts_tls().then(|| server_config(None, None).unwrap());
    start_with(mode, tls, options).await
}

async fn start_with(
    mode: TlsMode,
    tls: Option<Arc<rustls::ServerConfig>>,
    options: ListenerOptions,
) -> (SocketAddr, GrpcIncoming) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (addr, GrpcIncoming::new(listener, mode, tls, options).unwrap())
}

async fn next_conn(incoming: &mut GrpcIncoming) -> MaybeTlsStream {
    tokio::time::timeout(WAIT, incoming.next()).await.expect("no connection yielded").expect("stream ended").unwrap()
}

async fn assert_nothing_yielded(incoming: &mut GrpcIncoming) {
    let next = tokio::time::timeout(Duration::from_millis(300), incoming.next()).await;
    assert!(next.is_err(), "unexpected connection: {next:?}");
}

/// Reads until the server closes the connection (EOF or reset); fails on data or a hang.
async fn assert_closed_by_server(stream: &mut TcpStream) {
    let mut buf = [0u8; 64];
    match tokio::time::timeout(WAIT, stream.read(&mut buf)).await.expect("connection not closed") {
        Ok(0) | Err(_) => {}
        Ok(n) => panic!("unexpected data: {:?}", &buf[..n]),
    }
}

async fn round_trip<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    client: &mut S,
    server: &mut MaybeTlsStream,
    client_hello: &[u8],
) {
    client.write_all(client_hello).await.unwrap();
    client.flush().await.unwrap();
    let mut got = vec![0u8; client_hello.len()];
    tokio::time::timeout(WAIT, server.read_exact(&mut got)).await.unwrap().unwrap();
    assert_eq!(got, client_hello);
    server.write_all(b"pong").await.unwrap();
    server.flush().await.unwrap();
    let mut pong = [0u8; 4];
    tokio::time::timeout(WAIT, client.read_exact(&mut pong)).await.unwrap().unwrap();
    assert_eq!(&pong, b"pong");
}

#[tokio::test]
async fn plaintext_http2_preface_yields_a_plain_connection() {
    let (addr, mut incoming) = start(TlsMode::Permissive, ListenerOptions::default()).await;
    let mut client = TcpStream::connect(addr).await.unwrap();
    client.write_all(PREFACE).await.unwrap();
    let mut server = next_conn(&mut incoming).await;
    assert!(!server.is_tls());
    let info = server.connect_info();
    assert_eq!(info, GrpcConnectInfo { remote_addr: client.local_addr().unwrap(), local_addr: Some(addr), tls: false });
    // The peeked bytes are still there for HTTP/2.
    let mut got = vec![0u8; PREFACE.len()];
    server.read_exact(&mut got).await.unwrap();
    assert_eq!(got, PREFACE);
    round_trip(&mut client, &mut server, b"more").await;
    assert_eq!(incoming.open_connections(), 1);
    drop(server);
    assert_eq!(incoming.open_connections(), 0);
}

#[tokio::test]
async fn tls_with_the_self_signed_certificate_round_trips() {
    let (addr, mut incoming) = start(TlsMode::Permissive, ListenerOptions::default()).await;

    let mut client = tls_connect(addr, true).await.unwrap();
    assert_eq!(client.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let mut server = next_conn(&mut incoming).await;
    assert!(server.is_tls());
    assert_eq!(server.connect_info().remote_addr, client.get_ref().0.local_addr().unwrap());
    assert!(server.connect_info().tls);
    round_trip(&mut client, &mut server, PREFACE).await;

    // A client that offers no ALPN is served too.
    let mut client = tls_connect(addr, false).await.unwrap();
    assert_eq!(client.get_ref().1.alpn_protocol(), None);
    let mut server = next_conn(&mut incoming).await;
    assert!(server.is_tls());
    round_trip(&mut client, &mut server, b"ping").await;
}

#[tokio::test]
async fn enforcing_refuses_plaintext() {
    let (addr, mut incoming) = start(TlsMode::Enforcing, ListenerOptions::default()).await;
    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain.write_all(PREFACE).await.unwrap();
    assert_closed_by_server(&mut plain).await;
    assert_nothing_yielded(&mut incoming).await;

    let mut client = tls_connect(addr, true).await.unwrap();
    let mut server = next_conn(&mut incoming).await;
    assert!(server.is_tls());
    round_trip(&mut client, &mut server, b"ping").await;
}

#[tokio::test]
async fn disabled_refuses_tls() {
    let (addr, mut incoming) = start(TlsMode::Disabled, ListenerOptions::default()).await;
    assert!(tls_connect(addr, true).await.is_err());
    assert_nothing_yielded(&mut incoming).await;

    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain.write_all(PREFACE).await.unwrap();
    let mut server = next_conn(&mut incoming).await;
    assert!(!server.is_tls());
    let mut got = vec![0u8; PREFACE.len()];
    server.read_exact(&mut got).await.unwrap();
    round_trip(&mut plain, &mut server, b"ping").await;
}

#[tokio::test]
async fn a_tls_mode_without_a_config_is_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = GrpcIncoming::new(listener, TlsMode::Permissive, None, ListenerOptions::default()).unwrap_err();
    assert!(matches!(err, TlsError::MissingConfig { mode: TlsMode::Permissive }), "{err}");
    assert!(err.to_string().contains("permissive"), "{err}");
}

#[tokio::test]
async fn silent_and_stalled_clients_do_not_block_others_and_are_closed() {
    let options = ListenerOptions { handshake_timeout: Duration::from_millis(1500), ..ListenerOptions::default() };
    let (addr, mut incoming) = start(TlsMode::Permissive, options).await;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut stalled_tls = TcpStream::connect(addr).await.unwrap();
    stalled_tls.write_all(&[0x16, 0x03, 0x01]).await.unwrap(); // a ClientHello that never finishes
    tokio::time::sleep(Duration::from_millis(50)).await;

    let started = tokio::time::Instant::now();
    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain.write_all(PREFACE).await.unwrap();
    let server = next_conn(&mut incoming).await;
    assert_eq!(server.connect_info().remote_addr, plain.local_addr().unwrap());
    let mut tls = tls_connect(addr, true).await.unwrap();
    let mut tls_server = next_conn(&mut incoming).await;
    // Served well before the two stuck connections time out.
    assert!(started.elapsed() < Duration::from_millis(1000), "served only after {:?}", started.elapsed());
    round_trip(&mut tls, &mut tls_server, b"ping").await;

    assert_closed_by_server(&mut silent).await;
    assert_closed_by_server(&mut stalled_tls).await;
    assert_eq!(incoming.open_connections(), 2);
}

#[tokio::test]
async fn connections_beyond_the_limit_are_closed() {
    let options = ListenerOptions { max_connections: 1, ..ListenerOptions::default() };
    let (addr, mut incoming) = start(TlsMode::Permissive, options).await;
    let mut first = TcpStream::connect(addr).await.unwrap();
    first.write_all(PREFACE).await.unwrap();
    let served = next_conn(&mut incoming).await;

    let mut second = TcpStream::connect(addr).await.unwrap();
    assert_closed_by_server(&mut second).await;
    assert_eq!(incoming.open_connections(), 1);

    // The slot is given back when the connection is dropped.
    drop(served);
    assert_eq!(incoming.open_connections(), 0);
    let mut third = TcpStream::connect(addr).await.unwrap();
    third.write_all(PREFACE).await.unwrap();
    let served = next_conn(&mut incoming).await;
    assert_eq!(served.connect_info().remote_addr, third.local_addr().unwrap());
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn certificate_and_key_from_pem_files_are_presented() {
    let dir = tempfile::tempdir().unwrap();
    let generated = rcgen::generate_simple_self_signed(vec!["proxy.example".to_owned()]).unwrap();
    let cert = write(dir.path(), "rocketmq.crt", &generated.cert.pem());
    let key = write(dir.path(), "rocketmq.key", &generated.signing_key.serialize_pem());
    let tls = server_config(Some(&cert), Some(&key)).unwrap();
    assert_eq!(tls.alpn_protocols, vec![b"h2".to_vec()]);

    let (addr, mut incoming) = start_with(TlsMode::Enforcing, Some(tls), ListenerOptions::default()).await;
    let mut client = tls_connect(addr, true).await.unwrap();
    let presented = client.get_ref().1.peer_certificates().unwrap();
    assert_eq!(presented, [generated.cert.der().clone()]);
    let mut server = next_conn(&mut incoming).await;
    round_trip(&mut client, &mut server, b"ping").await;
}

#[test]
fn bad_pem_files_are_named_with_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let one = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = write(dir.path(), "good.crt", &one.cert.pem());
    let key = write(dir.path(), "good.key", &one.signing_key.serialize_pem());
    let other_key = write(dir.path(), "other.key", &other.signing_key.serialize_pem());
    let missing = dir.path().join("missing.crt");
    let not_pem = write(dir.path(), "notes.txt", "hello\n");
    let bad_base64 = write(dir.path(), "bad.crt", "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n");
    let encrypted = write(
        dir.path(),
        "encrypted.key",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
    );
    let shown = |p: &Path| p.display().to_string();

    let err = server_config(Some(&missing), Some(&key)).unwrap_err();
    assert!(matches!(err, TlsError::Read { .. }), "{err}");
    assert!(err.to_string().contains(&shown(&missing)) && err.to_string().contains("certificate"), "{err}");

    let err = server_config(Some(&cert), Some(&dir.path().join("missing.key"))).unwrap_err();
    assert!(err.to_string().contains("missing.key") && err.to_string().contains("private key"), "{err}");

    let err = server_config(Some(&not_pem), Some(&key)).unwrap_err();
    assert!(matches!(err, TlsError::NoCertificate { .. }), "{err}");
    assert!(err.to_string().contains(&shown(&not_pem)), "{err}");

    let err = server_config(Some(&bad_base64), Some(&key)).unwrap_err();
    assert!(matches!(err, TlsError::Pem { .. }), "{err}");
    assert!(err.to_string().contains(&shown(&bad_base64)), "{err}");

    let err = server_config(Some(&cert), Some(&cert)).unwrap_err();
    assert!(matches!(err, TlsError::NoPrivateKey { .. }), "{err}");
    assert!(err.to_string().contains(&shown(&cert)), "{err}");

    let err = server_config(Some(&cert), Some(&encrypted)).unwrap_err();
    assert!(matches!(err, TlsError::EncryptedKey { .. }), "{err}");
    assert!(err.to_string().contains(&shown(&encrypted)), "{err}");

    let err = server_config(Some(&cert), Some(&other_key)).unwrap_err();
    assert!(matches!(err, TlsError::Rejected { .. }), "{err}");
    assert!(err.to_string().contains(&shown(&cert)) && err.to_string().contains(&shown(&other_key)), "{err}");
}

// --- tonic end to end -------------------------------------------------------------------------

const ECHO_PATH: &str = "/test.Echo/Echo";

/// A hand-written gRPC service (what tonic's codegen would produce for one unary method): it
/// answers with the request text plus the connection info the handler found in the request's
/// extensions.
#[derive(Debug, Clone)]
struct EchoServer;

#[derive(Debug)]
struct EchoMethod;

impl tonic::server::UnaryService<String> for EchoMethod {
    type Response = String;
    type Future = BoxFuture<tonic::Response<String>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<String>) -> Self::Future {
        let info = GrpcConnectInfo::of(&request).copied();
        Box::pin(async move {
            let info = info.ok_or_else(|| tonic::Status::internal("no GrpcConnectInfo in the extensions"))?;
            Ok(tonic::Response::new(format!("{}|tls={}|peer={}", request.get_ref(), info.tls, info.remote_addr)))
        })
    }
}

impl<B> Service<http::Request<B>> for EchoServer
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if request.uri().path() == ECHO_PATH {
            Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<String, String>::default());
                Ok(grpc.unary(EchoMethod, request).await)
            })
        } else {
            Box::pin(async { Ok(tonic::Status::unimplemented("no such method").into_http()) })
        }
    }
}

async fn echo(addr: SocketAddr, text: &str) -> Result<String, tonic::Status> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(WAIT)
        .connect()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let answer = client
        .unary(
            tonic::Request::new(text.to_owned()),
            http::uri::PathAndQuery::from_static(ECHO_PATH),
            tonic_prost::ProstCodec::<String, String>::default(),
        )
        .await?;
    Ok(answer.into_inner())
}

/// Aborts a task when dropped, so a failing test does not leave it running.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A local plaintext port whose connections are forwarded over TLS (ALPN h2, any certificate)
/// to `target`: lets tonic's plaintext client speak HTTP/2 over the listener's TLS without a TLS
/// connector dependency (`Endpoint::connect_with_connector` needs hyper-util's `TokioIo`).
async fn tls_forwarder(target: SocketAddr) -> (SocketAddr, AbortOnDrop) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut forwards = JoinSet::new();
        loop {
            let (mut plain, _) = listener.accept().await.unwrap();
            forwards.spawn(async move {
                let mut tls = tls_connect(target, true).await.unwrap();
                assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
                let _ = tokio::io::copy_bidirectional(&mut plain, &mut tls).await;
            });
        }
    });
    (addr, AbortOnDrop(task))
}

#[tokio::test]
async fn tonic_serves_grpc_over_plaintext_and_tls_on_one_port() {
    let (addr, incoming) = start(TlsMode::Permissive, ListenerOptions::default()).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server =
        tokio::spawn(tonic::transport::Server::builder().serve_with_incoming_shutdown(EchoServer, incoming, async {
            let _ = stopped.await;
        }));

    let answer = echo(addr, "plain").await.unwrap();
    assert!(answer.starts_with("plain|tls=false|peer=127.0.0.1:"), "{answer}");

    let (forwarder, _forwarder_task) = tls_forwarder(addr).await;
    let answer = echo(forwarder, "secure").await.unwrap();
    assert!(answer.starts_with("secure|tls=true|peer=127.0.0.1:"), "{answer}");

    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, server).await.expect("server did not shut down").unwrap().unwrap();
}

/// Serves one part of a partitioned port on a thread of its own (a current-thread runtime, as
/// the proxy runs them): echoes each connection's first 24 bytes with the thread's name.
fn serve_part_on_thread(part: ferromq_proxy::listener::IncomingPart, name: &str) -> std::thread::JoinHandle<()> {
    let name = name.to_owned();
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let mut incoming = part.start();
                let mut served = JoinSet::new();
                while let Some(Ok(mut conn)) = incoming.next().await {
                    let name = name.clone();
                    served.spawn(async move {
                        let mut preface = [0u8; 24];
                        if conn.read_exact(&mut preface).await.is_ok() {
                            let _ = conn.write_all(name.as_bytes()).await;
                            let _ = conn.flush().await;
                            // Held open until the client goes.
                            let _ = conn.read(&mut preface).await;
                        }
                    });
                }
            });
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_port_spreads_connections_over_its_threads_under_one_limit() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let options = ListenerOptions { max_connections: 4, ..ListenerOptions::default() };
    let parts =
        GrpcIncoming::partitioned(listener, TlsMode::Permissive, Some(server_config(None, None).unwrap()), options, 2)
            .unwrap();
    assert_eq!(parts.len(), 2);
    let threads: Vec<_> =
        parts.into_iter().enumerate().map(|(i, p)| serve_part_on_thread(p, &format!("part-{i}"))).collect();

    // Four connections, two per thread (round robin); each served on the thread it was handed to.
    let mut clients = Vec::new();
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..4 {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(PREFACE).await.unwrap();
        let mut name = [0u8; 6];
        tokio::time::timeout(WAIT, c.read_exact(&mut name)).await.expect("served").unwrap();
        *seen.entry(String::from_utf8_lossy(&name).into_owned()).or_insert(0) += 1;
        clients.push(c);
    }
    assert_eq!(seen, [("part-0".to_owned(), 2), ("part-1".to_owned(), 2)].into());

    // The limit holds for the port as a whole: a fifth is closed at once.
    let mut fifth = TcpStream::connect(addr).await.unwrap();
    assert_closed_by_server(&mut fifth).await;

    // A connection that closes gives its slot back, whichever thread served it.
    drop(clients.pop());
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(PREFACE).await.unwrap();
        let mut name = [0u8; 6];
        match tokio::time::timeout(Duration::from_millis(500), c.read_exact(&mut name)).await {
            Ok(Ok(_)) => break,
            _ => assert!(tokio::time::Instant::now() < deadline, "the slot never came back"),
        }
    }
    drop(clients);
    drop(threads);
}

// --- gRPC on the remoting port ----------------------------------------------------------------

/// Serves one part of a partitioned port with tonic (the echo service) on a thread of its own.
fn serve_echo_on_thread(part: ferromq_proxy::listener::IncomingPart) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let _ = tonic::transport::Server::builder().serve_with_incoming(EchoServer, part.start()).await;
        });
    })
}

/// A remoting port (TLS permissive, ALPN h2 offered) answering one request code, with its
/// HTTP/2 connections handed to `handoff` when given.
async fn remoting_port(handoff: Option<ferromq_remoting::Http2Handoff>) -> (SocketAddr, AbortOnDrop) {
    use ferromq_remoting::tls::{ServerTls, TlsMode as RemotingTlsMode};
    use ferromq_remoting::{Dispatcher, RemotingServer, ServerConfig};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tls = ServerTls::new(RemotingTlsMode::Permissive, Some(server_config(None, None).unwrap())).unwrap();
    let mut d = Dispatcher::new();
    d.register_sync(ferromq_protocol::request_code::GET_BROKER_CLUSTER_INFO, |_conn, req| {
        Some(ferromq_protocol::RemotingCommand::response_to(req, ferromq_protocol::response_code::SUCCESS, None))
    });
    let server =
        RemotingServer::new(ServerConfig { tls, http2_handoff: handoff, ..ServerConfig::default() }, Arc::new(d));
    let task = tokio::spawn(async move {
        let _ = server.serve(listener, std::future::pending()).await;
    });
    (addr, AbortOnDrop(task))
}

async fn remoting_answers(addr: SocketAddr) -> bool {
    let client = ferromq_remoting::RemotingClient::new(ferromq_remoting::ClientConfig::default());
    let req = ferromq_protocol::RemotingCommand::request(ferromq_protocol::request_code::GET_BROKER_CLUSTER_INFO);
    let answer = client.invoke(&addr.to_string(), req, WAIT).await;
    client.shutdown().await;
    answer.is_ok_and(|r| r.code == ferromq_protocol::response_code::SUCCESS)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remoting_port_hands_grpc_to_the_grpc_port_plaintext_and_tls() {
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_addr = grpc.local_addr().unwrap();
    let (handoff, handed) = ferromq_remoting::Http2Handoff::channel(8);
    let options = ListenerOptions { max_connections: 3, ..ListenerOptions::default() };
    let tls = Some(server_config(None, None).unwrap());
    let parts =
        GrpcIncoming::partitioned_with_handoff(grpc, TlsMode::Permissive, tls, options, 2, Some(handed)).unwrap();
    let _threads: Vec<_> = parts.into_iter().map(serve_echo_on_thread).collect();
    let (remoting, _remoting_task) = remoting_port(Some(handoff)).await;

    // gRPC on the remoting port, plaintext and TLS (the handler sees the client and the TLS).
    let answer = echo(remoting, "plain").await.unwrap();
    assert!(answer.starts_with("plain|tls=false|peer=127.0.0.1:"), "{answer}");
    let (forwarder, _forwarder_task) = tls_forwarder(remoting).await;
    let answer = echo(forwarder, "secure").await.unwrap();
    assert!(answer.starts_with("secure|tls=true|peer=127.0.0.1:"), "{answer}");
    // Remoting on the same port as before, and the gRPC port itself.
    assert!(remoting_answers(remoting).await, "a remoting request on the shared port");
    let answer = echo(grpc_addr, "direct").await.unwrap();
    assert!(answer.starts_with("direct|tls=false"), "{answer}");

    // Handed connections count against the gRPC port's limit (3): three served (the server's
    // SETTINGS arrive; the echo clients' slots come back as their connections close)...
    let mut held = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while held.len() < 3 {
        let mut c = TcpStream::connect(remoting).await.unwrap();
        c.write_all(PREFACE).await.unwrap();
        let mut buf = [0u8; 64];
        match tokio::time::timeout(Duration::from_secs(1), c.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => held.push(c),
            _ => assert!(tokio::time::Instant::now() < deadline, "handed connections not served"),
        }
    }
    // ...and a fourth closed at once.
    let mut c = TcpStream::connect(remoting).await.unwrap();
    c.write_all(PREFACE).await.unwrap();
    assert_closed_by_server(&mut c).await;
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_handoff_the_remoting_port_closes_grpc_connections() {
    let (remoting, _task) = remoting_port(None).await;
    assert!(echo(remoting, "plain").await.is_err(), "gRPC served without a handoff");
    assert!(remoting_answers(remoting).await);
    // A handoff whose gRPC server is gone closes the connection too; remoting goes on.
    let (handoff, handed) = ferromq_remoting::Http2Handoff::channel(8);
    drop(handed);
    let (remoting, _task) = remoting_port(Some(handoff)).await;
    let mut c = TcpStream::connect(remoting).await.unwrap();
    c.write_all(PREFACE).await.unwrap();
    assert_closed_by_server(&mut c).await;
    assert!(remoting_answers(remoting).await);
}
