//! ACL 2.0's users and ACLs, durable (Java: `LocalAuthenticationMetadataProvider`,
//! `LocalAuthorizationMetadataProvider` and the two metadata managers).
//!
//! Java keeps them in two RocksDB databases under `<storePathRootDir>/config`; FerroMQ keeps
//! `config/users.json` and `config/acls.json` there (the same `UserInfo` / `AclInfo` JSON the
//! admin API speaks), each replaced crash-safely on every change. Reads take a snapshot
//! (`Arc`) so a request never waits for a write. The cluster proxy keeps a copy of the
//! brokers' users and ACLs in memory only ([`AuthMetadata::in_memory`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use ferromq_protocol::body::{AclInfo, JsonBody, UserInfo};
use tracing::info;

use super::model::{
    canonical_subject, subject_user, Acl, PolicyType, Resource, User, UserChange, UserStatus, UserType,
};
use super::AuthError;

/// The users file under the config directory.
pub const USERS_FILE: &str = "users.json";
/// The ACLs file under the config directory.
pub const ACLS_FILE: &str = "acls.json";

/// Users and ACLs at one moment.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// By user name.
    pub users: BTreeMap<String, User>,
    /// By subject (`User:<name>`).
    pub acls: BTreeMap<String, Acl>,
}

impl Snapshot {
    /// Users and ACLs as the admin API lists them (a user needs a name and a password).
    ///
    /// # Errors
    /// The first user or ACL that is not valid.
    pub fn from_infos(users: Vec<UserInfo>, acls: Vec<AclInfo>) -> Result<Snapshot, AuthError> {
        let mut snapshot = Snapshot::default();
        for u in users {
            let (Some(name), Some(password)) = (u.username.clone(), u.password.clone()) else {
                return Err(AuthError::System("a user without username or password".to_owned()));
            };
            let user = User {
                username: name.clone(),
                password,
                user_type: u.user_type.as_deref().and_then(UserType::parse).unwrap_or(UserType::Normal),
                user_status: u.user_status.as_deref().and_then(UserStatus::parse).unwrap_or(UserStatus::Enable),
            };
            snapshot.users.insert(name, user);
        }
        for info in acls {
            let acl = Acl::from_info(&info, None)?;
            snapshot.acls.insert(acl.subject.clone(), acl);
        }
        Ok(snapshot)
    }
}

/// The store: durable ([`AuthMetadata::open`]) or held in memory only
/// ([`AuthMetadata::in_memory`]).
#[derive(Debug)]
pub struct AuthMetadata {
    /// Where the files are; `None` for a store in memory only.
    dir: Option<PathBuf>,
    state: RwLock<Arc<Snapshot>>,
    /// Serialises writes; holds the files' stamps as last written or read.
    writes: Mutex<FileStamps>,
}

/// (modified, length) of the users and ACLs files; `None` when absent.
type FileStamps = [Option<(std::time::SystemTime, u64)>; 2];

fn file_stamps(dir: &Path) -> FileStamps {
    let stamp = |name: &str| {
        std::fs::metadata(dir.join(name))
            .ok()
            .map(|m| (m.modified().unwrap_or(std::time::SystemTime::UNIX_EPOCH), m.len()))
    };
    [stamp(USERS_FILE), stamp(ACLS_FILE)]
}

fn read_snapshot(config_dir: &Path) -> Result<Snapshot, AuthError> {
    let read = |name: &str| -> Result<Option<Vec<u8>>, AuthError> {
        let path = config_dir.join(name);
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(AuthError::System(format!("cannot read {}: {e}", path.display()))),
        }
    };
    let users: Vec<UserInfo> = match read(USERS_FILE)? {
        Some(bytes) => JsonBody::decode(&bytes).map_err(|e| {
            AuthError::System(format!("{} is not a users file: {e}", config_dir.join(USERS_FILE).display()))
        })?,
        None => Vec::new(),
    };
    let acls: Vec<AclInfo> = match read(ACLS_FILE)? {
        Some(bytes) => JsonBody::decode(&bytes).map_err(|e| {
            AuthError::System(format!("{} is not an ACL file: {e}", config_dir.join(ACLS_FILE).display()))
        })?,
        None => Vec::new(),
    };
    Snapshot::from_infos(users, acls).map_err(|e| AuthError::System(format!("{}: {e}", config_dir.display())))
}

