//! `TransactionProducer`: sends half messages and ends them by the application's local
//! transaction. A half message is stored by the broker where no consumer sees it; after the
//! local transaction the producer sends END_TRANSACTION (oneway) to commit it (it then
//! reaches its topic) or roll it back. When the outcome is unknown, the broker later asks a
//! producer of the group (CHECK_TRANSACTION_STATE) and the listener's check answers.
//! Java: `TransactionMQProducer`, `DefaultMQProducerImpl#sendMessageInTransaction` /
//! `#endTransaction` / `#checkTransactionState`, `TransactionListener`.
//!
//! Check-backs arrive through `broker_requests`, which queues them (bounded) for this
//! producer's worker; the worker calls the listener and answers on the connection the check
//! came on. Plain sends go through the inner [`Producer`].

use std::any::Any;
use std::sync::{Arc, Mutex};

use ferromq_protocol::header::EndTransactionRequestHeader;
use ferromq_protocol::message::{decode_offset_msg_id, keys, sysflag};
use ferromq_protocol::{request_code, RemotingCommand};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::broker_requests::TransactionCheck;
use crate::client_instance::{lock, ClientConfig, ClientInstance};
use crate::error::ClientError;
use crate::message::Message;
use crate::message_ext::MessageExt;
use crate::producer::{Producer, ProducerConfig};
use crate::send_result::{SendResult, SendStatus};
use crate::validators::check_message;

/// The outcome of a local transaction. Java: `LocalTransactionState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LocalTransactionState {
    /// Committed: the half message is delivered to its topic (`COMMIT_MESSAGE`).
    CommitMessage,
    /// Rolled back: the half message is dropped (`ROLLBACK_MESSAGE`).
    RollbackMessage,
    /// Not known yet: the broker checks back later (`UNKNOW`).
    Unknown,
}

impl LocalTransactionState {
    /// Java's constant name (`COMMIT_MESSAGE`, `ROLLBACK_MESSAGE`, `UNKNOW`), as trace records
    /// carry it.
    pub fn java_name(self) -> &'static str {
        match self {
            LocalTransactionState::CommitMessage => "COMMIT_MESSAGE",
            LocalTransactionState::RollbackMessage => "ROLLBACK_MESSAGE",
            LocalTransactionState::Unknown => "UNKNOW",
        }
    }

    /// The END_TRANSACTION `commitOrRollback` value: the MessageSysFlag transaction type.
    fn commit_or_rollback(self) -> i32 {
        match self {
            LocalTransactionState::CommitMessage => sysflag::TRANSACTION_COMMIT_TYPE,
            LocalTransactionState::RollbackMessage => sysflag::TRANSACTION_ROLLBACK_TYPE,
            LocalTransactionState::Unknown => sysflag::TRANSACTION_NOT_TYPE,
        }
    }
}

/// The application's side of transactional messages. Java: `TransactionListener`.
///
/// Both methods run on tokio's blocking pool, so they may block (on a database, say). A panic
/// counts as [`LocalTransactionState::Unknown`]: the broker checks back later.
pub trait TransactionListener: Send + Sync + 'static {
    /// What [`TransactionProducer::send_message_in_transaction`] passes through to
    /// [`execute_local_transaction`](Self::execute_local_transaction) (Java's `Object arg`);
    /// `()` when there is nothing to pass.
    type Arg: Send + 'static;

    /// Runs the local transaction of a half message the broker has stored. `msg` carries the
    /// `UNIQ_KEY` and `__transactionId__` the broker knows it by.
    fn execute_local_transaction(&self, msg: &Message, arg: &Self::Arg) -> LocalTransactionState;

    /// Tells the outcome of the local transaction of a half message the broker asks about:
    /// `msg` has its real topic and queue, and `TRANSACTION_CHECK_TIMES` counts the checks.
    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState;
}

/// The outcome of [`TransactionProducer::send_message_in_transaction`].
/// Java: `TransactionSendResult`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionSendResult {
    /// How the half message was stored.
    pub send_result: SendResult,
    /// What the local transaction decided (rollback when the half message was stored but not
    /// durably).
    pub local_transaction_state: LocalTransactionState,
}

