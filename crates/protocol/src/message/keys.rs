//! Names of the well-known message properties (fact sheet 3.3), and [`asks_for_delay`] over them.
//!
//! Each constant is named after the string it holds where that string is a valid identifier, so
//! `keys::TAGS == "TAGS"`; the Java constant is given in each doc for cross-reference.
//! Java: `MessageConst`.

use super::MessageProperties;

/// Business keys, separated by [`KEY_SEPARATOR`]; indexed. Java: `PROPERTY_KEYS`.
pub const KEYS: &str = "KEYS";
/// The message tag, hashed into the consume queue. Java: `PROPERTY_TAGS`.
pub const TAGS: &str = "TAGS";
/// `"false"` means do not wait for flush or replication; absent means true.
/// Java: `PROPERTY_WAIT_STORE_MSG_OK`.
pub const WAIT: &str = "WAIT";
/// Delay level 1..=18. Java: `PROPERTY_DELAY_TIME_LEVEL`.
pub const DELAY: &str = "DELAY";
/// Original topic of a retried message. Java: `PROPERTY_RETRY_TOPIC`.
pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
/// Original topic of a delayed, timer or half message. Java: `PROPERTY_REAL_TOPIC`.
pub const REAL_TOPIC: &str = "REAL_TOPIC";
/// Original queue id of a delayed, timer or half message. Java: `PROPERTY_REAL_QUEUE_ID`.
pub const REAL_QID: &str = "REAL_QID";
/// `"true"` on transactional half messages. Java: `PROPERTY_TRANSACTION_PREPARED`.
pub const TRAN_MSG: &str = "TRAN_MSG";
/// Producer group, used for transaction check-back. Java: `PROPERTY_PRODUCER_GROUP`.
pub const PGROUP: &str = "PGROUP";
/// Queue minimum offset, set by the Java client on pulled messages. Java: `PROPERTY_MIN_OFFSET`.
pub const MIN_OFFSET: &str = "MIN_OFFSET";
/// Queue maximum offset, set by the Java client on pulled messages. Java: `PROPERTY_MAX_OFFSET`.
pub const MAX_OFFSET: &str = "MAX_OFFSET";
/// Java: `PROPERTY_BUYER_ID`.
pub const BUYER_ID: &str = "BUYER_ID";
/// First message id of a retried message. Java: `PROPERTY_ORIGIN_MESSAGE_ID`.
pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
/// Legacy. Java: `PROPERTY_TRANSFER_FLAG`.
pub const TRANSFER_FLAG: &str = "TRANSFER_FLAG";
/// Legacy. Java: `PROPERTY_CORRECTION_FLAG`.
pub const CORRECTION_FLAG: &str = "CORRECTION_FLAG";
/// Legacy. Java: `PROPERTY_MQ2_FLAG`.
pub const MQ2_FLAG: &str = "MQ2_FLAG";
/// Reconsume count (gRPC and retry paths). Java: `PROPERTY_RECONSUME_TIME`.
pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
/// Region. Java: `PROPERTY_MSG_REGION`.
pub const MSG_REGION: &str = "MSG_REGION";
/// Trace switch. Java: `PROPERTY_TRACE_SWITCH`.
pub const TRACE_ON: &str = "TRACE_ON";
/// Client-side unique message id, what users see as the msgId.
/// Java: `PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX`.
pub const UNIQ_KEY: &str = "UNIQ_KEY";
/// Java: `PROPERTY_EXTEND_UNIQ_INFO`.
pub const EXTEND_UNIQ_INFO: &str = "EXTEND_UNIQ_INFO";
/// Per-message maximum retries. Java: `PROPERTY_MAX_RECONSUME_TIMES`.
pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
/// Set by the client while consuming. Java: `PROPERTY_CONSUME_START_TIMESTAMP`.
pub const CONSUME_START_TIME: &str = "CONSUME_START_TIME";
/// 5.x inner batch: number of messages. Java: `PROPERTY_INNER_NUM`.
pub const INNER_NUM: &str = "INNER_NUM";
/// 5.x inner batch: base queue offset. Java: `PROPERTY_INNER_BASE`.
pub const INNER_BASE: &str = "INNER_BASE";
/// Deduplication info (`duplicationEnable`). Java: `DUP_INFO`.
pub const DUP_INFO: &str = "DUP_INFO";
/// Delay before the first transaction check. Java: `PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS`.
pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
/// Half-message queue offset, kept when the half message is re-put on check.
/// Java: `PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET`.
pub const TRAN_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
/// Transaction id (equal to UNIQ_KEY). Java: `PROPERTY_TRANSACTION_ID`.
pub const TRANSACTION_ID: &str = "__transactionId__";
/// Number of transaction check-backs so far. Java: `PROPERTY_TRANSACTION_CHECK_TIMES`.
pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
/// Namespace. Java: `PROPERTY_INSTANCE_ID`.
pub const INSTANCE_ID: &str = "INSTANCE_ID";
/// Request/reply correlation id. Java: `PROPERTY_CORRELATION_ID`.
pub const CORRELATION_ID: &str = "CORRELATION_ID";
/// Request/reply: client to answer. Java: `PROPERTY_MESSAGE_REPLY_TO_CLIENT`.
pub const REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
/// Request/reply time to live. Java: `PROPERTY_MESSAGE_TTL`.
pub const TTL: &str = "TTL";
/// Request/reply arrival time. Java: `PROPERTY_REPLY_MESSAGE_ARRIVE_TIME`.
pub const ARRIVE_TIME: &str = "ARRIVE_TIME";
/// Request/reply push time. Java: `PROPERTY_PUSH_REPLY_TIME`.
pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
/// Cluster name, added by the broker to every stored message. Java: `PROPERTY_CLUSTER`.
pub const CLUSTER: &str = "CLUSTER";
/// `"reply"` on reply messages. Java: `PROPERTY_MESSAGE_TYPE`.
pub const MSG_TYPE: &str = "MSG_TYPE";
/// Pop consumption checkpoint. Java: `PROPERTY_POP_CK`.
pub const POP_CK: &str = "POP_CK";
/// Pop consumption checkpoint offset. Java: `PROPERTY_POP_CK_OFFSET`.
pub const POP_CK_OFFSET: &str = "POP_CK_OFFSET";
/// Time of the first pop. Java: `PROPERTY_FIRST_POP_TIME`.
pub const FIRST_POP_TIME: &str = "1ST_POP_TIME";
/// FIFO message group (gRPC `message_group`). Java: `PROPERTY_SHARDING_KEY`.
pub const SHARDING_KEY: &str = "__SHARDINGKEY";
/// Java: `PROPERTY_FORWARD_QUEUE_ID`.
pub const FORWARD_QUEUE_ID: &str = "PROPERTY_FORWARD_QUEUE_ID";
/// Java: `PROPERTY_REDIRECT`.
pub const REDIRECT: &str = "REDIRECT";
/// LMQ multi-dispatch target queues, comma separated. Java: `PROPERTY_INNER_MULTI_DISPATCH`.
pub const INNER_MULTI_DISPATCH: &str = "INNER_MULTI_DISPATCH";
/// LMQ multi-dispatch queue offsets, comma separated. Java: `PROPERTY_INNER_MULTI_QUEUE_OFFSET`.
pub const INNER_MULTI_QUEUE_OFFSET: &str = "INNER_MULTI_QUEUE_OFFSET";
/// gRPC trace context. Java: `PROPERTY_TRACE_CONTEXT`.
pub const TRACE_CONTEXT: &str = "TRACE_CONTEXT";
/// 5.x timer: delay relative to now, in seconds. Java: `PROPERTY_TIMER_DELAY_SEC`.
pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
/// 5.x timer: delay relative to now, in milliseconds. Java: `PROPERTY_TIMER_DELAY_MS`.
pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
/// 5.x timer: absolute delivery time, epoch milliseconds. Java: `PROPERTY_TIMER_DELIVER_MS`.
pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
/// Timer-wheel internal. Java: `PROPERTY_TIMER_ENQUEUE_MS`.
pub const TIMER_ENQUEUE_MS: &str = "TIMER_ENQUEUE_MS";
/// Timer-wheel internal. Java: `PROPERTY_TIMER_DEQUEUE_MS`.
pub const TIMER_DEQUEUE_MS: &str = "TIMER_DEQUEUE_MS";
/// Timer-wheel internal. Java: `PROPERTY_TIMER_ROLL_TIMES`.
pub const TIMER_ROLL_TIMES: &str = "TIMER_ROLL_TIMES";
/// Timer-wheel internal. Java: `PROPERTY_TIMER_OUT_MS`.
pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
/// Timer-wheel internal. Java: `PROPERTY_TIMER_DEL_UNIQKEY`.
pub const TIMER_DEL_UNIQKEY: &str = "TIMER_DEL_UNIQKEY";
/// Timer-wheel internal. Java: `PROPERTY_TIMER_DELAY_LEVEL`.
pub const TIMER_DELAY_LEVEL: &str = "TIMER_DELAY_LEVEL";
/// Born host reported by the gRPC proxy. Java: `PROPERTY_BORN_HOST`.
pub const BORN_HOST: &str = "__BORNHOST";
/// Born time reported by the gRPC proxy. Java: `PROPERTY_BORN_TIMESTAMP`.
pub const BORN_TIMESTAMP: &str = "BORN_TIMESTAMP";
/// Prefix of transient properties, which the broker never stores.
/// Java: `PROPERTY_TRANSIENT_PREFIX`.
pub const TRANSIENT_PREFIX: &str = "__RMQ.TRANSIENT.";
/// Transient topic system flag, set by the client on pulled messages.
/// Java: `PROPERTY_TRANSIENT_TOPIC_CONFIG`.
pub const TRANSIENT_TOPIC_SYS_FLAG: &str = "__RMQ.TRANSIENT.TOPIC_SYS_FLAG";
/// Transient group system flag, set by the client on pulled messages.
/// Java: `PROPERTY_TRANSIENT_GROUP_CONFIG`.
pub const TRANSIENT_GROUP_SYS_FLAG: &str = "__RMQ.TRANSIENT.GROUP_SYS_FLAG";
/// Optional whole-record CRC appended to the properties (5.x `enabledAppendPropCRC`).
/// Java: `PROPERTY_CRC32`.
pub const CRC32: &str = "__CRC32#";
/// 5.x dead-letter info: original topic. Java: `PROPERTY_DLQ_ORIGIN_TOPIC`.
pub const DLQ_ORIGIN_TOPIC: &str = "DLQ_ORIGIN_TOPIC";
/// 5.x dead-letter info: original message id. Java: `PROPERTY_DLQ_ORIGIN_MESSAGE_ID`.
pub const DLQ_ORIGIN_MESSAGE_ID: &str = "DLQ_ORIGIN_MESSAGE_ID";
/// Aliyun/ONS-style absolute delivery time. Apache RocketMQ only reads it to classify a message
/// as delayed (hooks, metrics); it does not schedule on it. Use [`TIMER_DELIVER_MS`].
/// Not in `MessageConst` (a string literal in the Java client and broker metrics).
pub const START_DELIVER_TIME: &str = "__STARTDELIVERTIME";

