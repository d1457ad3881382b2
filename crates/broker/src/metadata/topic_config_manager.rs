//! The broker's topic table, persisted as `<storePathRootDir>/config/topics.json`
//! (`TopicConfigSerializeWrapper`: `topicConfigTable` + `dataVersion`).
//! Java: `org.apache.rocketmq.broker.topic.TopicConfigManager`.
//!
//! At load the broker's system topics are created in memory first and the file's topics are laid
//! over them, as Java does, so an operator's change to a system topic survives a restart. Topics
//! are created by admin updates, by producers sending to an unknown topic (inheriting from
//! `TBW102` or another default topic) and by consumers' retry/DLQ traffic.
//!
//! Every change bumps the table's `DataVersion` and is appended to `topics.json.journal` before
//! the call returns ([`ConfigJournal`]): one small write whatever the table's size, where Java
//! rewrites the whole file on every change, so creating topics one by one costs the same for
//! the 10,000th as for the first. The append survives the process being killed at once and is
//! fdatasynced by a background thread right after (one sync for every append made meanwhile).
//! The periodic persist (and shutdown) writes topics.json, crash-safely, and drops the journal
//! records it covers; loading replays the journal over the file. Name validation and
//! attribute modification lists (`+message.type=FIFO`) are the processors' job.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tracing::{info, warn};

use ferromq_protocol::body::perm::{self, PERM_INHERIT, PERM_READ, PERM_WRITE};
use ferromq_protocol::body::{DataVersion, KVTable, TopicConfig, TopicConfigSerializeWrapper};

use crate::metadata::config_file::ConfigFile;
use crate::metadata::config_journal::JournaledFile;
use crate::metadata::topic_change::TopicChange;
use crate::metadata::topic_validator::{
    self, reply_topic, revive_topic, AUTO_CREATE_TOPIC_KEY_TOPIC, RMQ_SYS_BENCHMARK_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_TRACE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC, SYNC_BROKER_MEMBER_GROUP_PREFIX, TIMER_TOPIC,
};
use crate::metadata::{MetadataError, ReplaceSummary};

/// Queues of `SCHEDULE_TOPIC_XXXX`: one per delay level.
pub const SCHEDULE_TOPIC_QUEUE_NUMS: i32 = 18;
/// Queues of `BenchmarkTest`.
pub const BENCHMARK_TOPIC_QUEUE_NUMS: i32 = 1024;

/// The broker settings the topic table depends on, with Java's `BrokerConfig` /
/// `MessageStoreConfig` defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicConfigOptions {
    /// Queues of `TBW102`, the cap for auto-created topics (`defaultTopicQueueNums`, 8).
    pub default_topic_queue_nums: i32,
    /// Producers may create topics by sending to them (`autoCreateTopicEnable`, true).
    pub auto_create_topic_enable: bool,
    /// The cluster-name topic is readable and writable (`clusterTopicEnable`, true).
    pub cluster_topic_enable: bool,
    /// The broker-name topic is readable and writable (`brokerTopicEnable`, true).
    pub broker_topic_enable: bool,
    /// Create the message-trace topic (`traceTopicEnable`, false).
    pub trace_topic_enable: bool,
    /// Name of the message-trace topic (`msgTraceTopicName`, `RMQ_SYS_TRACE_TOPIC`).
    pub msg_trace_topic_name: String,
    /// Queues of the POP revive topic (`reviveQueueNum`, 8).
    pub revive_queue_num: i32,
    /// Create the 5.x timer-wheel topic (`timerWheelEnable`, true).
    pub timer_wheel_enable: bool,
    /// Light queues (`enableLmq`, false): every `%LMQ%` topic exists, with one readable and
    /// writable queue, without an entry in the table (Java: `LmqTopicConfigManager`).
    pub lmq: bool,
}

