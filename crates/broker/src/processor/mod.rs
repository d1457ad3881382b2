//! Request processors: one file per family of request codes. Each turns a request into a
//! response using the broker's state; the dispatcher built in `dispatcher` routes codes here.
//! Java: `broker/processor/*`.

pub(crate) mod ack;
pub(crate) mod admin;
pub(crate) mod admin_query;
pub(crate) mod client;
pub(crate) mod end_transaction;
pub(crate) mod offset;
pub(crate) mod pop;
pub(crate) mod pull;
pub(crate) mod query;
pub(crate) mod reply;
pub(crate) mod send;
pub(crate) mod send_back;
pub(crate) mod static_topic;

use ferromq_protocol::{response_code, RemotingCommand};

/// A success response to `req`.
pub(crate) fn success(req: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(req, response_code::SUCCESS, None)
}

/// A failure response to `req`.
pub(crate) fn failure(req: &RemotingCommand, code: i32, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response_to(req, code, Some(remark.into()))
}

/// The answer to a request the service refused: its code and Java's remark (the one
/// `ServiceError` -> remoting mapping).
pub(crate) fn service_failure(req: &RemotingCommand, e: &crate::service::ServiceError) -> RemotingCommand {
    let remark = e.to_string();
    // Some refusals carry no text (ILLEGAL_OPERATION of a late end of transaction): no remark.
    RemotingCommand::response_to(req, e.remoting_code(), (!remark.is_empty()).then_some(remark))
}

/// Decodes the typed header or returns SYSTEM_ERROR naming the bad field, as Java does when
/// header decoding throws.
macro_rules! header_or_fail {
    ($req:expr, $ty:ty) => {
        match $req.decode_header::<$ty>() {
            Ok(h) => h,
            Err(e) => {
                return $crate::processor::failure($req, ferromq_protocol::response_code::SYSTEM_ERROR, e.to_string())
            }
        }
    };
}
pub(crate) use header_or_fail;
