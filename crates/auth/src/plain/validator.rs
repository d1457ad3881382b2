//! ACL 1.0's decision and its data (Java: `PlainPermissionManager` behind
//! `PlainAccessValidator`): the accounts of the default file and of every `*.yml`/`*.yaml` in
//! the ACL directory, the validation order of acl-and-tls.md 2.4, reloading when a file
//! changes, and the admin changes (account create/update/delete, global white addresses),
//! written back crash-safely.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use ferromq_protocol::body::DataVersion;
use ferromq_protocol::signature::{self, ACCESS_KEY};
use ferromq_protocol::RemotingCommand;
use tracing::info;

use super::acl_file::{PlainAccessConfig, PlainAclFile};
use super::address::{canonical, AddressPattern};
use super::permission::{self, PUB};
use super::resource::{self, describe, is_group};
use crate::AclError;

/// The topic message traces go to; any authenticated account may publish to it.
pub const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

/// Shortest access and secret key plus one (Java: `ACCESS_KEY_MIN_LENGTH` /
/// `SECRET_KEY_MIN_LENGTH` are 6 and keys must be longer).
pub const KEY_MIN_CHARS: usize = 7;

/// A refused request: the reason as Java words it, and the account and resource for
/// rate-limited logging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The remark the client gets.
    pub reason: String,
    /// The access key the request named, if any.
    pub access_key: Option<String>,
    /// The resource refused, if the refusal is about one.
    pub resource: Option<String>,
}

impl Denial {
    fn new(reason: String, access_key: Option<&str>) -> Self {
        Denial { reason, access_key: access_key.map(str::to_owned), resource: None }
    }
}

/// A change to one account (UPDATE_AND_CREATE_ACL_CONFIG): `None` fields keep the stored value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountUpdate {
    /// The account.
    pub access_key: String,
    /// New secret key (required for a new account).
    pub secret_key: Option<String>,
    /// New white address pattern.
    pub white_remote_address: Option<String>,
    /// Admin flag; always applied.
    pub admin: bool,
    /// New default topic permission.
    pub default_topic_perm: Option<String>,
    /// New default group permission.
    pub default_group_perm: Option<String>,
    /// New topic permissions (`topic=PERM`), replacing the stored list.
    pub topic_perms: Option<Vec<String>>,
    /// New group permissions (`group=PERM`), replacing the stored list.
    pub group_perms: Option<Vec<String>>,
}

#[derive(Debug)]
struct Account {
    secret_key: String,
    white: AddressPattern,
    admin: bool,
    default_topic: u8,
    default_group: u8,
    /// Topic names and `%RETRY%<group>` names.
    perms: HashMap<String, u8>,
}

/// Compiled state of every file.
#[derive(Debug, Default)]
struct Tables {
    global_white: Vec<AddressPattern>,
    accounts: HashMap<String, Account>,
    /// Which file holds an access key.
    owners: HashMap<String, PathBuf>,
    files: BTreeMap<PathBuf, PlainAclFile>,
}

/// What identifies a file's content on disk, to notice changes cheaply.
type Stamps = Vec<(PathBuf, Option<(SystemTime, u64)>)>;

/// ACL 1.0 as the broker enforces it.
#[derive(Debug)]
pub struct PlainAccessValidator {
    default_file: PathBuf,
    acl_dir: PathBuf,
    tables: RwLock<Arc<Tables>>,
    stamps: Mutex<Stamps>,
    /// Serialises admin changes: each rewrites a whole file.
    writes: Mutex<()>,
}

impl PlainAccessValidator {
    /// Loads `default_file` and every `*.yml`/`*.yaml` in `acl_dir`.
    ///
    /// # Errors
    /// A file that cannot be read or is invalid, an access key in two files, or no file at
    /// all (every request would be refused; the message names the path to create).
    pub fn load(default_file: PathBuf, acl_dir: PathBuf) -> Result<Self, AclError> {
        let stamps = stamps(&default_file, &acl_dir);
        if stamps.iter().all(|(_, s)| s.is_none()) {
            return Err(AclError::Account(format!(
                "aclEnable=true but there is no ACL file: create {} (accounts in plain_acl.yml format) or put *.yml files in {}",
                default_file.display(),
                acl_dir.display()
            )));
        }
        let tables = read_tables(&stamps)?;
        Ok(PlainAccessValidator {
            default_file,
            acl_dir,
            tables: RwLock::new(Arc::new(tables)),
            stamps: Mutex::new(stamps),
            writes: Mutex::new(()),
        })
    }

