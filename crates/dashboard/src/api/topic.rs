//! Topic page: the list with types, status, route, config, create/update, send a test message,
//! delete.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use ferromq_protocol::body::{perm, TopicConfig};
use ferromq_protocol::topic_validator::{validate_topic, DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};
use serde::Deserialize;
use serde_json::{json, Map, Value as JsonValue};

use super::shared::{mq_key, strip_sys, system_topic, target_masters, SYS_PREFIX};
use crate::error::ApiError;
use crate::http::ApiRequest;
use crate::state::Dashboard;

/// The topic attribute that holds a 5.x topic's message type.
const MESSAGE_TYPE_KEY: &str = "message.type";
/// The message types a topic may declare (Java: `TopicMessageType`).
pub(crate) const MESSAGE_TYPES: [&str; 6] = ["UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"];

/// `/topic/list.query`: `{"topicList": [...], "brokerAddr": null}`. Without `skipSysProcess`
/// system topics carry the `%SYS%` marker; `skipRetryAndDlq` leaves retry and DLQ topics out.
pub(crate) async fn list(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let skip_sys = r.flag("skipSysProcess")?;
    let skip_retry_dlq = r.flag("skipRetryAndDlq")?;
    let admin = d.admin();
    let topics = admin.topic_list().await?.topic_list;
    let cluster = admin.cluster_info().await?;
    let mut out = Vec::new();
    for t in topics {
        if skip_retry_dlq && (t.starts_with(RETRY_GROUP_TOPIC_PREFIX) || t.starts_with(DLQ_GROUP_TOPIC_PREFIX)) {
            continue;
        }
        if !skip_sys && system_topic(&t, &cluster) {
            out.push(format!("{SYS_PREFIX}{t}"));
        } else {
            out.push(t);
        }
    }
    Ok(json!({ "topicList": out, "brokerAddr": null }))
}

/// `/topic/list.queryTopicType`: `{"topicNameList": [...], "messageTypeList": [...]}`, parallel
/// lists; the type is RETRY, DLQ, SYSTEM (name marked `%SYS%`), the topic's `message.type`
/// attribute, or UNSPECIFIED.
pub(crate) async fn list_with_types(d: &Dashboard) -> Result<JsonValue, ApiError> {
    let admin = d.admin();
    let topics = admin.topic_list().await?.topic_list;
    let cluster = admin.cluster_info().await?;
    // One GET_ALL_TOPIC_CONFIG per master holds every topic's attributes.
    let mut types = std::collections::BTreeMap::new();
    for data in cluster.broker_addr_table.values() {
        let Some(addr) = data.master_addr() else { continue };
        if let Ok(wrapper) = admin.all_topic_config(addr).await {
            for (name, config) in wrapper.topic_config_table {
                if let Some(t) = config.attributes.get(MESSAGE_TYPE_KEY) {
                    types.insert(name, t.clone());
                }
            }
        }
    }
    let mut names = Vec::new();
    let mut kinds = Vec::new();
    for t in topics {
        let (name, kind) = if t.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            (t.clone(), "RETRY".to_owned())
        } else if t.starts_with(DLQ_GROUP_TOPIC_PREFIX) {
            (t.clone(), "DLQ".to_owned())
        } else if system_topic(&t, &cluster) {
            (format!("{SYS_PREFIX}{t}"), "SYSTEM".to_owned())
        } else {
            let kind = types.get(&t).cloned().unwrap_or_else(|| "UNSPECIFIED".to_owned());
            (t.clone(), kind)
        };
        names.push(name);
        kinds.push(kind);
    }
    Ok(json!({ "topicNameList": names, "messageTypeList": kinds }))
}

/// `/topic/stats.query?topic=`: the queues of every broker of the route, keyed as Java prints
/// a queue, with `topicPutTps` summed.
pub(crate) async fn stats(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let topic = strip_sys(r.required("topic")?);
    let admin = d.admin();
    let mut table = Map::new();
    let mut tps = 0.0;
    for (_, addr) in admin.route_brokers(topic).await? {
        let stats = admin.topic_stats(&addr, topic).await?;
        tps += stats.topic_put_tps;
        for (q, o) in stats.offset_table {
            table.insert(
                mq_key(&q),
                json!({ "minOffset": o.min_offset, "maxOffset": o.max_offset,
                        "lastUpdateTimestamp": o.last_update_timestamp }),
            );
        }
    }
    Ok(json!({ "offsetTable": table, "topicPutTps": tps }))
}

