//! Message lookup headers: QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33).

use super::command_header;

/// extField that marks a QUERY_MESSAGE key as a UNIQ_KEY.
pub const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";

command_header! {
    /// QUERY_MESSAGE (12).
    pub struct QueryMessageRequestHeader {
        pub topic: String => "topic",
        pub key: String => "key",
        pub max_num: i32 => "maxNum",
        pub begin_timestamp: i64 => "beginTimestamp",
        pub end_timestamp: i64 => "endTimestamp",
    }
}

command_header! {
    /// Response to QUERY_MESSAGE.
    pub struct QueryMessageResponseHeader {
        pub index_last_update_timestamp: i64 => "indexLastUpdateTimestamp",
        pub index_last_update_phyoffset: i64 => "indexLastUpdatePhyoffset",
    }
}

command_header! {
    /// VIEW_MESSAGE_BY_ID (33).
    pub struct ViewMessageRequestHeader {
        pub topic: Option<String> => "topic",
        /// Commit-log offset.
        pub offset: i64 => "offset",
    }
}

command_header! {
    /// QUERY_CONSUME_QUEUE (321): units of one consume queue (`mqadmin queryCq`). Java:
    /// `QueryConsumeQueueRequestHeader`.
    pub struct QueryConsumeQueueRequestHeader {
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        /// Queue offset of the first unit.
        pub index: i64 => "index",
        /// Units wanted.
        pub count: i32 => "count",
        /// With a group, its subscription to the topic comes back too.
        pub consumer_group: Option<String> => "consumerGroup",
    }
}
