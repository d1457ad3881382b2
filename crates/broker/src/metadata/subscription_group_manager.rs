//! The broker's consumer-group table, persisted as `<storePathRootDir>/config/subscriptionGroup.json`
//! (`subscriptionGroupTable`, `forbiddenTable`, `dataVersion`).
//! Java: `org.apache.rocketmq.broker.subscription.SubscriptionGroupManager`.
//!
//! At load Java's predefined groups are created in memory and the file's groups laid over them.
//! Unknown groups are created with defaults on first use when the broker allows it
//! (`autoCreateSubscriptionGroup`, or a `CID_RMQ_SYS_*` group with `enableCreateSysGroup`).
//! Every change bumps the data version and is appended to `subscriptionGroup.json.journal`
//! before the call returns (see [`ConfigJournal`]): one small write, fdatasynced by a background
//! thread right after, where Java rewrites the whole file per change, so the 10,000th group
//! costs what the first did. The periodic persist (and shutdown) writes the file and drops the
//! records it covers; loading replays the journal over the file.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tracing::{debug, info, warn};

use ferromq_protocol::body::DataVersion;

use crate::metadata::config_file::ConfigFile;
use crate::metadata::config_journal::JournaledFile;
use crate::metadata::group_change::{set_forbidden, GroupChange, GroupTables};
use crate::metadata::topic_validator::validate_group;
use crate::metadata::{MetadataError, ReplaceSummary};
use ferromq_protocol::body::{SubscriptionGroupConfig, SubscriptionGroupWrapper};

/// The admin tools' consumer group.
pub const TOOLS_CONSUMER_GROUP: &str = "TOOLS_CONSUMER";
/// The filter server's consumer group.
pub const FILTERSRV_CONSUMER_GROUP: &str = "FILTERSRV_CONSUMER";
/// The self-test consumer group.
pub const SELF_TEST_CONSUMER_GROUP: &str = "SELF_TEST_C_GROUP";
/// The ONS HTTP proxy's group.
pub const ONS_HTTP_PROXY_GROUP: &str = "CID_ONS-HTTP-PROXY";
/// ONS API pull group.
pub const CID_ONSAPI_PULL_GROUP: &str = "CID_ONSAPI_PULL";
/// ONS API permission group.
pub const CID_ONSAPI_PERMISSION_GROUP: &str = "CID_ONSAPI_PERMISSION";
/// ONS API owner group.
pub const CID_ONSAPI_OWNER_GROUP: &str = "CID_ONSAPI_OWNER";
/// Groups starting with this are system groups.
pub const CID_RMQ_SYS_PREFIX: &str = "CID_RMQ_SYS_";
/// The transaction-check consumer group.
pub const CID_SYS_RMQ_TRANS: &str = "CID_RMQ_SYS_TRANS";

/// Groups a broker creates in memory at start. Java: `SubscriptionGroupManager#init`.
const PREDEFINED_GROUPS: [&str; 8] = [
    TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    CID_ONSAPI_PULL_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_OWNER_GROUP,
    CID_SYS_RMQ_TRANS,
];

/// Group names RocketMQ itself uses (Java: `MixAll.PREDEFINE_GROUP_SET`): the broker's
/// predefined groups and the default, schedule, monitor and inner producer groups.
const PREDEFINE_GROUP_SET: [&str; 14] = [
    "DEFAULT_CONSUMER",
    "DEFAULT_PRODUCER",
    TOOLS_CONSUMER_GROUP,
    "SCHEDULE_CONSUMER",
    FILTERSRV_CONSUMER_GROUP,
    "__MONITOR_CONSUMER",
    "CLIENT_INNER_PRODUCER",
    "SELF_TEST_P_GROUP",
    SELF_TEST_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_OWNER_GROUP,
    CID_ONSAPI_PULL_GROUP,
    CID_SYS_RMQ_TRANS,
];

/// True for the group names RocketMQ itself uses. Java: `MixAll#isPredefinedGroup`.
pub fn is_predefined_group(group: &str) -> bool {
    PREDEFINE_GROUP_SET.contains(&group)
}

