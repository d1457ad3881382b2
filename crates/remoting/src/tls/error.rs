//! Why TLS could not be set up. Messages name the file and the setting concerned, since they end
//! up in front of an operator at start-up.

use std::io;
use std::path::PathBuf;

use tokio_rustls::rustls;

use crate::tls::TlsMode;

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// `tls.server.mode` has a value that is not a mode.
    #[error("unknown tls.server.mode {value:?}: expected disabled, permissive or enforcing")]
    UnknownMode {
        /// The text given.
        value: String,
    },
    /// A `tls.*` setting has a value of the wrong kind (the error names key, value and what is
    /// allowed).
    #[error("{source}{}", file.as_ref().map(|f| format!(" (in {})", f.display())).unwrap_or_default())]
    Setting {
        /// The file the setting came from, when it came from `tls.config.file`.
        file: Option<PathBuf>,
        /// The problem.
        #[source]
        source: ferromq_config::ConfigError,
    },
    /// The file named by `tls.config.file` could not be read.
    #[error("cannot read tls.config.file {}: {source}", path.display())]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Only one of a certificate and its key was given.
    #[error("{given} is set but {missing} is not: a certificate needs its private key and vice versa")]
    IncompletePaths {
        /// The setting that was given.
        given: &'static str,
        /// The setting that is missing.
        missing: &'static str,
    },
    /// A setting another setting needs is empty.
    #[error("{key} must be set: {reason}")]
    MissingSetting {
        /// The empty setting.
        key: &'static str,
        /// Which setting needs it.
        reason: &'static str,
    },
    /// A PEM file could not be read.
    #[error("cannot read TLS {what} file {} ({key}): {source}", path.display())]
    Read {
        /// The setting that names the file.
        key: &'static str,
        /// `certificate`, `private key` or `trusted certificate`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A PEM file is malformed.
    #[error("TLS {what} file {} ({key}) is not valid PEM: {reason}", path.display())]
    Pem {
        /// The setting that names the file.
        key: &'static str,
        /// `certificate`, `private key` or `trusted certificate`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The parser's explanation.
        reason: String,
    },
    /// A certificate file has no `CERTIFICATE` section.
    #[error("TLS certificate file {} ({key}) contains no \"BEGIN CERTIFICATE\" section", path.display())]
    NoCertificate {
        /// The setting that names the file.
        key: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// The key file has no private key section.
    #[error(
        "TLS private key file {} ({key}) contains no private key (expected \"BEGIN PRIVATE KEY\", \
         \"BEGIN RSA PRIVATE KEY\" or \"BEGIN EC PRIVATE KEY\")",
        path.display()
    )]
    NoPrivateKey {
        /// The setting that names the file.
        key: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// The key is password-protected and no `tls.*.keyPassword` is set.
    #[error(
        "TLS private key file {} ({key}) is encrypted: set its password in {password_key}, or decrypt it \
         (`openssl pkey -in {} -out plain.key`) and point {key} at the result",
        path.display(),
        path.display()
    )]
    EncryptedKey {
        /// The setting that names the file.
        key: &'static str,
        /// The setting of its password.
        password_key: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// The key is password-protected and cannot be decrypted (its scheme, or the password).
    #[error("TLS private key file {} ({key}) cannot be decrypted with {password_key}: {reason}", path.display())]
    KeyDecrypt {
        /// The setting that names the file.
        key: &'static str,
        /// The setting of its password.
        password_key: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
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
    /// The trusted certificates cannot verify anything (none usable, or rustls refused them).
    #[error("TLS trusted certificate file {} ({key}) cannot be used: {reason}", path.display())]
    TrustStore {
        /// The setting that names the file.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The self-signed certificate could not be generated.
    #[error("cannot generate the self-signed TLS certificate: {0}")]
    SelfSigned(#[from] rcgen::Error),
    /// rustls refused the configuration itself (protocol versions or generated key).
    #[error("cannot build the TLS configuration: {0}")]
    Build(#[source] rustls::Error),
    /// A mode serving TLS was asked for without a server configuration.
    #[error("tls.server.mode={mode} serves TLS connections but no TLS server configuration was given")]
    MissingConfig {
        /// The mode.
        mode: TlsMode,
    },
}
