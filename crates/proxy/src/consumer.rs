//! ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue on
//! top of the brokers' POP (Java: `ReceiveMessageActivity`, `AckMessageActivity`,
//! `ChangeInvisibleDurationActivity`, `ForwardMessageToDLQActivity`), and the proxy's
//! auto-renewal of push consumers' messages (Java: `ReceiptHandleProcessor`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferromq_protocol::body::{BatchAck, BatchAckMessageRequestBody, JsonBody};
use ferromq_protocol::header::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    ConsumerSendMsgBackRequestHeader, PopMessageRequestHeader, PopMessageResponseHeader,
};
use ferromq_protocol::message::{keys, StoredMessage};
use ferromq_protocol::pop::{
    info_key, offset_info_key, parse_order_count_info, parse_start_offset_info, popped_extra_info, ExtraInfo,
    POP_MAX_MSG_NUMS,
};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use tokio::sync::mpsc;
use tracing::debug;

use ferromq_broker::service::{AckRequest, ChangeInvisibleRequest, PopRequest, PopStatus, SendBackRequest};

use crate::context::CallContext;
use crate::convert::{self, Delivery};
use crate::filter::{pop_expression, subscription_data};
use crate::pb::{self, Code};
use crate::proxy::Proxy;
use crate::status::{self, bad, ProxyError, ProxyResult};
use crate::validate;

/// Invisible times of successive renewals (Java: `RenewStrategyPolicy`), ms; the last repeats.
const RENEW_STEPS_MS: [i64; 6] = [60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000];

/// The invisible time set on a message whose delivery to a vanished client failed.
const UNDELIVERED_INVISIBLE_MS: i64 = 1000;

/// One auto-renewed message.
#[derive(Debug, Clone)]
struct Renewal {
    client_id: String,
    topic: String,
    current: String,
    parsed: ExtraInfo,
    received: Instant,
    renewals: usize,
    failures: u32,
}

/// Auto-renewed receipt handles, keyed by (group, the handle the client holds).
#[derive(Debug)]
pub struct Renewals {
    map: Mutex<HashMap<(String, String), Renewal>>,
    max: usize,
}

