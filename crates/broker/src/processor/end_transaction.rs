//! END_TRANSACTION (37): the remoting side of
//! [`Service::end_transaction`](crate::service::Service::end_transaction).

use ferromq_protocol::header::EndTransactionRequestHeader;
use ferromq_protocol::message::sysflag;
use ferromq_protocol::RemotingCommand;
use ferromq_remoting::Connection;

use crate::broker::Broker;
use crate::processor::send::caller_of;
use crate::processor::{header_or_fail, service_failure, success};
use crate::service::{EndTransactionRequest, TransactionDecision};

impl Broker {
    pub(crate) async fn end_transaction(&self, conn: Connection, req: RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(&req, EndTransactionRequestHeader);
        let decision = match h.commit_or_rollback {
            sysflag::TRANSACTION_COMMIT_TYPE => TransactionDecision::Commit,
            sysflag::TRANSACTION_ROLLBACK_TYPE => TransactionDecision::Rollback,
            // Unknown (0) or anything else: the check-back decides.
            _ => TransactionDecision::Unknown,
        };
        let end = EndTransactionRequest {
            producer_group: h.producer_group,
            tran_state_table_offset: h.tran_state_table_offset,
            commit_log_offset: h.commit_log_offset,
            decision,
            from_transaction_check: h.from_transaction_check == Some(true),
            msg_id: h.msg_id,
        };
        match self.end_transaction_of(&caller_of(&conn, &req), &end).await {
            Ok(_) => success(&req),
            Err(e) => service_failure(&req, &e),
        }
    }
}
