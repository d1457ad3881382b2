//! Password-protected keys (`tls.*.keyPassword`) made by OpenSSL as RocketMQ's TLS guide says
//! (`openssl pkcs8 -topk8 -v1 PBE-SHA1-RC4-128`), checked against the unencrypted PKCS#8 DER
//! OpenSSL wrote for the same key (fixtures/tls, made with OpenSSL 3.0 and its legacy provider),
//! and served: a TLS server with an encrypted key answers a client. Wrong passwords, other
//! schemes and a missing password are start errors naming the settings.

use std::path::PathBuf;

use ferromq_remoting::tls::{decrypt_pem, load_protected_private_key, PbeError, TlsConfig, TlsError};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls").join(name)
}

fn text(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

#[test]
fn pbe_sha1_rc4_keys_decrypt_to_what_openssl_wrote() {
    let plain = std::fs::read(fixture("plain.der")).unwrap();
    assert_eq!(decrypt_pem(&text("rc4-128.pem"), "server").unwrap(), plain, "PBE-SHA1-RC4-128");
    assert_eq!(decrypt_pem(&text("rc4-40.pem"), "client").unwrap(), plain, "PBE-SHA1-RC4-40");
    assert_eq!(decrypt_pem(&text("rc4-128.pem"), "Server"), Err(PbeError::WrongPassword));
    assert_eq!(decrypt_pem(&text("rc4-40.pem"), ""), Err(PbeError::WrongPassword));
    assert!(matches!(decrypt_pem(&text("pbes2.pem"), "server"), Err(PbeError::Unsupported(_))));
    assert!(matches!(decrypt_pem(&text("cert.pem"), "server"), Err(PbeError::Malformed(_))));
}

#[test]
fn errors_name_the_settings_and_the_fix() {
    let key = fixture("rc4-128.pem");
    let err = load_protected_private_key(&key, "tls.server.keyPath", "").unwrap_err();
    assert!(matches!(err, TlsError::EncryptedKey { .. }), "{err}");
    assert!(err.to_string().contains("tls.server.keyPassword"), "{err}");
    let err = load_protected_private_key(&key, "tls.server.keyPath", "guess").unwrap_err().to_string();
    assert!(err.contains("tls.server.keyPassword") && err.contains("does not decrypt"), "{err}");
    let err = load_protected_private_key(&fixture("pbes2.pem"), "tls.client.keyPath", "server").unwrap_err();
    let err = err.to_string();
    assert!(err.contains("tls.client.keyPassword") && err.contains("PBES2") && err.contains("openssl"), "{err}");
}

#[tokio::test]
async fn a_server_with_an_encrypted_key_serves_tls() {
    let cert = fixture("cert.pem").display().to_string();
    let key = fixture("rc4-128.pem").display().to_string();
    let settings = [
        ("tls.server.mode", "enforcing"),
        ("tls.test.mode.enable", "false"),
        ("tls.server.certPath", cert.as_str()),
        ("tls.server.keyPath", key.as_str()),
        ("tls.server.keyPassword", "server"),
    ];
    let server_tls = TlsConfig::load(settings).unwrap().server_tls("encrypted key").expect("the key decrypts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = tokio::spawn(async move {
        let (socket, peer) = listener.accept().await.unwrap();
        server_tls.accept(socket, peer, std::time::Duration::from_secs(5)).await.is_some()
    });
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let client = ferromq_remoting::tls::ClientTls::default();
    let tls = client.connect(&addr.to_string(), tcp).await;
    assert!(tls.is_ok(), "handshake: {:?}", tls.err());
    assert!(accept.await.unwrap(), "the server completed the handshake");
    let wrong = [
        ("tls.server.mode", "enforcing"),
        ("tls.test.mode.enable", "false"),
        ("tls.server.certPath", cert.as_str()),
        ("tls.server.keyPath", key.as_str()),
        ("tls.server.keyPassword", "nope"),
    ];
    assert!(TlsConfig::load(wrong).unwrap().server_tls("wrong").is_err());
}
