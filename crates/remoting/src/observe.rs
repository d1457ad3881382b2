//! What a server tells an [`RpcObserver`] about each request it served (Java:
//! `RemotingMetricsManager`, behind `rocketmq_rpc_latency`): the codes, whether the request
//! was held for long polling, how it ended and how long it took until its answer was written.

use std::time::Duration;

/// How a request ended (Java's `result` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcResult {
    /// Answered, and the answer queued for writing.
    Success,
    /// A oneway request: nothing to answer.
    Oneway,
    /// The handler failed (panicked); answered with SYSTEM_ERROR.
    ProcessRequestFailed,
    /// The answer could not be written: the connection had closed.
    WriteChannelFailed,
}

impl RpcResult {
    /// Java's label value.
    pub fn label(self) -> &'static str {
        match self {
            RpcResult::Success => "success",
            RpcResult::Oneway => "oneway",
            RpcResult::ProcessRequestFailed => "process_request_failed",
            RpcResult::WriteChannelFailed => "write_channel_failed",
        }
    }
}

/// One served request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rpc {
    /// The request code.
    pub request_code: i32,
    /// The answer's code (`None` for oneway requests).
    pub response_code: Option<i32>,
    /// Whether the handler held the request and answered it later (a parked pull or pop).
    pub long_polling: bool,
    /// How it ended.
    pub result: RpcResult,
    /// From the request's decoding to its answer being queued for writing.
    pub elapsed: Duration,
}

/// Told of every request a server serves (set in [`crate::ServerConfig::rpc_observer`]).
/// Called on the serving task: keep it short and non-blocking.
pub trait RpcObserver: Send + Sync + 'static {
    /// One request was served.
    fn observe(&self, rpc: &Rpc);
}
