//! A controller-mode broker's identity files (controller-mode.md §5.1), Java's text so a store
//! moves between Java and FerroMQ brokers:
//!
//! - `brokerIdentity` (`storePathBrokerIdentity`): `<clusterName>#<brokerName>#<brokerId>`, the
//!   id the controller gave this broker;
//! - `brokerIdentity-temp`: `<clusterName>#<brokerName>#<brokerId>#<registerCheckCode>`, the id
//!   being applied for (written before APPLY_BROKER_ID, so a broker that crashes in between
//!   applies again with the same check code and gets the same id).
//!
//! Written as the other metadata files: `<file>.tmp` synced, the current file kept as
//! `<file>.bak`, the rename, the directory synced; read from the `.bak` when the file is torn.

use std::path::{Path, PathBuf};

use ferromq_config::file::{replace_file, with_suffix, write_synced, FileError};

/// Suffix of the temporary identity file (Java's `TempBrokerMetadata`).
pub const TEMP_SUFFIX: &str = "-temp";
const BACKUP_SUFFIX: &str = ".bak";

/// The broker's identity in the controller's broker set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerIdentity {
    /// The cluster.
    pub cluster_name: String,
    /// The broker set.
    pub broker_name: String,
    /// The controller-assigned id (>= 1).
    pub broker_id: i64,
}

/// An identity being applied for, with the check code sent with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingIdentity {
    /// The identity asked for.
    pub identity: BrokerIdentity,
    /// `"<brokerAddr>;<timestampMs>"`.
    pub register_check_code: String,
}

/// Why an identity file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// Reading or writing failed.
    #[error(transparent)]
    File(#[from] FileError),
    /// Neither the file nor its `.bak` holds an identity.
    #[error("broker identity file {path} is corrupt ({reason}) and has no valid backup; restore it, or remove it and clean this broker's id from the controller (mqadmin cleanBrokerMetadata) to register as a new replica")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl BrokerIdentity {
    /// `<clusterName>#<brokerName>#<brokerId>`.
    pub fn encode(&self) -> String {
        format!("{}#{}#{}", self.cluster_name, self.broker_name, self.broker_id)
    }

    fn parse(text: &str) -> Result<BrokerIdentity, String> {
        let parts: Vec<&str> = text.trim().split('#').collect();
        let [cluster, name, id] = parts[..] else {
            return Err(format!("{text:?} is not <cluster>#<brokerName>#<brokerId>"));
        };
        identity(cluster, name, id)
    }

    /// Loads `path` (or its `.bak`); `None` when neither exists.
    ///
    /// # Errors
    /// The file exists but neither it nor its backup parses.
    pub fn load(path: &Path) -> Result<Option<BrokerIdentity>, IdentityError> {
        load(path, BrokerIdentity::parse)
    }

    /// Writes the identity to `path`.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn store(&self, path: &Path) -> Result<(), IdentityError> {
        store(path, &self.encode())
    }
}

impl PendingIdentity {
    /// `<clusterName>#<brokerName>#<brokerId>#<registerCheckCode>`.
    pub fn encode(&self) -> String {
        format!("{}#{}", self.identity.encode(), self.register_check_code)
    }

    fn parse(text: &str) -> Result<PendingIdentity, String> {
        let parts: Vec<&str> = text.trim().split('#').collect();
        let [cluster, name, id, code] = parts[..] else {
            return Err(format!("{text:?} is not <cluster>#<brokerName>#<brokerId>#<checkCode>"));
        };
        Ok(PendingIdentity { identity: identity(cluster, name, id)?, register_check_code: code.to_owned() })
    }

    /// The temporary file beside `identity_path`.
    pub fn path_for(identity_path: &Path) -> PathBuf {
        with_suffix(identity_path, TEMP_SUFFIX)
    }

    /// Loads the temporary file beside `identity_path`; `None` when there is none.
    ///
    /// # Errors
    /// The file exists but neither it nor its backup parses.
    pub fn load(identity_path: &Path) -> Result<Option<PendingIdentity>, IdentityError> {
        load(&Self::path_for(identity_path), PendingIdentity::parse)
    }

