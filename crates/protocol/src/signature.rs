//! Request signing of the remoting protocol (ACL 1.0 and 2.0 share it; Java:
//! `AclClientRPCHook`, `AclUtils`, `AclSigner`).
//!
//! The signer adds `AccessKey` (and `SecurityToken` when it has one) to the request's ext
//! fields, then signs the content: every ext field's **value** except `Signature`, in key order
//! (Java's `TreeMap`, UTF-16 code-unit order), concatenated without separators, followed by the
//! raw body. `Signature` = Base64(HMAC-SHA1(secret key, content)). The server rebuilds the
//! content from the fields exactly as received, so nothing is normalised here.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha1::Sha1;

use crate::command::RemotingCommand;
use crate::ext_fields::ExtFields;
use crate::version;

/// Ext field naming the account (ACL 1.0) or user (ACL 2.0).
pub const ACCESS_KEY: &str = "AccessKey";
/// Ext field carrying the Base64 HMAC-SHA1.
pub const SIGNATURE: &str = "Signature";
/// Ext field carrying an STS token; signed like any other field.
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// QUERY_MESSAGE's unique-key flag, which clients before 4.9.4 added after signing.
pub const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";

/// Credentials a client signs its requests with (Java: `SessionCredentials`).
#[derive(Clone, PartialEq, Eq)]
pub struct SessionCredentials {
    /// The account or user name.
    pub access_key: String,
    /// The HMAC key; never sent.
    pub secret_key: String,
    /// Optional STS token, sent and signed.
    pub security_token: Option<String>,
}

impl std::fmt::Debug for SessionCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret stays out of logs.
        f.debug_struct("SessionCredentials")
            .field("access_key", &self.access_key)
            .field("security_token", &self.security_token.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

impl SessionCredentials {
    /// Credentials without a security token.
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        SessionCredentials { access_key: access_key.into(), secret_key: secret_key.into(), security_token: None }
    }

    /// Adds `AccessKey` (and `SecurityToken`) to `request` and signs it, replacing any earlier
    /// signature (a retried request is signed again).
    pub fn sign(&self, request: &mut RemotingCommand) {
        request.ext_fields.insert(ACCESS_KEY.into(), &self.access_key);
        if let Some(token) = &self.security_token {
            request.ext_fields.insert(SECURITY_TOKEN.into(), token);
        }
        let signature = signature(self.secret_key.as_bytes(), &request.ext_fields, &request.body, false);
        request.ext_fields.insert(SIGNATURE.into(), &signature);
    }
}

/// HMAC-SHA1 keyed with `secret` (any key length is accepted).
fn mac(secret: &[u8]) -> Hmac<Sha1> {
    // new_from_slice fails only for MACs with a fixed key length, which HMAC is not.
    Hmac::<Sha1>::new_from_slice(secret).expect("HMAC takes keys of any length")
}

/// HMAC-SHA1(`secret`, `data`), raw.
pub fn hmac_sha1(secret: &[u8], data: &[u8]) -> [u8; 20] {
    let mut m = mac(secret);
    m.update(data);
    m.finalize().into_bytes().into()
}

/// Base64(HMAC-SHA1(`secret`, `data`)): Java's `AclSigner.calSignature`.
pub fn sign_bytes(secret: &[u8], data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(hmac_sha1(secret, data))
}

/// Upper-case hex of HMAC-SHA1(`secret`, `data`): the `Signature` of a 5.x gRPC client's
/// `authorization` header, over its `x-mq-date-time` value (grpc-proxy.md section 3).
pub fn sign_hex(secret: &[u8], data: &[u8]) -> String {
    hmac_sha1(secret, data).iter().map(|b| format!("{b:02X}")).collect()
}

/// The signature of `fields` (all but `Signature`, and `_UNIQUE_KEY_QUERY` when
/// `skip_unique_key_query`) and `body` under `secret`. The content is fed to the MAC piece by
/// piece, never assembled.
pub fn signature(secret: &[u8], fields: &ExtFields, body: &[u8], skip_unique_key_query: bool) -> String {
    let mut mac = mac(secret);
    let signed = |k: &str| k != SIGNATURE && !(skip_unique_key_query && k == UNIQUE_KEY_QUERY);
    if fields.keys().all(|k| k.is_ascii()) {
        // ExtFields are in byte order, which is Java's order for ASCII keys.
        for (k, v) in fields.iter() {
            if signed(k) {
                mac.update(v.as_bytes());
            }
        }
    } else {
        let mut sorted: Vec<(&str, &str)> = fields.iter().filter(|(k, _)| signed(k)).collect();
        sorted.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
        for (_, v) in sorted {
            mac.update(v.as_bytes());
        }
    }
    mac.update(body);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Why a signed request was not verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyError {
    /// The request has no `Signature` field.
    Missing,
    /// The signature does not match the content under the secret.
    Mismatch,
}

/// Checks `request`'s `Signature` against `secret`. The `_UNIQUE_KEY_QUERY` flag is signed by
/// current clients and was not by clients up to 4.9.3 (and a 4.9.8 server never counts it), so
/// a request carrying it verifies with or without it; both forms need the secret, so this
/// widens nothing an attacker can forge. The comparison takes the same time wherever the
/// strings differ.
///
/// # Errors
/// [`VerifyError::Missing`] / [`VerifyError::Mismatch`].
pub fn verify(request: &RemotingCommand, secret: &[u8]) -> Result<(), VerifyError> {
    let given = request.ext_fields.get(SIGNATURE).ok_or(VerifyError::Missing)?;
    let old_client = request.version <= version::V4_9_3;
    let expected = signature(secret, &request.ext_fields, &request.body, old_client);
    if constant_time_eq(given.as_bytes(), expected.as_bytes()) {
        return Ok(());
    }
    if !old_client && request.ext_fields.contains_key(UNIQUE_KEY_QUERY) {
        let without = signature(secret, &request.ext_fields, &request.body, true);
        if constant_time_eq(given.as_bytes(), without.as_bytes()) {
            return Ok(());
        }
    }
    Err(VerifyError::Mismatch)
}

/// Whether `a` and `b` are equal, in time that depends on their length only (comparing MACs).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_signer_golden_value() {
        // AclSignerTest in apache/rocketmq: calSignature("RocketMQ", "12345678").
        assert_eq!(sign_bytes(b"12345678", b"RocketMQ"), "IUc8rrO/0gDch8CjObLQsW2rsiA=");
    }

    #[test]
    fn hex_form_is_the_same_mac() {
        // IUc8rrO/0gDch8CjObLQsW2rsiA= in hex.
        assert_eq!(sign_hex(b"12345678", b"RocketMQ"), "21473CAEB3BFD200DC87C0A339B2D0B16DABB220");
    }

    #[test]
    fn constant_time_eq_compares_whole_strings() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