impl Renewals {
    /// A table of at most `max` handles.
    pub fn new(max: usize) -> Self {
        Renewals { map: Mutex::new(HashMap::new()), max }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Renewal>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn insert(&self, group: &str, handle: &str, r: Renewal) -> bool {
        let mut m = self.lock();
        if m.len() >= self.max {
            return false;
        }
        m.insert((group.to_owned(), handle.to_owned()), r);
        true
    }

    /// The handle to use for the client's `handle` (the latest renewed one), removing it.
    fn take(&self, group: &str, handle: &str) -> Option<String> {
        self.lock().remove(&(group.to_owned(), handle.to_owned())).map(|r| r.current)
    }

    /// How many handles are tracked.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn now() -> i64 {
    convert::now_ms()
}

/// Parses a receipt handle; expired ones are refused as Java refuses them.
fn parse_handle(handle: &str) -> ProxyResult<ExtraInfo> {
    let parsed = ExtraInfo::parse(handle).map_err(|e| bad!(InvalidReceiptHandle, "receipt handle is invalid: {e}"))?;
    if parsed.queue_id.is_none() || parsed.queue_offset.is_none() {
        return Err(bad!(InvalidReceiptHandle, "receipt handle has no queue id or offset"));
    }
    if parsed.next_visible_time() <= now() {
        return Err(bad!(InvalidReceiptHandle, "receipt handle is expired"));
    }
    Ok(parsed)
}

/// What a receive needs from the client's Settings.
struct ReceiveSettings {
    fifo: bool,
    max_attempts: i32,
}

async fn receive_settings(p: &Proxy, ctx: &CallContext) -> ProxyResult<ReceiveSettings> {
    let wait = ctx.remaining().map_or(crate::clients::SETTINGS_WAIT, |d| d.min(crate::clients::SETTINGS_WAIT));
    p.clients
        .touch_when_known(&ctx.client_id, wait, |r| {
            let fifo = match &r.settings.pub_sub {
                Some(pb::settings::PubSub::Subscription(s)) => s.fifo.unwrap_or(false),
                _ => false,
            };
            let max_attempts = r.settings.backoff_policy.as_ref().map_or(17, |b| b.max_attempts.max(1));
            ReceiveSettings { fifo, max_attempts }
        })
        .await
        .ok_or_else(|| bad!(UnrecognizedClientType, "cannot find client settings for this client"))
}

/// The long polling time of a receive (grpc-proxy.md §6.5).
fn polling_time_ms(p: &Proxy, ctx: &CallContext, req: &pb::ReceiveMessageRequest) -> ProxyResult<i64> {
    let (min, max) = p.config.long_polling_bounds_ms();
    let remaining = ctx.remaining().map(|d| d.as_millis() as i64);
    let asked = match (&req.long_polling_timeout, remaining) {
        (Some(d), _) => convert::duration_ms(d),
        (None, Some(r)) => r - p.config.remoting_timeout_millis as i64 / 2,
        (None, None) => max,
    };
    let mut poll = asked.clamp(min, max);
    if let Some(r) = remaining {
        let room = r - p.config.long_polling_reserve_time_in_millis;
        if poll > room {
            if room >= min {
                poll = room;
            } else if ctx.client_version.is_empty() || ctx.version_at_least(5, 0, 3) {
                return Err(bad!(
                    IllegalPollingTime,
                    "the deadline leaves {r} ms, less than the polling time {min} ms"
                ));
            } else {
                return Err(bad!(BadRequest, "the deadline leaves {r} ms, less than the polling time {min} ms"));
            }
        }
    }
    Ok(poll)
}

/// The broker a receive pops from: the one the request names, else the next readable master.
async fn receive_broker(p: &Proxy, topic: &str, mq: Option<&pb::MessageQueue>) -> ProxyResult<(String, String)> {
    if let Some(name) = mq.and_then(|q| q.broker.as_ref()).map(|b| b.name.as_str()).filter(|n| !n.is_empty()) {
        return Ok((name.to_owned(), p.brokers.master_addr(topic, name).await?));
    }
    let route = p.brokers.route(topic).await?;
    let readable: Vec<(String, String)> = route
        .queue_datas
        .iter()
        .filter(|q| ferromq_protocol::body::perm::is_readable(q.perm) && q.read_queue_nums > 0)
        .filter_map(|q| {
            let bd = route.broker_datas.iter().find(|b| b.broker_name == q.broker_name)?;
            Some((bd.broker_name.clone(), bd.master_addr()?.to_owned()))
        })
        .collect();
    if readable.is_empty() {
        return Err(bad!(Forbidden, "no readable queue"));
    }
    let avoid = p.isolated_brokers();
    let healthy: Vec<&(String, String)> = readable.iter().filter(|(name, _)| !avoid.contains(name)).collect();
    let i = p.round_robin.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if healthy.is_empty() {
        Ok(readable[i % readable.len()].clone())
    } else {
        Ok(healthy[i % healthy.len()].clone())
    }
}

/// One popped message with its handle.
struct Popped {
    message: StoredMessage,
    handle: ExtraInfo,
    reconsume_times: i32,
}

fn decode_pop(broker_name: &str, resp: &RemotingCommand) -> ProxyResult<Vec<Popped>> {
    let h: PopMessageResponseHeader = resp
        .decode_header()
        .map_err(|e| bad!(InternalServerError, "broker {broker_name} sent an unreadable pop answer: {e}"))?;
    popped_messages(broker_name, &h, StoredMessage::iter_shared(Bytes::clone(&resp.body)))
}

/// The popped messages with their receipt handles, from a pop's header fields and records
/// (a remote broker's POP_MESSAGE answer or the local broker's service).
fn popped_messages<E: std::fmt::Display>(
    broker_name: &str,
    h: &PopMessageResponseHeader,
    records: impl Iterator<Item = Result<StoredMessage, E>>,
) -> ProxyResult<Vec<Popped>> {
    let bad_answer =
        |why: String| bad!(InternalServerError, "broker {broker_name} sent an unreadable pop answer: {why}");
    let starts =
        parse_start_offset_info(h.start_offset_info.as_deref().unwrap_or("")).map_err(|e| bad_answer(e.to_string()))?;
    let counts =
        parse_order_count_info(h.order_count_info.as_deref().unwrap_or("")).map_err(|e| bad_answer(e.to_string()))?;
    let mut out = Vec::new();
    for m in records {
        let m = m.map_err(|e| bad_answer(e.to_string()))?;
        let Some(mut handle) =
            popped_extra_info(h, &starts, broker_name, m.property(keys::POP_CK), m.queue_id, m.queue_offset)
        else {
            return Err(bad_answer(format!("no startOffsetInfo for queue {}", m.queue_id)));
        };
        handle.commit_log_offset = Some(m.physical_offset);
        let flag = handle.retry_flag;
        let reconsume_times = counts
            .get(&offset_info_key(flag, m.queue_id, m.queue_offset))
            .or_else(|| counts.get(&info_key(flag, m.queue_id)))
            .copied()
            .unwrap_or(m.reconsume_times);
        out.push(Popped { message: m, handle, reconsume_times });
    }
    Ok(out)
}

/// A pop on the broker in this process, through its service.
async fn pop_locally(
    service: &ferromq_broker::service::Service,
    ctx: &CallContext,
    broker_name: &str,
    header: &PopMessageRequestHeader,
) -> ProxyResult<Vec<Popped>> {
    let request = PopRequest {
        consumer_group: header.consumer_group.clone(),
        topic: header.topic.clone(),
        queue_id: None,
        max_msg_nums: header.max_msg_nums,
        invisible_time_ms: header.invisible_time,
        poll_time_ms: header.poll_time,
        born_time_ms: header.born_time,
        init_mode: header.init_mode,
        expression_type: header.exp_type.clone(),
        expression: header.exp.clone(),
        order: header.order == Some(true),
        attempt_id: header.attempt_id.clone(),
    };
    let popped = match service.pop(&crate::brokers::local_caller(ctx.peer), &request).await {
        Ok(p) => p,
        Err(e) if e.remoting_code() == response_code::POLLING_TIMEOUT => return Ok(Vec::new()),
        Err(e) => return Err(ProxyError::from_service(&e)),
    };
    match popped.status {
        PopStatus::Found => {}
        PopStatus::PollingTimeout => return Ok(Vec::new()),
        PopStatus::PollingFull => return Err(bad!(TooManyRequests, "polling full")),
    }
    let h = PopMessageResponseHeader {
        pop_time: popped.pop_time,
        invisible_time: popped.invisible_time,
        revive_qid: popped.revive_qid,
        rest_num: popped.rest_num,
        start_offset_info: popped.start_offset_info,
        msg_offset_info: popped.msg_offset_info,
        order_count_info: popped.order_count_info,
    };
    let records = popped.messages.into_iter().map(|b| StoredMessage::decode_shared(&b).map(|(m, _)| m));
    popped_messages(broker_name, &h, records)
}

/// POP_MESSAGE to a broker over remoting.
async fn pop_remotely(
    p: &Proxy,
    addr: &str,
    broker_name: &str,
    topic: &str,
    header: &PopMessageRequestHeader,
    poll_ms: i64,
) -> ProxyResult<Vec<Popped>> {
    let timeout = Duration::from_millis((poll_ms + p.config.remoting_timeout_millis as i64).max(1000) as u64);
    let resp = p
        .brokers
        .invoke(addr, RemotingCommand::request(request_code::POP_MESSAGE).with_header(header), Some(timeout))
        .await
        .inspect_err(|_| p.isolate(broker_name, topic))?;
    Ok(match resp.code {
        response_code::SUCCESS => decode_pop(broker_name, &resp)?,
        response_code::POLLING_TIMEOUT | response_code::NO_MESSAGE | response_code::PULL_NOT_FOUND => Vec::new(),
        response_code::POLLING_FULL => return Err(bad!(TooManyRequests, "polling full")),
        other => return Err(ProxyError::from_remoting(other, resp.remark.as_deref())),
    })
}

/// ReceiveMessage: one POP, then the messages on `tx` as Java's proxy streams them.
pub async fn receive(
    p: Arc<Proxy>,
    ctx: CallContext,
    req: pb::ReceiveMessageRequest,
    tx: mpsc::Sender<pb::ReceiveMessageResponse>,
) {
    let frames = match pop_for(&p, &ctx, &req).await {
        Ok(frames) => frames,
        Err(e) => {
            let _ = tx.send(content(pb::receive_message_response::Content::Status(e.to_status()))).await;
            return;
        }
    };
    let (group, topic, popped, auto_renew) = frames;
    if popped.is_empty() {
        let _ = tx
            .send(content(pb::receive_message_response::Content::Status(status::status(
                Code::MessageNotFound,
                "no new message",
            ))))
            .await;
        return;
    }
    if tx.send(content(pb::receive_message_response::Content::Status(status::ok()))).await.is_err() {
        release_undelivered(&p, &group, &topic, popped.iter().map(|(_, h)| h.clone()).collect()).await;
        return;
    }
    let mut rest = popped.into_iter();
    while let Some((message, handle)) = rest.next() {
        if tx.send(content(pb::receive_message_response::Content::Message(message))).await.is_err() {
            // The client went away: what it did not get comes back in a second, not after
            // the invisible time.
            let mut left = vec![handle];
            left.extend(rest.map(|(_, h)| h));
            if auto_renew {
                for h in &left {
                    p.renewals.take(&group, h);
                }
            }
            release_undelivered(&p, &group, &topic, left).await;
            return;
        }
    }
    let _ = tx.send(content(pb::receive_message_response::Content::DeliveryTimestamp(convert::timestamp(now())))).await;
}

fn content(c: pb::receive_message_response::Content) -> pb::ReceiveMessageResponse {
    pb::ReceiveMessageResponse { content: Some(c) }
}

type PopOutcome = (String, String, Vec<(pb::Message, String)>, bool);

async fn pop_for(p: &Arc<Proxy>, ctx: &CallContext, req: &pb::ReceiveMessageRequest) -> ProxyResult<PopOutcome> {
    let settings = receive_settings(p, ctx).await?;
    let poll_ms = polling_time_ms(p, ctx, req)?;
    let group = validate::group(req.group.as_ref())?;
    let mq = req.message_queue.as_ref();
    let topic = validate::topic(mq.and_then(|q| q.topic.as_ref()))?;
    let namespace = crate::namespace::namespace_of(mq.and_then(|q| q.topic.as_ref()));
    // Java merges the group's config into the client's Settings on every call
    // (GrpcClientSettingsManager#getClientSettings), by group name alone: a client whose
    // Settings name no subscription (rocketmq Rust 5.0.0's SimpleConsumer) still pops orderly
    // in a consumeMessageOrderly group and gets the group's retryMaxTimes.
    let settings = match p.brokers.group_config(&topic, &group).await {
        Ok(c) => ReceiveSettings { fifo: c.consume_message_orderly, max_attempts: c.retry_max_times.saturating_add(1) },
        Err(_) => settings,
    };
    let auto_renew = req.auto_renew && p.config.enable_proxy_auto_renew;
    let invisible_ms = if auto_renew {
        p.config.default_invisible_time_mills
    } else {
        let ms = req.invisible_duration.as_ref().map_or(-1, convert::duration_ms);
        if ms < p.config.min_invisible_time_mills_for_recv || ms > p.config.max_invisible_time_mills {
            return Err(bad!(
                IllegalInvisibleTime,
                "the invisible time must be in [{}, {}] ms",
                p.config.min_invisible_time_mills_for_recv,
                p.config.max_invisible_time_mills
            ));
        }
        ms
    };
    let expression = req.filter_expression.clone().unwrap_or_default();
    subscription_data(&topic, &expression)?;
    let (exp_type, exp) = pop_expression(&expression);
    let (broker_name, addr) = receive_broker(p, &topic, mq).await?;
    let batch = req.batch_size.clamp(1, POP_MAX_MSG_NUMS);
    let header = PopMessageRequestHeader {
        consumer_group: group.clone(),
        topic: topic.clone(),
        queue_id: -1,
        max_msg_nums: batch,
        invisible_time: invisible_ms,
        poll_time: poll_ms,
        born_time: now(),
        init_mode: 1,
        exp_type: Some(exp_type),
        exp: Some(exp),
        order: Some(settings.fifo),
        attempt_id: req.attempt_id.clone(),
        broker_name: Some(broker_name.clone()),
    };
    let popped = if let Some(service) = p.brokers.local_service(&addr) {
        pop_locally(&service, ctx, &broker_name, &header).await?
    } else {
        pop_remotely(p, &addr, &broker_name, &topic, &header, poll_ms).await?
    };
    let mut out = Vec::with_capacity(popped.len());
    for m in popped {
        let handle = m.handle.render();
        if m.reconsume_times >= settings.max_attempts && !settings.fifo {
            // Over its delivery attempts: the dead-letter queue, then acknowledged.
            let message_id =
                m.message.property(keys::UNIQ_KEY).map_or_else(|| m.message.offset_msg_id(), str::to_owned);
            if let Err(e) = forward_to_dlq(p, &group, &topic, &m.handle, &message_id).await {
                debug!(group, topic, error = %e, "moving an over-attempted message to the DLQ failed; it comes back");
            }
            continue;
        }
        if auto_renew {
            let r = Renewal {
                client_id: ctx.client_id.clone(),
                topic: topic.clone(),
                current: handle.clone(),
                parsed: m.handle.clone(),
                received: Instant::now(),
                renewals: 0,
                failures: 0,
            };
            if !p.renewals.insert(&group, &handle, r) {
                debug!(group, "auto-renew table full (renewMaxHandles): the message is not renewed");
            }
        }
        let message = convert::incoming(
            &m.message,
            Delivery {
                topic: topic.clone(),
                namespace: namespace.clone(),
                receipt_handle: Some(handle.clone()),
                invisible_ms: Some(invisible_ms),
                reconsume_times: m.reconsume_times,
            },
        );
        out.push((message, handle));
    }
    Ok((group, topic, out, auto_renew))
}

async fn release_undelivered(p: &Proxy, group: &str, topic: &str, handles: Vec<String>) {
    for h in handles {
        if let Ok(parsed) = ExtraInfo::parse(&h) {
            if let Err(e) = change_invisible(p, group, topic, &parsed, &h, UNDELIVERED_INVISIBLE_MS).await {
                debug!(group, topic, error = %e, "could not release an undelivered message; it returns after its invisible time");
            }
        }
    }
}

async fn broker_of(p: &Proxy, topic: &str, handle: &ExtraInfo) -> ProxyResult<String> {
    p.brokers.master_addr(topic, &handle.broker_name).await
}

async fn ack_one(p: &Proxy, group: &str, topic: &str, handle_text: &str) -> ProxyResult<()> {
    let handle = parse_handle(handle_text)?;
    let addr = broker_of(p, topic, &handle).await?;
    let ack = AckRequest {
        consumer_group: group.to_owned(),
        topic: handle.retry_flag.real_topic(topic, group),
        queue_id: handle.queue_id.unwrap_or_default(),
        offset: handle.queue_offset.unwrap_or_default(),
        extra_info: handle_text.to_owned(),
    };
    if let Some(service) = p.brokers.local_service(&addr) {
        return service.ack(&crate::brokers::local_caller(None), &ack).await.map_err(|e| ProxyError::from_service(&e));
    }
    let header = AckMessageRequestHeader {
        consumer_group: ack.consumer_group,
        topic: ack.topic,
        queue_id: ack.queue_id,
        extra_info: ack.extra_info,
        offset: ack.offset,
        broker_name: Some(handle.broker_name.clone()),
    };
    let resp =
        p.brokers.invoke(&addr, RemotingCommand::request(request_code::ACK_MESSAGE).with_header(&header), None).await?;
    match resp.code {
        response_code::SUCCESS => Ok(()),
        other => Err(ProxyError::from_remoting(other, resp.remark.as_deref())),
    }
}

/// `enableBatchAck`: the entries of one AckMessage acknowledged with one BATCH_ACK_MESSAGE
/// per broker (Java: `ConsumerProcessor#batchAckMessage`); a broker's answer is each of its
/// entries' status. The local broker acks each through its service (no frame to save).
async fn batch_ack(
    p: &Proxy,
    group: &str,
    topic: &str,
    entries: Vec<pb::AckMessageEntry>,
) -> Vec<pb::AckMessageResultEntry> {
    let mut statuses: Vec<Option<pb::Status>> = vec![None; entries.len()];
    // broker name -> (entry index, handle text, parsed handle)
    let mut by_broker: HashMap<String, Vec<(usize, String, ExtraInfo)>> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        let handle = p.renewals.take(group, &e.receipt_handle).unwrap_or_else(|| e.receipt_handle.clone());
        match parse_handle(&handle) {
            Ok(parsed) => by_broker.entry(parsed.broker_name.clone()).or_default().push((i, handle, parsed)),
            Err(err) => statuses[i] = Some(err.to_status()),
        }
    }
    for (broker_name, acks) in by_broker {
        let outcome = match p.brokers.master_addr(topic, &broker_name).await {
            Ok(addr) => ack_on_broker(p, group, topic, &addr, &broker_name, &acks).await,
            Err(e) => Err(e),
        };
        for (i, _, _) in &acks {
            statuses[*i] = Some(match &outcome {
                Ok(()) => status::ok(),
                Err(e) => e.to_status(),
            });
        }
    }
    entries
        .into_iter()
        .zip(statuses)
        .map(|(e, status)| pb::AckMessageResultEntry {
            message_id: e.message_id,
            receipt_handle: e.receipt_handle,
            status: Some(status.unwrap_or_else(status::ok)),
        })
        .collect()
}

