//! The broker's metadata: topic configs, subscription groups, consumer offsets, delay
//! offsets and static topics' queue mappings, each a thread-safe table persisted as a JSON file under
//! `<storePathRootDir>/config/` in RocketMQ's format, so a Java broker's files load unchanged.
//!
//! [`ConfigFile`] does the file handling for all four (crash-safe write, `.bak` fallback,
//! dirty flag). The topic table appends every change to a journal next to its file and
//! rewrites the file periodically (see [`TopicConfigManager`]); the group table persists on
//! every change, as Java does; the offset
//! tables only change memory and are written by the periodic [`MetadataStore::persist_all`]
//! (every [`PERSIST_INTERVAL`]) and at shutdown. Persisting blocks on fsync: call it from a
//! blocking thread, not an async task.
//!
//! A slave makes its tables copies of its master's (`replace_all` for topics, groups and delay
//! offsets, `merge_all` for consumer offsets, as Java's `SlaveSynchronize` does); the broker's
//! `slave_sync` task fetches them.
//!
//! Not here: request handling (the processors), registration with name servers (the broker
//! core, which registers a topic when a create-if-absent call's [`Ensured`] says it created
//! it), the delay service, and consumer filter and POP metadata.

mod config_file;
mod config_journal;
mod consumer_offset_manager;
mod delay_offset;
mod error;
mod group_change;
mod journal_sync;
mod message_request_mode;
mod subscription_group_manager;
pub(crate) mod topic_attributes;
mod topic_change;
mod topic_config_manager;
mod topic_queue_mapping_manager;
mod topic_validator;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tracing::error;

pub use config_file::{ConfigFile, Loaded, BACKUP_SUFFIX, TEMP_SUFFIX};
pub use consumer_offset_manager::{ConsumerOffsetManager, OFFSET_UPDATE_VERSION_STEP};
pub use delay_offset::{DelayOffsetSerializeWrapper, DelayOffsetTable, DELAY_OFFSET_UPDATE_VERSION_STEP};
pub use error::MetadataError;
pub use ferromq_protocol::body::{
    SubscriptionGroupConfig, SubscriptionGroupWrapper, DEFAULT_CONSUME_TIMEOUT_MINUTE, DEFAULT_RETRY_MAX_TIMES,
    DEFAULT_RETRY_QUEUE_NUMS,
};
pub use message_request_mode::MessageRequestModeManager;
pub use subscription_group_manager::{
    is_predefined_group, is_sys_consumer_group, SubscriptionGroupManager, SubscriptionGroupOptions,
    CID_ONSAPI_OWNER_GROUP, CID_ONSAPI_PERMISSION_GROUP, CID_ONSAPI_PULL_GROUP, CID_RMQ_SYS_PREFIX, CID_SYS_RMQ_TRANS,
    FILTERSRV_CONSUMER_GROUP, ONS_HTTP_PROXY_GROUP, SELF_TEST_CONSUMER_GROUP, TOOLS_CONSUMER_GROUP,
};
pub use topic_config_manager::{
    Ensured, TopicConfigManager, TopicConfigOptions, BENCHMARK_TOPIC_QUEUE_NUMS, SCHEDULE_TOPIC_QUEUE_NUMS,
};
pub use topic_queue_mapping_manager::{MappingUpdateError, TopicQueueMappingManager};
pub use topic_validator::{
    dlq_topic, is_not_allowed_send_topic, is_retry_or_dlq_topic, is_system_topic, reply_topic, retry_topic,
    revive_topic, validate_group, validate_topic, AUTO_CREATE_TOPIC_KEY_TOPIC, DLQ_GROUP_TOPIC_PREFIX,
    GROUP_MAX_LENGTH, REPLY_TOPIC_POSTFIX, RETRY_GROUP_TOPIC_PREFIX, RETRY_OR_DLQ_TOPIC_MAX_LENGTH,
    REVIVE_TOPIC_PREFIX, RMQ_SYS_BENCHMARK_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT, RMQ_SYS_ROCKSDB_OFFSET_TOPIC,
    RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_TRACE_TOPIC, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, SYNC_BROKER_MEMBER_GROUP_PREFIX, SYSTEM_TOPIC_PREFIX,
    TIMER_TOPIC, TOPIC_MAX_LENGTH,
};

/// How often the broker writes changed metadata (Java's `flushConsumerOffsetInterval`, 5 s).
pub const PERSIST_INTERVAL: Duration = Duration::from_secs(5);

/// Directory of the metadata files under `storePathRootDir`.
pub const CONFIG_DIR_NAME: &str = "config";
/// The topic table's file.
pub const TOPICS_FILE_NAME: &str = "topics.json";
/// The subscription group table's file.
pub const SUBSCRIPTION_GROUP_FILE_NAME: &str = "subscriptionGroup.json";
/// The consumer offset table's file.
pub const CONSUMER_OFFSET_FILE_NAME: &str = "consumerOffset.json";
/// The light queue groups' offsets file (with `enableLmq`).
pub const LMQ_CONSUMER_OFFSET_FILE_NAME: &str = "lmqConsumerOffset.json";
/// The static topics' queue mappings file.
pub const TOPIC_QUEUE_MAPPING_FILE_NAME: &str = "topicQueueMapping.json";
/// The delay offset table's file.
pub const DELAY_OFFSET_FILE_NAME: &str = "delayOffset.json";
/// File name of the message request modes.
pub const MESSAGE_REQUEST_MODE_FILE_NAME: &str = "messageRequestMode.json";

