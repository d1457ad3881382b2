//! TLS for the gRPC port: the `tls.server.mode` setting and the rustls server configuration.
//!
//! RocketMQ 5.x clients turn TLS on by default and trust any certificate, while some users turn
//! it off; Java's proxy therefore serves both on one port (`permissive`, the default) and, with
//! `tlsTestModeEnable` (default true), presents a self-signed certificate generated at start.
//! [`server_config`] builds the matching [`rustls::ServerConfig`]; the listener
//! ([`crate::listener`]) decides per connection whether to use it.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::{self, PemObject};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The ALPN protocol offered: gRPC runs over HTTP/2 only.
const ALPN_H2: &[u8] = b"h2";

/// `tls.server.mode`: which connections the gRPC port accepts.
///
/// Java's `TlsMode.parse` silently falls back to `permissive` for an unknown value; a typo in
/// a security setting is better refused, so parsing here fails and names the allowed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TlsMode {
    /// `disabled`: plaintext only; a TLS ClientHello is refused.
    Disabled,
    /// `permissive` (Java's default): TLS and plaintext on the same port, told apart by the
    /// first byte of the connection.
    #[default]
    Permissive,
    /// `enforcing`: TLS only; plaintext connections are refused.
    Enforcing,
}

impl TlsMode {
    /// Every mode, in the order of their Java names in error messages.
    pub const ALL: [TlsMode; 3] = [TlsMode::Disabled, TlsMode::Permissive, TlsMode::Enforcing];

    /// The Java spelling (`disabled`, `permissive`, `enforcing`).
    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::Permissive => "permissive",
            TlsMode::Enforcing => "enforcing",
        }
    }

    /// Whether TLS connections are served, i.e. whether a [`rustls::ServerConfig`] is needed.
    pub fn accepts_tls(self) -> bool {
        self != TlsMode::Disabled
    }

    /// Whether plaintext connections are served.
    pub fn accepts_plaintext(self) -> bool {
        self != TlsMode::Enforcing
    }
}

impl fmt::Display for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TlsMode {
    type Err = TlsError;

    /// Case-insensitive, surrounding whitespace ignored.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        TlsMode::ALL
            .into_iter()
            .find(|mode| mode.as_str().eq_ignore_ascii_case(text))
            .ok_or_else(|| TlsError::UnknownMode { value: text.to_owned() })
    }
}

impl ferromq_config::ConfigValue for TlsMode {
    const EXPECTED: &'static str = "disabled, permissive or enforcing";
    fn parse_value(text: &str) -> Option<Self> {
        text.parse().ok()
    }
    fn render(&self) -> String {
        self.as_str().to_owned()
    }
}

/// Why TLS could not be set up. Messages name the file or setting concerned, since they end up
/// in front of an operator at start-up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// `tls.server.mode` has a value that is not a mode.
    #[error("unknown tls.server.mode {value:?}: expected disabled, permissive or enforcing")]
    UnknownMode {
        /// The text given.
        value: String,
    },
    /// Only one of the certificate and key paths was given.
    #[error("{given} is set but {missing} is not: a certificate needs its private key and vice versa")]
    IncompletePaths {
        /// The setting that was given.
        given: &'static str,
        /// The setting that is missing.
        missing: &'static str,
    },
    /// A PEM file could not be read.
    #[error("cannot read TLS {what} file {}: {source}", path.display())]
    Read {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A PEM file is malformed.
    #[error("TLS {what} file {} is not valid PEM: {reason}", path.display())]
    Pem {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The parser's explanation.
        reason: String,
    },
    /// The certificate file has no `CERTIFICATE` section.
    #[error("TLS certificate file {} contains no \"BEGIN CERTIFICATE\" section", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The key file has no private key section.
    #[error(
        "TLS private key file {} contains no private key (expected \"BEGIN PRIVATE KEY\", \
         \"BEGIN RSA PRIVATE KEY\" or \"BEGIN EC PRIVATE KEY\")",
        path.display()
    )]
    NoPrivateKey {
        /// The file.
        path: PathBuf,
    },
    /// The key is password-protected (Java's `tls.server.keyPassword`), which is not supported.
    #[error(
        "TLS private key file {} is encrypted, which is not supported (tls.server.keyPassword); \
         decrypt it, e.g. `openssl pkey -in {} -out plain.key`",
        path.display(),
        path.display()
    )]
    EncryptedKey {
        /// The file.
        path: PathBuf,
    },
    /// rustls refused the certificate chain and key (e.g. they do not belong together, or the
    /// key type is unsupported).
    #[error("TLS certificate {} and private key {} cannot be used together: {source}", cert.display(), key.display())]
    Rejected {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls' reason.
        #[source]
        source: rustls::Error,
    },
    /// The self-signed certificate could not be generated.
    #[error("cannot generate the self-signed TLS certificate: {0}")]
    SelfSigned(#[from] rcgen::Error),
    /// rustls refused the configuration itself (protocol versions or generated key).
    #[error("cannot build the TLS server configuration: {0}")]
    Config(#[source] rustls::Error),
    /// A mode serving TLS was asked for without a server configuration.
    #[error("tls.server.mode={mode} serves TLS connections but no TLS server configuration was given")]
    MissingConfig {
        /// The mode.
        mode: TlsMode,
    },
}

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
    let (chain, key) = match (cert_path, key_path) {
        (Some(cert), Some(key)) => (load_cert_chain(cert)?, load_private_key(key)?),
        (None, None) => self_signed()?,
        (Some(_), None) => {
            return Err(TlsError::IncompletePaths { given: "tls.server.certPath", missing: "tls.server.keyPath" })
        }
        (None, Some(_)) => {
            return Err(TlsError::IncompletePaths { given: "tls.server.keyPath", missing: "tls.server.certPath" })
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_no_client_auth();
    let mut config = match (cert_path, key_path) {
        (Some(cert_path), Some(key_path)) => builder
            .with_single_cert(chain, key)
            .map_err(|source| TlsError::Rejected { cert: cert_path.to_owned(), key: key_path.to_owned(), source })?,
        _ => builder.with_single_cert(chain, key).map_err(TlsError::Config)?,
    };
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

fn read_file(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { what, path: path.to_owned(), source })
}

fn pem_error(what: &'static str, path: &Path, error: pem::Error) -> TlsError {
    TlsError::Pem { what, path: path.to_owned(), reason: error.to_string() }
}

fn load_cert_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    const WHAT: &str = "certificate";
    let text = read_file(WHAT, path)?;
    let chain =
        CertificateDer::pem_slice_iter(&text).collect::<Result<Vec<_>, _>>().map_err(|e| pem_error(WHAT, path, e))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate { path: path.to_owned() });
    }
    Ok(chain)
}