/// `/topic/route.query?topic=`: the route as the name server gives it.
pub(crate) async fn route(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let topic = strip_sys(r.required("topic")?);
    let route = d.admin().topic_route(topic).await?;
    serde_json::to_value(route).map_err(|e| ApiError::bad(format!("route of {topic}: {e}")))
}

/// The body of `/topic/createOrUpdate.do` (and an entry of `/topic/examineTopicConfig.query`).
/// Java: `TopicConfigInfo`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TopicConfigInfo {
    #[serde(default)]
    cluster_name_list: Option<Vec<String>>,
    #[serde(default)]
    broker_name_list: Option<Vec<String>>,
    topic_name: String,
    #[serde(default)]
    write_queue_nums: Option<i32>,
    #[serde(default)]
    read_queue_nums: Option<i32>,
    #[serde(default)]
    perm: Option<i32>,
    #[serde(default)]
    order: Option<bool>,
    #[serde(default)]
    message_type: Option<String>,
}

/// Queues per topic unless asked otherwise (mqadmin updateTopic's default).
const DEFAULT_QUEUE_NUMS: i32 = 8;
/// The most queues a topic may have per broker here (a bound on what one click can create).
const QUEUE_NUMS_MAX: i32 = 1024;

/// `/topic/createOrUpdate.do`: creates or updates the topic on every master of the clusters
/// and brokers named. `true` when every broker took it.
pub(crate) async fn create_or_update(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let info: TopicConfigInfo = r.json()?;
    let topic = info.topic_name.trim();
    validate_topic(topic).map_err(|e| ApiError::bad(format!("invalid topic name {topic:?}: {e}")))?;
    let write = info.write_queue_nums.unwrap_or(DEFAULT_QUEUE_NUMS);
    let read = info.read_queue_nums.unwrap_or(write);
    for (name, n) in [("writeQueueNums", write), ("readQueueNums", read)] {
        if !(1..=QUEUE_NUMS_MAX).contains(&n) {
            return Err(ApiError::bad(format!("{name} must be between 1 and {QUEUE_NUMS_MAX}, not {n}")));
        }
    }
    let perm = info.perm.unwrap_or(perm::PERM_READ | perm::PERM_WRITE);
    if ![perm::PERM_READ, perm::PERM_WRITE, perm::PERM_READ | perm::PERM_WRITE].contains(&perm) {
        return Err(ApiError::bad(format!("perm must be 2 (W), 4 (R) or 6 (RW), not {perm}")));
    }
    // Blank is NORMAL, as rocketmq-dashboard sends it; UNSPECIFIED is kept as asked.
    let message_type = match info.message_type.as_deref().map(str::trim) {
        None | Some("") => "NORMAL".to_owned(),
        Some(t) => {
            let t = t.to_ascii_uppercase();
            if !MESSAGE_TYPES.contains(&t.as_str()) {
                return Err(ApiError::bad(format!("messageType must be one of {}, not {t}", MESSAGE_TYPES.join(", "))));
            }
            t
        }
    };
    let mut config = TopicConfig::new(topic.to_owned(), read, write);
    config.perm = perm;
    config.order = info.order.unwrap_or(message_type == "FIFO");
    config.attributes.insert(MESSAGE_TYPE_KEY.to_owned(), message_type.clone());
    let admin = d.admin();
    let targets =
        target_masters(&admin, &info.cluster_name_list.unwrap_or_default(), &info.broker_name_list.unwrap_or_default())
            .await?;
    let attributes = format!("+{MESSAGE_TYPE_KEY}={message_type}");
    for (_, addr) in &targets {
        admin.update_topic(addr, &config, &attributes).await?;
    }
    Ok(JsonValue::Bool(true))
}

/// `/topic/queryTopicConsumerInfo.query?topic=`: `{"groupList": [...]}`, the groups consuming
/// the topic on any broker of its route.
pub(crate) async fn consumer_groups(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let topic = strip_sys(r.required("topic")?);
    let admin = d.admin();
    let mut groups = BTreeSet::new();
    for (_, addr) in admin.route_brokers(topic).await? {
        groups.extend(admin.topic_consume_by_who(&addr, topic).await?.group_list);
    }
    Ok(json!({ "groupList": groups }))
}

