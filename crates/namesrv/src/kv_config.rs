//! The KV config table (namespace -> key -> value), persisted as RocketMQ's `kvConfig.json`:
//! `{"configTable":{"<namespace>":{"<key>":"<value>"}}}`. Java: `KVConfigManager`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tracing::info;

/// Namespace of the order-topic configuration (`"broker-a:4;broker-b:4"` per topic).
pub const NAMESPACE_ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// A failure to load or persist the table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KvConfigError {
    /// Reading or writing the file failed.
    #[error("kv config file {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a KV config table.
    #[error("kv config file {path} is malformed")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: ferromq_protocol::body::BodyError,
    },
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KvConfigFile {
    #[serde(default)]
    config_table: BTreeMap<String, BTreeMap<String, String>>,
}

/// The table and where it persists.
#[derive(Debug)]
pub struct KvConfig {
    path: PathBuf,
    table: BTreeMap<String, BTreeMap<String, String>>,
}

impl KvConfig {
    /// Loads the table from `path`; a missing file is an empty table.
    ///
    /// # Errors
    /// An unreadable or malformed file. A malformed file is not overwritten silently.
    pub fn load(path: &Path) -> Result<Self, KvConfigError> {
        let table = match std::fs::read(path) {
            Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => BTreeMap::new(),
            Ok(bytes) => {
                let file: KvConfigFile = ferromq_protocol::json::parse_lenient(&bytes)
                    .map_err(|source| KvConfigError::Malformed { path: path.to_owned(), source })?;
                file.config_table
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => return Err(KvConfigError::Io { path: path.to_owned(), source }),
        };
        info!(path = %path.display(), namespaces = table.len(), "kv config loaded");
        Ok(KvConfig { path: path.to_owned(), table })
    }

    /// Sets a value and persists.
    ///
    /// # Errors
    /// Persisting failed; the value stays set in memory.
    pub fn put(&mut self, namespace: &str, key: &str, value: &str) -> Result<(), KvConfigError> {
        self.table.entry(namespace.to_owned()).or_default().insert(key.to_owned(), value.to_owned());
        info!(namespace, key, "kv config put");
        self.persist()
    }

    /// Removes a value and persists if it existed.
    ///
    /// # Errors
    /// Persisting failed.
    pub fn delete(&mut self, namespace: &str, key: &str) -> Result<(), KvConfigError> {
        let Some(ns) = self.table.get_mut(namespace) else { return Ok(()) };
        if ns.remove(key).is_none() {
            return Ok(());
        }
        // An emptied namespace stays, listed empty (Java).
        info!(namespace, key, "kv config deleted");
        self.persist()
    }

    /// One value.
    pub fn get(&self, namespace: &str, key: &str) -> Option<&str> {
        self.table.get(namespace)?.get(key).map(String::as_str)
    }

    /// A whole namespace.
    pub fn namespace(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.table.get(namespace)
    }

    /// Writes the table to a temporary file, syncs it and renames it over the old one, so a
    /// crash leaves either the old or the new table.
    fn persist(&self) -> Result<(), KvConfigError> {
        let file = KvConfigFile { config_table: self.table.clone() };
        let json = serde_json::to_vec_pretty(&file)
            .map_err(|e| KvConfigError::Io { path: self.path.clone(), source: std::io::Error::other(e) })?;
        ferromq_config::replace_file(&self.path, &json)
            .map_err(|e| KvConfigError::Io { path: e.path, source: e.source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_survive_a_reload_and_deletes_persist() {
        let dir = std::env::temp_dir().join(format!("ferromq-kv-{}-{}", std::process::id(), line!()));
        let path = dir.join("kvConfig.json");
        let _ = std::fs::remove_dir_all(&dir);
        let mut kv = KvConfig::load(&path).unwrap();
        kv.put("ns", "a", "1").unwrap();
        kv.put("ns", "b", "2").unwrap();
        kv.delete("ns", "a").unwrap();
        let kv = KvConfig::load(&path).unwrap();
        assert_eq!(kv.get("ns", "a"), None);
        assert_eq!(kv.get("ns", "b"), Some("2"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("configTable"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn malformed_file_is_an_error_not_an_empty_table() {
        let dir = std::env::temp_dir().join(format!("ferromq-kv-{}-{}", std::process::id(), line!()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kvConfig.json");
        std::fs::write(&path, b"{not json").unwrap();
        assert!(matches!(KvConfig::load(&path), Err(KvConfigError::Malformed { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
