//! The check-back service: every `transactionCheckInterval` it walks each half queue from the
//! offset recorded for `CID_RMQ_SYS_TRANS`, skipping half messages that an op message marks
//! done. An undecided one older than `transactionTimeOut` (or its own
//! CHECK_IMMUNITY_TIME_IN_SECONDS) is appended again to the half queue with
//! TRANSACTION_CHECK_TIMES + 1, so the walk can move past it, and CHECK_TRANSACTION_STATE is
//! sent to a live producer of its group naming the new copy. One still within its
//! CHECK_IMMUNITY_TIME_IN_SECONDS is appended again without asking, which counts as a check
//! too (as in Java). After `transactionCheckMax` checks, or once older than the file
//! retention time, it goes to
//! `TRANS_CHECK_MAX_TIME_TOPIC` instead. Java: `TransactionalMessageServiceImpl#check`,
//! `AbstractTransactionalMessageCheckListener`, `DefaultTransactionalMessageCheckListener`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ferromq_protocol::body::perm;
use ferromq_protocol::header::CheckTransactionStateRequestHeader;
use ferromq_protocol::message::{create_offset_msg_id, keys, MessageProperties, StoredMessage};
use ferromq_protocol::{request_code, LanguageCode, RemotingCommand};
use ferromq_store::PutMessageStatus;
use tracing::{debug, info, warn};

use crate::broker::{now_ms, Broker};
use crate::metadata::{RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC};
use crate::transaction::{check_immunity_ms, parse_op_body, CID_RMQ_SYS_TRANS};

/// Longest one run may take (Java: `MAX_PROCESS_TIME_LIMIT`).
const MAX_RUN_TIME_MS: i64 = 60_000;
/// Units read at a time from a half or op queue.
const UNITS_PER_READ: usize = 32;

/// Runs the check every `transactionCheckInterval` until the broker stops (masters only).
pub(crate) async fn run(broker: Arc<Broker>) {
    let every = Duration::from_millis(broker.config.transaction_check_interval.max(100));
    loop {
        tokio::time::sleep(every).await;
        broker.check_transactions().await;
    }
}

/// What one walk of a half queue learned from the op queue.
#[derive(Default)]
struct OpState {
    /// Half offsets at or above the walk's start that are done -> the op unit saying so.
    removed: HashMap<i64, i64>,
    /// Every half offset any op read so far names (also below the start), for copies put
    /// back during their immunity time, which carry their original offset.
    all_done: HashSet<i64>,
    /// Op unit -> half offsets it names that the walk has not passed yet.
    pending_per_op: HashMap<i64, usize>,
    /// Op units fully behind the walk.
    done_ops: BTreeSet<i64>,
    /// Next op unit to read.
    next_op: i64,
    /// The op queue's end has been reached.
    exhausted: bool,
}

impl Broker {
    /// One run over every half queue.
    pub(crate) async fn check_transactions(&self) {
        let Some(half_topic) = self.topics().select(RMQ_SYS_TRANS_HALF_TOPIC) else { return };
        for queue_id in 0..half_topic.read_queue_nums.max(1) {
            self.check_half_queue(queue_id).await;
        }
    }