/// Limits of the check-back worker. Java: `TransactionMQProducer`'s check pool settings.
#[derive(Debug, Clone)]
pub struct TransactionCheckConfig {
    /// Listener checks running at once (`checkThreadPoolMinSize` / `MaxSize`, 1).
    pub check_thread_pool_size: usize,
    /// Checks waiting for the worker; more are dropped with a warning, and the broker asks
    /// again on a later run (`checkRequestHoldMax`, 2000).
    pub check_request_hold_max: usize,
}

impl Default for TransactionCheckConfig {
    fn default() -> Self {
        TransactionCheckConfig { check_thread_pool_size: 1, check_request_hold_max: 2_000 }
    }
}

/// A producer of transactional messages. Create, [`start`](Self::start),
/// [`send_message_in_transaction`](Self::send_message_in_transaction),
/// [`shutdown`](Self::shutdown). Plain messages go through [`producer`](Self::producer).
pub struct TransactionProducer<L: TransactionListener> {
    producer: Producer,
    listener: Arc<L>,
    check_config: TransactionCheckConfig,
    /// The check-back worker, while started.
    worker: Mutex<JoinSet<()>>,
}

impl<L: TransactionListener> std::fmt::Debug for TransactionProducer<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionProducer")
            .field("producer", &self.producer)
            .field("check_config", &self.check_config)
            .finish_non_exhaustive()
    }
}

impl<L: TransactionListener> TransactionProducer<L> {
    /// A transactional producer with its own client instance.
    pub fn new(config: ProducerConfig, client: ClientConfig, listener: Arc<L>) -> Self {
        Self::from_producer(Producer::new(config, client), listener)
    }

    /// A transactional producer sharing `instance` with other clients.
    pub fn with_instance(config: ProducerConfig, instance: Arc<ClientInstance>, listener: Arc<L>) -> Self {
        Self::from_producer(Producer::with_instance(config, instance), listener)
    }

    fn from_producer(producer: Producer, listener: Arc<L>) -> Self {
        TransactionProducer {
            producer,
            listener,
            check_config: TransactionCheckConfig::default(),
            worker: Mutex::new(JoinSet::new()),
        }
    }

    /// Replaces the check-back limits; takes effect at [`start`](Self::start).
    pub fn with_check_config(mut self, check_config: TransactionCheckConfig) -> Self {
        self.check_config = check_config;
        self
    }

    /// The inner producer, for plain sends.
    pub fn producer(&self) -> &Producer {
        &self.producer
    }

    /// The listener.
    pub fn listener(&self) -> &Arc<L> {
        &self.listener
    }

    /// Starts the check-back worker, registers the group and starts heartbeats (a broker
    /// checks back only with producers whose heartbeat it has).
    ///
    /// # Errors
    /// [`ClientError::Validation`] if the group is already registered in the instance.
    pub async fn start(&self) -> Result<(), ClientError> {
        let group = self.producer.config().group.clone();
        let instance = self.producer.instance().clone();
        let (queue_tx, queue_rx) = mpsc::channel(self.check_config.check_request_hold_max.max(1));
        if !instance.register_transaction_checks(&group, queue_tx) {
            return Err(ClientError::Validation {
                topic: String::new(),
                reason: format!("The producer group[{group}] has been created before"),
            });
        }
        if let Err(e) = self.producer.start().await {
            instance.unregister_transaction_checks(&group);
            return Err(e);
        }
        let threads = self.check_config.check_thread_pool_size.max(1);
        let tracer = self.producer.tracer().cloned();
        let worker = check_worker(self.listener.clone(), instance, group.clone(), queue_rx, (threads, tracer));
        lock(&self.worker).spawn(worker);
        info!(producer_group = %group, "transaction producer started");
        Ok(())
    }

