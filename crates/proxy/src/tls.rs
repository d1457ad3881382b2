//! TLS for the gRPC port: the `tls.server.mode` setting and the rustls server configuration.
//!
//! RocketMQ 5.x clients turn TLS on by default and trust any certificate, while some users turn
//! it off; Java's proxy therefore serves both on one port (`permissive`, the default) and, with
//! `tlsTestModeEnable` (default true), presents a self-signed certificate generated at start.
//! [`server_config`] builds the matching [`rustls::ServerConfig`]; the listener
//! ([`crate::listener`]) decides per connection whether to use it. The pieces both protocols
//! share (the mode, PEM files, the self-signed certificate) live in `ferromq_remoting::tls`.

use std::path::Path;
use std::sync::Arc;

use ferromq_remoting::tls::{crypto_provider, load_cert_chain, load_private_key, self_signed, CertifiedKey};
use tokio_rustls::rustls;

pub use ferromq_remoting::tls::{TlsError, TlsMode};

/// The ALPN protocol offered: gRPC runs over HTTP/2 only.
const ALPN_H2: &[u8] = b"h2";

/// The subject of the gRPC port's self-signed certificate.
const SELF_SIGNED_NAME: &str = "FerroMQ gRPC proxy (self-signed)";

/// Builds the TLS server configuration of the gRPC port.
///
/// With both paths the PEM certificate chain (end-entity first) and private key (PKCS#8,
/// PKCS#1 or SEC1, unencrypted) are loaded; with neither, a self-signed certificate is generated
/// (Java's `tlsTestModeEnable`), valid for `localhost`, `127.0.0.1`, `::1` and the host name,
/// since the clients trust any certificate anyway. ALPN offers `h2` only; clients that send no
/// ALPN are accepted as well (rustls only refuses a client whose ALPN list lacks `h2`).
///
/// The ring provider is passed explicitly so the result does not depend on which provider some
/// other crate in the process installed as the default (or on none being installed).
///
/// # Errors
/// Only one path given; an unreadable or malformed file (named); a key that does not match the
/// certificate; a generation failure.
pub fn server_config(cert_path: Option<&Path>, key_path: Option<&Path>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let (CertifiedKey { chain, key }, files) = match (cert_path, key_path) {
        (Some(cert), Some(key)) => (
            CertifiedKey {
                chain: load_cert_chain(cert, "tls.server.certPath")?,
                key: load_private_key(key, "tls.server.keyPath")?,
            },
            Some((cert, key)),
        ),
        (None, None) => {
            tracing::info!(
                "TLS on the gRPC port uses a self-signed certificate generated at start (tlsTestModeEnable=true); \
                 clients must trust any certificate, as RocketMQ clients do by default"
            );
            (self_signed(SELF_SIGNED_NAME)?, None)
        }
        (Some(_), None) => {
            return Err(TlsError::IncompletePaths { given: "tls.server.certPath", missing: "tls.server.keyPath" })
        }
        (None, Some(_)) => {
            return Err(TlsError::IncompletePaths { given: "tls.server.keyPath", missing: "tls.server.certPath" })
        }
    };
    let mut config = rustls::ServerConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Build)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|source| match files {
            Some((cert, key)) => TlsError::Rejected { cert: cert.to_owned(), key: key.to_owned(), source },
            None => TlsError::Build(source),
        })?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(config))
}

/// [`server_config`] from the proxy's settings: `tlsTestModeEnable` wins over the paths (as in
/// Java, where test mode ignores them); otherwise both `tls.server.certPath` and
/// `tls.server.keyPath` (empty = not set) are required.
///
/// # Errors
/// As [`server_config`]; a missing path names the setting.
pub fn server_config_from_settings(
    tls_test_mode_enable: bool,
    cert_path: &str,
    key_path: &str,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    if tls_test_mode_enable {
        return server_config(None, None);
    }
    let cert = (!cert_path.trim().is_empty()).then(|| Path::new(cert_path.trim()));
    let key = (!key_path.trim().is_empty()).then(|| Path::new(key_path.trim()));
    match (cert, key) {
        (Some(cert), Some(key)) => server_config(Some(cert), Some(key)),
        (None, _) => {
            Err(TlsError::IncompletePaths { given: "tlsTestModeEnable=false", missing: "tls.server.certPath" })
        }
        (_, None) => Err(TlsError::IncompletePaths { given: "tlsTestModeEnable=false", missing: "tls.server.keyPath" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_config_offers_h2() {
        let config = server_config(None, None).unwrap();
        assert_eq!(config.alpn_protocols, vec![b"h2".to_vec()]);
    }

    #[test]
    fn one_path_alone_is_refused() {
        let err = server_config(Some(Path::new("/x.crt")), None).unwrap_err().to_string();
        assert!(err.contains("tls.server.keyPath"), "{err}");
        let err = server_config_from_settings(false, "", "/x.key").unwrap_err().to_string();
        assert!(err.contains("tls.server.certPath"), "{err}");
        assert!(server_config_from_settings(true, "", "").is_ok());
    }
}