fn system(e: impl std::fmt::Display) -> AuthError {
    AuthError::System(e.to_string())
}

impl AuthMetadata {
    /// Opens the store in `config_dir` (files absent: empty).
    ///
    /// # Errors
    /// A file that cannot be read or is not the JSON this store writes, naming it.
    pub fn open(config_dir: &Path) -> Result<Self, AuthError> {
        let stamps = file_stamps(config_dir);
        let snapshot = read_snapshot(config_dir)?;
        Ok(AuthMetadata {
            dir: Some(config_dir.to_path_buf()),
            state: RwLock::new(Arc::new(snapshot)),
            writes: Mutex::new(stamps),
        })
    }

    /// Reads the files again if another writer changed them (a name server following the
    /// users a broker of the same host keeps); an unreadable file leaves the previous users
    /// and ACLs in force. Returns whether anything was read.
    ///
    /// # Errors
    /// The file that cannot be read or parsed, naming it.
    pub fn reload_if_changed(&self) -> Result<bool, AuthError> {
        let Some(dir) = &self.dir else {
            return Ok(false);
        };
        let mut known = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        let now = file_stamps(dir);
        if *known == now {
            return Ok(false);
        }
        // Remembered before parsing: a broken file is reported once, not every poll.
        *known = now;
        let snapshot = read_snapshot(dir)?;
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(snapshot);
        info!(dir = %dir.display(), "ACL 2.0 users and ACLs reloaded from disk");
        Ok(true)
    }

    /// A store without files, holding `snapshot` (Java: the cluster proxy's
    /// `ProxyAuthenticationMetadataProvider` and `ProxyAuthorizationMetadataProvider`, whose
    /// users and ACLs live on the brokers): changes, [`replace_all`](Self::replace_all)
    /// included, only swap the copy in memory.
    pub fn in_memory(snapshot: Snapshot) -> Self {
        AuthMetadata { dir: None, state: RwLock::new(Arc::new(snapshot)), writes: Mutex::new([None, None]) }
    }

    /// The current users and ACLs.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Applies `edit` to a copy under the write lock, writes the files it changed and swaps
    /// the copy in.
    fn change<T>(&self, edit: impl FnOnce(&mut Snapshot) -> Result<T, AuthError>) -> Result<T, AuthError> {
        let mut stamps = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.snapshot();
        let mut next = (*current).clone();
        let out = edit(&mut next)?;
        if let Some(dir) = &self.dir {
            if next.users != current.users {
                let body: Vec<UserInfo> = next.users.values().map(User::to_info).collect();
                ferromq_config::replace_file(&dir.join(USERS_FILE), &body.encode()).map_err(system)?;
            }
            if next.acls != current.acls {
                let body: Vec<AclInfo> = next.acls.values().map(Acl::to_info).collect();
                ferromq_config::replace_file(&dir.join(ACLS_FILE), &body.encode()).map_err(system)?;
            }
        }
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        if let Some(dir) = &self.dir {
            *stamps = file_stamps(dir);
        }
        Ok(out)
    }

    /// Replaces everything (a slave following its master's users and ACLs, the cluster proxy
    /// following the brokers'); true when that changed something.
    ///
    /// # Errors
    /// A write failure.
    pub fn replace_all(&self, snapshot: Snapshot) -> Result<bool, AuthError> {
        self.change(|s| {
            let changed = *s != snapshot;
            *s = snapshot;
            Ok(changed)
        })
    }

