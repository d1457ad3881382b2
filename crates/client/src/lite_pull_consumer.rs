//! `LitePullConsumer`: the application polls; background tasks pull every assigned queue into
//! a bounded buffer. Queues are assigned by hand ([`LitePullConsumer::assign`]) or shared out
//! among the group's consumers ([`LitePullConsumer::subscribe`], averagely, recomputed on a
//! timer and when a broker says the group changed). Offsets live on the broker.
//! Java: `DefaultLitePullConsumer` / `DefaultLitePullConsumerImpl`.
//! Offset resets and running-info requests from brokers are served in `control`.

mod control;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferromq_protocol::body::{
    ConsumeFromWhere, ConsumeType, ConsumerData, MessageModel, MessageQueue, SubscriptionData, SUB_ALL,
};
use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinSet};
use tracing::{debug, info, warn};

use crate::allocate::AllocateStrategy;
use crate::client_instance::{lock, ClientConfig, ClientInstance};
use crate::consumed_offset::{commit_unsaved, unsaved_offsets, ConsumedOffset};
use crate::consumer_calls::{log_pull_failure, Committed, ConsumerCalls, PullParams};
use crate::consumer_stats::epoch_ms;
use crate::error::ClientError;
use crate::message_ext::MessageExt;
use crate::pull_node::PullNodeTable;
use crate::subscription::{build_subscription, MessageSelector};

/// Messages buffered per queue before its pulls pause. Java: `pullThresholdForQueue`.
pub const PULL_THRESHOLD_FOR_QUEUE: usize = 1000;

/// Messages asked for per pull (`maxMsgNums`). Java's lite consumer asks for its
/// `pullBatchSize` (10); this is the push consumer's 32.
pub const PULL_BATCH_SIZE: i32 = 32;

/// Pause of a queue's pulls after a failure. Java: `PULL_TIME_DELAY_MILLS_ON_EXCEPTION`.
const PULL_DELAY_ON_EXCEPTION: Duration = Duration::from_secs(1);

/// Pause of a queue's pulls while its buffer is full. Java: `PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL`.
const PULL_DELAY_WHEN_FLOW_CONTROL: Duration = Duration::from_millis(50);

/// Lite pull consumer settings, with Java's defaults.
#[derive(Debug, Clone)]
pub struct LitePullConsumerConfig {
    /// Consumer group.
    pub group: String,
    /// Where a queue without a committed offset starts (`consumeFromWhere`, last offset).
    pub consume_from_where: ConsumeFromWhere,
    /// Start time for [`ConsumeFromWhere::ConsumeFromTimestamp`], ms since the epoch
    /// (Java `consumeTimestamp`, default half an hour ago).
    pub consume_timestamp_ms: i64,
    /// Commit consumed offsets on a timer (`autoCommit`, true).
    pub auto_commit: bool,
    /// The timer of auto-commit (`autoCommitIntervalMillis`, 5 s).
    pub auto_commit_interval: Duration,
    /// How often subscribe mode recomputes its queues (`rebalance` timer, 20 s).
    pub rebalance_interval: Duration,
    /// Messages asked for per pull (`maxMsgNums`, [`PULL_BATCH_SIZE`]).
    pub pull_batch_size: i32,
    /// Messages buffered per queue before pulls pause (`pullThresholdForQueue`, 1000).
    pub pull_threshold_for_queue: usize,
    /// How long the broker may hold a pull with no message (`brokerSuspendMaxTimeMillis`, 20 s).
    pub broker_suspend_max: Duration,
    /// Client-side timeout of a held pull (`consumerTimeoutMillisWhenSuspend`, 30 s).
    pub consumer_timeout_when_suspend: Duration,
    /// How subscribe mode shares a topic's queues among the group's clients
    /// (`allocateMessageQueueStrategy`, [`AllocateStrategy::Averagely`]).
    pub allocate_strategy: AllocateStrategy,
}

