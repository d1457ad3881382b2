//! `ProxyConfig`: the proxy's settings under the keys of Java's `rmq-proxy.json`
//! (Java: `ProxyConfig`), with Java's defaults.

use std::path::Path;

use ferromq_config::{rocketmq_config, ConfigError, RocketMqConfig};

use ferromq_remoting::tls::TlsConfig;

use crate::tls::{TlsError, TlsMode};

/// Java's `MessageConst`-free default delay table, also the customized backoff handed to
/// consumers whose group has no retry policy of its own.
pub const DEFAULT_DELAY_LEVELS: &str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

rocketmq_config! {
    /// The proxy's settings. Field docs name the key.
    pub struct ProxyConfig {
        /// `rocketMQClusterName`: the cluster whose brokers the proxy fronts.
        rocketmq_cluster_name: String = "rocketMQClusterName", default "DefaultCluster".to_owned();
        /// `proxyClusterName`.
        proxy_cluster_name: String = "proxyClusterName", default "DefaultCluster".to_owned();
        /// `proxyName`: this node's name (default: the host name).
        proxy_name: String = "proxyName", default default_proxy_name();
        /// `proxyMode`: `cluster` (brokers over the network) or `local` (inside the broker).
        proxy_mode: String = "proxyMode", default "cluster".to_owned();
        /// `namesrvAddr`: `;`-separated name servers (also `NAMESRV_ADDR`).
        namesrv_addr: String = "namesrvAddr", default std::env::var("NAMESRV_ADDR").unwrap_or_default();
        /// `grpcServerPort`.
        grpc_server_port: u16 = "grpcServerPort", default 8081;
        /// `remotingListenPort`: the proxy's remoting port (cluster mode; 0 turns it off).
        remoting_listen_port: u16 = "remotingListenPort", default 8080;
        /// `enableRemotingLocalProxyGrpc`: gRPC clients served on the remoting port too (a
        /// connection starting with the HTTP/2 preface goes to the gRPC server).
        enable_remoting_local_proxy_grpc: bool = "enableRemotingLocalProxyGrpc", default true;
        /// `bindAddress` (Java 5's `NettyServerConfig` key; cluster mode): the address the gRPC
        /// and remoting ports listen on.
        bind_address: String = "bindAddress", default "0.0.0.0".to_owned();
        /// `remotingAccessAddr`: the host routes of the remoting port point clients at (empty:
        /// the address each client connected to).
        remoting_access_addr: String = "remotingAccessAddr", default String::new();
        /// `grpcMaxInboundMessageSize`: the largest gRPC message accepted, bytes.
        grpc_max_inbound_message_size: usize = "grpcMaxInboundMessageSize", default 130 * 1024 * 1024;
        /// `grpcClientIdleTimeMills`: a client without heartbeat for this long is forgotten.
        grpc_client_idle_time_mills: u64 = "grpcClientIdleTimeMills", default 120_000;
        /// `grpcMaxConnections` (FerroMQ): connections served at once on the gRPC port.
        grpc_max_connections: usize = "grpcMaxConnections", default 10_000;
        /// `grpcServerThreads` (FerroMQ): threads serving gRPC connections, each connection on
        /// one of them with its streams (0: one per CPU).
        grpc_server_threads: usize = "grpcServerThreads", default 0;
        /// `grpcMaxConcurrentStreams` (FerroMQ): HTTP/2 streams per connection.
        grpc_max_concurrent_streams: u32 = "grpcMaxConcurrentStreams", default 1024;
        /// `maxMessageSize`: the largest message body, bytes.
        max_message_size: usize = "maxMessageSize", default 4 * 1024 * 1024;
        /// `enableMessageBodyEmptyCheck`.
        enable_message_body_empty_check: bool = "enableMessageBodyEmptyCheck", default true;
        /// `maxUserPropertySize`: total bytes of a message's user properties.
        max_user_property_size: usize = "maxUserPropertySize", default 16 * 1024;
        /// `userPropertyMaxNum`.
        user_property_max_num: usize = "userPropertyMaxNum", default 128;
        /// `maxMessageGroupSize`: bytes of a FIFO message group.
        max_message_group_size: usize = "maxMessageGroupSize", default 64;
        /// `defaultInvisibleTimeMills`: the invisible time of auto-renewed receives.
        default_invisible_time_mills: i64 = "defaultInvisibleTimeMills", default 60_000;
        /// `minInvisibleTimeMillsForRecv`.
        min_invisible_time_mills_for_recv: i64 = "minInvisibleTimeMillsForRecv", default 10_000;
        /// `maxInvisibleTimeMills`.
        max_invisible_time_mills: i64 = "maxInvisibleTimeMills", default 43_200_000;
        /// `maxDelayTimeMills`: how far in the future a delivery timestamp may be.
        max_delay_time_mills: i64 = "maxDelayTimeMills", default 86_400_000;
        /// `maxTransactionRecoverySecond`.
        max_transaction_recovery_second: i64 = "maxTransactionRecoverySecond", default 3600;
        /// `enableTopicMessageTypeCheck`.
        enable_topic_message_type_check: bool = "enableTopicMessageTypeCheck", default true;
        /// `grpcClientProducerMaxAttempts`.
        grpc_client_producer_max_attempts: i32 = "grpcClientProducerMaxAttempts", default 3;
        /// `grpcClientProducerBackoffInitialMillis`.
        grpc_client_producer_backoff_initial_millis: i64 = "grpcClientProducerBackoffInitialMillis", default 10;
        /// `grpcClientProducerBackoffMaxMillis`.
        grpc_client_producer_backoff_max_millis: i64 = "grpcClientProducerBackoffMaxMillis", default 1000;
        /// `grpcClientProducerBackoffMultiplier`.
        grpc_client_producer_backoff_multiplier: f64 = "grpcClientProducerBackoffMultiplier", default 2.0;
        /// `grpcClientConsumerMinLongPollingTimeoutMillis`.
        grpc_client_consumer_min_long_polling_timeout_millis: i64 =
            "grpcClientConsumerMinLongPollingTimeoutMillis", default 5000;
        /// `grpcClientConsumerMaxLongPollingTimeoutMillis`.
        grpc_client_consumer_max_long_polling_timeout_millis: i64 =
            "grpcClientConsumerMaxLongPollingTimeoutMillis", default 20_000;
        /// `grpcClientConsumerLongPollingBatchSize`.
        grpc_client_consumer_long_polling_batch_size: i32 = "grpcClientConsumerLongPollingBatchSize", default 32;
        /// `useEndpointPortFromRequest`: routes carry the port the client used.
        use_endpoint_port_from_request: bool = "useEndpointPortFromRequest", default false;
        /// `topicRouteServiceCacheExpiredSeconds`.
        topic_route_service_cache_expired_seconds: u64 = "topicRouteServiceCacheExpiredSeconds", default 300;
        /// `topicRouteServiceCacheRefreshSeconds`.
        topic_route_service_cache_refresh_seconds: u64 = "topicRouteServiceCacheRefreshSeconds", default 20;
        /// `longPollingReserveTimeInMillis`: kept back from a receive's deadline for the answer.
        long_polling_reserve_time_in_millis: i64 = "longPollingReserveTimeInMillis", default 100;
        /// `enableProxyAutoRenew`.
        enable_proxy_auto_renew: bool = "enableProxyAutoRenew", default true;
        /// `renewSchedulePeriodMillis`.
        renew_schedule_period_millis: u64 = "renewSchedulePeriodMillis", default 5000;
        /// `renewAheadTimeMillis`.
        renew_ahead_time_millis: i64 = "renewAheadTimeMillis", default 10_000;
        /// `renewMaxTimeMillis`.
        renew_max_time_millis: i64 = "renewMaxTimeMillis", default 3 * 3600 * 1000;
        /// `maxRenewRetryTimes`.
        max_renew_retry_times: u32 = "maxRenewRetryTimes", default 3;
        /// `renewMaxHandles` (FerroMQ): auto-renewed handles tracked per proxy.
        renew_max_handles: usize = "renewMaxHandles", default 200_000;
        /// `invisibleTimeMillisWhenClear`: set on handles of a client that went away.
        invisible_time_millis_when_clear: i64 = "invisibleTimeMillisWhenClear", default 1000;
        /// `useDelayLevel`: map delivery timestamps to delay levels instead of the timer.
        use_delay_level: bool = "useDelayLevel", default false;
        /// `messageDelayLevel`.
        message_delay_level: String = "messageDelayLevel", default DEFAULT_DELAY_LEVELS.to_owned();
        /// `enableBatchAck`.
        enable_batch_ack: bool = "enableBatchAck", default false;
        /// `transactionDataExpireMillis`: how long a sent half message's data is kept after its
        /// check window.
        transaction_data_expire_millis: i64 = "transactionDataExpireMillis", default 30_000;
        /// `transactionDataMaxNum` (per producer group and transaction id).
        transaction_data_max_num: usize = "transactionDataMaxNum", default 15;
        /// `transactionDataMaxTotal` (FerroMQ): transactions remembered in all.
        transaction_data_max_total: usize = "transactionDataMaxTotal", default 100_000;
        /// `tls.server.mode`: `disabled`, `permissive` (TLS and plaintext on one port) or
        /// `enforcing`.
        tls_server_mode: TlsMode = "tls.server.mode", default TlsMode::Permissive;
        /// `tlsTestModeEnable`: a self-signed certificate when no certificate is given.
        tls_test_mode_enable: bool = "tlsTestModeEnable", default true;
        /// `tls.server.certPath` (also `tlsCertPath`).
        tls_cert_path: String = "tls.server.certPath" | "tlsCertPath", default String::new();
        /// `tls.server.keyPath` (also `tlsKeyPath`).
        tls_key_path: String = "tls.server.keyPath" | "tlsKeyPath", default String::new();
        /// `remotingTimeoutMillis` (FerroMQ): a broker request's timeout when the client's
        /// deadline does not say.
        remoting_timeout_millis: u64 = "remotingTimeoutMillis", default 3000;
        /// `authenticationEnabled`: ACL 2.0, every gRPC call and every request of the remoting
        /// port must be signed by a user of the brokers (cluster mode; in local mode the
        /// broker's settings decide).
        authentication_enabled: bool = "authenticationEnabled", default false;
        /// `authenticationProvider`: blank or Java's default class.
        authentication_provider: String = "authenticationProvider", default String::new();
        /// `authenticationMetadataProvider`: blank or Java's
        /// `org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider`: the users are
        /// the brokers'.
        authentication_metadata_provider: String = "authenticationMetadataProvider", default String::new();
        /// `authenticationStrategy`: blank, Java's stateless or stateful strategy class (the
        /// same decision either way).
        authentication_strategy: String = "authenticationStrategy", default String::new();
        /// `authenticationWhitelist`: comma-separated remoting request codes and gRPC request
        /// names (`apache.rocketmq.v2.QueryRouteRequest`) not authenticated.
        authentication_whitelist: String = "authenticationWhitelist", default String::new();
        /// `authorizationEnabled`: ACL 2.0 policies decide what each user may do.
        authorization_enabled: bool = "authorizationEnabled", default false;
        /// `authorizationProvider`: blank or Java's default class.
        authorization_provider: String = "authorizationProvider", default String::new();
        /// `authorizationMetadataProvider`: blank or Java's
        /// `org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider`: the ACLs are the
        /// brokers'.
        authorization_metadata_provider: String = "authorizationMetadataProvider", default String::new();
        /// `authorizationStrategy`: as `authenticationStrategy`.
        authorization_strategy: String = "authorizationStrategy", default String::new();
        /// `authorizationWhitelist`: as `authenticationWhitelist`, not authorized.
        authorization_whitelist: String = "authorizationWhitelist", default String::new();
        /// `innerClientAuthenticationCredentials`: JSON `{"accessKey":..,"secretKey":..}`: the
        /// user (SUPER on the brokers) the proxy signs its own requests to name servers and
        /// brokers with, the requests it relays for remoting clients included.
        inner_client_authentication_credentials: String = "innerClientAuthenticationCredentials", default String::new();
        /// `userCacheRefreshSecond`: how often the users are read from the brokers again
        /// (fetched with the ACLs, at the shorter of the two periods).
        user_cache_refresh_second: u64 = "userCacheRefreshSecond", default 60;
        /// `userCacheExpiredSecond`: past this age without a successful refresh the proxy warns
        /// that it decides with an old copy (it keeps using it: no broker answering is no
        /// reason to let everyone in, or to lock everyone out).
        user_cache_expired_second: u64 = "userCacheExpiredSecond", default 600;
        /// `userCacheMaxNum`: Java's per-user cache size; the proxy holds every user, so it is
        /// accepted and has no effect.
        user_cache_max_num: usize = "userCacheMaxNum", default 1000;
        /// `aclCacheRefreshSecond`: as `userCacheRefreshSecond`, for the ACLs.
        acl_cache_refresh_second: u64 = "aclCacheRefreshSecond", default 60;
        /// `aclCacheExpiredSecond`: as `userCacheExpiredSecond`, for the ACLs.
        acl_cache_expired_second: u64 = "aclCacheExpiredSecond", default 600;
        /// `aclCacheMaxNum`: as `userCacheMaxNum` (no effect).
        acl_cache_max_num: usize = "aclCacheMaxNum", default 1000;
        /// `statefulAuthenticationCacheMaxNum`: accepted, no effect (every call is checked).
        stateful_authentication_cache_max_num: usize = "statefulAuthenticationCacheMaxNum", default 10_000;
        /// `statefulAuthenticationCacheExpiredSecond`: accepted, no effect.
        stateful_authentication_cache_expired_second: u64 = "statefulAuthenticationCacheExpiredSecond", default 60;
        /// `statefulAuthorizationCacheMaxNum`: accepted, no effect.
        stateful_authorization_cache_max_num: usize = "statefulAuthorizationCacheMaxNum", default 10_000;
        /// `statefulAuthorizationCacheExpiredSecond`: accepted, no effect.
        stateful_authorization_cache_expired_second: u64 = "statefulAuthorizationCacheExpiredSecond", default 60;
    }
}

