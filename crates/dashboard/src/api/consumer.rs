//! Consumer page: groups with their clients and lag, consume detail per queue, connections,
//! running info, group config, offset reset, delete.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ferromq_client::admin::{AdminClient, AdminError, SubscriptionGroupConfig};
use ferromq_protocol::body::{ConsumeStats, ConsumerConnection, MessageQueue};
use ferromq_protocol::topic_validator::{dlq_topic, retry_topic};
use serde::Deserialize;
use serde_json::{json, Map, Value as JsonValue};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::shared::{connection_json, iso_time, mq_key, strip_sys, target_masters, SYS_PREFIX};
use crate::collector::now_ms;
use crate::error::ApiError;
use crate::http::ApiRequest;
use crate::state::Dashboard;

/// Groups looked at concurrently when the list is built (each costs a few requests per broker).
const LIST_CONCURRENCY: usize = 16;

/// Groups RocketMQ's tools and brokers use themselves (Java: `MixAll` and the dashboard's
/// `SYSTEM_GROUP_SET`).
const SYSTEM_GROUPS: [&str; 12] = [
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "__MONITOR_CONSUMER",
    "CLIENT_INNER_PRODUCER",
    "SELF_TEST_P_GROUP",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_ONSAPI_PULL",
    "CID_RMQ_SYS_TRANS",
    "CID_SYS_RMQ_TRANS",
];

fn system_group(group: &str) -> bool {
    SYSTEM_GROUPS.contains(&group) || group.starts_with("CID_RMQ_SYS_")
}

/// Every subscription group of every master: group -> (config, master addresses holding it).
async fn all_groups(admin: &AdminClient) -> Result<BTreeMap<String, (SubscriptionGroupConfig, Vec<String>)>, ApiError> {
    let cluster = admin.cluster_info().await?;
    let mut groups: BTreeMap<String, (SubscriptionGroupConfig, Vec<String>)> = BTreeMap::new();
    for data in cluster.broker_addr_table.values() {
        let Some(addr) = data.master_addr() else { continue };
        let wrapper = admin.all_subscription_groups(addr).await?;
        for (name, config) in wrapper.subscription_group_table {
            groups.entry(name).or_insert_with(|| (config, Vec::new())).1.push(addr.to_owned());
        }
    }
    Ok(groups)
}

/// One row of the group list. Java: `GroupConsumeInfo`.
async fn group_info(
    admin: Arc<AdminClient>,
    group: String,
    config: SubscriptionGroupConfig,
    addrs: Vec<String>,
) -> JsonValue {
    let mut diff_total: Option<i64> = None;
    let mut tps = 0.0;
    for addr in &addrs {
        if let Ok(stats) = admin.consume_stats(addr, &group, None).await {
            tps += stats.consume_tps;
            let diff: i64 = stats.offset_table.values().map(|o| o.broker_offset - o.consumer_offset).sum();
            *diff_total.get_or_insert(0) += diff;
        }
    }
    let mut connection: Option<ConsumerConnection> = None;
    for addr in &addrs {
        if let Ok(c) = admin.consumer_connection(addr, &group).await {
            connection = Some(c);
            break;
        }
    }
    let count = connection.as_ref().map_or(0, |c| c.connection_set.len());
    let version = connection
        .as_ref()
        .and_then(|c| c.connection_set.iter().map(|x| x.version).min())
        .map(ferromq_protocol::version::name);
    let sub_group_type = if system_group(&group) {
        "SYSTEM"
    } else if config.consume_message_orderly {
        "FIFO"
    } else {
        "NORMAL"
    };
    json!({
        "group": group,
        "version": version,
        "count": count,
        "consumeType": connection.as_ref().map(|c| json!(c.consume_type)),
        "messageModel": connection.as_ref().map(|c| json!(c.message_model)),
        "address": addrs,
        // Java truncates the double to an int.
        "consumeTps": tps as i64,
        "diffTotal": diff_total.unwrap_or(-1),
        "subGroupType": sub_group_type,
        "updateTime": iso_time(now_ms()),
    })
}

