//! `StoreConfig`: the message store's settings under RocketMQ's `broker.conf` keys, with
//! Java's defaults (Java: `MessageStoreConfig`). Paths are derived from `storePathRootDir`
//! unless set (Java: `StorePathConfigHelper`).

use std::path::PathBuf;
use std::time::Duration;

use ferromq_config::rocketmq_config;

fn default_store_root() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(".")).join("store")
}

/// When the CommitLog is forced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushDiskType {
    /// A put waits until its bytes are flushed (group commit).
    SyncFlush,
    /// A background service flushes periodically.
    AsyncFlush,
}

impl ferromq_config::ConfigValue for FlushDiskType {
    const EXPECTED: &'static str = "SYNC_FLUSH or ASYNC_FLUSH";
    fn parse_value(text: &str) -> Option<Self> {
        match text {
            "SYNC_FLUSH" => Some(FlushDiskType::SyncFlush),
            "ASYNC_FLUSH" => Some(FlushDiskType::AsyncFlush),
            _ => None,
        }
    }
    fn render(&self) -> String {
        match self {
            FlushDiskType::SyncFlush => "SYNC_FLUSH",
            FlushDiskType::AsyncFlush => "ASYNC_FLUSH",
        }
        .to_owned()
    }
}

rocketmq_config! {
    /// The store's settings. Field docs name the RocketMQ key.
    pub struct StoreConfig {
        /// `storePathRootDir`.
        store_path_root_dir: PathBuf = "storePathRootDir", default default_store_root();
        /// `storePathCommitLog`; empty means `<root>/commitlog`.
        store_path_commit_log: String = "storePathCommitLog", default String::new();
        /// `mappedFileSizeCommitLog` (bytes per CommitLog segment; old spelling accepted).
        mapped_file_size_commit_log: u64 = "mappedFileSizeCommitLog" | "mapedFileSizeCommitLog", default 1024 * 1024 * 1024;
        /// `mappedFileSizeConsumeQueue` (bytes per ConsumeQueue segment, a multiple of 20).
        mapped_file_size_consume_queue: u64 = "mappedFileSizeConsumeQueue" | "mapedFileSizeConsumeQueue", default 300_000 * 20;
        /// `flushDiskType`.
        flush_disk_type: FlushDiskType = "flushDiskType", default FlushDiskType::AsyncFlush;
        /// `flushIntervalCommitLog` (ms).
        flush_interval_commit_log_ms: u64 = "flushIntervalCommitLog", default 500;
        /// `flushCommitLogLeastPages`.
        flush_commit_log_least_pages: u64 = "flushCommitLogLeastPages", default 4;
        /// `flushCommitLogThoroughInterval` (ms).
        flush_commit_log_thorough_interval_ms: u64 = "flushCommitLogThoroughInterval", default 10_000;
        /// `flushIntervalConsumeQueue` (ms).
        flush_interval_consume_queue_ms: u64 = "flushIntervalConsumeQueue", default 1_000;
        /// `syncFlushTimeout` (ms): how long a SYNC_FLUSH put waits before FLUSH_DISK_TIMEOUT.
        sync_flush_timeout_ms: u64 = "syncFlushTimeout", default 5_000;
        /// `maxMessageSize` (bytes of body).
        max_message_size: u64 = "maxMessageSize", default 4 * 1024 * 1024;
        /// `checkCRCOnRecover`.
        check_crc_on_recover: bool = "checkCRCOnRecover", default true;
        /// `offsetCheckInSlave`: whether a slave corrects a pull's out-of-range offset from its
        /// own queue (off: a lagging slave must not move a consumer's offset).
        offset_check_in_slave: bool = "offsetCheckInSlave", default false;
        /// `maxTransferBytesOnMessageInMemory`.
        max_transfer_bytes_on_message_in_memory: u64 = "maxTransferBytesOnMessageInMemory", default 256 * 1024;
        /// `maxTransferCountOnMessageInMemory`.
        max_transfer_count_on_message_in_memory: u64 = "maxTransferCountOnMessageInMemory", default 32;
        /// `maxTransferBytesOnMessageInDisk`.
        max_transfer_bytes_on_message_in_disk: u64 = "maxTransferBytesOnMessageInDisk", default 64 * 1024;
        /// `maxTransferCountOnMessageInDisk`.
        max_transfer_count_on_message_in_disk: u64 = "maxTransferCountOnMessageInDisk", default 8;
        /// `accessMessageInMemoryMaxRatio` (% of RAM beyond which reads count as cold).
        access_message_in_memory_max_ratio: u64 = "accessMessageInMemoryMaxRatio", default 40;
        /// `messageIndexEnable`.
        message_index_enable: bool = "messageIndexEnable", default true;
        /// `messageIndexSafe`: after a crash, recover from early enough to rebuild every index
        /// entry (slower restarts); otherwise the unfinished index file's keys may be lost.
        message_index_safe: bool = "messageIndexSafe", default false;
        /// `maxHashSlotNum`.
        max_hash_slot_num: u32 = "maxHashSlotNum", default 5_000_000;
        /// `maxIndexNum`.
        max_index_num: u32 = "maxIndexNum", default 20_000_000;
        /// `maxMsgsNumBatch`: cap of a key query.
        max_msgs_num_batch: u32 = "maxMsgsNumBatch", default 64;
        /// `fileReservedTime` (hours).
        file_reserved_time_hours: u64 = "fileReservedTime", default 72;
        /// `deleteWhen`: hours of the day (`;`-separated) when expired files are deleted.
        delete_when: String = "deleteWhen", default "04".to_owned();
        /// `diskMaxUsedSpaceRatio` (%).
        disk_max_used_space_ratio: u64 = "diskMaxUsedSpaceRatio", default 75;
        /// `diskSpaceWarningLevelRatio` (%, 35 to 90): above it the store refuses puts (Java's
        /// disk-full flag), until usage is back at `diskSpaceCleanForciblyRatio`.
        disk_space_warning_level_ratio: u64 = "diskSpaceWarningLevelRatio", default 90;
        /// `diskSpaceCleanForciblyRatio` (%, 30 to 85): above it retention deletes unexpired
        /// CommitLog segments too (with `cleanFileForciblyEnable`).
        disk_space_clean_forcibly_ratio: u64 = "diskSpaceCleanForciblyRatio", default 85;
        /// `cleanFileForciblyEnable`.
        clean_file_forcibly_enable: bool = "cleanFileForciblyEnable", default true;
        /// `commitLogPrefaultWindow` (FerroMQ; bytes): how far ahead of the writer CommitLog
        /// blocks are reserved and pages faulted in. A 1 GiB segment then takes disk and memory
        /// as it fills, not at once (unless `warmMapedFileEnable` zero-fills it whole).
        commit_log_prefault_window: u64 = "commitLogPrefaultWindow", default 32 * 1024 * 1024;
        /// `transientStorePoolEnable`.
        transient_store_pool_enable: bool = "transientStorePoolEnable", default false;
        /// `transientStorePoolSize`.
        transient_store_pool_size: u32 = "transientStorePoolSize", default 5;
        /// `commitIntervalCommitLog` (ms).
        commit_interval_commit_log_ms: u64 = "commitIntervalCommitLog", default 200;
        /// `warmMapedFileEnable`: write zeros through to disk over each new CommitLog segment
        /// before it is used, as Java does, so flushes never allocate blocks (a group commit
        /// then forces data only, no inode update; see docs/benchmarks.md). Costs a segment's
        /// worth of background writes per segment. Pages are pre-touched either way.
        warm_mapped_file_enable: bool = "warmMapedFileEnable", default false;
        /// `enableConsumeQueueExt`: ConsumeQueue extension files (store time and the
        /// SQL92 bloom-filter bitmap per message).
        enable_consume_queue_ext: bool = "enableConsumeQueueExt", default false;
        /// `mappedFileSizeConsumeQueueExt` (bytes per extension file).
        mapped_file_size_consume_queue_ext: u64 = "mappedFileSizeConsumeQueueExt", default 48 * 1024 * 1024;
        /// `bitMapLengthConsumeQueueExt` (bits; Java sizes a scratch buffer with it, the
        /// bitmaps themselves take the bloom filter's length).
        bit_map_length_consume_queue_ext: u32 = "bitMapLengthConsumeQueueExt", default 64;
        /// `timerWheelEnable`: messages with a delivery time (TIMER_DELIVER_MS ...) go to the
        /// timer wheel; when false they are refused.
        timer_wheel_enable: bool = "timerWheelEnable", default true;
        /// `timerPrecisionMs`: width of a timer-wheel slot (100, 200, 500 or 1000).
        timer_precision_ms: u32 = "timerPrecisionMs", default 1000;
        /// `timerRollWindowSlot`: slots ahead beyond which timer messages are rolled.
        timer_roll_window_slot: u32 = "timerRollWindowSlot", default 3600 * 24 * 2;
        /// `timerMaxDelaySec`: furthest delivery time a send may ask for.
        timer_max_delay_sec: u32 = "timerMaxDelaySec", default 3600 * 24 * 3;
        /// `timerFlushIntervalMs`.
        timer_flush_interval_ms: u64 = "timerFlushIntervalMs", default 1000;
        /// `mappedFileSizeTimerLog` (bytes per timerlog segment).
        mapped_file_size_timer_log: u64 = "mappedFileSizeTimerLog", default 100 * 1024 * 1024;
        /// `timerEnableRetryUntilSuccess`.
        timer_enable_retry_until_success: bool = "timerEnableRetryUntilSuccess", default false;
        /// `timerCongestNumEachSlot`: timer sends to a slot holding more are throttled.
        timer_congest_num_each_slot: i32 = "timerCongestNumEachSlot", default i32::MAX;
        /// `messageDelayLevel`: the delay of each level, level 1 first.
        message_delay_level: crate::DelayLevels = "messageDelayLevel", default crate::DelayLevels::default();
        /// `enableLmq`: light message queues (`%LMQ%...`, advanced-topics.md section 2): their
        /// queue offsets are assigned at append and their consume queues open when used.
        enable_lmq: bool = "enableLmq", default false;
        /// `enableMultiDispatch`: a message's `INNER_MULTI_DISPATCH` light queues get a unit
        /// each at dispatch. LMQ works with both keys on.
        enable_multi_dispatch: bool = "enableMultiDispatch", default false;
        /// `maxLmqConsumeQueueNum`: light queues a broker may hold; a send that would create one
        /// more is refused (LMQ_CONSUME_QUEUE_NUM_EXCEEDED).
        max_lmq_consume_queue_num: u64 = "maxLmqConsumeQueueNum", default 20_000;
        /// `enableCompaction`: compaction topics (`cleanup.policy=COMPACTION`) get a compacted
        /// store under `compaction/`, which serves their reads.
        enable_compaction: bool = "enableCompaction", default true;
        /// `compactionMappedFileSize` (bytes per compaction log segment, rounded to a multiple
        /// of the compaction consume queue's as Java does).
        compaction_mapped_file_size: u64 = "compactionMappedFileSize", default 100 * 1024 * 1024;
        /// `compactionCqMappedFileSize` (bytes per compaction consume queue segment, whole
        /// 46-byte units).
        compaction_cq_mapped_file_size: u64 = "compactionCqMappedFileSize", default 10 * 1024 * 1024;
        /// `compactionScheduleInternal` (ms, Java's spelling): how often compaction runs.
        compaction_schedule_internal_ms: u64 = "compactionScheduleInternal", default 15 * 60 * 1000;
        /// `compactionThreadNum`: queues compacted side by side (FerroMQ runs at most 4).
        compaction_thread_num: u32 = "compactionThreadNum", default 6;
        /// `maxOffsetMapSize` (bytes): bounds the keys one compaction run tracks (24 bytes a key).
        max_offset_map_size: u64 = "maxOffsetMapSize", default 100 * 1024 * 1024;
        /// `flushDelayOffsetInterval` (ms): how often delay-level progress is written.
        flush_delay_offset_interval_ms: u64 = "flushDelayOffsetInterval", default 10_000;
    }
}

