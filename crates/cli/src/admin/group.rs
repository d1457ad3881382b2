//! Consumer- and producer-group commands: updateSubGroup, deleteSubGroup, consumerProgress,
//! consumerConnection, producerConnection, resetOffsetByTime.
//! Java: `tools/command/consumer/*`, `connection/*`, `offset/ResetOffsetByTimeCommand` (and
//! `ResetOffsetByTimeOldCommand` for groups a broker cannot reset because none is online).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{SystemTime, UNIX_EPOCH};

use ferromq_client::admin::{json, RollbackStats, SubscriptionGroupConfig};
use ferromq_protocol::body::{Connection, ConsumeType, ConsumerConnection, MessageQueue, OffsetWrapper};
use ferromq_protocol::version;

use crate::admin::output::{format_ms, parse_timestamp, print_json, Table};
use crate::admin::{target_brokers, ConfigListArgs, Ctx};

#[derive(Debug, clap::Args)]
pub(crate) struct UpdateSubGroupArgs {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Consumer group name.
    #[arg(short = 'g', long = "groupName")]
    group: String,
    /// Consumption enabled.
    #[arg(short = 's', long = "consumeEnable")]
    consume_enable: Option<bool>,
    /// Start from the minimum offset.
    #[arg(short = 'm', long = "consumeFromMinEnable")]
    consume_from_min_enable: Option<bool>,
    /// Broadcast consumption allowed.
    #[arg(short = 'd', long = "consumeBroadcastEnable")]
    consume_broadcast_enable: Option<bool>,
    /// Orderly consumption.
    #[arg(short = 'o', long = "consumeMessageOrderly")]
    consume_message_orderly: Option<bool>,
    /// Retry queue count.
    #[arg(short = 'q', long = "retryQueueNums")]
    retry_queue_nums: Option<i32>,
    /// Redeliveries before the dead-letter queue.
    #[arg(short = 'r', long = "retryMaxTimes")]
    retry_max_times: Option<i32>,
    /// Group retry policy JSON (accepted; not applied).
    #[arg(short = 'p', long = "groupRetryPolicy")]
    group_retry_policy: Option<String>,
    /// Broker id to consume from.
    #[arg(short = 'i', long = "brokerId")]
    broker_id: Option<i64>,
    /// Broker id to consume from when consumption is slow.
    #[arg(short = 'w', long = "whichBrokerWhenConsumeSlowly")]
    which_broker_when_consume_slowly: Option<i64>,
    /// Tell consumers when the group's membership changes.
    #[arg(short = 'a', long = "notifyConsumerIdsChanged")]
    notify_consumer_ids_changed: Option<bool>,
}

