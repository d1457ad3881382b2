//! HAProxy's PROXY protocol (v1 text, v2 binary) in front of a remoting connection: a load
//! balancer tells the server the client's real address (acl-and-tls.md section 4, step 1; Java
//! 5.x detects it on every connection).
//!
//! Java believes a PROXY header from anyone, so any client can claim any address and pass the
//! address checks of ACL 1.0, ACL 2.0 and the white lists. FerroMQ believes it only from the
//! addresses of `proxyProtocolTrustedAddresses` (the load balancers); a header from anyone else
//! closes the connection. See docs/decisions/0020.
//!
//! A remoting frame starts with its length (`0x00` for any frame under 16 MiB), TLS with
//! `0x16`; a PROXY header with `P` (v1) or `0x0D` (v2), so one peeked byte tells them apart.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use ferromq_config::IpBlock;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tracing::{debug, warn};

/// The twelve bytes a v2 header starts with.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The six bytes a v1 header starts with.
pub const V1_PREFIX: &[u8; 6] = b"PROXY ";
/// Longest v1 line, CRLF included (the specification's bound).
const V1_MAX: usize = 107;
/// Longest v2 address block accepted (addresses plus TLVs; the specification allows 65,535,
/// which no load balancer sends).
const V2_MAX_PAYLOAD: usize = 2048;

/// Why a PROXY header was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProxyHeaderError {
    /// The header is not well formed.
    #[error("malformed PROXY protocol header: {0}")]
    Malformed(String),
}

/// Whether the connection's first bytes `seen` start a PROXY header: `Some(true)` once they
/// hold a whole v1 prefix (`PROXY `) or v2 signature, `Some(false)` as soon as they differ from
/// both (`PRI * HTTP/2.0`, the HTTP/2 preface, also starts with `P`), `None` while too few
/// have arrived to tell.
pub fn starts_header(seen: &[u8]) -> Option<bool> {
    let mut undecided = false;
    for signature in [&V1_PREFIX[..], &V2_SIGNATURE[..]] {
        let n = seen.len().min(signature.len());
        if seen[..n] == signature[..n] {
            if n == signature.len() {
                return Some(true);
            }
            undecided = true;
        }
    }
    (!undecided).then_some(false)
}

/// Peeks at a connection's first bytes until [`starts_header`] can tell (within `timeout`;
/// a connection that ends or stays silent first is taken as not starting one, as is one whose
/// first read fails). The header's first byte when it starts one.
async fn peek_header_start(stream: &TcpStream, timeout: Duration) -> Option<u8> {
    let mut seen = [0u8; 12];
    let look = async {
        loop {
            let n = match stream.peek(&mut seen).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => n,
            };
            match starts_header(&seen[..n]) {
                Some(decided) => return decided.then_some(seen[0]),
                // Part of a signature so far: wait a moment for the rest (peek returns at
                // once while any byte is buffered).
                None => tokio::time::sleep(Duration::from_millis(2)).await,
            }
        }
    };
    tokio::time::timeout(timeout, look).await.unwrap_or(None)
}

/// Parses a v1 line (`PROXY TCP4 <src> <dst> <sport> <dport>\r\n`, or `PROXY UNKNOWN...`):
/// `Some(source)` for TCP4/TCP6, `None` for UNKNOWN (the connection's own address stands).
///
/// # Errors
/// A line that is not a v1 header.
pub fn parse_v1(line: &[u8]) -> Result<Option<SocketAddr>, ProxyHeaderError> {
    let bad = |why: &str| ProxyHeaderError::Malformed(format!("v1: {why}"));
    let text = std::str::from_utf8(line).map_err(|_| bad("not ASCII"))?;
    let text = text.strip_suffix("\r\n").ok_or_else(|| bad("no CRLF"))?;
    let mut parts = text.split(' ');
    if parts.next() != Some("PROXY") {
        return Err(bad("no PROXY prefix"));
    }
    let family = parts.next().ok_or_else(|| bad("no protocol"))?;
    if family == "UNKNOWN" {
        return Ok(None);
    }
    let fields: Vec<&str> = parts.collect();
    let [src, _dst, sport, _dport] = fields[..] else {
        return Err(bad("expected source, destination and two ports"));
    };
    let ip: IpAddr = src.parse().map_err(|_| bad("bad source address"))?;
    match (family, ip) {
        ("TCP4", IpAddr::V4(_)) | ("TCP6", IpAddr::V6(_)) => {}
        _ => return Err(bad("protocol and address family differ")),
    }
    let port: u16 = sport.parse().map_err(|_| bad("bad source port"))?;
    Ok(Some(SocketAddr::new(ip, port)))
}

