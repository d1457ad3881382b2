//! The client side of TLS connections (Java: `NettyRemotingClient` with `useTLS`).

use std::fmt;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

use crate::tls::{crypto_provider, TrustAnyServer};

/// How a client connects with TLS: which server certificates it accepts and which certificate,
/// if any, it presents. Built by [`crate::tls::TlsConfig::client_tls`]; the default trusts any
/// server and presents none, as Java's clients do by default. Cheap to clone.
#[derive(Clone)]
pub struct ClientTls {
    connector: TlsConnector,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls").finish_non_exhaustive()
    }
}

impl Default for ClientTls {
    fn default() -> Self {
        let provider = crypto_provider();
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("the ring provider supports TLS 1.2 and 1.3")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(TrustAnyServer::new(provider)))
            .with_no_client_auth();
        ClientTls::new(Arc::new(config))
    }
}

impl ClientTls {
    /// Connections made with `config`.
    pub fn new(config: Arc<rustls::ClientConfig>) -> ClientTls {
        ClientTls { connector: TlsConnector::from(config) }
    }

    /// Runs the TLS handshake on `stream`, connected to `addr` (`host:port`).
    pub async fn connect(&self, addr: &str, stream: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        self.connector.connect(server_name(addr), stream).await
    }
}

/// The name the handshake is made for: the address's host (an IP address sends no SNI). Names
/// are not checked against certificates (Java's clients do not either), so a host rustls
/// cannot represent falls back to `localhost`.
fn server_name(addr: &str) -> ServerName<'static> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned())
        .unwrap_or_else(|_| ServerName::DnsName("localhost".try_into().expect("a valid DNS name")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_come_from_the_address_host() {
        assert!(matches!(server_name("127.0.0.1:9876"), ServerName::IpAddress(_)));
        assert!(matches!(server_name("[::1]:9876"), ServerName::IpAddress(_)));
        assert_eq!(server_name("broker-a.example:10911"), ServerName::try_from("broker-a.example").unwrap());
        assert_eq!(server_name("bad name:1"), ServerName::try_from("localhost").unwrap());
    }
}
