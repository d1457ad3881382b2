//! The `tls.*` settings (Java: `TlsSystemConfig` and `TlsHelper.buildSslContext`) and what they
//! build: the server side of a port and the client side of connections.
//!
//! Java reads the keys from JVM system properties and then from the file named by
//! `tls.config.file`; FerroMQ reads them from the process's config file and then from that file
//! ([`TlsConfig::load`]). Differences from Java, each stricter, never looser
//! (docs/decisions/0018-remoting-tls.md):
//! - a bad value (a typo in `tls.server.mode`, `tls.server.need.client.auth`, a boolean) is an
//!   error naming the key, where Java falls back to a default;
//! - test mode (`tls.test.mode.enable`, default true) only replaces the server's certificate
//!   with a self-signed one; the client-authentication settings and the client's
//!   `tls.client.authServer` and certificate are honoured in test mode too (Java ignores them
//!   there);
//! - a side that verifies its peer needs its `trustCertPath` (Java falls back to the JDK's CA
//!   certificates).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferromq_config::{properties_text, rocketmq_config, ConfigError, RocketMqConfig};
use tokio_rustls::rustls;
use tokio_rustls::rustls::client::danger::ServerCertVerifier;
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::server::danger::ClientCertVerifier;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tracing::warn;

use crate::tls::pem::{is_encrypted_pem, load_cert_chain, load_protected_private_key, load_trust_store, self_signed};
use crate::tls::verify::{AnyClientCertificate, ChainOnlyServerVerifier, TrustAnyServer};
use crate::tls::{crypto_provider, CertifiedKey, ClientTls, ServerTls, TlsError, TlsMode};

/// Java's default `tls.config.file`. Read when it exists; a file named explicitly must exist.
pub const DEFAULT_TLS_CONFIG_FILE: &str = "/etc/rocketmq/tls.properties";

const SERVER_CERT: &str = "tls.server.certPath";
const SERVER_KEY: &str = "tls.server.keyPath";
const SERVER_TRUST: &str = "tls.server.trustCertPath";
const CLIENT_CERT: &str = "tls.client.certPath";
const CLIENT_KEY: &str = "tls.client.keyPath";
const CLIENT_TRUST: &str = "tls.client.trustCertPath";

/// `tls.server.need.client.auth`: whether a server asks clients for a certificate (Java:
/// Netty's `ClientAuth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// `none` (default): no client certificate is asked for.
    #[default]
    None,
    /// `optional`: asked for; a client without one is let in.
    Optional,
    /// `require`: a client without a certificate is refused.
    Require,
}

impl ClientAuth {
    /// The Java spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuth::None => "none",
            ClientAuth::Optional => "optional",
            ClientAuth::Require => "require",
        }
    }
}

impl ferromq_config::ConfigValue for ClientAuth {
    // Java's `parseClientAuthMode` falls back to none on anything else; refused here.
    const EXPECTED: &'static str = "none, optional or require";
    fn parse_value(text: &str) -> Option<Self> {
        [ClientAuth::None, ClientAuth::Optional, ClientAuth::Require]
            .into_iter()
            .find(|mode| mode.as_str().eq_ignore_ascii_case(text.trim()))
    }
    fn render(&self) -> String {
        self.as_str().to_owned()
    }
}