/// Parses a v2 header's command/family bytes and address block: `Some(source)` for a PROXY
/// command over TCP or UDP on IPv4/IPv6, `None` for LOCAL or other families.
///
/// # Errors
/// An unknown version or command, or an address block too short for its family.
pub fn parse_v2(version_command: u8, family: u8, payload: &[u8]) -> Result<Option<SocketAddr>, ProxyHeaderError> {
    let bad = |why: String| ProxyHeaderError::Malformed(format!("v2: {why}"));
    if version_command >> 4 != 2 {
        return Err(bad(format!("version {}", version_command >> 4)));
    }
    match version_command & 0x0F {
        0 => return Ok(None),
        1 => {}
        c => return Err(bad(format!("command {c}"))),
    }
    let source = match family >> 4 {
        1 => {
            let a = payload.get(..12).ok_or_else(|| bad("IPv4 block shorter than 12 bytes".into()))?;
            let ip = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
            SocketAddr::new(IpAddr::V4(ip), u16::from_be_bytes([a[8], a[9]]))
        }
        2 => {
            let a = payload.get(..36).ok_or_else(|| bad("IPv6 block shorter than 36 bytes".into()))?;
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&a[..16]);
            SocketAddr::new(IpAddr::V6(Ipv6Addr::from(octets)), u16::from_be_bytes([a[32], a[33]]))
        }
        _ => return Ok(None),
    };
    Ok(Some(source))
}

