//! Committed consumer offsets per `topic@group` and queue, persisted as
//! `<storePathRootDir>/config/consumerOffset.json`
//! (`{"offsetTable":{"<topic>@<group>":{0:12,1:7}},"dataVersion":{..}}`).
//! Java: `org.apache.rocketmq.broker.offset.ConsumerOffsetManager`.
//!
//! Commits only change memory and set the dirty flag; the broker persists the table every
//! [`crate::metadata::PERSIST_INTERVAL`] and at shutdown. Java's files are read with their
//! unquoted integer keys and extra getter-derived keys (`groupTopicMap`); standard JSON is
//! written. Also holds the server-side reset offsets (`resetOffsetTable`), which are not
//! persisted, as in Java. Java's pull-offset table (`commitPullOffset`) is not kept.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tracing::{debug, info, warn};

use ferromq_protocol::body::{
    ConsumerOffsetSerializeWrapper, DataVersion, LmqConsumerOffsetWrapper, TOPIC_GROUP_SEPARATOR,
};

use crate::metadata::config_file::ConfigFile;
use crate::metadata::MetadataError;

/// Commits between two data-version bumps (`consumerOffsetUpdateVersionStep`).
pub const OFFSET_UPDATE_VERSION_STEP: u64 = 500;

type QueueOffsets = HashMap<i32, i64>;

/// The offset table. All methods take `&self`; a `RwLock` inside guards the table and is never
/// held while the file is written.
pub struct ConsumerOffsetManager {
    file: ConfigFile,
    state: RwLock<OffsetTable>,
    /// With light queues (`enableLmq`): the offsets of `%LMQ%` groups.
    lmq: Option<LmqOffsets>,
}

/// The offsets of light queue groups, one per `topic@group`, persisted as
/// `lmqConsumerOffset.json` together with a copy of the other groups' offsets, the shape Java
/// reads (docs/decisions/0028).
struct LmqOffsets {
    file: ConfigFile,
    table: RwLock<HashMap<String, i64>>,
}

#[derive(Debug)]
struct OffsetTable {
    /// `topic@group` -> queue id -> next offset to consume.
    offsets: HashMap<String, QueueOffsets>,
    /// `topic@group` -> queue id -> offset an admin reset the queue to, until a pull takes it.
    resets: HashMap<String, QueueOffsets>,
    data_version: DataVersion,
    commits: u64,
}

impl fmt::Debug for ConsumerOffsetManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsumerOffsetManager")
            .field("path", &self.file.path())
            .field("keys", &self.read().offsets.len())
            .finish_non_exhaustive()
    }
}

/// `topic@group`.
fn key(topic: &str, group: &str) -> String {
    format!("{topic}{TOPIC_GROUP_SEPARATOR}{group}")
}

/// Splits `topic@group`; keys without exactly one separator are skipped (Java: `split("@")`
/// must give two parts).
fn split_key(key: &str) -> Option<(&str, &str)> {
    let (topic, group) = key.split_once(TOPIC_GROUP_SEPARATOR)?;
    (!group.contains(TOPIC_GROUP_SEPARATOR)).then_some((topic, group))
}

impl ConsumerOffsetManager {
    /// Reads `path` (or its `.bak`); a missing file is an empty table.
    ///
    /// # Errors
    ///
    /// As [`ConfigFile::load`].
    pub fn load(path: impl Into<PathBuf>) -> Result<Self, MetadataError> {
        let file = ConfigFile::new(path);
        let loaded = file.load::<ConsumerOffsetSerializeWrapper>()?;
        if loaded.needs_rewrite() {
            file.mark_dirty();
        }
        let (offsets, data_version) = match loaded.into_value() {
            Some(wrapper) => {
                let offsets: HashMap<String, QueueOffsets> =
                    wrapper.offset_table.into_iter().map(|(k, v)| (k, v.into_iter().collect())).collect();
                info!(keys = offsets.len(), "consumer offsets loaded");
                (offsets, wrapper.data_version.unwrap_or_else(DataVersion::now))
            }
            None => (HashMap::new(), DataVersion::now()),
        };
        let table = OffsetTable { offsets, resets: HashMap::new(), data_version, commits: 0 };
        Ok(Self { file, state: RwLock::new(table), lmq: None })
    }