impl Default for LitePullConsumerConfig {
    fn default() -> Self {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        LitePullConsumerConfig {
            group: "DEFAULT_CONSUMER".to_owned(),
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            consume_timestamp_ms: now - 30 * 60 * 1000,
            auto_commit: true,
            auto_commit_interval: Duration::from_secs(5),
            rebalance_interval: Duration::from_secs(20),
            pull_batch_size: PULL_BATCH_SIZE,
            pull_threshold_for_queue: PULL_THRESHOLD_FOR_QUEUE,
            broker_suspend_max: Duration::from_secs(20),
            consumer_timeout_when_suspend: Duration::from_secs(30),
            allocate_strategy: AllocateStrategy::default(),
        }
    }
}

/// How queues are chosen.
#[derive(Debug, Clone)]
enum Mode {
    /// Nothing yet.
    Unset,
    /// By hand; everything in the queues is delivered.
    Assign,
    /// By rebalance of this topic; the subscription filters.
    Subscribe(SubscriptionData),
}

/// One assigned queue.
#[derive(Debug)]
struct QueueState {
    /// Changes on every (re)start of the queue's pull task; stale pulls are dropped.
    epoch: u64,
    /// Next offset to consume, once known, and whether it is committed.
    consumed: ConsumedOffset,
    /// Messages of the queue in the buffer.
    buffered: usize,
    /// The pull task; none before [`LitePullConsumer::start`].
    task: Option<AbortHandle>,
    /// When a pull of the queue last answered, ms since the epoch (at first, when assigned).
    last_pull_ms: i64,
    /// When the application last polled messages of the queue, ms since the epoch (at first,
    /// when assigned).
    last_consume_ms: i64,
}

impl QueueState {
    /// A queue with nothing consumed yet.
    fn new(epoch: u64, task: Option<AbortHandle>) -> Self {
        let now_ms = epoch_ms();
        QueueState {
            epoch,
            consumed: ConsumedOffset::default(),
            buffered: 0,
            task,
            last_pull_ms: now_ms,
            last_consume_ms: now_ms,
        }
    }
}

/// Messages of one pull.
#[derive(Debug)]
struct Batch {
    mq: MessageQueue,
    epoch: u64,
    msgs: Vec<MessageExt>,
}

#[derive(Debug)]
struct State {
    mode: Mode,
    queues: HashMap<MessageQueue, QueueState>,
    buffer: VecDeque<Batch>,
    next_epoch: u64,
}

#[derive(Debug)]
struct Inner {
    config: LitePullConsumerConfig,
    instance: Arc<ClientInstance>,
    owns_instance: bool,
    running: AtomicBool,
    state: Mutex<State>,
    /// Woken when a batch enters the buffer.
    arrived: Notify,
    /// Woken to rebalance now (NOTIFY_CONSUMER_IDS_CHANGED, subscribe).
    rebalance_now: Arc<Notify>,
    /// Auto-commit and rebalance timers.
    tasks: Mutex<JoinSet<()>>,
    /// The pull tasks of the queues.
    pulls: Mutex<JoinSet<()>>,
    /// When the consumer last started, ms since the epoch.
    start_ms: AtomicI64,
    /// Held while consumed offsets are committed, so a periodic commit of an old offset
    /// cannot land after an offset reset's commit.
    commits: tokio::sync::Mutex<()>,
    /// Which broker each queue is pulled from next.
    pull_nodes: PullNodeTable,
}

/// A consumer the application polls. Create, [`assign`](Self::assign) or
/// [`subscribe`](Self::subscribe), [`start`](Self::start), [`poll`](Self::poll),
/// [`shutdown`](Self::shutdown).
#[derive(Debug)]
pub struct LitePullConsumer {
    inner: Arc<Inner>,
}

impl LitePullConsumer {
    /// A consumer with its own client instance.
    pub fn new(config: LitePullConsumerConfig, client: ClientConfig) -> Self {
        Self::build(config, ClientInstance::new(client), true)
    }

    /// A consumer sharing `instance` with other clients.
    pub fn with_instance(config: LitePullConsumerConfig, instance: Arc<ClientInstance>) -> Self {
        Self::build(config, instance, false)
    }

