//! Acknowledging popped messages and changing their invisible time: the typed requests the
//! remoting processors (ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME) and the proxy (AckMessage,
//! ChangeInvisibleDuration) share. The work is POP's (`pop/ack.rs`).

use super::{Caller, Service, ServiceError};

/// Acknowledges one popped message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckRequest {
    /// The consumer group that popped it.
    pub consumer_group: String,
    /// The topic it was popped from (a retry topic for a retried message).
    pub topic: String,
    /// Its queue.
    pub queue_id: i32,
    /// Its queue offset.
    pub offset: i64,
    /// The pop's extra info (`ck offset, pop time, invisible time, revive queue, ...`), as
    /// POP answered it in the message's POP_CK property.
    pub extra_info: String,
}

/// Changes the invisible time of one popped message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeInvisibleRequest {
    /// The consumer group that popped it.
    pub consumer_group: String,
    /// The topic it was popped from.
    pub topic: String,
    /// Its queue.
    pub queue_id: i32,
    /// Its queue offset.
    pub offset: i64,
    /// The pop's extra info (the current handle).
    pub extra_info: String,
    /// How long from now the message stays invisible, in milliseconds.
    pub invisible_time: i64,
}

/// The new handle's parts after a change of invisible time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvisibleChanged {
    /// The new checkpoint's pop time.
    pub pop_time: i64,
    /// The invisible time from that pop time.
    pub invisible_time: i64,
    /// The revive queue of the new checkpoint.
    pub revive_qid: i32,
}

impl Service {
    /// Acknowledges one popped message.
    ///
    /// # Errors
    /// The refusal: a slave, unknown topic or queue, an offset out of the queue (NO_MESSAGE),
    /// a malformed extra info, too many acks waiting, the ack record not stored.
    pub async fn ack(&self, caller: &Caller, req: &AckRequest) -> Result<(), ServiceError> {
        self.broker.ack(caller, req).await
    }

    /// Changes a popped message's invisible time: a new checkpoint, then the old one acked.
    ///
    /// # Errors
    /// As [`Service::ack`], and INVALID_PARAMETER for a negative time.
    pub async fn change_invisible_time(
        &self,
        caller: &Caller,
        req: &ChangeInvisibleRequest,
    ) -> Result<InvisibleChanged, ServiceError> {
        self.broker.change_invisible(caller, req).await
    }
}