/// The keys that ask for a later delivery: a delay level or a 5.x timer.
pub const DELAY_KEYS: [&str; 5] = [DELAY, TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS, START_DELIVER_TIME];

/// Whether `properties` ask for a later delivery: one of [`DELAY_KEYS`] (the delay level, the
/// 5.x timer keys, the cloud client's [`START_DELIVER_TIME`]) set to something other than
/// empty or `0`. The client's trace type (Java: `Delay_Msg` for a delay level or
/// `__STARTDELIVERTIME`) and the broker's `message_type` metric label read it.
pub fn asks_for_delay(properties: &MessageProperties) -> bool {
    DELAY_KEYS.iter().any(|k| properties.get(k).is_some_and(|v| !v.is_empty() && v != "0"))
}

/// Separator between business keys inside [`KEYS`]. Java: `MessageConst.KEY_SEPARATOR`.
pub const KEY_SEPARATOR: &str = " ";

/// Keys reserved for the system: users may not set them (the gRPC proxy rejects them in
/// user properties). Java: `MessageConst.STRING_HASH_SET`.
pub const RESERVED: &[&str] = &[
    TRACE_ON,
    MSG_REGION,
    KEYS,
    TAGS,
    WAIT,
    DELAY,
    RETRY_TOPIC,
    REAL_TOPIC,
    REAL_QID,
    TRAN_MSG,
    PGROUP,
    MIN_OFFSET,
    MAX_OFFSET,
    BUYER_ID,
    ORIGIN_MESSAGE_ID,
    TRANSFER_FLAG,
    CORRECTION_FLAG,
    MQ2_FLAG,
    RECONSUME_TIME,
    UNIQ_KEY,
    MAX_RECONSUME_TIMES,
    CONSUME_START_TIME,
    POP_CK,
    POP_CK_OFFSET,
    FIRST_POP_TIME,
    TRAN_PREPARED_QUEUE_OFFSET,
    DUP_INFO,
    EXTEND_UNIQ_INFO,
    INSTANCE_ID,
    CORRELATION_ID,
    REPLY_TO_CLIENT,
    TTL,
    ARRIVE_TIME,
    PUSH_REPLY_TIME,
    CLUSTER,
    MSG_TYPE,
    INNER_MULTI_QUEUE_OFFSET,
    TIMER_DELAY_MS,
    TIMER_DELAY_SEC,
    TIMER_DELIVER_MS,
    TIMER_ENQUEUE_MS,
    TIMER_DEQUEUE_MS,
    TIMER_ROLL_TIMES,
    TIMER_OUT_MS,
    TIMER_DEL_UNIQKEY,
    TIMER_DELAY_LEVEL,
    BORN_HOST,
    BORN_TIMESTAMP,
    DLQ_ORIGIN_TOPIC,
    DLQ_ORIGIN_MESSAGE_ID,
    CRC32,
];

