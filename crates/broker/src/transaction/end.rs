//! The end of a transaction (the service's `end_transaction`; END_TRANSACTION (37) over
//! remoting): the producer's decision on a half message, sent oneway after its
//! local transaction or in answer to a check-back. Commit stores a copy in the real topic and
//! queue, then marks the half message done; rollback only marks it done; unknown does
//! nothing (the check-back will ask again). Java: `EndTransactionProcessor`.

use ferromq_protocol::message::{keys, sysflag, MessageProperties, StoredMessage};
use ferromq_protocol::response_code;
use ferromq_store::PutMessageStatus;
use tracing::{info, warn};

use crate::broker::Broker;
use crate::service::{Caller, EndTransactionRequest, ServiceError, TransactionDecision, TransactionEnded};
use crate::timer::HookRefusal;
use crate::transaction::check_immunity_ms;

impl Broker {
    pub(crate) async fn end_transaction_of(
        &self,
        caller: &Caller,
        h: &EndTransactionRequest,
    ) -> Result<TransactionEnded, ServiceError> {
        if self.is_slave() {
            return Err(ServiceError::Other {
                code: response_code::SLAVE_NOT_AVAILABLE,
                remark: "Store is slave mode, so end transaction is forbidden. ".into(),
            });
        }
        if h.decision == TransactionDecision::Unknown {
            // Unknown (0) or anything else: the half message waits for the check-back.
            info!(producer_group = %h.producer_group, msg_id = %h.msg_id, from_check = h.from_transaction_check, remote_addr = %caller.remote_addr, "transaction left undecided");
            return Ok(TransactionEnded::LeftUndecided);
        }
        let half = self.find_half_message(h).map_err(ServiceError::System)?;
        if self.past_check_immunity(h, &half) {
            // Java `rejectCommitOrRollback`: the producer asked to be checked first
            // (CHECK_IMMUNITY_TIME_IN_SECONDS) and answers late on its own: the check decides.
            info!(producer_group = %h.producer_group, msg_id = %h.msg_id, "late end of transaction refused; the check-back decides");
            return Err(ServiceError::Other { code: response_code::ILLEGAL_OPERATION, remark: String::new() });
        }
        if h.decision == TransactionDecision::Commit {
            let committed = committed_message(self, &half, h.commit_log_offset)
                .map_err(|(code, remark)| ServiceError::from_code(code, remark))?;
            let topic = committed.topic.clone();
            let result = self.store.put_message(committed).await;
            match result.status {
                PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout => {
                    if let Some(append) = &result.append {
                        self.stats.topic_put_nums.count(&topic, append.msg_num as u64);
                    }
                    self.metrics.transaction_ended(&topic, true);
                    self.half_messages.ended(&topic);
                    self.metrics.transaction_finished(&topic, half_age_s(&half));
                }
                status => {
                    warn!(topic = %topic, ?status, remark = ?result.remark, "committed message not stored");
                    return Err(ServiceError::System(
                        result.remark.unwrap_or_else(|| format!("store the committed message failed: {status:?}")),
                    ));
                }
            }
        }
        if h.decision == TransactionDecision::Rollback {
            let topic = half.property(keys::REAL_TOPIC).unwrap_or(half.topic.as_str()).to_owned();
            self.metrics.transaction_ended(&topic, false);
            self.half_messages.ended(&topic);
            self.metrics.transaction_finished(&topic, half_age_s(&half));
        }
        self.mark_half_done(half.queue_id, half.queue_offset).await;
        Ok(TransactionEnded::Decided)
    }

    /// Whether an END_TRANSACTION not answering a check comes after the half message's
    /// CHECK_IMMUNITY_TIME_IN_SECONDS (at least `transactionTimeOut`) has passed since it was
    /// born. Java: `EndTransactionProcessor#rejectCommitOrRollback`.
    fn past_check_immunity(&self, h: &EndTransactionRequest, half: &StoredMessage) -> bool {
        if h.from_transaction_check {
            return false;
        }
        let Some(immunity) = MessageProperties::decode(&half.properties)
            .get(keys::CHECK_IMMUNITY_TIME_IN_SECONDS)
            .map(|s| check_immunity_ms(s, self.config.transaction_time_out))
        else {
            return false;
        };
        crate::stats::clock_ms() as i64 - half.born_timestamp_ms > immunity
    }

    /// The half message the request names, checked as Java's `checkPrepareMessage` does.
    fn find_half_message(&self, h: &EndTransactionRequest) -> Result<StoredMessage, String> {
        let bytes = self
            .store
            .look_message_by_offset(h.commit_log_offset)
            .ok_or_else(|| "Find prepared transaction message failed".to_owned())?;
        let (half, _) = StoredMessage::decode_shared(&bytes)
            .map_err(|e| format!("Find prepared transaction message failed: {e}"))?;
        if half.topic != crate::metadata::RMQ_SYS_TRANS_HALF_TOPIC {
            return Err("Find prepared transaction message failed: not a half message".into());
        }
        if half.property(keys::PGROUP) != Some(h.producer_group.as_str()) {
            return Err("The producer group wrong".into());
        }
        if half.queue_offset != h.tran_state_table_offset {
            return Err("The transaction state table offset wrong".into());
        }
        if half.physical_offset != h.commit_log_offset {
            return Err("The commit log offset wrong".into());
        }
        Ok(half)
    }
}

/// The committed copy: real topic and queue, system flag COMMIT, PREPARED TRANSACTION OFFSET =
/// the half message's CommitLog offset; a delivery time or DELAY level still applies (the
/// commit passes through the timer or the schedule). The half message's properties are stored
/// as Java stores them (it clears REAL_TOPIC, REAL_QID and TRAN_MSG after building the stored
/// properties): REAL_TOPIC, REAL_QID, TRAN_MSG=true (from which a Java consumer takes the
/// transaction id), PGROUP, and WAIT as the producer sent it, which the put honours (a commit
/// waits for its flush, as in Java). Java: `EndTransactionProcessor#endMessageTransaction`.
fn committed_message(broker: &Broker, half: &StoredMessage, half_offset: i64) -> Result<StoredMessage, HookRefusal> {
    let mut props = MessageProperties::decode(&half.properties);
    let mut topic = props.get(keys::REAL_TOPIC).map_or_else(|| half.topic.clone(), str::to_owned);
    let mut queue_id: i32 = props.get(keys::REAL_QID).and_then(|q| q.trim().parse().ok()).unwrap_or(0);
    broker.route_delivery_time(&mut topic, &mut queue_id, &mut props)?;
    Ok(StoredMessage {
        sys_flag: sysflag::with_transaction_value(half.sys_flag, sysflag::TRANSACTION_COMMIT_TYPE),
        prepared_transaction_offset: half_offset,
        ..broker.stored_copy(half, topic, queue_id, &props)
    })
}

/// Seconds since a half message was stored (`rocketmq_finish_message_latency`).
fn half_age_s(half: &StoredMessage) -> u64 {
    u64::try_from((crate::broker::now_ms() - half.store_timestamp_ms).max(0) / 1000).unwrap_or(0)
}
