//! ACL 2.0's decision for one remoting request (acl-and-tls.md 3.2, 3.4): authentication (the
//! signing user exists, is enabled, and the signature verifies with its password), then
//! authorization (SUPER users pass; others need, for every (resource, actions) the request
//! touches, a matching policy entry whose first, by precedence, allows).

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;

use ferromq_protocol::signature::{self, ACCESS_KEY};
use ferromq_protocol::RemotingCommand;

use super::context::{needed, Needed};
use super::metadata::{AuthMetadata, Snapshot};
use super::model::{Acl, Decision, PolicyEntry, PolicyType, ResourceName, ResourceType, UserStatus, UserType};
use crate::plain::Denial;

/// Which checks run and which request codes skip them.
#[derive(Debug, Clone, Default)]
pub struct AuthSettings {
    /// `authenticationEnabled`.
    pub authentication_enabled: bool,
    /// `authorizationEnabled`.
    pub authorization_enabled: bool,
    /// `authenticationWhitelist`: request codes (as text) not authenticated.
    pub authentication_whitelist: HashSet<String>,
    /// `authorizationWhitelist`: request codes (as text) not authorized.
    pub authorization_whitelist: HashSet<String>,
    /// The cluster `Cluster` resources name (the broker's `brokerClusterName`).
    pub cluster_name: String,
}

/// Splits a `authenticationWhitelist` / `authorizationWhitelist` value.
pub fn parse_whitelist(text: &str) -> HashSet<String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// ACL 2.0 for one server.
#[derive(Debug)]
pub struct AuthService {
    settings: AuthSettings,
    metadata: Arc<AuthMetadata>,
}

fn deny(reason: String, access_key: Option<&str>, resource: Option<String>) -> Denial {
    Denial { reason, access_key: access_key.map(str::to_owned), resource }
}

impl AuthService {
    /// A service over `metadata`.
    pub fn new(settings: AuthSettings, metadata: Arc<AuthMetadata>) -> Self {
        AuthService { settings, metadata }
    }

    /// The users and ACLs.
    pub fn metadata(&self) -> &Arc<AuthMetadata> {
        &self.metadata
    }

    /// The settings.
    pub fn settings(&self) -> &AuthSettings {
        &self.settings
    }

    /// Authenticates then authorizes a gRPC call (`rpc`: the request's full name, e.g.
    /// `apache.rocketmq.v2.QueryRouteRequest`, as the whitelists name them) that needs
    /// `needed`, from `remote` (the proxy's pipeline; refusals are answered UNAUTHORIZED).
    ///
    /// # Errors
    /// The [`Denial`], in Java's words.
    pub fn check_grpc(
        &self,
        rpc: &str,
        credentials: &GrpcCredentials,
        needed: &[Needed],
        remote: IpAddr,
    ) -> Result<(), Denial> {
        let snapshot = self.metadata.snapshot();
        let username = credentials.username.as_deref();
        if self.settings.authentication_enabled && !self.settings.authentication_whitelist.contains(rpc) {
            authenticate_with(&snapshot, username, |password| {
                let (Some(sig), Some(date)) = (&credentials.signature_hex, &credentials.date_time) else {
                    return false;
                };
                hex_eq(sig, &signature::hmac_sha1(password.as_bytes(), date.as_bytes()))
            })?;
        }
        if self.settings.authorization_enabled
            && !needed.is_empty()
            && !self.settings.authorization_whitelist.contains(rpc)
        {
            authorize(&snapshot, username, needed, crate::plain::address::canonical(remote))?;
        }
        Ok(())
    }

    /// Authenticates then authorizes `request` from `remote`.
    ///
    /// # Errors
    /// The [`Denial`] to answer with NO_PERMISSION, in Java's words.
    pub fn check(&self, request: &RemotingCommand, remote: IpAddr) -> Result<(), Denial> {
        // Whitelists are usually empty: no code text is made for them then.
        let listed = |list: &HashSet<String>| !list.is_empty() && list.contains(&request.code.to_string());
        let snapshot = self.metadata.snapshot();
        let username = request.ext(ACCESS_KEY).filter(|u| !u.is_empty());
        if self.settings.authentication_enabled && !listed(&self.settings.authentication_whitelist) {
            authenticate(&snapshot, request, username)?;
        }
        if self.settings.authorization_enabled && !listed(&self.settings.authorization_whitelist) {
            let contexts = needed(request, &self.settings.cluster_name).map_err(|e| deny(e, username, None))?;
            if contexts.is_empty() {
                return Ok(());
            }
            authorize(&snapshot, username, &contexts, crate::plain::address::canonical(remote))?;
        }
        Ok(())
    }
}

fn authenticate(snapshot: &Snapshot, request: &RemotingCommand, username: Option<&str>) -> Result<(), Denial> {
    authenticate_with(snapshot, username, |password| signature::verify(request, password.as_bytes()).is_ok())
}

