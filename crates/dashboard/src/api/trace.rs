//! Message trace page: the records clients wrote to the trace topic about one message, as a
//! list and as the produce → consume graph. Java: `MessageTraceServiceImpl`.

use std::collections::BTreeMap;

use ferromq_protocol::trace_view::{decode_records, TraceKind, TraceView};
use serde_json::{json, Value as JsonValue};
use tracing::debug;

use crate::error::ApiError;
use crate::http::ApiRequest;
use crate::state::Dashboard;

/// Trace messages read per search (rocketmq-dashboard's limit).
const TRACE_MESSAGES_MAX: i32 = 64;
/// The group shown for consume records that name none.
const UNKNOWN_GROUP: &str = "%UNKNOWN_GROUP%";

/// The SubBefore and SubAfter records of one consume.
type ConsumePair<'a> = (Option<&'a Found>, Option<&'a Found>);

/// A record and the address of the client that wrote it.
struct Found {
    view: TraceView,
    client_host: String,
}

async fn find(d: &Dashboard, trace_topic: &str, msg_id: &str) -> Result<Vec<Found>, ApiError> {
    let admin = d.admin();
    let messages = admin.trace_messages(trace_topic, msg_id, TRACE_MESSAGES_MAX, (0, i64::MAX)).await?;
    let mut found = Vec::new();
    for (addr, m) in messages {
        let (records, errors) = decode_records(&String::from_utf8_lossy(&m.body));
        for e in errors {
            debug!(broker = %addr, trace_message = %m.offset_msg_id(), error = %e, "unreadable trace record");
        }
        // Java's `getBornHostString`: the writer's IP without the port.
        let client_host = m.born_host.ip().to_string();
        found.extend(
            records
                .into_iter()
                .filter(|r| r.msg_id == msg_id)
                .map(|view| Found { view, client_host: client_host.clone() }),
        );
    }
    Ok(found)
}

/// Java's `MessageTraceView`.
fn view_json(f: &Found) -> JsonValue {
    let v = &f.view;
    json!({
        "requestId": v.request_id,
        "msgId": v.msg_id,
        "tags": v.tags,
        "keys": v.keys,
        "storeHost": v.store_host,
        "clientHost": f.client_host,
        "costTime": v.cost_time_ms,
        "msgType": v.msg_type,
        "offSetMsgId": v.offset_msg_id,
        "timeStamp": v.timestamp_ms,
        "topic": v.topic,
        "groupName": v.group,
        "retryTimes": v.retry_times.unwrap_or(0),
        "status": v.status(),
        "transactionState": v.transaction_state,
        "transactionId": v.transaction_id,
        "fromTransactionCheck": v.from_transaction_check.unwrap_or(false),
        "traceType": v.kind.name(),
    })
}

/// Java's `TraceNode` of one record (`cost` -1 for transaction records, which time nothing).
fn node(f: &Found, cost: i64) -> JsonValue {
    let v = &f.view;
    let end = if cost < 0 { v.timestamp_ms } else { v.timestamp_ms + cost };
    json!({
        "requestId": v.request_id,
        "storeHost": v.store_host,
        "clientHost": f.client_host,
        "costTime": cost,
        "beginTimestamp": v.timestamp_ms,
        "endTimestamp": end,
        "retryTimes": v.retry_times.unwrap_or(0),
        "status": v.status(),
        "transactionState": v.transaction_state,
        "transactionId": v.transaction_id,
        "fromTransactionCheck": v.from_transaction_check.unwrap_or(false),
        "msgType": v.msg_type,
    })
}

/// A consume: the SubBefore and SubAfter records of one request (either may be missing; the
/// figures it lacks are -1, its status `unknown` without a SubAfter).
fn consume_node(before: Option<&Found>, after: Option<&Found>) -> JsonValue {
    let begin = before.map_or(-1, |b| b.view.timestamp_ms);
    let cost = after.map_or(-1, |a| i64::from(a.view.cost_time_ms));
    let end = match after {
        Some(a) if a.view.timestamp_ms > 0 => a.view.timestamp_ms,
        Some(_) if begin >= 0 => begin + cost,
        _ => -1,
    };
    let any = before.or(after);
    json!({
        "requestId": any.and_then(|f| f.view.request_id.clone()),
        "storeHost": any.and_then(|f| f.view.store_host.clone()),
        "clientHost": any.map(|f| f.client_host.clone()),
        "costTime": cost,
        "beginTimestamp": begin,
        "endTimestamp": end,
        "retryTimes": before.and_then(|b| b.view.retry_times).unwrap_or(-1),
        "status": after.map_or("unknown", |a| a.view.status()),
        "transactionState": null,
        "transactionId": null,
        "fromTransactionCheck": false,
        "msgType": null,
    })
}