/// True for `CID_RMQ_SYS_*` groups. Java: `MixAll#isSysConsumerGroup`.
pub fn is_sys_consumer_group(group: &str) -> bool {
    group.starts_with(CID_RMQ_SYS_PREFIX)
}

/// The broker settings the group table depends on, with Java's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionGroupOptions {
    /// `CID_RMQ_SYS_*` groups are created on first use even when auto-creation is off
    /// (`enableCreateSysGroup`, true).
    pub enable_create_sys_group: bool,
    /// Light queues (`enableLmq`, false): every `%LMQ%` group exists with the default
    /// settings, without an entry in the table (Java: `LmqSubscriptionGroupManager`).
    pub lmq: bool,
}

impl Default for SubscriptionGroupOptions {
    fn default() -> Self {
        Self { enable_create_sys_group: true, lmq: false }
    }
}

/// The consumer-group table. All methods take `&self`; a `RwLock` inside guards the table and
/// is never held while a file is written. Changes take the journal's lock first and append to
/// it while holding it, so the journal lists them in the order they were made.
pub struct SubscriptionGroupManager {
    file: JournaledFile,
    state: RwLock<GroupTable>,
    options: SubscriptionGroupOptions,
}

#[derive(Debug)]
struct GroupTable {
    groups: HashMap<String, SubscriptionGroupConfig>,
    forbidden: BTreeMap<String, BTreeMap<String, i32>>,
    data_version: DataVersion,
}