    fn tables(&self) -> Arc<Tables> {
        self.tables.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Decides `request` from `remote` (acl-and-tls.md 2.4).
    ///
    /// # Errors
    /// The [`Denial`] to answer with SYSTEM_ERROR.
    pub fn validate(&self, request: &RemotingCommand, remote: IpAddr) -> Result<(), Denial> {
        let remote = canonical(remote);
        let tables = self.tables();
        if tables.global_white.iter().any(|p| p.matches(remote)) {
            return Ok(());
        }
        let Some(access_key) = request.ext(ACCESS_KEY) else {
            return Err(Denial::new("No accessKey is configured".to_owned(), None));
        };
        let ak = Some(access_key);
        let Some(account) = tables.accounts.get(access_key) else {
            return Err(Denial::new(format!("No acl config for {access_key}"), ak));
        };
        if account.white.matches(remote) {
            return Ok(());
        }
        if signature::verify(request, account.secret_key.as_bytes()).is_err() {
            return Err(Denial::new(format!("Check signature failed for accessKey={access_key}"), ak));
        }
        let needed = resource::needed(request).map_err(|e| Denial::new(e, ak))?;
        if !needed.is_empty() && needed.iter().all(|(r, p)| r == TRACE_TOPIC && *p == PUB) {
            return Ok(());
        }
        if permission::needs_admin(request.code) && !account.admin {
            return Err(Denial::new(
                format!("Need admin permission for request code={}, but accessKey={access_key} is not", request.code),
                ak,
            ));
        }
        if account.admin && account.perms.is_empty() {
            return Ok(());
        }
        for (res, perm) in needed {
            let owned = account.perms.get(&res).copied().unwrap_or(if is_group(&res) {
                account.default_group
            } else {
                account.default_topic
            });
            if !permission::grants(perm, owned) {
                return Err(Denial {
                    reason: format!(
                        "No default permission for {} (accessKey={access_key} needs {})",
                        describe(&res),
                        permission::name(perm)
                    ),
                    access_key: ak.map(str::to_owned),
                    resource: Some(res),
                });
            }
        }
        Ok(())
    }

    /// Reloads every file if any changed on disk (content, a file added or removed). A file
    /// that became invalid leaves the previous state in force.
    ///
    /// # Errors
    /// The invalid file's error, reported once per change.
    pub fn reload_if_changed(&self) -> Result<bool, AclError> {
        let now = stamps(&self.default_file, &self.acl_dir);
        {
            let mut known = self.stamps.lock().unwrap_or_else(|e| e.into_inner());
            if *known == now {
                return Ok(false);
            }
            *known = now.clone();
        }
        let tables = read_tables(&now)?;
        info!(files = tables.files.len(), accounts = tables.accounts.len(), "ACL files changed; reloaded");
        *self.tables.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(tables);
        Ok(true)
    }

    /// Creates or updates an account: in the file that holds it, else in the default file.
    ///
    /// # Errors
    /// Keys too short or missing, an invalid address pattern, a write failure.
    pub fn update_account(&self, update: AccountUpdate) -> Result<(), AclError> {
        let ak = update.access_key.clone();
        if ak.chars().count() < KEY_MIN_CHARS {
            return Err(AclError::Account(format!(
                "accessKey={ak} is too short: access and secret keys need at least {KEY_MIN_CHARS} characters"
            )));
        }
        if update.secret_key.as_ref().is_some_and(|sk| sk.chars().count() < KEY_MIN_CHARS) {
            return Err(AclError::Account(format!(
                "the secretKey of accessKey={ak} is too short: keys need at least {KEY_MIN_CHARS} characters"
            )));
        }
        if let Some(w) = &update.white_remote_address {
            AddressPattern::parse(w)?;
        }
        self.change(|tables| {
            let path = tables.owners.get(&ak).cloned().unwrap_or_else(|| self.default_file.clone());
            let file = tables.files.get(&path).cloned().unwrap_or_default();
            let mut file = file;
            match file.accounts.iter_mut().find(|a| a.access_key == ak) {
                Some(account) => merge(account, update),
                None => {
                    let Some(secret_key) = update.secret_key.clone() else {
                        return Err(AclError::Account(format!("a new account needs a secretKey (accessKey={ak})")));
                    };
                    let mut account = PlainAccessConfig { access_key: ak.clone(), secret_key, ..Default::default() };
                    merge(&mut account, update);
                    file.accounts.push(account);
                }
            }
            Ok((path, file))
        })
    }

    /// Deletes an account from the file that holds it.
    ///
    /// # Errors
    /// An unknown access key, a write failure.
    pub fn delete_account(&self, access_key: &str) -> Result<(), AclError> {
        self.change(|tables| {
            let path = tables
                .owners
                .get(access_key)
                .cloned()
                .ok_or_else(|| AclError::Account(format!("No acl config for {access_key}")))?;
            let mut file = tables.files.get(&path).cloned().unwrap_or_default();
            file.accounts.retain(|a| a.access_key != access_key);
            Ok((path, file))
        })
    }

    /// Replaces the global white addresses of `file` (the default file when `None` or blank).
    /// Only the default file and files of the ACL directory can be named: the path comes from
    /// the network and must not choose where the broker writes.
    ///
    /// # Errors
    /// An invalid pattern, a path outside the ACL files, a write failure.
    pub fn update_global_white_addrs(&self, addrs: Vec<String>, file: Option<&str>) -> Result<(), AclError> {
        for a in &addrs {
            AddressPattern::parse(a)?;
        }
        let path = match file.map(str::trim).filter(|f| !f.is_empty()) {
            None => self.default_file.clone(),
            Some(f) => {
                let p = PathBuf::from(f);
                let in_dir = p.parent() == Some(self.acl_dir.as_path()) && is_yaml(&p);
                if p != self.default_file && !in_dir {
                    return Err(AclError::Account(format!(
                        "aclFileFullPath={f} is not an ACL file of this broker ({} or a *.yml in {})",
                        self.default_file.display(),
                        self.acl_dir.display()
                    )));
                }
                p
            }
        };
        self.change(move |tables| {
            let mut file = tables.files.get(&path).cloned().unwrap_or_default();
            file.global_white_remote_addresses = addrs;
            Ok((path, file))
        })
    }

    /// Applies `edit` to one file under the write lock: bumps its data version, writes it
    /// crash-safely, and swaps in the recompiled tables.
    fn change(&self, edit: impl FnOnce(&Tables) -> Result<(PathBuf, PlainAclFile), AclError>) -> Result<(), AclError> {
        let _writing = self.writes.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.tables();
        let (path, mut file) = edit(&current)?;
        file.data_version.next_version();
        let mut files = current.files.clone();
        files.insert(path.clone(), file.clone());
        // Compile before writing: a change that would not load is refused, not persisted.
        let tables = compile(files)?;
        ferromq_config::replace_file(&path, file.to_yaml().as_bytes())
            .map_err(|source| AclError::Write { path: path.clone(), source })?;
        *self.stamps.lock().unwrap_or_else(|e| e.into_inner()) = stamps(&self.default_file, &self.acl_dir);
        *self.tables.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(tables);
        info!(file = %path.display(), "ACL file updated");
        Ok(())
    }

    /// Each loaded file's data version, keyed by its path (GET_BROKER_CLUSTER_ACL_INFO).
    pub fn data_versions(&self) -> BTreeMap<String, DataVersion> {
        self.tables().files.iter().map(|(p, f)| (p.display().to_string(), f.data_version)).collect()
    }

    /// The default file's data version (the 4.x single-file `version` field).
    pub fn default_data_version(&self) -> DataVersion {
        self.tables().files.get(&self.default_file).map(|f| f.data_version).unwrap_or_default()
    }

    /// Global white addresses of all files and every account (GET_BROKER_CLUSTER_ACL_CONFIG).
    pub fn config(&self) -> (Vec<String>, Vec<PlainAccessConfig>) {
        let tables = self.tables();
        let addrs = tables.files.values().flat_map(|f| f.global_white_remote_addresses.iter().cloned()).collect();
        let accounts = tables.files.values().flat_map(|f| f.accounts.iter().cloned()).collect();
        (addrs, accounts)
    }

    /// The default file's path.
    pub fn default_file(&self) -> &Path {
        &self.default_file
    }
}

fn merge(account: &mut PlainAccessConfig, update: AccountUpdate) {
    if let Some(sk) = update.secret_key {
        account.secret_key = sk;
    }
    if let Some(w) = update.white_remote_address {
        account.white_remote_address = Some(w);
    }
    account.admin = update.admin;
    if let Some(p) = update.default_topic_perm.filter(|p| !p.is_empty()) {
        account.default_topic_perm = Some(p);
    }
    if let Some(p) = update.default_group_perm.filter(|p| !p.is_empty()) {
        account.default_group_perm = Some(p);
    }
    if let Some(p) = update.topic_perms {
        account.topic_perms = p;
    }
    if let Some(p) = update.group_perms {
        account.group_perms = p;
    }
}

fn is_yaml(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("yml" | "yaml"))
}