/// `/consumer/groupList.query?skipSysGroup=`: every group, busiest first (online clients, then
/// lag). Without `skipSysGroup` system groups carry the `%SYS%` marker.
pub(crate) async fn group_list(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let skip_sys = r.flag("skipSysGroup")?;
    let admin = d.admin();
    let groups = all_groups(&admin).await?;
    let slots = Arc::new(Semaphore::new(LIST_CONCURRENCY));
    let mut tasks = JoinSet::new();
    for (group, (config, addrs)) in groups {
        if skip_sys && system_group(&group) {
            continue;
        }
        let admin = admin.clone();
        let slots = slots.clone();
        tasks.spawn(async move {
            let _slot = slots.acquire_owned().await;
            group_info(admin, group, config, addrs).await
        });
    }
    let mut rows = Vec::new();
    while let Some(row) = tasks.join_next().await {
        let mut row = row.map_err(|e| ApiError::bad(format!("a group lookup failed: {e}")))?;
        if row["subGroupType"] == "SYSTEM" && !skip_sys {
            let name = format!("{SYS_PREFIX}{}", row["group"].as_str().unwrap_or_default());
            row["group"] = JsonValue::String(name);
        }
        rows.push(row);
    }
    rows.sort_by(|a, b| {
        let key = |v: &JsonValue| (v["count"].as_i64().unwrap_or(0), v["diffTotal"].as_i64().unwrap_or(0));
        key(b).cmp(&key(a)).then_with(|| a["group"].as_str().cmp(&b["group"].as_str()))
    });
    Ok(JsonValue::Array(rows))
}

/// `/consumer/group.query?consumerGroup=` (and `group.refresh`): one group's row.
pub(crate) async fn group(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let group = strip_sys(r.required("consumerGroup")?);
    let admin = d.admin();
    let mut groups = all_groups(&admin).await?;
    let (config, addrs) =
        groups.remove(group).ok_or_else(|| ApiError::NotFound(format!("consumer group {group} does not exist")))?;
    Ok(group_info(admin, group.to_owned(), config, addrs).await)
}

/// The brokers to ask about a group: the `address` parameter (comma-separated), else every
/// master holding the group.
async fn group_addrs(admin: &AdminClient, group: &str, r: &ApiRequest) -> Result<Vec<String>, ApiError> {
    if let Some(given) = r.param("address").filter(|a| !a.trim().is_empty()) {
        return Ok(given.split(',').map(str::trim).filter(|a| !a.is_empty()).map(str::to_owned).collect());
    }
    let mut groups = all_groups(admin).await?;
    Ok(groups.remove(group).map(|(_, addrs)| addrs).unwrap_or_default())
}

/// Which client holds each queue, from the running info of the group's online clients.
async fn queue_owners(admin: &AdminClient, group: &str, addrs: &[String]) -> BTreeMap<MessageQueue, String> {
    /// Clients asked at most (each answers with its whole queue table).
    const CLIENTS_MAX: usize = 32;
    let mut owners = BTreeMap::new();
    for addr in addrs {
        let Ok(connection) = admin.consumer_connection(addr, group).await else { continue };
        for c in connection.connection_set.iter().take(CLIENTS_MAX) {
            if let Ok(info) = admin.consumer_running_info(addr, group, &c.client_id, false).await {
                for q in info.mq_table.keys().chain(info.mq_pop_table.keys()) {
                    owners.insert(q.clone(), c.client_id.clone());
                }
            }
        }
        break;
    }
    owners
}

/// `TopicConsumerInfo`s of `stats`, one per topic, queues in order.
fn topic_consumer_infos(stats: &[ConsumeStats], owners: &BTreeMap<MessageQueue, String>) -> Vec<JsonValue> {
    let mut by_topic: BTreeMap<&str, Vec<(&MessageQueue, &ferromq_protocol::body::OffsetWrapper)>> = BTreeMap::new();
    for s in stats {
        for (q, o) in &s.offset_table {
            by_topic.entry(q.topic.as_str()).or_default().push((q, o));
        }
    }
    by_topic
        .into_iter()
        .map(|(topic, mut queues)| {
            queues.sort_by(|a, b| a.0.cmp(b.0));
            let diff: i64 = queues.iter().map(|(_, o)| o.broker_offset - o.consumer_offset).sum();
            let last = queues.iter().map(|(_, o)| o.last_timestamp).max().unwrap_or(0);
            let list: Vec<JsonValue> = queues
                .iter()
                .map(|(q, o)| {
                    json!({ "brokerName": q.broker_name, "queueId": q.queue_id, "brokerOffset": o.broker_offset,
                            "consumerOffset": o.consumer_offset, "clientInfo": owners.get(*q),
                            "lastTimestamp": o.last_timestamp })
                })
                .collect();
            json!({ "topic": topic, "diffTotal": diff, "lastTimestamp": last, "queueStatInfoList": list })
        })
        .collect()
}

/// `/consumer/queryTopicByConsumer.query?consumerGroup=&address=`: per topic the group
/// consumes (its retry topic included), each queue's offsets, lag and holding client.
pub(crate) async fn consume_stats_by_group(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let group = strip_sys(r.required("consumerGroup")?);
    let admin = d.admin();
    let addrs = group_addrs(&admin, group, r).await?;
    let mut stats = Vec::new();
    for addr in &addrs {
        match admin.consume_stats(addr, group, None).await {
            Ok(s) => stats.push(s),
            Err(AdminError::Response { .. }) => {} // the group has nothing on that broker
            Err(e) => return Err(e.into()),
        }
    }
    let owners = queue_owners(&admin, group, &addrs).await;
    Ok(JsonValue::Array(topic_consumer_infos(&stats, &owners)))
}