pub(crate) async fn update_sub_group(ctx: &Ctx, a: UpdateSubGroupArgs) -> anyhow::Result<()> {
    let mut s = SubscriptionGroupConfig::new(a.group.clone());
    s.consume_enable = a.consume_enable.unwrap_or(s.consume_enable);
    s.consume_from_min_enable = a.consume_from_min_enable.unwrap_or(s.consume_from_min_enable);
    s.consume_broadcast_enable = a.consume_broadcast_enable.unwrap_or(s.consume_broadcast_enable);
    s.consume_message_orderly = a.consume_message_orderly.unwrap_or(s.consume_message_orderly);
    s.retry_queue_nums = a.retry_queue_nums.unwrap_or(s.retry_queue_nums);
    s.retry_max_times = a.retry_max_times.unwrap_or(s.retry_max_times);
    s.broker_id = a.broker_id.unwrap_or(s.broker_id);
    s.which_broker_when_consume_slowly =
        a.which_broker_when_consume_slowly.unwrap_or(s.which_broker_when_consume_slowly);
    s.notify_consumer_ids_changed_enable =
        a.notify_consumer_ids_changed.unwrap_or(s.notify_consumer_ids_changed_enable);
    let targets = target_brokers(ctx, a.broker_addr.as_deref(), a.cluster.as_deref()).await?;
    for (_, addr) in &targets {
        ctx.client.create_subscription_group(addr, &s).await?;
        if !ctx.json {
            println!("create subscription group to {addr} success.");
        }
    }
    if ctx.json {
        let brokers: Vec<&String> = targets.iter().map(|(_, addr)| addr).collect();
        return print_json(&json!({ "subscriptionGroupConfig": s, "brokers": brokers }));
    }
    println!("{s:?}");
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct SetConsumeModeArgs {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Topic.
    #[arg(short = 't', long = "topicName")]
    topic: String,
    /// Consumer group.
    #[arg(short = 'g', long = "groupName")]
    group: String,
    /// PULL or POP.
    #[arg(short = 'm', long = "mode")]
    mode: String,
    /// POP: how many other clients' queues each client also pops (0: every queue).
    #[arg(short = 'q', long = "popShareQueueNum")]
    pop_share_queue_num: Option<i32>,
}

/// `setConsumeMode`: makes a group pull or pop a topic, on one broker or every master of a
/// cluster. Java: `SetConsumeModeSubCommand`.
pub(crate) async fn set_consume_mode(ctx: &Ctx, a: SetConsumeModeArgs) -> anyhow::Result<()> {
    use ferromq_protocol::body::{MessageRequestMode, SetMessageRequestModeRequestBody};
    let Some(mode) = MessageRequestMode::from_name(&a.mode.to_ascii_uppercase()) else {
        anyhow::bail!("-m {}: the mode is PULL or POP", a.mode);
    };
    let body = SetMessageRequestModeRequestBody {
        consumer_group: a.group.clone(),
        mode,
        pop_share_queue_num: a.pop_share_queue_num.unwrap_or(0),
        topic: a.topic.clone(),
    };
    let targets = target_brokers(ctx, a.broker_addr.as_deref(), a.cluster.as_deref()).await?;
    for (_, addr) in &targets {
        ctx.client.set_message_request_mode(addr, &body).await?;
        if !ctx.json {
            println!("set consume mode to {addr} success.");
        }
    }
    if ctx.json {
        let brokers: Vec<&String> = targets.iter().map(|(_, addr)| addr).collect();
        return print_json(&json!({ "topic": a.topic, "group": a.group, "mode": mode.as_str(),
            "popShareQueueNum": body.pop_share_queue_num, "brokers": brokers }));
    }
    println!(
        "topic[{}] group[{}] consume mode[{}] popShareQueueNum[{}]",
        a.topic, a.group, mode, body.pop_share_queue_num
    );
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct DeleteSubGroupArgs {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Consumer group name.
    #[arg(short = 'g', long = "groupName")]
    group: String,
    /// Also remove the group's offsets (true|false).
    #[arg(short = 'r', long = "removeOffset")]
    remove_offset: Option<bool>,
}

pub(crate) async fn delete_sub_group(ctx: &Ctx, a: DeleteSubGroupArgs) -> anyhow::Result<()> {
    let targets = target_brokers(ctx, a.broker_addr.as_deref(), a.cluster.as_deref()).await?;
    for (_, addr) in &targets {
        ctx.client.delete_subscription_group(addr, &a.group, a.remove_offset.unwrap_or(false)).await?;
        if !ctx.json {
            println!("delete subscription group [{}] from broker [{addr}] success.", a.group);
        }
    }
    if ctx.json {
        let brokers: Vec<&String> = targets.iter().map(|(_, addr)| addr).collect();
        return print_json(&json!({ "group": a.group, "brokers": brokers, "deleted": true }));
    }
    Ok(())
}

/// Every master broker the name server knows, as (broker name, address).
pub(crate) async fn all_masters(ctx: &Ctx) -> anyhow::Result<Vec<(String, String)>> {
    let info = ctx.client.cluster_info().await?;
    Ok(info
        .broker_addr_table
        .values()
        .filter_map(|b| b.master_addr().map(|addr| (b.broker_name.clone(), addr.to_owned())))
        .collect())
}

#[derive(Debug, clap::Args)]
pub(crate) struct ConsumerProgressArgs {
    /// Consumer group name; without it, every group with offsets is listed.
    #[arg(short = 'g', long = "groupName")]
    group: Option<String>,
    /// Only this topic (with -g).
    #[arg(short = 't', long = "topicName")]
    topic: Option<String>,
    /// Show client IPs (accepted; not shown).
    #[arg(short = 's', long = "showClientIP")]
    show_client_ip: Option<bool>,
    /// Only brokers of this cluster.
    #[arg(short = 'c', long = "cluster")]
    cluster: Option<String>,
}

pub(crate) async fn consumer_progress(ctx: &Ctx, a: ConsumerProgressArgs) -> anyhow::Result<()> {
    let brokers = match a.cluster.as_deref() {
        Some(cluster) => target_brokers(ctx, None, Some(cluster)).await?,
        None => all_masters(ctx).await?,
    };
    let Some(group) = a.group else {
        return consumer_progress_all(ctx, &brokers).await;
    };
    let mut table: BTreeMap<MessageQueue, OffsetWrapper> = BTreeMap::new();
    let mut tps = 0.0;
    for (_, addr) in &brokers {
        let stats = ctx.client.consume_stats(addr, &group, a.topic.as_deref()).await?;
        tps += stats.consume_tps;
        table.extend(stats.offset_table);
    }
    if a.cluster.is_none() {
        table = logic_queues_of_static_topics(ctx, table).await?;
    }
    if table.is_empty() {
        // Java's mqadmin fails the same way (examineConsumeStats: CONSUMER_NOT_ONLINE).
        anyhow::bail!(
            "consumer group {group} not found: no broker has consume stats for it (the group does not exist, \
             or it has consumed nothing{})",
            a.topic.as_deref().map(|t| format!(" from topic {t}")).unwrap_or_default()
        );
    }
    let diff_total: i64 = table.values().map(|o| o.broker_offset - o.consumer_offset).sum();
    if ctx.json {
        let queues: Vec<_> = table
            .iter()
            .map(|(q, o)| {
                json!({ "topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id,
                    "brokerOffset": o.broker_offset, "consumerOffset": o.consumer_offset,
                    "diff": o.broker_offset - o.consumer_offset, "lastTimestamp": o.last_timestamp })
            })
            .collect();
        return print_json(&json!({ "group": group, "queues": queues, "consumeTps": tps, "diffTotal": diff_total }));
    }
    let mut out =
        Table::new(&["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"]);
    for (q, o) in &table {
        out.row(vec![
            q.topic.clone(),
            q.broker_name.clone(),
            q.queue_id.to_string(),
            o.broker_offset.to_string(),
            o.consumer_offset.to_string(),
            (o.broker_offset - o.consumer_offset).to_string(),
            format_ms(o.last_timestamp),
        ]);
    }
    out.print();
    println!();
    println!("Consume TPS: {tps:.2}");
    println!("Consume Diff Total: {diff_total}");
    Ok(())
}

/// The rows of static topics replaced by their logic queues' (`__syslo__<scope>__`), as
/// mqadmin shows them when no cluster is named (Java's `examineConsumeStats`,
/// `convertPhysicalConsumeStats`); other topics' rows stay.
async fn logic_queues_of_static_topics(
    ctx: &Ctx,
    table: BTreeMap<MessageQueue, OffsetWrapper>,
) -> anyhow::Result<BTreeMap<MessageQueue, OffsetWrapper>> {
    let topics: BTreeSet<String> = table.keys().map(|q| q.topic.clone()).collect();
    let mut out = BTreeMap::new();
    for topic in topics {
        let rows = table.iter().filter(|(q, _)| q.topic == topic);
        let route = ctx.client.topic_route(&topic).await.ok();
        let statics = match &route {
            Some(route) => crate::admin::static_topic::static_configs_of(ctx, &topic, route).await?,
            None => None,
        };
        let Some((configs, mock)) = statics else {
            out.extend(rows.map(|(q, o)| (q.clone(), *o)));
            continue;
        };
        let physical = rows.map(|(q, o)| ((q.broker_name.clone(), q.queue_id), *o)).collect();
        for (logic, wrapper) in ferromq_client::admin::static_topic::logic_consume_stats(&configs, &physical)? {
            out.insert(MessageQueue { topic: topic.clone(), broker_name: mock.clone(), queue_id: logic }, wrapper);
        }
    }
    Ok(out)
}

/// One row of `consumerProgress` without `-g`. Java: `GroupConsumeInfo`.
struct GroupConsumeInfo {
    group: String,
    connection: Option<ConsumerConnection>,
    consume_tps: f64,
    diff_total: i64,
}

impl GroupConsumeInfo {
    fn count(&self) -> usize {
        self.connection.as_ref().map_or(0, |c| c.connection_set.len())
    }

    /// The oldest member's version, `OFFLINE` with no member.
    fn version_desc(&self) -> String {
        match &self.connection {
            Some(c) if !c.connection_set.is_empty() => version_desc(c.min_version()),
            _ => "OFFLINE".to_owned(),
        }
    }

    /// `PULL` or `PUSH` (pop consumers show as `PUSH`, as in mqadmin); empty when offline.
    fn consume_type_desc(&self) -> &'static str {
        match &self.connection {
            Some(c) if !c.connection_set.is_empty() => {
                if c.consume_type == ConsumeType::ConsumeActively {
                    "PULL"
                } else {
                    "PUSH"
                }
            }
            _ => "",
        }
    }

    /// The message model of an online push group; empty otherwise, as in mqadmin.
    fn message_model_desc(&self) -> &'static str {
        match &self.connection {
            Some(c) if !c.connection_set.is_empty() && c.consume_type == ConsumeType::ConsumePassively => {
                c.message_model.as_str()
            }
            _ => "",
        }
    }
}

