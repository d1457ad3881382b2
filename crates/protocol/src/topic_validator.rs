//! Topic and group name rules and the well-known system topic names.
//! Java: `TopicValidator`, the topic-name parts of `MixAll` and `PopAckConstants`.
//!
//! The error texts are Java's, since they travel to clients as response remarks. The
//! broker-specific system topics (cluster name, broker name, reply and revive topics) are known
//! to `TopicConfigManager::is_system_topic`; [`is_system_topic`] here covers the fixed set.

/// The default topic new topics inherit from when producers auto-create them.
pub const AUTO_CREATE_TOPIC_KEY_TOPIC: &str = "TBW102";
/// Delayed messages wait here, one queue per delay level.
pub const RMQ_SYS_SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// Benchmark topic (1024 queues).
pub const RMQ_SYS_BENCHMARK_TOPIC: &str = "BenchmarkTest";
/// Transaction half (prepared) messages.
pub const RMQ_SYS_TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Default message-trace topic.
pub const RMQ_SYS_TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";
/// Transaction op (commit/rollback marker) messages.
pub const RMQ_SYS_TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Half messages checked too often.
pub const RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// Self-test topic.
pub const RMQ_SYS_SELF_TEST_TOPIC: &str = "SELF_TEST_TOPIC";
/// Offset-moved events.
pub const RMQ_SYS_OFFSET_MOVED_EVENT: &str = "OFFSET_MOVED_EVENT";
/// RocksDB offset checkpoints (5.x).
pub const RMQ_SYS_ROCKSDB_OFFSET_TOPIC: &str = "CHECKPOINT_TOPIC";
/// Every topic starting with this is a system topic.
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";
/// Prefix of the per-broker-name member-sync topic (5.x).
pub const SYNC_BROKER_MEMBER_GROUP_PREFIX: &str = "rmq_sys_SYNC_BROKER_MEMBER_";
/// The 5.x timer-wheel topic. Java: `TimerMessageStore.TIMER_TOPIC`.
pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";
/// Prefix of the per-cluster POP revive topic. Java: `PopAckConstants.REVIVE_TOPIC`.
pub const REVIVE_TOPIC_PREFIX: &str = "rmq_sys_REVIVE_LOG_";
/// Prefix of a consumer group's retry topic.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// Prefix of a consumer group's dead-letter topic.
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// Suffix of the per-cluster request-reply topic (`<cluster>_REPLY_TOPIC`).
pub const REPLY_TOPIC_POSTFIX: &str = "REPLY_TOPIC";

/// Longest ordinary topic name.
pub const TOPIC_MAX_LENGTH: usize = 127;
/// Longest retry or dead-letter topic name (`%RETRY%<group>`, POP's `%RETRY%<group>_<topic>`).
pub const RETRY_OR_DLQ_TOPIC_MAX_LENGTH: usize = 255;
/// Longest consumer group name (it becomes part of retry topic names).
pub const GROUP_MAX_LENGTH: usize = 120;

/// Fixed system topics. Java: `TopicValidator.SYSTEM_TOPIC_SET` before brokers add theirs.
pub const SYSTEM_TOPICS: [&str; 10] = [
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_BENCHMARK_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRACE_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_ROCKSDB_OFFSET_TOPIC,
];

/// Topics clients may not send to. Java: `TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`.
const NOT_ALLOWED_SEND_TOPICS: [&str; 6] = [
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
];

