//! `SimpleConsumer`: RocketMQ 5.x's pop consumer over remoting. The application asks for up to
//! 32 messages with an invisible time ([`SimpleConsumer::receive`]); the broker hides them for
//! that long and brings back whatever is not acknowledged ([`SimpleConsumer::ack`]) in time;
//! [`SimpleConsumer::change_invisible_duration`] postpones (or hastens) a message's return.
//! No queues are owned and no offsets kept here: brokers do both. Java: the pop parts of
//! `MQClientAPIImpl` (`popMessageAsync`, `ackMessageAsync`, `changeInvisibleTimeAsync`) and
//! the 5.x `SimpleConsumer` API.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use ferromq_protocol::body::{
    perm, ConsumeFromWhere, ConsumeType, ConsumerData, ConsumerRunningInfo, MessageModel, MessageQueue,
    SubscriptionData, MASTER_ID,
};
use ferromq_protocol::header::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader, PopMessageResponseHeader,
};
use ferromq_protocol::message::keys;
use ferromq_protocol::pop::{
    info_key, offset_info_key, parse_msg_offset_info, parse_order_count_info, parse_start_offset_info,
    popped_extra_info, ExtraInfo, POP_MAX_MSG_NUMS,
};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use tokio::sync::Notify;
use tracing::{debug, info};

use crate::broker_requests::{ConsumerControl, ControlFuture};
use crate::client_instance::{lock, ClientConfig, ClientInstance};
use crate::error::ClientError;
use crate::message_ext::{decode_pulled, MessageExt};
use crate::subscription::MessageSelector;

/// Simple consumer settings, with the 5.x client's defaults.
#[derive(Debug, Clone)]
pub struct SimpleConsumerConfig {
    /// Consumer group.
    pub group: String,
    /// How long a receive may wait at the broker for messages (`awaitDuration`, 5 s in the
    /// 5.x clients); 0 answers at once.
    pub await_duration: Duration,
    /// FIFO pop: one batch of a queue out at a time, redelivered in place (`fifo` groups).
    pub fifo: bool,
}

impl Default for SimpleConsumerConfig {
    fn default() -> Self {
        SimpleConsumerConfig {
            group: "DEFAULT_CONSUMER".to_owned(),
            await_duration: Duration::from_secs(5),
            fifo: false,
        }
    }
}

/// A received message and what acknowledging it takes.
#[derive(Debug, Clone)]
pub struct ReceivedMessage {
    /// The message (under its original topic, also when it was redelivered from the group's
    /// retry topic).
    pub message: MessageExt,
    /// The receipt: the message's extra info (`POP_CK`), which the broker needs back.
    pub receipt: ExtraInfo,
    /// The broker that served it.
    pub broker_addr: String,
    /// Times delivered before this one.
    pub reconsume_times: i32,
}

impl ReceivedMessage {
    /// The topic an ack names: the retry topic the message was read from, or its own.
    fn ack_topic(&self, group: &str) -> String {
        self.receipt.retry_flag.real_topic(self.message.topic(), group)
    }
}

struct Inner {
    config: SimpleConsumerConfig,
    instance: Arc<ClientInstance>,
    subscriptions: Mutex<BTreeMap<String, MessageSelector>>,
    /// Round-robin over (topic, broker).
    next: AtomicUsize,
}

/// A pop consumer. See the module docs.
pub struct SimpleConsumer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SimpleConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleConsumer").field("group", &self.inner.config.group).finish_non_exhaustive()
    }
}

impl ConsumerControl for Inner {
    fn consume_type(&self) -> ConsumeType {
        ConsumeType::ConsumePop
    }

    fn running_info(&self) -> ConsumerRunningInfo {
        let properties = BTreeMap::from([
            ("consumerGroup".to_owned(), self.config.group.clone()),
            ("awaitDuration".to_owned(), self.config.await_duration.as_millis().to_string()),
            ("fifo".to_owned(), self.config.fifo.to_string()),
        ]);
        ConsumerRunningInfo { properties, subscription_set: self.subscription_data(), ..ConsumerRunningInfo::default() }
    }

    fn task_dump(&self) -> String {
        format!(
            "simple consumer {}: topics {:?}\n",
            self.config.group,
            lock(&self.subscriptions).keys().collect::<Vec<_>>()
        )
    }

    /// A pop group's offsets live on the broker, which applies a reset at the next pop of each
    /// queue: nothing is held here to move.
    fn reset_offset(self: Arc<Self>, topic: String, offsets: BTreeMap<MessageQueue, i64>) -> ControlFuture {
        let group = self.config.group.clone();
        Box::pin(async move {
            info!(group = %group, topic = %topic, queues = offsets.len(), "offset reset: the brokers apply it at the next pop");
        })
    }
}