/// One broker's share of a batch ack.
async fn ack_on_broker(
    p: &Proxy,
    group: &str,
    topic: &str,
    addr: &str,
    broker_name: &str,
    acks: &[(usize, String, ExtraInfo)],
) -> ProxyResult<()> {
    if p.brokers.local_service(addr).is_some() {
        for (_, text, _) in acks {
            ack_one(p, group, topic, text).await?;
        }
        return Ok(());
    }
    let body = batch_ack_body(group, topic, broker_name, acks.iter().map(|(_, _, h)| h));
    let request = RemotingCommand::request(request_code::BATCH_ACK_MESSAGE).with_body(body.encode());
    let resp = p.brokers.invoke(addr, request, None).await?;
    match resp.code {
        response_code::SUCCESS => Ok(()),
        other => Err(ProxyError::from_remoting(other, resp.remark.as_deref())),
    }
}

/// BATCH_ACK_MESSAGE's body: one `BatchAck` per checkpoint (retry flag, queue, start offset,
/// pop time, revive queue, invisible time), its bits the acknowledged offsets from the start.
fn batch_ack_body<'a>(
    group: &str,
    topic: &str,
    broker_name: &str,
    handles: impl Iterator<Item = &'a ExtraInfo>,
) -> BatchAckMessageRequestBody {
    let mut checkpoints: Vec<(BatchAck, Vec<u32>)> = Vec::new();
    for h in handles {
        let queue_id = h.queue_id.unwrap_or_default();
        let index = h.queue_offset.unwrap_or_default() - h.ck_queue_offset;
        let Ok(index) = u32::try_from(index) else { continue };
        let same = |b: &BatchAck| {
            b.retry == h.retry_flag.as_str()
                && b.queue_id == queue_id
                && b.start_offset == h.ck_queue_offset
                && b.pop_time == h.pop_time
                && b.revive_queue_id == h.revive_qid
                && b.invisible_time == h.invisible_time
        };
        match checkpoints.iter_mut().find(|(b, _)| same(b)) {
            Some((_, indexes)) => indexes.push(index),
            None => checkpoints.push((
                BatchAck {
                    consumer_group: group.to_owned(),
                    topic: topic.to_owned(),
                    retry: h.retry_flag.as_str().to_owned(),
                    start_offset: h.ck_queue_offset,
                    queue_id,
                    revive_queue_id: h.revive_qid,
                    pop_time: h.pop_time,
                    invisible_time: h.invisible_time,
                    bit_set: String::new(),
                },
                vec![index],
            )),
        }
    }
    let acks = checkpoints
        .into_iter()
        .map(|(mut b, indexes)| {
            b.set_acked_indexes(&indexes);
            b
        })
        .collect();
    BatchAckMessageRequestBody { acks, broker_name: Some(broker_name.to_owned()) }
}

