//! Client-management headers: unregister, consumer lists, consumer-id change notices, retry,
//! consumer running info.

use super::command_header;

command_header! {
    /// UNREGISTER_CLIENT (35).
    pub struct UnregisterClientRequestHeader {
        #[doc = "Spelled `clientID` on the wire."]
        pub client_id: String => "clientID",
        pub producer_group: Option<String> => "producerGroup",
        pub consumer_group: Option<String> => "consumerGroup",
    }
}

command_header! {
    /// GET_CONSUMER_LIST_BY_GROUP (38).
    pub struct GetConsumerListByGroupRequestHeader {
        pub consumer_group: String => "consumerGroup",
    }
}

command_header! {
    /// NOTIFY_CONSUMER_IDS_CHANGED (40), broker to consumer, oneway.
    pub struct NotifyConsumerIdsChangedRequestHeader {
        pub consumer_group: String => "consumerGroup",
    }
}

command_header! {
    /// CONSUMER_SEND_MSG_BACK (36).
    pub struct ConsumerSendMsgBackRequestHeader {
        /// Commit-log offset of the failed message.
        pub offset: i64 => "offset",
        pub group: String => "group",
        /// 0: the broker decides; negative: straight to the dead-letter queue.
        pub delay_level: i32 => "delayLevel",
        pub origin_msg_id: Option<String> => "originMsgId",
        pub origin_topic: Option<String> => "originTopic",
        pub unit_mode: Option<bool> => "unitMode",
        pub max_reconsume_times: Option<i32> => "maxReconsumeTimes",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// GET_CONSUMER_RUNNING_INFO (307), from an admin tool to a broker and forwarded by the
    /// broker to the named client.
    pub struct GetConsumerRunningInfoRequestHeader {
        pub consumer_group: String => "consumerGroup",
        #[doc = "The client asked, `ip@instanceName`."]
        pub client_id: String => "clientId",
        #[doc = "Also ask for a thread dump (Java writes it always; absent reads as false)."]
        pub jstack_enable: Option<bool> => "jstackEnable",
    }
}