impl Inner {
    fn subscription_data(&self) -> Vec<SubscriptionData> {
        lock(&self.subscriptions).iter().filter_map(|(t, s)| s.subscription(t).ok()).collect()
    }

    fn consumer_data(&self) -> ConsumerData {
        ConsumerData {
            consume_from_where: ConsumeFromWhere::ConsumeFromLastOffset,
            consume_type: ConsumeType::ConsumePop,
            group_name: self.config.group.clone(),
            message_model: MessageModel::Clustering,
            subscription_data_set: self.subscription_data(),
            unit_mode: false,
        }
    }
}

impl SimpleConsumer {
    /// Starts a consumer of `config.group` on a client instance of its own.
    pub fn start(config: SimpleConsumerConfig, client: ClientConfig) -> SimpleConsumer {
        let instance = ClientInstance::new(client);
        let inner =
            Arc::new(Inner { config, instance, subscriptions: Mutex::new(BTreeMap::new()), next: AtomicUsize::new(0) });
        let control: Weak<dyn ConsumerControl> = Arc::downgrade(&(inner.clone() as Arc<dyn ConsumerControl>));
        inner.instance.register_consumer(inner.consumer_data(), Arc::new(Notify::new()), control);
        SimpleConsumer { inner }
    }

    /// Subscribes to `topic` with a tag or SQL92 selector (replacing an earlier one) and looks
    /// its route up.
    ///
    /// # Errors
    /// An invalid selector, or a topic the name servers do not know.
    pub async fn subscribe(&self, topic: &str, selector: MessageSelector) -> Result<(), ClientError> {
        selector.subscription(topic)?;
        let route = self.inner.instance.fetch_route(topic).await?;
        self.inner.instance.install_route(topic, &route);
        lock(&self.inner.subscriptions).insert(topic.to_owned(), selector);
        self.inner.instance.update_consumer(self.inner.consumer_data());
        self.inner.instance.heartbeat_all().await;
        Ok(())
    }

    /// Stops receiving `topic`.
    pub fn unsubscribe(&self, topic: &str) {
        lock(&self.inner.subscriptions).remove(topic);
        self.inner.instance.update_consumer(self.inner.consumer_data());
    }

    /// The (topic, master address) pairs to pop from, in a stable order.
    async fn targets(&self) -> Result<Vec<(String, MessageSelector, String, String)>, ClientError> {
        let subs: Vec<(String, MessageSelector)> =
            lock(&self.inner.subscriptions).iter().map(|(t, s)| (t.clone(), s.clone())).collect();
        let mut out = Vec::new();
        for (topic, selector) in subs {
            let route = self.inner.instance.fetch_route(&topic).await?;
            let mut names: Vec<&str> = route
                .queue_datas
                .iter()
                .filter(|q| perm::is_readable(q.perm) && q.read_queue_nums > 0)
                .map(|q| q.broker_name.as_str())
                .collect();
            names.sort_unstable();
            for name in names {
                let master = route
                    .broker_datas
                    .iter()
                    .find(|b| b.broker_name == name)
                    .and_then(|b| b.broker_addrs.get(&MASTER_ID).cloned());
                if let Some(addr) = master {
                    out.push((topic.clone(), selector.clone(), name.to_owned(), addr));
                }
            }
        }
        Ok(out)
    }

