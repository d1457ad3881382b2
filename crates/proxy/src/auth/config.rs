//! ACL 2.0's keys of `rmq-proxy.json` read for the cluster proxy (Java: the proxy's
//! `AuthConfig`): the switches, the whitelists, the provider and strategy classes FerroMQ
//! stands in for, the proxy's own credentials and how often the users and ACLs are read from
//! the brokers again.
//!
//! Not here: the decision (`ferromq_auth::v2::AuthService`) and the copy of the brokers' users
//! and ACLs ([`super::sync`]).

use std::time::Duration;

use ferromq_auth::v2::{parse_whitelist, AuthSettings};
use ferromq_protocol::signature::SessionCredentials;

use crate::config::ProxyConfig;

/// Java's class of the cluster proxy's users: read from the brokers (AUTH_GET_USER there;
/// FerroMQ lists them, see [`super::sync`]).
pub const PROXY_AUTHENTICATION_METADATA_PROVIDER: &str =
    "org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider";
/// Java's class of the cluster proxy's ACLs: read from the brokers.
pub const PROXY_AUTHORIZATION_METADATA_PROVIDER: &str =
    "org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider";

const AUTHENTICATION_PROVIDER: &str = "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider";
const AUTHORIZATION_PROVIDER: &str = "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider";
const AUTHENTICATION_STRATEGIES: &[&str] = &[
    "org.apache.rocketmq.auth.authentication.strategy.StatelessAuthenticationStrategy",
    "org.apache.rocketmq.auth.authentication.strategy.StatefulAuthenticationStrategy",
];
const AUTHORIZATION_STRATEGIES: &[&str] = &[
    "org.apache.rocketmq.auth.authorization.strategy.StatelessAuthorizationStrategy",
    "org.apache.rocketmq.auth.authorization.strategy.StatefulAuthorizationStrategy",
];

/// The shortest refresh period accepted, so a 0 cannot make the copy a busy loop.
const REFRESH_MIN: Duration = Duration::from_secs(1);

/// One thing wrong with the ACL 2.0 keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthConfigProblem {
    /// A provider or strategy class FerroMQ has no stand-in for.
    #[error("{key}={value}: the cluster proxy has no such class; leave {key} empty or set one of: {accepted}")]
    UnsupportedClass {
        /// The key.
        key: &'static str,
        /// Its value.
        value: String,
        /// The values accepted besides blank, `, `-joined.
        accepted: String,
    },
    /// `innerClientAuthenticationCredentials` is not `{"accessKey":..,"secretKey":..}`.
    #[error("innerClientAuthenticationCredentials must be JSON {{\"accessKey\":..,\"secretKey\":..}}: {reason}")]
    Credentials {
        /// What is wrong (never the secret).
        reason: String,
    },
}

/// Every problem of the ACL 2.0 keys, reported together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("proxy ACL 2.0 settings: {}", .problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct AuthConfigError {
    /// The problems, in key order.
    pub problems: Vec<AuthConfigProblem>,
}

/// The cluster proxy's ACL 2.0, ready to run.
#[derive(Debug, Clone)]
pub struct ProxyAuthConfig {
    /// The switches, whitelists and the cluster `Cluster` resources name
    /// (`rocketMQClusterName`).
    pub settings: AuthSettings,
    /// `innerClientAuthenticationCredentials`: what the proxy signs its own requests with.
    pub inner_credentials: Option<SessionCredentials>,
    /// How often the users and ACLs are read from the brokers: the shorter of
    /// `userCacheRefreshSecond` and `aclCacheRefreshSecond` (they come together).
    pub refresh: Duration,
    /// Past this age without a successful refresh the copy is reported stale: the shorter of
    /// `userCacheExpiredSecond` and `aclCacheExpiredSecond`.
    pub stale_after: Duration,
}

