//! SendMessage, EndTransaction and RecallMessage (Java: `SendMessageActivity`,
//! `EndTransactionActivity`, `RecallMessageActivity`, `ProducerProcessor`).

use std::time::{Duration, Instant};

use ferromq_broker::service::{
    AutoCreate, BatchMessage, EndTransactionRequest, SendBody, SendRequest, SendStatus, TransactionDecision,
};

use ferromq_protocol::header::{
    EndTransactionRequestHeader, RecallMessageRequestHeader, RecallMessageResponseHeader, SendMessageRequestHeader,
    SendMessageRequestHeaderV2, SendMessageResponseHeader,
};
use ferromq_protocol::message::{decode_offset_msg_id, encode_batch, sysflag, BatchEntry};
use ferromq_protocol::topic_validator::is_retry_or_dlq_topic;
use ferromq_protocol::{request_code, response_code, RemotingCommand};

use crate::context::CallContext;
use crate::convert::{self, check_message_type, OutgoingMessage};
use crate::pb::{self, Code, TransactionResolution, TransactionSource};
use crate::proxy::{Proxy, TransactionData};
use crate::route::select_queue;
use crate::status::{self, bad, ProxyError, ProxyResult};
use crate::validate;

/// Java's `TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`.
const DEFAULT_TOPIC: &str = "TBW102";

/// SendMessage: validated as a whole, then one SEND_MESSAGE_V2 (or one SEND_BATCH_MESSAGE for
/// several messages) to one queue.
pub async fn send_message(p: &Proxy, ctx: &CallContext, req: pb::SendMessageRequest) -> pb::SendMessageResponse {
    let count = req.messages.len();
    match send(p, ctx, req).await {
        Ok(entries) => {
            let first = entries.first().and_then(|e| e.status.as_ref()).map(|s| s.code);
            let status = if entries.iter().all(|e| e.status.as_ref().map(|s| s.code) == first) {
                entries[0].status.clone().unwrap_or_else(status::ok)
            } else {
                status::status(Code::MultipleResults, "multiple results")
            };
            pb::SendMessageResponse { status: Some(status), entries }
        }
        Err(e) => pb::SendMessageResponse {
            status: Some(e.to_status()),
            entries: (0..count)
                .map(|_| pb::SendResultEntry { status: Some(e.to_status()), ..Default::default() })
                .collect(),
        },
    }
}

