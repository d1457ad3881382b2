//! Group commit for acks. Every ACK_MESSAGE waits until its ack record is stored; acks that
//! arrive while records are being written are merged, per checkpoint, into one record (a
//! batch ack, tag `bAck`, when more than one) and stored together. Under load a pop's 32 acks
//! become a few records instead of 32, each still acknowledged to its client only once
//! stored; a lone ack is written at once, as before. (Java's answer is the in-memory checkpoint
//! buffer, `enablePopBufferMerge`, which can lose acks on a crash.)

use std::collections::BTreeMap;
use std::sync::Arc;

use ferromq_protocol::body::AckMsg;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::broker::Broker;
use crate::pop::checkpoint::RecordNotStored;

/// Acks waiting for the writer, at most.
pub(crate) const ACK_QUEUE_CAPACITY: usize = 100_000;
/// Acks taken into one round of writes, at most.
const ROUND_MAX: usize = 4_096;

/// One acknowledged offset waiting to be stored.
pub(crate) struct PendingAck {
    pub(crate) ack: AckMsg,
    pub(crate) revive_qid: i32,
    pub(crate) deliver_ms: i64,
    pub(crate) done: oneshot::Sender<Result<(), String>>,
}

/// The checkpoint an ack belongs to (what revive matches on), and where its record goes.
type CkKey = (i32, i64, String, String, i32, i64, i64, String);

fn key_of(p: &PendingAck) -> CkKey {
    let a = &p.ack;
    (
        p.revive_qid,
        p.deliver_ms,
        a.topic.clone().unwrap_or_default(),
        a.consumer_group.clone().unwrap_or_default(),
        a.queue_id,
        a.start_offset,
        a.pop_time,
        a.broker_name.clone().unwrap_or_default(),
    )
}

/// The sending side; cloned into the broker.
pub(crate) type AckSender = mpsc::Sender<PendingAck>;

/// The writer: takes what is queued, merges by checkpoint, stores the records concurrently,
/// answers every waiter. Ends when every sender is gone.
pub(crate) async fn run(broker: std::sync::Weak<Broker>, mut rx: mpsc::Receiver<PendingAck>) {
    while let Some(first) = rx.recv().await {
        let mut round = vec![first];
        while round.len() < ROUND_MAX {
            match rx.try_recv() {
                Ok(p) => round.push(p),
                Err(_) => break,
            }
        }
        let Some(b) = broker.upgrade() else { return };
        let mut groups: BTreeMap<CkKey, Vec<PendingAck>> = BTreeMap::new();
        for p in round {
            groups.entry(key_of(&p)).or_default().push(p);
        }
        let mut writes = JoinSet::new();
        for (_, pending) in groups {
            let b = b.clone();
            writes.spawn(async move { write_group(&b, pending).await });
        }
        while writes.join_next().await.is_some() {}
    }
}

async fn write_group(broker: &Arc<Broker>, pending: Vec<PendingAck>) {
    let first = &pending[0];
    let (revive_qid, deliver_ms) = (first.revive_qid, first.deliver_ms);
    let mut record = first.ack.clone();
    if pending.len() > 1 {
        let mut offsets: Vec<i64> = pending.iter().map(|p| p.ack.ack_offset).collect();
        offsets.sort_unstable();
        offsets.dedup();
        record.ack_offset = -1;
        record.ack_offset_list = Some(offsets);
    }
    let result = broker.put_ack(&record, revive_qid, deliver_ms).await.map_err(|RecordNotStored(e)| e);
    for p in pending {
        let _ = p.done.send(result.clone());
    }
}