/// `/topic/examineTopicConfig.query?topic=`: the topic's config on each broker of its route,
/// as `TopicConfigInfo` entries.
pub(crate) async fn examine_config(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let topic = strip_sys(r.required("topic")?);
    let admin = d.admin();
    let mut out = Vec::new();
    for (broker_name, addr) in admin.route_brokers(topic).await? {
        let c = admin.topic_config(&addr, topic).await?;
        let message_type = c.attributes.get(MESSAGE_TYPE_KEY).cloned().unwrap_or_else(|| "UNSPECIFIED".to_owned());
        out.push(json!({
            "clusterNameList": null,
            "brokerNameList": [broker_name],
            "topicName": c.topic_name,
            "writeQueueNums": c.write_queue_nums,
            "readQueueNums": c.read_queue_nums,
            "perm": c.perm,
            "order": c.order,
            "messageType": message_type,
            "attributes": c.attributes,
        }));
    }
    Ok(JsonValue::Array(out))
}

/// The body of `/topic/sendTopicMessage.do`. Java: `SendTopicMessageRequest`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendTopicMessageRequest {
    topic: String,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    tag: Option<String>,
    #[serde(default)]
    message_body: String,
}

/// Spreads test messages over the writable queues.
static NEXT_QUEUE: AtomicUsize = AtomicUsize::new(0);

/// `/topic/sendTopicMessage.do`: stores one message on the next writable queue of the topic's
/// route; answers Java's `SendResult` fields.
pub(crate) async fn send_message(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let m: SendTopicMessageRequest = r.json()?;
    let topic = strip_sys(m.topic.trim());
    if m.message_body.is_empty() {
        return Err(ApiError::bad("messageBody must not be empty"));
    }
    let admin = d.admin();
    let queues = admin.topic_route(topic).await?.publish_queues(topic);
    if queues.is_empty() {
        return Err(ApiError::NotFound(format!("topic {topic} has no writable queue on a master")));
    }
    let (mq, addr) = &queues[NEXT_QUEUE.fetch_add(1, Ordering::Relaxed) % queues.len()];
    let (body, tag, key) = (m.message_body.as_bytes(), m.tag.as_deref(), m.key.as_deref());
    let sent = admin.send_message(addr, &mq.broker_name, topic, mq.queue_id, body, tag, key).await?;
    Ok(json!({
        "sendStatus": "SEND_OK",
        "msgId": sent.msg_id,
        "offsetMsgId": sent.offset_msg_id,
        "messageQueue": { "topic": topic, "brokerName": sent.broker_name, "queueId": sent.queue_id },
        "queueOffset": sent.queue_offset,
        "transactionId": null,
        "regionId": "DefaultRegion",
        "traceOn": false,
    }))
}

/// `/topic/deleteTopic.do?topic=&clusterName=`: deletes the topic from every master of the
/// cluster (of every cluster without `clusterName`) and from the name servers.
pub(crate) async fn delete(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let topic = strip_sys(r.required("topic")?).to_owned();
    let admin = d.admin();
    let clusters: Vec<String> = match r.param("clusterName").map(str::trim).filter(|c| !c.is_empty()) {
        Some(c) => vec![c.to_owned()],
        None => admin.cluster_info().await?.cluster_addr_table.into_keys().collect(),
    };
    for cluster in &clusters {
        for (_, addr) in target_masters(&admin, std::slice::from_ref(cluster), &[]).await? {
            admin.delete_topic_in_broker(&addr, &topic).await?;
        }
        admin.delete_topic_in_namesrv(&topic, Some(cluster)).await?;
    }
    Ok(JsonValue::Bool(true))
}

/// `/topic/deleteTopicByBroker.do?brokerName=&topic=`: deletes the topic from one broker's master.
pub(crate) async fn delete_in_broker(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let topic = strip_sys(r.required("topic")?);
    let broker = r.required("brokerName")?.to_owned();
    let admin = d.admin();
    for (_, addr) in target_masters(&admin, &[], &[broker]).await? {
        admin.delete_topic_in_broker(&addr, topic).await?;
    }
    Ok(JsonValue::Bool(true))
}