impl StoreConfig {
    /// A config rooted at `root` with Java's defaults otherwise.
    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        StoreConfig { store_path_root_dir: root.into(), ..StoreConfig::default() }
    }

    /// Directory of CommitLog segments.
    pub fn commit_log_dir(&self) -> PathBuf {
        if self.store_path_commit_log.is_empty() {
            self.store_path_root_dir.join("commitlog")
        } else {
            PathBuf::from(&self.store_path_commit_log)
        }
    }

    /// Directory of ConsumeQueues.
    pub fn consume_queue_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("consumequeue")
    }

    /// Directory of ConsumeQueue extension files.
    pub fn consume_queue_ext_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("consumequeue_ext")
    }

    /// Directory of IndexFiles.
    pub fn index_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("index")
    }

    /// The checkpoint file.
    pub fn checkpoint_path(&self) -> PathBuf {
        self.store_path_root_dir.join("checkpoint")
    }

    /// The abort marker.
    pub fn abort_path(&self) -> PathBuf {
        self.store_path_root_dir.join("abort")
    }

    /// The lock file.
    pub fn lock_path(&self) -> PathBuf {
        self.store_path_root_dir.join("lock")
    }

    /// ConsumeQueue segment size rounded down to whole 20-byte units.
    pub fn consume_queue_file_size(&self) -> u64 {
        (self.mapped_file_size_consume_queue / 20).max(1) * 20
    }

    /// `diskSpaceWarningLevelRatio` within Java's bounds (35 to 90 %:
    /// `MessageStoreConfig#getDiskSpaceWarningLevelRatio`).
    pub fn disk_space_warning_level_percent(&self) -> f64 {
        self.disk_space_warning_level_ratio.clamp(35, 90) as f64
    }

    /// `diskSpaceCleanForciblyRatio` within Java's bounds (30 to 85 %).
    pub fn disk_space_clean_forcibly_percent(&self) -> f64 {
        self.disk_space_clean_forcibly_ratio.clamp(30, 85) as f64
    }

    /// Whether sends are dispatched to light queues (`enableLmq` and `enableMultiDispatch`).
    pub fn light_queues(&self) -> bool {
        self.enable_lmq && self.enable_multi_dispatch
    }

    /// `syncFlushTimeout` as a duration.
    pub fn sync_flush_timeout(&self) -> Duration {
        Duration::from_millis(self.sync_flush_timeout_ms)
    }
}