/// The default file and the directory's YAML files, in a stable order, with their
/// modification time and length (`None`: absent).
fn stamps(default_file: &Path, acl_dir: &Path) -> Stamps {
    let stamp = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
    };
    let mut out = vec![(default_file.to_path_buf(), stamp(default_file))];
    if let Ok(entries) = std::fs::read_dir(acl_dir) {
        let mut paths: Vec<PathBuf> =
            entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| is_yaml(p) && p != default_file).collect();
        paths.sort();
        out.extend(paths.into_iter().map(|p| {
            let s = stamp(&p);
            (p, s)
        }));
    }
    out
}

fn read_tables(stamps: &Stamps) -> Result<Tables, AclError> {
    let mut files = BTreeMap::new();
    for (path, stamp) in stamps {
        if stamp.is_none() {
            continue;
        }
        let text = std::fs::read_to_string(path).map_err(|source| AclError::Read { path: path.clone(), source })?;
        let file = PlainAclFile::parse(&text).map_err(|reason| AclError::Invalid { path: path.clone(), reason })?;
        files.insert(path.clone(), file);
    }
    compile(files)
}

fn compile(files: BTreeMap<PathBuf, PlainAclFile>) -> Result<Tables, AclError> {
    let mut tables = Tables::default();
    for (path, file) in &files {
        let invalid = |reason: String| AclError::Invalid { path: path.clone(), reason };
        for a in &file.global_white_remote_addresses {
            tables.global_white.push(AddressPattern::parse(a).map_err(|e| invalid(e.to_string()))?);
        }
        for a in &file.accounts {
            if a.access_key.chars().count() < KEY_MIN_CHARS || a.secret_key.chars().count() < KEY_MIN_CHARS {
                return Err(invalid(format!(
                    "accessKey={}: access and secret keys need at least {KEY_MIN_CHARS} characters",
                    a.access_key
                )));
            }
            if let Some(other) = tables.owners.get(&a.access_key) {
                return Err(invalid(format!("accessKey={} is also in {}", a.access_key, other.display())));
            }
            let white = AddressPattern::parse(a.white_remote_address.as_deref().unwrap_or(""))
                .map_err(|e| invalid(format!("accessKey={}: {e}", a.access_key)))?;
            let mut perms = HashMap::new();
            for (entries, group) in [(&a.topic_perms, false), (&a.group_perms, true)] {
                for entry in entries {
                    let (name, perm) = entry.split_once('=').ok_or_else(|| {
                        invalid(format!("accessKey={}: permission {entry:?} is not name=PERM", a.access_key))
                    })?;
                    let name = name.trim();
                    let key = if group { resource::group_resource(name) } else { name.to_owned() };
                    perms.insert(key, permission::parse(Some(perm)));
                }
            }
            tables.owners.insert(a.access_key.clone(), path.clone());
            tables.accounts.insert(
                a.access_key.clone(),
                Account {
                    secret_key: a.secret_key.clone(),
                    white,
                    admin: a.admin,
                    default_topic: permission::parse(a.default_topic_perm.as_deref()),
                    default_group: permission::parse(a.default_group_perm.as_deref()),
                    perms,
                },
            );
        }
    }
    tables.files = files;
    Ok(tables)
}
