//! `NamesrvConfig`: the name server's settings under RocketMQ's `namesrv.conf` keys.
//!
//! One struct holds every setting with Java's defaults; `set` applies one `key=value` the
//! way a properties file or UPDATE_NAMESRV_CONFIG does, and `to_properties` writes them back
//! for `-p` and GET_NAMESRV_CONFIG. Java: `NamesrvConfig`, `NettyServerConfig`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use ferromq_protocol::properties_text;

/// A setting that could not be applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The value does not parse as the key's type.
    #[error("invalid value {value:?} for {key}: expected {expected}")]
    InvalidValue {
        /// The key.
        key: String,
        /// The text given.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// The config file could not be read.
    #[error("cannot read config file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The config file is not valid properties text.
    #[error("cannot parse config file {path}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

fn home_dir() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."))
}

macro_rules! namesrv_config {
    ($( $(#[$doc:meta])* $field:ident : $ty:ty = $key:literal, default $default:expr; )*) => {
        /// The name server's settings. Field docs name the RocketMQ key.
        #[derive(Debug, Clone, PartialEq)]
        pub struct NamesrvConfig {
            $( $(#[$doc])* pub $field: $ty, )*
            /// Keys this server does not use, kept so GET_NAMESRV_CONFIG echoes them.
            pub unknown: BTreeMap<String, String>,
        }

        impl Default for NamesrvConfig {
            fn default() -> Self {
                NamesrvConfig { $( $field: $default, )* unknown: BTreeMap::new() }
            }
        }

        impl NamesrvConfig {
            /// Every key this server understands.
            pub const KEYS: &'static [&'static str] = &[$($key),*];

            /// Applies one setting. Returns `Ok(false)` for a key this server does not use
            /// (kept in `unknown`).
            ///
            /// # Errors
            /// [`ConfigError::InvalidValue`] when the text does not parse.
            pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
                match key {
                    $( $key => {
                        self.$field = ConfigValue::parse_value(value.trim()).ok_or_else(|| ConfigError::InvalidValue {
                            key: key.to_owned(),
                            value: value.to_owned(),
                            expected: <$ty as ConfigValue>::EXPECTED,
                        })?;
                        Ok(true)
                    } )*
                    _ => {
                        self.unknown.insert(key.to_owned(), value.to_owned());
                        Ok(false)
                    }
                }
            }

            /// Every setting as `(key, value)`, known keys first in declaration order.
            pub fn to_properties(&self) -> Vec<(String, String)> {
                let mut out = vec![$( ($key.to_owned(), ConfigValue::render(&self.$field)), )*];
                out.extend(self.unknown.iter().map(|(k, v)| (k.clone(), v.clone())));
                out
            }
        }
    };
}

/// A config value type with Java's text form.
trait ConfigValue: Sized {
    const EXPECTED: &'static str;
    fn parse_value(text: &str) -> Option<Self>;
    fn render(&self) -> String;
}

impl ConfigValue for String {
    const EXPECTED: &'static str = "text";
    fn parse_value(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
    fn render(&self) -> String {
        self.clone()
    }
}

impl ConfigValue for PathBuf {
    const EXPECTED: &'static str = "a path";
    fn parse_value(text: &str) -> Option<Self> {
        Some(PathBuf::from(text))
    }
    fn render(&self) -> String {
        self.display().to_string()
    }
}

impl ConfigValue for bool {
    const EXPECTED: &'static str = "true or false";
    fn parse_value(text: &str) -> Option<Self> {
        // Java's Boolean.parseBoolean would read anything else as false; a typo in a config
        // file is better reported.
        if text.eq_ignore_ascii_case("true") {
            Some(true)
        } else if text.eq_ignore_ascii_case("false") {
            Some(false)
        } else {
            None
        }
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

macro_rules! config_integer {
    ($($t:ty),*) => {$(
        impl ConfigValue for $t {
            const EXPECTED: &'static str = "an integer";
            fn parse_value(text: &str) -> Option<Self> {
                text.parse().ok()
            }
            fn render(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
config_integer!(u16, u32, u64, i64);

namesrv_config! {
    /// `rocketmqHome`: informational; FerroMQ needs no installation directory.
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
    config_black_list: String = "configBlackList", default "configBlackList;configStorePath;kvConfigPath".to_owned();
    /// `listenPort`.
    listen_port: u16 = "listenPort", default 9876;
    /// `bindAddress`.
    bind_address: String = "bindAddress", default "0.0.0.0".to_owned();
    /// `serverChannelMaxIdleTimeSeconds`: idle connections close after this.
    server_channel_max_idle_time_seconds: u64 = "serverChannelMaxIdleTimeSeconds", default 120;
}

impl NamesrvConfig {
    /// Loads a `namesrv.conf` properties file over the defaults. Unknown keys are returned so
    /// the caller can warn once about each.
    ///
    /// # Errors
    /// Unreadable file, bad syntax, or a value of the wrong type (every bad value is reported).
    pub fn load_file(&mut self, path: &std::path::Path) -> Result<Vec<String>, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        self.apply_text(&text).map_err(|reason| ConfigError::Parse { path: path.to_owned(), reason })
    }

    /// Applies properties text; returns the unknown keys, or every problem found.
    ///
    /// # Errors
    /// A description of every line that could not be applied.
    pub fn apply_text(&mut self, text: &str) -> Result<Vec<String>, String> {
        let entries = properties_text::parse(text).map_err(|e| e.to_string())?;
        let mut unknown = Vec::new();
        let mut problems = Vec::new();
        for (key, value) in entries {
            match self.set(&key, &value) {
                Ok(true) => {}
                Ok(false) => unknown.push(key),
                Err(e) => problems.push(e.to_string()),
            }
        }
        if problems.is_empty() {
            Ok(unknown)
        } else {
            Err(problems.join("; "))
        }
    }

    /// The settings as properties text.
    pub fn to_text(&self) -> String {
        properties_text::to_text(self.to_properties())
    }

    /// Keys that UPDATE_NAMESRV_CONFIG refuses.
    pub fn black_list(&self) -> Vec<&str> {
        self.config_black_list.split(';').map(str::trim).filter(|k| !k.is_empty()).collect()
    }

    /// Idle timeout as a duration.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.server_channel_max_idle_time_seconds)
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn bad_values_are_all_reported() {
        let mut c = NamesrvConfig::default();
        let err = c.apply_text("listenPort=abc\nclusterTest=maybe\n").unwrap_err();
        assert!(err.contains("listenPort"), "{err}");
        assert!(err.contains("clusterTest"), "{err}");
    }
}
