//! `PushConsumer`: the consumer calls the application's listener. Queues of the subscribed
//! topics (and of the group's retry topic) are shared out among the group's consumers; each
//! assigned queue has a long-polling pull task, and pulled messages are consumed concurrently
//! by at most `consume_thread_max` listener calls. Failed messages go back to the broker
//! (CONSUMER_SEND_MSG_BACK) and return through the retry topic.
//! Java: `DefaultMQPushConsumer` / `DefaultMQPushConsumerImpl` /
//! `ConsumeMessageConcurrentlyService` (clustering, concurrent listeners only).
//! Offset resets and running-info requests from brokers are served in `control`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferromq_protocol::body::{
    ConsumeFromWhere, ConsumeType, ConsumerData, MessageModel, MessageQueue, SubscriptionData,
};
use ferromq_protocol::message::keys;
use tokio::sync::{Notify, Semaphore};
use tokio::task::{AbortHandle, JoinSet};
use tracing::{debug, info, warn};

use crate::allocate::AllocateStrategy;
use crate::client_instance::{lock, ClientConfig, ClientInstance};
use crate::consumed_offset::{commit_unsaved, unsaved_offsets, ConsumedOffset};
use crate::consumer_calls::{log_pull_failure, retry_topic, Committed, ConsumerCalls, PullParams, RETRY_PREFIX};
use crate::consumer_stats::{epoch_ms, ConsumerStats};
use crate::error::ClientError;
use crate::local_offset_store::{default_offset_store_dir, LocalOffsetStore};
use crate::message_ext::MessageExt;
use crate::pull_node::PullNodeTable;
use crate::subscription::{build_subscription, MessageSelector};

mod control;
mod orderly;
mod pop;

pub use orderly::{ConsumeOrderlyStatus, MessageListenerOrderly};

/// Pause of a queue's pulls after a failure. Java: `PULL_TIME_DELAY_MILLS_ON_EXCEPTION`.
const PULL_DELAY_ON_EXCEPTION: Duration = Duration::from_secs(1);

/// Pause of a queue's pulls while it holds too many messages.
/// Java: `PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL`.
const PULL_DELAY_WHEN_FLOW_CONTROL: Duration = Duration::from_millis(50);

/// What a listener says about the messages it was given.
/// Java: `ConsumeConcurrentlyStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConsumeStatus {
    /// Consumed; the offset may move past the messages.
    ConsumeSuccess,
    /// Not consumed; the messages are sent back and redelivered through the retry topic.
    ReconsumeLater,
}

/// A concurrent listener. Java: `MessageListenerConcurrently`. It runs on tokio's blocking
/// pool, so it may block; a panic counts as [`ConsumeStatus::ReconsumeLater`].
pub type MessageListener = Arc<dyn Fn(&[MessageExt]) -> ConsumeStatus + Send + Sync>;

/// Push consumer settings, with Java's defaults.
#[derive(Debug, Clone)]
pub struct PushConsumerConfig {
    /// Consumer group.
    pub group: String,
    /// Clustering (queues shared out, offsets on the broker) or broadcasting (every queue,
    /// offsets in a local file) (`messageModel`, clustering).
    pub message_model: MessageModel,
    /// Base directory of a broadcasting consumer's offset files
    /// (`rocketmq.client.localOffsetStoreDir`); `None`: `$HOME/.rocketmq_offsets`.
    pub offset_store_dir: Option<PathBuf>,
    /// Where a queue without a committed offset starts (`consumeFromWhere`, last offset).
    pub consume_from_where: ConsumeFromWhere,
    /// Start time for [`ConsumeFromWhere::ConsumeFromTimestamp`], ms since the epoch
    /// (`consumeTimestamp`, half an hour ago).
    pub consume_timestamp_ms: i64,
    /// Listener calls running at once (`consumeThreadMax`, 20).
    pub consume_thread_max: usize,
    /// Messages per listener call (`consumeMessageBatchMaxSize`, 1).
    pub consume_message_batch_max_size: usize,
    /// Messages asked for per pull (`pullBatchSize`, 32).
    pub pull_batch_size: i32,
    /// Messages held per queue before its pulls pause (`pullThresholdForQueue`, 1000).
    pub pull_threshold_for_queue: usize,
    /// MiB of message bodies held per queue before its pulls pause
    /// (`pullThresholdSizeForQueue`, 100).
    pub pull_threshold_size_for_queue: usize,
    /// Concurrent consumption: the largest distance between the smallest and largest queue
    /// offset held before pulls pause (`consumeConcurrentlyMaxSpan`, 2000).
    pub consume_concurrently_max_span: i64,
    /// Deliveries before a message goes to the dead-letter topic (`maxReconsumeTimes`, 16).
    pub max_reconsume_times: i32,
    /// How often consumed offsets are committed (`persistConsumerOffsetInterval`, 5 s).
    pub persist_consumer_offset_interval: Duration,
    /// How often the queues are recomputed (rebalance timer, 20 s).
    pub rebalance_interval: Duration,
    /// How long the broker may hold a pull with no message (`brokerSuspendMaxTimeMillis`, 20 s).
    pub broker_suspend_max: Duration,
    /// Client-side timeout of a held pull (`consumerTimeoutMillisWhenSuspend`, 30 s).
    pub consumer_timeout_when_suspend: Duration,
    /// Wait before consuming again locally when a send-back failed (Java: 5 s).
    pub local_retry_delay: Duration,
    /// How often an orderly consumer renews its queue locks on the brokers (Java: the
    /// `lockMQPeriodically` timer, 20 s).
    pub lock_renew_interval: Duration,
    /// Wait before an orderly listener gets the same messages again after
    /// [`ConsumeOrderlyStatus::SuspendCurrentQueueAMoment`] (`suspendCurrentQueueTimeMillis`, 1 s).
    pub suspend_current_queue_time: Duration,
    /// How long shutdown waits for running listener calls (`awaitTerminationMillisWhenShutdown`;
    /// Java waits forever by default, this bounds it).
    pub await_termination_when_shutdown: Duration,
    /// How the group's clients share a topic's queues (`allocateMessageQueueStrategy`,
    /// [`AllocateStrategy::Averagely`]).
    pub allocate_strategy: AllocateStrategy,
    /// Whether this client shares out the queues itself (`clientRebalance`, true). False: the
    /// broker assigns them (QUERY_ASSIGNMENT) and the queues it assigns as POP are popped
    /// (concurrent listeners in clustering mode only).
    pub client_rebalance: bool,
    /// POP mode: how long popped messages stay hidden (`popInvisibleTime`, 60 s).
    pub pop_invisible_time: Duration,
    /// POP mode: messages per pop (`popBatchNums`, 32).
    pub pop_batch_nums: i32,
    /// POP mode: the longest a failed message waits before it is delivered again (Java waits
    /// `popDelayLevel` by reconsume times, 10 s up to 2 h).
    pub pop_retry_delay_max: Duration,
    /// Record `SubBefore` and `SubAfter` traces of every concurrent listener call in the
    /// trace topic (`enableMsgTrace`, false).
    pub enable_msg_trace: bool,
    /// The trace topic (`customizedTraceTopic`); `None`: `RMQ_SYS_TRACE_TOPIC`.
    pub trace_topic: Option<String>,
}