    /// As [`load`](Self::load), with the light queue groups' offsets from `lmq_path`
    /// (`lmqConsumerOffset.json`). Offsets of other groups found only there (a broker that
    /// ran Java with `enableLmq`, which keeps every offset in that file) are taken too.
    ///
    /// # Errors
    ///
    /// As [`ConfigFile::load`], for either file.
    pub fn load_with_lmq(path: impl Into<PathBuf>, lmq_path: impl Into<PathBuf>) -> Result<Self, MetadataError> {
        let mut manager = Self::load(path)?;
        let file = ConfigFile::new(lmq_path);
        let loaded = file.load::<LmqConsumerOffsetWrapper>()?;
        if loaded.needs_rewrite() {
            file.mark_dirty();
        }
        let mut table = HashMap::new();
        if let Some(wrapper) = loaded.into_value() {
            table = wrapper.lmq_offset_table.into_iter().collect();
            let mut state = manager.write();
            let mut adopted = 0;
            for (key, queues) in wrapper.offset_table {
                if let std::collections::hash_map::Entry::Vacant(slot) = state.offsets.entry(key) {
                    slot.insert(queues.into_iter().collect());
                    adopted += 1;
                }
            }
            drop(state);
            if adopted > 0 {
                manager.file.mark_dirty();
                info!(keys = adopted, "consumer offsets taken from lmqConsumerOffset.json");
            }
            info!(keys = table.len(), "light queue consumer offsets loaded");
        }
        manager.lmq = Some(LmqOffsets { file, table: RwLock::new(table) });
        Ok(manager)
    }

    /// The light queue offsets, when `group` is a light queue group and they are kept.
    fn lmq_for(&self, group: &str) -> Option<&LmqOffsets> {
        self.lmq.as_ref().filter(|_| ferromq_store::is_lmq(group))
    }

    /// Records `offset` as the next offset `group` consumes from `topic` queue `queue_id`, as
    /// given: a smaller offset than the stored one is accepted (a reset or rewind) and logged at
    /// debug. Bumps the data version every [`OFFSET_UPDATE_VERSION_STEP`] commits.
    /// Java: `commitOffset`.
    pub fn commit_offset(&self, client_host: &str, group: &str, topic: &str, queue_id: i32, offset: i64) {
        if let Some(lmq) = self.lmq_for(group) {
            lmq.write().insert(key(topic, group), offset);
            lmq.file.mark_dirty();
            return;
        }
        let previous = {
            let mut state = self.write();
            let previous = state.offsets.entry(key(topic, group)).or_default().insert(queue_id, offset);
            state.commits += 1;
            if state.commits.is_multiple_of(OFFSET_UPDATE_VERSION_STEP) {
                state.data_version.next_version();
            }
            self.file.mark_dirty();
            previous
        };
        if let Some(stored) = previous.filter(|stored| offset < *stored) {
            debug!(client_host, group, topic, queue_id, offset, stored, "consumer offset moved backwards");
        }
    }

