//! PULL_MESSAGE requests and pull loops, as the loopback tests pull a queue.

use std::time::{Duration, Instant};

use ferromq_protocol::header::{pull_sys_flag, PullMessageRequestHeader, PullMessageResponseHeader};
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::RemotingClient;

use crate::TIMEOUT;

/// A PULL_MESSAGE of group `cg` as a push consumer sends it: queue `queue_id` of `topic` from
/// `offset`, up to 32 messages matching the tag expression `tags`, held by the broker up to
/// `suspend_ms` for new messages when that is above 0.
pub fn pull_request(topic: &str, queue_id: i32, offset: i64, tags: &str, suspend_ms: i64) -> RemotingCommand {
    RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&PullMessageRequestHeader {
        consumer_group: "cg".into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: pull_sys_flag::SUBSCRIPTION | if suspend_ms > 0 { pull_sys_flag::SUSPEND } else { 0 },
        suspend_timeout_millis: suspend_ms,
        subscription: Some(tags.into()),
        expression_type: Some("TAG".into()),
        ..Default::default()
    })
}

/// The messages of a queue from `offset` on, pulled (with long polling) and following each
/// answer's nextBeginOffset until there are at least `want` or `within` has passed.
///
/// # Panics
/// When the broker cannot be reached or answers a malformed header.
pub async fn pull_messages(
    client: &RemotingClient,
    addr: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
    want: usize,
    within: Duration,
) -> Vec<StoredMessage> {
    let deadline = Instant::now() + within;
    let mut next = offset;
    let mut out = Vec::new();
    loop {
        let r = client.invoke(addr, pull_request(topic, queue_id, next, "*", 500), TIMEOUT).await.expect("pull");
        if r.code == response_code::SUCCESS {
            out.extend(StoredMessage::decode_all(&r.body).expect("pulled records"));
            next = r.decode_header::<PullMessageResponseHeader>().expect("pull response header").next_begin_offset;
        }
        if out.len() >= want || Instant::now() > deadline {
            return out;
        }
    }
}
