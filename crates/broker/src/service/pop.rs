//! POP: messages handed out for a while, to be acknowledged (POP_MESSAGE over remoting,
//! ReceiveMessage over gRPC). The work is POP's (`pop/pop_message.rs`); here is what a pop
//! takes and gives, and the wait: a pop that finds nothing waits, within its poll time, for a
//! message to arrive.

use bytes::Bytes;

use super::{Caller, Service, ServiceError};

/// One pop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PopRequest {
    /// The consumer group.
    pub consumer_group: String,
    /// The topic.
    pub topic: String,
    /// One queue, or `None` for every queue of the topic (and the group's retry topic).
    pub queue_id: Option<i32>,
    /// At most this many messages (1..=32).
    pub max_msg_nums: i32,
    /// How long the popped messages stay hidden, ms.
    pub invisible_time_ms: i64,
    /// How long to wait for a message when none is there, ms (0: answer at once).
    pub poll_time_ms: i64,
    /// The client's clock when it asked, ms (0: now); the wait ends at born + poll time.
    pub born_time_ms: i64,
    /// Where a group without an offset starts: 0 first, 1 last (`ConsumeInitMode`).
    pub init_mode: i32,
    /// `TAG` (default) or `SQL92`.
    pub expression_type: Option<String>,
    /// The filter expression (`*` for all).
    pub expression: Option<String>,
    /// A FIFO pop.
    pub order: bool,
    /// FIFO: the client's attempt id, so its retried pop is not blocked by itself.
    pub attempt_id: Option<String>,
}

/// How a pop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PopStatus {
    /// Messages were popped.
    Found,
    /// Nothing within the poll time.
    PollingTimeout,
    /// Nothing, and too many pops already wait (`maxPopPollingSize` and its kin).
    PollingFull,
}

/// What a pop answered: the POP_MESSAGE response header's fields and the records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Popped {
    /// How it ended.
    pub status: PopStatus,
    /// The pop's time (the receipt handles' pop time).
    pub pop_time: i64,
    /// The invisible time asked for.
    pub invisible_time: i64,
    /// The revive queue of the checkpoints written.
    pub revive_qid: i32,
    /// Messages left in the queues read.
    pub rest_num: i64,
    /// Per queue read, its start offset (`startOffsetInfo`).
    pub start_offset_info: Option<String>,
    /// Per queue read, the offsets popped (`msgOffsetInfo`).
    pub msg_offset_info: Option<String>,
    /// FIFO: per queue or offset, the delivery count (`orderCountInfo`).
    pub order_count_info: Option<String>,
    /// The popped messages, each a stored record as the store holds it.
    pub messages: Vec<Bytes>,
}

impl Service {
    /// Pops up to `max_msg_nums` messages, waiting up to the poll time for one to arrive.
    /// Dropping the future while it waits withdraws the pop (nothing was handed out).
    ///
    /// # Errors
    /// A slave; the broker, topic or group not readable or missing; a bad count, invisible
    /// time or queue id; a bad filter; POLLING_TIMEOUT for a request that arrived expired.
    pub async fn pop(&self, caller: &Caller, req: &PopRequest) -> Result<Popped, ServiceError> {
        self.broker.pop_awaiting(caller, req).await
    }
}
