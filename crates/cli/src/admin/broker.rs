//! Cluster and broker commands: clusterList, brokerStatus, getBrokerConfig, updateBrokerConfig,
//! producer, brokerConsumeStats. Java: `tools/command/cluster/ClusterListSubCommand`,
//! `broker/BrokerStatusSubCommand`, `broker/GetBrokerConfigCommand`,
//! `broker/UpdateBrokerConfigSubCommand`, `producer/ProducerSubCommand`,
//! `broker/BrokerConsumeStatsSubCommad`.

use std::collections::BTreeMap;

use ferromq_client::admin::{json, JsonValue};

use crate::admin::group::all_masters;
use crate::admin::output::{format_ms, print_json, print_settings, Table};
use crate::admin::{target_brokers, Ctx};

#[derive(Debug, clap::Args)]
pub(crate) struct ClusterListArgs {
    /// Show more statistics (accepted; the table always shows TPS).
    #[arg(short = 'm', long = "moreStats")]
    more_stats: bool,
    /// Refresh interval in seconds (accepted; the list is printed once).
    #[arg(short = 'i', long = "interval")]
    interval: Option<u64>,
    /// Only this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
}

pub(crate) async fn cluster_list(ctx: &Ctx, a: ClusterListArgs) -> anyhow::Result<()> {
    let info = ctx.client.cluster_info().await?;
    let mut rows = Vec::new();
    for (cluster, names) in &info.cluster_addr_table {
        if a.cluster.as_deref().is_some_and(|c| c != cluster) {
            continue;
        }
        for name in names {
            let Some(group) = info.broker_addr_table.get(name) else { continue };
            for (id, addr) in &group.broker_addrs {
                // A broker that does not answer still belongs in the list; its stats stay empty.
                let runtime = ctx.client.broker_runtime_info(addr).await.unwrap_or_default();
                rows.push((cluster.clone(), name.clone(), *id, addr.clone(), runtime));
            }
        }
    }
    if ctx.json {
        let items: Vec<JsonValue> = rows
            .iter()
            .map(|(c, n, id, addr, rt)| {
                json!({ "clusterName": c, "brokerName": n, "brokerId": id, "brokerAddr": addr,
                    "version": rt.get("brokerVersionDesc"), "putTps": first(rt, "putTps"),
                    "getTps": first(rt, "getFoundTps") })
            })
            .collect();
        return print_json(&json!(items));
    }
    let mut table = Table::new(&["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS", "#OutTPS"]);
    for (cluster, name, id, addr, rt) in rows {
        table.row(vec![
            cluster,
            name,
            id.to_string(),
            addr,
            rt.get("brokerVersionDesc").cloned().unwrap_or_else(|| "-".to_owned()),
            first(&rt, "putTps"),
            first(&rt, "getFoundTps"),
        ]);
    }
    table.print();
    Ok(())
}

/// The first number of a space-separated TPS value (Java's keys hold 10 s, 60 s, 600 s).
fn first(rt: &BTreeMap<String, String>, key: &str) -> String {
    rt.get(key).and_then(|v| v.split_whitespace().next()).unwrap_or("-").to_owned()
}

#[derive(Debug, clap::Args)]
pub(crate) struct BrokerTargetArgs {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
}

pub(crate) async fn broker_status(ctx: &Ctx, a: BrokerTargetArgs) -> anyhow::Result<()> {
    let targets = target_brokers(ctx, a.broker_addr.as_deref(), a.cluster.as_deref()).await?;
    let mut all = BTreeMap::new();
    for (_, addr) in &targets {
        let table = ctx.client.broker_runtime_info(addr).await?;
        if !ctx.json {
            for (k, v) in &table {
                if targets.len() > 1 {
                    println!("{addr:<24} {k:<32}: {v}");
                } else {
                    println!("{k:<32}: {v}");
                }
            }
        }
        all.insert(addr.clone(), table);
    }
    if ctx.json {
        return print_json(&json!(all));
    }
    Ok(())
}

