//! What the dispatch (reput) service learns from each CommitLog record and hands to the
//! ConsumeQueue, the IndexFile and the arrival listeners. Java: `DispatchRequest`.

/// One record, as seen by dispatch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DispatchRequest {
    /// Topic.
    pub topic: String,
    /// Queue id.
    pub queue_id: i32,
    /// Physical offset of the record in the CommitLog.
    pub commit_log_offset: i64,
    /// Record size in bytes.
    pub msg_size: i32,
    /// Tag hash code (or delivery time for the schedule topic).
    pub tags_code: i64,
    /// Broker store time, ms.
    pub store_timestamp: i64,
    /// Queue offset assigned at append.
    pub consume_queue_offset: i64,
    /// KEYS property (space-separated keys), if any.
    pub keys: Option<String>,
    /// UNIQ_KEY property, if any.
    pub uniq_key: Option<String>,
    /// SYSFLAG of the record.
    pub sys_flag: i32,
    /// PREPARED TRANSACTION OFFSET.
    pub prepared_transaction_offset: i64,
    /// The properties string, kept only while a bitmap calculator needs it (see
    /// `MessageStore::set_bit_map_calculator`).
    pub properties: Option<String>,
    /// The light queues the record goes to and its offset in each (`INNER_MULTI_DISPATCH`
    /// and `INNER_MULTI_QUEUE_OFFSET`, for a topic that allows them); empty for most records.
    pub light_queues: Vec<(String, i64)>,
}
