//! Producer send headers (Java: `SendMessageRequestHeader`, `SendMessageRequestHeaderV2`,
//! `SendMessageResponseHeader`).
//!
//! SEND_MESSAGE (10) uses the long keys; SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and
//! SEND_REPLY_MESSAGE_V2 (325) use one-letter keys. Processors read either into the one
//! [`SendMessageRequestHeader`] through [`SendMessageRequestHeader::decode_for`].

use super::command_header;
use crate::command::ExtFields;
use crate::header::{CommandHeader, HeaderError};
use crate::request_code;

command_header! {
    /// The send request with RocketMQ's long keys.
    pub struct SendMessageRequestHeader {
        pub producer_group: String => "producerGroup",
        pub topic: String => "topic",
        /// Template topic for auto-creation, normally `TBW102`.
        pub default_topic: String => "defaultTopic",
        pub default_topic_queue_nums: i32 => "defaultTopicQueueNums",
        /// Negative: the broker picks a writable queue.
        pub queue_id: i32 => "queueId",
        pub sys_flag: i32 => "sysFlag",
        pub born_timestamp: i64 => "bornTimestamp",
        pub flag: i32 => "flag",
        /// The properties string (name 0x01 value 0x02 ...).
        pub properties: Option<String> => "properties",
        pub reconsume_times: Option<i32> => "reconsumeTimes",
        pub unit_mode: Option<bool> => "unitMode",
        pub batch: Option<bool> => "batch",
        pub max_reconsume_times: Option<i32> => "maxReconsumeTimes",
        /// 5.x base key: the broker name the client addressed.
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// The send request with one-letter keys, field for field the same as
    /// [`SendMessageRequestHeader`].
    pub struct SendMessageRequestHeaderV2 {
        pub a: String => "a",
        pub b: String => "b",
        pub c: String => "c",
        pub d: i32 => "d",
        pub e: i32 => "e",
        pub f: i32 => "f",
        pub g: i64 => "g",
        pub h: i32 => "h",
        pub i: Option<String> => "i",
        pub j: Option<i32> => "j",
        pub k: Option<bool> => "k",
        pub l: Option<i32> => "l",
        pub m: Option<bool> => "m",
        pub n: Option<String> => "n",
    }
}

impl From<SendMessageRequestHeaderV2> for SendMessageRequestHeader {
    fn from(v: SendMessageRequestHeaderV2) -> Self {
        SendMessageRequestHeader {
            producer_group: v.a,
            topic: v.b,
            default_topic: v.c,
            default_topic_queue_nums: v.d,
            queue_id: v.e,
            sys_flag: v.f,
            born_timestamp: v.g,
            flag: v.h,
            properties: v.i,
            reconsume_times: v.j,
            unit_mode: v.k,
            max_reconsume_times: v.l,
            batch: v.m,
            broker_name: v.n,
        }
    }
}

impl From<SendMessageRequestHeader> for SendMessageRequestHeaderV2 {
    fn from(h: SendMessageRequestHeader) -> Self {
        SendMessageRequestHeaderV2 {
            a: h.producer_group,
            b: h.topic,
            c: h.default_topic,
            d: h.default_topic_queue_nums,
            e: h.queue_id,
            f: h.sys_flag,
            g: h.born_timestamp,
            h: h.flag,
            i: h.properties,
            j: h.reconsume_times,
            k: h.unit_mode,
            l: h.max_reconsume_times,
            m: h.batch,
            n: h.broker_name,
        }
    }
}

impl SendMessageRequestHeader {
    /// Reads the header the way the broker does for `request_code`: one-letter keys for the V2
    /// codes (310, 320, 325), long keys otherwise.
    ///
    /// # Errors
    /// [`HeaderError`] naming the missing or malformed key as sent.
    pub fn decode_for(request_code: i32, ext: &ExtFields) -> Result<Self, HeaderError> {
        match request_code {
            request_code::SEND_MESSAGE_V2 | request_code::SEND_BATCH_MESSAGE | request_code::SEND_REPLY_MESSAGE_V2 => {
                SendMessageRequestHeaderV2::read_ext_fields(ext).map(Into::into)
            }
            _ => Self::read_ext_fields(ext),
        }
    }
}

command_header! {
    /// Response to the send requests.
    pub struct SendMessageResponseHeader {
        /// Offset message id; comma-joined for a batch.
        pub msg_id: String => "msgId",
        pub queue_id: i32 => "queueId",
        /// Queue offset of the (first) message.
        pub queue_offset: i64 => "queueOffset",
        pub transaction_id: Option<String> => "transactionId",
        pub batch_uniq_id: Option<String> => "batchUniqId",
        pub recall_handle: Option<String> => "recallHandle",
    }
}

command_header! {
    /// PUSH_REPLY_MESSAGE_TO_CLIENT (326): the broker hands a request-reply reply to the
    /// requesting producer. The send header's fields, plus where and when the reply came in.
    /// Java: `ReplyMessageRequestHeader`.
    pub struct ReplyMessageRequestHeader {
        pub producer_group: String => "producerGroup",
        pub topic: String => "topic",
        pub default_topic: String => "defaultTopic",
        pub default_topic_queue_nums: i32 => "defaultTopicQueueNums",
        pub queue_id: i32 => "queueId",
        pub sys_flag: i32 => "sysFlag",
        pub born_timestamp: i64 => "bornTimestamp",
        pub flag: i32 => "flag",
        pub properties: Option<String> => "properties",
        pub reconsume_times: Option<i32> => "reconsumeTimes",
        pub unit_mode: bool => "unitMode",
        /// `ip:port` of the replier's connection.
        pub born_host: String => "bornHost",
        /// `ip:port` of the broker.
        pub store_host: String => "storeHost",
        pub store_timestamp: i64 => "storeTimestamp",
    }
}

command_header! {
    /// RECALL_MESSAGE (370): cancel a pending timer message by the recall handle its send
    /// returned. Java: `RecallMessageRequestHeader`.
    pub struct RecallMessageRequestHeader {
        pub producer_group: Option<String> => "producerGroup",
        pub topic: String => "topic",
        pub recall_handle: String => "recallHandle",
        pub broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// The RECALL_MESSAGE answer: the UNIQ_KEY of the recalled message.
    pub struct RecallMessageResponseHeader {
        pub msg_id: Option<String> => "msgId",
    }
}