/// AckMessage: each entry acknowledged on the broker its handle names.
pub async fn ack(p: &Proxy, req: pb::AckMessageRequest) -> pb::AckMessageResponse {
    let checked = validate::group(req.group.as_ref()).and_then(|g| validate::topic(req.topic.as_ref()).map(|t| (g, t)));
    let (group, topic) = match checked {
        Ok(gt) => gt,
        Err(e) => return pb::AckMessageResponse { status: Some(e.to_status()), entries: Vec::new() },
    };
    let mut entries = Vec::with_capacity(req.entries.len());
    if p.config.enable_batch_ack {
        entries = batch_ack(p, &group, &topic, req.entries).await;
    } else {
        for e in req.entries {
            let handle = p.renewals.take(&group, &e.receipt_handle).unwrap_or_else(|| e.receipt_handle.clone());
            let status = match ack_one(p, &group, &topic, &handle).await {
                Ok(()) => status::ok(),
                Err(err) => err.to_status(),
            };
            entries.push(pb::AckMessageResultEntry {
                message_id: e.message_id,
                receipt_handle: e.receipt_handle,
                status: Some(status),
            });
        }
    }
    let status = match entries.first().and_then(|e| e.status.clone()) {
        Some(first) if entries.iter().all(|e| e.status.as_ref().map(|s| s.code) == Some(first.code)) => first,
        Some(_) => status::status(Code::MultipleResults, "multiple results"),
        None => status::ok(),
    };
    pb::AckMessageResponse { status: Some(status), entries }
}