    /// Receives up to `max` (1..=32) messages, hidden from everyone else for `invisible`,
    /// waiting at most the await duration at the broker. Brokers are taken in turn.
    ///
    /// # Errors
    /// `max` out of range, no subscription, no master for the topic, or a broker refusal.
    pub async fn receive(&self, max: i32, invisible: Duration) -> Result<Vec<ReceivedMessage>, ClientError> {
        let group = &self.inner.config.group;
        if !(1..=POP_MAX_MSG_NUMS).contains(&max) {
            return Err(ClientError::IllegalState {
                group: group.clone(),
                reason: format!("receive: max must be 1..={POP_MAX_MSG_NUMS}, got {max}"),
            });
        }
        let targets = self.targets().await?;
        if targets.is_empty() {
            return Err(ClientError::IllegalState {
                group: group.clone(),
                reason: "receive before subscribe (or no master serves the subscribed topics)".into(),
            });
        }
        let (topic, selector, broker_name, addr) =
            &targets[self.inner.next.fetch_add(1, Ordering::Relaxed) % targets.len()];
        let poll = self.inner.config.await_duration;
        let header = PopMessageRequestHeader {
            consumer_group: group.clone(),
            topic: topic.clone(),
            queue_id: -1,
            max_msg_nums: max,
            invisible_time: invisible.as_millis() as i64,
            poll_time: poll.as_millis() as i64,
            born_time: crate::consumer_stats::epoch_ms(),
            init_mode: 1,
            exp_type: Some(selector.expression_type().to_owned()),
            exp: Some(selector.expression().to_owned()),
            order: Some(self.inner.config.fifo),
            attempt_id: None,
            broker_name: None,
        };
        let req = RemotingCommand::request(request_code::POP_MESSAGE).with_header(&header);
        // The broker may hold the request for the poll time: allow that plus the API timeout.
        let timeout = poll + self.inner.instance.config().mq_client_api_timeout;
        let resp = self
            .inner
            .instance
            .remoting()
            .invoke(addr, req, timeout)
            .await
            .map_err(|source| ClientError::Remoting { topic: topic.clone(), addr: addr.clone(), source })?;
        match resp.code {
            response_code::SUCCESS => {}
            response_code::POLLING_TIMEOUT | response_code::POLLING_FULL | response_code::PULL_NOT_FOUND => {
                debug!(topic = %topic, broker = %addr, code = resp.code, "receive: nothing");
                return Ok(Vec::new());
            }
            code => {
                return Err(ClientError::Broker {
                    topic: topic.clone(),
                    broker_addr: addr.clone(),
                    code,
                    remark: resp.remark.unwrap_or_default(),
                })
            }
        }
        let received = decode_pop_response(topic, broker_name, addr, &resp)?;
        // Tag hashes collide: a message whose tag the subscription does not name was matched
        // by hash; it is acknowledged here and not handed out (as the 5.x proxy does).
        let sub = selector.subscription(topic)?;
        let mut out = Vec::with_capacity(received.len());
        for m in received {
            let wanted = !sub.is_tag_type()
                || sub.tags_set.is_empty()
                || m.message.tags().is_some_and(|t| sub.tags_set.contains(t));
            if wanted {
                out.push(m);
            } else if let Err(e) = ack_received(&self.inner.instance, group, &m).await {
                debug!(error = %e, "ack of a tag-hash collision failed; it comes back and is dropped again");
            }
        }
        Ok(out)
    }

    /// Acknowledges a received message: it is not delivered again.
    ///
    /// # Errors
    /// A broker refusal (for instance NO_MESSAGE when the message is gone) or a transport error.
    pub async fn ack(&self, m: &ReceivedMessage) -> Result<(), ClientError> {
        ack_received(&self.inner.instance, &self.inner.config.group, m).await
    }

    /// Makes a received message visible again `invisible` from now (0: at once, a "nack").
    /// The message's receipt is replaced; the old one no longer acknowledges it.
    ///
    /// # Errors
    /// A broker refusal or a transport error.
    pub async fn change_invisible_duration(
        &self,
        m: &mut ReceivedMessage,
        invisible: Duration,
    ) -> Result<(), ClientError> {
        change_invisible(&self.inner.instance, &self.inner.config.group, m, invisible).await
    }

    /// Leaves the group (unregisters from every broker) and stops the client.
    pub async fn shutdown(&self) {
        self.inner.instance.unregister_consumer(&self.inner.config.group).await;
        self.inner.instance.shutdown().await;
    }
}

/// ACK_MESSAGE of a received message. Java: `MQClientAPIImpl#ackMessageAsync`.
pub(crate) async fn ack_received(
    instance: &ClientInstance,
    group: &str,
    m: &ReceivedMessage,
) -> Result<(), ClientError> {
    let header = AckMessageRequestHeader {
        consumer_group: group.to_owned(),
        topic: m.ack_topic(group),
        queue_id: m.message.message_queue.queue_id,
        extra_info: m.receipt.render(),
        offset: m.message.queue_offset(),
        broker_name: None,
    };
    let req = RemotingCommand::request(request_code::ACK_MESSAGE).with_header(&header);
    call(instance, &m.broker_addr, &header.topic, req).await.map(|_| ())
}

