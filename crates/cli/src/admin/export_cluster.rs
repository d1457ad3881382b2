//! Cluster reports written as JSON files: exportConfigs (`configs.json`: the brokers' main
//! settings, the name servers' settings and the cluster's size) and exportMetrics
//! (`metrics.json`: per broker TPS, day counts, disk ratios, topic and group counts, client
//! versions, and cluster totals). Java: `tools/command/export/ExportConfigsCommand`,
//! `ExportMetricsCommand`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::Context;
use ferromq_client::admin::{json, json_to_string_pretty, JsonValue};
use ferromq_protocol::body::{BrokerData, ClusterInfo};
use ferromq_protocol::topic_validator::{RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC};

use crate::admin::export::{is_user_group, is_user_topic, write_file};
use crate::admin::output::print_json;
use crate::admin::stats::day_sum;
use crate::admin::Ctx;

/// Where the files go unless -f says otherwise (mqadmin's default).
const DEFAULT_EXPORT_DIR: &str = "/tmp/rocketmq/export";

/// The broker settings exportConfigs keeps (Java's `needBrokerProprties`, in its order).
const EXPORTED_BROKER_KEYS: [&str; 16] = [
    "brokerClusterName",
    "brokerId",
    "brokerName",
    "brokerRole",
    "fileReservedTime",
    "filterServerNums",
    "flushDiskType",
    "maxMessageSize",
    "messageDelayLevel",
    "msgTraceTopicName",
    "slaveReadEnable",
    "traceOn",
    "traceTopicEnable",
    "useTLS",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
];

#[derive(Debug, clap::Args)]
pub(crate) struct ExportClusterArgs {
    /// The cluster to export.
    #[arg(short = 'c', long = "clusterName")]
    cluster: String,
    /// Directory the file goes to.
    #[arg(short = 'f', long = "filePath", default_value = DEFAULT_EXPORT_DIR)]
    file_path: PathBuf,
}

/// The broker groups of `cluster`, in name order.
fn cluster_brokers<'a>(info: &'a ClusterInfo, cluster: &str) -> anyhow::Result<Vec<(&'a str, Option<&'a BrokerData>)>> {
    let names = info.cluster_addr_table.get(cluster).with_context(|| {
        let known: Vec<&str> = info.cluster_addr_table.keys().map(String::as_str).collect();
        format!("cluster {cluster} does not exist (known: {})", known.join(", "))
    })?;
    Ok(names.iter().map(|name| (name.as_str(), info.broker_addr_table.get(name))).collect())
}

pub(crate) async fn export_configs(ctx: &Ctx, a: ExportClusterArgs) -> anyhow::Result<()> {
    let info = ctx.client.cluster_info().await?;
    let brokers = cluster_brokers(&info, &a.cluster)?;
    let (mut masters, mut slaves) = (0usize, 0usize);
    let mut broker_configs = BTreeMap::new();
    for (i, (name, data)) in brokers.iter().enumerate() {
        eprintln!("exportConfigs: broker {}/{} {name}", i + 1, brokers.len());
        let Some(data) = data else { continue };
        slaves += data.broker_addrs.keys().filter(|id| **id != 0).count();
        let Some(master) = data.master_addr() else {
            eprintln!("exportConfigs: broker {name} has no master; its settings are left out");
            continue;
        };
        masters += 1;
        let settings = ctx.client.broker_config(master).await?;
        let kept: BTreeMap<&str, &str> = EXPORTED_BROKER_KEYS
            .iter()
            .filter_map(|key| settings.iter().find(|(k, _)| k == key).map(|(_, v)| (*key, v.as_str())))
            .collect();
        let key = kept.get("brokerName").map_or_else(|| (*name).to_owned(), |n| (*n).to_owned());
        broker_configs.insert(key, json!(kept));
    }
    let mut namesrv_configs = BTreeMap::new();
    for (i, addr) in ctx.client.namesrv_addrs().iter().enumerate() {
        eprintln!("exportConfigs: name server {}/{} {addr}", i + 1, ctx.client.namesrv_addrs().len());
        let settings: BTreeMap<String, String> = ctx.client.namesrv_config(addr).await?.into_iter().collect();
        namesrv_configs.insert(addr.clone(), settings);
    }
    let result = json!({
        "brokerConfigs": broker_configs,
        "namesrvConfigs": namesrv_configs,
        "clusterScale": {
            "namesrvSize": ctx.client.namesrv_addrs().len(),
            "masterBrokerSize": masters,
            "slaveBrokerSize": slaves,
        },
    });
    write_report(ctx, &a, "configs.json", &result)
}

/// Cluster totals of exportMetrics.
#[derive(Default)]
struct Totals {
    normal_in_tps: f64,
    normal_out_tps: f64,
    trans_in_tps: f64,
    schedule_in_tps: f64,
    normal_day_in: i64,
    normal_day_out: i64,
    trans_day_in: i64,
    schedule_day_in: i64,
}

pub(crate) async fn export_metrics(ctx: &Ctx, a: ExportClusterArgs) -> anyhow::Result<()> {
    let info = ctx.client.cluster_info().await?;
    let brokers = cluster_brokers(&info, &a.cluster)?;
    let mut totals = Totals::default();
    let mut report = BTreeMap::new();
    for (i, (name, data)) in brokers.iter().enumerate() {
        eprintln!("exportMetrics: broker {}/{} {name}", i + 1, brokers.len());
        let Some(master) = data.and_then(BrokerData::master_addr) else {
            eprintln!("exportMetrics: broker {name} has no master; it is left out");
            continue;
        };
        let metrics = broker_metrics(ctx, master, &mut totals).await.with_context(|| format!("broker {name}"))?;
        report.insert((*name).to_owned(), metrics);
    }
    let result = json!({
        "evaluateReport": report,
        "totalData": {
            "totalTps": {
                "totalNormalInTps": totals.normal_in_tps,
                "totalNormalOutTps": totals.normal_out_tps,
                "totalTransInTps": totals.trans_in_tps,
                "totalScheduleInTps": totals.schedule_in_tps,
            },
            "totalOneDayNum": {
                "normalOneDayInNum": totals.normal_day_in,
                "normalOneDayOutNum": totals.normal_day_out,
                "transOneDayInNum": totals.trans_day_in,
                "scheduleOneDayInNum": totals.schedule_day_in,
            },
        },
    });
    write_report(ctx, &a, "metrics.json", &result)
}