impl Default for TopicConfigOptions {
    fn default() -> Self {
        Self {
            default_topic_queue_nums: 8,
            auto_create_topic_enable: true,
            cluster_topic_enable: true,
            broker_topic_enable: true,
            trace_topic_enable: false,
            msg_trace_topic_name: RMQ_SYS_TRACE_TOPIC.to_owned(),
            revive_queue_num: 8,
            timer_wheel_enable: true,
            lmq: false,
        }
    }
}

/// A topic's config after a create-if-absent call, and whether that call created it (the
/// caller then registers the new topic with the name servers; an existing one is listed
/// already).
#[derive(Debug, Clone, PartialEq)]
pub struct Ensured {
    /// The topic's config.
    pub config: TopicConfig,
    /// This call created the topic.
    pub created: bool,
}

/// The topic table. All methods take `&self`; a `RwLock` inside guards the table and is never
/// held while a file is written. Changes take the journal's lock first and append to it while
/// holding it, so the journal lists them in the order they were made.
pub struct TopicConfigManager {
    file: JournaledFile,
    state: RwLock<TopicTable>,
    options: TopicConfigOptions,
    /// System topics named after this broker (cluster, broker, reply, revive...), in addition to
    /// the fixed set of `topic_validator::is_system_topic`.
    broker_system_topics: HashSet<String>,
}

#[derive(Debug)]
struct TopicTable {
    topics: HashMap<String, TopicConfig>,
    data_version: DataVersion,
}

