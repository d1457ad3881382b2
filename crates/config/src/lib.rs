//! Settings structs under RocketMQ's config keys.
//!
//! [`rocketmq_config!`] declares a struct whose fields each map to a RocketMQ key (plus
//! optional aliases, e.g. the misspelt `mapedFileSizeCommitLog`), with Java's defaults. The
//! generated struct applies `key=value` text the way a `.properties` file or an
//! UPDATE_*_CONFIG request does, keeps unknown keys so they can be warned about and echoed, and
//! writes itself back as properties text. Parsing the text itself lives in
//! `ferromq_protocol::properties_text`.

use std::path::{Path, PathBuf};

pub use ferromq_protocol::properties_text;

pub mod file;
pub mod ip_block;
pub mod report;
pub use file::{replace_file, FileError};
pub use ip_block::{canonical_ip, IpBlock};
pub use report::error_chain;

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
    /// The config text is not valid, or values are wrong; every problem is listed.
    #[error("invalid config{}: {reason}", path.as_ref().map(|p| format!(" file {}", p.display())).unwrap_or_default())]
    Invalid {
        /// The file, when read from one.
        path: Option<PathBuf>,
        /// Every problem found.
        reason: String,
    },
}

/// A config value type with Java's text form.
pub trait ConfigValue: Sized {
    /// What the text should look like, for error messages.
    const EXPECTED: &'static str;
    /// Parses the (trimmed) text.
    fn parse_value(text: &str) -> Option<Self>;
    /// Java's text form.
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
    /// Java's `Boolean.parseBoolean` reads anything but "true" as false; a typo in a config
    /// file is better reported, so only true/false (any case) are accepted.
    fn parse_value(text: &str) -> Option<Self> {
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

macro_rules! config_number {
    ($($t:ty),*) => {$(
        impl ConfigValue for $t {
            const EXPECTED: &'static str = "a number";
            fn parse_value(text: &str) -> Option<Self> {
                text.parse().ok()
            }
            fn render(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
config_number!(u8, u16, u32, u64, usize, i32, i64, f64);

/// Operations every generated config struct has.
pub trait RocketMqConfig {
    /// Applies one setting. Returns `Ok(false)` for a key this struct does not use (kept as
    /// unknown).
    ///
    /// # Errors
    /// [`ConfigError::InvalidValue`] when the text does not parse.
    fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError>;

    /// Every setting as `(key, value)`: known keys in declaration order, then unknown ones.
    fn to_properties(&self) -> Vec<(String, String)>;

    /// Applies properties text; returns the unknown keys.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] listing every line that could not be applied; nothing is
    /// applied then.
    fn apply_text(&mut self, text: &str) -> Result<Vec<String>, ConfigError>
    where
        Self: Clone,
    {
        let entries =
            properties_text::parse(text).map_err(|e| ConfigError::Invalid { path: None, reason: e.to_string() })?;
        let mut updated = self.clone();
        let mut unknown = Vec::new();
        let mut problems = Vec::new();
        for (key, value) in entries {
            match updated.set(&key, &value) {
                Ok(true) => {}
                Ok(false) => unknown.push(key),
                Err(e) => problems.push(e.to_string()),
            }
        }
        if !problems.is_empty() {
            return Err(ConfigError::Invalid { path: None, reason: problems.join("; ") });
        }
        *self = updated;
        Ok(unknown)
    }

    /// Loads a properties file over the current values; returns the unknown keys.
    ///
    /// # Errors
    /// Unreadable file, bad syntax, or wrong values (all reported).
    fn load_file(&mut self, path: &Path) -> Result<Vec<String>, ConfigError>
    where
        Self: Clone,
    {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        self.apply_text(&text).map_err(|e| match e {
            ConfigError::Invalid { reason, .. } => ConfigError::Invalid { path: Some(path.to_owned()), reason },
            other => other,
        })
    }

    /// The settings as properties text.
    fn to_text(&self) -> String {
        properties_text::to_text(self.to_properties())
    }
}

/// Declares a config struct. Each field names its RocketMQ key, optional aliases, and its
/// default:
///
/// ```
/// ferromq_config::rocketmq_config! {
///     /// Example settings.
///     pub struct ExampleConfig {
///         /// `listenPort`.
///         listen_port: u16 = "listenPort", default 9876;
///         /// `mappedFileSizeCommitLog` (also read as the old spelling).
///         file_size: u64 = "mappedFileSizeCommitLog" | "mapedFileSizeCommitLog", default 1 << 30;
///     }
/// }
/// use ferromq_config::RocketMqConfig;
/// let mut c = ExampleConfig::default();
/// c.set("mapedFileSizeCommitLog", "1024").unwrap();
/// assert_eq!(c.file_size, 1024);
/// ```
#[macro_export]
macro_rules! rocketmq_config {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$doc:meta])* $field:ident : $ty:ty = $key:literal $(| $alias:literal)*, default $default:expr; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[$doc])* pub $field: $ty, )*
            /// Keys this component does not use, kept so they can be echoed back.
            pub unknown: ::std::collections::BTreeMap<String, String>,
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $field: $default, )* unknown: ::std::collections::BTreeMap::new() }
            }
        }

        impl $name {
            /// Every key this struct understands (aliases excluded).
            pub const KEYS: &'static [&'static str] = &[$($key),*];
        }

        impl $crate::RocketMqConfig for $name {
            fn set(&mut self, key: &str, value: &str) -> Result<bool, $crate::ConfigError> {
                match key {
                    $( $key $(| $alias)* => {
                        self.$field = <$ty as $crate::ConfigValue>::parse_value(value.trim()).ok_or_else(|| {
                            $crate::ConfigError::InvalidValue {
                                key: key.to_owned(),
                                value: value.to_owned(),
                                expected: <$ty as $crate::ConfigValue>::EXPECTED,
                            }
                        })?;
                        Ok(true)
                    } )*
                    _ => {
                        self.unknown.insert(key.to_owned(), value.to_owned());
                        Ok(false)
                    }
                }
            }

            fn to_properties(&self) -> Vec<(String, String)> {
                let mut out = vec![$( ($key.to_owned(), $crate::ConfigValue::render(&self.$field)), )*];
                out.extend(self.unknown.iter().map(|(k, v)| (k.clone(), v.clone())));
                out
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    rocketmq_config! {
        /// Test settings.
        pub struct TestConfig {
            /// A port.
            port: u16 = "listenPort", default 9876;
            /// A size with an alias.
            size: u64 = "mappedFileSizeCommitLog" | "mapedFileSizeCommitLog", default 1024;
            /// A flag.
            flag: bool = "someFlag", default false;
        }
    }

    #[test]
    fn keys_aliases_and_unknown_keys() {
        let mut c = TestConfig::default();
        let unknown = c.apply_text("listenPort = 1234\nmapedFileSizeCommitLog=2048\nother=x\n").unwrap();
        assert_eq!((c.port, c.size), (1234, 2048));
        assert_eq!(unknown, vec!["other".to_owned()]);
        assert_eq!(TestConfig::KEYS, ["listenPort", "mappedFileSizeCommitLog", "someFlag"]);
        let text = c.to_text();
        assert!(text.contains("mappedFileSizeCommitLog=2048") && text.contains("other=x"), "{text}");
    }

    #[test]
    fn bad_values_are_all_reported_and_nothing_is_applied() {
        let mut c = TestConfig::default();
        let err = c.apply_text("listenPort=abc\nsomeFlag=maybe\nmappedFileSizeCommitLog=1\n").unwrap_err().to_string();
        assert!(err.contains("listenPort") && err.contains("someFlag"), "{err}");
        assert_eq!(c, TestConfig::default());
    }
}
