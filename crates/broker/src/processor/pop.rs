//! POP_MESSAGE (200050): the remoting side of [`Service::pop`](crate::service::Service::pop).
//! A pop that parks is answered later on its connection, when the hold releases it.

use std::sync::Arc;

use ferromq_protocol::header::{PopMessageRequestHeader, PopMessageResponseHeader};
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::Connection;

use crate::broker::Broker;
use crate::pop::hold::Waiter;
use crate::pop::pop_message::PopOutcome;
use crate::processor::send::caller_of;
use crate::processor::{failure, service_failure};
use crate::service::{PopStatus, Popped, ServiceError};

impl Broker {
    /// Serves POP_MESSAGE: answers, or parks the request and answers it later on `conn`.
    pub(crate) async fn pop_message(
        self: &Arc<Self>,
        conn: Connection,
        req: RemotingCommand,
    ) -> Option<RemotingCommand> {
        let h: PopMessageRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return Some(failure(&req, response_code::SYSTEM_ERROR, e.to_string())),
        };
        let waiter = || Waiter::Remote { conn: conn.clone(), request: req.clone() };
        match self.pop_arrived(&caller_of(&conn, &req), h, waiter).await {
            PopOutcome::Answer(answer) => Some(pop_answer(&req, answer)),
            PopOutcome::Parked => None,
        }
    }

    /// A released parked POP_MESSAGE, processed again (`allow_park`: it was woken by an
    /// arrival, so it may wait again while time is left). `None` when it parked again.
    pub(crate) async fn pop_remoting_once(
        self: &Arc<Self>,
        conn: &Connection,
        req: &RemotingCommand,
        allow_park: bool,
    ) -> Option<RemotingCommand> {
        let h: PopMessageRequestHeader = match req.decode_header() {
            Ok(h) => h,
            Err(e) => return Some(failure(req, response_code::SYSTEM_ERROR, e.to_string())),
        };
        let waiter = || Waiter::Remote { conn: conn.clone(), request: req.clone() };
        match self.pop_once(&caller_of(conn, req), h, allow_park, Some(waiter)).await {
            PopOutcome::Answer(answer) => Some(pop_answer(req, answer)),
            PopOutcome::Parked => None,
        }
    }
}

/// The POP_MESSAGE answer: FOUND with the records as the body (in parts), or the "nothing"
/// codes with the header, or the refusal.
fn pop_answer(req: &RemotingCommand, answer: Result<Popped, ServiceError>) -> RemotingCommand {
    let p = match answer {
        Ok(p) => p,
        Err(e) => return service_failure(req, &e),
    };
    let header = PopMessageResponseHeader {
        pop_time: p.pop_time,
        invisible_time: p.invisible_time,
        revive_qid: p.revive_qid,
        rest_num: p.rest_num,
        start_offset_info: p.start_offset_info,
        msg_offset_info: p.msg_offset_info,
        order_count_info: p.order_count_info,
    };
    let (code, remark) = match p.status {
        PopStatus::Found => (response_code::SUCCESS, "FOUND"),
        PopStatus::PollingTimeout => (response_code::POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE"),
        PopStatus::PollingFull => (response_code::POLLING_FULL, "NO_MESSAGE_IN_QUEUE"),
    };
    let response = RemotingCommand::response_to(req, code, Some(remark.into())).with_header(&header);
    if p.messages.is_empty() {
        return response;
    }
    // The records as stored, written where they are (see `RemotingCommand::body_tail`).
    response.with_body_parts(p.messages)
}