/// Checks a topic name: not blank, only `%|a-zA-Z0-9_-`, at most 127 characters (255 for
/// `%RETRY%`/`%DLQ%` topics). The error is Java's remark text. Java:
/// `TopicValidator#validateTopic`.
///
/// # Errors
///
/// The reason, worded as Java words it.
pub fn validate_topic(topic: &str) -> Result<(), String> {
    if is_blank(topic) {
        return Err("The specified topic is blank.".to_owned());
    }
    if has_illegal_char(topic) {
        return Err(format!(
            "The specified topic: {topic}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        ));
    }
    // Only ASCII is left, so the byte length is Java's UTF-16 length.
    if is_retry_or_dlq_topic(topic) {
        if topic.len() > RETRY_OR_DLQ_TOPIC_MAX_LENGTH {
            return Err(format!(
                "The specified topic is DLQ or Retry topic: {topic}, and it's longer than topic max length: \
                 {RETRY_OR_DLQ_TOPIC_MAX_LENGTH}"
            ));
        }
    } else if topic.len() > TOPIC_MAX_LENGTH {
        return Err(format!("The specified topic: {topic}, is longer than topic max length: {TOPIC_MAX_LENGTH}"));
    }
    Ok(())
}

/// Checks a consumer group name: not blank, only `%|a-zA-Z0-9_-`, at most 120 characters.
/// Java: `TopicValidator#validateGroup`.
///
/// # Errors
///
/// The reason, worded as Java words it.
pub fn validate_group(group: &str) -> Result<(), String> {
    if is_blank(group) {
        return Err("The specified group is blank.".to_owned());
    }
    if has_illegal_char(group) {
        return Err(format!(
            "The specified group: {group}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        ));
    }
    if group.len() > GROUP_MAX_LENGTH {
        return Err(format!("The specified group: {group}, is longer than group max length: {GROUP_MAX_LENGTH}"));
    }
    Ok(())
}

/// True for the fixed system topics and every `rmq_sys_*` topic. Java:
/// `TopicValidator#isSystemTopic` without the names a broker adds at start.
pub fn is_system_topic(topic: &str) -> bool {
    SYSTEM_TOPICS.contains(&topic) || topic.starts_with(SYSTEM_TOPIC_PREFIX)
}

/// True for topics producers may not send to (schedule, transaction, self-test,
/// offset-moved). Java: `TopicValidator#isNotAllowedSendTopic`.
pub fn is_not_allowed_send_topic(topic: &str) -> bool {
    NOT_ALLOWED_SEND_TOPICS.contains(&topic)
}

/// True for `%RETRY%...` and `%DLQ%...` topics.
pub fn is_retry_or_dlq_topic(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
}

/// `%RETRY%<group>`. Java: `MixAll#getRetryTopic`.
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

/// `%DLQ%<group>`. Java: `MixAll#getDLQTopic`.
pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_GROUP_TOPIC_PREFIX}{group}")
}

/// `<cluster>_REPLY_TOPIC`. Java: `MixAll#getReplyTopic`.
pub fn reply_topic(cluster_name: &str) -> String {
    format!("{cluster_name}_{REPLY_TOPIC_POSTFIX}")
}

/// `rmq_sys_REVIVE_LOG_<cluster>`. Java: `PopAckConstants#buildClusterReviveTopic`.
pub fn revive_topic(cluster_name: &str) -> String {
    format!("{REVIVE_TOPIC_PREFIX}{cluster_name}")
}

/// Any character outside `%|a-zA-Z0-9_-`. Java: `TopicValidator#isTopicOrGroupIllegal`.
fn has_illegal_char(name: &str) -> bool {
    !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-'))
}

/// Empty or only whitespace as Java's `Character.isWhitespace` sees it. Java: `UtilAll#isBlank`.
fn is_blank(name: &str) -> bool {
    name.chars().all(is_java_whitespace)
}

fn is_java_whitespace(c: char) -> bool {
    match c {
        '\u{1C}'..='\u{1F}' => true,
        // No-break spaces and NEL are Unicode whitespace but not Java whitespace.
        '\u{85}' | '\u{A0}' | '\u{2007}' | '\u{202F}' => false,
        c => c.is_whitespace(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_topics_are_refused_with_java_text() {
        assert_eq!(validate_topic("").unwrap_err(), "The specified topic is blank.");
        assert_eq!(validate_topic(" \t\u{1F}").unwrap_err(), "The specified topic is blank.");
        assert!(validate_topic("\u{A0}").unwrap_err().contains("illegal characters"));
    }

    #[test]
    fn length_limit_depends_on_retry_prefix() {
        assert!(validate_topic(&"a".repeat(127)).is_ok());
        assert_eq!(
            validate_topic(&"a".repeat(128)).unwrap_err(),
            format!("The specified topic: {}, is longer than topic max length: 127", "a".repeat(128))
        );
        assert!(validate_topic(&format!("%RETRY%{}", "g".repeat(248))).is_ok());
        assert!(validate_topic(&format!("%DLQ%{}", "g".repeat(251))).unwrap_err().contains("DLQ or Retry"));
    }

    #[test]
    fn groups_follow_java_rules() {
        assert!(validate_group("CID_RMQ_SYS_TRANS").is_ok());
        assert_eq!(validate_group("").unwrap_err(), "The specified group is blank.");
        assert!(validate_group("g.1").unwrap_err().contains("illegal characters"));
        assert!(validate_group(&"g".repeat(121)).unwrap_err().contains("max length: 120"));
    }

    #[test]
    fn system_and_not_allowed_sets() {
        assert!(is_system_topic("TBW102") && is_system_topic("rmq_sys_anything"));
        assert!(!is_system_topic("TopicTest"));
        assert!(is_not_allowed_send_topic(RMQ_SYS_SCHEDULE_TOPIC));
        assert!(!is_not_allowed_send_topic(AUTO_CREATE_TOPIC_KEY_TOPIC));
        assert_eq!(revive_topic("C"), "rmq_sys_REVIVE_LOG_C");
        assert_eq!(reply_topic("C"), "C_REPLY_TOPIC");
    }
}