    fn build(config: LitePullConsumerConfig, instance: Arc<ClientInstance>, owns_instance: bool) -> Self {
        let state = State { mode: Mode::Unset, queues: HashMap::new(), buffer: VecDeque::new(), next_epoch: 0 };
        LitePullConsumer {
            inner: Arc::new(Inner {
                config,
                instance,
                owns_instance,
                running: AtomicBool::new(false),
                state: Mutex::new(state),
                arrived: Notify::new(),
                rebalance_now: Arc::new(Notify::new()),
                tasks: Mutex::new(JoinSet::new()),
                pulls: Mutex::new(JoinSet::new()),
                start_ms: AtomicI64::new(0),
                commits: tokio::sync::Mutex::new(()),
                pull_nodes: PullNodeTable::default(),
            }),
        }
    }

    /// The settings.
    pub fn config(&self) -> &LitePullConsumerConfig {
        &self.inner.config
    }

    /// The shared client instance.
    pub fn instance(&self) -> &Arc<ClientInstance> {
        &self.inner.instance
    }

    /// Registers the group (heartbeats carry it from now on), starts the timers and, when
    /// queues are already chosen, their pulls.
    ///
    /// # Errors
    /// [`ClientError::IllegalState`] if running or the group is already registered in the
    /// instance; [`ClientError::Broker`] if the broker refuses a SQL92 subscription (see
    /// [`MessageSelector::sql`]).
    pub async fn start(&self) -> Result<(), ClientError> {
        let inner = &self.inner;
        if inner.running.load(Ordering::Acquire) {
            return Err(inner.illegal("the consumer is already started"));
        }
        if let Some(sub) = inner.subscription() {
            inner.calls().check_client_config(&sub).await?;
        }
        let control: Weak<Inner> = Arc::downgrade(inner);
        if !inner.instance.register_consumer(inner.consumer_data(), inner.rebalance_now.clone(), control) {
            return Err(inner.illegal("the consumer group has been created before"));
        }
        inner.start_ms.store(epoch_ms(), Ordering::Relaxed);
        inner.running.store(true, Ordering::Release);
        {
            let mut tasks = lock(&inner.tasks);
            if inner.config.auto_commit {
                tasks.spawn(auto_commit_loop(inner.clone()));
            }
            tasks.spawn(rebalance_loop(inner.clone()));
        }
        let topic = inner.subscribed_topic();
        if let Some(topic) = topic {
            // Routes give the brokers heartbeats go to. A topic whose route is not known yet
            // (just created, or not yet registered) is picked up by the rebalance loop, as in
            // Java and as the push consumer does.
            if let Err(e) = inner.instance.refresh_route(&topic).await {
                debug!(topic = %topic, error = %e, "no route yet");
            }
            inner.instance.heartbeat_all().await;
            inner.rebalance().await;
        } else {
            let queues: BTreeSet<MessageQueue> = lock(&inner.state).queues.keys().cloned().collect();
            for topic in queues.iter().map(|q| q.topic.clone()).collect::<BTreeSet<_>>() {
                if let Err(e) = inner.instance.refresh_route(&topic).await {
                    debug!(topic = %topic, error = %e, "no route yet");
                }
            }
            inner.instance.heartbeat_all().await;
            // Starts the tasks of queues assigned before start.
            inner.set_assignment(queues).await;
        }
        info!(consumer_group = %inner.config.group, "lite pull consumer started");
        Ok(())
    }

