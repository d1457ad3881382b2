//! TLS on remoting connections (namesrv, broker, controller and proxy remoting ports, and the
//! clients of all of them), and the pieces the gRPC proxy shares: the `tls.server.mode`
//! setting, PEM loading, the self-signed certificate and the verifiers.
//!
//! Java configures TLS with JVM system properties (`TlsSystemConfig`), overridden by the file
//! named by `tls.config.file`. FerroMQ has no system properties, so [`TlsConfig::load`] reads the
//! same `tls.*` keys from a process's own config file and then from `tls.config.file`
//! (docs/decisions/0018-remoting-tls.md).
//!
//! A server tells TLS from plaintext by the first byte of each connection, as Java's
//! `HandshakeHandler` does: `0x16` starts a TLS handshake record, anything else is a remoting
//! frame ([`ServerTls::accept`]). `permissive` (Java's default) serves both on one port.
//!
//! Encrypted private keys (`tls.*.keyPassword`) are read when RocketMQ's TLS guide made them
//! (PKCS#8 with PBE-SHA1-RC4, `pbe.rs`); other schemes are refused with a message saying how to
//! convert them. What this module deliberately does not do: the system's root certificates (a
//! verifying side needs its `trustCertPath`), host-name checks of server certificates (Java's
//! clients check the chain only), and `tls.ciphers` / `tls.protocols` (rustls' safe defaults:
//! TLS 1.2 and 1.3).

mod client;
mod config;
mod error;
mod pbe;
mod pem;
mod server;
mod verify;

use std::fmt;
use std::str::FromStr;

pub use client::ClientTls;
pub use config::{ClientAuth, TlsConfig, DEFAULT_TLS_CONFIG_FILE};
pub use error::TlsError;
pub use pbe::{decrypt_der, decrypt_pem, PbeError};
pub use pem::{load_cert_chain, load_private_key, load_protected_private_key, self_signed, CertifiedKey};
pub use server::{Accepted, ServerTls, TLS_HANDSHAKE_TIMEOUT};
pub use verify::{AnyClientCertificate, ChainOnlyServerVerifier, TrustAnyServer};

/// The crypto provider of every TLS configuration built here. Passed explicitly, so the result
/// does not depend on which provider another crate in the process installed as the default.
pub fn crypto_provider() -> std::sync::Arc<tokio_rustls::rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider())
}

/// The TLS record type of a handshake record: the first byte of every ClientHello.
pub const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// `tls.server.mode`: which connections a server port accepts.
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

    /// Whether TLS connections are served, i.e. whether a server configuration is needed.
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
}