    /// Stops answering check-backs (one in progress is abandoned; the broker asks again),
    /// then shuts the producer down.
    pub async fn shutdown(&self) {
        let group = &self.producer.config().group;
        self.producer.instance().unregister_transaction_checks(group);
        let mut worker = std::mem::take(&mut *lock(&self.worker));
        worker.shutdown().await;
        self.producer.shutdown().await;
    }

    /// Sends `msg` as a half message (synchronously, with the producer's retries), runs the
    /// local transaction with `arg` once the broker stored it, and ends the transaction with
    /// the outcome (END_TRANSACTION, oneway; a failure to send it is only logged, the broker's
    /// check-back covers it). A delay level on `msg` is ignored, as Java ignores it.
    ///
    /// Stored but not durably (flush or slave timeouts): the local transaction does not run
    /// and the half message is rolled back.
    ///
    /// # Errors
    /// As [`Producer::send`]; nothing is ended then, and the local transaction does not run.
    pub async fn send_message_in_transaction(
        &self,
        mut msg: Message,
        arg: L::Arg,
    ) -> Result<TransactionSendResult, ClientError> {
        msg.properties.remove(keys::DELAY);
        check_message(&msg, self.producer.config().max_message_size)?;
        msg.properties.insert(keys::TRAN_MSG, "true");
        msg.properties.insert(keys::PGROUP, self.producer.config().group.clone());
        self.producer.ensure_uniq_key(&mut msg);
        let sent = self.producer.send(msg.clone()).await?;
        let (state, remark) = match sent.status {
            SendStatus::SendOk => {
                if let Some(id) = &sent.transaction_id {
                    msg.properties.insert(keys::TRANSACTION_ID, id.clone());
                }
                let listener = self.listener.clone();
                let local = msg.clone();
                let (state, panic) = run_listener(move || listener.execute_local_transaction(&local, &arg)).await;
                if state != LocalTransactionState::CommitMessage {
                    info!(topic = %msg.topic, msg_id = %sent.msg_id, ?state, panicked = panic.is_some(),
                        "local transaction not committed");
                }
                (state, panic.map(|p| format!("executeLocalTransactionBranch panicked: {p}")))
            }
            _ => (LocalTransactionState::RollbackMessage, None),
        };
        if let Err(e) = self.end_transaction(&msg, &sent, state, remark).await {
            warn!(topic = %msg.topic, msg_id = %sent.msg_id, ?state, error = %e,
                "local transaction done but END_TRANSACTION not sent; the broker will check back");
        }
        Ok(TransactionSendResult { send_result: sent, local_transaction_state: state })
    }

    /// END_TRANSACTION (oneway) of a half message just sent, to the master of the broker
    /// that stored it. Java: `DefaultMQProducerImpl#endTransaction`.
    async fn end_transaction(
        &self,
        msg: &Message,
        sent: &SendResult,
        state: LocalTransactionState,
        remark: Option<String>,
    ) -> Result<(), ClientError> {
        let id = if sent.offset_msg_id.is_empty() { &sent.msg_id } else { &sent.offset_msg_id };
        let (_, commit_log_offset) =
            decode_offset_msg_id(id).map_err(|source| ClientError::BadMessage { topic: msg.topic.clone(), source })?;
        let broker_name = &sent.message_queue.broker_name;
        let instance = self.producer.instance();
        let addr = instance.master_addr(broker_name).ok_or_else(|| ClientError::BrokerNotFound {
            topic: msg.topic.clone(),
            broker_name: broker_name.clone(),
        })?;
        let header = EndTransactionRequestHeader {
            topic: Some(msg.topic.clone()),
            producer_group: self.producer.config().group.clone(),
            tran_state_table_offset: sent.queue_offset,
            commit_log_offset,
            commit_or_rollback: state.commit_or_rollback(),
            from_transaction_check: Some(false),
            msg_id: sent.msg_id.clone(),
            transaction_id: sent.transaction_id.clone(),
            broker_name: Some(broker_name.clone()),
        };
        let mut req = RemotingCommand::request(request_code::END_TRANSACTION).with_header(&header).into_oneway();
        req.remark = remark;
        debug!(topic = %msg.topic, remote_addr = %addr, physical_offset = commit_log_offset, ?state, "ending transaction");
        let at = std::time::SystemTime::now();
        instance.remoting().invoke_oneway(&addr, req).await.map_err(|source| ClientError::Remoting {
            topic: msg.topic.clone(),
            addr: addr.clone(),
            source,
        })?;
        if let Some(tracer) = self.producer.tracer() {
            let ended = Ended {
                group: &self.producer.config().group,
                topic: &msg.topic,
                msg_id: &sent.msg_id,
                store_host: &addr,
                transaction_id: sent.transaction_id.as_deref().unwrap_or_default(),
                state,
                from_check: false,
            };
            tracer.append(ended.trace(at, &sent.region_id, msg.tags(), msg.keys()));
        }
        Ok(())
    }
}

