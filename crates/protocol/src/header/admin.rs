//! Administrative headers: topic and subscription-group management.

use super::command_header;

command_header! {
    /// UPDATE_AND_CREATE_TOPIC (17).
    pub struct CreateTopicRequestHeader {
        pub topic: String => "topic",
        pub default_topic: String => "defaultTopic",
        pub read_queue_nums: i32 => "readQueueNums",
        pub write_queue_nums: i32 => "writeQueueNums",
        pub perm: i32 => "perm",
        /// `SINGLE_TAG` or `MULTI_TAG`.
        pub topic_filter_type: String => "topicFilterType",
        pub topic_sys_flag: Option<i32> => "topicSysFlag",
        pub order: bool => "order",
        /// Modification list such as `+message.type=FIFO`.
        pub attributes: Option<String> => "attributes",
        pub force: Option<bool> => "force",
    }
}

command_header! {
    /// DELETE_TOPIC_IN_BROKER (215).
    pub struct DeleteTopicRequestHeader {
        pub topic: String => "topic",
    }
}

command_header! {
    /// DELETE_SUBSCRIPTIONGROUP (207).
    pub struct DeleteSubscriptionGroupRequestHeader {
        pub group_name: String => "groupName",
        pub clean_offset: Option<bool> => "cleanOffset",
    }
}

command_header! {
    /// GET_TOPIC_STATS_INFO (202).
    pub struct GetTopicStatsInfoRequestHeader {
        pub topic: String => "topic",
    }
}

command_header! {
    /// GET_CONSUME_STATS (208).
    pub struct GetConsumeStatsRequestHeader {
        pub consumer_group: String => "consumerGroup",
        /// One topic; blank means every topic the group has offsets on.
        pub topic: Option<String> => "topic",
        /// 5.x: `;`-separated topics; when not blank, `topic` is ignored.
        pub topic_list: Option<String> => "topicList",
    }
}

command_header! {
    /// GET_CONSUMER_CONNECTION_LIST (203).
    pub struct GetConsumerConnectionListRequestHeader {
        pub consumer_group: String => "consumerGroup",
    }
}

command_header! {
    /// GET_PRODUCER_CONNECTION_LIST (204).
    pub struct GetProducerConnectionListRequestHeader {
        pub producer_group: String => "producerGroup",
    }
}

command_header! {
    /// QUERY_TOPIC_CONSUME_BY_WHO (300).
    pub struct QueryTopicConsumeByWhoRequestHeader {
        pub topic: String => "topic",
    }
}

command_header! {
    /// INVOKE_BROKER_TO_RESET_OFFSET (222), and RESET_CONSUMER_CLIENT_OFFSET (220) from the
    /// broker to consumers.
    pub struct ResetOffsetRequestHeader {
        pub topic: String => "topic",
        pub group: String => "group",
        /// 5.x: one queue; absent or negative means every queue.
        pub queue_id: Option<i32> => "queueId",
        /// 5.x: the offset to reset `queue_id` to, instead of searching by time (-1: none).
        pub offset: Option<i64> => "offset",
        /// Reset to the first message stored at or after this time (ms); -1 means the end.
        pub timestamp: i64 => "timestamp",
        pub is_force: bool => "isForce",
    }
}

command_header! {
    /// CLONE_GROUP_OFFSET (314).
    pub struct CloneGroupOffsetRequestHeader {
        pub src_group: String => "srcGroup",
        pub dest_group: String => "destGroup",
        /// Blank means every topic the source group has offsets on.
        pub topic: Option<String> => "topic",
        /// Skip the check against the source group's live subscriptions.
        pub offline: Option<bool> => "offline",
    }
}

command_header! {
    /// GET_TOPIC_CONFIG (351): one topic's config on the broker. Java:
    /// `GetTopicConfigRequestHeader`.
    pub struct GetTopicConfigRequestHeader {
        pub topic: String => "topic",
        /// Also the static topic's queue mapping (logic queues), which FerroMQ does not have.
        pub lo: Option<bool> => "lo",
    }
}

command_header! {
    /// GET_SUBSCRIPTIONGROUP_CONFIG (352): one subscription group's config. Java:
    /// `GetSubscriptionGroupConfigRequestHeader`.
    pub struct GetSubscriptionGroupConfigRequestHeader {
        pub group: String => "group",
    }
}

command_header! {
    /// GET_BROKER_CONSUME_STATS (317). Java: `GetConsumeStatsInBrokerHeader`.
    pub struct GetConsumeStatsInBrokerHeader {
        /// Only ordered topics.
        pub is_order: bool => "isOrder",
    }
}

command_header! {
    /// VIEW_BROKER_STATS_DATA (315): one of the broker's counters, such as `TOPIC_PUT_NUMS`
    /// of a topic or `GROUP_GET_NUMS` of `topic@group`. Java: `ViewBrokerStatsDataRequestHeader`.
    pub struct ViewBrokerStatsDataRequestHeader {
        pub stats_name: String => "statsName",
        pub stats_key: String => "statsKey",
    }
}

command_header! {
    /// UPDATE_AND_GET_GROUP_FORBIDDEN (353): whether a group may read a topic, set and read
    /// back. Java: `UpdateGroupForbiddenRequestHeader`.
    pub struct UpdateGroupForbiddenRequestHeader {
        pub group: String => "group",
        pub topic: String => "topic",
        /// Absent: only read the setting.
        pub readable: Option<bool> => "readable",
    }
}