async fn send(p: &Proxy, ctx: &CallContext, req: pb::SendMessageRequest) -> ProxyResult<Vec<pb::SendResultEntry>> {
    let Some(first) = req.messages.first() else {
        return Err(bad!(MessageCorrupted, "no message to send"));
    };
    let topic = validate::topic(first.topic.as_ref())?;
    if req.messages.iter().any(|m| m.topic.as_ref().map(crate::namespace::of).as_deref() != Some(topic.as_str())) {
        return Err(bad!(MessageCorrupted, "the messages of one request must share one topic"));
    }
    let queues = p.brokers.writable_queues(&topic).await?;
    let now = convert::now_ms();
    let mut out = Vec::with_capacity(req.messages.len());
    for m in req.messages {
        let mut o = convert::outgoing(m, &topic, &p.limits, now)?;
        if !o.properties.contains_key(ferromq_protocol::message::keys::BORN_HOST) {
            if let Some(peer) = ctx.peer {
                o.properties.insert(ferromq_protocol::message::keys::BORN_HOST, peer.to_string());
            }
        }
        out.push(o);
    }
    if p.config.enable_topic_message_type_check && !is_retry_or_dlq_topic(&topic) {
        let topic_type = p.brokers.topic_message_type(&topic).await;
        for o in &out {
            check_message_type(topic_type, o.message_type)?;
        }
    }
    if out.len() > 1 && out.iter().any(|o| o.message_type == crate::brokers::TopicMessageType::Transaction) {
        return Err(bad!(MessageCorrupted, "transactional messages cannot be sent as a batch"));
    }
    let avoid = p.isolated_brokers();
    let queue = select_queue(&queues, out[0].message_group.as_deref(), &p.round_robin, &avoid)?.clone();
    let timeout = ctx.remaining().filter(|d| !d.is_zero());
    let stored = match p.brokers.local_service(&queue.addr) {
        Some(service) => store_locally(&service, ctx, &topic, queue.queue_id, &mut out).await,
        None => store_remotely(p, &topic, &queue, &out, timeout).await,
    };
    let h = stored.inspect_err(|e| {
        if e.code == Code::TopicNotFound {
            p.brokers.invalidate_route(&topic);
        }
    })?;
    let code = h.code;
    let msg_ids: Vec<&str> = h.msg_id.split(',').collect();
    let mut entries = Vec::with_capacity(out.len());
    for (i, o) in out.iter().enumerate() {
        let offset_msg_id = msg_ids.get(i).copied().unwrap_or_default();
        let mut entry = pb::SendResultEntry {
            status: Some(status::status(code, if code == Code::Ok { "OK".to_owned() } else { format!("{code:?}") })),
            message_id: o.message_id.clone(),
            transaction_id: String::new(),
            offset: h.queue_offset + i as i64,
            recall_handle: h.recall_handle.clone().unwrap_or_default(),
        };
        if o.message_type == crate::brokers::TopicMessageType::Transaction {
            let tid = h.transaction_id.clone().filter(|t| !t.is_empty()).unwrap_or_else(|| offset_msg_id.to_owned());
            let commit_log_offset = decode_offset_msg_id(offset_msg_id).map(|(_, o)| o).unwrap_or(-1);
            let data = TransactionData {
                broker_name: queue.broker_name.clone(),
                tran_state_table_offset: h.queue_offset,
                commit_log_offset,
                message_id: o.message_id.clone(),
                expires: Instant::now()
                    + Duration::from_secs(o.check_immunity_secs.unwrap_or(60))
                    + p.transaction_data_ttl(),
            };
            if !p.remember_transaction(&topic, &tid, data) {
                tracing::warn!(
                    topic,
                    "transaction table full (transactionDataMaxTotal): this one ends by broker check"
                );
            }
            entry.transaction_id = tid;
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// What the broker answered to a stored send, from either path.
struct Stored {
    code: Code,
    msg_id: String,
    queue_offset: i64,
    transaction_id: Option<String>,
    recall_handle: Option<String>,
}

/// Local mode: the broker's service in process, no frame (design.md 3.1).
async fn store_locally(
    service: &ferromq_broker::service::Service,
    ctx: &CallContext,
    topic: &str,
    queue_id: i32,
    out: &mut [OutgoingMessage],
) -> ProxyResult<Stored> {
    // The body and properties move to the broker: the answer needs neither (no retry on
    // another queue reuses them), and a copy of the properties was a measurable share of a send.
    let message = |o: &mut OutgoingMessage| BatchMessage {
        body: std::mem::take(&mut o.body),
        properties: std::mem::take(&mut o.properties),
        flag: 0,
    };
    let body = if out.len() == 1 {
        SendBody::One(message(&mut out[0]))
    } else {
        SendBody::Batch { messages: out.iter_mut().map(message).collect(), properties: Default::default() }
    };
    let first = &out[0];
    let request = SendRequest {
        producer_group: topic.to_owned(),
        topic: topic.to_owned(),
        queue_id: Some(queue_id),
        sys_flag: first.sys_flag,
        born_timestamp_ms: first.born_timestamp_ms,
        reconsume_times: first.reconsume_times,
        max_reconsume_times: None,
        auto_create: Some(AutoCreate { default_topic: DEFAULT_TOPIC.to_owned(), queue_nums: 4 }),
        body,
    };
    let receipt = service
        .send(&crate::brokers::local_caller(ctx.peer), request)
        .await
        .map_err(|e| ProxyError::from_service(&e))?;
    let code = match receipt.status {
        SendStatus::Ok => Code::Ok,
        SendStatus::FlushDiskTimeout => Code::MasterPersistenceTimeout,
        SendStatus::FlushSlaveTimeout => Code::SlavePersistenceTimeout,
        SendStatus::SlaveNotAvailable => Code::HaNotAvailable,
    };
    Ok(Stored {
        code,
        msg_id: receipt.msg_id,
        queue_offset: receipt.queue_offset,
        transaction_id: receipt.transaction_id,
        recall_handle: receipt.recall_handle,
    })
}

/// Cluster mode (and brokers of other processes): SEND_MESSAGE_V2, or SEND_BATCH_MESSAGE for
/// several messages.
async fn store_remotely(
    p: &Proxy,
    topic: &str,
    queue: &crate::route::WritableQueue,
    out: &[OutgoingMessage],
    timeout: Option<Duration>,
) -> ProxyResult<Stored> {
    let request = if out.len() == 1 {
        let o = &out[0];
        let header = send_header(topic, queue.queue_id, o, &queue.broker_name, false);
        RemotingCommand::request(request_code::SEND_MESSAGE_V2)
            .with_header(&SendMessageRequestHeaderV2::from(header))
            .with_body(o.body.clone())
    } else {
        let entries: Vec<BatchEntry> = out
            .iter()
            .map(|o| BatchEntry { flag: 0, body: o.body.clone(), properties: o.properties.encode() })
            .collect();
        let body = encode_batch(&entries).map_err(|e| bad!(MessageCorrupted, "batch cannot be encoded: {e}"))?;
        let mut header = send_header(topic, queue.queue_id, &out[0], &queue.broker_name, true);
        header.properties = None;
        RemotingCommand::request(request_code::SEND_BATCH_MESSAGE)
            .with_header(&SendMessageRequestHeaderV2::from(header))
            .with_body(body.freeze())
    };
    // The queue comes from the route's queueDatas: a physical one, also on a static topic.
    let mut request = request;
    request.ext_fields.insert(ferromq_protocol::ext_fields::intern_key("lo"), "false");
    // A broker that cannot be reached is avoided for a while; the client's retry of this
    // send goes elsewhere.
    let resp =
        p.brokers.invoke(&queue.addr, request, timeout).await.inspect_err(|_| p.isolate(&queue.broker_name, topic))?;
    let code = match resp.code {
        response_code::SUCCESS => Code::Ok,
        response_code::FLUSH_DISK_TIMEOUT => Code::MasterPersistenceTimeout,
        response_code::FLUSH_SLAVE_TIMEOUT => Code::SlavePersistenceTimeout,
        response_code::SLAVE_NOT_AVAILABLE => Code::HaNotAvailable,
        other => return Err(ProxyError::from_remoting(other, resp.remark.as_deref())),
    };
    let h: SendMessageResponseHeader = resp
        .decode_header()
        .map_err(|e| bad!(InternalServerError, "broker {} sent an unreadable answer: {e}", queue.addr))?;
    Ok(Stored {
        code,
        msg_id: h.msg_id,
        queue_offset: h.queue_offset,
        transaction_id: h.transaction_id,
        recall_handle: h.recall_handle,
    })
}

fn send_header(
    topic: &str,
    queue_id: i32,
    o: &OutgoingMessage,
    broker_name: &str,
    batch: bool,
) -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: topic.to_owned(),
        topic: topic.to_owned(),
        default_topic: DEFAULT_TOPIC.to_owned(),
        default_topic_queue_nums: 4,
        queue_id,
        sys_flag: o.sys_flag,
        born_timestamp: o.born_timestamp_ms,
        flag: 0,
        properties: Some(o.properties.encode()),
        reconsume_times: Some(o.reconsume_times),
        unit_mode: Some(false),
        batch: Some(batch),
        max_reconsume_times: None,
        broker_name: Some(broker_name.to_owned()),
    }
}

/// EndTransaction: COMMIT or ROLLBACK of a half message this proxy sent or a broker asked
/// about. Java sends END_TRANSACTION oneway and answers OK at once; FerroMQ waits for the
/// broker's answer so a lost request is an error the client sees (docs/decisions/0012).
pub async fn end_transaction(p: &Proxy, ctx: &CallContext, req: pb::EndTransactionRequest) -> ProxyResult<()> {
    let topic = validate::topic(req.topic.as_ref())?;
    if req.transaction_id.trim().is_empty() {
        return Err(bad!(InvalidTransactionId, "transaction id cannot be empty"));
    }
    let commit_or_rollback = match TransactionResolution::try_from(req.resolution) {
        Ok(TransactionResolution::Commit) => sysflag::TRANSACTION_COMMIT_TYPE,
        Ok(TransactionResolution::Rollback) => sysflag::TRANSACTION_ROLLBACK_TYPE,
        _ => sysflag::TRANSACTION_NOT_TYPE,
    };
    let Some(data) = p.transactions.take(&topic, &req.transaction_id) else {
        return Err(bad!(
            InternalServerError,
            "transaction data not found: topic {topic}, transaction id {} (the broker's check will resolve it)",
            req.transaction_id
        ));
    };
    let addr = match p.brokers.master_addr(&topic, &data.broker_name).await {
        Ok(a) => a,
        Err(e) => {
            p.remember_transaction(&topic, &req.transaction_id, data);
            return Err(e);
        }
    };
    let header = EndTransactionRequestHeader {
        topic: Some(topic.clone()),
        producer_group: topic.clone(),
        tran_state_table_offset: data.tran_state_table_offset,
        commit_log_offset: data.commit_log_offset,
        commit_or_rollback,
        from_transaction_check: Some(req.source == TransactionSource::SourceServerCheck as i32),
        msg_id: if req.message_id.is_empty() { data.message_id.clone() } else { req.message_id.clone() },
        transaction_id: Some(req.transaction_id.clone()),
        broker_name: Some(data.broker_name.clone()),
    };
    if let Some(service) = p.brokers.local_service(&addr) {
        let end = EndTransactionRequest {
            producer_group: header.producer_group,
            tran_state_table_offset: header.tran_state_table_offset,
            commit_log_offset: header.commit_log_offset,
            decision: match commit_or_rollback {
                sysflag::TRANSACTION_COMMIT_TYPE => TransactionDecision::Commit,
                sysflag::TRANSACTION_ROLLBACK_TYPE => TransactionDecision::Rollback,
                _ => TransactionDecision::Unknown,
            },
            from_transaction_check: header.from_transaction_check == Some(true),
            msg_id: header.msg_id,
        };
        // Refused here, the broker's check-back resolves it (as a lost remoting answer).
        return service
            .end_transaction(&crate::brokers::local_caller(ctx.peer), &end)
            .await
            .map(drop)
            .map_err(|e| ProxyError::from_service(&e));
    }
    let request = RemotingCommand::request(request_code::END_TRANSACTION).with_header(&header);
    match p.brokers.invoke(&addr, request, ctx.remaining().filter(|d| !d.is_zero())).await {
        Ok(resp) if resp.code == response_code::SUCCESS => Ok(()),
        Ok(resp) => Err(ProxyError::from_remoting(resp.code, resp.remark.as_deref())),
        Err(e) => {
            p.remember_transaction(&topic, &req.transaction_id, data);
            Err(e)
        }
    }
}

/// RecallMessage: the broker named in the handle cancels a pending delayed message. The
/// handle is opaque here: each master of the topic is asked until one holds it (a broker
/// refuses handles naming another broker).
pub async fn recall_message(p: &Proxy, req: pb::RecallMessageRequest) -> ProxyResult<String> {
    let topic = validate::topic(req.topic.as_ref())?;
    if req.recall_handle.trim().is_empty() {
        return Err(bad!(BadRequest, "recall handle is invalid"));
    }
    let route = p.brokers.route(&topic).await?;
    let mut last = bad!(Forbidden, "no master of topic {topic}");
    for bd in &route.broker_datas {
        let Some(addr) = bd.master_addr() else { continue };
        let request = RemotingCommand::request(request_code::RECALL_MESSAGE).with_header(&RecallMessageRequestHeader {
            producer_group: Some(topic.clone()),
            topic: topic.clone(),
            recall_handle: req.recall_handle.clone(),
            broker_name: Some(bd.broker_name.clone()),
        });
        let resp = p.brokers.invoke(addr, request, None).await?;
        if resp.code == response_code::SUCCESS {
            let h: RecallMessageResponseHeader =
                resp.decode_header().unwrap_or(RecallMessageResponseHeader { msg_id: None });
            return Ok(h.msg_id.unwrap_or_default());
        }
        last = ProxyError::from_remoting(resp.code, resp.remark.as_deref());
        if resp.code == response_code::ILLEGAL_OPERATION {
            last.code = Code::BadRequest;
        }
    }
    Err(last)
}