    async fn check_half_queue(&self, queue_id: i32) {
        let store = &self.store;
        let started = now_ms();
        let half_min = store.min_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, queue_id);
        let half_start = self
            .offsets()
            .query_offset(CID_RMQ_SYS_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, queue_id)
            .unwrap_or(half_min)
            .max(half_min);
        let op_min = store.min_offset_in_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id);
        let op_start = self
            .offsets()
            .query_offset(CID_RMQ_SYS_TRANS, RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id)
            .unwrap_or(op_min)
            .max(op_min);
        let mut ops = OpState { next_op: op_start, ..OpState::default() };
        self.read_ops(queue_id, half_start, &mut ops);

        let timeout = self.config.transaction_time_out;
        let retention_ms =
            i64::try_from(store.config().file_reserved_time_hours).unwrap_or(i64::MAX / 3_600_000) * 3_600_000;
        let mut offset = half_start;
        let (mut checked, mut discarded) = (0u32, 0u32);
        'walk: while now_ms() - started < MAX_RUN_TIME_MS {
            if let Some(op) = ops.removed.remove(&offset) {
                ops.passed(op);
                offset += 1;
                continue;
            }
            let Some(unit) = store.consume_queue_units(RMQ_SYS_TRANS_HALF_TOPIC, queue_id, offset, 1).pop() else {
                break;
            };
            let Some(mut half) = store
                .look_message_by_offset(unit.commit_log_offset)
                .and_then(|b| StoredMessage::decode_shared(&b).ok().map(|(m, _)| m))
            else {
                // Gone with retention: nothing to decide.
                offset += 1;
                continue;
            };
            let mut props = MessageProperties::decode(&half.properties);
            let check_times: i32 = props.get(keys::TRANSACTION_CHECK_TIMES).and_then(|t| t.parse().ok()).unwrap_or(0);
            let age = now_ms() - half.born_timestamp_ms;
            if check_times >= self.config.transaction_check_max || age > retention_ms {
                self.discard(&half).await;
                discarded += 1;
                offset += 1;
                continue;
            }
            if half.store_timestamp_ms >= started {
                break; // stored during this run: the next run looks at it
            }
            let immunity = props.get(keys::CHECK_IMMUNITY_TIME_IN_SECONDS).map(|s| check_immunity_ms(s, timeout));
            match immunity {
                Some(immunity) if age < immunity => {
                    // A producer asked for more time: keep the message behind the walk without
                    // asking, remembering its original offset (its end names that one).
                    let original = props.get(keys::TRAN_PREPARED_QUEUE_OFFSET).and_then(|o| o.parse::<i64>().ok());
                    if original.is_some_and(|o| ops.all_done.contains(&o)) {
                        offset += 1;
                        continue;
                    }
                    if original.is_none() {
                        props.insert(keys::TRAN_PREPARED_QUEUE_OFFSET, half.queue_offset.to_string());
                    }
                    // A put-back counts as a check even without asking (Java counts it before
                    // it looks at the immunity), so transactionCheckMax bounds the waiting too.
                    props.insert(keys::TRANSACTION_CHECK_TIMES, (check_times + 1).to_string());
                    if self.put_back(&half, &props).await.is_none() {
                        break;
                    }
                    offset += 1;
                    continue;
                }
                Some(_) => {}
                None if (0..timeout).contains(&age) => break, // later ones are younger still
                None => {}
            }
            // Undecided as far as the ops read so far tell: read further (including ops
            // written since the last read) before asking.
            ops.exhausted = false;
            while !ops.exhausted {
                self.read_ops(queue_id, half_start, &mut ops);
                if let Some(op) = ops.removed.remove(&offset) {
                    ops.passed(op);
                    offset += 1;
                    continue 'walk;
                }
            }
            props.insert(keys::TRANSACTION_CHECK_TIMES, (check_times + 1).to_string());
            let Some((new_queue_offset, new_physical)) = self.put_back(&half, &props).await else { break };
            half.queue_offset = new_queue_offset;
            half.physical_offset = new_physical;
            half.properties = props.encode();
            self.send_check(half).await;
            checked += 1;
            offset += 1;
        }
        if offset != half_start {
            self.offsets().commit_offset("", CID_RMQ_SYS_TRANS, RMQ_SYS_TRANS_HALF_TOPIC, queue_id, offset);
        }
        let op_next = ops.committable(op_start);
        if op_next != op_start {
            self.offsets().commit_offset("", CID_RMQ_SYS_TRANS, RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, op_next);
        }
        if checked + discarded > 0 || offset != half_start {
            info!(queue_id, from = half_start, to = offset, checked, discarded, "transaction check run");
        }
    }

    /// Reads the next op units of `queue_id` into `ops`.
    fn read_ops(&self, queue_id: i32, half_start: i64, ops: &mut OpState) {
        let units = self.store.consume_queue_units(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, ops.next_op, UNITS_PER_READ);
        if units.is_empty() {
            ops.exhausted = true;
            return;
        }
        for unit in units {
            ops.next_op = unit.queue_offset + 1;
            let Some(op) = self
                .store
                .look_message_by_offset(unit.commit_log_offset)
                .and_then(|b| StoredMessage::decode_shared(&b).ok().map(|(m, _)| m))
            else {
                ops.done_ops.insert(unit.queue_offset);
                continue;
            };
            let mut ahead = 0;
            for half_offset in parse_op_body(&op.body) {
                ops.all_done.insert(half_offset);
                if half_offset >= half_start {
                    ops.removed.insert(half_offset, unit.queue_offset);
                    ahead += 1;
                }
            }
            if ahead == 0 {
                ops.done_ops.insert(unit.queue_offset);
            } else {
                ops.pending_per_op.insert(unit.queue_offset, ahead);
            }
        }
    }

    /// Appends `half` again to its half queue with `props`; returns its new queue and
    /// CommitLog offsets. Java: `putBackHalfMsgQueue`.
    async fn put_back(&self, half: &StoredMessage, props: &MessageProperties) -> Option<(i64, i64)> {
        let mut props = props.clone();
        props.insert(keys::WAIT, "false");
        let copy = self.stored_copy(half, half.topic.clone(), half.queue_id, &props);
        let result = self.store.put_message(copy).await;
        match (result.status, result.append) {
            (PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout, Some(append)) => {
                Some((append.logics_offset, append.wrote_offset))
            }
            (status, _) => {
                warn!(?status, remark = ?result.remark, "half message not put back; the check stops until the next run");
                None
            }
        }
    }

    /// CHECK_TRANSACTION_STATE (oneway) to one live producer of the message's group, naming
    /// the copy just put back. Java: `AbstractTransactionalMessageCheckListener#sendCheckMessage`.
    async fn send_check(&self, mut half: StoredMessage) {
        let Some(group) = half.property(keys::PGROUP).map(str::to_owned) else {
            warn!(physical_offset = half.physical_offset, "half message without a producer group; not checked");
            return;
        };
        let uniq = half.property(keys::UNIQ_KEY).map(str::to_owned);
        let header = CheckTransactionStateRequestHeader {
            // Java fills this before it turns the copy back into the producer's message: the
            // half topic's name.
            topic: Some(half.topic.clone()),
            tran_state_table_offset: half.queue_offset,
            commit_log_offset: half.physical_offset,
            msg_id: uniq.clone(),
            transaction_id: uniq,
            offset_msg_id: Some(create_offset_msg_id(half.store_host, half.physical_offset)),
            broker_name: Some(self.config.broker_name.clone()),
        };
        // The producer sees the message as it sent it: real topic and queue.
        if let Some(real) = half.property(keys::REAL_TOPIC).map(str::to_owned) {
            half.topic = real;
        }
        if let Some(q) = half.property(keys::REAL_QID).and_then(|q| q.trim().parse().ok()) {
            half.queue_id = q;
        }
        let body = match half.encode() {
            Ok(b) => b.freeze(),
            Err(e) => {
                warn!(error = %e, "half message not encodable for the check");
                return;
            }
        };
        let Some(conn) = self.producers.any_connection(&group) else {
            debug!(producer_group = %group, "no live producer to check a transaction with");
            return;
        };
        let mut req =
            RemotingCommand::request(request_code::CHECK_TRANSACTION_STATE).with_header(&header).with_body(body);
        // As Java's broker-to-client requests: older clients know no RUST language code.
        req.language = LanguageCode::Java;
        if let Err(e) = conn.invoke_oneway(req).await {
            warn!(producer_group = %group, remote_addr = %conn.remote_addr(), error = %e, "check-back not sent");
        }
    }

    /// Moves a half message checked too often (or too old) to TRANS_CHECK_MAX_TIME_TOPIC.
    /// Java: `DefaultTransactionalMessageCheckListener#resolveDiscardMsg`.
    async fn discard(&self, half: &StoredMessage) {
        let topic = RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC;
        match self.topics().create_topic_in_send_back(topic, 1, perm::PERM_WRITE | perm::PERM_READ, 0) {
            Ok(ensured) => {
                self.on_topic_ensured(&ensured);
            }
            Err(e) => warn!(error = %e, "TRANS_CHECK_MAX_TIME_TOPIC not created"),
        }
        let mut props = MessageProperties::decode(&half.properties);
        props.insert(keys::WAIT, "false");
        let msg = self.stored_copy(half, topic.to_owned(), 0, &props);
        let result = self.store.put_message(msg).await;
        if let Some(real_topic) = half.property(keys::REAL_TOPIC) {
            self.half_messages.ended(real_topic);
        }
        info!(real_topic = ?half.property(keys::REAL_TOPIC), uniq_key = ?half.property(keys::UNIQ_KEY), status = ?result.status, "half message discarded after too many checks");
    }
}

impl OpState {
    /// The walk moved past a half offset that op unit `op` named.
    fn passed(&mut self, op: i64) {
        if let Some(left) = self.pending_per_op.get_mut(&op) {
            *left -= 1;
            if *left == 0 {
                self.pending_per_op.remove(&op);
                self.done_ops.insert(op);
            }
        }
    }

    /// The op offset to record: past the longest run of fully-behind op units from `start`.
    fn committable(&self, start: i64) -> i64 {
        let mut next = start;
        while self.done_ops.contains(&next) {
            next += 1;
        }
        next
    }
}
