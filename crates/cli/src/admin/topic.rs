//! Topic commands: updateTopic, deleteTopic, topicList, topicRoute, topicStatus,
//! topicClusterList.
//! Java: `tools/command/topic/*SubCommand`.

use std::collections::BTreeMap;

use anyhow::Context;
use ferromq_client::admin::json;
use ferromq_protocol::body::{perm, TopicConfig, TopicOffset};

use crate::admin::output::{format_ms, print_json, Table};
use crate::admin::{target_brokers, ConfigListArgs, Ctx};

#[derive(Debug, clap::Args)]
pub(crate) struct UpdateTopicArgs {
    /// Create the topic on this broker.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Create the topic on every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Read queue count.
    #[arg(short = 'r', long = "readQueueNums", default_value_t = 8)]
    read_queue_nums: i32,
    /// Write queue count.
    #[arg(short = 'w', long = "writeQueueNums", default_value_t = 8)]
    write_queue_nums: i32,
    /// Permission: 2 (write), 4 (read) or 6 (read and write).
    #[arg(short = 'p', long = "perm", default_value_t = 6)]
    perm: i32,
    /// Ordered topic (true|false).
    #[arg(short = 'o', long = "order")]
    order: Option<bool>,
    /// Attribute changes, `+key=value` to set and `-key` to remove, comma-separated.
    #[arg(short = 'a', long = "attributes", allow_hyphen_values = true)]
    attributes: Option<String>,
    /// Unit topic (accepted for compatibility; ignored).
    #[arg(short = 'u', long = "unit")]
    unit: Option<bool>,
    /// Has unit subscription (accepted for compatibility; ignored).
    #[arg(short = 's', long = "hasUnitSub")]
    has_unit_sub: Option<bool>,
}

pub(crate) async fn update_topic(ctx: &Ctx, a: UpdateTopicArgs) -> anyhow::Result<()> {
    if ![perm::PERM_READ, perm::PERM_WRITE, perm::PERM_READ | perm::PERM_WRITE].contains(&a.perm) {
        anyhow::bail!("invalid perm {}: use 2 (W), 4 (R) or 6 (RW)", a.perm);
    }
    let mut config = TopicConfig::new(a.topic.clone(), a.read_queue_nums, a.write_queue_nums);
    config.perm = a.perm;
    config.order = a.order.unwrap_or(false);
    // mqadmin's form: changes to the topic's attributes, `+key=value` to set, `-key` to remove.
    let changes: Vec<&str> =
        a.attributes.as_deref().unwrap_or_default().split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    for item in &changes {
        if let Some(set) = item.strip_prefix('+') {
            let Some((k, v)) = set.split_once('=') else {
                anyhow::bail!("invalid attribute {item:?}: expected +key=value or -key");
            };
            config.attributes.insert(k.to_owned(), v.to_owned());
        } else if item.strip_prefix('-').is_none_or(|k| k.is_empty() || k.contains('=')) {
            anyhow::bail!("invalid attribute {item:?}: expected +key=value or -key");
        }
    }
    let targets = target_brokers(ctx, a.broker_addr.as_deref(), a.cluster.as_deref()).await?;
    let mut done = Vec::new();
    for (name, addr) in &targets {
        ctx.client.update_topic(addr, &config, &changes.join(",")).await?;
        if !ctx.json {
            println!("create topic to {addr} success.");
        }
        done.push(json!({ "brokerName": name, "brokerAddr": addr }));
    }
    if ctx.json {
        return print_json(&json!({ "topicConfig": config, "brokers": done }));
    }
    println!(
        "TopicConfig [topicName={}, readQueueNums={}, writeQueueNums={}, perm={}, topicFilterType=SINGLE_TAG, topicSysFlag=0, order={}, attributes={:?}]",
        config.topic_name,
        config.read_queue_nums,
        config.write_queue_nums,
        perm_text(config.perm),
        config.order,
        config.attributes
    );
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct DeleteTopicArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Delete the topic from every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: String,
}

