//! The resources a request touches and the permission each needs (Java:
//! `PlainAccessValidator.parse`, acl-and-tls.md 2.3). Topics are named as they are; a consumer
//! group is named by its retry topic `%RETRY%<group>`, which is how ACL 1.0 stores group
//! permissions.

use ferromq_protocol::body::{BatchAckMessageRequestBody, HeartbeatData, JsonBody};
use ferromq_protocol::{request_code, RemotingCommand};

use super::permission::{PUB, SUB};

/// Prefix of retry topics, and of group resources.
pub const RETRY_PREFIX: &str = "%RETRY%";

/// The resource name of consumer group `group`.
pub fn group_resource(group: &str) -> String {
    format!("{RETRY_PREFIX}{group}")
}

/// Whether `resource` names a group.
pub fn is_group(resource: &str) -> bool {
    resource.starts_with(RETRY_PREFIX)
}

/// `topic:<name>` or `group:<name>`, as Java's refusals print a resource.
pub fn describe(resource: &str) -> String {
    match resource.strip_prefix(RETRY_PREFIX) {
        Some(group) => format!("group:{group}"),
        None => format!("topic:{resource}"),
    }
}

/// (resource, permission needed) pairs of `request`; empty for requests that touch no topic or
/// group (they need only authentication, and an admin account for admin codes).
///
/// Beyond Java 4.9's table (docs/decisions/0017): a send to a retry topic needs SUB on that
/// retry topic's own group (Java reads a `group` field the V1 header does not have, and for V2
/// the producer group, so the check named an unrelated or no resource); LITE_PULL_MESSAGE and
/// the POP family need what PULL_MESSAGE needs.
///
/// # Errors
/// A heartbeat whose body is not a heartbeat.
pub fn needed(request: &RemotingCommand) -> Result<Vec<(String, u8)>, String> {
    use request_code::*;
    let ext = |k: &str| request.ext(k).filter(|v| !v.is_empty());
    let mut out = Vec::new();
    let mut add = |resource: Option<String>, perm: u8| {
        if let Some(r) = resource {
            out.push((r, perm));
        }
    };
    let send_to = |topic: Option<&str>| -> (Option<String>, u8) {
        match topic {
            Some(t) if is_group(t) => (Some(t.to_owned()), SUB),
            t => (t.map(str::to_owned), PUB),
        }
    };
    match request.code {
        SEND_MESSAGE | SEND_REPLY_MESSAGE => {
            let (r, p) = send_to(ext("topic"));
            add(r, p);
        }
        SEND_MESSAGE_V2 | SEND_BATCH_MESSAGE | SEND_REPLY_MESSAGE_V2 => {
            let (r, p) = send_to(ext("b"));
            add(r, p);
        }
        CONSUMER_SEND_MSG_BACK => add(ext("group").map(group_resource), SUB),
        PULL_MESSAGE
        | LITE_PULL_MESSAGE
        | POP_MESSAGE
        | PEEK_MESSAGE
        | ACK_MESSAGE
        | CHANGE_MESSAGE_INVISIBLETIME
        | UPDATE_CONSUMER_OFFSET => {
            add(ext("topic").map(str::to_owned), SUB);
            add(ext("consumerGroup").map(group_resource), SUB);
        }
        BATCH_ACK_MESSAGE => {
            let body = BatchAckMessageRequestBody::decode(&request.body).map_err(|e| format!("batch ack body: {e}"))?;
            for ack in &body.acks {
                add(Some(group_resource(&ack.consumer_group)), SUB);
                add(Some(ack.topic.clone()).filter(|t| !t.is_empty()), SUB);
            }
        }
        QUERY_MESSAGE => add(ext("topic").map(str::to_owned), SUB),
        UNREGISTER_CLIENT | GET_CONSUMER_LIST_BY_GROUP => add(ext("consumerGroup").map(group_resource), SUB),
        HEART_BEAT => {
            let heartbeat = HeartbeatData::decode(&request.body).map_err(|e| format!("heartbeat body: {e}"))?;
            for consumer in &heartbeat.consumer_data_set {
                add(Some(group_resource(&consumer.group_name)), SUB);
                for sub in &consumer.subscription_data_set {
                    add(Some(sub.topic.clone()), SUB);
                }
            }
        }
        _ => {}
    }
    Ok(out)
}