    /// Consumes exactly `queues`, with no rebalance. Replaces an earlier assignment.
    ///
    /// # Errors
    /// [`ClientError::IllegalState`] after [`subscribe`](Self::subscribe).
    pub async fn assign(&self, queues: Vec<MessageQueue>) -> Result<(), ClientError> {
        let inner = &self.inner;
        {
            let mut st = lock(&inner.state);
            if matches!(st.mode, Mode::Subscribe(_)) {
                return Err(inner.illegal("subscribe and assign are mutually exclusive"));
            }
            st.mode = Mode::Assign;
        }
        let queues: BTreeSet<MessageQueue> = queues.into_iter().collect();
        if inner.running.load(Ordering::Acquire) {
            for topic in queues.iter().map(|q| q.topic.clone()).collect::<BTreeSet<_>>() {
                if let Err(e) = inner.instance.refresh_route(&topic).await {
                    debug!(topic = %topic, error = %e, "no route yet");
                }
            }
            inner.instance.heartbeat_all().await;
            inner.set_assignment(queues).await;
        } else {
            // Recorded now, pulled from start.
            let mut st = lock(&inner.state);
            st.queues.clear();
            for mq in queues {
                st.queues.insert(mq, QueueState::new(0, None));
            }
        }
        Ok(())
    }

    /// Consumes `topic`'s messages that `selector` picks (a tag expression such as `*` or
    /// `TagA || TagB`, also given as a plain string, or [`MessageSelector::sql`]), sharing the
    /// queues with the group's other consumers.
    /// Java: `subscribe(String, String)` and `subscribe(String, MessageSelector)`.
    ///
    /// # Errors
    /// [`ClientError::IllegalState`] after [`assign`](Self::assign) or for a second topic;
    /// [`ClientError::Validation`] for a bad topic name or an empty SQL92 expression.
    pub async fn subscribe(&self, topic: &str, selector: impl Into<MessageSelector>) -> Result<(), ClientError> {
        crate::validators::check_topic(topic)?;
        let sub = selector.into().subscription(topic)?;
        let inner = &self.inner;
        {
            let mut st = lock(&inner.state);
            match &st.mode {
                Mode::Assign => return Err(inner.illegal("subscribe and assign are mutually exclusive")),
                Mode::Subscribe(s) if s.topic != topic => {
                    return Err(inner.illegal("this consumer subscribes to one topic"));
                }
                _ => {}
            }
            st.mode = Mode::Subscribe(sub);
        }
        if inner.running.load(Ordering::Acquire) {
            inner.instance.update_consumer(inner.consumer_data());
            inner.instance.refresh_route(topic).await?;
            inner.instance.heartbeat_all().await;
            inner.rebalance().await;
        }
        Ok(())
    }

    /// The queues currently consumed.
    pub fn assignment(&self) -> BTreeSet<MessageQueue> {
        lock(&self.inner.state).queues.keys().cloned().collect()
    }

    /// The messages of one pull, oldest first, waiting up to `timeout`; empty when none came.
    /// The queue's consumed offset moves past them.
    pub async fn poll(&self, timeout: Duration) -> Vec<MessageExt> {
        let inner = &self.inner;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(msgs) = inner.take_batch() {
                return msgs;
            }
            if !inner.running.load(Ordering::Acquire)
                || tokio::time::timeout_at(deadline, inner.arrived.notified()).await.is_err()
            {
                return inner.take_batch().unwrap_or_default();
            }
        }
    }

    /// Moves consumption of `mq` to `offset`: buffered messages of the queue are dropped and
    /// the next pulls start there. The offset becomes the queue's consumed offset.
    ///
    /// # Errors
    /// [`ClientError::IllegalState`] if `mq` is not assigned.
    pub fn seek(&self, mq: &MessageQueue, offset: i64) -> Result<(), ClientError> {
        if self.inner.seek(mq, offset) {
            return Ok(());
        }
        Err(self.inner.illegal(&format!("the message queue is not assigned: {mq:?}")))
    }

    /// The offset the broker keeps for `mq` in this group; `None` when it keeps none.
    /// Java: `committed`.
    ///
    /// # Errors
    /// Broker and transport errors.
    pub async fn committed(&self, mq: &MessageQueue) -> Result<Option<i64>, ClientError> {
        self.inner.query_offset(mq).await
    }

    /// Sends the consumed offset of every queue with progress to its broker.
    ///
    /// # Errors
    /// The first broker or transport error; the other queues are still tried.
    pub async fn commit_sync(&self) -> Result<(), ClientError> {
        self.inner.commit_all().await
    }

    /// Stops pulls and timers, commits, unregisters the group and, if the instance is this
    /// consumer's own, shuts it down.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        if inner.running.swap(false, Ordering::AcqRel) {
            let mut tasks = std::mem::take(&mut *lock(&inner.tasks));
            tasks.shutdown().await;
            let mut pulls = std::mem::take(&mut *lock(&inner.pulls));
            pulls.shutdown().await;
            if let Err(e) = inner.commit_all().await {
                warn!(consumer_group = %inner.config.group, error = %e, "commit at shutdown failed");
            }
            inner.instance.unregister_consumer(&inner.config.group).await;
            inner.arrived.notify_waiters();
            info!(consumer_group = %inner.config.group, "lite pull consumer stopped");
        }
        if inner.owns_instance {
            inner.instance.shutdown().await;
        }
    }
}

