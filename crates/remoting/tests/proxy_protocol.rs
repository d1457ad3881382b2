//! PROXY protocol headers in front of remoting connections over real loopback TCP: from a
//! trusted load balancer the header's source becomes the connection's address (v1 and v2, in
//! plaintext and before TLS); LOCAL keeps the real one; from any other address, or malformed,
//! the connection is closed; connections without a header are served as before.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use ferromq_config::IpBlock;
use ferromq_protocol::{decode_frame, encode_frame, response_code, RemotingCommand, SerializeType};
use ferromq_remoting::proxy_protocol::V2_SIGNATURE;
use ferromq_remoting::tls::{ClientTls, TlsConfig};
use ferromq_remoting::{Dispatcher, RemotingServer, ServerConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

const WHO: i32 = 9101;
const T: Duration = Duration::from_secs(10);

/// Serves WHO: answers the connection's remote address as the remark.
async fn start(trusted: &str) -> (String, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut d = Dispatcher::new();
    d.register_sync(WHO, |conn, req| {
        Some(RemotingCommand::response_to(req, response_code::SUCCESS, Some(conn.remote_addr().to_string())))
    });
    let config = ServerConfig {
        proxy_protocol_trusted: IpBlock::parse_list("proxyProtocolTrustedAddresses", trusted).unwrap().into(),
        tls: TlsConfig::load([("tls.server.mode", "permissive")]).unwrap().server_tls("proxy test").unwrap(),
        ..ServerConfig::default()
    };
    let server = RemotingServer::new(config, Arc::new(d));
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = server
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await;
    });
    (addr, stop)
}

/// Sends WHO on `stream`: `Some(remark)` when answered, `None` when the server closed it.
async fn who<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S) -> Option<String> {
    let mut out = BytesMut::new();
    let mut req = RemotingCommand::request(WHO);
    req.opaque = 3;
    encode_frame(&req, SerializeType::Json, &mut out).unwrap();
    stream.write_all(&out).await.ok()?;
    let mut buf = BytesMut::new();
    loop {
        if let Some(answer) = decode_frame(&mut buf, usize::MAX).unwrap() {
            return answer.remark;
        }
        let mut chunk = [0u8; 1024];
        match tokio::time::timeout(T, stream.read(&mut chunk)).await.expect("answered or closed in time") {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn v2(command: u8, family: u8, block: &[u8]) -> Vec<u8> {
    let mut h = V2_SIGNATURE.to_vec();
    h.push(0x20 | command);
    h.push(family);
    h.extend_from_slice(&(block.len() as u16).to_be_bytes());
    h.extend_from_slice(block);
    h
}

#[tokio::test]
async fn a_trusted_balancer_names_the_client() {
    let (addr, _stop) = start("127.0.0.1").await;
    // v1, plaintext.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(b"PROXY TCP4 10.9.8.7 10.0.0.1 40001 10911\r\n").await.unwrap();
    assert_eq!(who(&mut s).await.as_deref(), Some("10.9.8.7:40001"));
    assert_eq!(who(&mut s).await.as_deref(), Some("10.9.8.7:40001"), "the whole connection is the client's");
    // v2 with a TLV after the addresses, IPv6.
    let mut block = vec![0u8; 36];
    block[0] = 0x20;
    block[1] = 0x01;
    block[15] = 9;
    block[32..34].copy_from_slice(&5555u16.to_be_bytes());
    block.extend_from_slice(&[0x04, 0x00, 0x01, 0x00]); // PP2_TYPE_NOOP
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(&v2(1, 0x21, &block)).await.unwrap();
    assert_eq!(who(&mut s).await.as_deref(), Some("[2001::9]:5555"));
    // LOCAL (a balancer's health check): the connection's own address.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let own = s.local_addr().unwrap().to_string();
    s.write_all(&v2(0, 0x00, &[])).await.unwrap();
    assert_eq!(who(&mut s).await, Some(own));
    // The header, then TLS (permissive): the header's address.
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    tcp.write_all(&v2(1, 0x11, &[192, 168, 7, 1, 10, 0, 0, 1, 0x1F, 0x90, 0x2A, 0x9F])).await.unwrap();
    let mut tls = ClientTls::default().connect(&addr, tcp).await.expect("TLS after the header");
    assert_eq!(who(&mut tls).await.as_deref(), Some("192.168.7.1:8080"));
    // No header: served as before.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let own = s.local_addr().unwrap().to_string();
    assert_eq!(who(&mut s).await, Some(own));
}

#[tokio::test]
async fn headers_from_anyone_else_or_malformed_close_the_connection() {
    let (addr, _stop) = start("10.0.0.0/8").await;
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(b"PROXY TCP4 10.9.8.7 10.0.0.1 40001 10911\r\n").await.unwrap();
    assert_eq!(who(&mut s).await, None, "an untrusted header was believed");
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(&v2(1, 0x11, &[10, 1, 1, 1, 10, 0, 0, 1, 0, 1, 0, 2])).await.unwrap();
    assert_eq!(who(&mut s).await, None);
    // Without a header this client is still served.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    assert!(who(&mut s).await.is_some());

    let (addr, _stop) = start("127.0.0.1").await;
    for bad in [
        b"PROXY TCP4 10.9.8.7 10.0.0.1 40001\r\n".to_vec(),
        b"PROXY TCP9 10.9.8.7 10.0.0.1 1 2\r\n".to_vec(),
        [b"PROXY TCP4 ".to_vec(), vec![b'1'; 120]].concat(),
        v2(2, 0x11, &[0; 12]),
        v2(1, 0x11, &[10, 1, 1]),
    ] {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&bad).await.unwrap();
        assert_eq!(who(&mut s).await, None, "{:?} was accepted", String::from_utf8_lossy(&bad));
    }
}