fn load_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    const WHAT: &str = "private key";
    let text = read_file(WHAT, path)?;
    match PrivateKeyDer::from_pem_slice(&text) {
        Ok(key) => Ok(key),
        Err(pem::Error::NoItemsFound) => {
            // Tell an encrypted key apart from a file without any key: the fix differs.
            // (rustls' PEM reader skips sections it does not know, such as these.)
            let text = String::from_utf8_lossy(&text);
            let encrypted =
                text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || text.contains("Proc-Type: 4,ENCRYPTED");
            if encrypted {
                Err(TlsError::EncryptedKey { path: path.to_owned() })
            } else {
                Err(TlsError::NoPrivateKey { path: path.to_owned() })
            }
        }
        Err(e) => Err(pem_error(WHAT, path, e)),
    }
}

/// The machine's host name, for the self-signed certificate's SANs; `None` when it cannot be
/// found without a system call (no `libc` dependency) or is not a valid DNS name.
fn host_name() -> Option<String> {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|file| std::fs::read_to_string(file).ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| {
            !name.is_empty()
                && !name.eq_ignore_ascii_case("localhost")
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        })
}

fn self_signed() -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let mut names = vec![
        "localhost".to_owned(),
        IpAddr::V4(Ipv4Addr::LOCALHOST).to_string(),
        IpAddr::V6(Ipv6Addr::LOCALHOST).to_string(),
    ];
    names.extend(host_name());
    let mut params = rcgen::CertificateParams::new(names.clone())?;
    params.distinguished_name.push(rcgen::DnType::CommonName, "FerroMQ gRPC proxy (self-signed)");
    let key = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    tracing::info!(
        subject_alt_names = ?names,
        key_algorithm = "ECDSA P-256",
        "TLS on the gRPC port uses a self-signed certificate generated at start (tlsTestModeEnable=true); \
         clients must trust any certificate, as RocketMQ clients do by default"
    );
    Ok((vec![cert.der().clone()], PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferromq_config::ConfigValue;

    #[test]
    fn modes_parse_from_java_strings_in_any_case() {
        assert_eq!("disabled".parse::<TlsMode>().unwrap(), TlsMode::Disabled);
        assert_eq!("Permissive".parse::<TlsMode>().unwrap(), TlsMode::Permissive);
        assert_eq!(" ENFORCING ".parse::<TlsMode>().unwrap(), TlsMode::Enforcing);
        assert_eq!(TlsMode::default(), TlsMode::Permissive);
        for mode in TlsMode::ALL {
            assert_eq!(mode.to_string().parse::<TlsMode>().unwrap(), mode);
            assert_eq!(TlsMode::parse_value(&mode.render()), Some(mode));
        }
    }

    #[test]
    fn unknown_mode_names_value_and_allowed_ones() {
        let err = "strict".parse::<TlsMode>().unwrap_err().to_string();
        assert!(err.contains("\"strict\""), "{err}");
        for allowed in ["disabled", "permissive", "enforcing"] {
            assert!(err.contains(allowed), "{err}");
        }
        assert_eq!(TlsMode::parse_value("strict"), None);
    }

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
