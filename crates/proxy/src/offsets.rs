//! The 5.x lite pull consumer's RPCs: UpdateOffset, GetOffset, QueryOffset and PullMessage
//! (Java's 5.3.3 proxy leaves them unimplemented; FerroMQ serves them over the brokers'
//! consumer-offset and pull requests).

use ferromq_protocol::body::static_topic;
use ferromq_protocol::header::{
    pull_sys_flag, GetMaxOffsetRequestHeader, OffsetResponseHeader, PullMessageRequestHeader,
    PullMessageResponseHeader, QueryConsumerOffsetRequestHeader, QueueRequestHeader, SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use ferromq_protocol::message::StoredMessage;
use ferromq_protocol::{request_code, response_code, RemotingCommand};

use crate::convert::{self, Delivery};
use crate::filter::subscription_data;
use crate::pb::{self, QueryOffsetPolicy};
use crate::proxy::Proxy;
use crate::status::{bad, ProxyError, ProxyResult};
use crate::validate;

/// The most messages one PullMessage returns.
pub const PULL_BATCH_MAX: i32 = 32;

/// Topic, broker name, master address and queue id of a request's queue.
async fn queue_of(p: &Proxy, mq: Option<&pb::MessageQueue>) -> ProxyResult<(String, String, String, i32)> {
    let topic = validate::topic(mq.and_then(|q| q.topic.as_ref()))?;
    let mq = mq.ok_or_else(|| bad!(BadRequest, "message queue is required"))?;
    let broker = mq.broker.as_ref().map(|b| b.name.clone()).filter(|n| !n.is_empty());
    let Some(broker) = broker else { return Err(bad!(BadRequest, "message queue names no broker")) };
    if mq.id < 0 {
        return Err(bad!(BadRequest, "queue id {} is not a queue", mq.id));
    }
    let addr = p.brokers.master_addr(&topic, &broker).await?;
    Ok((topic, broker, addr, mq.id))
}

/// A refused offset request: QUERY_NOT_FOUND is OFFSET_NOT_FOUND, the rest as any broker
/// answer.
fn offset_refusal(code: i32, remark: Option<&str>) -> ProxyError {
    if code == response_code::QUERY_NOT_FOUND {
        return bad!(OffsetNotFound, "{}", remark.unwrap_or("no offset"));
    }
    ProxyError::from_remoting(code, remark)
}

fn offset_of(resp: &RemotingCommand) -> ProxyResult<i64> {
    if resp.code != response_code::SUCCESS {
        return Err(offset_refusal(resp.code, resp.remark.as_deref()));
    }
    let h: OffsetResponseHeader =
        resp.decode_header().map_err(|e| bad!(InternalServerError, "unreadable offset answer: {e}"))?;
    Ok(h.offset)
}

/// UpdateOffset: the group's consumed offset of one queue.
pub async fn update_offset(p: &Proxy, req: pb::UpdateOffsetRequest) -> ProxyResult<()> {
    let group = validate::group(req.group.as_ref())?;
    let (topic, broker, addr, queue_id) = queue_of(p, req.message_queue.as_ref()).await?;
    if req.offset < 0 {
        return Err(bad!(IllegalOffset, "offset {} is negative", req.offset));
    }
    if let Some(service) = p.brokers.local_service(&addr) {
        // A commit an admin reset overrides is not an error to the client (as over remoting).
        return service
            .update_consumer_offset(&crate::brokers::local_caller(None), &group, &topic, queue_id, req.offset)
            .map(drop)
            .map_err(|e| ProxyError::from_service(&e));
    }
    let h = UpdateConsumerOffsetRequestHeader {
        consumer_group: group,
        topic,
        queue_id,
        commit_offset: req.offset,
        broker_name: Some(broker),
        lo: static_topic::PHYSICAL_QUEUE,
    };
    let resp = p
        .brokers
        .invoke(&addr, RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET).with_header(&h), None)
        .await?;
    if resp.code != response_code::SUCCESS {
        return Err(ProxyError::from_remoting(resp.code, resp.remark.as_deref()));
    }
    Ok(())
}

/// GetOffset: the group's consumed offset of one queue.
pub async fn get_offset(p: &Proxy, req: pb::GetOffsetRequest) -> ProxyResult<i64> {
    let group = validate::group(req.group.as_ref())?;
    let (topic, broker, addr, queue_id) = queue_of(p, req.message_queue.as_ref()).await?;
    if let Some(service) = p.brokers.local_service(&addr) {
        return service
            .query_consumer_offset(&group, &topic, queue_id, false)
            .map_err(|e| offset_refusal(e.remoting_code(), Some(&e.to_string())));
    }
    let h = QueryConsumerOffsetRequestHeader {
        consumer_group: group,
        topic,
        queue_id,
        set_zero_if_not_found: Some(false),
        broker_name: Some(broker),
        lo: static_topic::PHYSICAL_QUEUE,
    };
    let resp = p
        .brokers
        .invoke(&addr, RemotingCommand::request(request_code::QUERY_CONSUMER_OFFSET).with_header(&h), None)
        .await?;
    offset_of(&resp)
}