pub(crate) async fn delete_topic(ctx: &Ctx, a: DeleteTopicArgs) -> anyhow::Result<()> {
    let targets = target_brokers(ctx, None, Some(&a.cluster)).await?;
    for (_, addr) in &targets {
        ctx.client.delete_topic_in_broker(addr, &a.topic).await?;
    }
    ctx.client.delete_topic_in_namesrv(&a.topic, Some(&a.cluster)).await?;
    if ctx.json {
        let brokers: Vec<&String> = targets.iter().map(|(_, addr)| addr).collect();
        return print_json(&json!({ "topic": a.topic, "cluster": a.cluster, "brokers": brokers, "deleted": true }));
    }
    println!("delete topic [{}] from cluster [{}] success.", a.topic, a.cluster);
    println!("delete topic [{}] from NameServer success.", a.topic);
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct TopicListArgs {
    /// Show the cluster of each topic.
    #[arg(short = 'c', long = "clusterModel")]
    cluster_model: bool,
}

pub(crate) async fn topic_list(ctx: &Ctx, a: TopicListArgs) -> anyhow::Result<()> {
    if !a.cluster_model {
        let list = ctx.client.topic_list().await?;
        if ctx.json {
            return print_json(&json!({ "topicList": list.topic_list }));
        }
        for topic in &list.topic_list {
            println!("{topic}");
        }
        return Ok(());
    }
    let info = ctx.client.cluster_info().await?;
    let mut rows = Vec::new();
    for cluster in info.cluster_addr_table.keys() {
        for topic in ctx.client.topics_by_cluster(cluster).await?.topic_list {
            rows.push((cluster.clone(), topic));
        }
    }
    if ctx.json {
        let items: Vec<_> = rows.iter().map(|(c, t)| json!({ "clusterName": c, "topic": t })).collect();
        return print_json(&json!(items));
    }
    let mut table = Table::new(&["#Cluster Name", "#Topic"]);
    for (cluster, topic) in rows {
        table.row(vec![cluster, topic]);
    }
    table.print();
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct TopicRouteArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Print a table instead of the route JSON.
    #[arg(short = 'l', long = "list")]
    list: bool,
}

pub(crate) async fn topic_route(ctx: &Ctx, a: TopicRouteArgs) -> anyhow::Result<()> {
    let route = ctx.client.topic_route(&a.topic).await?;
    if ctx.json || !a.list {
        return print_json(&json!(route));
    }
    let mut table = Table::new(&["#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"]);
    for broker in &route.broker_datas {
        let queue = route.queue_datas.iter().find(|q| q.broker_name == broker.broker_name);
        let addrs: Vec<String> = broker.broker_addrs.iter().map(|(id, addr)| format!("{id}:{addr}")).collect();
        table.row(vec![
            broker.cluster.clone(),
            broker.broker_name.clone(),
            addrs.join(","),
            queue.map_or(0, |q| q.read_queue_nums).to_string(),
            queue.map_or(0, |q| q.write_queue_nums).to_string(),
            queue.map_or(0, |q| q.perm).to_string(),
        ]);
    }
    table.print();
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct TopicStatusArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Only brokers of this cluster.
    #[arg(short = 'c', long = "cluster")]
    cluster: Option<String>,
}

pub(crate) async fn topic_status(ctx: &Ctx, a: TopicStatusArgs) -> anyhow::Result<()> {
    let route = ctx.client.topic_route(&a.topic).await?;
    let mut offsets: BTreeMap<(String, i32), TopicOffset> = BTreeMap::new();
    for broker in &route.broker_datas {
        if a.cluster.as_deref().is_some_and(|c| c != broker.cluster) {
            continue;
        }
        let addr = broker
            .select_broker_addr()
            .with_context(|| format!("broker {} has no address in the route", broker.broker_name))?;
        let stats = ctx.client.topic_stats(addr, &a.topic).await?;
        for (queue, offset) in stats.offset_table {
            offsets.insert((queue.broker_name, queue.queue_id), offset);
        }
    }
    // A static topic also shows its logic queues (Java's `convertPhysicalTopicStats`).
    if let Some((configs, mock)) = crate::admin::static_topic::static_configs_of(ctx, &a.topic, &route).await? {
        for (logic, offset) in ferromq_client::admin::static_topic::logic_topic_stats(&configs, &offsets)? {
            offsets.insert((mock.clone(), logic), offset);
        }
    }
    if ctx.json {
        let items: Vec<_> = offsets
            .iter()
            .map(|((b, q), o)| {
                json!({ "brokerName": b, "queueId": q, "minOffset": o.min_offset, "maxOffset": o.max_offset,
                    "lastUpdateTimestamp": o.last_update_timestamp })
            })
            .collect();
        return print_json(&json!({ "topic": a.topic, "queues": items }));
    }
    let mut table = Table::new(&["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"]);
    for ((broker, queue_id), o) in offsets {
        table.row(vec![
            broker,
            queue_id.to_string(),
            o.min_offset.to_string(),
            o.max_offset.to_string(),
            format_ms(o.last_update_timestamp),
        ]);
    }
    table.print();
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct TopicClusterListArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
}

/// The clusters whose brokers serve a topic, one name a line as mqadmin prints them.
pub(crate) async fn topic_cluster_list(ctx: &Ctx, a: TopicClusterListArgs) -> anyhow::Result<()> {
    let clusters = ctx.client.topic_cluster_list(a.topic.trim()).await?;
    if ctx.json {
        return print_json(&json!({ "topic": a.topic.trim(), "clusters": clusters }));
    }
    for cluster in &clusters {
        println!("{cluster}");
    }
    Ok(())
}

fn perm_text(p: i32) -> String {
    let mut s = String::new();
    s.push(if p & perm::PERM_READ != 0 { 'R' } else { '-' });
    s.push(if p & perm::PERM_WRITE != 0 { 'W' } else { '-' });
    s.push(if p & perm::PERM_INHERIT != 0 { 'X' } else { '-' });
    s
}

#[derive(Debug, clap::Args)]
pub(crate) struct UpdateTopicPermArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// New permission: 2 (write), 4 (read) or 6 (read and write).
    #[arg(short = 'p', long = "perm")]
    perm: i32,
    /// The master broker to change it on.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
}