impl fmt::Debug for SubscriptionGroupManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubscriptionGroupManager")
            .field("path", &self.file.path())
            .field("groups", &self.read().groups.len())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl SubscriptionGroupManager {
    /// Creates the predefined groups in memory, then lays the groups and forbidden table of
    /// `path` (or its `.bak`) over them, takes the file's data version and replays the
    /// journal's changes. Java: constructor `init()` followed by `load()`.
    ///
    /// # Errors
    ///
    /// As [`ConfigFile::load`]; an unreadable journal.
    pub fn load(path: impl Into<PathBuf>, options: SubscriptionGroupOptions) -> Result<Self, MetadataError> {
        let file = ConfigFile::new(path);
        let mut groups: HashMap<String, SubscriptionGroupConfig> =
            PREDEFINED_GROUPS.iter().map(|name| ((*name).to_owned(), SubscriptionGroupConfig::new(*name))).collect();
        let loaded = file.load::<SubscriptionGroupWrapper>()?;
        if loaded.needs_rewrite() {
            file.mark_dirty();
        }
        let (mut forbidden, mut data_version) = match loaded.into_value() {
            Some(wrapper) => {
                info!(groups = wrapper.subscription_group_table.len(), "subscription groups loaded");
                groups.extend(wrapper.subscription_group_table);
                (wrapper.forbidden_table, wrapper.data_version)
            }
            None => (BTreeMap::new(), DataVersion::now()),
        };
        let (file, changes) = JournaledFile::open::<GroupChange>(file)?;
        if !changes.is_empty() {
            info!(changes = changes.len(), path = %file.journal_path().display(), "subscription group changes replayed from the journal");
            for change in changes {
                change.apply(GroupTables {
                    groups: &mut groups,
                    forbidden: &mut forbidden,
                    data_version: &mut data_version,
                });
            }
        }
        Ok(Self { file, state: RwLock::new(GroupTable { groups, forbidden, data_version }), options })
    }

    /// The config of `group`. An unknown group is created with Java's defaults (and journaled)
    /// when `auto_create` (the broker's `autoCreateSubscriptionGroup`) is set, or when it is a
    /// `CID_RMQ_SYS_*` group and `enable_create_sys_group` is set; never for a name that fails
    /// [`validate_group`]. Java: `findSubscriptionGroupConfig`.
    ///
    /// A failed journal append is logged and the group kept in memory (the table stays dirty,
    /// so the periodic persist retries): a consumer should not fail because of it.
    pub fn find(&self, group: &str, auto_create: bool) -> Option<SubscriptionGroupConfig> {
        if self.options.lmq && ferromq_store::is_lmq(group) {
            return Some(SubscriptionGroupConfig::new(group));
        }
        if let Some(config) = self.read().groups.get(group) {
            return Some(config.clone());
        }
        let creatable = auto_create || (self.options.enable_create_sys_group && is_sys_consumer_group(group));
        if !creatable {
            return None;
        }
        if let Err(reason) = validate_group(group) {
            debug!(group, reason = %reason, "subscription group not auto-created: invalid name");
            return None;
        }
        let mut journal = self.file.lock();
        let (config, change) = {
            let mut state = self.write();
            match state.groups.get(group) {
                Some(existing) => (existing.clone(), None),
                None => {
                    let config = SubscriptionGroupConfig::new(group);
                    state.groups.insert(group.to_owned(), config.clone());
                    state.data_version.next_version();
                    (config.clone(), Some(GroupChange::put(config, state.data_version)))
                }
            }
        };
        if let Some(change) = change {
            // Journaled at once (a killed broker keeps the group); the journal's background
            // sync makes it durable off the request path.
            if let Err(e) = self.file.append(&mut journal, &change) {
                warn!(group, error = %e, "auto-created group not journaled; the periodic persist retries");
            }
            info!(group, "subscription group auto-created");
        }
        Some(config)
    }

    /// True if `group` exists (every light queue group does, with light queues on).
    pub fn contains(&self, group: &str) -> bool {
        (self.options.lmq && ferromq_store::is_lmq(group)) || self.read().groups.contains_key(group)
    }

    /// Adds or replaces a group config as given, bumps the data version and journals the
    /// change. Java: `updateSubscriptionGroupConfig` (attributes are stored as given, not
    /// merged).
    ///
    /// # Errors
    ///
    /// [`MetadataError::InvalidGroup`] for an empty name; journal failures (the change stays in
    /// memory and the table stays dirty for the next persist).
    pub fn update(&self, config: SubscriptionGroupConfig) -> Result<(), MetadataError> {
        if config.group_name.is_empty() {
            return Err(MetadataError::InvalidGroup { group: String::new(), reason: "empty group name".to_owned() });
        }
        let group = config.group_name.clone();
        let mut journal = self.file.lock();
        let (old, change) = {
            let mut state = self.write();
            let old = state.groups.insert(group.clone(), config.clone());
            state.data_version.next_version();
            (old, GroupChange::put(config, state.data_version))
        };
        info!(group = %group, created = old.is_none(), "subscription group updated");
        self.file.append(&mut journal, &change)
    }

    /// Removes a group and its forbidden entries; returns whether the group existed. Journals
    /// the change only if it did. Java: `deleteSubscriptionGroupConfig`.
    ///
    /// # Errors
    ///
    /// Journal failures (the group stays deleted in memory).
    pub fn delete(&self, group: &str) -> Result<bool, MetadataError> {
        let mut journal = self.file.lock();
        let change = {
            let mut state = self.write();
            let had_forbidden = state.forbidden.remove(group).is_some();
            if state.groups.remove(group).is_some() {
                state.data_version.next_version();
                Some(GroupChange::delete(group, state.data_version))
            } else {
                if had_forbidden {
                    // Forbidden entries of a group that does not exist: gone from memory, and
                    // from the file at the next persist.
                    self.file.mark_dirty();
                }
                None
            }
        };
        let Some(change) = change else {
            warn!(group, "delete subscription group: group does not exist");
            return Ok(false);
        };
        info!(group, "subscription group deleted");
        self.file.append(&mut journal, &change).map(|()| true)
    }

    /// Turns consumption of `group` off; returns whether the group exists. Java:
    /// `disableConsume`, which changes memory only until the periodic persist; here the change
    /// is journaled like any other (a failed append is logged, and the periodic persist writes
    /// it).
    pub fn disable_consume(&self, group: &str) -> bool {
        let mut journal = self.file.lock();
        let change = {
            let mut state = self.write();
            let Some(config) = state.groups.get_mut(group) else { return false };
            config.consume_enable = false;
            let config = config.clone();
            state.data_version.next_version();
            GroupChange::put(config, state.data_version)
        };
        if let Err(e) = self.file.append(&mut journal, &change) {
            warn!(group, error = %e, "disabled consumption not journaled; the periodic persist retries");
        }
        true
    }

    /// The forbidden bits of `group` on `topic` (0 if none). Java: `getForbidden(group, topic)`.
    pub fn forbidden(&self, group: &str, topic: &str) -> i32 {
        let state = self.read();
        state.forbidden.get(group).and_then(|topics| topics.get(topic)).copied().unwrap_or(0).max(0)
    }

    /// True if bit `index` of `group`'s forbidden bits on `topic` is set.
    /// Java: `getForbidden(group, topic, index)`.
    pub fn is_forbidden(&self, group: &str, topic: &str, index: u32) -> bool {
        forbidden_bit(index).is_some_and(|bit| self.forbidden(group, topic) & bit == bit)
    }

    /// Sets or clears bit `index` (0..=30) of `group`'s forbidden bits on `topic`, bumps the
    /// data version and journals the change; returns the new bits. A cleared entry is removed, and an
    /// index outside 0..=30 changes nothing. Java: `updateForbidden` (which, unlike this,
    /// drops the group's entries for every topic when one topic's bits become 0).
    ///
    /// # Errors
    ///
    /// Journal failures (the change stays in memory).
    pub fn update_forbidden(
        &self,
        group: &str,
        topic: &str,
        index: u32,
        forbidden: bool,
    ) -> Result<i32, MetadataError> {
        let Some(bit) = forbidden_bit(index) else {
            warn!(group, topic, index, "forbidden bit index out of range");
            return Ok(self.forbidden(group, topic));
        };
        let mut journal = self.file.lock();
        let (value, change) = {
            let mut state = self.write();
            let old = state.forbidden.get(group).and_then(|t| t.get(topic)).copied().unwrap_or(0).max(0);
            let value = if forbidden { old | bit } else { old & !bit };
            set_forbidden(&mut state.forbidden, group, topic, value);
            state.data_version.next_version();
            (value, GroupChange::forbidden(group, topic, value, state.data_version))
        };
        info!(group, topic, forbidden = value, "group forbidden bits updated");
        self.file.append(&mut journal, &change).map(|()| value)
    }

    /// A copy of the whole table: subscriptionGroup.json's content and the
    /// GET_ALL_SUBSCRIPTIONGROUP_CONFIG body.
    pub fn all(&self) -> SubscriptionGroupWrapper {
        let state = self.read();
        SubscriptionGroupWrapper {
            data_version: state.data_version,
            forbidden_table: state.forbidden.clone(),
            subscription_group_table: state.groups.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }
    }

    /// The table's current version.
    pub fn data_version(&self) -> DataVersion {
        self.read().data_version
    }

    /// Makes the table a copy of `master`'s (a slave following its master) and persists it,
    /// unless the table already has `master`'s data version: then nothing happens and `None`
    /// is returned. Groups the master does not have are deleted, except the predefined groups
    /// (which every load creates anyway); the table takes the master's data version and its
    /// forbidden table. Java: `SlaveSynchronize#syncSubscriptionGroupConfig`, which leaves the
    /// slave's forbidden table alone; here the slave follows the master's, so both refuse the
    /// same consumers.
    ///
    /// # Errors
    ///
    /// Persist failures (the new table stays in memory and the table stays dirty).
    pub fn replace_all(&self, master: SubscriptionGroupWrapper) -> Result<Option<ReplaceSummary>, MetadataError> {
        let change = || {
            let mut state = self.write();
            if state.data_version == master.data_version {
                return None;
            }
            let mut groups: HashMap<String, SubscriptionGroupConfig> =
                master.subscription_group_table.into_iter().collect();
            for name in PREDEFINED_GROUPS {
                if let (false, Some(own)) = (groups.contains_key(name), state.groups.get(name)) {
                    groups.insert(name.to_owned(), own.clone());
                }
            }
            let summary = ReplaceSummary::between(&state.groups, &groups);
            state.groups = groups;
            state.forbidden = master.forbidden_table;
            state.data_version = master.data_version;
            Some(summary)
        };
        self.file.replace(change, || self.all())
    }

    /// Writes subscriptionGroup.json now (synced, crash-safe) and drops the journal records it
    /// covers ([`JournaledFile::persist`]).
    ///
    /// # Errors
    ///
    /// As [`JournaledFile::persist`].
    pub fn persist(&self) -> Result<(), MetadataError> {
        self.file.persist(|| self.all())
    }

    /// Writes subscriptionGroup.json if the table changed since the last write; returns whether
    /// it wrote.
    ///
    /// # Errors
    ///
    /// As [`SubscriptionGroupManager::persist`].
    pub fn persist_if_dirty(&self) -> Result<bool, MetadataError> {
        self.file.persist_if_dirty(|| self.all())
    }

    /// Blocks until every change made so far is on disk (the journal's background sync
    /// covers it).
    pub fn wait_durable(&self) {
        self.file.wait_durable();
    }

    fn read(&self) -> RwLockReadGuard<'_, GroupTable> {
        // Every write is a few map operations that cannot panic halfway in a harmful way.
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, GroupTable> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `1 << index` for indexes that give a positive `i32` bit.
fn forbidden_bit(index: u32) -> Option<i32> {
    (index <= 30).then(|| 1 << index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(dir: &tempfile::TempDir) -> SubscriptionGroupManager {
        SubscriptionGroupManager::load(dir.path().join("subscriptionGroup.json"), SubscriptionGroupOptions::default())
            .unwrap()
    }

    #[test]
    fn replace_all_copies_the_master_but_keeps_predefined_groups() {
        let dir = tempfile::tempdir().unwrap();
        let groups = load(&dir);
        groups.update(SubscriptionGroupConfig::new("onlyOnSlave")).unwrap();
        let mut master = SubscriptionGroupWrapper {
            data_version: DataVersion { counter: 9, state_version: 0, timestamp: 42 },
            ..SubscriptionGroupWrapper::default()
        };
        let mut changed = SubscriptionGroupConfig::new(TOOLS_CONSUMER_GROUP);
        changed.retry_max_times = 3;
        master.subscription_group_table.insert(TOOLS_CONSUMER_GROUP.into(), changed.clone());
        master.subscription_group_table.insert("g1".into(), SubscriptionGroupConfig::new("g1"));
        master.forbidden_table.insert("g1".into(), BTreeMap::from([("T".to_owned(), 2)]));
        let summary = groups.replace_all(master.clone()).unwrap().unwrap();
        assert_eq!(summary, ReplaceSummary { added: 1, updated: 1, removed: 1 });
        assert!(!groups.contains("onlyOnSlave"));
        assert_eq!(groups.find(TOOLS_CONSUMER_GROUP, false), Some(changed));
        assert!(groups.contains(CID_SYS_RMQ_TRANS), "predefined groups stay");
        assert!(groups.is_forbidden("g1", "T", 1));
        assert_eq!(groups.data_version(), master.data_version);
        assert_eq!(groups.replace_all(master.clone()).unwrap(), None, "same version: nothing to do");
        let reloaded = load(&dir);
        assert!(reloaded.contains("g1") && !reloaded.contains("onlyOnSlave"));
        assert_eq!(reloaded.data_version(), master.data_version);
    }

    #[test]
    fn predefined_groups_exist_with_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let groups = load(&dir);
        for name in PREDEFINED_GROUPS {
            assert_eq!(groups.find(name, false), Some(SubscriptionGroupConfig::new(name)));
        }
    }

    #[test]
    fn sys_groups_are_created_even_without_auto_create() {
        let dir = tempfile::tempdir().unwrap();
        let groups = load(&dir);
        assert!(groups.find("CID_RMQ_SYS_REVIVE_GROUP", false).is_some());
        let groups = SubscriptionGroupManager::load(
            dir.path().join("other.json"),
            SubscriptionGroupOptions { enable_create_sys_group: false, ..SubscriptionGroupOptions::default() },
        )
        .unwrap();
        assert!(groups.find("CID_RMQ_SYS_X", false).is_none());
    }

    #[test]
    fn forbidden_bits_set_and_clear_per_topic() {
        let dir = tempfile::tempdir().unwrap();
        let groups = load(&dir);
        assert_eq!(groups.update_forbidden("g", "A", 1, true).unwrap(), 2);
        assert_eq!(groups.update_forbidden("g", "B", 0, true).unwrap(), 1);
        assert!(groups.is_forbidden("g", "A", 1) && !groups.is_forbidden("g", "A", 0));
        assert_eq!(groups.update_forbidden("g", "A", 1, false).unwrap(), 0);
        assert_eq!(groups.forbidden("g", "B"), 1, "clearing one topic keeps the others");
        assert_eq!(groups.update_forbidden("g", "B", 31, true).unwrap(), 1);
        assert_eq!(groups.all().forbidden_table, BTreeMap::from([("g".into(), BTreeMap::from([("B".into(), 1)]))]));
    }

    #[test]
    fn disable_consume_marks_dirty() {
        let dir = tempfile::tempdir().unwrap();
        let groups = load(&dir);
        groups.persist().unwrap();
        assert!(groups.disable_consume(TOOLS_CONSUMER_GROUP));
        assert!(!groups.disable_consume("nope"));
        assert!(groups.persist_if_dirty().unwrap());
        assert!(!load(&dir).find(TOOLS_CONSUMER_GROUP, false).unwrap().consume_enable);
    }

    fn journal_len(dir: &tempfile::TempDir) -> u64 {
        std::fs::metadata(dir.path().join("subscriptionGroup.json.journal")).unwrap().len()
    }

    #[test]
    fn changes_since_the_last_persist_are_replayed_from_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let groups = load(&dir);
        groups.update(SubscriptionGroupConfig::new("gone")).unwrap();
        groups.persist().unwrap();
        assert_eq!(journal_len(&dir), 0, "the persist covers every record");
        // Changes after the persist: only in the journal when the process dies.
        for i in 0..50 {
            groups.update(SubscriptionGroupConfig::new(format!("g{i}"))).unwrap();
        }
        assert!(groups.delete("gone").unwrap());
        assert!(groups.delete("g7").unwrap());
        groups.update_forbidden("g8", "T", 1, true).unwrap();
        groups.update_forbidden("g8", "U", 2, true).unwrap();
        groups.update_forbidden("g8", "U", 2, false).unwrap();
        assert!(groups.find("auto", true).is_some());
        assert!(groups.disable_consume("g9"));
        let expected = groups.all();
        groups.wait_durable();
        drop(groups);

        let reloaded = load(&dir);
        assert_eq!(reloaded.all(), expected, "groups, forbidden bits and data version as before the crash");
        assert!(reloaded.persist_if_dirty().unwrap(), "replayed changes are written at the next persist");
        assert_eq!(journal_len(&dir), 0);
        assert!(!reloaded.persist_if_dirty().unwrap());
        drop(reloaded);
        assert_eq!(load(&dir).all(), expected);
    }

    #[test]
    fn a_persist_keeps_the_records_appended_while_it_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let groups = std::sync::Arc::new(load(&dir));
        let writer = {
            let groups = groups.clone();
            std::thread::spawn(move || {
                for i in 0..2_000 {
                    groups.update(SubscriptionGroupConfig::new(format!("G{i}"))).unwrap();
                }
            })
        };
        // Persists racing the updates: each drops only the records its copy covers.
        while !writer.is_finished() {
            groups.persist().unwrap();
        }
        writer.join().unwrap();
        let expected = groups.all();
        drop(groups);
        assert_eq!(load(&dir).all(), expected);
    }
}
