//! Message and DLQ pages: search by topic and time (paged), by key, by id; a message with the
//! consume status of each group; consume it again in a group's client; resend DLQ messages.

use std::collections::BTreeMap;

use ferromq_client::admin::{AdminClient, AdminError, PullStatus, TOOLS_CONSUMER_GROUP};
use ferromq_protocol::body::{MessageModel, MessageQueue, TopicRouteData};
use ferromq_protocol::message::{create_offset_msg_id, keys, StoredMessage};
use serde::Deserialize;
use serde_json::{json, Value as JsonValue};

use super::shared::strip_sys;
use crate::error::ApiError;
use crate::http::ApiRequest;
use crate::state::Dashboard;

/// Messages one key search returns at most (rocketmq-dashboard's limit).
const KEY_QUERY_MAX: i32 = 64;
/// Messages a topic-and-time search without paging returns at most.
const TIME_QUERY_MAX: usize = 2000;
/// Page sizes (rocketmq-dashboard: at most 100, 10 when unset).
const PAGE_SIZE_DEFAULT: i64 = 10;
const PAGE_SIZE_MAX: i64 = 100;
/// Messages one pull asks for.
const PULL_BATCH: i32 = 32;

/// A message as rocketmq-dashboard shows it (Java: `MessageView`); `offsetMsgId` added.
pub(crate) fn message_view(m: &StoredMessage, with_body: bool) -> JsonValue {
    let props = m.properties_map();
    let props: BTreeMap<&str, &str> = props.iter().collect();
    let msg_id = m.property(keys::UNIQ_KEY).map_or_else(|| m.offset_msg_id(), str::to_owned);
    json!({
        "topic": m.topic,
        "flag": m.flag,
        "properties": props,
        "queueId": m.queue_id,
        "storeSize": m.encoded_len(),
        "queueOffset": m.queue_offset,
        "sysFlag": m.sys_flag,
        "bornTimestamp": m.born_timestamp_ms,
        "bornHost": m.born_host.to_string(),
        "storeTimestamp": m.store_timestamp_ms,
        "storeHost": m.store_host.to_string(),
        "msgId": msg_id,
        "offsetMsgId": m.offset_msg_id(),
        "commitLogOffset": m.physical_offset,
        "bodyCRC": m.body_crc.unwrap_or(0),
        "reconsumeTimes": m.reconsume_times,
        "preparedTransactionOffset": m.prepared_transaction_offset,
        "messageBody": with_body.then(|| String::from_utf8_lossy(&m.body).into_owned()),
    })
}

/// The messages with id `msg_id`: an offset message id names its broker and position; a unique
/// (client) id is looked up in `topic`'s index. Each with the address of its broker.
pub(crate) async fn find_by_id(
    admin: &AdminClient,
    topic: Option<&str>,
    msg_id: &str,
) -> Result<Vec<(String, StoredMessage)>, ApiError> {
    let mut found = Vec::new();
    if let Some(topic) = topic {
        for (_, addr) in admin.route_brokers(topic).await? {
            let messages = admin.query_message(&addr, topic, msg_id, KEY_QUERY_MAX, (0, i64::MAX), true).await?;
            found.extend(messages.into_iter().map(|m| (addr.clone(), m)));
        }
    }
    if found.is_empty() {
        match admin.view_message_by_offset_id(msg_id).await {
            Ok(hit) => found.push(hit),
            Err(AdminError::MessageId { .. }) if topic.is_some() => {}
            Err(AdminError::MessageId { .. }) => {
                return Err(ApiError::bad(format!(
                    "{msg_id} is not an offset message id: give the topic to look a unique message id up"
                )))
            }
            Err(e) => return Err(e.into()),
        }
    }
    if found.is_empty() {
        return Err(ApiError::NotFound(format!("Failed to query message by Id: {msg_id}")));
    }
    Ok(found)
}