/// Keys whose value is JSON text: a JSON object written in place of the text is taken as
/// that text (Java's JSON config binding accepts both).
const JSON_TEXT_KEYS: &[&str] = &["innerClientAuthenticationCredentials"];

fn default_proxy_name() -> String {
    std::env::var("PROXY_NAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_owned()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

impl ProxyConfig {
    /// Applies the keys of a JSON object (`rmq-proxy.json`): values may be strings, numbers
    /// or booleans; nested objects and arrays are refused with their key. Returns the unknown
    /// keys.
    ///
    /// # Errors
    /// Unreadable file, JSON that is not an object, or bad values (all named).
    pub fn load_json_file(&mut self, path: &Path) -> Result<Vec<String>, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        self.apply_json(&text).map_err(|reason| ConfigError::Invalid { path: Some(path.to_owned()), reason })
    }

    /// [`load_json_file`](Self::load_json_file) on text; every key or none is applied.
    ///
    /// # Errors
    /// The reasons, `; `-joined.
    pub fn apply_json(&mut self, text: &str) -> Result<Vec<String>, String> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let serde_json::Value::Object(map) = value else {
            return Err("the proxy config must be a JSON object of key: value".to_owned());
        };
        let mut updated = self.clone();
        let (mut unknown, mut problems) = (Vec::new(), Vec::new());
        for (key, value) in map {
            let text = match value {
                serde_json::Value::String(s) => s,
                serde_json::Value::Bool(b) => b.to_string(),
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Null => continue,
                serde_json::Value::Object(_) if JSON_TEXT_KEYS.contains(&key.as_str()) => value.to_string(),
                _ => {
                    problems.push(format!("{key}: nested values are not settings"));
                    continue;
                }
            };
            match updated.set(&key, &text) {
                Ok(true) => {}
                Ok(false) => unknown.push(key),
                Err(e) => problems.push(e.to_string()),
            }
        }
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        *self = updated;
        Ok(unknown)
    }

    /// The `tls.*` settings of the remoting port and of the proxy's own connections: the TLS
    /// keys this config shares with the gRPC port (`tls.server.mode`, `tlsTestModeEnable` as
    /// `tls.test.mode.enable`, the certificate paths), the other `tls.*` keys of the file (kept
    /// among the unknown keys), then the file named by `tls.config.file`.
    ///
    /// # Errors
    /// A bad value (naming the key), an unreadable `tls.config.file`.
    pub fn tls_config(&self) -> Result<TlsConfig, TlsError> {
        let mode = self.tls_server_mode.as_str().to_owned();
        let test_mode = self.tls_test_mode_enable.to_string();
        let shared = [
            ("tls.server.mode", mode.as_str()),
            ("tls.test.mode.enable", test_mode.as_str()),
            ("tls.server.certPath", self.tls_cert_path.as_str()),
            ("tls.server.keyPath", self.tls_key_path.as_str()),
        ];
        let others = self.unknown.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        TlsConfig::load(others.chain(shared))
    }

    /// The long polling bounds for receives, ms.
    pub fn long_polling_bounds_ms(&self) -> (i64, i64) {
        (
            self.grpc_client_consumer_min_long_polling_timeout_millis,
            self.grpc_client_consumer_max_long_polling_timeout_millis,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_defaults() {
        let c = ProxyConfig::default();
        assert_eq!((c.grpc_server_port, c.remoting_listen_port), (8081, 8080));
        assert_eq!(c.max_message_size, 4 << 20);
        assert_eq!(c.tls_server_mode, TlsMode::Permissive);
        assert_eq!(c.proxy_mode, "cluster");
    }

    #[test]
    fn json_keys_apply_all_or_nothing() {
        let mut c = ProxyConfig::default();
        let unknown =
            c.apply_json(r#"{"rocketMQClusterName":"C1","grpcServerPort":18081,"enableBatchAck":true,"x":1}"#).unwrap();
        assert_eq!((c.rocketmq_cluster_name.as_str(), c.grpc_server_port, c.enable_batch_ack), ("C1", 18081, true));
        assert_eq!(unknown, vec!["x".to_owned()]);
        let before = c.clone();
        let err = c.apply_json(r#"{"grpcServerPort":"abc","maxMessageSize":1}"#).unwrap_err();
        assert!(err.contains("grpcServerPort"), "{err}");
        assert_eq!(c, before);
        assert!(c.apply_json("[1]").is_err());
        assert!(c.apply_json(r#"{"a":{"b":1}}"#).unwrap_err().contains("a:"));
    }

    #[test]
    fn auth_keys_read_as_java_writes_them() {
        let mut c = ProxyConfig::default();
        assert!(!c.authentication_enabled && !c.authorization_enabled);
        assert_eq!((c.user_cache_refresh_second, c.acl_cache_expired_second), (60, 600));
        let unknown = c
            .apply_json(
                r#"{"authenticationEnabled": true, "authorizationEnabled": "true",
                    "authenticationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider",
                    "innerClientAuthenticationCredentials": {"accessKey": "proxy", "secretKey": "s"},
                    "userCacheRefreshSecond": 5}"#,
            )
            .unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert!(c.authentication_enabled && c.authorization_enabled);
        assert_eq!(c.user_cache_refresh_second, 5);
        let credentials: serde_json::Value = serde_json::from_str(&c.inner_client_authentication_credentials).unwrap();
        assert_eq!(credentials["accessKey"], "proxy");
        c.apply_json(r#"{"innerClientAuthenticationCredentials": "{\"accessKey\":\"p2\",\"secretKey\":\"s\"}"}"#)
            .unwrap();
        assert!(c.inner_client_authentication_credentials.contains("p2"));
    }
}