/// QueryOffset: the queue's first or next offset, or the first stored at a time.
pub async fn query_offset(p: &Proxy, req: pb::QueryOffsetRequest) -> ProxyResult<i64> {
    let (topic, broker, addr, queue_id) = queue_of(p, req.message_queue.as_ref()).await?;
    let policy = QueryOffsetPolicy::try_from(req.query_offset_policy)
        .map_err(|_| bad!(BadRequest, "unknown query offset policy {}", req.query_offset_policy))?;
    if let Some(service) = p.brokers.local_service(&addr) {
        return match policy {
            QueryOffsetPolicy::Beginning => Ok(service.min_offset(&topic, queue_id)),
            QueryOffsetPolicy::End => Ok(service.max_offset(&topic, queue_id)),
            QueryOffsetPolicy::Timestamp => {
                let t =
                    req.timestamp.as_ref().ok_or_else(|| bad!(BadRequest, "a TIMESTAMP query needs a timestamp"))?;
                Ok(service.offset_by_time(&topic, queue_id, convert::timestamp_ms(t), true))
            }
        };
    }
    let request = match policy {
        QueryOffsetPolicy::Beginning => {
            RemotingCommand::request(request_code::GET_MIN_OFFSET).with_header(&QueueRequestHeader {
                topic,
                queue_id,
                broker_name: Some(broker),
                lo: static_topic::PHYSICAL_QUEUE,
            })
        }
        QueryOffsetPolicy::End => {
            RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&GetMaxOffsetRequestHeader {
                topic,
                queue_id,
                committed: Some(true),
                broker_name: Some(broker),
                lo: static_topic::PHYSICAL_QUEUE,
            })
        }
        QueryOffsetPolicy::Timestamp => {
            let Some(t) = req.timestamp.as_ref() else {
                return Err(bad!(BadRequest, "a TIMESTAMP query needs a timestamp"));
            };
            RemotingCommand::request(request_code::SEARCH_OFFSET_BY_TIMESTAMP).with_header(&SearchOffsetRequestHeader {
                topic,
                queue_id,
                timestamp: convert::timestamp_ms(t),
                boundary_type: Some("lower".to_owned()),
                broker_name: Some(broker),
                lo: static_topic::PHYSICAL_QUEUE,
            })
        }
    };
    let resp = p.brokers.invoke(&addr, request, None).await?;
    offset_of(&resp)
}

/// What PullMessage streams: the messages, then the next offset.
#[derive(Debug)]
pub struct Pulled {
    /// The messages.
    pub messages: Vec<pb::Message>,
    /// Where the next pull starts.
    pub next_offset: i64,
}

/// PullMessage: up to `batch_size` messages of one queue from `offset`, long polling up to
/// `long_polling_timeout`. None when nothing is there.
pub async fn pull(p: &Proxy, req: pb::PullMessageRequest) -> ProxyResult<Option<Pulled>> {
    let group = validate::group(req.group.as_ref())?;
    let (topic, broker, addr, queue_id) = queue_of(p, req.message_queue.as_ref()).await?;
    let namespace = crate::namespace::namespace_of(req.message_queue.as_ref().and_then(|q| q.topic.as_ref()));
    if req.offset < 0 {
        return Err(bad!(IllegalOffset, "offset {} is negative", req.offset));
    }
    let expression = req.filter_expression.clone().unwrap_or_default();
    let sub = subscription_data(&topic, &expression)?;
    let (min, max) = p.config.long_polling_bounds_ms();
    let poll = req.long_polling_timeout.as_ref().map_or(0, convert::duration_ms).clamp(0, max.max(min));
    let h = PullMessageRequestHeader {
        consumer_group: group,
        topic: topic.clone(),
        queue_id,
        queue_offset: req.offset,
        max_msg_nums: req.batch_size.clamp(1, PULL_BATCH_MAX),
        sys_flag: pull_sys_flag::SUBSCRIPTION | if poll > 0 { pull_sys_flag::SUSPEND } else { 0 },
        commit_offset: 0,
        suspend_timeout_millis: poll,
        subscription: Some(sub.sub_string.clone()),
        sub_version: sub.sub_version,
        expression_type: Some(sub.expression_type.clone()),
        max_msg_bytes: None,
        request_source: None,
        proxy_froward_client_id: None,
        broker_name: Some(broker),
        lo: static_topic::PHYSICAL_QUEUE,
    };
    let timeout = std::time::Duration::from_millis((poll + p.config.remoting_timeout_millis as i64) as u64);
    let resp = p
        .brokers
        .invoke(&addr, RemotingCommand::request(request_code::PULL_MESSAGE).with_header(&h), Some(timeout))
        .await?;
    let rh: Option<PullMessageResponseHeader> = resp.decode_header().ok();
    match resp.code {
        response_code::SUCCESS => {
            let rh = rh.ok_or_else(|| bad!(InternalServerError, "unreadable pull answer"))?;
            let mut messages = Vec::new();
            for m in StoredMessage::iter_shared(resp.body.clone()) {
                let m = m.map_err(|e| bad!(InternalServerError, "unreadable pulled message: {e}"))?;
                let reconsume_times = m.reconsume_times;
                messages.push(convert::incoming(
                    &m,
                    Delivery {
                        topic: topic.clone(),
                        namespace: namespace.clone(),
                        reconsume_times,
                        ..Default::default()
                    },
                ));
            }
            Ok(Some(Pulled { messages, next_offset: rh.next_begin_offset }))
        }
        response_code::PULL_NOT_FOUND | response_code::PULL_RETRY_IMMEDIATELY => Ok(None),
        response_code::PULL_OFFSET_MOVED => {
            let next = rh.map_or(req.offset, |h| h.next_begin_offset);
            Err(bad!(IllegalOffset, "offset {} moved; pull from {next}", req.offset))
        }
        other => Err(ProxyError::from_remoting(other, resp.remark.as_deref())),
    }
}