/// How one group stands with a message. Java: `MessageTrack` (`trackType` names as Java's).
async fn track(admin: &AdminClient, route: &TopicRouteData, addr: &str, m: &StoredMessage) -> Vec<JsonValue> {
    let Some(broker_name) =
        route.broker_datas.iter().find(|b| b.broker_addrs.values().any(|a| a == addr)).map(|b| b.broker_name.clone())
    else {
        return Vec::new();
    };
    let Ok(groups) = admin.topic_consume_by_who(addr, &m.topic).await else { return Vec::new() };
    let queue = MessageQueue::new(m.topic.clone(), broker_name, m.queue_id);
    let mut tracks = Vec::new();
    for group in groups.group_list {
        let row = |kind: &str, desc: Option<String>| json!({ "consumerGroup": group, "trackType": kind, "exceptionDesc": desc });
        let connection = match admin.consumer_connection(addr, &group).await {
            Ok(c) => c,
            Err(e) => {
                tracks.push(row("NOT_ONLINE", Some(ApiError::from(e).chain())));
                continue;
            }
        };
        if connection.message_model == MessageModel::Broadcasting {
            tracks.push(row("CONSUME_BROADCASTING", None));
            continue;
        }
        let consumed = match admin.consume_stats(addr, &group, Some(&m.topic)).await {
            Ok(stats) => stats.offset_table.get(&queue).map(|o| o.consumer_offset),
            Err(e) => {
                tracks.push(row("UNKNOWN", Some(ApiError::from(e).chain())));
                continue;
            }
        };
        let kind = match consumed {
            Some(offset) if offset > m.queue_offset => {
                let tag = m.property(keys::TAGS).unwrap_or_default();
                let filtered = connection
                    .subscription_table
                    .get(&m.topic)
                    .is_some_and(|s| !s.tags_set.is_empty() && !s.tags_set.iter().any(|t| t == tag || t == "*"));
                if filtered {
                    "CONSUMED_BUT_FILTERED"
                } else {
                    "CONSUMED"
                }
            }
            _ => "NOT_CONSUME_YET",
        };
        tracks.push(row(kind, None));
    }
    tracks
}

/// `/message/viewMessage.query?msgId=&topic=`: `{"messageView": ..., "messageTrackList": [...]}`
/// (`/messageTrace/viewMessage.query`: the view only).
pub(crate) async fn view(d: &Dashboard, r: &ApiRequest, with_track: bool) -> Result<JsonValue, ApiError> {
    let msg_id = r.required("msgId")?;
    let topic = r.param("topic").map(|t| strip_sys(t.trim())).filter(|t| !t.is_empty());
    let admin = d.admin();
    let found = find_by_id(&admin, topic, msg_id).await?;
    let (addr, m) = &found[0];
    let view = message_view(m, true);
    if !with_track {
        return Ok(json!({ "messageView": view }));
    }
    let tracks = match admin.topic_route(&m.topic).await {
        Ok(route) => track(&admin, &route, addr, m).await,
        Err(_) => Vec::new(),
    };
    Ok(json!({ "messageView": view, "messageTrackList": tracks }))
}

/// `/message/queryMessageByTopicAndKey.query?topic=&key=`: up to 64 messages carrying the key.
pub(crate) async fn by_key(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let topic = strip_sys(r.required("topic")?);
    let key = r.required("key")?;
    let admin = d.admin();
    let mut views = Vec::new();
    for (_, addr) in admin.route_brokers(topic).await? {
        for m in admin.query_message(&addr, topic, key, KEY_QUERY_MAX, (0, i64::MAX), false).await? {
            views.push(message_view(&m, true));
        }
    }
    views.truncate(KEY_QUERY_MAX as usize);
    Ok(JsonValue::Array(views))
}

/// One readable queue of a topic with the address to read it at.
struct ReadQueue {
    queue: MessageQueue,
    addr: String,
}

fn read_queues(route: &TopicRouteData, topic: &str) -> Vec<ReadQueue> {
    route.subscribe_queues(topic).into_iter().map(|(queue, addr)| ReadQueue { queue, addr }).collect()
}

/// Each queue's offsets that may hold messages stored within `[begin, end]`.
async fn time_ranges(
    admin: &AdminClient,
    queues: &[ReadQueue],
    begin: i64,
    end: i64,
) -> Result<Vec<(usize, i64, i64)>, ApiError> {
    let mut ranges = Vec::new();
    for (i, q) in queues.iter().enumerate() {
        let max = admin.max_offset(&q.addr, &q.queue).await?;
        let from = admin.search_offset(&q.addr, &q.queue, begin).await?;
        // The first message stored after `end`: the range stops before it.
        let to = admin.search_offset(&q.addr, &q.queue, end.saturating_add(1)).await?.min(max);
        if to > from {
            ranges.push((i, from, to));
        }
    }
    Ok(ranges)
}

