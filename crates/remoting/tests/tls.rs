//! TLS on remoting connections over real loopback TCP: each `tls.server.mode` with TLS and
//! plaintext clients, the bound on silent connections, client certificates (mTLS) and server
//! verification against a CA, all with certificates generated here.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::tls::{ClientAuth, ClientTls, TlsConfig, TlsError, TlsMode};
use ferromq_remoting::{ClientConfig, Dispatcher, RemotingClient, RemotingError, RemotingServer, ServerConfig};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

const ECHO: i32 = 9001;
const WAIT: Duration = Duration::from_secs(5);

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), RemotingError>>,
}

impl Server {
    async fn start(config: ServerConfig) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut d = Dispatcher::new();
        d.register_sync(ECHO, |_c, req| {
            Some(RemotingCommand::response_to(req, response_code::SUCCESS, None).with_body(req.body.clone()))
        });
        let server = RemotingServer::new(config, Arc::new(d));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            server
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await
        });
        Server { addr, stop: Some(stop), task }
    }

    async fn with_tls(tls: &TlsConfig) -> Server {
        let config = ServerConfig { tls: tls.server_tls("test server").unwrap(), ..ServerConfig::default() };
        Server::start(config).await
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(15), &mut self.task).await.expect("server drains").unwrap().unwrap();
    }
}

fn mode(mode: TlsMode) -> TlsConfig {
    TlsConfig { server_mode: mode, ..TlsConfig::default() }
}

fn client(tls: Option<ClientTls>) -> RemotingClient {
    RemotingClient::new(ClientConfig::default().with_tls(tls))
}

fn plaintext_client() -> RemotingClient {
    client(None)
}

/// Java's default TLS client: trusts any server, presents no certificate.
fn tls_client() -> RemotingClient {
    client(Some(ClientTls::default()))
}

async fn echo(client: &RemotingClient, addr: SocketAddr, body: &[u8]) -> Result<Vec<u8>, RemotingError> {
    let req = RemotingCommand::request(ECHO).with_body(body.to_vec());
    let resp = client.invoke(&addr.to_string(), req, WAIT).await?;
    assert_eq!(resp.code, response_code::SUCCESS);
    Ok(resp.body.to_vec())
}

async fn assert_echoes(client: &RemotingClient, addr: SocketAddr) {
    let body = b"hello over the wire".to_vec();
    assert_eq!(echo(client, addr, &body).await.unwrap(), body);
}

/// The request fails because the server closed the connection (or refused the handshake),
/// not because it timed out.
async fn assert_refused(client: &RemotingClient, addr: SocketAddr) -> RemotingError {
    let started = Instant::now();
    let err = echo(client, addr, b"x").await.unwrap_err();
    assert!(
        matches!(err, RemotingError::ConnectionClosed { .. } | RemotingError::Tls { .. }),
        "expected a closed connection or a failed handshake, got {err:?}"
    );
    assert!(started.elapsed() < WAIT, "refusal took {:?}", started.elapsed());
    err
}

#[tokio::test]
async fn permissive_serves_tls_and_plaintext_on_one_port_at_once() {
    let server = Server::with_tls(&mode(TlsMode::Permissive)).await;
    let (plain, tls) = (plaintext_client(), tls_client());
    // Interleaved on two live connections of the same port.
    for round in 0..3u8 {
        let body = vec![round; 10];
        let (a, b) = tokio::join!(echo(&plain, server.addr, &body), echo(&tls, server.addr, &body));
        assert_eq!((a.unwrap(), b.unwrap()), (body.clone(), body));
    }
    // A body bigger than a TLS record (16 KiB) and than one socket read arrives whole.
    let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(echo(&tls, server.addr, &big).await.unwrap(), big);
    assert_eq!(echo(&plain, server.addr, &big).await.unwrap(), big);
    plain.shutdown().await;
    tls.shutdown().await;
    server.stop().await;
}

#[tokio::test]
async fn enforcing_serves_tls_and_closes_plaintext() {
    let server = Server::with_tls(&mode(TlsMode::Enforcing)).await;
    let tls = tls_client();
    assert_echoes(&tls, server.addr).await;
    let plain = plaintext_client();
    let err = assert_refused(&plain, server.addr).await;
    assert!(matches!(err, RemotingError::ConnectionClosed { .. }), "{err:?}");
    // The refusal closed only that connection.
    assert_echoes(&tls, server.addr).await;
    server.stop().await;
}