/// Java's `MQVersion.getVersionDesc` for the versions FerroMQ names; other ordinals print as
/// `V#<ordinal>`.
pub(crate) fn version_desc(ordinal: i32) -> String {
    let known = [
        (version::V3_4_9, "V3_4_9"),
        (version::V4_0_0, "V4_0_0"),
        (version::V4_9_4, "V4_9_4"),
        (version::V5_0_0, "V5_0_0"),
        (version::V5_3_1, "V5_3_1"),
        (version::V5_3_3, "V5_3_3"),
    ];
    known.iter().find(|(v, _)| *v == ordinal).map_or_else(|| format!("V#{ordinal}"), |(_, name)| (*name).to_owned())
}

/// `consumerProgress` without `-g`: every subscription group the brokers know
/// (GET_ALL_SUBSCRIPTIONGROUP_CONFIG), with its progress summed over the brokers
/// (GET_CONSUME_STATS) and its online members (GET_CONSUMER_CONNECTION_LIST). Groups with no
/// offsets on any broker are skipped, as mqadmin skips groups whose consume stats are empty.
/// (mqadmin finds the groups through the `%RETRY%` topics instead; a group is listed here even
/// before its retry topic exists.)
async fn consumer_progress_all(ctx: &Ctx, brokers: &[(String, String)]) -> anyhow::Result<()> {
    let mut groups = BTreeSet::new();
    for (_, addr) in brokers {
        groups.extend(ctx.client.all_subscription_groups(addr).await?.subscription_group_table.into_keys());
    }
    let mut rows = Vec::new();
    for group in groups {
        let mut queues = 0usize;
        let (mut consume_tps, mut diff_total) = (0.0, 0i64);
        for (_, addr) in brokers {
            // A broker that cannot tell (or has never seen the group) contributes nothing.
            if let Ok(stats) = ctx.client.consume_stats(addr, &group, None).await {
                queues += stats.offset_table.len();
                consume_tps += stats.consume_tps;
                diff_total += stats.offset_table.values().map(|o| o.broker_offset - o.consumer_offset).sum::<i64>();
            }
        }
        if queues == 0 {
            continue;
        }
        let mut connection = None;
        for (_, addr) in brokers {
            if let Ok(c) = ctx.client.consumer_connection(addr, &group).await {
                connection = Some(c);
                break;
            }
        }
        rows.push(GroupConsumeInfo { group, connection, consume_tps, diff_total });
    }
    if ctx.json {
        let items: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({ "group": r.group, "count": r.count(), "version": r.version_desc(),
                    "consumeType": r.consume_type_desc(), "messageModel": r.message_model_desc(),
                    "consumeTps": r.consume_tps, "diffTotal": r.diff_total })
            })
            .collect();
        return print_json(&json!(items));
    }
    let mut table = Table::new(&["#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"]);
    for r in &rows {
        table.row(vec![
            r.group.clone(),
            r.count().to_string(),
            r.version_desc(),
            r.consume_type_desc().to_owned(),
            r.message_model_desc().to_owned(),
            // mqadmin prints the TPS truncated to an integer.
            format!("{}", r.consume_tps.trunc()),
            r.diff_total.to_string(),
        ]);
    }
    table.print();
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct ConsumerConnectionArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "consumerGroup")]
    group: String,
    /// Ask this broker only.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
}