/// Pulls `[from, to)` of one queue, keeping messages stored within `[begin, end]`.
async fn pull_range(
    admin: &AdminClient,
    q: &ReadQueue,
    (from, to): (i64, i64),
    (begin, end): (i64, i64),
    out: &mut Vec<StoredMessage>,
) -> Result<(), ApiError> {
    let mut offset = from;
    while offset < to {
        let want = i32::try_from((to - offset).min(i64::from(PULL_BATCH))).unwrap_or(PULL_BATCH);
        let pulled =
            admin.pull_message(&q.addr, TOOLS_CONSUMER_GROUP, &q.queue.topic, q.queue.queue_id, offset, want).await?;
        if pulled.status != PullStatus::Found || pulled.next_begin_offset <= offset {
            break;
        }
        out.extend(
            pulled
                .messages
                .into_iter()
                .filter(|m| m.queue_offset < to && (begin..=end).contains(&m.store_timestamp_ms)),
        );
        offset = pulled.next_begin_offset;
    }
    Ok(())
}

/// The body of the paged searches. Java: `MessageQuery`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageQuery {
    topic: String,
    begin: i64,
    end: i64,
    #[serde(default)]
    page_num: i64,
    #[serde(default)]
    page_size: i64,
    #[serde(default)]
    task_id: Option<String>,
}

/// Spring Data's `PageImpl` as Jackson writes it.
fn page_json(content: Vec<JsonValue>, page_index: i64, page_size: i64, total: i64) -> JsonValue {
    let total_pages = if page_size > 0 { (total + page_size - 1) / page_size } else { 0 };
    let count = content.len();
    let sort = json!({ "empty": true, "sorted": false, "unsorted": true });
    json!({
        "content": content,
        "pageable": { "pageNumber": page_index, "pageSize": page_size, "sort": sort,
                      "offset": page_index * page_size, "paged": true, "unpaged": false },
        "totalElements": total,
        "totalPages": total_pages,
        "last": page_index + 1 >= total_pages,
        "first": page_index == 0,
        "size": page_size,
        "number": page_index,
        "sort": sort,
        "numberOfElements": count,
        "empty": count == 0,
    })
}

/// `/message/queryMessagePageByTopic.query` (and the DLQ page's
/// `/dlqMessage/queryDlqMessageByConsumerGroup.query`): one page (1-based `pageNum`) of the
/// messages stored within `[begin, end]`, queue by queue. `totalElements` counts the offsets
/// the time search found, which may include a few messages at the edges that the page then
/// leaves out. Stateless: `taskId` is answered but not needed.
pub(crate) async fn page_by_topic(d: &Dashboard, r: &ApiRequest, dlq: bool) -> Result<JsonValue, ApiError> {
    let q: MessageQuery = r.json()?;
    let topic = strip_sys(q.topic.trim());
    let page_size = if q.page_size <= 1 { PAGE_SIZE_DEFAULT } else { q.page_size.min(PAGE_SIZE_MAX) };
    let page_index = (q.page_num.max(1)) - 1;
    let task_id =
        q.task_id.clone().filter(|t| !t.is_empty()).unwrap_or_else(|| format!("{topic}@{}-{}", q.begin, q.end));
    let admin = d.admin();
    let route = match admin.topic_route(topic).await {
        Ok(route) => route,
        // A group that never sent a message to its DLQ has no DLQ topic: nothing to show.
        Err(AdminError::Response { .. }) if dlq => {
            return Ok(json!({ "page": page_json(Vec::new(), page_index, page_size, 0), "taskId": task_id }))
        }
        Err(e) => return Err(e.into()),
    };
    let queues = read_queues(&route, topic);
    let ranges = time_ranges(&admin, &queues, q.begin, q.end).await?;
    let total: i64 = ranges.iter().map(|(_, from, to)| to - from).sum();
    // Walk the ranges to the page's first offset, then pull until the page is full.
    let mut skip = page_index * page_size;
    let mut messages = Vec::new();
    for (i, from, to) in ranges {
        let len = to - from;
        if skip >= len {
            skip -= len;
            continue;
        }
        let start = from + skip;
        skip = 0;
        let want = page_size - i64::try_from(messages.len()).unwrap_or(i64::MAX);
        let stop = (start + want).min(to);
        pull_range(&admin, &queues[i], (start, stop), (q.begin, q.end), &mut messages).await?;
        if i64::try_from(messages.len()).unwrap_or(i64::MAX) >= page_size {
            break;
        }
    }
    let content: Vec<JsonValue> = messages.iter().map(|m| message_view(m, true)).collect();
    Ok(json!({ "page": page_json(content, page_index, page_size, total), "taskId": task_id }))
}