impl Default for PushConsumerConfig {
    fn default() -> Self {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        PushConsumerConfig {
            group: "DEFAULT_CONSUMER".to_owned(),
            message_model: MessageModel::Clustering,
            offset_store_dir: None,
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            consume_timestamp_ms: now - 30 * 60 * 1000,
            consume_thread_max: 20,
            consume_message_batch_max_size: 1,
            pull_batch_size: 32,
            pull_threshold_for_queue: 1000,
            pull_threshold_size_for_queue: 100,
            consume_concurrently_max_span: 2000,
            max_reconsume_times: 16,
            persist_consumer_offset_interval: Duration::from_secs(5),
            rebalance_interval: Duration::from_secs(20),
            broker_suspend_max: Duration::from_secs(20),
            consumer_timeout_when_suspend: Duration::from_secs(30),
            local_retry_delay: Duration::from_secs(5),
            lock_renew_interval: Duration::from_secs(20),
            suspend_current_queue_time: Duration::from_secs(1),
            await_termination_when_shutdown: Duration::from_secs(30),
            allocate_strategy: AllocateStrategy::default(),
            client_rebalance: true,
            pop_invisible_time: Duration::from_secs(60),
            pop_batch_nums: 32,
            pop_retry_delay_max: Duration::from_secs(7200),
            enable_msg_trace: false,
            trace_topic: None,
        }
    }
}

/// One assigned queue. Java: `ProcessQueue`.
#[derive(Debug)]
struct QueueState {
    /// Changes when the queue is (re)assigned; results of an older epoch are dropped.
    epoch: u64,
    /// Queue offsets of the pulled messages not consumed yet, with their body sizes.
    in_flight: BTreeMap<i64, usize>,
    /// Sum of the `in_flight` body sizes. Java: `ProcessQueue#msgSize`.
    in_flight_bytes: usize,
    /// Highest queue offset pulled so far.
    max_pulled: Option<i64>,
    /// Next offset to consume, once known, and whether it is committed.
    consumed: ConsumedOffset,
    task: AbortHandle,
    /// Orderly: pulled messages not consumed yet, by queue offset. Java: `msgTreeMap`.
    pending: BTreeMap<i64, MessageExt>,
    /// Orderly: until when the broker lock is known held. Java: `ProcessQueue#isLocked` and
    /// `lastLockTimestamp`.
    locked_until: Option<tokio::time::Instant>,
    /// Orderly: wakes the queue's consuming task.
    wake: Arc<Notify>,
    /// Orderly: held during a listener call. Java: `ProcessQueue#consumeLock`.
    consuming: Arc<tokio::sync::Mutex<()>>,
    /// When a pull of the queue last answered, ms since the epoch (at first, when assigned).
    last_pull_ms: i64,
    /// When a listener call last finished with the queue, ms since the epoch (at first, when
    /// assigned).
    last_consume_ms: i64,
}

impl QueueState {
    /// Removes consumed messages and moves the consumed offset to the smallest one still in
    /// flight, or past the last pulled. Java: `ProcessQueue#removeMessage`.
    fn remove(&mut self, offsets: impl IntoIterator<Item = i64>) {
        for o in offsets {
            if let Some(size) = self.in_flight.remove(&o) {
                self.in_flight_bytes = self.in_flight_bytes.saturating_sub(size);
            }
        }
        let next = match (self.in_flight.first_key_value(), self.max_pulled) {
            (Some((&first, _)), _) => Some(first),
            (None, Some(max)) => Some(max + 1),
            (None, None) => None,
        };
        if let Some(next) = next {
            self.consumed.advance(next);
        }
    }