/// The user exists, is enabled, and `verify` accepts the request under its password.
fn authenticate_with(
    snapshot: &Snapshot,
    username: Option<&str>,
    verify: impl FnOnce(&str) -> bool,
) -> Result<(), Denial> {
    let Some(name) = username else {
        return Err(deny("username cannot be null.".to_owned(), None, None));
    };
    let Some(user) = snapshot.users.get(name) else {
        return Err(deny(format!("User:{name} is not found."), username, None));
    };
    if user.user_status == UserStatus::Disable {
        return Err(deny(format!("User:{name} is disabled."), username, None));
    }
    if !verify(&user.password) {
        return Err(deny("check signature failed.".to_owned(), username, None));
    }
    Ok(())
}

/// What a gRPC call carries for authentication: the user of `authorization`'s `Credential`,
/// its hex `Signature`, and the signed `x-mq-date-time` (grpc-proxy.md section 3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrpcCredentials {
    /// The user (access key), if the call names one.
    pub username: Option<String>,
    /// HMAC-SHA1 of the date-time under the password, hex.
    pub signature_hex: Option<String>,
    /// The signed content.
    pub date_time: Option<String>,
}

impl GrpcCredentials {
    /// Reads `MQv2-HMAC-SHA1 Credential=<ak>[/...], SignedHeaders=x-mq-date-time,
    /// Signature=<hex>` and the date-time header. A missing or unreadable header is an
    /// anonymous call.
    pub fn parse(authorization: Option<&str>, date_time: Option<&str>) -> Self {
        let mut out = GrpcCredentials { date_time: date_time.map(str::to_owned), ..Default::default() };
        let Some((_, params)) = authorization.and_then(|a| a.trim().split_once(' ')) else {
            return out;
        };
        for part in params.split(',') {
            let Some((k, v)) = part.trim().split_once('=') else { continue };
            match k.trim() {
                "Credential" => out.username = v.trim().split('/').next().map(str::to_owned).filter(|u| !u.is_empty()),
                "Signature" => out.signature_hex = Some(v.trim().to_owned()),
                _ => {}
            }
        }
        out
    }
}

fn hex_eq(hex: &str, bytes: &[u8]) -> bool {
    let hex = hex.as_bytes();
    if hex.len() != bytes.len() * 2 {
        return false;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut diff = 0u8;
    for (pair, b) in hex.chunks(2).zip(bytes) {
        match (nibble(pair[0]), nibble(pair[1])) {
            (Some(h), Some(l)) => diff |= ((h << 4) | l) ^ b,
            _ => return false,
        }
    }
    diff == 0
}

fn authorize(snapshot: &Snapshot, username: Option<&str>, contexts: &[Needed], ip: IpAddr) -> Result<(), Denial> {
    let Some(name) = username else {
        // Java dereferences the missing subject and answers with its generic text.
        return Err(deny(
            "Authorization failed. Please verify your access rights and try again. (the request names no user: sign it \
             with an AccessKey)"
                .to_owned(),
            None,
            None,
        ));
    };
    let Some(user) = snapshot.users.get(name) else {
        return Err(deny(format!("User:{name} not found."), username, None));
    };
    if user.user_status == UserStatus::Disable {
        return Err(deny(format!("User:{name} is disabled."), username, None));
    }
    if user.user_type == UserType::Super {
        return Ok(());
    }
    let subject = format!("User:{name}");
    let acl = snapshot.acls.get(&subject);
    for need in contexts {
        let refuse = |detail: &str| {
            let key = need.resource.key();
            deny(format!("{subject} has no permission to access {key} from {ip}, {detail}"), username, Some(key))
        };
        let Some(acl) = acl else {
            return Err(refuse("no matched policies."));
        };
        match decide(acl, need, ip) {
            None => return Err(refuse("no matched policies.")),
            Some(Decision::Deny) => return Err(refuse("the decision is deny.")),
            Some(Decision::Allow) => {}
        }
    }
    Ok(())
}

/// The verdict of the first matching entry by precedence: CUSTOM entries, else DEFAULT ones;
/// among them a specific resource kind before `*`, a literal name before a prefix before any
/// name, a longer prefix first, and Deny before Allow. This is the order 5.3.3 means to apply
/// (its comparator gets several cases backwards; see docs/decisions/0019).
pub fn decide(acl: &Acl, need: &Needed, ip: IpAddr) -> Option<Decision> {
    for policy_type in [PolicyType::Custom, PolicyType::Default] {
        let Some(policy) = acl.policies.iter().find(|p| p.policy_type == policy_type) else {
            continue;
        };
        let best = policy
            .entries
            .iter()
            .filter(|e| e.matches(&need.resource, &need.actions, ip))
            .min_by_key(|e| precedence(e));
        if let Some(entry) = best {
            return Some(entry.decision);
        }
    }
    None
}

fn precedence(e: &PolicyEntry) -> (u8, u8, usize, u8) {
    let any_kind = u8::from(e.resource.kind == ResourceType::Any);
    let (pattern, prefix_len) = match &e.resource.name {
        ResourceName::Literal(_) => (0, 0),
        ResourceName::Prefixed(p) => (1, p.len()),
        ResourceName::Any => (2, 0),
    };
    let decision = u8::from(e.decision == Decision::Allow);
    (any_kind, pattern, usize::MAX - prefix_len, decision)
}