/// CHANGE_MESSAGE_INVISIBLETIME for `handle`; returns the new handle.
async fn change_invisible(
    p: &Proxy,
    group: &str,
    topic: &str,
    handle: &ExtraInfo,
    text: &str,
    invisible_ms: i64,
) -> ProxyResult<ExtraInfo> {
    let addr = broker_of(p, topic, handle).await?;
    let change = ChangeInvisibleRequest {
        consumer_group: group.to_owned(),
        topic: handle.retry_flag.real_topic(topic, group),
        queue_id: handle.queue_id.unwrap_or_default(),
        offset: handle.queue_offset.unwrap_or_default(),
        extra_info: text.to_owned(),
        invisible_time: invisible_ms,
    };
    let h = if let Some(service) = p.brokers.local_service(&addr) {
        let c = service
            .change_invisible_time(&crate::brokers::local_caller(None), &change)
            .await
            .map_err(|e| ProxyError::from_service(&e))?;
        ChangeInvisibleTimeResponseHeader {
            pop_time: c.pop_time,
            invisible_time: c.invisible_time,
            revive_qid: c.revive_qid,
        }
    } else {
        let header = ChangeInvisibleTimeRequestHeader {
            consumer_group: change.consumer_group,
            topic: change.topic,
            queue_id: change.queue_id,
            extra_info: change.extra_info,
            offset: change.offset,
            invisible_time: change.invisible_time,
            broker_name: Some(handle.broker_name.clone()),
        };
        let resp = p
            .brokers
            .invoke(
                &addr,
                RemotingCommand::request(request_code::CHANGE_MESSAGE_INVISIBLETIME).with_header(&header),
                None,
            )
            .await?;
        if resp.code != response_code::SUCCESS {
            return Err(ProxyError::from_remoting(resp.code, resp.remark.as_deref()));
        }
        resp.decode_header().map_err(|e| bad!(InternalServerError, "unreadable change-invisible answer: {e}"))?
    };
    Ok(ExtraInfo {
        ck_queue_offset: handle.queue_offset.unwrap_or_default(),
        pop_time: h.pop_time,
        invisible_time: h.invisible_time,
        revive_qid: h.revive_qid,
        ..handle.clone()
    })
}

