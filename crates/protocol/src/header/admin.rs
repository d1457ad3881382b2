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