pub(crate) async fn consumer_connection(ctx: &Ctx, a: ConsumerConnectionArgs) -> anyhow::Result<()> {
    let brokers = match a.broker_addr {
        Some(addr) => vec![(addr.clone(), addr)],
        None => all_masters(ctx).await?,
    };
    let mut last_error = None;
    let mut found = None;
    for (_, addr) in &brokers {
        match ctx.client.consumer_connection(addr, &a.group).await {
            Ok(c) => {
                found = Some(c);
                break;
            }
            Err(e) => last_error = Some(e),
        }
    }
    let connection = match (found, last_error) {
        (Some(c), _) => c,
        (None, Some(e)) => return Err(e.into()),
        (None, None) => anyhow::bail!("no broker found (asked {})", ctx.client.namesrv_addrs().join(";")),
    };
    if ctx.json {
        return print_json(&json!(connection));
    }
    print_connections(&connection.connection_set);
    println!();
    println!("Below is subscription:");
    let mut subs = Table::new(&["#Topic", "#SubExpression"]);
    for (topic, sub) in &connection.subscription_table {
        subs.row(vec![topic.clone(), sub.sub_string.clone()]);
    }
    subs.print();
    println!();
    println!("ConsumeType: {:?}", connection.consume_type);
    println!("MessageModel: {:?}", connection.message_model);
    println!("ConsumeFromWhere: {:?}", connection.consume_from_where);
    Ok(())
}