/// ChangeInvisibleDuration: the message stays hidden `invisible_duration` from now; the answer
/// carries the handle to use from then on.
pub async fn change_invisible_duration(p: &Proxy, req: pb::ChangeInvisibleDurationRequest) -> ProxyResult<String> {
    let group = validate::group(req.group.as_ref())?;
    let topic = validate::topic(req.topic.as_ref())?;
    let ms = req.invisible_duration.as_ref().map_or(-1, convert::duration_ms);
    if !(0..=p.config.max_invisible_time_mills).contains(&ms) {
        return Err(bad!(
            IllegalInvisibleTime,
            "the invisible time must be in [0, {}] ms",
            p.config.max_invisible_time_mills
        ));
    }
    // A nack of an auto-renewed message ends its renewal.
    let text = p.renewals.take(&group, &req.receipt_handle).unwrap_or(req.receipt_handle);
    let handle = parse_handle(&text)?;
    Ok(change_invisible(p, &group, &topic, &handle, &text, ms).await?.render())
}

async fn forward_to_dlq(p: &Proxy, group: &str, topic: &str, handle: &ExtraInfo, message_id: &str) -> ProxyResult<()> {
    let Some(commit_log_offset) = handle.commit_log_offset else {
        return Err(bad!(InvalidReceiptHandle, "commit log offset is empty"));
    };
    let addr = broker_of(p, topic, handle).await?;
    // Straight to the dead-letter topic (delay level -1, no reconsume left).
    let back = SendBackRequest {
        group: group.to_owned(),
        offset: commit_log_offset,
        delay_level: -1,
        max_reconsume_times: Some(0),
    };
    if let Some(service) = p.brokers.local_service(&addr) {
        service
            .send_back(&crate::brokers::local_caller(None), &back)
            .await
            .map_err(|e| ProxyError::from_service(&e))?;
    } else {
        let header = ConsumerSendMsgBackRequestHeader {
            offset: back.offset,
            group: back.group,
            delay_level: back.delay_level,
            origin_msg_id: Some(message_id.to_owned()),
            origin_topic: Some(handle.retry_flag.real_topic(topic, group)),
            unit_mode: Some(false),
            max_reconsume_times: back.max_reconsume_times,
            broker_name: Some(handle.broker_name.clone()),
        };
        let resp = p
            .brokers
            .invoke(&addr, RemotingCommand::request(request_code::CONSUMER_SEND_MSG_BACK).with_header(&header), None)
            .await?;
        if resp.code != response_code::SUCCESS {
            return Err(ProxyError::from_remoting(resp.code, resp.remark.as_deref()));
        }
    }
    ack_one(p, group, topic, &handle.render()).await
}