    /// Records pulled messages as in flight.
    fn add(&mut self, msgs: &[MessageExt]) {
        for m in msgs {
            let size = m.body().len();
            if let Some(old) = self.in_flight.insert(m.queue_offset(), size) {
                self.in_flight_bytes = self.in_flight_bytes.saturating_sub(old);
            }
            self.in_flight_bytes += size;
        }
    }

    /// Whether the queue holds too much to pull more: more messages than `max_count`, more
    /// body bytes than `max_bytes`, or (concurrent consumption) a span between the smallest and
    /// largest offset in flight above `max_span`, which means one slow message holds back the
    /// committed offset. Java: the flow-control checks of `DefaultMQPushConsumerImpl#pullMessage`.
    fn over_threshold(&self, max_count: usize, max_bytes: usize, max_span: Option<i64>) -> bool {
        let span = match (self.in_flight.first_key_value(), self.in_flight.last_key_value()) {
            (Some((first, _)), Some((last, _))) => last - first,
            _ => 0,
        };
        self.in_flight.len() > max_count || self.in_flight_bytes > max_bytes || max_span.is_some_and(|m| span > m)
    }
}

#[derive(Debug, Default)]
struct State {
    /// Topic -> subscription, the retry topic included once started.
    subscriptions: BTreeMap<String, SubscriptionData>,
    queues: HashMap<MessageQueue, QueueState>,
    /// POP mode: the popped queues (usually queue id -1 of each broker).
    pop_queues: HashMap<MessageQueue, pop::PopQueue>,
    next_epoch: u64,
}

struct Inner {
    config: PushConsumerConfig,
    instance: Arc<ClientInstance>,
    owns_instance: bool,
    running: AtomicBool,
    listener: Mutex<Option<MessageListener>>,
    orderly_listener: Mutex<Option<MessageListenerOrderly>>,
    state: Mutex<State>,
    /// Broadcasting only: the consumed offsets, loaded at start.
    local_offsets: Mutex<Option<LocalOffsetStore>>,
    consume_permits: Arc<Semaphore>,
    rebalance_now: Arc<Notify>,
    /// Offset commit and rebalance timers.
    tasks: Mutex<JoinSet<()>>,
    /// The pull tasks of the queues.
    pulls: Mutex<JoinSet<()>>,
    /// Listener calls and their send-backs.
    consumes: Mutex<JoinSet<()>>,
    /// Pull and consume rates by topic, for running-info requests.
    stats: ConsumerStats,
    /// When the consumer last started, ms since the epoch.
    start_ms: AtomicI64,
    /// Held while the assignment changes (rebalance, offset reset), so the two never
    /// interleave.
    reassign: tokio::sync::Mutex<()>,
    /// Held while consumed offsets are committed, so a periodic commit of an old offset
    /// cannot land after an offset reset's commit.
    commits: tokio::sync::Mutex<()>,
    /// Which broker each queue is pulled from next.
    pull_nodes: PullNodeTable,
    /// With `enable_msg_trace`, from the first start on.
    tracer: std::sync::OnceLock<Arc<crate::trace::TraceDispatcher>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConsumer").field("config", &self.config).finish_non_exhaustive()
    }
}

/// A consumer that calls a listener. Create, [`subscribe`](Self::subscribe),
/// [`register_listener`](Self::register_listener), [`start`](Self::start),
/// [`shutdown`](Self::shutdown).
#[derive(Debug)]
pub struct PushConsumer {
    inner: Arc<Inner>,
}

impl PushConsumer {
    /// A consumer with its own client instance.
    pub fn new(config: PushConsumerConfig, client: ClientConfig) -> Self {
        Self::build(config, ClientInstance::new(client), true)
    }

    /// A consumer sharing `instance` with other clients.
    pub fn with_instance(config: PushConsumerConfig, instance: Arc<ClientInstance>) -> Self {
        Self::build(config, instance, false)
    }

    fn build(config: PushConsumerConfig, instance: Arc<ClientInstance>, owns_instance: bool) -> Self {
        let permits = config.consume_thread_max.max(1);
        PushConsumer {
            inner: Arc::new(Inner {
                config,
                instance,
                owns_instance,
                running: AtomicBool::new(false),
                listener: Mutex::new(None),
                orderly_listener: Mutex::new(None),
                state: Mutex::new(State::default()),
                local_offsets: Mutex::new(None),
                consume_permits: Arc::new(Semaphore::new(permits)),
                rebalance_now: Arc::new(Notify::new()),
                tasks: Mutex::new(JoinSet::new()),
                pulls: Mutex::new(JoinSet::new()),
                consumes: Mutex::new(JoinSet::new()),
                stats: ConsumerStats::new(Instant::now()),
                start_ms: AtomicI64::new(0),
                reassign: tokio::sync::Mutex::new(()),
                commits: tokio::sync::Mutex::new(()),
                pull_nodes: PullNodeTable::default(),
                tracer: std::sync::OnceLock::new(),
            }),
        }
    }

    /// The settings.
    pub fn config(&self) -> &PushConsumerConfig {
        &self.inner.config
    }