impl fmt::Debug for TopicConfigManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TopicConfigManager")
            .field("path", &self.file.path())
            .field("topics", &self.read().topics.len())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl TopicConfigManager {
    /// Creates the system topics in memory, then lays the topics of `path` (or its `.bak`) over
    /// them and takes the file's data version. Java: the `TopicConfigManager` constructor's
    /// `init()` followed by `load()`.
    ///
    /// If the table did not come from `path` itself (missing, or recovered from the backup) or
    /// the journal held changes, it is marked dirty, so the next periodic persist writes it.
    ///
    /// # Errors
    ///
    /// As [`ConfigFile::load`]: unreadable file, or corrupt file without a usable backup; an
    /// unreadable journal.
    pub fn load(
        path: impl Into<PathBuf>,
        broker_name: &str,
        cluster_name: &str,
        options: TopicConfigOptions,
    ) -> Result<Self, MetadataError> {
        let file = ConfigFile::new(path);
        let system = system_topic_configs(broker_name, cluster_name, &options);
        let broker_system_topics: HashSet<String> = system.iter().map(|c| c.topic_name.clone()).collect();
        let mut topics: HashMap<String, TopicConfig> = system.into_iter().map(|c| (c.topic_name.clone(), c)).collect();
        let loaded = file.load::<TopicConfigSerializeWrapper>()?;
        if loaded.needs_rewrite() {
            file.mark_dirty();
        }
        let mut data_version = match loaded.into_value() {
            Some(wrapper) => {
                info!(topics = wrapper.topic_config_table.len(), "topic configs loaded");
                topics.extend(wrapper.topic_config_table);
                wrapper.data_version
            }
            None => DataVersion::now(),
        };
        let (file, changes) = JournaledFile::open::<TopicChange>(file)?;
        if !changes.is_empty() {
            info!(changes = changes.len(), path = %file.journal_path().display(), "topic changes replayed from the journal");
            for change in changes {
                change.apply(&mut topics, &mut data_version);
            }
        }
        Ok(Self { file, state: RwLock::new(TopicTable { topics, data_version }), options, broker_system_topics })
    }

    /// The config of `topic`. Java: `selectTopicConfig`.
    /// With light queues on, a `%LMQ%` topic has one queue and is not in the table.
    pub fn select(&self, topic: &str) -> Option<TopicConfig> {
        if self.options.lmq && ferromq_store::is_lmq(topic) {
            return Some(TopicConfig::new(topic, 1, 1));
        }
        self.read().topics.get(topic).cloned()
    }

    /// `read` of the config of `topic`, under the table's lock: for callers that need a few
    /// fields of it on a hot path (a send), without copying the config.
    pub fn select_with<R>(&self, topic: &str, read: impl FnOnce(&TopicConfig) -> R) -> Option<R> {
        if self.options.lmq && ferromq_store::is_lmq(topic) {
            return Some(read(&TopicConfig::new(topic, 1, 1)));
        }
        self.read().topics.get(topic).map(read)
    }

    /// Whether `topic` is a compaction topic (`cleanup.policy=COMPACTION`), without copying
    /// its config (the store asks for each dispatched record).
    pub fn is_compaction(&self, topic: &str) -> bool {
        self.read().topics.get(topic).is_some_and(crate::metadata::is_compaction_topic)
    }

    /// True if `topic` exists (every light queue does, with light queues on).
    pub fn contains(&self, topic: &str) -> bool {
        (self.options.lmq && ferromq_store::is_lmq(topic)) || self.read().topics.contains_key(topic)
    }

    /// Number of topics.
    pub fn len(&self) -> usize {
        self.read().topics.len()
    }

    /// True if there are no topics (never the case after [`TopicConfigManager::load`]).
    pub fn is_empty(&self) -> bool {
        self.read().topics.is_empty()
    }

    /// Adds or replaces a topic config as given, bumps the data version and journals the
    /// change. Java: `updateTopicConfig` (attributes are stored as given, not merged).
    ///
    /// # Errors
    ///
    /// [`MetadataError::InvalidTopic`] for an empty name; journal failures (the change stays
    /// in memory and the table stays dirty for the next persist).
    pub fn update(&self, config: TopicConfig) -> Result<(), MetadataError> {
        if config.topic_name.is_empty() {
            return Err(MetadataError::InvalidTopic { topic: String::new(), reason: "empty topic name".to_owned() });
        }
        let topic = config.topic_name.clone();
        let mut journal = self.file.lock();
        let (old, change) = {
            let mut state = self.write();
            let old = state.topics.insert(topic.clone(), config.clone());
            state.data_version.next_version();
            (old, TopicChange::put(config, state.data_version))
        };
        info!(topic = %topic, created = old.is_none(), "topic config updated");
        self.file.append(&mut journal, &change)
    }

    /// Removes a topic; returns whether it existed. Bumps the data version and journals the
    /// change only if it did. Java: `deleteTopicConfig`.
    ///
    /// # Errors
    ///
    /// Journal failures (the topic stays deleted in memory).
    pub fn delete(&self, topic: &str) -> Result<bool, MetadataError> {
        let mut journal = self.file.lock();
        let change = {
            let mut state = self.write();
            if state.topics.remove(topic).is_none() {
                None
            } else {
                state.data_version.next_version();
                Some(TopicChange::delete(topic, state.data_version))
            }
        };
        let Some(change) = change else {
            warn!(topic, "delete topic config: topic does not exist");
            return Ok(false);
        };
        info!(topic, "topic config deleted");
        self.file.append(&mut journal, &change).map(|()| true)
    }

    /// The config of `topic`, creating it from `default_topic` if it does not exist.
    /// Java: `createTopicInSendMessageMethod`.
    ///
    /// A new topic is created only if `default_topic` exists and has the inherit bit, and, when
    /// `default_topic` is `TBW102`, auto-creation is enabled. It gets
    /// `min(client_default_queue_nums, default's write queues)` read and write queues (at least
    /// 0), the default topic's perm without the inherit bit and its filter type, and
    /// `topic_sys_flag`. `Ok(None)` means refused (a warning is logged).
    ///
    /// # Errors
    ///
    /// Persist failures. The topic then exists in memory (and the created hook ran); the table
    /// stays dirty for the next periodic persist.
    pub fn create_topic_in_send_message(
        &self,
        topic: &str,
        default_topic: &str,
        remote_addr: &str,
        client_default_queue_nums: i32,
        topic_sys_flag: i32,
    ) -> Result<Option<Ensured>, MetadataError> {
        let auto_create = self.options.auto_create_topic_enable;
        self.create_if_absent(topic, |topics| {
            let Some(default) = topics.get(default_topic) else {
                warn!(topic, default_topic, remote_addr, "create topic refused: default topic does not exist");
                return None;
            };
            let inheritable =
                perm::is_inherited(default.perm) && (auto_create || default_topic != AUTO_CREATE_TOPIC_KEY_TOPIC);
            if !inheritable {
                warn!(
                    topic,
                    default_topic,
                    perm = default.perm,
                    auto_create_topic_enable = auto_create,
                    remote_addr,
                    "create topic refused: default topic is not inheritable"
                );
                return None;
            }
            let queue_nums = client_default_queue_nums.min(default.write_queue_nums).max(0);
            let mut config = TopicConfig::new(topic, queue_nums, queue_nums);
            config.perm = default.perm & !PERM_INHERIT;
            config.topic_sys_flag = topic_sys_flag;
            config.topic_filter_type = default.topic_filter_type;
            info!(topic, default_topic, queue_nums, perm = config.perm, remote_addr, "topic created by default topic");
            Some(config)
        })
    }

    /// The config of `topic` (a `%RETRY%`/`%DLQ%` topic), creating it with `queue_nums` queues,
    /// `perm` and `topic_sys_flag` if it does not exist. An existing topic is returned as is.
    /// Java: `createTopicInSendMessageBackMethod` (4 arguments; unlike Java it does not reset an
    /// existing topic's `order` flag to false).
    ///
    /// # Errors
    ///
    /// Persist failures, as for [`TopicConfigManager::create_topic_in_send_message`].
    pub fn create_topic_in_send_back(
        &self,
        topic: &str,
        queue_nums: i32,
        perm: i32,
        topic_sys_flag: i32,
    ) -> Result<Ensured, MetadataError> {
        let ensured = self.create_if_absent(topic, |_| {
            let mut config = TopicConfig::new(topic, queue_nums, queue_nums);
            config.perm = perm;
            config.topic_sys_flag = topic_sys_flag;
            info!(topic, queue_nums, perm, "retry or dead-letter topic created");
            Some(config)
        })?;
        Ok(ensured.expect("the builder always returns a config"))
    }

    /// Like [`TopicConfigManager::create_topic_in_send_back`], but the topic's `order` flag is
    /// set to `order`, also on an existing topic (updated and persisted if it differs). Used for
    /// retry topics of orderly consumers. Java: `createTopicInSendMessageBackMethod` (5 arguments).
    ///
    /// # Errors
    ///
    /// Persist failures.
    pub fn create_topic_in_send_back_with_order(
        &self,
        topic: &str,
        queue_nums: i32,
        perm: i32,
        order: bool,
        topic_sys_flag: i32,
    ) -> Result<Ensured, MetadataError> {
        if let Some(mut existing) = self.select(topic) {
            if existing.order != order {
                existing.order = order;
                self.update(existing.clone())?;
            }
            return Ok(Ensured { config: existing, created: false });
        }
        let ensured = self.create_if_absent(topic, |_| {
            let mut config = TopicConfig::new(topic, queue_nums, queue_nums);
            config.perm = perm;
            config.topic_sys_flag = topic_sys_flag;
            config.order = order;
            info!(topic, queue_nums, perm, order, "retry topic created");
            Some(config)
        })?;
        Ok(ensured.expect("the builder always returns a config"))
    }

    /// Sets `order` on every existing topic named in the name server's order-topic table;
    /// persists if anything changed. Topics missing from the table keep their flag, as in Java.
    /// Java: `updateOrderTopicConfig`.
    ///
    /// # Errors
    ///
    /// Persist failures.
    pub fn update_order_topic_config(&self, order_topics: &KVTable) -> Result<(), MetadataError> {
        let mut journal = self.file.lock();
        let changes = {
            let mut state = self.write();
            let mut changed = Vec::new();
            for topic in order_topics.table.keys() {
                if let Some(config) = state.topics.get_mut(topic) {
                    if !config.order {
                        config.order = true;
                        changed.push(config.clone());
                        info!(topic = %topic, "topic marked orderly by name server");
                    }
                }
            }
            if !changed.is_empty() {
                state.data_version.next_version();
            }
            let version = state.data_version;
            changed.into_iter().map(|c| TopicChange::put(c, version)).collect::<Vec<_>>()
        };
        for change in &changes {
            self.file.append(&mut journal, change)?;
        }
        Ok(())
    }

    /// True if `topic` exists and is orderly. Java: `isOrderTopic`.
    pub fn is_order_topic(&self, topic: &str) -> bool {
        self.read().topics.get(topic).is_some_and(|c| c.order)
    }

    /// True for the fixed system topics, `rmq_sys_*` topics and the system topics this broker
    /// created at load (cluster name, broker name, reply topic, trace topic...). Java:
    /// `TopicValidator#isSystemTopic` after the broker's `addSystemTopic` calls.
    pub fn is_system_topic(&self, topic: &str) -> bool {
        topic_validator::is_system_topic(topic) || self.broker_system_topics.contains(topic)
    }

    /// The fixed system topics and those this broker added at load, existing or not. Java:
    /// `TopicValidator#getSystemTopicSet`.
    pub fn system_topic_set(&self) -> BTreeSet<String> {
        topic_validator::SYSTEM_TOPICS
            .iter()
            .map(|t| (*t).to_owned())
            .chain(self.broker_system_topics.iter().cloned())
            .collect()
    }

    /// A copy of the whole table with its version: topics.json's content and the topic part of
    /// the broker registration body. Java: `buildTopicConfigSerializeWrapper`.
    pub fn all(&self) -> TopicConfigSerializeWrapper {
        let state = self.read();
        TopicConfigSerializeWrapper {
            data_version: state.data_version,
            topic_config_table: state.topics.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<BTreeMap<_, _>>(),
        }
    }

    /// Moves the table's version on without changing a topic, so name servers take the next
    /// registration's topic table (after a broker permission change, whose effect on the
    /// registered perms is computed at registration). Java: `getDataVersion().nextVersion()`
    /// in `AdminBrokerProcessor#updateBrokerConfig`.
    pub fn bump_data_version(&self) {
        let mut journal = self.file.lock();
        let version = {
            let mut state = self.write();
            state.data_version.next_version();
            state.data_version
        };
        if let Err(e) = self.file.append(&mut journal, &TopicChange::version(version)) {
            // Only the version is lost on a crash, and a restarted broker registers in full.
            warn!(error = %e, "topic table version change not journaled");
        }
    }

    /// The table's current version.
    pub fn data_version(&self) -> DataVersion {
        self.read().data_version
    }

    /// Makes the table a copy of `master`'s (a slave following its master) and persists it,
    /// unless the table already has `master`'s data version: then nothing happens and `None`
    /// is returned. Topics the master does not have are deleted, except this broker's own
    /// system topics (which every load creates anyway, so the table after a restart is the
    /// same as now); the table takes the master's data version, so the next call with an
    /// unchanged master is a no-op. The created hook is not called.
    /// Java: `SlaveSynchronize#syncTopicConfig` (4.x clears the table and copies the master's;
    /// Java 5 deletes absent topics one by one with the same result).
    ///
    /// # Errors
    ///
    /// Persist failures (the new table stays in memory and the table stays dirty).
    pub fn replace_all(&self, master: TopicConfigSerializeWrapper) -> Result<Option<ReplaceSummary>, MetadataError> {
        let change = || {
            let mut state = self.write();
            if state.data_version == master.data_version {
                return None;
            }
            let mut topics: HashMap<String, TopicConfig> = master.topic_config_table.into_iter().collect();
            for name in &self.broker_system_topics {
                if let (false, Some(own)) = (topics.contains_key(name), state.topics.get(name)) {
                    topics.insert(name.clone(), own.clone());
                }
            }
            let summary = ReplaceSummary::between(&state.topics, &topics);
            state.topics = topics;
            state.data_version = master.data_version;
            Some(summary)
        };
        self.file.replace(change, || self.all())
    }

    /// The options the table was loaded with.
    pub fn options(&self) -> &TopicConfigOptions {
        &self.options
    }

    /// Writes topics.json now (synced, crash-safe) and drops the journal records it covers
    /// ([`JournaledFile::persist`]).
    ///
    /// # Errors
    ///
    /// As [`JournaledFile::persist`].
    pub fn persist(&self) -> Result<(), MetadataError> {
        self.file.persist(|| self.all())
    }

    /// Writes topics.json if the table changed since the last write; returns whether it wrote.
    ///
    /// # Errors
    ///
    /// As [`TopicConfigManager::persist`].
    pub fn persist_if_dirty(&self) -> Result<bool, MetadataError> {
        self.file.persist_if_dirty(|| self.all())
    }

    /// Blocks until every change made so far is on disk (the journal's background sync
    /// covers it).
    pub fn wait_durable(&self) {
        self.file.wait_durable();
    }

    /// Returns the existing config, or inserts what `build` makes from the table (`None`:
    /// refused), bumps the version, marks the table dirty and calls the created hook.
    fn create_if_absent(
        &self,
        topic: &str,
        build: impl FnOnce(&HashMap<String, TopicConfig>) -> Option<TopicConfig>,
    ) -> Result<Option<Ensured>, MetadataError> {
        if let Some(existing) = self.select(topic) {
            return Ok(Some(Ensured { config: existing, created: false }));
        }
        let mut journal = self.file.lock();
        let (created, change) = {
            let mut state = self.write();
            if let Some(existing) = state.topics.get(topic) {
                return Ok(Some(Ensured { config: existing.clone(), created: false }));
            }
            let Some(config) = build(&state.topics) else {
                return Ok(None);
            };
            state.topics.insert(topic.to_owned(), config.clone());
            state.data_version.next_version();
            (config.clone(), TopicChange::put(config, state.data_version))
        };
        // Journaled here, so a killed process keeps the topic (its messages are acknowledged,
        // and pulls of an unknown topic fail); the journal's background sync makes it durable
        // off the request path (an fsync here took seconds while the store was flushing).
        if let Err(e) = self.file.append(&mut journal, &change) {
            warn!(topic, error = %e, "created topic not journaled; the periodic persist retries");
        }
        drop(journal);
        Ok(Some(Ensured { config: created, created: true }))
    }

    fn read(&self) -> RwLockReadGuard<'_, TopicTable> {
        // Every write is a single map operation plus a version bump, so a panicking writer
        // cannot leave the table half-changed.
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, TopicTable> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The topics a broker creates in memory at start, in Java's order, with Java's queue counts
/// and perms (`new TopicConfig(name)` is 16 queues, read-write).
fn system_topic_configs(broker_name: &str, cluster_name: &str, options: &TopicConfigOptions) -> Vec<TopicConfig> {
    let topic = |name: &str, queue_nums: i32, perm: i32| {
        let mut config = TopicConfig::new(name, queue_nums, queue_nums);
        config.perm = perm;
        config
    };
    let read_write = PERM_READ | PERM_WRITE;
    let inherit_if = |enabled: bool| if enabled { PERM_INHERIT | read_write } else { PERM_INHERIT };
    let mut topics = vec![topic(RMQ_SYS_SELF_TEST_TOPIC, 1, read_write)];
    if options.auto_create_topic_enable {
        topics.push(topic(AUTO_CREATE_TOPIC_KEY_TOPIC, options.default_topic_queue_nums, PERM_INHERIT | read_write));
    }
    topics.extend([
        topic(RMQ_SYS_BENCHMARK_TOPIC, BENCHMARK_TOPIC_QUEUE_NUMS, read_write),
        topic(cluster_name, 16, inherit_if(options.cluster_topic_enable)),
        topic(broker_name, 1, inherit_if(options.broker_topic_enable)),
        topic(RMQ_SYS_OFFSET_MOVED_EVENT, 1, read_write),
        topic(RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUMS, read_write),
    ]);
    if options.trace_topic_enable {
        topics.push(topic(&options.msg_trace_topic_name, 1, read_write));
    }
    topics.extend([
        topic(&reply_topic(cluster_name), 1, read_write),
        topic(&revive_topic(cluster_name), options.revive_queue_num, read_write),
        topic(&format!("{SYNC_BROKER_MEMBER_GROUP_PREFIX}{broker_name}"), 1, PERM_INHERIT),
        topic(RMQ_SYS_TRANS_HALF_TOPIC, 1, read_write),
        topic(RMQ_SYS_TRANS_OP_HALF_TOPIC, 1, read_write),
    ]);
    if options.timer_wheel_enable {
        topics.push(topic(TIMER_TOPIC, 1, read_write));
    }
    topics
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(dir: &tempfile::TempDir, options: TopicConfigOptions) -> TopicConfigManager {
        TopicConfigManager::load(dir.path().join("topics.json"), "broker-a", "DefaultCluster", options).unwrap()
    }

    #[test]
    fn system_topics_have_java_queue_counts_and_perms() {
        let dir = tempfile::tempdir().unwrap();
        let topics = load(&dir, TopicConfigOptions::default());
        let expect = |name: &str, queues: i32, perm: i32| {
            let config = topics.select(name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(
                (config.read_queue_nums, config.write_queue_nums, config.perm),
                (queues, queues, perm),
                "{name}"
            );
        };
        expect("SELF_TEST_TOPIC", 1, 6);
        expect("TBW102", 8, 7);
        expect("BenchmarkTest", 1024, 6);
        expect("DefaultCluster", 16, 7);
        expect("broker-a", 1, 7);
        expect("OFFSET_MOVED_EVENT", 1, 6);
        expect("SCHEDULE_TOPIC_XXXX", 18, 6);
        expect("DefaultCluster_REPLY_TOPIC", 1, 6);
        expect("rmq_sys_REVIVE_LOG_DefaultCluster", 8, 6);
        expect("rmq_sys_SYNC_BROKER_MEMBER_broker-a", 1, 1);
        expect("RMQ_SYS_TRANS_HALF_TOPIC", 1, 6);
        expect("RMQ_SYS_TRANS_OP_HALF_TOPIC", 1, 6);
        expect("rmq_sys_wheel_timer", 1, 6);
        assert_eq!(topics.select("RMQ_SYS_TRACE_TOPIC"), None);
        assert_eq!(topics.len(), 13);
        assert!(topics.is_system_topic("broker-a") && topics.is_system_topic("DefaultCluster_REPLY_TOPIC"));
        assert!(!topics.is_system_topic("TopicTest"));
    }

    #[test]
    fn optional_system_topics_follow_options() {
        let dir = tempfile::tempdir().unwrap();
        let options = TopicConfigOptions {
            auto_create_topic_enable: false,
            cluster_topic_enable: false,
            broker_topic_enable: false,
            trace_topic_enable: true,
            msg_trace_topic_name: "MyTrace".to_owned(),
            timer_wheel_enable: false,
            ..TopicConfigOptions::default()
        };
        let topics = load(&dir, options);
        assert_eq!(topics.select("TBW102"), None);
        assert_eq!(topics.select("rmq_sys_wheel_timer"), None);
        assert_eq!(topics.select("DefaultCluster").unwrap().perm, 1);
        assert_eq!(topics.select("broker-a").unwrap().perm, 1);
        assert_eq!(topics.select("MyTrace").unwrap().write_queue_nums, 1);
        assert!(topics.is_system_topic("MyTrace"));
    }

    #[test]
    fn only_the_call_that_creates_a_topic_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let topics = load(&dir, TopicConfigOptions::default());
        let created = |e: Ensured| (e.config.topic_name, e.created);
        let send = |t| created(topics.create_topic_in_send_message(t, "TBW102", "1.2.3.4:5", 4, 0).unwrap().unwrap());
        assert_eq!(send("A"), ("A".to_owned(), true));
        assert_eq!(send("A"), ("A".to_owned(), false));
        let back = |t| created(topics.create_topic_in_send_back(t, 1, 6, 0).unwrap());
        assert_eq!(back("%RETRY%g"), ("%RETRY%g".to_owned(), true));
        assert_eq!(back("%RETRY%g"), ("%RETRY%g".to_owned(), false));
        topics.update(TopicConfig::new("B", 1, 1)).unwrap();
        assert_eq!(back("B"), ("B".to_owned(), false), "a topic made by an update exists");
        let ordered = topics.create_topic_in_send_back_with_order("%RETRY%h", 1, 6, true, 0).unwrap();
        assert!(ordered.created && ordered.config.order);
    }

    #[test]
    fn send_back_with_order_updates_existing_flag() {
        let dir = tempfile::tempdir().unwrap();
        let topics = load(&dir, TopicConfigOptions::default());
        let version = topics.data_version();
        topics.create_topic_in_send_back("%RETRY%g", 1, 6, 0).unwrap();
        assert!(!topics.is_order_topic("%RETRY%g"));
        let ensured = topics.create_topic_in_send_back_with_order("%RETRY%g", 1, 6, true, 0).unwrap();
        assert!(!ensured.created, "an existing topic is updated, not created");
        assert!(ensured.config.order && topics.is_order_topic("%RETRY%g"));
        assert_eq!(topics.data_version().counter, version.counter + 2);
        // The 4-argument form leaves the flag alone.
        assert!(topics.create_topic_in_send_back("%RETRY%g", 1, 6, 0).unwrap().config.order);
    }

    #[test]
    fn replace_all_copies_the_master_but_keeps_own_system_topics() {
        let dir = tempfile::tempdir().unwrap();
        let topics = load(&dir, TopicConfigOptions::default());
        topics.update(TopicConfig::new("OnlyOnSlave", 1, 1)).unwrap();
        let mut master = TopicConfigSerializeWrapper {
            data_version: DataVersion { counter: 5, state_version: 0, timestamp: 42 },
            topic_config_table: BTreeMap::new(),
        };
        master.topic_config_table.insert("T".into(), TopicConfig::new("T", 4, 4));
        master.topic_config_table.insert("TBW102".into(), TopicConfig::new("TBW102", 2, 2));
        let summary = topics.replace_all(master.clone()).unwrap().unwrap();
        assert_eq!(summary, ReplaceSummary { added: 1, updated: 1, removed: 1 });
        assert!(topics.contains("T") && !topics.contains("OnlyOnSlave"));
        assert_eq!(topics.select("TBW102").unwrap().write_queue_nums, 2, "the master's config wins");
        assert!(topics.contains("SCHEDULE_TOPIC_XXXX") && topics.contains("broker-a"), "own system topics stay");
        assert_eq!(topics.data_version(), master.data_version);
        assert_eq!(topics.replace_all(master.clone()).unwrap(), None, "same version: nothing to do");
        let reloaded = load(&dir, TopicConfigOptions::default());
        assert_eq!(reloaded.all(), topics.all(), "persisted");
    }

    #[test]
    fn order_topic_table_sets_flags_of_existing_topics() {
        let dir = tempfile::tempdir().unwrap();
        let topics = load(&dir, TopicConfigOptions::default());
        topics.update(TopicConfig::new("T", 4, 4)).unwrap();
        let table = KVTable { table: BTreeMap::from([("T".into(), "broker-a:4".into()), ("X".into(), "b:1".into())]) };
        topics.update_order_topic_config(&table).unwrap();
        assert!(topics.is_order_topic("T"));
        assert!(!topics.contains("X"));
    }
}