/// CHANGE_MESSAGE_INVISIBLETIME of a received message; its receipt is replaced by the new
/// one. Java: `MQClientAPIImpl#changeInvisibleTimeAsync`.
pub(crate) async fn change_invisible(
    instance: &ClientInstance,
    group: &str,
    m: &mut ReceivedMessage,
    invisible: Duration,
) -> Result<(), ClientError> {
    let header = ChangeInvisibleTimeRequestHeader {
        consumer_group: group.to_owned(),
        topic: m.ack_topic(group),
        queue_id: m.message.message_queue.queue_id,
        extra_info: m.receipt.render(),
        offset: m.message.queue_offset(),
        invisible_time: invisible.as_millis() as i64,
        broker_name: None,
    };
    let req = RemotingCommand::request(request_code::CHANGE_MESSAGE_INVISIBLETIME).with_header(&header);
    let resp = call(instance, &m.broker_addr, &header.topic, req).await?;
    let h: ChangeInvisibleTimeResponseHeader =
        resp.decode_header().map_err(|source| ClientError::Header { addr: m.broker_addr.clone(), source })?;
    // Java's client: the new checkpoint starts at the message itself.
    m.receipt.ck_queue_offset = m.message.queue_offset();
    m.receipt.pop_time = h.pop_time;
    m.receipt.invisible_time = h.invisible_time;
    m.receipt.revive_qid = h.revive_qid;
    Ok(())
}

async fn call(
    instance: &ClientInstance,
    addr: &str,
    topic: &str,
    req: RemotingCommand,
) -> Result<RemotingCommand, ClientError> {
    let resp = instance
        .remoting()
        .invoke(addr, req, instance.config().mq_client_api_timeout)
        .await
        .map_err(|source| ClientError::Remoting { topic: topic.to_owned(), addr: addr.to_owned(), source })?;
    if resp.code != response_code::SUCCESS {
        return Err(ClientError::Broker {
            topic: topic.to_owned(),
            broker_addr: addr.to_owned(),
            code: resp.code,
            remark: resp.remark.unwrap_or_default(),
        });
    }
    Ok(resp)
}

/// The messages of a POP_MESSAGE answer with their receipts, built as Java's client builds
/// them (`MQClientAPIImpl#processPopResponse`): the start offset of the message's queue (keyed
/// by the retry flag of the topic it was read from), the pop's time, invisible time and
/// revive queue, and for FIFO pops the reconsume count of `orderCountInfo`.
pub(crate) fn decode_pop_response(
    topic: &str,
    popped_from: &str,
    broker_addr: &str,
    resp: &RemotingCommand,
) -> Result<Vec<ReceivedMessage>, ClientError> {
    let bad = |reason: String| ClientError::Broker {
        topic: topic.to_owned(),
        broker_addr: broker_addr.to_owned(),
        code: resp.code,
        remark: reason,
    };
    let h: PopMessageResponseHeader =
        resp.decode_header().map_err(|source| ClientError::Header { addr: broker_addr.to_owned(), source })?;
    let starts =
        parse_start_offset_info(h.start_offset_info.as_deref().unwrap_or("")).map_err(|e| bad(e.to_string()))?;
    let offsets = parse_msg_offset_info(h.msg_offset_info.as_deref().unwrap_or("")).map_err(|e| bad(e.to_string()))?;
    let counts: HashMap<String, i32> =
        parse_order_count_info(h.order_count_info.as_deref().unwrap_or("")).map_err(|e| bad(e.to_string()))?;
    let mq = MessageQueue::new(topic, "", 0);
    let msgs = decode_pulled(&mq, &resp.body).map_err(|e| bad(format!("undecodable pop body: {e}")))?;
    let mut out = Vec::with_capacity(msgs.len());
    for mut m in msgs {
        let queue_id = m.stored.queue_id;
        let Some(receipt) =
            popped_extra_info(&h, &starts, popped_from, m.property(keys::POP_CK), queue_id, m.stored.queue_offset)
        else {
            return Err(bad(format!("no startOffsetInfo entry for a message of queue {queue_id}")));
        };
        let flag = receipt.retry_flag;
        let key = info_key(flag, queue_id);
        if !offsets.get(&key).is_some_and(|o| o.contains(&m.stored.queue_offset)) {
            return Err(bad(format!("msgOffsetInfo {key} does not list offset {}", m.stored.queue_offset)));
        }
        let reconsume_times = counts
            .get(&offset_info_key(flag, queue_id, m.stored.queue_offset))
            .or_else(|| counts.get(&key))
            .copied()
            .unwrap_or(m.stored.reconsume_times);
        m.message_queue = MessageQueue::new(topic, popped_from, queue_id);
        out.push(ReceivedMessage { message: m, receipt, broker_addr: broker_addr.to_owned(), reconsume_times });
    }
    Ok(out)
}
