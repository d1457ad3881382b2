//! POP consumption headers (RocketMQ 5.x): POP_MESSAGE (200050), ACK_MESSAGE (200051),
//! PEEK_MESSAGE (200052), CHANGE_MESSAGE_INVISIBLETIME (200053), NOTIFICATION (200054) and
//! POLLING_INFO (200055). BATCH_ACK_MESSAGE (200151) has no header of its own (its body is
//! `body::BatchAckMessageRequestBody`). Java: `PopMessageRequestHeader` and its siblings.

use super::command_header;

command_header! {
    /// POP_MESSAGE request.
    pub struct PopMessageRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        /// Any value below 0 means every queue of the topic (-1).
        pub queue_id: i32 => "queueId",
        /// 1..=32.
        pub max_msg_nums: i32 => "maxMsgNums",
        /// How long the popped messages stay hidden, ms.
        pub invisible_time: i64 => "invisibleTime",
        /// Long-polling budget, ms (0: answer at once).
        pub poll_time: i64 => "pollTime",
        /// The client's clock when it sent the request, ms (0: the broker's now).
        pub born_time: i64 => "bornTime",
        /// Where a group without an offset starts: 0 MIN, 1 MAX (`ConsumeInitMode`).
        pub init_mode: i32 => "initMode",
        /// `TAG` (default) or `SQL92`.
        pub exp_type: Option<String> => "expType",
        pub exp: Option<String> => "exp",
        /// FIFO pop.
        pub order: Option<bool> => "order",
        /// FIFO only: the client's attempt id, so a retried pop is not blocked by itself.
        pub attempt_id: Option<String> => "attemptId",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// POP_MESSAGE (and PEEK_MESSAGE) response.
    pub struct PopMessageResponseHeader {
        /// The broker clock every checkpoint of this response uses, ms.
        pub pop_time: i64 => "popTime",
        pub invisible_time: i64 => "invisibleTime",
        pub revive_qid: i32 => "reviveQid",
        /// Messages left in the queues read.
        pub rest_num: i64 => "restNum",
        /// `flag qid startOffset` per queue read, `;`-joined.
        pub start_offset_info: Option<String> => "startOffsetInfo",
        /// `flag qid o1,o2,...` per queue read, `;`-joined.
        pub msg_offset_info: Option<String> => "msgOffsetInfo",
        /// FIFO only: reconsume counts.
        pub order_count_info: Option<String> => "orderCountInfo",
    }
}

command_header! {
    /// ACK_MESSAGE request.
    pub struct AckMessageRequestHeader {
        pub consumer_group: String => "consumerGroup",
        /// The topic the message was read from: the pop retry topic for a retried message.
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        /// The message's POP_CK property (or a gRPC receipt handle).
        pub extra_info: String => "extraInfo",
        /// The message's queue offset.
        pub offset: i64 => "offset",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME request.
    pub struct ChangeInvisibleTimeRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub extra_info: String => "extraInfo",
        pub offset: i64 => "offset",
        /// The new invisible time, from now, ms.
        pub invisible_time: i64 => "invisibleTime",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// CHANGE_MESSAGE_INVISIBLETIME response: what the client's new extra info is built from.
    pub struct ChangeInvisibleTimeResponseHeader {
        pub pop_time: i64 => "popTime",
        pub invisible_time: i64 => "invisibleTime",
        pub revive_qid: i32 => "reviveQid",
    }
}

command_header! {
    /// PEEK_MESSAGE request.
    pub struct PeekMessageRequestHeader {
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub max_msg_nums: i32 => "maxMsgNums",
        pub consumer_group: String => "consumerGroup",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// NOTIFICATION request: "is there anything to pop?", long-polled.
    pub struct NotificationRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub poll_time: i64 => "pollTime",
        pub born_time: i64 => "bornTime",
        pub order: Option<bool> => "order",
        pub attempt_id: Option<String> => "attemptId",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// NOTIFICATION response.
    pub struct NotificationResponseHeader {
        pub has_msg: bool => "hasMsg",
        pub polling_full: Option<bool> => "pollingFull",
    }
}

command_header! {
    /// POLLING_INFO request.
    pub struct PollingInfoRequestHeader {
        pub consumer_group: String => "consumerGroup",
        pub topic: String => "topic",
        pub queue_id: i32 => "queueId",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// POLLING_INFO response: parked pops of `topic@group@queueId`.
    pub struct PollingInfoResponseHeader {
        pub polling_num: i32 => "pollingNum",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{CommandHeader, HeaderError};

    #[test]
    fn pop_request_keys_are_java_names() {
        let h = PopMessageRequestHeader {
            consumer_group: "G".into(),
            topic: "T".into(),
            queue_id: -1,
            max_msg_nums: 32,
            invisible_time: 60_000,
            poll_time: 15_000,
            born_time: 1_700_000_000_000,
            init_mode: 1,
            exp_type: Some("TAG".into()),
            exp: Some("a||b".into()),
            order: Some(false),
            attempt_id: None,
            broker_name: None,
        };
        let ext = h.to_ext_fields();
        let pairs: Vec<(String, String)> = ext.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "bornTime",
                "consumerGroup",
                "exp",
                "expType",
                "initMode",
                "invisibleTime",
                "maxMsgNums",
                "order",
                "pollTime",
                "queueId",
                "topic"
            ]
        );
        assert!(pairs.contains(&("queueId".into(), "-1".into())));
        assert!(pairs.contains(&("order".into(), "false".into())));
        assert_eq!(PopMessageRequestHeader::read_ext_fields(&ext).unwrap(), h);
    }

    #[test]
    fn a_missing_required_field_is_named() {
        let mut ext = AckMessageRequestHeader {
            consumer_group: "G".into(),
            topic: "T".into(),
            queue_id: 0,
            extra_info: "0 1 2 3 0 b 0 5".into(),
            offset: 5,
            broker_name: None,
        }
        .to_ext_fields();
        ext.remove("extraInfo");
        assert_eq!(
            AckMessageRequestHeader::read_ext_fields(&ext).unwrap_err(),
            HeaderError::MissingField { header: "AckMessageRequestHeader", field: "extraInfo" }
        );
    }
}