/// Whether `key` is one of the [`RESERVED`] system keys.
pub fn is_reserved(key: &str) -> bool {
    RESERVED.contains(&key)
}

/// Whether `key` is transient: carried on the wire but never stored by the broker.
pub fn is_transient(key: &str) -> bool {
    key.starts_with(TRANSIENT_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_set_matches_java_size_and_excludes_user_space() {
        // STRING_HASH_SET adds 51 keys.
        assert_eq!(RESERVED.len(), 51);
        assert!(is_reserved(UNIQ_KEY));
        assert!(!is_reserved(TRANSACTION_ID), "Java leaves the transaction id out of the set");
        assert!(!is_reserved("myKey"));
        assert!(is_transient(TRANSIENT_TOPIC_SYS_FLAG));
    }

    #[test]
    fn a_delay_level_or_timer_key_other_than_empty_or_zero_asks_for_delay() {
        let with = |key: &str, value: &str| {
            let mut p = MessageProperties::default();
            p.insert(TAGS, "a");
            p.insert(key, value);
            p
        };
        assert!(!asks_for_delay(&MessageProperties::default()));
        for key in DELAY_KEYS {
            assert!(asks_for_delay(&with(key, "3")), "{key}");
            assert!(!asks_for_delay(&with(key, "0")), "{key}");
            assert!(!asks_for_delay(&with(key, "")), "{key}");
        }
        assert!(asks_for_delay(&with(START_DELIVER_TIME, "17000")), "the cloud client's key too");
        assert!(!asks_for_delay(&with(KEYS, "3")));
    }
}
