//! What a request says about its caller: the `x-mq-*` metadata headers (Java:
//! `GrpcConstants`, `ContextInitPipeline`) and the peer address.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tonic::metadata::MetadataMap;

use crate::status::{bad, ProxyResult};

/// The longest client id accepted: ids are keys of the proxy's tables.
pub const CLIENT_ID_MAX_BYTES: usize = 512;

/// One call's context.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// `x-mq-client-id`.
    pub client_id: String,
    /// `x-mq-language`, as the client spells it (`JAVA`, `RUST`, `GO`, `HTTP`...).
    pub language: String,
    /// `x-mq-client-version`.
    pub client_version: String,
    /// `x-mq-namespace`.
    pub namespace: String,
    /// The client's address as the proxy sees it.
    pub peer: Option<SocketAddr>,
    /// When the call has to be answered, from `grpc-timeout`.
    pub deadline: Option<Instant>,
}

fn header<'a>(md: &'a MetadataMap, names: &[&str]) -> Option<&'a str> {
    names.iter().find_map(|n| md.get(*n).and_then(|v| v.to_str().ok())).map(str::trim)
}

impl CallContext {
    /// Reads the metadata. The client id is required on every RPC (CLIENT_ID_REQUIRED).
    ///
    /// # Errors
    /// CLIENT_ID_REQUIRED when `x-mq-client-id` is missing, blank or too long.
    pub fn from_metadata(md: &MetadataMap, peer: Option<SocketAddr>) -> ProxyResult<CallContext> {
        let client_id = header(md, &["x-mq-client-id"]).unwrap_or_default();
        if client_id.is_empty() {
            return Err(bad!(ClientIdRequired, "x-mq-client-id is required"));
        }
        if client_id.len() > CLIENT_ID_MAX_BYTES {
            return Err(bad!(ClientIdRequired, "x-mq-client-id is longer than {CLIENT_ID_MAX_BYTES} bytes"));
        }
        let deadline = md.get("grpc-timeout").and_then(|v| v.to_str().ok()).and_then(parse_grpc_timeout);
        Ok(CallContext {
            client_id: client_id.to_owned(),
            language: header(md, &["x-mq-language"]).unwrap_or("OTHER").to_owned(),
            client_version: header(md, &["x-mq-client-version"]).unwrap_or_default().to_owned(),
            namespace: header(md, &["x-mq-namespace"]).unwrap_or_default().to_owned(),
            peer,
            deadline: deadline.map(|d| Instant::now() + d),
        })
    }

    /// Time left before the client gives up, if it said.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// The client version compared as Java does (`5.0.3` >= `5.0.10` is false).
    pub fn version_at_least(&self, major: u32, minor: u32, patch: u32) -> bool {
        let mut parts = self.client_version.split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
        let v = (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        v >= (major, minor, patch)
    }
}

/// `grpc-timeout`: an integer of at most 8 digits and a unit (H, M, S, m, u, n).
pub fn parse_grpc_timeout(text: &str) -> Option<Duration> {
    if text.len() < 2 || text.len() > 9 {
        return None;
    }
    let (digits, unit) = text.split_at(text.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The language name a remoting heartbeat carries for a client that said `language`
/// (Java parses it as a `LanguageCode` name; the Node.js client says `HTTP`).
pub fn remoting_language(language: &str) -> ferromq_protocol::LanguageCode {
    ferromq_protocol::LanguageCode::from_name(&language.to_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::Code;

    #[test]
    fn client_id_is_required() {
        let md = MetadataMap::new();
        assert_eq!(CallContext::from_metadata(&md, None).unwrap_err().code, Code::ClientIdRequired);
        let mut md = MetadataMap::new();
        md.insert("x-mq-client-id", "host@1@0@abc".parse().unwrap());
        md.insert("x-mq-client-version", "5.0.7".parse().unwrap());
        md.insert("grpc-timeout", "3000m".parse().unwrap());
        let c = CallContext::from_metadata(&md, None).unwrap();
        assert_eq!(c.client_id, "host@1@0@abc");
        assert!(c.version_at_least(5, 0, 3) && !c.version_at_least(5, 1, 0));
        assert!(c.remaining().unwrap() <= Duration::from_secs(3));
    }

    #[test]
    fn grpc_timeouts() {
        assert_eq!(parse_grpc_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("x"), None);
        assert_eq!(parse_grpc_timeout("123456789S"), None);
    }
}