/// ForwardMessageToDeadLetterQueue.
pub async fn forward_message_to_dlq(p: &Proxy, req: pb::ForwardMessageToDeadLetterQueueRequest) -> ProxyResult<()> {
    let group = validate::group(req.group.as_ref())?;
    let topic = validate::topic(req.topic.as_ref())?;
    let text = p.renewals.take(&group, &req.receipt_handle).unwrap_or(req.receipt_handle);
    let handle = parse_handle(&text)?;
    forward_to_dlq(p, &group, &topic, &handle, &req.message_id).await
}

/// Renews the auto-renewed handles whose invisibility ends within `renewAheadTimeMillis`.
pub async fn renew_due(p: &Proxy) {
    let now_ms = now();
    let ahead = p.config.renew_ahead_time_millis;
    let max_hold = Duration::from_millis(p.config.renew_max_time_millis.max(0) as u64);
    let due: Vec<((String, String), Renewal)> = p
        .renewals
        .lock()
        .iter()
        .filter(|(_, r)| r.parsed.next_visible_time() - now_ms <= ahead)
        .map(|(k, r)| (k.clone(), r.clone()))
        .collect();
    for ((group, original), r) in due {
        if r.received.elapsed() >= max_hold {
            p.renewals.take(&group, &original);
            continue;
        }
        let step = RENEW_STEPS_MS[r.renewals.min(RENEW_STEPS_MS.len() - 1)];
        match change_invisible(p, &group, &r.topic, &r.parsed, &r.current, step).await {
            Ok(next) => {
                if let Some(e) = p.renewals.lock().get_mut(&(group.clone(), original.clone())) {
                    e.current = next.render();
                    e.parsed = next;
                    e.renewals += 1;
                    e.failures = 0;
                }
            }
            Err(err) => {
                let mut m = p.renewals.lock();
                if let Some(e) = m.get_mut(&(group.clone(), original.clone())) {
                    e.failures += 1;
                    if e.failures >= p.config.max_renew_retry_times || r.parsed.next_visible_time() <= now_ms {
                        debug!(group, client_id = %r.client_id, error = %err, "renewal given up; the message returns when visible");
                        m.remove(&(group, original));
                    }
                }
            }
        }
    }
}

