//! Op messages: "this half message is done" markers in `RMQ_SYS_TRANS_OP_HALF_TOPIC`, in the
//! same queue as the half message, tag `d`, body the half queue offsets comma-terminated
//! (5.x form). Ends of transactions are queued and written by one task, which takes whatever
//! accumulated while it was writing the previous batch: one op message per batch and half
//! queue (split at `transactionOpMsgMaxSize`), no added latency when idle. Java:
//! `TransactionalMessageServiceImpl#deletePrepareMessage`, `TransactionalOpBatchService`.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use ferromq_protocol::message::{keys, MessageProperties, StoredMessage};
use ferromq_store::PutMessageStatus;
use tokio::sync::Notify;
use tracing::warn;

use crate::broker::{now_ms, Broker};
use crate::metadata::RMQ_SYS_TRANS_OP_HALF_TOPIC;
use crate::transaction::{op_bodies, REMOVE_TAG};

/// Ends waiting to be written before further ends write their op message themselves.
const MAX_PENDING: usize = 100_000;

/// Ends of transactions not yet written as op messages.
#[derive(Debug, Default)]
pub(crate) struct OpQueue {
    /// (half queue id, half queue offset).
    pending: Mutex<Vec<(i32, i64)>>,
    wake: Notify,
}

impl OpQueue {
    /// Queues one end; false when the queue is full.
    fn push(&self, queue_id: i32, offset: i64) -> bool {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if pending.len() >= MAX_PENDING {
            return false;
        }
        pending.push((queue_id, offset));
        drop(pending);
        self.wake.notify_one();
        true
    }

    fn take(&self) -> Vec<(i32, i64)> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Broker {
    /// Marks the half message at `offset` of half queue `queue_id` done (committed or rolled
    /// back).
    pub(crate) async fn mark_half_done(&self, queue_id: i32, offset: i64) {
        if !self.tx_ops.push(queue_id, offset) {
            // The writer is behind: this end writes its own op message rather than queue more.
            self.write_ops(vec![(queue_id, offset)]).await;
        }
    }

    /// The op writer task: writes queued ends until the broker stops.
    pub(crate) async fn run_op_writer(&self) {
        loop {
            self.tx_ops.wake.notified().await;
            self.flush_transaction_ops().await;
        }
    }

    /// Writes every queued end now (also at shutdown).
    pub(crate) async fn flush_transaction_ops(&self) {
        let ends = self.tx_ops.take();
        if !ends.is_empty() {
            self.write_ops(ends).await;
        }
    }

    async fn write_ops(&self, ends: Vec<(i32, i64)>) {
        let mut by_queue: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
        for (queue_id, offset) in ends {
            by_queue.entry(queue_id).or_default().push(offset);
        }
        for (queue_id, offsets) in by_queue {
            for body in op_bodies(&offsets, self.config.transaction_op_msg_max_size.max(1)) {
                let mut props = MessageProperties::new();
                props.insert(keys::TAGS, REMOVE_TAG);
                props.insert(keys::WAIT, "false");
                props.insert(keys::UNIQ_KEY, self.uniq_ids.next_id());
                let op = StoredMessage {
                    topic: RMQ_SYS_TRANS_OP_HALF_TOPIC.to_owned(),
                    queue_id,
                    body: Bytes::from(body),
                    properties: props.encode(),
                    born_timestamp_ms: now_ms(),
                    born_host: self.store_host,
                    store_host: self.store_host,
                    ..StoredMessage::default()
                };
                let result = self.store.put_message(op).await;
                if !matches!(result.status, PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout) {
                    // The half messages stay undecided: the check service asks their producers
                    // again, who answer with the same decision.
                    warn!(queue_id, offsets = ?offsets, status = ?result.status, remark = ?result.remark, "op message not stored");
                }
            }
        }
    }
}