/// `/messageTrace/viewMessageTraceDetail.query?msgId=`: every record of the message in the
/// configured trace topic.
pub(crate) async fn detail(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let msg_id = r.required("msgId")?;
    let found = find(d, &d.config().trace_topic, msg_id).await?;
    Ok(JsonValue::Array(found.iter().map(view_json).collect()))
}

/// `/messageTrace/viewMessageTraceGraph.query?msgId=&traceTopic=`: the producer node (its send
/// and transaction ends), then per consumer group its consumes, newest first.
pub(crate) async fn graph(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let msg_id = r.required("msgId")?;
    let trace_topic = r.param("traceTopic").map(str::trim).filter(|t| !t.is_empty()).unwrap_or(&d.config().trace_topic);
    let found = find(d, trace_topic, msg_id).await?;
    let views: Vec<JsonValue> = found.iter().map(view_json).collect();
    if found.is_empty() {
        return Ok(json!({ "producerNode": null, "subscriptionNodeList": null, "messageTraceViews": views }));
    }
    let transactions: Vec<JsonValue> =
        found.iter().filter(|f| f.view.kind == TraceKind::EndTransaction).map(|f| node(f, -1)).collect();
    let producer = found.iter().find(|f| f.view.kind == TraceKind::Pub).map(|p| {
        let v = &p.view;
        json!({
            "msgId": v.msg_id, "tags": v.tags, "keys": v.keys, "offSetMsgId": v.offset_msg_id,
            "topic": v.topic, "groupName": v.group,
            "traceNode": node(p, i64::from(v.cost_time_ms)),
            "transactionNodeList": transactions,
        })
    });
    // Consumes by group, then by request id (a SubBefore and its SubAfter share it).
    let mut groups: BTreeMap<String, BTreeMap<String, ConsumePair<'_>>> = BTreeMap::new();
    for (i, f) in found.iter().enumerate() {
        let slot = match f.view.kind {
            TraceKind::SubBefore => 0,
            TraceKind::SubAfter => 1,
            _ => continue,
        };
        let group = f.view.group.clone().filter(|g| !g.trim().is_empty()).unwrap_or_else(|| UNKNOWN_GROUP.to_owned());
        let request = f.view.request_id.clone().unwrap_or_else(|| format!("#{i}"));
        let pair = groups.entry(group).or_default().entry(request).or_default();
        if slot == 0 {
            pair.0 = Some(f);
        } else {
            pair.1 = Some(f);
        }
    }
    // Old clients write SubAfter without a group: it joins the group of its SubBefore.
    if let Some(unknown) = groups.remove(UNKNOWN_GROUP) {
        for (request, (before, after)) in unknown {
            let home = groups.iter_mut().find(|(_, pairs)| pairs.contains_key(&request)).map(|(g, _)| g.clone());
            let target = home.unwrap_or_else(|| UNKNOWN_GROUP.to_owned());
            let pair = groups.entry(target).or_default().entry(request).or_default();
            pair.0 = pair.0.or(before);
            pair.1 = pair.1.or(after);
        }
    }
    let subscriptions: Vec<JsonValue> = groups
        .into_iter()
        .map(|(group, pairs)| {
            let mut nodes: Vec<JsonValue> = pairs.values().map(|(b, a)| consume_node(*b, *a)).collect();
            nodes.sort_by_key(|n| std::cmp::Reverse(n["beginTimestamp"].as_i64().unwrap_or(-1)));
            json!({ "subscriptionGroup": group, "consumeNodeList": nodes })
        })
        .collect();
    Ok(json!({ "producerNode": producer, "subscriptionNodeList": subscriptions, "messageTraceViews": views }))
}