/// An END_TRANSACTION sent, as its trace record tells it.
struct Ended<'a> {
    group: &'a str,
    topic: &'a str,
    msg_id: &'a str,
    store_host: &'a str,
    transaction_id: &'a str,
    state: LocalTransactionState,
    from_check: bool,
}

impl Ended<'_> {
    /// The `EndTransaction` trace record, sent at `at` (Java: `EndTransactionTraceHookImpl`,
    /// run once the request is sent, for the producer's own ends and for check-back answers).
    fn trace(
        &self,
        at: std::time::SystemTime,
        region_id: &str,
        tags: Option<&str>,
        keys: Option<&str>,
    ) -> ferromq_protocol::trace::TraceRecord {
        ferromq_protocol::trace::TraceRecord::EndTransaction(ferromq_protocol::trace::EndTransaction {
            timestamp: at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64),
            region_id: region_id.to_owned(),
            group: self.group.to_owned(),
            topic: self.topic.to_owned(),
            msg_id: self.msg_id.to_owned(),
            tags: tags.map(str::to_owned),
            keys: keys.map(str::to_owned),
            store_host: self.store_host.to_owned(),
            msg_type: ferromq_protocol::trace::msg_type::TRANS_COMMIT,
            transaction_id: self.transaction_id.to_owned(),
            transaction_state: self.state.java_name().to_owned(),
            from_transaction_check: self.from_check,
        })
    }
}

/// Takes the queued check-backs of `group` and answers each with at most `threads` listener
/// calls at once, until the queue closes (the producer unregistered) or the task is aborted.
async fn check_worker<L: TransactionListener>(
    listener: Arc<L>,
    instance: Arc<ClientInstance>,
    group: String,
    mut queue: mpsc::Receiver<TransactionCheck>,
    (threads, tracer): (usize, Option<Arc<crate::trace::TraceDispatcher>>),
) {
    let permits = Arc::new(Semaphore::new(threads));
    let mut running = JoinSet::new();
    while let Some(check) = queue.recv().await {
        let Ok(permit) = permits.clone().acquire_owned().await else { break };
        while running.try_join_next().is_some() {}
        let answer = answer_check(listener.clone(), instance.clone(), group.clone(), check, tracer.clone());
        running.spawn(async move {
            answer.await;
            drop(permit);
        });
    }
    while running.join_next().await.is_some() {}
}