/// Whether `config` is a compaction topic's (`cleanup.policy=COMPACTION`; Java:
/// `CleanupPolicyUtils.isCompaction`).
pub fn is_compaction_topic(config: &ferromq_protocol::body::TopicConfig) -> bool {
    config.attributes.get("cleanup.policy").is_some_and(|p| p == "COMPACTION")
}

/// `<storePathRootDir>/config`. Java: `BrokerPathConfigHelper`.
pub fn config_dir(store_path_root_dir: &Path) -> PathBuf {
    store_path_root_dir.join(CONFIG_DIR_NAME)
}

/// What the metadata tables need to know about the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataOptions {
    /// `brokerName` (names a system topic).
    pub broker_name: String,
    /// `brokerClusterName` (names system topics).
    pub cluster_name: String,
    /// Topic table settings.
    pub topics: TopicConfigOptions,
    /// Group table settings.
    pub groups: SubscriptionGroupOptions,
    /// Light queues (`enableLmq`): their groups' offsets in `lmqConsumerOffset.json`.
    pub lmq: bool,
}

impl Default for MetadataOptions {
    /// Java's defaults: `broker-a` (Java uses the host name) in `DefaultCluster`.
    fn default() -> Self {
        Self {
            broker_name: "broker-a".to_owned(),
            cluster_name: "DefaultCluster".to_owned(),
            topics: TopicConfigOptions::default(),
            groups: SubscriptionGroupOptions::default(),
            lmq: false,
        }
    }
}

/// What replacing a table with a master's copy changed (see
/// [`TopicConfigManager::replace_all`], [`SubscriptionGroupManager::replace_all`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplaceSummary {
    /// Entries the table did not have.
    pub added: usize,
    /// Entries whose value changed.
    pub updated: usize,
    /// Entries the new table does not have.
    pub removed: usize,
}

impl ReplaceSummary {
    /// Compares a table before and after a replacement.
    pub(crate) fn between<V: PartialEq>(old: &HashMap<String, V>, new: &HashMap<String, V>) -> Self {
        let mut summary = Self { removed: old.keys().filter(|k| !new.contains_key(*k)).count(), ..Self::default() };
        for (key, value) in new {
            match old.get(key) {
                None => summary.added += 1,
                Some(before) if before != value => summary.updated += 1,
                Some(_) => {}
            }
        }
        summary
    }
}

/// The metadata tables of a broker (the ones a slave copies from its master).
#[derive(Debug)]
pub struct MetadataStore {
    topics: TopicConfigManager,
    groups: SubscriptionGroupManager,
    offsets: ConsumerOffsetManager,
    delay_offsets: DelayOffsetTable,
    request_modes: MessageRequestModeManager,
    mappings: TopicQueueMappingManager,
}

impl MetadataStore {
    /// Loads the files from `config_dir` (usually [`config_dir`] of the store root).
    ///
    /// # Errors
    ///
    /// The first table that fails to load; see [`ConfigFile::load`].
    pub fn load(config_dir: &Path, options: MetadataOptions) -> Result<Self, MetadataError> {
        let topics = TopicConfigManager::load(
            config_dir.join(TOPICS_FILE_NAME),
            &options.broker_name,
            &options.cluster_name,
            options.topics,
        )?;
        let groups = SubscriptionGroupManager::load(config_dir.join(SUBSCRIPTION_GROUP_FILE_NAME), options.groups)?;
        let offsets = if options.lmq {
            ConsumerOffsetManager::load_with_lmq(
                config_dir.join(CONSUMER_OFFSET_FILE_NAME),
                config_dir.join(LMQ_CONSUMER_OFFSET_FILE_NAME),
            )?
        } else {
            ConsumerOffsetManager::load(config_dir.join(CONSUMER_OFFSET_FILE_NAME))?
        };
        let delay_offsets = DelayOffsetTable::load(config_dir.join(DELAY_OFFSET_FILE_NAME))?;
        let request_modes = MessageRequestModeManager::load(config_dir.join(MESSAGE_REQUEST_MODE_FILE_NAME))?;
        let mappings = TopicQueueMappingManager::load(config_dir.join(TOPIC_QUEUE_MAPPING_FILE_NAME))?;
        Ok(Self { topics, groups, offsets, delay_offsets, request_modes, mappings })
    }

    /// The topic table.
    pub fn topics(&self) -> &TopicConfigManager {
        &self.topics
    }

    /// The subscription group table.
    pub fn groups(&self) -> &SubscriptionGroupManager {
        &self.groups
    }

    /// The consumer offset table.
    pub fn offsets(&self) -> &ConsumerOffsetManager {
        &self.offsets
    }

    /// The delay offset table.
    pub fn delay_offsets(&self) -> &DelayOffsetTable {
        &self.delay_offsets
    }

    /// The message request modes (POP or PULL per topic and group).
    pub fn request_modes(&self) -> &MessageRequestModeManager {
        &self.request_modes
    }

    /// The static topics' queue mappings.
    pub fn mappings(&self) -> &TopicQueueMappingManager {
        &self.mappings
    }

    /// Writes every table that changed since its last write (the periodic task and shutdown
    /// call this; unchanged tables are already on disk). Every table is tried; each failure is
    /// logged and the first returned, and failed tables stay dirty for the next call.
    ///
    /// # Errors
    ///
    /// The first failure.
    pub fn persist_all(&self) -> Result<(), MetadataError> {
        let results = [
            self.topics.persist_if_dirty(),
            self.groups.persist_if_dirty(),
            self.offsets.persist_if_dirty(),
            self.delay_offsets.persist_if_dirty(),
            self.request_modes.persist_if_dirty(),
            self.mappings.persist_if_dirty(),
        ];
        let mut first = None;
        for result in results {
            if let Err(e) = result {
                error!(error = %e, "persisting broker metadata failed");
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}