rocketmq_config! {
    /// The `tls.*` settings of one process, with Java's keys and defaults. Its `Debug` output
    /// holds the key passwords: never log it.
    pub struct TlsConfig {
        /// `tls.server.mode`: `disabled`, `permissive` (TLS and plaintext on one port) or
        /// `enforcing`.
        server_mode: TlsMode = "tls.server.mode", default TlsMode::Permissive;
        /// `tls.enable`: clients connect with TLS (Java's default of `useTLS`).
        enable: bool = "tls.enable", default false;
        /// `tls.config.file`: a properties file whose `tls.*` keys override these.
        config_file: String = "tls.config.file", default DEFAULT_TLS_CONFIG_FILE.to_owned();
        /// `tls.test.mode.enable`: the server presents a self-signed certificate generated at
        /// start instead of `tls.server.certPath`.
        test_mode_enable: bool = "tls.test.mode.enable", default true;
        /// `tls.server.need.client.auth`: `none`, `optional` or `require`.
        server_need_client_auth: ClientAuth = "tls.server.need.client.auth", default ClientAuth::None;
        /// `tls.server.keyPath`: the server's private key (PEM, unencrypted).
        server_key_path: String = "tls.server.keyPath", default String::new();
        /// `tls.server.keyPassword`: encrypted keys are not supported.
        server_key_password: String = "tls.server.keyPassword", default String::new();
        /// `tls.server.certPath`: the server's certificate chain (PEM).
        server_cert_path: String = "tls.server.certPath", default String::new();
        /// `tls.server.authClient`: check client certificates against
        /// `tls.server.trustCertPath` (else any is accepted).
        server_auth_client: bool = "tls.server.authClient", default false;
        /// `tls.server.trustCertPath`: the CA certificates of client certificates (PEM).
        server_trust_cert_path: String = "tls.server.trustCertPath", default String::new();
        /// `tls.client.keyPath`: the client's private key, for servers asking for one.
        client_key_path: String = "tls.client.keyPath", default String::new();
        /// `tls.client.keyPassword`: encrypted keys are not supported.
        client_key_password: String = "tls.client.keyPassword", default String::new();
        /// `tls.client.certPath`: the client's certificate chain.
        client_cert_path: String = "tls.client.certPath", default String::new();
        /// `tls.client.authServer`: check server certificates against
        /// `tls.client.trustCertPath` (else any is accepted, as Java's default).
        client_auth_server: bool = "tls.client.authServer", default false;
        /// `tls.client.trustCertPath`: the CA certificates of server certificates (PEM).
        client_trust_cert_path: String = "tls.client.trustCertPath", default String::new();
    }
}

fn path_of(text: &str) -> Option<&Path> {
    let text = text.trim();
    (!text.is_empty()).then(|| Path::new(text))
}

impl TlsConfig {
    /// Whether `key` is a TLS setting (`tls.` prefix): such keys in a component's config file
    /// belong to [`TlsConfig`], not to the component.
    pub fn is_tls_key(key: &str) -> bool {
        key.starts_with("tls.")
    }

    /// The settings of a process: the `tls.*` entries of `entries` (its config file's keys;
    /// others are skipped), then every key of the file named by `tls.config.file` over them.
    /// The default file is read only when it exists; a file named explicitly must exist.
    /// Unknown `tls.*` keys are logged and ignored.
    ///
    /// # Errors
    /// A bad value (naming key and allowed values), an unreadable or malformed
    /// `tls.config.file`.
    pub fn load<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<TlsConfig, TlsError> {
        let mut config = TlsConfig::default();
        let mut problems = Vec::new();
        for (key, value) in entries.into_iter().filter(|(key, _)| Self::is_tls_key(key)) {
            match config.set(key, value) {
                Ok(true) => {}
                Ok(false) => warn!(key, "unknown TLS setting ignored"),
                Err(e) => problems.push(e.to_string()),
            }
        }
        if !problems.is_empty() {
            let source = ConfigError::Invalid { path: None, reason: problems.join("; ") };
            return Err(TlsError::Setting { file: None, source });
        }
        config.apply_config_file()?;
        Ok(config)
    }