impl Inner {
    fn illegal(&self, reason: &str) -> ClientError {
        ClientError::IllegalState { group: self.config.group.clone(), reason: reason.to_owned() }
    }

    fn subscribed_topic(&self) -> Option<String> {
        match &lock(&self.state).mode {
            Mode::Subscribe(s) => Some(s.topic.clone()),
            _ => None,
        }
    }

    fn subscription(&self) -> Option<SubscriptionData> {
        match &lock(&self.state).mode {
            Mode::Subscribe(s) => Some(s.clone()),
            _ => None,
        }
    }

    fn consumer_data(&self) -> ConsumerData {
        ConsumerData {
            consume_from_where: self.config.consume_from_where,
            consume_type: ConsumeType::ConsumeActively,
            group_name: self.config.group.clone(),
            message_model: MessageModel::Clustering,
            subscription_data_set: self.subscription().into_iter().collect(),
            unit_mode: false,
        }
    }

    /// Moves consumption of `mq` to `offset` (see [`LitePullConsumer::seek`]); false if `mq`
    /// is not assigned.
    fn seek(self: &Arc<Self>, mq: &MessageQueue, offset: i64) -> bool {
        let mut st = lock(&self.state);
        if !st.queues.contains_key(mq) {
            return false;
        }
        st.buffer.retain(|b| &b.mq != mq);
        st.next_epoch += 1;
        let epoch = st.next_epoch;
        let task = self.running.load(Ordering::Acquire).then(|| spawn_pull(self, mq.clone(), epoch, Some(offset)));
        let q = st.queues.get_mut(mq).expect("checked above");
        if let Some(old) = std::mem::replace(&mut q.task, task) {
            old.abort();
        }
        q.epoch = epoch;
        q.buffered = 0;
        q.consumed.set(offset);
        true
    }

    /// Takes the oldest live batch, moving its queue's consumed offset past it.
    fn take_batch(&self) -> Option<Vec<MessageExt>> {
        let mut st = lock(&self.state);
        while let Some(batch) = st.buffer.pop_front() {
            let Some(q) = st.queues.get_mut(&batch.mq) else { continue };
            if q.epoch != batch.epoch {
                continue;
            }
            q.buffered = q.buffered.saturating_sub(batch.msgs.len());
            q.last_consume_ms = epoch_ms();
            if let Some(last) = batch.msgs.last() {
                q.consumed.set(last.queue_offset() + 1);
            }
            return Some(batch.msgs);
        }
        None
    }

