//! `NamesrvConfig`: the name server's settings under RocketMQ's `namesrv.conf` keys.
//!
//! One struct holds every setting with Java's defaults (Java: `NamesrvConfig`,
//! `NettyServerConfig`); parsing and writing properties text come from `ferromq-config`.

use std::path::PathBuf;
use std::time::Duration;

use ferromq_config::rocketmq_config;

fn home_dir() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."))
}

rocketmq_config! {
    /// The name server's settings. Field docs name the RocketMQ key.
    pub struct NamesrvConfig {
        /// `rocketmqHome`: where `conf/plain_acl.yml` and `conf/acl/` are (ACL 1.0); blank: the
        /// working directory.
        rocketmq_home: String = "rocketmqHome", default std::env::var("ROCKETMQ_HOME").unwrap_or_default();
        /// `kvConfigPath`: where the KV config table persists.
        kv_config_path: PathBuf = "kvConfigPath", default home_dir().join("namesrv").join("kvConfig.json");
        /// `configStorePath`: where UPDATE_NAMESRV_CONFIG persists settings.
        config_store_path: PathBuf = "configStorePath", default home_dir().join("namesrv").join("namesrv.properties");
        /// `productEnvName`.
        product_env_name: String = "productEnvName", default "center".to_owned();
        /// `clusterTest`.
        cluster_test: bool = "clusterTest", default false;
        /// `orderMessageEnable`: put the ORDER_TOPIC_CONFIG KV entry into routes.
        order_message_enable: bool = "orderMessageEnable", default false;
        /// `returnOrderTopicConfigToBroker`: answer broker registrations with the order-topic KV list.
        return_order_topic_config_to_broker: bool = "returnOrderTopicConfigToBroker", default true;
        /// `scanNotActiveBrokerInterval` (ms): how often silent brokers are looked for.
        scan_not_active_broker_interval_ms: u64 = "scanNotActiveBrokerInterval", default 5_000;
        /// `supportActingMaster`: show the lowest slave as master when a master is gone.
        support_acting_master: bool = "supportActingMaster", default false;
        /// `enableAllTopicList`: serve GET_ALL_TOPIC_LIST_FROM_NAMESERVER.
        enable_all_topic_list: bool = "enableAllTopicList", default true;
        /// `enableTopicList`: serve GET_TOPICS_BY_CLUSTER and the unit topic lists.
        enable_topic_list: bool = "enableTopicList", default true;
        /// `deleteTopicWithBrokerRegistration`: drop a broker's topics missing from its registration.
        delete_topic_with_broker_registration: bool = "deleteTopicWithBrokerRegistration", default false;
        /// `configBlackList`: keys UPDATE_NAMESRV_CONFIG may not change, `;`-separated.
        config_black_list: String = "configBlackList", default "configBlackList;configStorePath;kvConfigPath;brokerRegisterWhiteList;adminRequestWhiteList;proxyProtocolTrustedAddresses;rocketmqHome;aclEnable;authenticationEnabled;authorizationEnabled;authConfigPath;initAuthenticationUser".to_owned();
        /// `listenPort`.
        listen_port: u16 = "listenPort", default 9876;
        /// `bindAddress`.
        bind_address: String = "bindAddress", default "0.0.0.0".to_owned();
        /// `proxyProtocolTrustedAddresses` (FerroMQ): the load balancers (addresses and CIDR
        /// blocks, comma-separated) whose PROXY protocol headers are believed; empty: a
        /// connection opening with one is closed (Java believes anyone's).
        proxy_protocol_trusted_addresses: String = "proxyProtocolTrustedAddresses", default String::new();
        /// `enableControllerInNamesrv`: also run a controller node in this process (its
        /// `controllerDLeger*` keys in the same file; its own port, from `controllerDLegerPeers`).
        enable_controller_in_namesrv: bool = "enableControllerInNamesrv", default false;
        /// `serverChannelMaxIdleTimeSeconds`: idle connections close after this.
        server_channel_max_idle_time_seconds: u64 = "serverChannelMaxIdleTimeSeconds", default 120;
        /// `serverMaxConnections` (FerroMQ): connections served at once; a new one beyond it
        /// is closed at once. At least 1.
        server_max_connections: usize = "serverMaxConnections", default 10_000;
        /// `serverMaxConnectionsPerAddress` (FerroMQ): connections one client address may hold
        /// at once. At least 1.
        server_max_connections_per_address: usize = "serverMaxConnectionsPerAddress", default 1_000;
        /// `brokerRegisterWhiteList` (FerroMQ): addresses and CIDR blocks brokers may register,
        /// unregister and heartbeat from; empty: any.
        broker_register_white_list: String = "brokerRegisterWhiteList", default String::new();
        /// `adminRequestWhiteList` (FerroMQ): addresses and CIDR blocks operators may change
        /// write permissions, topics, KV config and settings from; empty: any.
        admin_request_white_list: String = "adminRequestWhiteList", default String::new();
        /// `aclEnable` (FerroMQ on the name server): registrations and admin changes must be
        /// signed by an admin account of `plain_acl.yml` (or come from a global white address).
        acl_enable: bool = "aclEnable", default false;
        /// `authenticationEnabled` (FerroMQ on the name server): registrations and admin
        /// changes must be signed by an ACL 2.0 user allowed to (SUPER, or a policy on the
        /// cluster); route queries stay open as in Java.
        authentication_enabled: bool = "authenticationEnabled", default false;
        /// `authorizationEnabled`: the same switch as `authenticationEnabled` here (the checks
        /// run together on the name server).
        authorization_enabled: bool = "authorizationEnabled", default false;
        /// `authConfigPath`: the directory of `users.json` and `acls.json` (a broker keeps
        /// them in `<storePathRootDir>/config`); reread when they change.
        auth_config_path: PathBuf = "authConfigPath", default home_dir().join("namesrv").join("config");
        /// `initAuthenticationUser`: `{"username":..,"password":..}`, a SUPER user written to
        /// `authConfigPath` at start if absent (the brokers' `innerClientAuthenticationCredentials`).
        init_authentication_user: String = "initAuthenticationUser", default String::new();
    }
}