    fn apply_config_file(&mut self) -> Result<(), TlsError> {
        let Some(path) = path_of(&self.config_file).map(Path::to_owned) else { return Ok(()) };
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && path == Path::new(DEFAULT_TLS_CONFIG_FILE) => {
                return Ok(());
            }
            Err(source) => return Err(TlsError::ConfigFile { path, source }),
        };
        let invalid = |reason: String| TlsError::Setting {
            file: Some(path.clone()),
            source: ConfigError::Invalid { path: Some(path.clone()), reason },
        };
        let entries = properties_text::parse(&text).map_err(|e| invalid(e.to_string()))?;
        let mut updated = self.clone();
        let mut problems = Vec::new();
        for (key, value) in &entries {
            // The file does not name another file.
            if key == "tls.config.file" {
                continue;
            }
            match updated.set(key, value) {
                Ok(true) => {}
                Ok(false) => warn!(key = %key, file = %path.display(), "unknown TLS setting ignored"),
                Err(e) => problems.push(e.to_string()),
            }
        }
        if !problems.is_empty() {
            return Err(invalid(problems.join("; ")));
        }
        tracing::debug!(file = %path.display(), keys = entries.len(), "TLS settings read from tls.config.file");
        *self = updated;
        Ok(())
    }

    /// Whether a server process's own client connections (a broker's to name servers, master
    /// and controllers; controllers' to each other; a proxy's to brokers) use TLS:
    /// `tls.enable`, or a server that itself accepts TLS only. Java: `BrokerStartup` sets its
    /// client's `useTLS` to `tls.enable`, defaulting to `tls.server.mode == enforcing`.
    pub fn server_process_clients_use_tls(&self) -> bool {
        self.enable || self.server_mode == TlsMode::Enforcing
    }

    /// The server side of a port for `tls.server.mode`: plaintext only for `disabled`, else
    /// with the certificate and client authentication these settings ask for.
    /// `common_name` names a self-signed certificate's subject (which server made it).
    ///
    /// # Errors
    /// Unreadable or unusable certificate, key or trust files (named with their key), a
    /// setting another needs that is empty.
    pub fn server_tls(&self, common_name: &str) -> Result<ServerTls, TlsError> {
        self.server_tls_with_alpn(common_name, &[])
    }

    /// [`TlsConfig::server_tls`] offering the application protocols `alpn` (in order of
    /// preference) to clients that ask for one; a client that asks for none is served too.
    /// The proxy's remoting port offers `h2` so gRPC clients over TLS can use it.
    ///
    /// # Errors
    /// As [`TlsConfig::server_tls`].
    pub fn server_tls_with_alpn(&self, common_name: &str, alpn: &[&[u8]]) -> Result<ServerTls, TlsError> {
        if !self.server_mode.accepts_tls() {
            return Ok(ServerTls::disabled());
        }
        let (mut config, certificate) = self.server_config(common_name)?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let tls = ServerTls::new(self.server_mode, Some(Arc::new(config)))?;
        let client_auth = match self.server_need_client_auth {
            ClientAuth::None => "",
            ClientAuth::Optional => ", client certificates optional",
            ClientAuth::Require => ", client certificates required",
        };
        Ok(tls.with_description(format!("{} ({certificate}{client_auth})", self.server_mode)))
    }

    /// The rustls server configuration of [`TlsConfig::server_tls`] (no ALPN), and a
    /// description of its certificate for the start-up log.
    ///
    /// # Errors
    /// As [`TlsConfig::server_tls`].
    pub fn server_config(&self, common_name: &str) -> Result<(rustls::ServerConfig, String), TlsError> {
        let (identity, files, certificate) = if self.test_mode_enable {
            for (key, value) in [(SERVER_CERT, &self.server_cert_path), (SERVER_KEY, &self.server_key_path)] {
                if path_of(value).is_some() {
                    warn!(key, "ignored: tls.test.mode.enable=true presents a self-signed certificate");
                }
            }
            (self_signed(common_name)?, None, "self-signed certificate".to_owned())
        } else {
            let (cert, key) = match (path_of(&self.server_cert_path), path_of(&self.server_key_path)) {
                (Some(cert), Some(key)) => (cert, key),
                (None, _) => {
                    return Err(TlsError::MissingSetting {
                        key: SERVER_CERT,
                        reason: "tls.test.mode.enable=false serves the certificate of tls.server.certPath and \
                                 tls.server.keyPath",
                    })
                }
                (Some(_), None) => return Err(TlsError::IncompletePaths { given: SERVER_CERT, missing: SERVER_KEY }),
            };
            let identity = identity(cert, SERVER_CERT, key, SERVER_KEY, &self.server_key_password)?;
            (identity, Some((cert.to_owned(), key.to_owned())), format!("certificate {}", cert.display()))
        };
        let builder = rustls::ServerConfig::builder_with_provider(crypto_provider())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Build)?;
        let builder = match self.client_verifier()? {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        let config = builder.with_single_cert(identity.chain, identity.key).map_err(|source| match files {
            Some((cert, key)) => TlsError::Rejected { cert, key, source },
            None => TlsError::Build(source),
        })?;
        Ok((config, certificate))
    }

    fn client_verifier(&self) -> Result<Option<Arc<dyn ClientCertVerifier>>, TlsError> {
        let mandatory = match self.server_need_client_auth {
            ClientAuth::None => {
                if self.server_auth_client {
                    warn!("tls.server.authClient=true has no effect with tls.server.need.client.auth=none");
                }
                return Ok(None);
            }
            ClientAuth::Optional => false,
            ClientAuth::Require => true,
        };
        if !self.server_auth_client {
            return Ok(Some(Arc::new(AnyClientCertificate::new(crypto_provider(), mandatory))));
        }
        let path = path_of(&self.server_trust_cert_path).ok_or(TlsError::MissingSetting {
            key: SERVER_TRUST,
            reason: "tls.server.authClient=true checks client certificates against it (the system's CA \
                     certificates are not used)",
        })?;
        let roots = Arc::new(load_trust_store(path, SERVER_TRUST)?);
        let builder = WebPkiClientVerifier::builder_with_provider(roots, crypto_provider());
        let builder = if mandatory { builder } else { builder.allow_unauthenticated() };
        let verifier = builder.build().map_err(|e| TlsError::TrustStore {
            key: SERVER_TRUST,
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        Ok(Some(verifier))
    }

    /// The client side of connections: the server's certificate checked against
    /// `tls.client.trustCertPath` when `tls.client.authServer` (chain only, as Java), else
    /// any accepted; the client certificate presented when both of its paths are set.
    ///
    /// # Errors
    /// Unreadable or unusable files (named with their key); `tls.client.authServer=true`
    /// without `tls.client.trustCertPath`; one client path without the other.
    pub fn client_tls(&self) -> Result<ClientTls, TlsError> {
        let provider = crypto_provider();
        let verifier: Arc<dyn ServerCertVerifier> = if self.client_auth_server {
            let path = path_of(&self.client_trust_cert_path).ok_or(TlsError::MissingSetting {
                key: CLIENT_TRUST,
                reason: "tls.client.authServer=true checks server certificates against it (the system's CA \
                         certificates are not used)",
            })?;
            let roots = Arc::new(load_trust_store(path, CLIENT_TRUST)?);
            let inner = WebPkiServerVerifier::builder_with_provider(roots, provider.clone()).build().map_err(|e| {
                TlsError::TrustStore { key: CLIENT_TRUST, path: path.to_owned(), reason: e.to_string() }
            })?;
            Arc::new(ChainOnlyServerVerifier::new(inner))
        } else {
            Arc::new(TrustAnyServer::new(provider.clone()))
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Build)?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config =
            match (path_of(&self.client_cert_path), path_of(&self.client_key_path)) {
                (Some(cert), Some(key)) => {
                    let identity = identity(cert, CLIENT_CERT, key, CLIENT_KEY, &self.client_key_password)?;
                    builder
                        .with_client_auth_cert(identity.chain, identity.key)
                        .map_err(|source| TlsError::Rejected { cert: cert.to_owned(), key: key.to_owned(), source })?
                }
                (None, None) => builder.with_no_client_auth(),
                (Some(_), None) => return Err(TlsError::IncompletePaths { given: CLIENT_CERT, missing: CLIENT_KEY }),
                (None, Some(_)) => return Err(TlsError::IncompletePaths { given: CLIENT_KEY, missing: CLIENT_CERT }),
            };
        Ok(ClientTls::new(Arc::new(config)))
    }

    /// Where `tls.config.file` points, if anywhere.
    pub fn config_file_path(&self) -> Option<PathBuf> {
        path_of(&self.config_file).map(Path::to_owned)
    }
}

/// A certificate chain and key from their files; a key password only matters for an encrypted
/// key, which is refused.
fn identity(
    cert: &Path,
    cert_key: &'static str,
    key: &Path,
    key_key: &'static str,
    password: &str,
) -> Result<CertifiedKey, TlsError> {
    let chain = load_cert_chain(cert, cert_key)?;
    let private_key = load_protected_private_key(key, key_key, password)?;
    if !password.is_empty() {
        // Reached only for a key that is not encrypted (an encrypted one failed above).
        let encrypted = std::fs::read(key).map(|t| is_encrypted_pem(&t)).unwrap_or(false);
        if !encrypted {
            warn!(key = key_key, "the key password is ignored: the key file is not encrypted");
        }
    }
    Ok(CertifiedKey { chain, key: private_key })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_javas() {
        let c = TlsConfig::default();
        assert_eq!(c.server_mode, TlsMode::Permissive);
        assert!(c.test_mode_enable && !c.enable && !c.client_auth_server && !c.server_auth_client);
        assert_eq!(c.server_need_client_auth, ClientAuth::None);
        assert_eq!(c.config_file, DEFAULT_TLS_CONFIG_FILE);
        assert!(!c.server_process_clients_use_tls());
    }

    #[test]
    fn bad_values_name_the_key_and_the_allowed_ones() {
        let err = TlsConfig::load([("tls.server.mode", "enforced")]).unwrap_err().to_string();
        assert!(err.contains("tls.server.mode") && err.contains("enforcing") && err.contains("\"enforced\""), "{err}");
        let err = TlsConfig::load([("tls.server.need.client.auth", "required")]).unwrap_err().to_string();
        assert!(err.contains("tls.server.need.client.auth") && err.contains("none, optional or require"), "{err}");
    }

    #[test]
    fn only_tls_keys_are_taken_and_the_config_file_overrides_them() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tls.properties");
        std::fs::write(&file, "tls.test.mode.enable=false\ntls.server.need.client.auth=require\n").unwrap();
        let file_text = file.display().to_string();
        let c = TlsConfig::load([
            ("listenPort", "x"),
            ("tls.server.mode", "enforcing"),
            ("tls.server.need.client.auth", "optional"),
            ("tls.config.file", file_text.as_str()),
        ])
        .unwrap();
        assert_eq!(c.server_mode, TlsMode::Enforcing);
        assert!(!c.test_mode_enable);
        assert_eq!(c.server_need_client_auth, ClientAuth::Require);
        assert!(c.server_process_clients_use_tls());
    }

    #[test]
    fn a_missing_config_file_is_an_error_unless_it_is_the_default() {
        let err = TlsConfig::load([("tls.config.file", "/nonexistent/tls.properties")]).unwrap_err().to_string();
        assert!(err.contains("tls.config.file") && err.contains("/nonexistent/tls.properties"), "{err}");
        // The default file is optional (it does not exist on this machine, or is readable).
        let default = TlsConfig::load(std::iter::empty());
        assert!(default.is_ok() || Path::new(DEFAULT_TLS_CONFIG_FILE).exists());
    }

    #[test]
    fn settings_that_need_a_file_say_which() {
        let c = TlsConfig { test_mode_enable: false, ..TlsConfig::default() };
        let err = c.server_tls("t").unwrap_err().to_string();
        assert!(err.contains("tls.server.certPath"), "{err}");
        let c = TlsConfig {
            server_need_client_auth: ClientAuth::Require,
            server_auth_client: true,
            ..TlsConfig::default()
        };
        let err = c.server_tls("t").unwrap_err().to_string();
        assert!(err.contains("tls.server.trustCertPath"), "{err}");
        let c = TlsConfig { client_auth_server: true, ..TlsConfig::default() };
        let err = c.client_tls().unwrap_err().to_string();
        assert!(err.contains("tls.client.trustCertPath"), "{err}");
        let c = TlsConfig { client_cert_path: "/x.pem".into(), ..TlsConfig::default() };
        let err = c.client_tls().unwrap_err().to_string();
        assert!(err.contains("tls.client.keyPath"), "{err}");
    }

    #[test]
    fn disabled_mode_needs_no_certificate() {
        let c = TlsConfig { server_mode: TlsMode::Disabled, test_mode_enable: false, ..TlsConfig::default() };
        assert_eq!(c.server_tls("t").unwrap().mode(), TlsMode::Disabled);
    }
}
