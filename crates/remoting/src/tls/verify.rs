//! Certificate verifiers with Java's semantics, which rustls' own verifiers do not have:
//! trusting any peer certificate (Java's `InsecureTrustManagerFactory`, the default on both
//! sides) and checking a server's chain without its host name (Java's remoting clients create
//! their `SslHandler` without a peer host, so the JDK never checks the name).
//!
//! Every verifier still checks the handshake signatures: a peer must hold the private key of
//! the certificate it presents.

use std::sync::Arc;

use tokio_rustls::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::crypto::{self, CryptoProvider};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::{self, CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};

/// Accepts any server certificate (Java: `tls.client.authServer=false`, the default, or test
/// mode on the client).
#[derive(Debug)]
pub struct TrustAnyServer(Arc<CryptoProvider>);

impl TrustAnyServer {
    /// A verifier checking signatures with `provider`'s algorithms.
    pub fn new(provider: Arc<CryptoProvider>) -> Self {
        TrustAnyServer(provider)
    }
}

impl ServerCertVerifier for TrustAnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Checks that a server's chain leads to a trusted certificate and is valid now, but not that
/// it names the host connected to (Java: `tls.client.authServer=true` with
/// `tls.client.trustCertPath`). Brokers are reached at the IP addresses they register, which
/// certificates issued for Java deployments rarely list.
#[derive(Debug)]
pub struct ChainOnlyServerVerifier(Arc<WebPkiServerVerifier>);

impl ChainOnlyServerVerifier {
    /// Wraps a web PKI verifier (which checks chain, validity and name, in that order).
    pub fn new(inner: Arc<WebPkiServerVerifier>) -> Self {
        ChainOnlyServerVerifier(inner)
    }
}

impl ServerCertVerifier for ChainOnlyServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            // webpki checks the name only once the chain and validity have passed, so a name
            // mismatch means everything Java checks is fine.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Asks clients for a certificate and accepts any (Java: `tls.server.need.client.auth`
/// optional or require with `tls.server.authClient=false`).
#[derive(Debug)]
pub struct AnyClientCertificate {
    provider: Arc<CryptoProvider>,
    mandatory: bool,
}

impl AnyClientCertificate {
    /// `mandatory`: a client without a certificate is refused (`require`), else let in
    /// (`optional`).
    pub fn new(provider: Arc<CryptoProvider>, mandatory: bool) -> Self {
        AnyClientCertificate { provider, mandatory }
    }
}

impl ClientCertVerifier for AnyClientCertificate {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // No hints: a client with a certificate then always sends it.
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