fn print_connections(set: &[Connection]) {
    let mut table = Table::new(&["#ClientId", "#ClientAddr", "#Language", "#Version"]);
    for c in set {
        table.row(vec![
            c.client_id.clone(),
            c.client_addr.clone(),
            c.language.name().to_owned(),
            c.version.to_string(),
        ]);
    }
    table.print();
}

#[derive(Debug, clap::Args)]
pub(crate) struct ProducerConnectionArgs {
    /// Producer group name.
    #[arg(short = 'g', long = "producerGroup")]
    group: String,
    /// A topic the group produces to (its brokers are asked).
    #[arg(short = 't', long = "topic")]
    topic: String,
}

pub(crate) async fn producer_connection(ctx: &Ctx, a: ProducerConnectionArgs) -> anyhow::Result<()> {
    let mut all = Vec::new();
    for (_, addr) in ctx.client.route_brokers(&a.topic).await? {
        all.extend(ctx.client.producer_connection(&addr, &a.group).await?.connection_set);
    }
    if ctx.json {
        return print_json(&json!({ "connectionSet": all }));
    }
    print_connections(&all);
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct ResetOffsetByTimeArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "group")]
    group: String,
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Time to reset to: `now`, milliseconds since the epoch, or `yyyy-MM-dd#HH:mm:ss:SSS`
    /// (read as UTC; mqadmin reads it in the JVM's local time zone).
    #[arg(short = 's', long = "timestamp")]
    timestamp: String,
    /// Reset even if the new offset is ahead of the consumed one (true|false, default true).
    /// A 5.x broker (FerroMQ's included) ignores it, as Java's does; it counts when this tool
    /// commits the offsets of an offline group itself.
    #[arg(short = 'f', long = "force")]
    force: Option<bool>,
}