impl NamesrvConfig {
    /// Keys that UPDATE_NAMESRV_CONFIG refuses.
    pub fn black_list(&self) -> Vec<&str> {
        self.config_black_list.split(';').map(str::trim).filter(|k| !k.is_empty()).collect()
    }

    /// `plain_acl.yml` and the `conf/acl` directory under `rocketmqHome`.
    pub fn plain_acl_paths(&self) -> (PathBuf, PathBuf) {
        let home = match self.rocketmq_home.trim() {
            "" => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            h => PathBuf::from(h),
        };
        (home.join(ferromq_auth::plain::DEFAULT_PLAIN_FILE), home.join(ferromq_auth::plain::DEFAULT_ACL_DIR))
    }

    /// Idle timeout as a duration.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.server_channel_max_idle_time_seconds)
    }
}

#[cfg(test)]
mod tests {
    use ferromq_config::RocketMqConfig;

    use super::*;

    #[test]
    fn defaults_match_rocketmq() {
        let c = NamesrvConfig::default();
        assert_eq!(c.listen_port, 9876);
        assert_eq!(c.scan_not_active_broker_interval_ms, 5_000);
        assert!(!c.order_message_enable);
        assert!(c.return_order_topic_config_to_broker);
        assert!(c.kv_config_path.ends_with("namesrv/kvConfig.json"));
    }

    #[test]
    fn properties_text_sets_known_keys_and_keeps_unknown_ones() {
        let mut c = NamesrvConfig::default();
        let unknown = c.apply_text("listenPort=19876\norderMessageEnable = true\nfoo=bar\n").unwrap();
        assert_eq!(c.listen_port, 19876);
        assert!(c.order_message_enable);
        assert_eq!(unknown, vec!["foo".to_owned()]);
        let text = c.to_text();
        assert!(text.contains("listenPort=19876"));
        assert!(text.contains("foo=bar"));
    }
}