    /// Makes `wanted` the assigned queues: removed ones stop and commit, new ones start.
    async fn set_assignment(self: &Arc<Self>, wanted: BTreeSet<MessageQueue>) {
        let mut removed = Vec::new();
        {
            let mut st = lock(&self.state);
            let gone: Vec<MessageQueue> = st.queues.keys().filter(|mq| !wanted.contains(*mq)).cloned().collect();
            for mq in gone {
                let q = st.queues.remove(&mq).expect("key listed above");
                if let Some(task) = &q.task {
                    task.abort();
                }
                removed.extend(q.consumed.unsaved().map(|o| (mq.clone(), o)));
            }
            st.buffer.retain(|b| wanted.contains(&b.mq));
            for mq in wanted {
                if st.queues.get(&mq).is_some_and(|q| q.task.is_some()) {
                    continue;
                }
                st.next_epoch += 1;
                let epoch = st.next_epoch;
                let task = Some(spawn_pull(self, mq.clone(), epoch, None));
                st.queues.insert(mq, QueueState::new(epoch, task));
            }
        }
        for (mq, offset) in removed {
            if let Err(e) = self.update_offset(&mq, offset).await {
                warn!(topic = %mq.topic, queue_id = mq.queue_id, error = %e, "commit of a removed queue failed");
            }
        }
    }

    /// Recomputes the queues of subscribe mode. Java: `RebalanceImpl#rebalanceByTopic`
    /// (clustering).
    async fn rebalance(self: &Arc<Self>) {
        let Some(topic) = self.subscribed_topic() else { return };
        let (all, member_source) = match self.calls().rebalance_inputs(&topic).await {
            Ok(inputs) => inputs,
            Err(e) => {
                warn!(topic = %topic, error = %e, "rebalance: no route");
                return;
            }
        };
        let Some(addr) = member_source else {
            warn!(topic = %topic, "rebalance: no broker to ask for the group's members");
            return;
        };
        let cids = match self.instance.consumer_ids(&addr, &self.config.group).await {
            Ok(cids) if !cids.is_empty() => cids,
            Ok(_) => {
                debug!(consumer_group = %self.config.group, "rebalance: the broker lists no consumer yet");
                return;
            }
            Err(e) => {
                warn!(consumer_group = %self.config.group, error = %e, "rebalance: no consumer list");
                return;
            }
        };
        let mine = self.config.allocate_strategy.allocate(&all, &cids, self.instance.client_id());
        debug!(consumer_group = %self.config.group, consumers = cids.len(), queues = mine.len(), "rebalanced");
        if self.running.load(Ordering::Acquire) {
            self.set_assignment(mine.into_iter().collect()).await;
        }
    }