    /// The shared client instance.
    pub fn instance(&self) -> &Arc<ClientInstance> {
        &self.inner.instance
    }

    /// Sets the listener called with the pulled messages.
    pub fn register_listener<F>(&self, listener: F)
    where
        F: Fn(&[MessageExt]) -> ConsumeStatus + Send + Sync + 'static,
    {
        *lock(&self.inner.listener) = Some(Arc::new(listener));
    }

    /// Consumes `topic`'s messages that `selector` picks: a tag expression (`*`,
    /// `TagA || TagB`, also given as a plain string) or [`MessageSelector::sql`]. May be called
    /// for several topics, before or after start; a later call for a topic replaces its
    /// subscription. Java: `subscribe(String, String)` and `subscribe(String, MessageSelector)`.
    ///
    /// # Errors
    /// [`ClientError::Validation`] for a bad topic name or an empty SQL92 expression; route
    /// errors after start.
    pub async fn subscribe(&self, topic: &str, selector: impl Into<MessageSelector>) -> Result<(), ClientError> {
        crate::validators::check_topic(topic)?;
        let sub = selector.into().subscription(topic)?;
        let inner = &self.inner;
        lock(&inner.state).subscriptions.insert(topic.to_owned(), sub);
        if inner.running.load(Ordering::Acquire) {
            inner.instance.update_consumer(inner.consumer_data());
            inner.instance.refresh_route(topic).await?;
            inner.instance.heartbeat_all().await;
            inner.rebalance().await;
        }
        Ok(())
    }

    /// The queues currently consumed (pulled, and in POP mode popped).
    pub fn assignment(&self) -> BTreeSet<MessageQueue> {
        let st = lock(&self.inner.state);
        st.queues.keys().chain(st.pop_queues.keys()).cloned().collect()
    }

    /// Subscribes the group's retry topic, registers the group, starts the timers and the
    /// pulls of this consumer's share of the queues. Java: `DefaultMQPushConsumerImpl#start`.
    ///
    /// # Errors
    /// [`ClientError::IllegalState`] if running, without a listener, or the group is already
    /// registered in the instance; [`ClientError::Broker`] if a broker refuses a SQL92
    /// subscription (see [`MessageSelector::sql`]).
    pub async fn start(&self) -> Result<(), ClientError> {
        let inner = &self.inner;
        if inner.running.load(Ordering::Acquire) {
            return Err(inner.illegal("the consumer is already started"));
        }
        if lock(&inner.listener).is_none() && lock(&inner.orderly_listener).is_none() {
            return Err(inner.illegal("no message listener registered"));
        }
        let subs: Vec<SubscriptionData> = lock(&inner.state).subscriptions.values().cloned().collect();
        for sub in &subs {
            inner.calls().check_client_config(sub).await?;
        }
        if inner.broadcasting() {
            let base = inner.config.offset_store_dir.clone().unwrap_or_else(default_offset_store_dir);
            let store = LocalOffsetStore::load(&base, inner.instance.client_id(), &inner.config.group);
            info!(consumer_group = %inner.config.group, path = %store.path().display(), "local offsets loaded");
            *lock(&inner.local_offsets) = Some(store);
        } else {
            // Java subscribes the retry topic in clustering mode only (`copySubscription`).
            let retry = retry_topic(&inner.config.group);
            lock(&inner.state).subscriptions.insert(retry.clone(), build_subscription(&retry, "*"));
        }
        let control: Weak<Inner> = Arc::downgrade(inner);
        if !inner.instance.register_consumer(inner.consumer_data(), inner.rebalance_now.clone(), control) {
            return Err(inner.illegal("the consumer group has been created before"));
        }
        inner.start_ms.store(epoch_ms(), Ordering::Relaxed);
        if inner.config.enable_msg_trace && inner.tracer.get().is_none() {
            let tracer = crate::trace::TraceDispatcher::start(
                inner.instance.config(),
                &inner.config.group,
                "CONSUME",
                inner.config.trace_topic.as_deref(),
            );
            let _ = inner.tracer.set(tracer);
        }
        inner.running.store(true, Ordering::Release);
        {
            let mut tasks = lock(&inner.tasks);
            tasks.spawn(commit_loop(inner.clone()));
            tasks.spawn(rebalance_loop(inner.clone()));
            if inner.needs_locks() {
                tasks.spawn(orderly::lock_loop(inner.clone()));
            }
        }
        let topics: Vec<String> = lock(&inner.state).subscriptions.keys().cloned().collect();
        for topic in &topics {
            // The retry topic appears with the group's first heartbeat; its route comes later.
            if let Err(e) = inner.instance.refresh_route(topic).await {
                debug!(topic = %topic, error = %e, "no route yet");
            }
        }
        inner.instance.heartbeat_all().await;
        inner.rebalance().await;
        info!(consumer_group = %inner.config.group, "push consumer started");
        Ok(())
    }