/// `/message/queryMessageByTopic.query?topic=&begin=&end=`: the messages stored within
/// `[begin, end]` (at most 2,000), newest first, without their bodies.
pub(crate) async fn by_time(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let topic = strip_sys(r.required("topic")?);
    let (begin, end) = (r.int("begin")?, r.int("end")?);
    let admin = d.admin();
    let route = admin.topic_route(topic).await?;
    let queues = read_queues(&route, topic);
    let mut messages = Vec::new();
    for (i, from, to) in time_ranges(&admin, &queues, begin, end).await? {
        pull_range(&admin, &queues[i], (from, to), (begin, end), &mut messages).await?;
        if messages.len() >= TIME_QUERY_MAX {
            break;
        }
    }
    messages.sort_by_key(|m| std::cmp::Reverse(m.store_timestamp_ms));
    messages.truncate(TIME_QUERY_MAX);
    Ok(JsonValue::Array(messages.iter().map(|m| message_view(m, false)).collect()))
}

/// Hands the message `msg_id` of `topic` to a client of `group` (`client_id`, else the first
/// online one), which consumes it again; its report as JSON.
async fn consume_directly_once(
    admin: &AdminClient,
    topic: &str,
    group: &str,
    msg_id: &str,
    client_id: Option<&str>,
) -> Result<JsonValue, ApiError> {
    let found = find_by_id(admin, Some(topic), msg_id).await?;
    let (addr, m) = &found[0];
    let client = match client_id.map(str::trim).filter(|c| !c.is_empty()) {
        Some(c) => c.to_owned(),
        None => {
            let connection = admin.consumer_connection(addr, group).await?;
            connection
                .connection_set
                .first()
                .map(|c| c.client_id.clone())
                .ok_or_else(|| ApiError::NotFound(format!("NO CONSUMER: no client of {group} is online")))?
        }
    };
    let offset_id = create_offset_msg_id(m.store_host, m.physical_offset);
    let report = admin.consume_message_directly(addr, group, &client, topic, &offset_id).await?;
    Ok(serde_json::from_str(&report).unwrap_or(JsonValue::String(report)))
}

/// `/message/consumeMessageDirectly.do?topic=&consumerGroup=&msgId=&clientId=`: Java's
/// `ConsumeMessageDirectlyResult`.
pub(crate) async fn consume_directly(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let topic = strip_sys(r.required("topic")?);
    let group = strip_sys(r.required("consumerGroup")?);
    let msg_id = r.required("msgId")?;
    consume_directly_once(&d.admin(), topic, group, msg_id, r.param("clientId")).await
}

/// One message of `/dlqMessage/batchResendDlqMessage.do`. Java: `DlqMessageRequest`
/// (rocketmq-dashboard's own page sends `topic`; both are read).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DlqMessageRequest {
    #[serde(alias = "topic")]
    topic_name: String,
    consumer_group: String,
    msg_id: String,
    #[serde(default)]
    client_id: Option<String>,
}

/// `/dlqMessage/batchResendDlqMessage.do`: each message consumed again by its group's client;
/// `[{"consumeResult", "remark", "msgId"}]`, a failure reported in its entry.
pub(crate) async fn batch_resend(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let requests: Vec<DlqMessageRequest> = r.json()?;
    let admin = d.admin();
    let mut out = Vec::new();
    for m in requests {
        let topic = strip_sys(m.topic_name.trim());
        let group = strip_sys(m.consumer_group.trim());
        let entry = match consume_directly_once(&admin, topic, group, &m.msg_id, m.client_id.as_deref()).await {
            Ok(report) => json!({ "consumeResult": report.get("consumeResult").cloned().unwrap_or(JsonValue::Null),
                                  "remark": report.get("remark").cloned().unwrap_or(JsonValue::Null),
                                  "msgId": m.msg_id }),
            Err(e) => json!({ "consumeResult": null, "remark": e.chain(), "msgId": m.msg_id }),
        };
        out.push(entry);
    }
    Ok(JsonValue::Array(out))
}