impl ProxyAuthConfig {
    /// Reads the ACL 2.0 keys of `config`.
    ///
    /// # Errors
    /// Every unknown provider or strategy class and malformed credentials, together.
    pub fn from_config(config: &ProxyConfig) -> Result<Self, AuthConfigError> {
        let mut problems = Vec::new();
        let checks: [(&'static str, &str, &[&str]); 6] = [
            ("authenticationProvider", &config.authentication_provider, &[AUTHENTICATION_PROVIDER]),
            (
                "authenticationMetadataProvider",
                &config.authentication_metadata_provider,
                &[PROXY_AUTHENTICATION_METADATA_PROVIDER],
            ),
            ("authenticationStrategy", &config.authentication_strategy, AUTHENTICATION_STRATEGIES),
            ("authorizationProvider", &config.authorization_provider, &[AUTHORIZATION_PROVIDER]),
            (
                "authorizationMetadataProvider",
                &config.authorization_metadata_provider,
                &[PROXY_AUTHORIZATION_METADATA_PROVIDER],
            ),
            ("authorizationStrategy", &config.authorization_strategy, AUTHORIZATION_STRATEGIES),
        ];
        for (key, value, accepted) in checks {
            let value = value.trim();
            if !value.is_empty() && !accepted.contains(&value) {
                problems.push(AuthConfigProblem::UnsupportedClass {
                    key,
                    value: value.to_owned(),
                    accepted: accepted.join(", "),
                });
            }
        }
        let inner_credentials = match parse_credentials(&config.inner_client_authentication_credentials) {
            Ok(c) => c,
            Err(reason) => {
                problems.push(AuthConfigProblem::Credentials { reason });
                None
            }
        };
        if !problems.is_empty() {
            return Err(AuthConfigError { problems });
        }
        let seconds = |a: u64, b: u64| Duration::from_secs(a.min(b));
        Ok(ProxyAuthConfig {
            settings: AuthSettings {
                authentication_enabled: config.authentication_enabled,
                authorization_enabled: config.authorization_enabled,
                authentication_whitelist: parse_whitelist(&config.authentication_whitelist),
                authorization_whitelist: parse_whitelist(&config.authorization_whitelist),
                cluster_name: config.rocketmq_cluster_name.clone(),
            },
            inner_credentials,
            refresh: seconds(config.user_cache_refresh_second, config.acl_cache_refresh_second).max(REFRESH_MIN),
            stale_after: seconds(config.user_cache_expired_second, config.acl_cache_expired_second),
        })
    }

    /// Whether the proxy checks its clients (either switch on).
    pub fn enabled(&self) -> bool {
        self.settings.authentication_enabled || self.settings.authorization_enabled
    }
}

/// `{"accessKey":..,"secretKey":..}` (blank: none).
fn parse_credentials(text: &str) -> Result<Option<SessionCredentials>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    let field = |k: &str| json.get(k).and_then(|v| v.as_str()).map(str::trim).filter(|v| !v.is_empty());
    match (field("accessKey"), field("secretKey")) {
        (Some(ak), Some(sk)) => Ok(Some(SessionCredentials::new(ak, sk))),
        _ => Err("an accessKey and a secretKey are both needed".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_and_java_class_names_are_accepted() {
        let mut c = ProxyConfig::default();
        let auth = ProxyAuthConfig::from_config(&c).unwrap();
        assert!(!auth.enabled());
        assert!(auth.inner_credentials.is_none());
        assert_eq!(auth.refresh, Duration::from_secs(60));
        c.authentication_enabled = true;
        c.authentication_metadata_provider = PROXY_AUTHENTICATION_METADATA_PROVIDER.to_owned();
        c.authorization_metadata_provider = format!(" {PROXY_AUTHORIZATION_METADATA_PROVIDER} ");
        c.authentication_strategy = AUTHENTICATION_STRATEGIES[1].to_owned();
        c.authentication_whitelist = "105, apache.rocketmq.v2.QueryRouteRequest".to_owned();
        c.inner_client_authentication_credentials = r#"{"accessKey":"proxy","secretKey":"proxy-secret"}"#.to_owned();
        c.user_cache_refresh_second = 0;
        c.rocketmq_cluster_name = "C1".to_owned();
        let auth = ProxyAuthConfig::from_config(&c).unwrap();
        assert!(auth.enabled());
        assert_eq!(auth.inner_credentials, Some(SessionCredentials::new("proxy", "proxy-secret")));
        assert_eq!(auth.refresh, REFRESH_MIN, "0 s is raised to the minimum");
        assert!(auth.settings.authentication_whitelist.contains("apache.rocketmq.v2.QueryRouteRequest"));
        assert_eq!(auth.settings.cluster_name, "C1");
    }

    #[test]
    fn every_problem_is_reported_and_no_secret_is_shown() {
        let mut c = ProxyConfig {
            authentication_metadata_provider:
                "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider".to_owned(),
            authorization_provider: "com.example.Custom".to_owned(),
            inner_client_authentication_credentials: r#"{"accessKey":"proxy","password":"hunter2"}"#.to_owned(),
            ..ProxyConfig::default()
        };
        let e = ProxyAuthConfig::from_config(&c).unwrap_err();
        assert_eq!(e.problems.len(), 3, "{e}");
        let text = e.to_string();
        assert!(
            text.contains("authenticationMetadataProvider=") && text.contains(PROXY_AUTHENTICATION_METADATA_PROVIDER)
        );
        assert!(text.contains("com.example.Custom"));
        assert!(text.contains("secretKey") && !text.contains("hunter2"), "{text}");
        c.inner_client_authentication_credentials = "{not json".to_owned();
        c.authorization_provider.clear();
        c.authentication_metadata_provider.clear();
        let e = ProxyAuthConfig::from_config(&c).unwrap_err();
        assert!(matches!(e.problems.as_slice(), [AuthConfigProblem::Credentials { .. }]), "{e}");
    }
}