#[tokio::test]
async fn disabled_serves_plaintext_and_closes_tls() {
    let server = Server::with_tls(&mode(TlsMode::Disabled)).await;
    let plain = plaintext_client();
    assert_echoes(&plain, server.addr).await;
    let tls = tls_client();
    let err = assert_refused(&tls, server.addr).await;
    assert!(matches!(err, RemotingError::Tls { .. }), "{err:?}");
    assert_echoes(&plain, server.addr).await;
    server.stop().await;
}

#[tokio::test]
async fn the_library_default_is_plaintext_only() {
    let server = Server::start(ServerConfig::default()).await;
    assert_echoes(&plaintext_client(), server.addr).await;
    assert_refused(&tls_client(), server.addr).await;
    server.stop().await;
}

/// Reads until the server closes the connection; fails on data or a hang.
async fn wait_closed_by_server(stream: &mut TcpStream) {
    let mut buf = [0u8; 16];
    match tokio::time::timeout(WAIT, stream.read(&mut buf)).await.expect("connection not closed") {
        Ok(0) | Err(_) => {}
        Ok(n) => panic!("unexpected data: {:?}", &buf[..n]),
    }
}

#[tokio::test]
async fn a_silent_client_is_closed_after_the_idle_timeout_in_every_mode() {
    let bound = Duration::from_millis(300);
    for m in TlsMode::ALL {
        let config =
            ServerConfig { idle_timeout: bound, tls: mode(m).server_tls("t").unwrap(), ..ServerConfig::default() };
        let server = Server::start(config).await;
        let started = Instant::now();
        let mut silent = TcpStream::connect(server.addr).await.unwrap();
        // Meanwhile other clients are served: the wait holds no one but the silent client.
        let other = if m == TlsMode::Enforcing { tls_client() } else { plaintext_client() };
        assert_echoes(&other, server.addr).await;
        wait_closed_by_server(&mut silent).await;
        let waited = started.elapsed();
        assert!(waited >= bound - Duration::from_millis(50), "{m}: closed after {waited:?}, before the bound");
        server.stop().await;
    }
}

#[tokio::test]
async fn shutdown_does_not_wait_for_a_silent_client() {
    let server = Server::with_tls(&mode(TlsMode::Permissive)).await;
    let _silent = TcpStream::connect(server.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    server.stop().await;
    assert!(started.elapsed() < Duration::from_secs(2), "shutdown took {:?}", started.elapsed());
}

// --- certificates ---------------------------------------------------------------------------

/// A CA, a server certificate and a client certificate it issued, and an unrelated CA with a
/// client certificate of its own, as PEM files.
struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    other_ca: PathBuf,
    rogue_cert: PathBuf,
    rogue_key: PathBuf,
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

fn issue(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let mut params = CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()).unwrap();
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (root, other) = (ca("FerroMQ test CA"), ca("Someone else's CA"));
        // The server certificate does not name 127.0.0.1: Java's clients check the chain only.
        let (server_cert, server_key) = issue(&root, &["broker.example"], ExtendedKeyUsagePurpose::ServerAuth);
        let (client_cert, client_key) = issue(&root, &["client.example"], ExtendedKeyUsagePurpose::ClientAuth);
        let (rogue_cert, rogue_key) = issue(&other, &["client.example"], ExtendedKeyUsagePurpose::ClientAuth);
        Pki {
            ca: write(d, "ca.pem", &root.pem()),
            server_cert: write(d, "server.pem", &server_cert),
            server_key: write(d, "server.key", &server_key),
            client_cert: write(d, "client.pem", &client_cert),
            client_key: write(d, "client.key", &client_key),
            other_ca: write(d, "other-ca.pem", &other.pem()),
            rogue_cert: write(d, "rogue.pem", &rogue_cert),
            rogue_key: write(d, "rogue.key", &rogue_key),
            _dir: dir,
        }
    }

    /// An enforcing server with the CA-issued certificate.
    fn server(&self) -> TlsConfig {
        TlsConfig {
            server_mode: TlsMode::Enforcing,
            test_mode_enable: false,
            server_cert_path: self.server_cert.display().to_string(),
            server_key_path: self.server_key.display().to_string(),
            ..TlsConfig::default()
        }
    }
}

fn client_with(cert: Option<(&Path, &Path)>, trust: Option<&Path>) -> RemotingClient {
    let mut config = TlsConfig::default();
    if let Some((cert, key)) = cert {
        config.client_cert_path = cert.display().to_string();
        config.client_key_path = key.display().to_string();
    }
    if let Some(ca) = trust {
        config.client_auth_server = true;
        config.client_trust_cert_path = ca.display().to_string();
    }
    client(Some(config.client_tls().unwrap()))
}

