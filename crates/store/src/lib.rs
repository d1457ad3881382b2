//! RocketMQ's message store.
//!
//! Messages are appended to the CommitLog (segments of fixed size, memory-mapped); a dispatch
//! service follows it and builds one ConsumeQueue per topic queue (20-byte units pointing into
//! the CommitLog) and the IndexFiles (keys to offsets). Flushing is synchronous (group commit)
//! or periodic. A checkpoint and an abort marker drive recovery after a crash. The on-disk
//! layout is RocketMQ's, so the formats are shared with the Java broker.
//!
//! This crate uses files only: no sockets, no request codes.

mod checkpoint;
mod commit_log;
mod compaction;
mod config;
mod consume_queue;
mod consume_queue_ext;
mod delay_level;
mod disk_guard;
mod dispatch;
mod dispatch_request;
mod flush;
mod get_result;
mod index_file;
mod index_service;
mod lmq;
mod log_limiter;
mod mapped_file;
mod mapped_file_queue;
mod message_store;
mod parallel;
mod put_result;
mod read;
mod recovery;
pub mod reserve;
mod retention;
mod stats;
mod transient_pool;

pub use checkpoint::Checkpoint;
pub use commit_log::{AppendError, CommitLog, ReplicaAppend, ReplicaAppendError, TruncateError};
pub use compaction::{CompactionReport, CompactionTopics};
pub use config::{FlushDiskType, StoreConfig};
pub use consume_queue::{ConsumeQueue, ConsumeQueueStore, CqUnit, ExtOptions, CQ_STORE_UNIT_SIZE};
pub use consume_queue_ext::{is_ext_addr, ConsumeQueueExt, CqExtUnit};
pub use delay_level::{DelayLevels, DEFAULT_MESSAGE_DELAY_LEVEL, SCHEDULE_TOPIC};
pub use disk_guard::{DiskGuard, DISK_FULL_BIT};
pub use dispatch_request::DispatchRequest;
pub use get_result::{GetMessageResult, GetMessageStatus, QueryMessageResult};
pub use index_file::{index_file_size, index_key_hash, IndexFile, HASH_SLOT_SIZE, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE};
pub use index_service::{IndexService, QueryOffsetResult};
pub use lmq::{
    is_lmq, parse_targets as parse_lmq_targets, topic_allows_lmq, LMQ_DISPATCH_SEPARATOR, LMQ_NAME_MAX,
    LMQ_OPEN_QUEUES_MAX, LMQ_PREFIX, LMQ_QUEUE_ID,
};
pub use mapped_file::{
    offset_to_file_name, AppendPath, MappedFile, ReservePolicy, TransientBuffer, DEFAULT_RESERVE_STEP, OS_PAGE_SIZE,
};
pub use mapped_file_queue::MappedFileQueue;
pub use message_store::{ArrivalListener, BitMapCalculator, CommitLogListener, MessageStore, StoreError};
pub use put_result::{AppendResult, PutMessageResult, PutMessageStatus};
pub use read::MessageFilter;
pub use retention::{
    default_disk_usage_probe, disk_space, disk_used_percent, DiskSpace, DiskUsageProbe, RetentionReport,
    DELETE_FILES_BATCH_MAX, DISK_RATIO_CHECK_ENV, MANUAL_DELETE_RUNS, RETENTION_INITIAL_DELAY, RETENTION_INTERVAL,
};
pub use stats::{
    java_double, DailyTotals, StatsRecorder, StoreStats, Tps, PUT_LATENCY_BUCKET_NAMES, SAMPLES_MAX, SAMPLE_INTERVAL,
};
pub use transient_pool::TransientStorePool;