    /// Stops pulling, waits (bounded) for running listener calls, commits the consumed
    /// offsets and unregisters the group. Java: `DefaultMQPushConsumerImpl#shutdown`.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        if !inner.running.swap(false, Ordering::AcqRel) {
            return;
        }
        let mut tasks = std::mem::take(&mut *lock(&inner.tasks));
        tasks.shutdown().await;
        let mut pulls = std::mem::take(&mut *lock(&inner.pulls));
        pulls.shutdown().await;
        let mut consumes = std::mem::take(&mut *lock(&inner.consumes));
        let drained = tokio::time::timeout(inner.config.await_termination_when_shutdown, async {
            while consumes.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            warn!(consumer_group = %inner.config.group, "listener calls still running at shutdown, aborted");
            consumes.shutdown().await;
        }
        if let Err(e) = inner.commit_all().await {
            warn!(consumer_group = %inner.config.group, error = %e, "commit at shutdown failed");
        }
        // Popped messages whose listener call was cut short come back after their invisible
        // time (the broker holds them), as in Java.
        lock(&inner.state).pop_queues.clear();
        let all: Vec<(MessageQueue, QueueState)> = lock(&inner.state).queues.drain().collect();
        if inner.needs_locks() {
            inner.unlock_queues(all.iter().map(|(mq, _)| mq.clone()).collect()).await;
        }
        inner.instance.unregister_consumer(&inner.config.group).await;
        if let Some(tracer) = inner.tracer.get() {
            tracer.shutdown().await;
        }
        if inner.owns_instance {
            inner.instance.shutdown().await;
        }
        info!(consumer_group = %inner.config.group, "push consumer stopped");
    }
}

impl Inner {
    fn illegal(&self, reason: &str) -> ClientError {
        ClientError::IllegalState { group: self.config.group.clone(), reason: reason.to_owned() }
    }