/// `updateTopicPerm`: changes a topic's permission, keeping its queues as the route has them.
/// Java: `UpdateTopicPermSubCommand`.
pub(crate) async fn update_topic_perm(ctx: &Ctx, a: UpdateTopicPermArgs) -> anyhow::Result<()> {
    if ![perm::PERM_WRITE, perm::PERM_READ, perm::PERM_READ | perm::PERM_WRITE].contains(&a.perm) {
        anyhow::bail!("perm must be 2 (write), 4 (read) or 6 (read and write), not {}", a.perm);
    }
    let route = ctx.client.topic_route(&a.topic).await?;
    let first = route.queue_datas.first().with_context(|| format!("topic {} has no queues", a.topic))?;
    let mut config = TopicConfig::new(a.topic.clone(), first.read_queue_nums, first.write_queue_nums);
    config.topic_sys_flag = first.topic_sys_flag;
    config.perm = a.perm;
    let mut updated = Vec::new();
    if let Some(addr) = a.broker_addr.as_deref() {
        let Some(group) = route.broker_datas.iter().find(|b| b.master_addr() == Some(addr)) else {
            anyhow::bail!("updateTopicPerm error broker not exit or broker is not master!");
        };
        let old = route.queue_datas.iter().find(|q| q.broker_name == group.broker_name).map_or(0, |q| q.perm);
        if old == a.perm {
            println!("new perm equals to the old one!");
            return Ok(());
        }
        ctx.client.update_topic(addr, &config, "").await?;
        updated.push((old, addr.to_owned()));
    } else {
        let cluster = a.cluster.as_deref().context("give a broker address (-b) or a cluster name (-c)")?;
        for (_, addr) in target_brokers(ctx, None, Some(cluster)).await? {
            ctx.client.update_topic(&addr, &config, "").await?;
            updated.push((first.perm, addr));
        }
    }
    if ctx.json {
        let brokers: Vec<_> = updated.iter().map(|(old, addr)| json!({ "brokerAddr": addr, "oldPerm": old })).collect();
        return print_json(&json!({ "topic": a.topic, "perm": a.perm, "brokers": brokers }));
    }
    for (old, addr) in updated {
        println!("update topic perm from {old} to {} in {addr} success.", a.perm);
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct UpdateOrderConfArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// `get`, `put` or `delete`.
    #[arg(short = 'm', long = "method")]
    method: String,
    /// The order conf to put: `brokerName1:queues;brokerName2:queues`.
    #[arg(short = 'v', long = "orderConf")]
    order_conf: Option<String>,
}

/// The name servers' KV namespace of ordered topics' queue layout. Java:
/// `NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`.
const NAMESPACE_ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// `updateOrderConf`: reads, sets or removes the queue layout a name server serves for an
/// ordered topic (with `orderMessageEnable`). Java: `UpdateOrderConfCommand`.
pub(crate) async fn update_order_conf(ctx: &Ctx, a: UpdateOrderConfArgs) -> anyhow::Result<()> {
    let topic = a.topic.as_str();
    match a.method.as_str() {
        "get" => {
            let conf = ctx.client.kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic).await?;
            if ctx.json {
                return print_json(&json!({ "topic": topic, "orderConf": conf }));
            }
            println!("get orderConf success. topic=[{topic}], orderConf=[{}] ", conf.unwrap_or_default());
        }
        "put" => {
            let conf = a.order_conf.as_deref().context("put needs the order conf: -v brokerName:queues;...")?;
            ctx.client.put_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic, conf).await?;
            if ctx.json {
                return print_json(&json!({ "topic": topic, "orderConf": conf }));
            }
            println!("update orderConf success. topic=[{topic}], orderConf=[{conf}]");
        }
        "delete" => {
            ctx.client.delete_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic).await?;
            if ctx.json {
                return print_json(&json!({ "topic": topic, "deleted": true }));
            }
            println!("delete orderConf success. topic=[{topic}]");
        }
        other => anyhow::bail!("unknown method {other:?}: give get, put or delete"),
    }
    Ok(())
}