/// Reads a PROXY header off `stream` if one starts it, within `timeout`. `Ok(peer)` is the
/// address to use for the connection: `peer` itself when there is no header (or it says
/// LOCAL/UNKNOWN), the header's source otherwise. `Err` (logged) when the header comes from
/// an address not in `trusted`, is malformed, or does not arrive in time: close the
/// connection. No byte past the header is consumed.
pub(crate) async fn accept(
    stream: &mut TcpStream,
    peer: SocketAddr,
    trusted: &[IpBlock],
    timeout: Duration,
) -> Result<SocketAddr, ()> {
    // Not a header (or nothing yet, which TLS detection handles): the connection as is.
    let Some(first) = peek_header_start(stream, timeout).await else {
        return Ok(peer);
    };
    if !trusted.iter().any(|b| b.contains(peer.ip())) {
        warn!(remote_addr = %peer,
            "refusing a PROXY protocol header from an address not in proxyProtocolTrustedAddresses (list the load balancers there)");
        return Err(());
    }
    let read = async {
        if first == V1_PREFIX[0] {
            let mut line = Vec::with_capacity(V1_MAX);
            while !line.ends_with(b"\r\n") {
                if line.len() >= V1_MAX {
                    return Err(ProxyHeaderError::Malformed("v1: no CRLF within 107 bytes".into()));
                }
                line.push(stream.read_u8().await.map_err(|e| ProxyHeaderError::Malformed(e.to_string()))?);
            }
            parse_v1(&line)
        } else {
            let mut head = [0u8; 16];
            stream.read_exact(&mut head).await.map_err(|e| ProxyHeaderError::Malformed(e.to_string()))?;
            if head[..12] != V2_SIGNATURE {
                return Err(ProxyHeaderError::Malformed("v2: bad signature".into()));
            }
            let len = usize::from(u16::from_be_bytes([head[14], head[15]]));
            if len > V2_MAX_PAYLOAD {
                return Err(ProxyHeaderError::Malformed(format!("v2: address block of {len} bytes")));
            }
            let mut payload = vec![0u8; len];
            stream.read_exact(&mut payload).await.map_err(|e| ProxyHeaderError::Malformed(e.to_string()))?;
            parse_v2(head[12], head[13], &payload)
        }
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(Some(source))) => {
            debug!(remote_addr = %source, proxy = %peer, "PROXY protocol: client address");
            Ok(source)
        }
        Ok(Ok(None)) => Ok(peer),
        Ok(Err(e)) => {
            warn!(remote_addr = %peer, error = %e, "closing the connection");
            Err(())
        }
        Err(_) => {
            warn!(remote_addr = %peer, "PROXY protocol header incomplete in time; closing the connection");
            Err(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_lines_of_the_specification() {
        let addr = |s: &str| Some(s.parse::<SocketAddr>().unwrap());
        assert_eq!(parse_v1(b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n"), Ok(addr("192.168.0.1:56324")));
        assert_eq!(parse_v1(b"PROXY TCP6 2001:db8::1 2001:db8::2 4000 9876\r\n"), Ok(addr("[2001:db8::1]:4000")));
        assert_eq!(parse_v1(b"PROXY UNKNOWN\r\n"), Ok(None));
        assert_eq!(parse_v1(b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n"), Ok(None));
        for bad in [
            &b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\n"[..],
            b"PROXY TCP4 2001:db8::1 192.168.0.11 56324 443\r\n",
            b"PROXY TCP4 192.168.0.1 192.168.0.11 65536 443\r\n",
            b"PROXY TCP4 192.168.0.1\r\n",
            b"PROXX TCP4 192.168.0.1 192.168.0.11 1 2\r\n",
        ] {
            assert!(parse_v1(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn v2_blocks_of_the_specification() {
        // PROXY, TCP over IPv4: 10.1.2.3:4567 -> 10.0.0.1:10911.
        let v4 = [10, 1, 2, 3, 10, 0, 0, 1, 0x11, 0xD7, 0x2A, 0x9F];
        assert_eq!(parse_v2(0x21, 0x11, &v4), Ok(Some("10.1.2.3:4567".parse().unwrap())));
        let mut v6 = vec![0u8; 36];
        v6[0] = 0x20;
        v6[1] = 0x01;
        v6[15] = 7;
        v6[32..34].copy_from_slice(&9000u16.to_be_bytes());
        assert_eq!(parse_v2(0x21, 0x21, &v6), Ok(Some("[2001::7]:9000".parse().unwrap())));
        // LOCAL (a health check) and UNSPEC keep the connection's address.
        assert_eq!(parse_v2(0x20, 0x00, &[]), Ok(None));
        assert_eq!(parse_v2(0x21, 0x00, &[]), Ok(None));
        assert!(parse_v2(0x11, 0x11, &v4).is_err(), "version 1 in a v2 header");
        assert!(parse_v2(0x22, 0x11, &v4).is_err(), "command 2");
        assert!(parse_v2(0x21, 0x11, &v4[..8]).is_err(), "short block");
    }

    #[test]
    fn first_bytes_tell_headers_from_frames_and_tls() {
        assert_eq!(starts_header(b"PROXY TCP4 "), Some(true));
        assert_eq!(starts_header(b"PROX"), None, "not yet");
        assert_eq!(starts_header(b"PRI * HTTP/2.0"), Some(false), "the HTTP/2 preface");
        assert_eq!(starts_header(b"PRI"), Some(false));
        assert_eq!(starts_header(&V2_SIGNATURE[..]), Some(true));
        assert_eq!(starts_header(&V2_SIGNATURE[..5]), None);
        assert_eq!(starts_header(b"\r\n\r\nX"), Some(false));
        assert_eq!(starts_header(&[0, 0, 0, 40]), Some(false), "a remoting frame");
        assert_eq!(starts_header(b"P"), None, "a P may start either");
        assert_eq!(starts_header(&[0x0D]), None, "a CR may start v2");
        assert_eq!(starts_header(&[0x00]), Some(false), "a remoting frame under 16 MiB");
        assert_eq!(starts_header(&[0x16]), Some(false), "a TLS record");
    }
}