/// Asks the listener about a checked half message and answers END_TRANSACTION (oneway,
/// `fromTransactionCheck`) on the connection the check came on, or, if that closed meanwhile,
/// through the instance to the same address. Java: the check `Runnable` of
/// `DefaultMQProducerImpl#checkTransactionState`.
async fn answer_check<L: TransactionListener>(
    listener: Arc<L>,
    instance: Arc<ClientInstance>,
    group: String,
    check: TransactionCheck,
    tracer: Option<Arc<crate::trace::TraceDispatcher>>,
) {
    let TransactionCheck { conn, header, msg } = check;
    let msg_id = msg.property(keys::UNIQ_KEY).map_or_else(|| msg.stored.offset_msg_id(), str::to_owned);
    let check_times = msg.property(keys::TRANSACTION_CHECK_TIMES).map(str::to_owned);
    // What the trace record needs of the message, taken before the listener has it.
    let traced = tracer.as_ref().map(|_| {
        let prop = |k| msg.property(k).map(str::to_owned);
        (msg.topic().to_owned(), prop(keys::MSG_REGION), prop(keys::TAGS), prop(keys::KEYS))
    });
    let (state, panic) = run_listener(move || listener.check_local_transaction(&msg)).await;
    let end = EndTransactionRequestHeader {
        topic: header.topic,
        producer_group: group.clone(),
        tran_state_table_offset: header.tran_state_table_offset,
        commit_log_offset: header.commit_log_offset,
        commit_or_rollback: state.commit_or_rollback(),
        from_transaction_check: Some(true),
        msg_id,
        transaction_id: header.transaction_id,
        broker_name: header.broker_name,
    };
    let remote_addr = conn.remote_addr();
    debug!(producer_group = %group, %remote_addr, physical_offset = end.commit_log_offset, ?state,
        check_times = ?check_times, "transaction check answered");
    let mut req = RemotingCommand::request(request_code::END_TRANSACTION).with_header(&end).into_oneway();
    req.remark = panic.map(|p| format!("checkLocalTransactionState panicked: {p}"));
    let at = std::time::SystemTime::now();
    let addr = remote_addr.to_string();
    if conn.invoke_oneway(req.clone()).await.is_err() {
        if let Err(e) = instance.remoting().invoke_oneway(&addr, req).await {
            warn!(producer_group = %group, remote_addr = %addr, error = %e,
                "END_TRANSACTION of a check not sent; the broker will check again");
            return;
        }
    }
    if let (Some(tracer), Some((topic, region, tags, keys))) = (tracer, traced) {
        let ended = Ended {
            group: &group,
            topic: &topic,
            msg_id: &end.msg_id,
            store_host: &addr,
            transaction_id: end.transaction_id.as_deref().unwrap_or_default(),
            state,
            from_check: true,
        };
        let region = region.as_deref().unwrap_or(crate::trace::DEFAULT_REGION);
        tracer.append(ended.trace(at, region, tags.as_deref(), keys.as_deref()));
    }
}

/// Runs a listener call on the blocking pool; a panic gives [`LocalTransactionState::Unknown`]
/// and its message.
async fn run_listener<F>(call: F) -> (LocalTransactionState, Option<String>)
where
    F: FnOnce() -> LocalTransactionState + Send + 'static,
{
    match tokio::task::spawn_blocking(call).await {
        Ok(state) => (state, None),
        Err(e) => {
            let reason = if e.is_panic() { panic_text(e.into_panic()) } else { "cancelled".to_owned() };
            warn!(error = %reason, "transaction listener panicked; the state is unknown");
            (LocalTransactionState::Unknown, Some(reason))
        }
    }
}

fn panic_text(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => {
            payload.downcast_ref::<&str>().map_or_else(|| "a non-text panic".to_owned(), |s| (*s).to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_map_to_java_commit_or_rollback_values() {
        assert_eq!(LocalTransactionState::CommitMessage.commit_or_rollback(), 8);
        assert_eq!(LocalTransactionState::RollbackMessage.commit_or_rollback(), 12);
        assert_eq!(LocalTransactionState::Unknown.commit_or_rollback(), 0);
    }

    #[tokio::test]
    async fn a_panicking_listener_counts_as_unknown() {
        let (state, panic) = run_listener(|| panic!("db down")).await;
        assert_eq!(state, LocalTransactionState::Unknown);
        assert_eq!(panic.as_deref(), Some("db down"));
        let (state, panic) = run_listener(|| LocalTransactionState::CommitMessage).await;
        assert_eq!((state, panic), (LocalTransactionState::CommitMessage, None));
        let owned = String::from("owned");
        let (_, panic) = run_listener(move || panic!("{owned}")).await;
        assert_eq!(panic.as_deref(), Some("owned"));
    }
}
