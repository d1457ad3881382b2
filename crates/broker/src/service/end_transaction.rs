//! The producer's decision on a half message (END_TRANSACTION over remoting, EndTransaction
//! over gRPC). The work is the transaction module's (`transaction/end.rs`).

use super::{Caller, Service, ServiceError};

/// What the producer decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionDecision {
    /// Deliver the message.
    Commit,
    /// Drop it.
    Rollback,
    /// Not yet known: the broker's check-back asks again later.
    Unknown,
}

/// The end of one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndTransactionRequest {
    /// The producer group that sent the half message (checked against its PGROUP).
    pub producer_group: String,
    /// The half message's offset in the half queue.
    pub tran_state_table_offset: i64,
    /// The half message's CommitLog offset.
    pub commit_log_offset: i64,
    /// The decision.
    pub decision: TransactionDecision,
    /// Whether this answers the broker's check-back (a late answer of the producer's own is
    /// refused once the check-immunity time has passed; an answer to a check never is).
    pub from_transaction_check: bool,
    /// The message id (logs).
    pub msg_id: String,
}

/// How an end of transaction was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionEnded {
    /// Committed (the message stored in its topic) or rolled back; the half message is done.
    Decided,
    /// Unknown: nothing changed; the check-back will ask.
    LeftUndecided,
}

impl Service {
    /// Commits or rolls back a half message.
    ///
    /// # Errors
    /// SLAVE_NOT_AVAILABLE on a slave; SYSTEM_ERROR when the half message is not found or does
    /// not match, or the committed message is not stored; ILLEGAL_OPERATION for a late answer
    /// past the check-immunity time.
    pub async fn end_transaction(
        &self,
        caller: &Caller,
        req: &EndTransactionRequest,
    ) -> Result<TransactionEnded, ServiceError> {
        self.broker.end_transaction_of(caller, req).await
    }
}
