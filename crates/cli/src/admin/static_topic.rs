//! Static topic commands: updateStaticTopic and remappingStaticTopic, and the look-up of a
//! static topic's mappings that topicStatus and consumerProgress use. Java:
//! `UpdateStaticTopicSubCommand`, `RemappingStaticTopicSubCommand`.
//!
//! Each writes the mapping before and after to `<tmp>/<topic>-<epoch>.before|.after`, as Java
//! does; `-mf` applies such an `.after` file as it is. Java declares `-mf` but reads `-f`
//! (which it never declares), so its file mode cannot run, and it ignores `-fr` outside it;
//! here both work.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context;
use ferromq_client::admin::static_topic::{self, BrokerConfigMap};
use ferromq_protocol::body::static_topic::{TYPE_CREATE_OR_UPDATE, TYPE_REMAPPING};
use ferromq_protocol::body::{JsonBody, TopicRemappingDetailWrapper, TopicRouteData};

use crate::admin::Ctx;

/// What both commands take: the topic, where its queues go, and a plan file.
#[derive(Debug, clap::Args)]
pub(crate) struct StaticTopicTarget {
    /// Topic name.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Place the logic queues on the brokers of these clusters (comma-separated).
    #[arg(short = 'c', long = "clusters", conflicts_with = "brokers")]
    clusters: Option<String>,
    /// Place the logic queues on these brokers (names, comma-separated).
    #[arg(short = 'b', long = "brokers")]
    brokers: Option<String>,
    /// Apply this plan file (an `.after` file of an earlier run) as it is (`-mf`).
    #[arg(long = "mapFile")]
    map_file: Option<PathBuf>,
    /// Replace the brokers' mappings without their epoch and item checks (`-fr true`).
    #[arg(long = "forceReplace")]
    force_replace: Option<bool>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct UpdateStaticTopicArgs {
    #[command(flatten)]
    target: StaticTopicTarget,
    /// Total number of logic queues (`-qn`); it can only grow.
    #[arg(long = "totalQueueNum")]
    total_queue_num: Option<i32>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RemappingStaticTopicArgs {
    #[command(flatten)]
    target: StaticTopicTarget,
}

/// The brokers `-b` names, or those of the clusters `-c` names.
async fn target_brokers(ctx: &Ctx, brokers: Option<&str>, clusters: Option<&str>) -> anyhow::Result<BTreeSet<String>> {
    let split = |s: &str| s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect::<Vec<_>>();
    let info = ctx.client.cluster_info().await?;
    let targets: BTreeSet<String> = match (brokers, clusters) {
        (Some(b), _) => split(b).into_iter().collect(),
        (None, Some(c)) => split(c).iter().filter_map(|c| info.cluster_addr_table.get(c)).flatten().cloned().collect(),
        (None, None) => anyhow::bail!("give the target brokers (-b) or clusters (-c)"),
    };
    if targets.is_empty() {
        anyhow::bail!("Find none brokers, do nothing");
    }
    if let Some(missing) =
        targets.iter().find(|b| info.broker_addr_table.get(*b).and_then(|d| d.master_addr()).is_none())
    {
        anyhow::bail!("Can't find addr for broker {missing}");
    }
    Ok(targets)
}

/// Java's `TopicQueueMappingUtils#writeToTemp`.
fn write_plan(plan: &TopicRemappingDetailWrapper, after: bool) -> anyhow::Result<PathBuf> {
    let suffix = if after { ".after" } else { ".before" };
    let path = std::env::temp_dir().join(format!("{}-{}{suffix}", plan.topic, plan.epoch));
    std::fs::write(&path, plan.encode()).with_context(|| format!("write file failed {}", path.display()))?;
    Ok(path)
}

fn read_plan(path: &Path, topic: &str, kind: &str) -> anyhow::Result<TopicRemappingDetailWrapper> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read mapping file {}", path.display()))?;
    let plan = TopicRemappingDetailWrapper::decode(&bytes)
        .with_context(|| format!("mapping file {} is not a TopicRemappingDetailWrapper", path.display()))?;
    if plan.topic != topic {
        anyhow::bail!("mapping file {} is of topic {}, not {topic}", path.display(), plan.topic);
    }
    if kind == TYPE_REMAPPING && plan.kind != TYPE_REMAPPING {
        anyhow::bail!("mapping file {} is a {} plan, not a remapping", path.display(), plan.kind);
    }
    static_topic::check_name_epoch_num(topic, &plan.broker_config_map)?;
    static_topic::logic_queue_owners(&plan.broker_config_map, false, true)?;
    Ok(plan)
}

fn old_plan(topic: &str, map: &BrokerConfigMap, epoch: i64) -> TopicRemappingDetailWrapper {
    TopicRemappingDetailWrapper {
        broker_config_map: map.clone(),
        epoch,
        topic: topic.to_owned(),
        kind: TYPE_CREATE_OR_UPDATE.to_owned(),
        ..TopicRemappingDetailWrapper::default()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn report(ctx: &Ctx, plan: &TopicRemappingDetailWrapper) -> anyhow::Result<()> {
    if ctx.json {
        return crate::admin::output::print_json(&serde_json::to_value(plan)?);
    }
    for (broker, config) in &plan.broker_config_map {
        let led = config.mapping_detail.as_ref().map(|d| d.leader_id_map()).unwrap_or_default();
        let led: Vec<String> = led.iter().map(|(logic, physical)| format!("{logic}->{physical}")).collect();
        println!(
            "{broker}: writeQueueNums={} readQueueNums={} logic->physical [{}]",
            config.config.write_queue_nums,
            config.config.read_queue_nums,
            led.join(", ")
        );
    }
    println!("static topic {} updated, epoch {}", plan.topic, plan.epoch);
    Ok(())
}

pub(crate) async fn update_static_topic(ctx: &Ctx, args: UpdateStaticTopicArgs) -> anyhow::Result<()> {
    let a = &args.target;
    let force = a.force_replace.unwrap_or(false);
    let mut plan = if let Some(file) = &a.map_file {
        read_plan(file, &a.topic, TYPE_CREATE_OR_UPDATE)?
    } else {
        let Some(queue_num) = args.total_queue_num else { anyhow::bail!("give the total queue number (-qn)") };
        let mut targets = target_brokers(ctx, a.brokers.as_deref(), a.clusters.as_deref()).await?;
        let map = ctx.client.static_topic_configs(&a.topic).await?;
        let epoch = if map.is_empty() { now_ms() } else { static_topic::check_name_epoch_num(&a.topic, &map)?.0 };
        let before = write_plan(&old_plan(&a.topic, &map, epoch), false)?;
        if !ctx.json {
            println!("The old mapping data is written to file {}", before.display());
        }
        targets.extend(map.keys().cloned());
        let plan = static_topic::plan_create(&a.topic, queue_num, &targets, map, now_ms())?;
        let after = write_plan(&plan, true)?;
        if !ctx.json {
            println!("The new mapping data is written to file {}", after.display());
        }
        plan
    };
    ctx.client.complete_non_target_brokers(&mut plan).await?;
    ctx.client.apply_static_topic(&plan, force).await?;
    report(ctx, &plan)
}

pub(crate) async fn remapping_static_topic(ctx: &Ctx, args: RemappingStaticTopicArgs) -> anyhow::Result<()> {
    let a = &args.target;
    let force = a.force_replace.unwrap_or(false);
    let mut plan = if let Some(file) = &a.map_file {
        read_plan(file, &a.topic, TYPE_REMAPPING)?
    } else {
        let targets = target_brokers(ctx, a.brokers.as_deref(), a.clusters.as_deref()).await?;
        let map = ctx.client.static_topic_configs(&a.topic).await?;
        if map.is_empty() {
            anyhow::bail!("No topic route to do the remapping");
        }
        let (epoch, _) = static_topic::check_name_epoch_num(&a.topic, &map)?;
        let before = write_plan(&old_plan(&a.topic, &map, epoch), false)?;
        if !ctx.json {
            println!("The old mapping data is written to file {}", before.display());
        }
        let plan = static_topic::plan_remap(&a.topic, map, &targets, now_ms())?;
        let after = write_plan(&plan, true)?;
        if !ctx.json {
            println!("The new mapping data is written to file {}", after.display());
        }
        plan
    };
    ctx.client.complete_non_target_brokers(&mut plan).await?;
    ctx.client.apply_remapping(&mut plan, force).await?;
    report(ctx, &plan)
}

/// A static topic's config and mapping on each broker of its route, and the broker name its
/// logic queues are shown under (`__syslo__<scope>__`); `None` for a topic without mappings.
/// Java: `MQAdminUtils#examineTopicConfigFromRoute`.
pub(crate) async fn static_configs_of(
    ctx: &Ctx,
    topic: &str,
    route: &TopicRouteData,
) -> anyhow::Result<Option<(BrokerConfigMap, String)>> {
    if route.topic_queue_mapping_by_broker.as_ref().is_none_or(|m| m.is_empty()) {
        return Ok(None);
    }
    let mut configs = BrokerConfigMap::new();
    for broker in &route.broker_datas {
        let Some(addr) = broker.select_broker_addr() else { continue };
        if let Some(config) = ctx.client.topic_config_and_mapping(addr, topic).await? {
            configs.insert(broker.broker_name.clone(), config);
        }
    }
    let scope = configs.values().find_map(|c| c.mapping_detail.as_ref()).map(|d| d.scope.clone());
    let mock = ferromq_protocol::body::static_topic::mock_broker_name(
        scope.as_deref().unwrap_or(ferromq_protocol::body::static_topic::METADATA_SCOPE_GLOBAL),
    );
    Ok(Some((configs, mock)))
}
