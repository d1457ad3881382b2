//! Outcomes of appending messages. Java: `PutMessageStatus`, `PutMessageResult`,
//! `AppendMessageResult`.

/// Why a put did or did not store the message. The broker maps these to response codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMessageStatus {
    /// Stored (and flushed, under SYNC_FLUSH).
    PutOk,
    /// Stored but not flushed within `syncFlushTimeout`.
    FlushDiskTimeout,
    /// The store refuses writes: shut down, or poisoned by a failed flush.
    ServiceNotAvailable,
    /// The next segment could not be created.
    CreateMappedFileFailed,
    /// Too large, or an invalid record (topic too long, ...).
    MessageIllegal,
    /// The properties string exceeds 32767 bytes.
    PropertiesSizeExceeded,
    /// Writing or flushing failed; the store is now poisoned and nothing was acknowledged.
    FlushFailed,
    /// An unexpected internal failure.
    UnknownError,
    /// The send would create a light queue beyond `maxLmqConsumeQueueNum`.
    LmqConsumeQueueNumExceeded,
}

impl PutMessageStatus {
    /// Java's constant name (`PUT_OK`, ...), as metrics label a put.
    pub fn java_name(self) -> &'static str {
        match self {
            PutMessageStatus::PutOk => "PUT_OK",
            PutMessageStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
            PutMessageStatus::ServiceNotAvailable => "SERVICE_NOT_AVAILABLE",
            PutMessageStatus::CreateMappedFileFailed => "CREATE_MAPPED_FILE_FAILED",
            PutMessageStatus::MessageIllegal => "MESSAGE_ILLEGAL",
            PutMessageStatus::PropertiesSizeExceeded => "PROPERTIES_SIZE_EXCEEDED",
            PutMessageStatus::FlushFailed => "OS_PAGE_CACHE_BUSY",
            PutMessageStatus::UnknownError => "UNKNOWN_ERROR",
            PutMessageStatus::LmqConsumeQueueNumExceeded => "LMQ_CONSUME_QUEUE_NUM_EXCEEDED",
        }
    }
}

/// Where an append put the message(s).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AppendResult {
    /// Physical offset of the first record.
    pub wrote_offset: i64,
    /// Bytes written (all records of a batch).
    pub wrote_bytes: usize,
    /// Offset message ids, comma-joined for a batch.
    pub msg_id: String,
    /// Store time of the append.
    pub store_timestamp: i64,
    /// Queue offset of the first message.
    pub logics_offset: i64,
    /// Messages written.
    pub msg_num: usize,
}

/// A put's outcome: its status and, when the bytes were written, where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutMessageResult {
    /// Status.
    pub status: PutMessageStatus,
    /// Set whenever the bytes reached the CommitLog (also for FLUSH_DISK_TIMEOUT).
    pub append: Option<AppendResult>,
    /// Human-readable reason for a failure.
    pub remark: Option<String>,
}

impl PutMessageResult {
    pub(crate) fn ok(append: AppendResult) -> Self {
        PutMessageResult { status: PutMessageStatus::PutOk, append: Some(append), remark: None }
    }

    pub(crate) fn failed(status: PutMessageStatus, remark: impl Into<String>) -> Self {
        PutMessageResult { status, append: None, remark: Some(remark.into()) }
    }

    /// Whether the message is stored (possibly not yet durable).
    pub fn is_ok(&self) -> bool {
        matches!(self.status, PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout)
    }
}