    /// The offset to continue from: a pending server-side reset if there is one, else the
    /// committed offset, else `None` (Java returns -1). Java: `queryOffset(group, topic,
    /// queueId)` with `useServerSideResetOffset` (default true).
    pub fn query_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        let key = key(topic, group);
        if let Some(lmq) = self.lmq_for(group) {
            return lmq.read().get(&key).copied();
        }
        let state = self.read();
        let lookup = |table: &HashMap<String, QueueOffsets>| table.get(&key).and_then(|q| q.get(&queue_id)).copied();
        lookup(&state.resets).or_else(|| lookup(&state.offsets))
    }

    /// Every committed queue offset of `group` on `topic` (empty if none).
    /// Java: `queryOffset(group, topic)`.
    pub fn query_group_offsets(&self, group: &str, topic: &str) -> BTreeMap<i32, i64> {
        if let Some(lmq) = self.lmq_for(group) {
            return lmq.read().get(&key(topic, group)).map(|o| BTreeMap::from([(0, *o)])).unwrap_or_default();
        }
        let state = self.read();
        state.offsets.get(&key(topic, group)).map(|q| q.iter().map(|(k, v)| (*k, *v)).collect()).unwrap_or_default()
    }

    /// Topics `group` has offsets on. Java: `whichTopicByConsumer`.
    pub fn which_topic_by_consumer(&self, group: &str) -> BTreeSet<String> {
        if let Some(lmq) = self.lmq_for(group) {
            return lmq
                .read()
                .keys()
                .filter_map(|k| split_key(k))
                .filter(|(_, g)| *g == group)
                .map(|(t, _)| t.to_owned())
                .collect();
        }
        self.read()
            .offsets
            .keys()
            .filter_map(|k| split_key(k))
            .filter(|(_, g)| *g == group)
            .map(|(t, _)| t.to_owned())
            .collect()
    }

    /// Groups with offsets on `topic`. Java: `whichGroupByTopic`.
    pub fn which_group_by_topic(&self, topic: &str) -> BTreeSet<String> {
        let mut groups: BTreeSet<String> = self
            .read()
            .offsets
            .keys()
            .filter_map(|k| split_key(k))
            .filter(|(t, _)| *t == topic)
            .map(|(_, g)| g.to_owned())
            .collect();
        if let Some(lmq) = &self.lmq {
            groups.extend(
                lmq.read().keys().filter_map(|k| split_key(k)).filter(|(t, _)| *t == topic).map(|(_, g)| g.to_owned()),
            );
        }
        groups
    }

    /// Copies `src_group`'s offsets on `topic` to `dest_group`, replacing `dest_group`'s. Nothing
    /// happens if `src_group` has none. Java: `cloneOffset`.
    pub fn clone_offset(&self, src_group: &str, dest_group: &str, topic: &str) {
        let mut state = self.write();
        let Some(offsets) = state.offsets.get(&key(topic, src_group)).cloned() else { return };
        state.offsets.insert(key(topic, dest_group), offsets);
        self.file.mark_dirty();
        drop(state);
        info!(topic, src_group, dest_group, "consumer offsets cloned");
    }

    /// Drops every offset (and pending reset) of `group`, on all topics. Returns whether any
    /// offset was removed. Java: `removeOffset`.
    pub fn remove_offset(&self, group: &str) -> bool {
        if let Some(lmq) = self.lmq_for(group) {
            let removed = lmq.remove_keys(|_, g| g == group);
            if removed {
                warn!(group, "light queue group offsets removed");
            }
            return removed;
        }
        let removed = self.remove_keys(|_, g| g == group);
        if removed {
            warn!(group, "consumer group offsets removed");
        }
        removed
    }

    /// Drops every group's offsets (and pending resets) on `topic`. Returns whether any offset
    /// was removed. Java: `cleanOffsetByTopic`.
    pub fn remove_topic(&self, topic: &str) -> bool {
        let mut removed = self.remove_keys(|t, _| t == topic);
        if let Some(lmq) = &self.lmq {
            removed |= lmq.remove_keys(|t, _| t == topic);
        }
        if removed {
            warn!(topic, "topic offsets removed");
        }
        removed
    }

    /// Resets `group`'s offset on `topic` queue `queue_id`: the committed offset is overwritten,
    /// and the reset is also kept until [`ConsumerOffsetManager::take_reset_offset`] so that a
    /// client committing its old position right after cannot undo it. Returns false (and does
    /// nothing) for an empty topic or group or a negative queue id or offset.
    /// Java: `assignResetOffset`.
    pub fn reset_offset(&self, group: &str, topic: &str, queue_id: i32, offset: i64) -> bool {
        if topic.is_empty() || group.is_empty() || queue_id < 0 || offset < 0 {
            warn!(topic, group, queue_id, offset, "reset offset refused: illegal arguments");
            return false;
        }
        let key = key(topic, group);
        if let Some(lmq) = self.lmq_for(group) {
            // One offset per light queue group and queue, read by pulls directly: the reset
            // is the offset.
            lmq.write().insert(key, offset);
            lmq.file.mark_dirty();
            return true;
        }
        let mut state = self.write();
        state.resets.entry(key.clone()).or_default().insert(queue_id, offset);
        state.offsets.entry(key).or_default().insert(queue_id, offset);
        self.file.mark_dirty();
        drop(state);
        debug!(topic, group, queue_id, offset, "consumer offset reset");
        true
    }

    /// True if a server-side reset is pending for the queue. Java: `hasOffsetReset`.
    pub fn has_offset_reset(&self, group: &str, topic: &str, queue_id: i32) -> bool {
        self.read().resets.get(&key(topic, group)).is_some_and(|q| q.contains_key(&queue_id))
    }

    /// Removes and returns the pending server-side reset of the queue.
    /// Java: `queryThenEraseResetOffset`.
    pub fn take_reset_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        let key = key(topic, group);
        let mut state = self.write();
        let queues = state.resets.get_mut(&key)?;
        let offset = queues.remove(&queue_id);
        if queues.is_empty() {
            state.resets.remove(&key);
        }
        offset
    }

    /// A copy of the committed offsets with the version: consumerOffset.json's content and the
    /// GET_ALL_CONSUMER_OFFSET body.
    pub fn snapshot(&self) -> ConsumerOffsetSerializeWrapper {
        let state = self.read();
        ConsumerOffsetSerializeWrapper {
            data_version: Some(state.data_version),
            offset_table: state
                .offsets
                .iter()
                .map(|(k, queues)| (k.clone(), queues.iter().map(|(q, o)| (*q, *o)).collect()))
                .collect(),
        }
    }

    /// Takes `master`'s committed offsets (a slave following its master): each `topic@group`
    /// the master has gets the master's queue offsets, replacing the slave's for that key;
    /// keys only the slave has are kept (commits made on the slave while its master was away).
    /// The table takes the master's data version when it has one. Pending resets are not
    /// touched. Marks the table dirty if anything changed and returns the number of keys whose
    /// offsets changed; persisting is left to the caller, as for commits.
    /// Java: `SlaveSynchronize#syncConsumerOffset` (`offsetTable.putAll`).
    pub fn merge_all(&self, master: ConsumerOffsetSerializeWrapper) -> usize {
        let mut state = self.write();
        let mut changed = 0;
        for (key, queues) in master.offset_table {
            let queues: QueueOffsets = queues.into_iter().collect();
            if state.offsets.get(&key) != Some(&queues) {
                state.offsets.insert(key, queues);
                changed += 1;
            }
        }
        let version_changed = master.data_version.is_some_and(|v| v != state.data_version);
        if let Some(version) = master.data_version {
            state.data_version = version;
        }
        if changed > 0 || version_changed {
            self.file.mark_dirty();
        }
        changed
    }

    /// The table's current version.
    pub fn data_version(&self) -> DataVersion {
        self.read().data_version
    }

    /// True if offsets changed since the last write.
    pub fn is_dirty(&self) -> bool {
        self.file.is_dirty() || self.lmq.as_ref().is_some_and(|l| l.file.is_dirty())
    }

    /// Writes consumerOffset.json (and lmqConsumerOffset.json) now.
    ///
    /// # Errors
    ///
    /// As [`ConfigFile::persist`].
    pub fn persist(&self) -> Result<(), MetadataError> {
        self.file.persist(|| self.snapshot())?;
        match &self.lmq {
            Some(lmq) => lmq.file.persist(|| self.lmq_snapshot(lmq)),
            None => Ok(()),
        }
    }

    /// Writes consumerOffset.json if offsets changed since the last write (and
    /// lmqConsumerOffset.json if either table did); returns whether it wrote.
    ///
    /// # Errors
    ///
    /// As [`ConfigFile::persist`].
    pub fn persist_if_dirty(&self) -> Result<bool, MetadataError> {
        if let Some(lmq) = &self.lmq {
            // Its copy of the other groups' offsets follows them.
            if self.file.is_dirty() {
                lmq.file.mark_dirty();
            }
        }
        let wrote = self.file.persist_if_dirty(|| self.snapshot())?;
        match &self.lmq {
            Some(lmq) => Ok(lmq.file.persist_if_dirty(|| self.lmq_snapshot(lmq))? || wrote),
            None => Ok(wrote),
        }
    }

    fn lmq_snapshot(&self, lmq: &LmqOffsets) -> LmqConsumerOffsetWrapper {
        let normal = self.snapshot();
        LmqConsumerOffsetWrapper {
            data_version: normal.data_version,
            lmq_offset_table: lmq.read().iter().map(|(k, v)| (k.clone(), *v)).collect(),
            offset_table: normal.offset_table,
        }
    }

    fn remove_keys(&self, matches: impl Fn(&str, &str) -> bool) -> bool {
        let keep = |k: &String| split_key(k).is_none_or(|(t, g)| !matches(t, g));
        let mut state = self.write();
        let before = state.offsets.len();
        state.offsets.retain(|k, _| keep(k));
        state.resets.retain(|k, _| keep(k));
        let removed = state.offsets.len() != before;
        if removed {
            self.file.mark_dirty();
        }
        removed
    }

    fn read(&self) -> RwLockReadGuard<'_, OffsetTable> {
        // Writers do single map operations; a panic cannot leave the table inconsistent.
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, OffsetTable> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl LmqOffsets {
    /// Drops the `topic@group` keys `matches` picks; marks the file dirty and returns true
    /// when any went.
    fn remove_keys(&self, matches: impl Fn(&str, &str) -> bool) -> bool {
        let mut table = self.write();
        let before = table.len();
        table.retain(|k, _| split_key(k).is_none_or(|(t, g)| !matches(t, g)));
        let removed = table.len() != before;
        if removed {
            self.file.mark_dirty();
        }
        removed
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<String, i64>> {
        // Single map operations; a panic cannot leave the table inconsistent.
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<String, i64>> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn light_queue_groups_keep_one_offset_per_topic_in_their_own_file() {
        use ferromq_protocol::body::JsonBody;
        let dir = tempfile::tempdir().unwrap();
        let (normal, lmq) = (dir.path().join("consumerOffset.json"), dir.path().join("lmqConsumerOffset.json"));
        let offsets = ConsumerOffsetManager::load_with_lmq(&normal, &lmq).unwrap();
        offsets.commit_offset("h", "%LMQ%g", "%LMQ%a", 0, 7);
        offsets.commit_offset("h", "%LMQ%g", "%LMQ%b", 0, 3);
        offsets.commit_offset("h", "g", "T", 1, 5);
        assert_eq!(offsets.query_offset("%LMQ%g", "%LMQ%a", 0), Some(7));
        assert_eq!(offsets.query_group_offsets("%LMQ%g", "%LMQ%b"), BTreeMap::from([(0, 3)]));
        assert_eq!(offsets.query_offset("g", "T", 1), Some(5));
        assert!(offsets.snapshot().offset_table.keys().all(|k| !k.contains("%LMQ%")));
        assert!(offsets.persist_if_dirty().unwrap());
        assert!(!offsets.persist_if_dirty().unwrap());
        let written = LmqConsumerOffsetWrapper::decode(&std::fs::read(&lmq).unwrap()).unwrap();
        assert_eq!(
            written.lmq_offset_table,
            BTreeMap::from([("%LMQ%a@%LMQ%g".into(), 7), ("%LMQ%b@%LMQ%g".into(), 3)])
        );
        assert_eq!(written.offset_table["T@g"][&1], 5, "Java's file holds the other groups too");
        assert!(!String::from_utf8(std::fs::read(&normal).unwrap()).unwrap().contains("%LMQ%"));

        let reloaded = ConsumerOffsetManager::load_with_lmq(&normal, &lmq).unwrap();
        assert_eq!(reloaded.query_offset("%LMQ%g", "%LMQ%a", 0), Some(7));
        assert_eq!(reloaded.which_topic_by_consumer("%LMQ%g"), BTreeSet::from(["%LMQ%a".into(), "%LMQ%b".into()]));
        assert_eq!(reloaded.which_group_by_topic("%LMQ%b"), BTreeSet::from(["%LMQ%g".into()]));
        assert!(reloaded.reset_offset("%LMQ%g", "%LMQ%b", 0, 1));
        assert_eq!(reloaded.query_offset("%LMQ%g", "%LMQ%b", 0), Some(1), "a reset is the offset");
        assert!(reloaded.remove_topic("%LMQ%b"));
        assert_eq!(reloaded.query_offset("%LMQ%g", "%LMQ%b", 0), None);
        assert!(reloaded.remove_offset("%LMQ%g"));
        assert_eq!(reloaded.query_offset("%LMQ%g", "%LMQ%a", 0), None);
        assert_eq!(reloaded.query_offset("g", "T", 1), Some(5));

        // A broker that ran Java with enableLmq has its other groups' offsets there only.
        std::fs::remove_file(&normal).unwrap();
        let migrated = ConsumerOffsetManager::load_with_lmq(&normal, &lmq).unwrap();
        assert_eq!(migrated.query_offset("g", "T", 1), Some(5));
        assert!(migrated.is_dirty());
        // Without light queues a %LMQ% group is an ordinary group.
        let plain = ConsumerOffsetManager::load(dir.path().join("plain.json")).unwrap();
        plain.commit_offset("h", "%LMQ%g", "%LMQ%a", 0, 1);
        assert_eq!(plain.snapshot().offset_table["%LMQ%a@%LMQ%g"][&0], 1);
    }

    #[test]
    fn keys_with_extra_separators_are_ignored() {
        assert_eq!(split_key("T@g"), Some(("T", "g")));
        assert_eq!(split_key("T@g@x"), None);
        assert_eq!(split_key("Tg"), None);
    }

    #[test]
    fn data_version_bumps_every_step_commits() {
        let dir = tempfile::tempdir().unwrap();
        let offsets = ConsumerOffsetManager::load(dir.path().join("o.json")).unwrap();
        let start = offsets.data_version().counter;
        for i in 0..OFFSET_UPDATE_VERSION_STEP - 1 {
            offsets.commit_offset("h", "g", "T", 0, i64::try_from(i).unwrap());
        }
        assert_eq!(offsets.data_version().counter, start);
        offsets.commit_offset("h", "g", "T", 0, 0);
        assert_eq!(offsets.data_version().counter, start + 1);
    }

    #[test]
    fn merge_all_replaces_the_masters_keys_and_keeps_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let offsets = ConsumerOffsetManager::load(dir.path().join("o.json")).unwrap();
        offsets.commit_offset("h", "g", "A", 0, 5);
        offsets.commit_offset("h", "g", "A", 1, 6);
        offsets.commit_offset("h", "g", "OnlyOnSlave", 0, 1);
        offsets.persist().unwrap();
        let version = DataVersion { counter: 3, state_version: 0, timestamp: 42 };
        let master = ConsumerOffsetSerializeWrapper {
            data_version: Some(version),
            offset_table: BTreeMap::from([
                ("A@g".to_owned(), BTreeMap::from([(0, 10)])),
                ("B@g".to_owned(), BTreeMap::from([(2, 20)])),
            ]),
        };
        assert_eq!(offsets.merge_all(master.clone()), 2);
        assert!(offsets.is_dirty());
        assert_eq!(offsets.query_group_offsets("g", "A"), BTreeMap::from([(0, 10)]), "the key is replaced whole");
        assert_eq!(offsets.query_offset("g", "B", 2), Some(20));
        assert_eq!(offsets.query_offset("g", "OnlyOnSlave", 0), Some(1));
        assert_eq!(offsets.data_version(), version);
        offsets.persist().unwrap();
        assert_eq!(offsets.merge_all(master), 0);
        assert!(!offsets.is_dirty(), "nothing changed");
    }

    #[test]
    fn server_side_reset_wins_until_taken() {
        let dir = tempfile::tempdir().unwrap();
        let offsets = ConsumerOffsetManager::load(dir.path().join("o.json")).unwrap();
        offsets.commit_offset("h", "g", "T", 0, 50);
        assert!(offsets.reset_offset("g", "T", 0, 10));
        offsets.commit_offset("h", "g", "T", 0, 51);
        assert!(offsets.has_offset_reset("g", "T", 0));
        assert_eq!(offsets.query_offset("g", "T", 0), Some(10));
        assert_eq!(offsets.take_reset_offset("g", "T", 0), Some(10));
        assert_eq!(offsets.query_offset("g", "T", 0), Some(51));
        assert!(!offsets.reset_offset("g", "T", -1, 0));
        assert!(!offsets.reset_offset("", "T", 0, 0));
    }
}