    /// Writes the temporary file beside `identity_path`.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn store(&self, identity_path: &Path) -> Result<(), IdentityError> {
        store(&Self::path_for(identity_path), &self.encode())
    }

    /// Removes the temporary file (and its backup) beside `identity_path`, once the identity
    /// itself is stored.
    ///
    /// # Errors
    /// A file exists and cannot be removed.
    pub fn remove(identity_path: &Path) -> Result<(), IdentityError> {
        let path = Self::path_for(identity_path);
        for p in [with_suffix(&path, BACKUP_SUFFIX), path] {
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(FileError::at(&p)(e).into()),
                _ => {}
            }
        }
        Ok(())
    }
}

fn identity(cluster: &str, name: &str, id: &str) -> Result<BrokerIdentity, String> {
    let broker_id: i64 = id.parse().map_err(|_| format!("broker id {id:?} is not a number"))?;
    if cluster.is_empty() || name.is_empty() {
        return Err("empty cluster or broker name".to_owned());
    }
    Ok(BrokerIdentity { cluster_name: cluster.to_owned(), broker_name: name.to_owned(), broker_id })
}

fn load<T>(path: &Path, parse: fn(&str) -> Result<T, String>) -> Result<Option<T>, IdentityError> {
    let read = |p: &Path| match std::fs::read_to_string(p) {
        Ok(t) if t.trim().is_empty() => Ok(None),
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(FileError::at(p)(e)),
    };
    let main = read(path)?;
    let failure = match main.as_deref().map(parse) {
        Some(Ok(v)) => return Ok(Some(v)),
        Some(Err(reason)) => Some(reason),
        None => None,
    };
    match read(&with_suffix(path, BACKUP_SUFFIX))?.as_deref().map(parse) {
        Some(Ok(v)) => {
            if let Some(reason) = &failure {
                tracing::warn!(file = %path.display(), reason, "broker identity file corrupt, read its .bak");
            }
            Ok(Some(v))
        }
        _ => match failure {
            Some(reason) => Err(IdentityError::Corrupt { path: path.to_owned(), reason }),
            None => Ok(None),
        },
    }
}

fn store(path: &Path, text: &str) -> Result<(), IdentityError> {
    match std::fs::read(path) {
        Ok(previous) => write_synced(&with_suffix(path, BACKUP_SUFFIX), &previous)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(FileError::at(path)(e).into()),
    }
    replace_file(path, text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: i64) -> BrokerIdentity {
        BrokerIdentity { cluster_name: "DefaultCluster".into(), broker_name: "broker-a".into(), broker_id: n }
    }

    #[test]
    fn java_text_both_files() {
        assert_eq!(id(2).encode(), "DefaultCluster#broker-a#2");
        let p = PendingIdentity { identity: id(3), register_check_code: "10.0.0.1:10911;1700000000000".into() };
        assert_eq!(p.encode(), "DefaultCluster#broker-a#3#10.0.0.1:10911;1700000000000");
        assert_eq!(PendingIdentity::parse(&p.encode()).unwrap(), p);
        assert!(BrokerIdentity::parse("a#b").is_err());
        assert!(BrokerIdentity::parse("a#b#x").is_err());
        assert!(BrokerIdentity::parse("#b#1").is_err());
    }

    #[test]
    fn store_load_backup_and_the_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store/brokerIdentity");
        assert_eq!(BrokerIdentity::load(&path).unwrap(), None);
        assert_eq!(PendingIdentity::load(&path).unwrap(), None);

        let pending = PendingIdentity { identity: id(1), register_check_code: "a:1;5".into() };
        pending.store(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("store/brokerIdentity-temp")).unwrap(),
            "DefaultCluster#broker-a#1#a:1;5"
        );
        assert_eq!(PendingIdentity::load(&path).unwrap(), Some(pending));

        id(1).store(&path).unwrap();
        PendingIdentity::remove(&path).unwrap();
        assert_eq!(PendingIdentity::load(&path).unwrap(), None);
        assert_eq!(BrokerIdentity::load(&path).unwrap(), Some(id(1)));

        // A second store keeps the first as .bak; a torn file falls back to it.
        id(4).store(&path).unwrap();
        std::fs::write(&path, "DefaultCluster#broker-a#").unwrap();
        assert_eq!(BrokerIdentity::load(&path).unwrap(), Some(id(1)));
        std::fs::write(with_suffix(&path, BACKUP_SUFFIX), "junk").unwrap();
        let err = BrokerIdentity::load(&path).unwrap_err().to_string();
        assert!(err.contains("brokerIdentity") && err.contains("cleanBrokerMetadata"), "{err}");
    }
}