/// `/topic/queryConsumerByTopic.query?topic=`: `{group: TopicConsumerInfo}` for every group
/// consuming the topic.
pub(crate) async fn consume_stats_by_topic(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let topic = strip_sys(r.required("topic")?);
    let admin = d.admin();
    let brokers = admin.route_brokers(topic).await?;
    let mut groups = BTreeSet::new();
    for (_, addr) in &brokers {
        groups.extend(admin.topic_consume_by_who(addr, topic).await?.group_list);
    }
    let addrs: Vec<String> = brokers.into_iter().map(|(_, a)| a).collect();
    let mut out = Map::new();
    for group in groups {
        let mut stats = Vec::new();
        for addr in &addrs {
            if let Ok(s) = admin.consume_stats(addr, &group, Some(topic)).await {
                stats.push(s);
            }
        }
        let owners = queue_owners(&admin, &group, &addrs).await;
        let info = topic_consumer_infos(&stats, &owners)
            .into_iter()
            .find(|i| i["topic"] == topic)
            .unwrap_or_else(|| json!({ "topic": topic, "diffTotal": 0, "lastTimestamp": 0, "queueStatInfoList": [] }));
        out.insert(group, info);
    }
    Ok(JsonValue::Object(out))
}

/// `/consumer/consumerConnection.query?consumerGroup=&address=`: the group's clients and
/// subscriptions, from the first broker that knows them.
pub(crate) async fn connection(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let group = strip_sys(r.required("consumerGroup")?);
    let admin = d.admin();
    let mut last = None;
    for addr in group_addrs(&admin, group, r).await? {
        match admin.consumer_connection(&addr, group).await {
            Ok(c) => return Ok(consumer_connection_json(&c)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.map_or_else(|| ApiError::NotFound(format!("consumer group {group} does not exist")), ApiError::from))
}

fn consumer_connection_json(c: &ConsumerConnection) -> JsonValue {
    let set: Vec<JsonValue> = c.connection_set.iter().map(connection_json).collect();
    json!({
        "connectionSet": set,
        "subscriptionTable": c.subscription_table,
        "consumeType": c.consume_type,
        "messageModel": c.message_model,
        "consumeFromWhere": c.consume_from_where,
    })
}

/// `/consumer/consumerRunningInfo.query?consumerGroup=&clientId=&jstack=`: what the client
/// reports of itself, asked through a broker it is connected to.
pub(crate) async fn running_info(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let group = strip_sys(r.required("consumerGroup")?);
    let client_id = r.required("clientId")?;
    let jstack = r.flag("jstack")?;
    let admin = d.admin();
    let mut last = None;
    for addr in group_addrs(&admin, group, r).await? {
        match admin.consumer_running_info(&addr, group, client_id, jstack).await {
            Ok(info) => {
                let mq: Map<String, JsonValue> = info.mq_table.iter().map(|(q, p)| (mq_key(q), json!(p))).collect();
                let pop: Map<String, JsonValue> =
                    info.mq_pop_table.iter().map(|(q, p)| (mq_key(q), json!(p))).collect();
                return Ok(json!({
                    "properties": info.properties,
                    "subscriptionSet": info.subscription_set,
                    "mqTable": mq,
                    "mqPopTable": pop,
                    "statusTable": info.status_table,
                    "userConsumerInfo": info.user_consumer_info,
                    "jstack": info.jstack,
                }));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.map_or_else(|| ApiError::NotFound(format!("consumer group {group} does not exist")), ApiError::from))
}

/// The body of `/consumer/resetOffset.do` and `/consumer/skipAccumulate.do`. Java:
/// `ResetOffsetRequest`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResetOffsetRequest {
    consumer_group_list: Vec<String>,
    topic: String,
    reset_time: i64,
    #[serde(default = "yes")]
    force: bool,
}

fn yes() -> bool {
    true
}

/// `/consumer/resetOffset.do` and `/consumer/skipAccumulate.do` (`resetTime` -1: the end of
/// every queue): `{group: {status, errMsg, rollbackStatsList}}`; one group failing does not
/// stop the others.
pub(crate) async fn reset_offset(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let req: ResetOffsetRequest = r.json()?;
    let topic = strip_sys(req.topic.trim());
    if req.consumer_group_list.is_empty() {
        return Err(ApiError::bad("consumerGroupList must name at least one group"));
    }
    let admin = d.admin();
    let mut out = Map::new();
    for group in &req.consumer_group_list {
        let group = strip_sys(group.trim());
        let result = match admin.reset_group_offset_by_time(topic, group, req.reset_time, req.force).await {
            Ok(outcome) => {
                let list: Vec<JsonValue> = outcome
                    .stats
                    .iter()
                    .map(|s| {
                        json!({ "brokerName": s.queue.broker_name, "queueId": s.queue.queue_id,
                                "brokerOffset": s.broker_offset, "consumerOffset": s.consumer_offset,
                                "timestampOffset": s.timestamp_offset, "rollbackOffset": s.rollback_offset })
                    })
                    .collect();
                json!({ "status": true, "errMsg": null, "rollbackStatsList": list })
            }
            Err(e) => json!({ "status": false, "errMsg": ApiError::from(e).chain(), "rollbackStatsList": [] }),
        };
        out.insert(group.to_owned(), result);
    }
    Ok(JsonValue::Object(out))
}

/// `/consumer/examineSubscriptionGroupConfig.query?consumerGroup=`: the group's config on each
/// master holding it.
pub(crate) async fn examine_config(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let group = strip_sys(r.required("consumerGroup")?);
    let admin = d.admin();
    let cluster = admin.cluster_info().await?;
    let mut out = Vec::new();
    for data in cluster.broker_addr_table.values() {
        let Some(addr) = data.master_addr() else { continue };
        let mut wrapper = admin.all_subscription_groups(addr).await?;
        if let Some(config) = wrapper.subscription_group_table.remove(group) {
            out.push(json!({ "clusterNameList": null, "brokerNameList": [data.broker_name],
                             "subscriptionGroupConfig": config }));
        }
    }
    Ok(JsonValue::Array(out))
}

/// `/consumer/fetchBrokerNameList.query?consumerGroup=`: the brokers holding the group.
pub(crate) async fn broker_names(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let group = strip_sys(r.required("consumerGroup")?);
    let admin = d.admin();
    let cluster = admin.cluster_info().await?;
    let mut names = BTreeSet::new();
    for data in cluster.broker_addr_table.values() {
        let Some(addr) = data.master_addr() else { continue };
        if admin.all_subscription_groups(addr).await?.subscription_group_table.contains_key(group) {
            names.insert(data.broker_name.clone());
        }
    }
    Ok(json!(names))
}

/// The body of `/consumer/deleteSubGroup.do`. Java: `DeleteSubGroupRequest`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeleteSubGroupRequest {
    group_name: String,
    #[serde(default)]
    broker_name_list: Vec<String>,
}

/// `/consumer/deleteSubGroup.do`: deletes the group (with its offsets) and its retry and DLQ
/// topics from each broker named, and those topics from the name servers once no broker
/// holds the group any more.
pub(crate) async fn delete(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let req: DeleteSubGroupRequest = r.json()?;
    let group = strip_sys(req.group_name.trim());
    let admin = d.admin();
    let targets = target_masters(&admin, &[], &req.broker_name_list).await?;
    for (_, addr) in &targets {
        admin.delete_subscription_group(addr, group, true).await?;
        for topic in [retry_topic(group), dlq_topic(group)] {
            admin.delete_topic_in_broker(addr, &topic).await?;
        }
    }
    if !all_groups(&admin).await?.contains_key(group) {
        for topic in [retry_topic(group), dlq_topic(group)] {
            admin.delete_topic_in_namesrv(&topic, None).await?;
        }
    }
    Ok(JsonValue::Bool(true))
}

/// The body of `/consumer/createOrUpdate.do`. Java: `ConsumerConfigInfo`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConsumerConfigInfo {
    #[serde(default)]
    cluster_name_list: Option<Vec<String>>,
    #[serde(default)]
    broker_name_list: Option<Vec<String>>,
    subscription_group_config: SubscriptionGroupConfig,
}

/// `/consumer/createOrUpdate.do`: creates or updates the group on every master of the
/// clusters and brokers named.
pub(crate) async fn create_or_update(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let mut req: ConsumerConfigInfo = r.json()?;
    let name = strip_sys(req.subscription_group_config.group_name.trim()).to_owned();
    ferromq_protocol::topic_validator::validate_group(&name)
        .map_err(|e| ApiError::bad(format!("invalid group name {name:?}: {e}")))?;
    req.subscription_group_config.group_name = name;
    let admin = d.admin();
    let targets =
        target_masters(&admin, &req.cluster_name_list.unwrap_or_default(), &req.broker_name_list.unwrap_or_default())
            .await?;
    for (_, addr) in &targets {
        admin.create_subscription_group(addr, &req.subscription_group_config).await?;
    }
    Ok(JsonValue::Bool(true))
}