/// `updateTopicList`: creates or updates the topics of a file in one request per broker.
/// Java: `UpdateTopicListSubCommand`.
pub(crate) async fn update_topic_list(ctx: &Ctx, a: ConfigListArgs) -> anyhow::Result<()> {
    let (topics, targets) = a.load::<TopicConfig>(ctx, "topic configs").await?;
    for (_, addr) in &targets {
        ctx.client.update_topic_list(addr, topics.clone()).await?;
        if !ctx.json {
            println!("submit batch of topic config to {addr} success, please check the result later.");
        }
    }
    if ctx.json {
        let names: Vec<&str> = topics.iter().map(|t| t.topic_name.as_str()).collect();
        let addrs: Vec<&String> = targets.iter().map(|(_, addr)| addr).collect();
        return print_json(&json!({ "topics": names, "brokers": addrs }));
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct QueryCqArgs {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Queue id.
    #[arg(short = 'q', long = "queue")]
    queue_id: i32,
    /// Queue offset of the first unit.
    #[arg(short = 'i', long = "index")]
    index: i64,
    /// Units to show.
    #[arg(short = 'c', long = "count", default_value_t = 10)]
    count: i32,
    /// Broker address (default: the topic's first broker group's master).
    #[arg(short = 'b', long = "broker")]
    broker_addr: Option<String>,
    /// A consumer group whose subscription to show.
    #[arg(short = 'g', long = "consumer")]
    group: Option<String>,
}

/// `queryCq`: the units of one consume queue. Java: `QueryConsumeQueueCommand`.
pub(crate) async fn query_cq(ctx: &Ctx, a: QueryCqArgs) -> anyhow::Result<()> {
    let addr = match a.broker_addr.clone() {
        Some(addr) => addr,
        None => {
            let route = ctx.client.topic_route(&a.topic).await?;
            route
                .broker_datas
                .first()
                .and_then(|b| b.master_addr())
                .map(str::to_owned)
                .context("No topic route data!")?
        }
    };
    let answer =
        ctx.client.query_consume_queue(&addr, (&a.topic, a.queue_id), a.index, a.count, a.group.as_deref()).await?;
    let body = match answer {
        Ok(body) => body,
        Err(remark) => {
            if ctx.json {
                return print_json(&json!({ "brokerAddr": addr, "remark": remark }));
            }
            println!("{}", remark.unwrap_or_default());
            return Ok(());
        }
    };
    if ctx.json {
        return print_json(&json!({ "brokerAddr": addr, "body": body }));
    }
    let rule = "======================================";
    if let Some(sub) = &body.subscription_data {
        println!("Subscription data: \n{}", ferromq_client::admin::json_to_string_pretty(&json!(sub))?);
        println!("{rule}");
    }
    if let Some(filter) = &body.filter_data {
        println!("Filter data: \n{filter}");
        println!("{rule}");
    }
    println!("Queue data: \nmax: {}, min: {}", body.max_queue_index, body.min_queue_index);
    println!("{rule}");
    for (i, unit) in body.queue_data.iter().enumerate() {
        println!("idx: {}", a.index + i as i64);
        println!(
            "ConsumeQueueData{{physicOffset={}, physicSize={}, tagsCode={}, extendDataJson='{}', bitMap='{}', eval={}, msg='{}'}}",
            unit.physic_offset,
            unit.physic_size,
            unit.tags_code,
            unit.extend_data_json.as_deref().unwrap_or("null"),
            unit.bit_map.as_deref().unwrap_or("null"),
            unit.eval,
            unit.msg.as_deref().unwrap_or("null"),
        );
        println!("{rule}");
    }
    Ok(())
}
