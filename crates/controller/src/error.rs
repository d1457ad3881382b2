//! The controller's errors: each request error carries the RocketMQ response code a client
//! gets for it (controller-mode.md §2, §3.3).

use ferromq_protocol::response_code;

/// A request the controller refuses, with its response code and a remark naming the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{remark} (code {code})")]
pub struct ControllerError {
    /// The RocketMQ response code (2000-2016).
    pub code: i32,
    /// The remark sent with it.
    pub remark: String,
}

impl ControllerError {
    pub(crate) fn new(code: i32, remark: impl Into<String>) -> ControllerError {
        ControllerError { code, remark: remark.into() }
    }

    /// RocketMQ's name of the code, for logs.
    pub fn code_name(&self) -> &'static str {
        response_code::name(self.code).unwrap_or("UNKNOWN")
    }
}

/// A Raft log entry or snapshot that is not an event of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventDecodeError {
    /// Fewer than the two bytes of the event type.
    #[error("event entry of {0} bytes has no type")]
    Truncated(usize),
    /// A type number that is not one of the events.
    #[error("unknown event type {0}")]
    UnknownType(i16),
    /// The JSON does not fit the event type.
    #[error("event type {kind}: {message}")]
    Json {
        /// The event type.
        kind: i16,
        /// What serde said.
        message: String,
    },
}