    fn calls(&self) -> ConsumerCalls<'_> {
        ConsumerCalls { instance: &self.instance, group: &self.config.group, pull_nodes: &self.pull_nodes }
    }

    /// QUERY_CONSUMER_OFFSET; `None` on QUERY_NOT_FOUND.
    async fn query_offset(&self, mq: &MessageQueue) -> Result<Option<i64>, ClientError> {
        self.calls().query_offset(mq).await
    }

    /// UPDATE_CONSUMER_OFFSET to the master (a slave while there is none).
    async fn update_offset(&self, mq: &MessageQueue, offset: i64) -> Result<Committed, ClientError> {
        self.calls().update_offset(mq, offset).await
    }

    /// Commits every queue whose consumed offset moved, or whose last commit went to a
    /// slave because the master was gone (so the master gets it once it is back).
    async fn commit_all(&self) -> Result<(), ClientError> {
        let _commits = self.commits.lock().await;
        let unsaved = unsaved_offsets(lock(&self.state).queues.iter().map(|(mq, q)| (mq, &q.consumed)));
        commit_unsaved(
            unsaved,
            |mq, offset| async move { Ok(self.update_offset(&mq, offset).await? == Committed::ToMaster) },
            |mq, offset| {
                if let Some(q) = lock(&self.state).queues.get_mut(mq) {
                    q.consumed.saved(offset);
                }
            },
        )
        .await
    }

    /// Where a new queue starts: the committed offset, else by `consume_from_where`.
    /// Java: `computePullFromWhereWithException`.
    async fn start_offset(&self, mq: &MessageQueue) -> Result<i64, ClientError> {
        self.calls().start_offset(mq, self.config.consume_from_where, self.config.consume_timestamp_ms).await
    }

    /// Whether the task of `mq` at `epoch` is still wanted, and its buffer is full.
    fn queue_status(&self, mq: &MessageQueue, epoch: u64) -> Option<bool> {
        let st = lock(&self.state);
        let q = st.queues.get(mq).filter(|q| q.epoch == epoch)?;
        Some(q.buffered >= self.config.pull_threshold_for_queue)
    }

    /// One PULL_MESSAGE held by the broker up to `broker_suspend_max`; the next offset and the
    /// messages matching the subscription (everything in assign mode).
    async fn pull_once(
        &self,
        mq: &MessageQueue,
        offset: i64,
        sub: &SubscriptionData,
    ) -> Result<(i64, Vec<MessageExt>), ClientError> {
        let params = PullParams {
            batch_size: self.config.pull_batch_size,
            broker_suspend_max: self.config.broker_suspend_max,
            timeout: self.config.consumer_timeout_when_suspend,
            // Java's lite pull consumer never commits along with a pull.
            commit_offset: None,
        };
        self.calls().pull(mq, offset, sub, params).await
    }

    /// Pulls `mq` from `start` (else its start offset) into the buffer until the task is
    /// aborted or the queue leaves the assignment. Java: `PullTaskImpl`.
    async fn pull_loop(self: Arc<Self>, mq: MessageQueue, epoch: u64, start: Option<i64>) {
        let mut offset = match start {
            Some(offset) => offset,
            None => loop {
                match self.start_offset(&mq).await {
                    Ok(offset) => break offset,
                    Err(e) => {
                        warn!(topic = %mq.topic, queue_id = mq.queue_id, error = %e, "no start offset yet");
                        tokio::time::sleep(PULL_DELAY_ON_EXCEPTION).await;
                    }
                }
            },
        };
        debug!(topic = %mq.topic, queue_id = mq.queue_id, offset, "pulls start");
        let mut failures = 0;
        loop {
            match self.queue_status(&mq, epoch) {
                None => return,
                Some(true) => {
                    tokio::time::sleep(PULL_DELAY_WHEN_FLOW_CONTROL).await;
                    continue;
                }
                Some(false) => {}
            }
            let sub = self.subscription().unwrap_or_else(|| build_subscription(&mq.topic, SUB_ALL));
            match self.pull_once(&mq, offset, &sub).await {
                Ok((next, msgs)) => {
                    failures = 0;
                    offset = next;
                    let mut st = lock(&self.state);
                    let Some(q) = st.queues.get_mut(&mq).filter(|q| q.epoch == epoch) else { return };
                    q.last_pull_ms = epoch_ms();
                    if msgs.is_empty() {
                        continue;
                    }
                    q.buffered += msgs.len();
                    st.buffer.push_back(Batch { mq: mq.clone(), epoch, msgs });
                    drop(st);
                    self.arrived.notify_one();
                }
                Err(e) => {
                    if !self.running.load(Ordering::Acquire) {
                        return;
                    }
                    failures += 1;
                    log_pull_failure(&mq, offset, &sub, &e, failures);
                    tokio::time::sleep(PULL_DELAY_ON_EXCEPTION).await;
                }
            }
        }
    }
}

/// Starts the pull task of `mq`, owned by the consumer's pull set (finished ones are reaped).
fn spawn_pull(inner: &Arc<Inner>, mq: MessageQueue, epoch: u64, start: Option<i64>) -> AbortHandle {
    let mut pulls = lock(&inner.pulls);
    while pulls.try_join_next().is_some() {}
    pulls.spawn(inner.clone().pull_loop(mq, epoch, start))
}

async fn auto_commit_loop(inner: Arc<Inner>) {
    crate::periodic::run_every(inner.config.auto_commit_interval, None, || async {
        if let Err(e) = inner.commit_all().await {
            debug!(consumer_group = %inner.config.group, error = %e, "auto-commit failed");
        }
    })
    .await;
}

async fn rebalance_loop(inner: Arc<Inner>) {
    crate::periodic::run_every(inner.config.rebalance_interval, Some(&inner.rebalance_now), || inner.rebalance()).await;
}