    /// Adds the users (and their ACLs) of ACL 1.0 accounts whose user does not exist yet
    /// (`migrateAuthFromV1Enabled`); returns how many were added.
    ///
    /// # Errors
    /// A write failure.
    pub fn import_plain(&self, accounts: &[crate::plain::PlainAccessConfig]) -> Result<usize, AuthError> {
        self.change(|s| {
            let mut added = 0;
            for account in accounts {
                if s.users.contains_key(&account.access_key) {
                    continue;
                }
                let (user, acl) = super::migrate::from_plain(account);
                s.users.insert(user.username.clone(), user);
                if let Some(acl) = acl {
                    s.acls.insert(acl.subject.clone(), acl);
                }
                added += 1;
            }
            Ok(added)
        })
    }

    /// The user, if any.
    pub fn user(&self, name: &str) -> Option<User> {
        self.snapshot().users.get(name).cloned()
    }

    /// Creates a user; an existing one is refused.
    ///
    /// # Errors
    /// `The user is existed`, a missing password, a write failure.
    pub fn create_user(&self, change: UserChange) -> Result<(), AuthError> {
        let Some(password) = change.password else {
            return Err(AuthError::Authentication("password can not be blank".to_owned()));
        };
        self.change(|s| {
            if s.users.contains_key(&change.username) {
                return Err(AuthError::Authentication("The user is existed".to_owned()));
            }
            let user = User {
                username: change.username.clone(),
                password,
                user_type: change.user_type.unwrap_or(UserType::Normal),
                user_status: change.user_status.unwrap_or(UserStatus::Enable),
            };
            s.users.insert(change.username, user);
            Ok(())
        })
    }

    /// Creates a SUPER user unless one of that name exists (`initAuthenticationUser`,
    /// `innerClientAuthenticationCredentials`).
    ///
    /// # Errors
    /// A write failure.
    pub fn ensure_super_user(&self, username: &str, password: &str) -> Result<bool, AuthError> {
        self.change(|s| {
            if s.users.contains_key(username) {
                return Ok(false);
            }
            s.users.insert(
                username.to_owned(),
                User {
                    username: username.to_owned(),
                    password: password.to_owned(),
                    user_type: UserType::Super,
                    user_status: UserStatus::Enable,
                },
            );
            info!(username, "created the initial SUPER user");
            Ok(true)
        })
    }

    /// Updates what `change` gives.
    ///
    /// # Errors
    /// `The user is not exist`, a write failure.
    pub fn update_user(&self, change: UserChange) -> Result<(), AuthError> {
        self.change(|s| {
            let user = s
                .users
                .get_mut(&change.username)
                .ok_or_else(|| AuthError::Authentication("The user is not exist".to_owned()))?;
            if let Some(p) = change.password {
                user.password = p;
            }
            if let Some(t) = change.user_type {
                user.user_type = t;
            }
            if let Some(st) = change.user_status {
                user.user_status = st;
            }
            Ok(())
        })
    }

    /// Deletes a user and its ACL; an unknown user is not an error (Java answers SUCCESS).
    ///
    /// # Errors
    /// A write failure.
    pub fn delete_user(&self, username: &str) -> Result<(), AuthError> {
        self.change(|s| {
            s.users.remove(username);
            s.acls.remove(&format!("User:{username}"));
            Ok(())
        })
    }

    /// Users whose name contains `filter` (all for a blank filter).
    pub fn list_users(&self, filter: Option<&str>) -> Vec<User> {
        let filter = filter.filter(|f| !f.trim().is_empty());
        self.snapshot().users.values().filter(|u| filter.is_none_or(|f| u.username.contains(f))).cloned().collect()
    }

