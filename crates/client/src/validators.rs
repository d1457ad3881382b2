//! Client-side checks before a send. Java: `Validators#checkMessage` and `#checkTopic`.

use crate::error::ClientError;
use crate::message::Message;

/// Longest topic name. Java: `Validators.TOPIC_MAX_LENGTH`.
pub const TOPIC_MAX_LEN: usize = 127;

/// Topics users may not send to. Java: `TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET` (the
/// template topic and system topics). The trace topic is not among them: trace records are
/// sent there by an ordinary producer (`enable_msg_trace`), as Java's clients do.
const NOT_ALLOWED_SEND_TOPICS: &[&str] = &[
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "rmq_sys_wheel_timer",
];

fn invalid(topic: &str, reason: impl Into<String>) -> ClientError {
    ClientError::Validation { topic: topic.to_owned(), reason: reason.into() }
}

/// Checks a topic name: not blank, at most 127 characters, only `%|a-zA-Z0-9_-`.
///
/// # Errors
/// [`ClientError::Validation`] naming the rule.
pub fn check_topic(topic: &str) -> Result<(), ClientError> {
    if topic.trim().is_empty() {
        return Err(invalid(topic, "The specified topic is blank"));
    }
    if topic.len() > TOPIC_MAX_LEN {
        return Err(invalid(topic, format!("The specified topic is longer than topic max length {TOPIC_MAX_LEN}.")));
    }
    if !topic.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-')) {
        return Err(invalid(
            topic,
            "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        ));
    }
    Ok(())
}

/// Checks a message before sending: its topic, that the topic is not a system one, a
/// non-empty body no longer than `max_message_size`.
///
/// # Errors
/// [`ClientError::Validation`] naming the rule.
pub fn check_message(msg: &Message, max_message_size: usize) -> Result<(), ClientError> {
    check_topic(&msg.topic)?;
    if NOT_ALLOWED_SEND_TOPICS.contains(&msg.topic.as_str()) {
        return Err(invalid(&msg.topic, "Sending message to topic is forbidden"));
    }
    if msg.body.is_empty() {
        return Err(invalid(&msg.topic, "the message body length is zero"));
    }
    if msg.body.len() > max_message_size {
        return Err(invalid(&msg.topic, format!("the message body size over max value, MAX: {max_message_size}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_rules_follow_java() {
        assert!(check_topic("Order_1-a%b|c").is_ok());
        assert!(check_topic("").is_err());
        assert!(check_topic("  ").is_err());
        assert!(check_topic("a b").is_err());
        assert!(check_topic("a.b").is_err());
        assert!(check_topic(&"x".repeat(127)).is_ok());
        assert!(check_topic(&"x".repeat(128)).is_err());
    }

    #[test]
    fn message_rules_follow_java() {
        assert!(check_message(&Message::new("T", "x"), 4).is_ok());
        assert!(check_message(&Message::new("T", ""), 4).is_err());
        assert!(check_message(&Message::new("T", "12345"), 4).is_err());
        assert!(check_message(&Message::new("TBW102", "x"), 4).is_err());
    }
}
