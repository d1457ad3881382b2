//! PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361) headers.

use super::command_header;

/// Why a pull got NO_PERMISSION, in the response's `forbiddenType` (Java: `ForbiddenType`).
pub mod forbidden_type {
    /// The broker is not readable.
    pub const BROKER_FORBIDDEN: i32 = 1;
    /// The group may not consume (`consumeEnable` false).
    pub const GROUP_FORBIDDEN: i32 = 2;
    /// The topic is not readable.
    pub const TOPIC_FORBIDDEN: i32 = 3;
    /// The group consumes by broadcasting, which it may not (`consumeBroadcastEnable` false).
    pub const BROADCASTING_DISABLE_FORBIDDEN: i32 = 4;
    /// The group may not read this topic (UPDATE_AND_GET_GROUP_FORBIDDEN).
    pub const SUBSCRIPTION_FORBIDDEN: i32 = 5;
}

/// Pull sysflag bits (Java: `PullSysFlag`).
pub mod pull_sys_flag {
    /// The request carries the consumer's committed offset.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// The broker may park the request (long polling).
    pub const SUSPEND: i32 = 0x2;
    /// Use the request's subscription expression.
    pub const SUBSCRIPTION: i32 = 0x4;
    /// Legacy class filter.
    pub const CLASS_FILTER: i32 = 0x8;
    /// Lite pull consumer.
    pub const LITE_PULL: i32 = 0x10;
}

command_header! {
    /// PULL_MESSAGE request.
    pub struct PullMessageRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub queue_offset: i64 => "queueOffset",
        pub max_msg_nums: i32 => "maxMsgNums",
        /// [`pull_sys_flag`] bits.
        pub sys_flag: i32 => "sysFlag",
        pub commit_offset: i64 => "commitOffset",
        pub suspend_timeout_millis: i64 => "suspendTimeoutMillis",
        pub subscription: Option<String> => "subscription",
        pub sub_version: i64 => "subVersion",
        /// `TAG` (default) or `SQL92`.
        pub expression_type: Option<String> => "expressionType",
        pub max_msg_bytes: Option<i32> => "maxMsgBytes",
        pub request_source: Option<i32> => "requestSource",
        /// Spelled as in RocketMQ.
        pub proxy_froward_client_id: Option<String> => "proxyFrowardClientId",
        pub broker_name: Option<String> => "bname",
        /// 5.x static topics: `false` marks a request another broker forwarded (physical queue).
        pub lo: Option<bool> => "lo",
    }
}

command_header! {
    /// PULL_MESSAGE response.
    pub struct PullMessageResponseHeader {
        pub suggest_which_broker_id: i64 => "suggestWhichBrokerId",
        pub next_begin_offset: i64 => "nextBeginOffset",
        pub min_offset: i64 => "minOffset",
        pub max_offset: i64 => "maxOffset",
        pub offset_delta: Option<i64> => "offsetDelta",
        pub topic_sys_flag: Option<i32> => "topicSysFlag",
        pub group_sys_flag: Option<i32> => "groupSysFlag",
        pub forbidden_type: Option<i32> => "forbiddenType",
    }
}