/// One broker's `runtimeEnv`, `runtimeQuota` and `runtimeVersion`; adds its figures to `totals`.
async fn broker_metrics(ctx: &Ctx, addr: &str, totals: &mut Totals) -> anyhow::Result<JsonValue> {
    let runtime = ctx.client.broker_runtime_info(addr).await?;
    let settings = ctx.client.broker_config(addr).await?;
    let system_topics = ctx.client.broker_system_topics(addr).await?.topic_list;
    let topic_count = ctx
        .client
        .all_topic_config(addr)
        .await?
        .topic_config_table
        .iter()
        .filter(|(name, config)| !system_topics.contains(*name) && is_user_topic(config, false))
        .count();
    let groups: Vec<String> = ctx
        .client
        .all_subscription_groups(addr)
        .await?
        .subscription_group_table
        .into_keys()
        .filter(|name| is_user_group(name))
        .collect();

    let counter = |key: &str| -> anyhow::Result<i64> {
        let text = runtime.get(key).with_context(|| format!("the broker's runtime info has no {key}"))?;
        text.trim().parse().with_context(|| format!("runtime info {key} is not a number: {text:?}"))
    };
    // The TPS keys hold the rates over several windows ("10.00 9.50 9.80"); the first counts.
    let first_rate = |key: &str| -> f64 {
        runtime.get(key).and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse().ok()).unwrap_or(0.0)
    };
    let normal_in_tps = first_rate("putTps");
    let normal_out_tps = first_rate("getTransferredTps");
    let normal_day_in = counter("msgPutTotalTodayMorning")? - counter("msgPutTotalYesterdayMorning")?;
    let normal_day_out = counter("msgGetTotalTodayMorning")? - counter("msgGetTotalYesterdayMorning")?;
    // A topic nothing was put to has no statistics: zeros, as Java.
    let put_stats =
        |topic: &'static str| async move { ctx.client.broker_stats_data(addr, "TOPIC_PUT_NUMS", topic).await.ok() };
    let trans = put_stats(RMQ_SYS_TRANS_HALF_TOPIC).await;
    let schedule = put_stats(RMQ_SYS_SCHEDULE_TOPIC).await;
    let trans_in_tps = trans.as_ref().map_or(0.0, |d| d.stats_minute.tps);
    let schedule_in_tps = schedule.as_ref().map_or(0.0, |d| d.stats_minute.tps);
    let trans_day_in = trans.as_ref().map_or(0, day_sum);
    let schedule_day_in = schedule.as_ref().map_or(0, day_sum);

    totals.normal_in_tps += normal_in_tps;
    totals.normal_out_tps += normal_out_tps;
    totals.trans_in_tps += trans_in_tps;
    totals.schedule_in_tps += schedule_in_tps;
    totals.normal_day_in += normal_day_in;
    totals.normal_day_out += normal_day_out;
    totals.trans_day_in += trans_day_in;
    totals.schedule_day_in += schedule_day_in;

    let mut client_info = BTreeSet::new();
    for group in &groups {
        // As Java, a group whose connections cannot be read is skipped.
        if let Ok(connections) = ctx.client.consumer_connection(addr, group).await {
            for c in connections.connection_set {
                client_info.insert(format!("{}%{}", c.language.name(), ferromq_protocol::version::name(c.version)));
            }
        }
    }
    let setting = |key: &str| settings.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    Ok(json!({
        "runtimeEnv": {
            "cpuNum": setting("clientCallbackExecutorThreads"),
            "totalMemKBytes": runtime.get("totalMemKBytes"),
        },
        "runtimeQuota": {
            "diskRatio": {
                "commitLogDiskRatio": runtime.get("commitLogDiskRatio"),
                "consumeQueueDiskRatio": runtime.get("consumeQueueDiskRatio"),
            },
            "tps": {
                "normalInTps": normal_in_tps,
                "normalOutTps": normal_out_tps,
                "transInTps": trans_in_tps,
                "scheduleInTps": schedule_in_tps,
            },
            "oneDayNum": {
                "normalOneDayInNum": normal_day_in,
                "normalOneDayOutNum": normal_day_out,
                "transOneDayInNum": trans_day_in,
                "scheduleOneDayInNum": schedule_day_in,
            },
            "messageAverageSize": runtime.get("putMessageAverageSize"),
            "topicSize": topic_count,
            "groupSize": groups.len(),
        },
        "runtimeVersion": {
            "rocketmqVersion": ferromq_protocol::version::name(ferromq_protocol::version::CURRENT),
            "clientInfo": client_info,
        },
    }))
}

fn write_report(ctx: &Ctx, a: &ExportClusterArgs, file_name: &str, content: &JsonValue) -> anyhow::Result<()> {
    let path = a.file_path.join(file_name);
    write_file(&path, &json_to_string_pretty(content)?)?;
    if ctx.json {
        return print_json(&json!({ "file": path.display().to_string() }));
    }
    println!("export {} success", path.display());
    Ok(())
}