pub(crate) async fn reset_offset_by_time(ctx: &Ctx, a: ResetOffsetByTimeArgs) -> anyhow::Result<()> {
    // -1 is the end of every queue (skipAccumulatedMessage; mqadmin takes it here too).
    let timestamp = if a.timestamp.trim() == "-1" {
        -1
    } else if a.timestamp.trim() == "now" {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    } else {
        parse_timestamp(a.timestamp.trim()).ok_or_else(|| {
            anyhow::anyhow!(
                "invalid timestamp {:?}: give now, milliseconds since the epoch or yyyy-MM-dd#HH:mm:ss:SSS (UTC)",
                a.timestamp
            )
        })?
    };
    let force = a.force.unwrap_or(true);
    let outcome = ctx.client.reset_group_offset_by_time(&a.topic, &a.group, timestamp, force).await?;
    if outcome.offline {
        return print_offline_reset(ctx, &a, timestamp, force, &outcome.stats);
    }
    if ctx.json {
        let items: Vec<_> = outcome
            .stats
            .iter()
            .map(|r| json!({ "brokerName": r.queue.broker_name, "queueId": r.queue.queue_id, "offset": r.rollback_offset }))
            .collect();
        return print_json(&json!({ "group": a.group, "topic": a.topic, "timestamp": timestamp, "offsets": items }));
    }
    println!(
        "rollback consumer offset by specified group[{}], topic[{}], timestamp(ms)[{timestamp}]",
        a.group, a.topic
    );
    let mut table = Table::new(&["#brokerName", "#queueId", "#offset"]);
    for r in outcome.stats {
        table.row(vec![r.queue.broker_name, r.queue.queue_id.to_string(), r.rollback_offset.to_string()]);
    }
    table.print();
    Ok(())
}

