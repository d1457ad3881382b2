//! Certificates and keys: PEM files (Java's `tls.*.certPath`, `keyPath`, `trustCertPath`) and
//! the self-signed certificate of test mode (`tls.test.mode.enable`, Java's
//! `SelfSignedCertificate`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use tokio_rustls::rustls::pki_types::pem::{self, PemObject};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::RootCertStore;

use crate::tls::TlsError;

/// A certificate chain (end-entity first) and its private key.
#[derive(Debug)]
pub struct CertifiedKey {
    /// The chain, end-entity first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key of the end-entity certificate.
    pub key: PrivateKeyDer<'static>,
}

fn read_file(key: &'static str, what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { key, what, path: path.to_owned(), source })
}

fn pem_error(key: &'static str, what: &'static str, path: &Path, error: pem::Error) -> TlsError {
    TlsError::Pem { key, what, path: path.to_owned(), reason: error.to_string() }
}

/// Reads every `CERTIFICATE` section of the PEM file `path`, named by the setting `key` in
/// errors.
///
/// # Errors
/// An unreadable file, bad PEM, or no certificate in it.
pub fn load_cert_chain(path: &Path, key: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    load_certs(path, key, "certificate")
}

fn load_certs(path: &Path, key: &'static str, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let text = read_file(key, what, path)?;
    let chain = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(key, what, path, e))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate { key, path: path.to_owned() });
    }
    Ok(chain)
}