    /// Creates or merges into the subject's ACL (AUTH_CREATE_ACL and AUTH_UPDATE_ACL behave
    /// the same in Java 5.3).
    ///
    /// # Errors
    /// `The subject of User:x is not exist.`, a write failure.
    pub fn upsert_acl(&self, acl: Acl) -> Result<(), AuthError> {
        self.change(|s| {
            let user = subject_user(&acl.subject).unwrap_or_default();
            if !s.users.contains_key(user) {
                return Err(AuthError::Authorization(format!("The subject of {} is not exist.", acl.subject)));
            }
            match s.acls.get_mut(&acl.subject) {
                Some(old) => old.merge(acl.policies),
                None => {
                    s.acls.insert(acl.subject.clone(), acl);
                }
            }
            Ok(())
        })
    }

    /// Deletes the subject's ACL, or one resource's entry of one policy.
    ///
    /// # Errors
    /// `The subject is not exist.`, `The acl is not exist.`, a write failure.
    pub fn delete_acl(
        &self,
        subject: &str,
        policy_type: PolicyType,
        resource: Option<&Resource>,
    ) -> Result<(), AuthError> {
        let subject = canonical_subject(subject);
        self.change(|s| {
            let user = subject_user(&subject).unwrap_or_default();
            if !s.users.contains_key(user) {
                return Err(AuthError::Authorization("The subject is not exist.".to_owned()));
            }
            let acl =
                s.acls.get_mut(&subject).ok_or_else(|| AuthError::Authorization("The acl is not exist.".to_owned()))?;
            match resource {
                Some(r) => {
                    acl.remove_entry(policy_type, r);
                    if acl.policies.is_empty() {
                        s.acls.remove(&subject);
                    }
                }
                None => {
                    s.acls.remove(&subject);
                }
            }
            Ok(())
        })
    }

    /// The subject's ACL.
    ///
    /// # Errors
    /// `The subject is not exist.`
    pub fn acl(&self, subject: &str) -> Result<Option<Acl>, AuthError> {
        let subject = canonical_subject(subject);
        let snapshot = self.snapshot();
        if !snapshot.users.contains_key(subject_user(&subject).unwrap_or_default()) {
            return Err(AuthError::Authorization("The subject is not exist.".to_owned()));
        }
        Ok(snapshot.acls.get(&subject).cloned())
    }

    /// ACLs whose subject contains `subject_filter`, keeping the entries whose resource key
    /// contains `resource_filter` (Java's `listAcl`).
    pub fn list_acls(&self, subject_filter: Option<&str>, resource_filter: Option<&str>) -> Vec<Acl> {
        let sf = subject_filter.filter(|f| !f.trim().is_empty());
        let rf = resource_filter.filter(|f| !f.trim().is_empty());
        let mut out = Vec::new();
        for acl in self.snapshot().acls.values() {
            if sf.is_some_and(|f| !acl.subject.contains(f)) {
                continue;
            }
            let mut acl = acl.clone();
            if let Some(f) = rf {
                if !acl.subject.contains(f) {
                    for p in &mut acl.policies {
                        p.entries.retain(|e| e.resource.key().contains(f));
                    }
                    acl.policies.retain(|p| !p.entries.is_empty());
                }
            }
            if !acl.policies.is_empty() {
                out.push(acl);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> UserInfo {
        UserInfo { username: Some(name.to_owned()), password: Some(format!("{name}-secret")), ..Default::default() }
    }

    #[test]
    fn an_in_memory_store_swaps_copies_and_writes_no_file() {
        let store = AuthMetadata::in_memory(Snapshot::default());
        assert!(store.snapshot().users.is_empty());
        let first = Snapshot::from_infos(vec![user("alice")], Vec::new()).unwrap();
        assert!(store.replace_all(first.clone()).unwrap(), "a new copy changes the store");
        assert!(!store.replace_all(first).unwrap(), "the same copy changes nothing");
        assert_eq!(store.user("alice").map(|u| u.password), Some("alice-secret".to_owned()));
        store.ensure_super_user("root", "pw").unwrap();
        assert!(store.user("root").is_some());
        assert!(store.replace_all(Snapshot::default()).unwrap());
        assert!(store.user("alice").is_none());
    }
}