#[tokio::test]
async fn certificate_files_are_served() {
    let pki = Pki::new();
    let server = Server::with_tls(&pki.server()).await;
    assert_echoes(&tls_client(), server.addr).await;
    server.stop().await;
}

#[tokio::test]
async fn required_client_certificates_are_checked_against_the_ca() {
    let pki = Pki::new();
    let tls = TlsConfig {
        server_need_client_auth: ClientAuth::Require,
        server_auth_client: true,
        server_trust_cert_path: pki.ca.display().to_string(),
        ..pki.server()
    };
    let server = Server::with_tls(&tls).await;
    assert_echoes(&client_with(Some((&pki.client_cert, &pki.client_key)), None), server.addr).await;
    // Without a certificate, or with one the CA did not issue: refused.
    assert_refused(&client_with(None, None), server.addr).await;
    assert_refused(&client_with(Some((&pki.rogue_cert, &pki.rogue_key)), None), server.addr).await;
    // Failed handshakes closed only their own connections.
    assert_echoes(&client_with(Some((&pki.client_cert, &pki.client_key)), None), server.addr).await;
    server.stop().await;
}

#[tokio::test]
async fn required_client_certificates_without_auth_client_accept_any_certificate() {
    let pki = Pki::new();
    let tls = TlsConfig { server_need_client_auth: ClientAuth::Require, ..pki.server() };
    let server = Server::with_tls(&tls).await;
    assert_echoes(&client_with(Some((&pki.rogue_cert, &pki.rogue_key)), None), server.addr).await;
    assert_refused(&client_with(None, None), server.addr).await;
    server.stop().await;
}

#[tokio::test]
async fn optional_client_certificates_let_clients_without_one_in() {
    let pki = Pki::new();
    let tls = TlsConfig {
        server_need_client_auth: ClientAuth::Optional,
        server_auth_client: true,
        server_trust_cert_path: pki.ca.display().to_string(),
        ..pki.server()
    };
    let server = Server::with_tls(&tls).await;
    assert_echoes(&client_with(None, None), server.addr).await;
    assert_echoes(&client_with(Some((&pki.client_cert, &pki.client_key)), None), server.addr).await;
    assert_refused(&client_with(Some((&pki.rogue_cert, &pki.rogue_key)), None), server.addr).await;
    server.stop().await;
}

#[tokio::test]
async fn a_client_verifying_servers_accepts_only_certificates_of_its_ca() {
    let pki = Pki::new();
    let server = Server::with_tls(&pki.server()).await;
    assert_echoes(&client_with(None, Some(&pki.ca)), server.addr).await;
    let err = assert_refused(&client_with(None, Some(&pki.other_ca)), server.addr).await;
    assert!(matches!(err, RemotingError::Tls { .. }), "{err:?}");
    server.stop().await;

    // A self-signed (test mode) server is refused too.
    let server = Server::with_tls(&mode(TlsMode::Enforcing)).await;
    assert_refused(&client_with(None, Some(&pki.ca)), server.addr).await;
    server.stop().await;
}

#[test]
fn bad_files_are_start_errors_naming_the_file_and_the_key() {
    let pki = Pki::new();
    let missing = pki.ca.with_file_name("nope.pem");
    let with = |f: &dyn Fn(&mut TlsConfig)| {
        let mut c = pki.server();
        f(&mut c);
        c.server_tls("t").unwrap_err()
    };
    let err = with(&|c| c.server_cert_path = missing.display().to_string());
    assert!(matches!(err, TlsError::Read { .. }), "{err}");
    assert!(err.to_string().contains("nope.pem") && err.to_string().contains("tls.server.certPath"), "{err}");
    let err = with(&|c| c.server_key_path = pki.server_cert.display().to_string()).to_string();
    assert!(err.contains("server.pem") && err.contains("tls.server.keyPath"), "{err}");
    let err = with(&|c| c.server_key_path = pki.client_key.display().to_string());
    assert!(matches!(err, TlsError::Rejected { .. }), "{err}");
    let err = with(&|c| {
        c.server_need_client_auth = ClientAuth::Require;
        c.server_auth_client = true;
        c.server_trust_cert_path = pki.client_key.display().to_string();
    })
    .to_string();
    assert!(err.contains("client.key") && err.contains("tls.server.trustCertPath"), "{err}");
    let err = TlsConfig { client_cert_path: missing.display().to_string(), ..pki.server() };
    let err = TlsConfig { client_key_path: pki.client_key.display().to_string(), ..err }.client_tls().unwrap_err();
    assert!(err.to_string().contains("nope.pem") && err.to_string().contains("tls.client.certPath"), "{err}");
}