    fn calls(&self) -> ConsumerCalls<'_> {
        ConsumerCalls { instance: &self.instance, group: &self.config.group, pull_nodes: &self.pull_nodes }
    }

    fn consumer_data(&self) -> ConsumerData {
        ConsumerData {
            consume_from_where: self.config.consume_from_where,
            consume_type: ConsumeType::ConsumePassively,
            group_name: self.config.group.clone(),
            message_model: self.config.message_model,
            subscription_data_set: lock(&self.state).subscriptions.values().cloned().collect(),
            unit_mode: false,
        }
    }

    fn broadcasting(&self) -> bool {
        self.config.message_model == MessageModel::Broadcasting
    }

    /// Stores a consumed offset: in the local table (broadcasting; written by
    /// [`Self::persist_local`]) or on the broker. False when it landed on a slave because
    /// the master is gone: it is to be committed again, so the master gets it once back.
    async fn store_offset(&self, mq: &MessageQueue, offset: i64) -> Result<bool, ClientError> {
        if let Some(store) = lock(&self.local_offsets).as_mut() {
            store.set(mq, offset);
            return Ok(true);
        }
        Ok(self.calls().update_offset(mq, offset).await? == Committed::ToMaster)
    }

    /// Writes the local offset file of a broadcasting consumer.
    fn persist_local(&self) {
        if let Some(store) = lock(&self.local_offsets).as_ref() {
            if let Err(e) = store.persist() {
                warn!(consumer_group = %self.config.group, path = %store.path().display(), error = %e,
                    "offset file write failed");
            }
        }
    }

    /// Commits every queue whose consumed offset moved (or last went to a slave).
    /// Java: `persistConsumerOffset`, which commits every queue each time.
    async fn commit_all(&self) -> Result<(), ClientError> {
        let _commits = self.commits.lock().await;
        let unsaved = unsaved_offsets(lock(&self.state).queues.iter().map(|(mq, q)| (mq, &q.consumed)));
        let result = commit_unsaved(
            unsaved,
            |mq, offset| async move { self.store_offset(&mq, offset).await },
            |mq, offset| {
                if let Some(q) = lock(&self.state).queues.get_mut(mq) {
                    q.consumed.saved(offset);
                }
            },
        )
        .await;
        self.persist_local();
        result
    }

    /// The queues of `topic` this consumer gets. Java: `RebalanceImpl#rebalanceByTopic`.
    async fn share_of(&self, topic: &str) -> Option<Vec<MessageQueue>> {
        let (all, member_source) = match self.calls().rebalance_inputs(topic).await {
            Ok(inputs) => inputs,
            Err(e) => {
                debug!(topic = %topic, error = %e, "rebalance: no route");
                return None;
            }
        };
        if self.broadcasting() {
            // Java: `RebalanceImpl#rebalanceByTopic`, BROADCASTING: every queue.
            return Some(all);
        }
        let addr = member_source?;
        match self.instance.consumer_ids(&addr, &self.config.group).await {
            Ok(cids) if !cids.is_empty() => {
                Some(self.config.allocate_strategy.allocate(&all, &cids, self.instance.client_id()))
            }
            Ok(_) => None,
            Err(e) => {
                warn!(consumer_group = %self.config.group, error = %e, "rebalance: no consumer list");
                None
            }
        }
    }

    /// Recomputes the queues of every subscribed topic; a topic whose share is unknown keeps
    /// its current queues.
    async fn rebalance(self: &Arc<Self>) {
        let _reassign = self.reassign.lock().await;
        let topics: Vec<String> = lock(&self.state).subscriptions.keys().cloned().collect();
        let mut wanted = BTreeSet::new();
        let mut wanted_pop = BTreeSet::new();
        for topic in topics {
            if self.server_assigns() {
                match self.query_assignment(&topic).await {
                    Some(assigned) => {
                        for a in assigned {
                            if a.mode == ferromq_protocol::body::MessageRequestMode::Pop {
                                wanted_pop.insert(a.message_queue);
                            } else {
                                wanted.insert(a.message_queue);
                            }
                        }
                    }
                    None => {
                        let st = lock(&self.state);
                        wanted.extend(st.queues.keys().filter(|mq| mq.topic == topic).cloned());
                        wanted_pop.extend(st.pop_queues.keys().filter(|mq| mq.topic == topic).cloned());
                    }
                }
                continue;
            }
            match self.share_of(&topic).await {
                Some(mine) => wanted.extend(mine),
                None => wanted.extend(lock(&self.state).queues.keys().filter(|mq| mq.topic == topic).cloned()),
            }
        }
        if self.running.load(Ordering::Acquire) {
            self.set_assignment(wanted).await;
            self.set_pop_assignment(wanted_pop);
        }
    }

    /// Makes `wanted` the assigned queues: removed ones stop and commit, new ones start.
    async fn set_assignment(self: &Arc<Self>, wanted: BTreeSet<MessageQueue>) {
        let mut removed = Vec::new();
        let mut gone_all = Vec::new();
        let wanted = if self.needs_locks() { self.lock_new(wanted).await } else { wanted };
        {
            let mut st = lock(&self.state);
            let gone: Vec<MessageQueue> = st.queues.keys().filter(|mq| !wanted.contains(*mq)).cloned().collect();
            for mq in gone {
                let q = st.queues.remove(&mq).expect("key listed above");
                q.task.abort();
                gone_all.push((mq.clone(), q.consuming.clone()));
                removed.extend(q.consumed.unsaved().map(|o| (mq.clone(), o)));
            }
            for mq in wanted {
                if st.queues.contains_key(&mq) {
                    continue;
                }
                st.next_epoch += 1;
                let epoch = st.next_epoch;
                let task = {
                    let mut pulls = lock(&self.pulls);
                    while pulls.try_join_next().is_some() {}
                    pulls.spawn(self.clone().pull_loop(mq.clone(), epoch))
                };
                let q = QueueState {
                    epoch,
                    in_flight: BTreeMap::new(),
                    in_flight_bytes: 0,
                    max_pulled: None,
                    consumed: ConsumedOffset::default(),
                    task,
                    pending: BTreeMap::new(),
                    locked_until: self.needs_locks().then(|| tokio::time::Instant::now() + orderly::LOCK_MAX_LIVE),
                    wake: Arc::new(Notify::new()),
                    consuming: Arc::new(tokio::sync::Mutex::new(())),
                    last_pull_ms: epoch_ms(),
                    last_consume_ms: epoch_ms(),
                };
                if self.orderly() {
                    let mut consumes = lock(&self.consumes);
                    while consumes.try_join_next().is_some() {}
                    consumes.spawn(self.clone().orderly_loop(mq.clone(), epoch, q.wake.clone(), q.consuming.clone()));
                }
                st.queues.insert(mq, q);
            }
        }
        for (mq, offset) in &removed {
            if let Err(e) = self.store_offset(mq, *offset).await {
                warn!(topic = %mq.topic, queue_id = mq.queue_id, error = %e, "commit of a removed queue failed");
            }
        }
        if !removed.is_empty() {
            self.persist_local();
        }
        if self.needs_locks() && !gone_all.is_empty() {
            self.unlock_removed(gone_all).await;
        }
    }

    /// Whether the queue at `epoch` is still assigned, and whether its pulls must wait (too
    /// many messages held, or an orderly queue whose lock is not held).
    fn queue_status(&self, mq: &MessageQueue, epoch: u64) -> Option<bool> {
        let st = lock(&self.state);
        let q = st.queues.get(mq).filter(|q| q.epoch == epoch)?;
        let unlocked = self.needs_locks() && !orderly::lock_held(q);
        let max_span = (!self.orderly()).then_some(self.config.consume_concurrently_max_span);
        let max_bytes = self.config.pull_threshold_size_for_queue.saturating_mul(1024 * 1024);
        Some(unlocked || q.over_threshold(self.config.pull_threshold_for_queue, max_bytes, max_span))
    }

    async fn first_offset(&self, mq: &MessageQueue) -> i64 {
        // Retry topics always start at their beginning, as in Java.
        let from = if mq.topic.starts_with(RETRY_PREFIX) {
            ConsumeFromWhere::ConsumeFromFirstOffset
        } else {
            self.config.consume_from_where
        };
        if let Some(offset) = lock(&self.local_offsets).as_ref().and_then(|s| s.get(mq)) {
            return offset;
        }
        let broadcasting = self.broadcasting();
        loop {
            let ts = self.config.consume_timestamp_ms;
            let found = if broadcasting {
                self.calls().position_offset(mq, from, ts).await
            } else {
                self.calls().start_offset(mq, from, ts).await
            };
            match found {
                Ok(offset) => return offset,
                Err(e) => {
                    warn!(topic = %mq.topic, queue_id = mq.queue_id, error = %e, "no start offset yet");
                    tokio::time::sleep(PULL_DELAY_ON_EXCEPTION).await;
                }
            }
        }
    }

    /// Pulls `mq` and hands the messages to listener calls until the queue leaves the
    /// assignment. Java: `DefaultMQPushConsumerImpl#pullMessage` and its `PullCallback`.
    async fn pull_loop(self: Arc<Self>, mq: MessageQueue, epoch: u64) {
        let mut offset = self.first_offset(&mq).await;
        if let Some(q) = lock(&self.state).queues.get_mut(&mq).filter(|q| q.epoch == epoch) {
            q.consumed.start_at(offset);
        }
        let mut params = PullParams {
            batch_size: self.config.pull_batch_size,
            broker_suspend_max: self.config.broker_suspend_max,
            timeout: self.config.consumer_timeout_when_suspend,
            commit_offset: None,
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
            let Some(sub) = lock(&self.state).subscriptions.get(&mq.topic).cloned() else { return };
            params.commit_offset = self.commit_offset_for_pull(&mq);
            let asked = Instant::now();
            match self.calls().pull(&mq, offset, &sub, params).await {
                Ok((next, msgs)) => {
                    failures = 0;
                    let now = Instant::now();
                    self.stats.record_pull(&mq.topic, now.duration_since(asked), msgs.len(), now);
                    let previous = offset;
                    offset = next;
                    if !self.accept(&mq, epoch, previous, next, &msgs) {
                        return;
                    }
                    if !self.orderly() {
                        self.dispatch(&mq, epoch, msgs);
                    }
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

    /// The consumed offset a pull carries for the broker to commit: clustering only, and only
    /// above 0. Java: `commitOffsetEnable` in `DefaultMQPushConsumerImpl#pullMessage`.
    fn commit_offset_for_pull(&self, mq: &MessageQueue) -> Option<i64> {
        if self.broadcasting() {
            return None;
        }
        lock(&self.state).queues.get(mq).and_then(|q| q.consumed.get()).filter(|o| *o > 0)
    }

    /// Records pulled messages as in flight; false if the queue is gone. Messages filtered
    /// out by tag still move the consumed offset.
    fn accept(&self, mq: &MessageQueue, epoch: u64, previous: i64, next: i64, msgs: &[MessageExt]) -> bool {
        let mut st = lock(&self.state);
        let Some(q) = st.queues.get_mut(mq).filter(|q| q.epoch == epoch) else { return false };
        q.last_pull_ms = epoch_ms();
        q.add(msgs);
        if self.orderly() {
            q.pending.extend(msgs.iter().map(|m| (m.queue_offset(), m.clone())));
            q.wake.notify_one();
        }
        if next > previous {
            q.max_pulled = Some(q.max_pulled.map_or(next - 1, |m| m.max(next - 1)));
            if msgs.is_empty() {
                q.remove([]);
            }
        }
        true
    }

    /// Splits `msgs` into listener calls of `consume_message_batch_max_size`.
    /// Java: `ConsumeMessageConcurrentlyService#submitConsumeRequest`.
    fn dispatch(self: &Arc<Self>, mq: &MessageQueue, epoch: u64, msgs: Vec<MessageExt>) {
        let size = self.config.consume_message_batch_max_size.max(1);
        let mut consumes = lock(&self.consumes);
        while consumes.try_join_next().is_some() {}
        for chunk in msgs.chunks(size) {
            consumes.spawn(self.clone().consume(mq.clone(), epoch, chunk.to_vec()));
        }
    }

    /// Runs one listener call on the blocking pool: timed into the consume statistics and,
    /// with message trace on, recorded as each message's `SubBefore` and `SubAfter` (Java's
    /// consume hooks, called by the concurrent, orderly and POP services alike). `None` when
    /// the listener panicked (logged; traced as an exception).
    pub(crate) async fn call_listener<S: Send + 'static>(
        &self,
        mq: &MessageQueue,
        msgs: &[MessageExt],
        call: impl FnOnce() -> S + Send + 'static,
        succeeded: impl Fn(&S) -> bool,
    ) -> Option<S> {
        use ferromq_protocol::trace::context_code;
        let traced = self.tracer.get().map(|t| (t, t.before(&self.config.group, msgs)));
        let started = Instant::now();
        let result = match tokio::task::spawn_blocking(call).await {
            Ok(status) => Some(status),
            Err(e) => {
                warn!(topic = %mq.topic, queue_id = mq.queue_id, error = %e, "listener panicked");
                None
            }
        };
        let ok = result.as_ref().is_some_and(&succeeded);
        if let Some((tracer, request_id)) = traced {
            let code = match &result {
                None => context_code::EXCEPTION,
                Some(_) if ok => context_code::SUCCESS,
                Some(_) => context_code::FAILED,
            };
            tracer.after(&self.config.group, &request_id, msgs, started.elapsed(), code);
        }
        let (done, failed) = if ok { (msgs.len(), 0) } else { (0, msgs.len()) };
        let now = Instant::now();
        self.stats.record_consume(&mq.topic, now.duration_since(started), done, failed, now);
        result
    }

    /// One listener call and what follows from it: success removes the messages, failure
    /// sends them back; what cannot be sent back is consumed again locally later.
    /// Java: `ConsumeRequest#run` + `processConsumeResult` (clustering).
    async fn consume(self: Arc<Self>, mq: MessageQueue, epoch: u64, mut msgs: Vec<MessageExt>) {
        let retry = retry_topic(&self.config.group);
        for m in &mut msgs {
            restore_retry_topic(m, &retry);
        }
        loop {
            let Some(listener) = lock(&self.listener).clone() else { return };
            let status = {
                let Ok(_permit) = self.consume_permits.clone().acquire_owned().await else { return };
                if self.queue_status(&mq, epoch).is_none() {
                    return;
                }
                let batch = msgs.clone();
                let status = self
                    .call_listener(&mq, &msgs, move || listener(&batch), |s| *s == ConsumeStatus::ConsumeSuccess)
                    .await;
                status.unwrap_or(ConsumeStatus::ReconsumeLater)
            };
            let mut failed = Vec::new();
            if status == ConsumeStatus::ReconsumeLater && self.broadcasting() {
                // Java: `processConsumeResult`, BROADCASTING: failed messages are dropped.
                for m in &msgs {
                    warn!(topic = %mq.topic, queue_id = mq.queue_id, queue_offset = m.queue_offset(),
                        "broadcasting consumption failed, message dropped");
                }
            } else if status == ConsumeStatus::ReconsumeLater {
                for m in &msgs {
                    if let Err(e) = self.calls().send_back(m, self.config.max_reconsume_times, 0).await {
                        warn!(topic = %mq.topic, queue_id = mq.queue_id, queue_offset = m.queue_offset(), error = %e,
                            "send back failed, consuming again locally");
                        failed.push(m.clone());
                    }
                }
            }
            let done =
                msgs.iter().map(MessageExt::queue_offset).filter(|o| !failed.iter().any(|f| f.queue_offset() == *o));
            let done: Vec<i64> = done.collect();
            if let Some(q) = lock(&self.state).queues.get_mut(&mq).filter(|q| q.epoch == epoch) {
                q.last_consume_ms = epoch_ms();
                q.remove(done);
            }
            if failed.is_empty() {
                return;
            }
            for m in &mut failed {
                m.stored.reconsume_times += 1;
            }
            msgs = failed;
            tokio::time::sleep(self.config.local_retry_delay).await;
        }
    }
}

/// A message of the retry topic gets its original topic back. Java:
/// `DefaultMQPushConsumerImpl#resetRetryAndNamespace`.
fn restore_retry_topic(msg: &mut MessageExt, retry: &str) {
    if let Some(original) = msg.property(keys::RETRY_TOPIC).map(str::to_owned) {
        if msg.topic() == retry {
            msg.stored.topic = original;
        }
    }
}

async fn commit_loop(inner: Arc<Inner>) {
    crate::periodic::run_every(inner.config.persist_consumer_offset_interval, None, || async {
        if let Err(e) = inner.commit_all().await {
            debug!(consumer_group = %inner.config.group, error = %e, "offset commit failed");
        }
    })
    .await;
}

async fn rebalance_loop(inner: Arc<Inner>) {
    crate::periodic::run_every(inner.config.rebalance_interval, Some(&inner.rebalance_now), || inner.rebalance()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> QueueState {
        let mut js: JoinSet<()> = JoinSet::new();
        let task = js.spawn(async {});
        QueueState {
            epoch: 1,
            in_flight: BTreeMap::new(),
            in_flight_bytes: 0,
            max_pulled: None,
            consumed: {
                let mut o = ConsumedOffset::default();
                o.start_at(0);
                o
            },
            task,
            pending: BTreeMap::new(),
            locked_until: None,
            wake: Arc::new(Notify::new()),
            consuming: Arc::new(tokio::sync::Mutex::new(())),
            last_pull_ms: 0,
            last_consume_ms: 0,
        }
    }

    #[tokio::test]
    async fn consumed_offset_is_the_smallest_in_flight() {
        let mut q = queue();
        q.add(&[message(0, 1), message(1, 1), message(2, 1)]);
        q.max_pulled = Some(2);
        q.remove([1, 2]);
        assert_eq!((q.consumed.get(), q.consumed.unsaved()), (Some(0), None));
        q.remove([0]);
        assert_eq!(q.consumed.unsaved(), Some(3));
        q.add(&[message(3, 1)]);
        q.max_pulled = Some(3);
        q.remove([]);
        assert_eq!(q.consumed.get(), Some(3));
    }

    fn message(offset: i64, body_len: usize) -> MessageExt {
        let stored = ferromq_protocol::message::StoredMessage {
            queue_offset: offset,
            body: bytes::Bytes::from(vec![b'x'; body_len]),
            ..Default::default()
        };
        MessageExt { message_queue: MessageQueue::new("T", "b", 0), stored }
    }

    #[tokio::test]
    async fn flow_control_counts_messages_bytes_and_span() {
        let mut q = queue();
        q.add(&[message(10, 100), message(11, 100), message(12, 100)]);
        q.add(&[message(12, 50)]); // a redelivered offset replaces, not adds
        assert_eq!((q.in_flight.len(), q.in_flight_bytes), (3, 250));
        assert!(!q.over_threshold(3, 250, Some(2)));
        assert!(q.over_threshold(2, 250, Some(2)), "count");
        assert!(q.over_threshold(3, 249, Some(2)), "bytes");
        assert!(q.over_threshold(3, 250, Some(1)), "span");
        assert!(!q.over_threshold(3, 250, None), "orderly ignores the span");
        q.remove([10, 12]);
        assert_eq!((q.in_flight.len(), q.in_flight_bytes), (1, 100));
        assert!(!q.over_threshold(1, 100, Some(0)));
    }
}
