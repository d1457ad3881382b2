//! Consumer-offset and queue-offset headers (codes 14, 15, 29-32).

use super::command_header;

command_header! {
    /// QUERY_CONSUMER_OFFSET (14).
    pub struct QueryConsumerOffsetRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub set_zero_if_not_found: Option<bool> => "setZeroIfNotFound",
        pub broker_name: Option<String> => "bname",
        /// 5.x static topics: `false` marks a request another broker forwarded (physical queue).
        pub lo: Option<bool> => "lo",
    }
}

command_header! {
    /// Response carrying one offset (codes 14, 30, 31, 29).
    pub struct OffsetResponseHeader {
        pub offset: i64 => "offset",
    }
}

command_header! {
    /// UPDATE_CONSUMER_OFFSET (15).
    pub struct UpdateConsumerOffsetRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub commit_offset: i64 => "commitOffset",
        pub broker_name: Option<String> => "bname",
        /// 5.x static topics: `false` marks a request another broker forwarded (physical queue).
        pub lo: Option<bool> => "lo",
    }
}

command_header! {
    /// GET_MAX_OFFSET (30).
    pub struct GetMaxOffsetRequestHeader {
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        /// 5.x: count only committed (dispatched) messages; default true.
        pub committed: Option<bool> => "committed",
        pub broker_name: Option<String> => "bname",
        /// 5.x static topics: `false` marks a request another broker forwarded (physical queue).
        pub lo: Option<bool> => "lo",
    }
}

command_header! {
    /// GET_MIN_OFFSET (31) and GET_EARLIEST_MSG_STORETIME (32).
    pub struct QueueRequestHeader {
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub broker_name: Option<String> => "bname",
        /// 5.x static topics: `false` marks a request another broker forwarded (physical queue).
        pub lo: Option<bool> => "lo",
    }
}

command_header! {
    /// SEARCH_OFFSET_BY_TIMESTAMP (29).
    pub struct SearchOffsetRequestHeader {
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub timestamp: i64 => "timestamp",
        /// `lower` (default) or `upper`, case-insensitive.
        pub boundary_type: Option<String> => "boundaryType",
        pub broker_name: Option<String> => "bname",
        /// 5.x static topics: `false` marks a request another broker forwarded (physical queue).
        pub lo: Option<bool> => "lo",
    }
}

command_header! {
    /// Response to GET_EARLIEST_MSG_STORETIME.
    pub struct GetEarliestMsgStoretimeResponseHeader {
        pub timestamp: i64 => "timestamp",
    }
}