/// A client went away: its auto-renewed messages become visible in
/// `invisibleTimeMillisWhenClear`.
pub async fn clear_client_handles(p: &Proxy, client_id: &str) {
    let mine: Vec<((String, String), Renewal)> = {
        let mut m = p.renewals.lock();
        let keys: Vec<(String, String)> =
            m.iter().filter(|(_, r)| r.client_id == client_id).map(|(k, _)| k.clone()).collect();
        keys.into_iter().filter_map(|k| m.remove(&k).map(|r| (k, r))).collect()
    };
    for ((group, _), r) in mine {
        if let Err(e) =
            change_invisible(p, &group, &r.topic, &r.parsed, &r.current, p.config.invisible_time_millis_when_clear)
                .await
        {
            debug!(group, client_id, error = %e, "could not hand a message back early");
        }
    }
}

#[cfg(test)]
mod batch_ack_tests {
    use ferromq_protocol::pop::RetryFlag;

    use super::*;

    fn handle(ck: i64, offset: i64, pop_time: i64) -> ExtraInfo {
        ExtraInfo {
            ck_queue_offset: ck,
            pop_time,
            invisible_time: 60_000,
            revive_qid: 3,
            retry_flag: RetryFlag::Normal,
            broker_name: "b1".into(),
            queue_id: Some(1),
            queue_offset: Some(offset),
            commit_log_offset: None,
        }
    }

    #[test]
    fn one_batch_ack_per_checkpoint_with_the_offsets_as_bits() {
        let handles = [handle(10, 10, 5), handle(10, 12, 5), handle(20, 29, 6), handle(10, 9, 5)];
        let body = batch_ack_body("G", "T", "b1", handles.iter());
        assert_eq!(body.broker_name.as_deref(), Some("b1"));
        assert_eq!(body.acks.len(), 2, "two checkpoints; the offset before its start is left out");
        let first = &body.acks[0];
        assert_eq!((first.start_offset, first.pop_time, first.queue_id, first.revive_queue_id), (10, 5, 1, 3));
        assert_eq!((first.consumer_group.as_str(), first.topic.as_str(), first.retry.as_str()), ("G", "T", "0"));
        assert_eq!(first.acked_indexes(), Some(vec![0, 2]));
        assert_eq!(body.acks[1].acked_indexes(), Some(vec![9]));
    }
}