/// Reads the first private key (PKCS#8, PKCS#1 or SEC1, unencrypted) of the PEM file `path`.
///
/// # Errors
/// An unreadable file, bad PEM, no key, or an encrypted key ([`TlsError::EncryptedKey`]).
pub fn load_private_key(path: &Path, key: &'static str) -> Result<PrivateKeyDer<'static>, TlsError> {
    load_protected_private_key(path, key, "")
}

/// The setting that holds the password of the key file setting `key`.
fn password_key_of(key: &'static str) -> &'static str {
    match key {
        "tls.server.keyPath" => "tls.server.keyPassword",
        "tls.client.keyPath" => "tls.client.keyPassword",
        _ => "keyPassword",
    }
}

/// As [`load_private_key`], decrypting a PKCS#8 `ENCRYPTED PRIVATE KEY` with `password` (Java's
/// `tls.*.keyPassword`; PBE-SHA1-RC4 as RocketMQ's TLS guide makes them, see `pbe.rs`).
///
/// # Errors
/// As [`load_private_key`]; [`TlsError::KeyDecrypt`] for a scheme that cannot be read or a
/// wrong password.
pub fn load_protected_private_key(
    path: &Path,
    key: &'static str,
    password: &str,
) -> Result<PrivateKeyDer<'static>, TlsError> {
    const WHAT: &str = "private key";
    let text = read_file(key, WHAT, path)?;
    if is_encrypted_pem(&text) {
        let password_key = password_key_of(key);
        if password.is_empty() {
            return Err(TlsError::EncryptedKey { key, password_key, path: path.to_owned() });
        }
        let decrypt_error = |reason: String| TlsError::KeyDecrypt { key, password_key, path: path.to_owned(), reason };
        let pem = String::from_utf8_lossy(&text);
        if pem.contains("Proc-Type: 4,ENCRYPTED") {
            return Err(decrypt_error(
                "it is in OpenSSL's traditional encrypted format (Proc-Type); convert it with \
                 `openssl pkcs8 -topk8 -v1 PBE-SHA1-RC4-128 -provider legacy -provider default`"
                    .to_owned(),
            ));
        }
        let der = super::pbe::decrypt_pem(&pem, password).map_err(|e| decrypt_error(e.to_string()))?;
        return Ok(PrivateKeyDer::Pkcs8(der.into()));
    }
    match PrivateKeyDer::from_pem_slice(&text) {
        Ok(private_key) => Ok(private_key),
        Err(pem::Error::NoItemsFound) => {
            // (Encrypted keys were told apart above: rustls' PEM reader skips their sections.)
            Err(TlsError::NoPrivateKey { key, path: path.to_owned() })
        }
        Err(e) => Err(pem_error(key, WHAT, path, e)),
    }
}

/// Whether a PEM text holds a password-protected key (PKCS#8 `ENCRYPTED PRIVATE KEY`, or an
/// OpenSSL legacy `Proc-Type: 4,ENCRYPTED` header).
pub(crate) fn is_encrypted_pem(text: &[u8]) -> bool {
    let text = String::from_utf8_lossy(text);
    text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || text.contains("Proc-Type: 4,ENCRYPTED")
}

/// The certificates of `path` as trust anchors (Java's `trustCertPath`: the CA certificates a
/// peer's chain must lead to).
///
/// # Errors
/// As [`load_cert_chain`]; a file none of whose certificates is a usable trust anchor.
pub(crate) fn load_trust_store(path: &Path, key: &'static str) -> Result<RootCertStore, TlsError> {
    let certs = load_certs(path, key, "trusted certificate")?;
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(TlsError::TrustStore {
            key,
            path: path.to_owned(),
            reason: format!("none of its {ignored} certificates can be parsed as a trust anchor"),
        });
    }
    if ignored > 0 {
        tracing::warn!(file = %path.display(), key, ignored, "some trusted certificates cannot be parsed and are ignored");
    }
    Ok(roots)
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

/// A self-signed certificate generated now (ECDSA P-256), valid for `localhost`, `127.0.0.1`,
/// `::1` and the host name, with `common_name` as its subject. Clients in Java's default
/// configuration trust any certificate, so which names it carries matters little.
///
/// # Errors
/// [`TlsError::SelfSigned`] when generation fails.
pub fn self_signed(common_name: &str) -> Result<CertifiedKey, TlsError> {
    let mut names = vec![
        "localhost".to_owned(),
        IpAddr::V4(Ipv4Addr::LOCALHOST).to_string(),
        IpAddr::V6(Ipv6Addr::LOCALHOST).to_string(),
    ];
    names.extend(host_name());
    let mut params = rcgen::CertificateParams::new(names.clone())?;
    params.distinguished_name.push(rcgen::DnType::CommonName, common_name);
    let key = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    tracing::debug!(subject_alt_names = ?names, common_name, "generated a self-signed TLS certificate");
    Ok(CertifiedKey {
        chain: vec![cert.der().clone()],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn errors_name_the_setting_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = load_cert_chain(&missing, "tls.server.certPath").unwrap_err().to_string();
        assert!(err.contains("tls.server.certPath") && err.contains("missing.pem"), "{err}");

        let encrypted = write(
            dir.path(),
            "enc.key",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
        );
        let err = load_private_key(&encrypted, "tls.client.keyPath").unwrap_err();
        assert!(matches!(err, TlsError::EncryptedKey { .. }), "{err}");
        assert!(err.to_string().contains("tls.client.keyPath") && err.to_string().contains("enc.key"), "{err}");

        let notes = write(dir.path(), "notes.txt", "hello\n");
        let err = load_trust_store(&notes, "tls.server.trustCertPath").unwrap_err().to_string();
        assert!(err.contains("tls.server.trustCertPath") && err.contains("notes.txt"), "{err}");
    }

    #[test]
    fn self_signed_certificate_round_trips_through_pem_loading() {
        let dir = tempfile::tempdir().unwrap();
        let generated = self_signed("test").unwrap();
        assert_eq!(generated.chain.len(), 1);
        let ca = rcgen::generate_simple_self_signed(vec!["ca.example".to_owned()]).unwrap();
        let path = write(dir.path(), "ca.pem", &ca.cert.pem());
        assert_eq!(load_trust_store(&path, "tls.client.trustCertPath").unwrap().len(), 1);
    }
}
