//! Outcomes of reading a consume queue. Java: `GetMessageStatus`, `GetMessageResult`,
//! `QueryMessageResult`.

use bytes::Bytes;

/// Why a read returned what it did. The broker maps these to pull response codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetMessageStatus {
    /// Messages returned.
    Found,
    /// Messages exist but none matched the filter.
    NoMatchedMessage,
    /// The CommitLog data under the queue entries was deleted.
    MessageWasRemoving,
    /// The queue entry could not be read.
    OffsetFoundNull,
    /// Requested offset is far past the end.
    OffsetOverflowBadly,
    /// Requested offset is exactly the end: nothing new yet.
    OffsetOverflowOne,
    /// Requested offset is below the first stored entry.
    OffsetTooSmall,
    /// No such queue.
    NoMatchedLogicQueue,
    /// The queue exists but is empty.
    NoMessageInQueue,
}

impl GetMessageStatus {
    /// RocketMQ's name, used as the pull response remark.
    pub fn name(self) -> &'static str {
        match self {
            GetMessageStatus::Found => "FOUND",
            GetMessageStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            GetMessageStatus::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
            GetMessageStatus::OffsetFoundNull => "OFFSET_FOUND_NULL",
            GetMessageStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            GetMessageStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            GetMessageStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
            GetMessageStatus::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
            GetMessageStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
        }
    }
}

/// Messages read from one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetMessageResult {
    /// Status.
    pub status: GetMessageStatus,
    /// Where the consumer should read next.
    pub next_begin_offset: i64,
    /// First offset of the queue.
    pub min_offset: i64,
    /// Offset after the last entry of the queue.
    pub max_offset: i64,
    /// The records, as stored (zero-copy slices of the CommitLog).
    pub messages: Vec<Bytes>,
    /// Queue offsets of the records.
    pub queue_offsets: Vec<i64>,
    /// The data read is old enough to be served from a slave.
    pub suggest_pulling_from_slave: bool,
}

impl GetMessageResult {
    /// Total bytes of the records.
    pub fn total_bytes(&self) -> usize {
        self.messages.iter().map(Bytes::len).sum()
    }
}

/// Messages found by key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryMessageResult {
    /// The records (the caller filters hash collisions by the real key).
    pub messages: Vec<Bytes>,
    /// Store time covered by the index.
    pub index_last_update_timestamp: i64,
    /// CommitLog offset covered by the index.
    pub index_last_update_phyoffset: i64,
}