pub(crate) async fn get_broker_config(ctx: &Ctx, a: BrokerTargetArgs) -> anyhow::Result<()> {
    let targets = target_brokers(ctx, a.broker_addr.as_deref(), a.cluster.as_deref()).await?;
    let mut all = BTreeMap::new();
    for (_, addr) in &targets {
        let entries = ctx.client.broker_config(addr).await?;
        if !ctx.json {
            print_settings(addr, &entries);
        }
        all.insert(addr.clone(), entries.into_iter().collect::<BTreeMap<_, _>>());
    }
    if ctx.json {
        return print_json(&json!(all));
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct UpdateBrokerConfigArgs {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// With -c, update the slaves too (true|false).
    #[arg(short = 'a', long = "updateAllBroker")]
    update_all_broker: Option<bool>,
    /// Config key.
    #[arg(short = 'k', long = "key")]
    key: String,
    /// Config value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

/// UPDATE_BROKER_CONFIG with a one-entry properties body on each target broker. Unlike mqadmin,
/// which prints a stack trace and goes on when one broker of a cluster refuses, the first
/// refusal fails the command (after the brokers already updated are reported).
pub(crate) async fn update_broker_config(ctx: &Ctx, a: UpdateBrokerConfigArgs) -> anyhow::Result<()> {
    let (key, value) = (a.key.trim().to_owned(), a.value.trim().to_owned());
    if key.is_empty() {
        anyhow::bail!("the config key (-k) is empty");
    }
    let targets = match (a.broker_addr.as_deref(), a.cluster.as_deref(), a.update_all_broker) {
        (None, Some(cluster), Some(true)) => {
            let all = ctx.client.all_broker_addrs(cluster).await?;
            if all.is_empty() {
                anyhow::bail!("cluster {cluster} has no broker (asked {})", ctx.client.namesrv_addrs().join(";"));
            }
            all
        }
        (broker, cluster, _) => target_brokers(ctx, broker, cluster).await?,
    };
    let entries = BTreeMap::from([(key.clone(), value.clone())]);
    let mut done = Vec::new();
    for (_, addr) in &targets {
        ctx.client.update_broker_config(addr, &entries).await?;
        if !ctx.json {
            println!("update broker config success, {addr}");
        }
        done.push(addr.clone());
    }
    if ctx.json {
        return print_json(&json!({ "key": key, "value": value, "brokers": done }));
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct BrokerAddrArgs {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: String,
}

/// `producer`: every producer group's clients on one broker. Java: `ProducerSubCommand`.
pub(crate) async fn producer(ctx: &Ctx, a: BrokerAddrArgs) -> anyhow::Result<()> {
    let table = ctx.client.all_producer_info(&a.broker_addr).await?;
    if ctx.json {
        let groups: BTreeMap<&String, Vec<JsonValue>> = table
            .data
            .iter()
            .map(|(group, infos)| {
                let infos = infos
                    .iter()
                    .map(|i| {
                        json!({ "clientId": i.client_id, "remoteIP": i.remote_ip, "language": i.language.name(),
                            "version": i.version, "lastUpdateTimestamp": i.last_update_timestamp })
                    })
                    .collect();
                (group, infos)
            })
            .collect();
        return print_json(&json!(groups));
    }
    for (group, infos) in &table.data {
        println!("producer group ({group}) instances are below:");
        // The last update in milliseconds, as mqadmin prints it.
        let mut out = Table::new(&["#ClientId", "#Address", "#Language", "#Version", "#LastUpdateTimestamp"]);
        for i in infos {
            out.row(vec![
                i.client_id.clone(),
                i.remote_ip.clone(),
                i.language.name().to_owned(),
                i.version.to_string(),
                i.last_update_timestamp.to_string(),
            ]);
        }
        out.print();
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct BrokerConsumeStatsArgs {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: String,
    /// Only queues at least this far behind.
    #[arg(short = 'l', long = "level", default_value_t = 0)]
    level: i64,
    /// Only ordered topics (true|false).
    #[arg(short = 'o', long = "order", default_value_t = false, action = clap::ArgAction::Set)]
    order: bool,
    /// Accepted for mqadmin compatibility; the call uses the tool's own timeout.
    #[arg(short = 't', long = "timeoutMillis")]
    timeout_millis: Option<u64>,
}

/// `brokerConsumeStats`: every subscription group's progress on one broker. Java:
/// `BrokerConsumeStatsSubCommad`.
pub(crate) async fn broker_consume_stats(ctx: &Ctx, a: BrokerConsumeStatsArgs) -> anyhow::Result<()> {
    let _ = a.timeout_millis;
    let list = ctx.client.broker_consume_stats(&a.broker_addr, a.order).await?;
    let mut rows = Vec::new();
    for (group, stats) in list.consume_stats_list.iter().flatten() {
        for s in stats {
            for (q, o) in &s.offset_table {
                let diff = o.broker_offset - o.consumer_offset;
                if diff >= a.level {
                    rows.push((q.clone(), group.clone(), *o, diff));
                }
            }
        }
    }
    if ctx.json {
        let queues: Vec<JsonValue> = rows
            .iter()
            .map(|(q, group, o, diff)| {
                json!({ "topic": q.topic, "group": group, "brokerName": q.broker_name, "queueId": q.queue_id,
                    "brokerOffset": o.broker_offset, "consumerOffset": o.consumer_offset, "diff": diff,
                    "lastTimestamp": o.last_timestamp })
            })
            .collect();
        return print_json(&json!({ "brokerAddr": list.broker_addr, "queues": queues, "diffTotal": list.total_diff }));
    }
    let mut out = Table::new(&[
        "#Topic",
        "#Group",
        "#Broker Name",
        "#QID",
        "#Broker Offset",
        "#Consumer Offset",
        "#Diff",
        "#LastTime",
    ]);
    for (q, group, o, diff) in rows {
        out.row(vec![
            q.topic,
            group,
            q.broker_name,
            q.queue_id.to_string(),
            o.broker_offset.to_string(),
            o.consumer_offset.to_string(),
            diff.to_string(),
            format_ms(o.last_timestamp),
        ]);
    }
    out.print();
    println!();
    println!("Diff Total: {}", list.total_diff);
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct MaintenanceArgs {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Every master of this cluster (without -b or -c: every master of every cluster).
    #[arg(short = 'c', long = "cluster")]
    cluster: Option<String>,
}

/// The store clean-ups mqadmin triggers: cleanExpiredCQ (CLEAN_EXPIRED_CONSUMEQUEUE),
/// cleanUnusedTopic (CLEAN_UNUSED_TOPIC), deleteExpiredCommitLog (DELETE_EXPIRED_COMMITLOG).
/// Prints `success` or `false` as mqadmin does. Java: `CleanExpiredCQSubCommand`,
/// `CleanUnusedTopicCommand`, `DeleteExpiredCommitLogSubCommand`.
pub(crate) async fn store_maintenance(ctx: &Ctx, a: MaintenanceArgs, code: i32) -> anyhow::Result<()> {
    let targets = if a.broker_addr.is_some() || a.cluster.is_some() {
        target_brokers(ctx, a.broker_addr.as_deref(), a.cluster.as_deref()).await?
    } else {
        all_masters(ctx).await?
    };
    let mut ok = !targets.is_empty();
    for (_, addr) in &targets {
        if let Err(e) = ctx.client.store_maintenance(addr, code).await {
            eprintln!("{addr}: {e}");
            ok = false;
        }
    }
    if ctx.json {
        let addrs: Vec<&String> = targets.iter().map(|(_, addr)| addr).collect();
        return print_json(&json!({ "brokers": addrs, "success": ok }));
    }
    println!("{}", if ok { "success" } else { "false" });
    Ok(())
}