/// An offline reset (no consumer online: the offsets were committed by this tool, as
/// mqadmin's `ResetOffsetByTimeOldCommand` does) in mqadmin's layout.
fn print_offline_reset(
    ctx: &Ctx,
    a: &ResetOffsetByTimeArgs,
    timestamp: i64,
    force: bool,
    stats: &[RollbackStats],
) -> anyhow::Result<()> {
    if ctx.json {
        let items: Vec<_> = stats
            .iter()
            .map(|r| {
                json!({ "brokerName": r.queue.broker_name, "queueId": r.queue.queue_id, "offset": r.rollback_offset,
                    "brokerOffset": r.broker_offset, "consumerOffset": r.consumer_offset,
                    "timestampOffset": r.timestamp_offset })
            })
            .collect();
        return print_json(&json!({ "group": a.group, "topic": a.topic, "timestamp": timestamp, "force": force,
            "offline": true, "offsets": items }));
    }
    println!(
        "reset consumer offset by specified consumerGroup[{}], topic[{}], force[{force}], timestamp(string)[{}], \
         timestamp(long)[{timestamp}]",
        a.group, a.topic, a.timestamp
    );
    println!(
        "{:<20}  {:<20}  {:<20}  {:<20}  {:<20}  {:<20}",
        "#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset", "#resetOffset"
    );
    for r in stats {
        let name: String = r.queue.broker_name.chars().take(32).collect();
        println!(
            "{name:<20}  {:<20}  {:<20}  {:<20}  {:<20}  {:<20}",
            r.queue.queue_id, r.broker_offset, r.consumer_offset, r.timestamp_offset, r.rollback_offset
        );
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct CloneGroupOffsetArgs {
    /// The group whose offsets are copied.
    #[arg(short = 's', long = "srcGroup")]
    src_group: String,
    /// The group that gets them.
    #[arg(short = 'd', long = "destGroup")]
    dest_group: String,
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// The source group or the topic is offline (true|false): copy even what an online source
    /// group does not subscribe to.
    #[arg(short = 'o', long = "offline", action = clap::ArgAction::Set, default_value_t = false)]
    offline: bool,
}

/// `cloneGroupOffset`: copies one group's committed offsets on a topic to another group, on
/// every broker of the topic (CLONE_GROUP_OFFSET). Java: `CloneGroupOffsetCommand`.
pub(crate) async fn clone_group_offset(ctx: &Ctx, a: CloneGroupOffsetArgs) -> anyhow::Result<()> {
    let brokers = ctx.client.route_brokers(&a.topic).await?;
    for (_, addr) in &brokers {
        ctx.client.clone_group_offset(addr, &a.src_group, &a.dest_group, &a.topic, a.offline).await?;
    }
    if ctx.json {
        let addrs: Vec<&String> = brokers.iter().map(|(_, addr)| addr).collect();
        return print_json(
            &json!({ "srcGroup": a.src_group, "destGroup": a.dest_group, "topic": a.topic, "brokers": addrs }),
        );
    }
    println!("clone group offset success. srcGroup[{}], destGroup=[{}], topic[{}]", a.src_group, a.dest_group, a.topic);
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct SkipAccumulatedMessageArgs {
    /// Consumer group name.
    #[arg(short = 'g', long = "group")]
    group: String,
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Move the offsets even where that goes backwards (true|false, default true).
    #[arg(short = 'f', long = "force")]
    force: Option<bool>,
}

/// `skipAccumulatedMessage`: moves a group's offsets on a topic to the end, skipping what it
/// has not consumed: resetOffsetByTime to -1. Java: `SkipAccumulationSubCommand`.
pub(crate) async fn skip_accumulated_message(ctx: &Ctx, a: SkipAccumulatedMessageArgs) -> anyhow::Result<()> {
    let reset = ResetOffsetByTimeArgs { group: a.group, topic: a.topic, timestamp: "-1".to_owned(), force: a.force };
    reset_offset_by_time(ctx, reset).await
}

/// `updateSubGroupList`: creates or updates the subscription groups of a file in one request
/// per broker. Java: `UpdateSubGroupListSubCommand`.
pub(crate) async fn update_sub_group_list(ctx: &Ctx, a: ConfigListArgs) -> anyhow::Result<()> {
    let (groups, targets) = a.load::<SubscriptionGroupConfig>(ctx, "subscription groups").await?;
    for (_, addr) in &targets {
        ctx.client.update_subscription_group_list(addr, groups.clone()).await?;
        if !ctx.json {
            println!("submit batch of group config to {addr} success, please check the result later.");
        }
    }
    if ctx.json {
        let names: Vec<&str> = groups.iter().map(|g| g.group_name.as_str()).collect();
        let addrs: Vec<&String> = targets.iter().map(|(_, addr)| addr).collect();
        return print_json(&json!({ "groups": names, "brokers": addrs }));
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct GetConsumerConfigArgs {
    /// Subscription group name.
    #[arg(short = 'g', long = "groupName")]
    group: String,
}

/// `getConsumerConfig`: a subscription group's settings on every master of every cluster that
/// has it. Java: `GetConsumerConfigSubCommand`.
pub(crate) async fn get_consumer_config(ctx: &Ctx, a: GetConsumerConfigArgs) -> anyhow::Result<()> {
    let info = ctx.client.cluster_info().await?;
    let mut found = Vec::new();
    for (cluster, names) in &info.cluster_addr_table {
        for name in names {
            let Some(addr) = info.broker_addr_table.get(name).and_then(|b| b.master_addr()) else { continue };
            // As mqadmin, a broker without the group is passed over.
            if let Ok(config) = ctx.client.subscription_group(addr, &a.group).await {
                found.push((cluster.clone(), addr.to_owned(), config));
            }
        }
    }
    if ctx.json {
        let all: Vec<_> = found
            .iter()
            .map(|(cluster, addr, config)| json!({ "clusterName": cluster, "brokerAddr": addr, "config": config }))
            .collect();
        return print_json(&json!(all));
    }
    for (cluster, addr, config) in &found {
        println!("============================={cluster}:{addr}=============================");
        if let ferromq_client::admin::JsonValue::Object(fields) = json!(config) {
            for (field, value) in fields {
                let value = match value {
                    ferromq_client::admin::JsonValue::String(s) => s,
                    ferromq_client::admin::JsonValue::Null => String::new(),
                    other => other.to_string(),
                };
                println!("{field:<40}=  {value}");
            }
        }
    }
    Ok(())
}
