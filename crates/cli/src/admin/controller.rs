//! The controller commands of mqadmin (controller-mode.md §8): getControllerMetaData,
//! getSyncStateSet, electMaster, cleanBrokerMetadata, getControllerConfig. `-a` names any node
//! of the group; what needs the leader goes to the leader. Java: `tools/command/controller/*`.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context;
use ferromq_client::admin::{json, json_from_str, JsonValue};

use crate::admin::output::{print_json, print_settings};
use crate::admin::Ctx;

#[derive(Debug, clap::Args)]
pub(crate) struct ControllerAddrArgs {
    /// A controller node's address (`;`-separated list for getControllerConfig).
    #[arg(short = 'a', long = "controllerAddress")]
    controller: String,
}

#[derive(Debug, clap::Args)]
pub(crate) struct SyncStateSetArgs {
    /// A controller node's address.
    #[arg(short = 'a', long = "controllerAddress")]
    controller: String,
    /// Broker sets to show (repeatable, or `,`-separated).
    #[arg(short = 'b', long = "brokerName", value_delimiter = ',')]
    broker_names: Vec<String>,
    /// Every broker set of this cluster (asks the name server, -n).
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Print again every this many seconds, until interrupted.
    #[arg(short = 'i', long = "interval")]
    interval: Option<u64>,
}

impl SyncStateSetArgs {
    pub(crate) fn needs_namesrv(&self) -> bool {
        self.cluster.is_some()
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct BrokerEpochArgs {
    /// Every replica of this broker set.
    #[arg(short = 'b', long = "brokerName")]
    broker_name: Option<String>,
    /// Every broker set of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Print again every this many seconds, until interrupted.
    #[arg(short = 'i', long = "interval")]
    interval: Option<u64>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ElectMasterArgs {
    /// A controller node's address.
    #[arg(short = 'a', long = "controllerAddress")]
    controller: String,
    /// The cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: String,
    /// The broker set (mqadmin's `-bn`).
    #[arg(long = "brokerName")]
    broker_name: String,
    /// The replica to make master.
    #[arg(short = 'b', long = "brokerId")]
    broker_id: i64,
}

#[derive(Debug, clap::Args)]
pub(crate) struct CleanBrokerMetadataArgs {
    /// A controller node's address.
    #[arg(short = 'a', long = "controllerAddress")]
    controller: String,
    /// The broker set (mqadmin's `-bn`).
    #[arg(long = "brokerName")]
    broker_name: String,
    /// The cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Replica ids to forget, `;`-separated (default: the whole broker set).
    #[arg(short = 'b', long = "brokerControllerIdsToClean")]
    ids: Option<String>,
    /// Also forget replicas that are alive (and a set that has a master).
    #[arg(short = 'l', long = "cleanLivingBroker")]
    clean_living: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct UpdateControllerConfigArgs {
    /// Controller nodes, `;`-separated (each is updated).
    #[arg(short = 'a', long = "controllerAddress")]
    controller: String,
    /// The key.
    #[arg(short = 'k', long = "key")]
    key: String,
    /// The value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

pub(crate) async fn update_controller_config(ctx: &Ctx, a: UpdateControllerConfigArgs) -> anyhow::Result<()> {
    for addr in a.controller.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        ctx.client.update_controller_config(addr, &a.key, &a.value).await?;
    }
    println!("update controller config success!{} : {}={}", a.controller, a.key, a.value);
    Ok(())
}

pub(crate) async fn get_controller_metadata(ctx: &Ctx, a: ControllerAddrArgs) -> anyhow::Result<()> {
    let m = ctx.client.controller_metadata(&a.controller).await?;
    if ctx.json {
        return print_json(&json!({
            "group": m.group,
            "controllerLeaderId": m.controller_leader_id,
            "controllerLeaderAddress": m.controller_leader_address,
            "isLeader": m.is_leader,
            "peers": m.peers,
        }));
    }
    let mut out = String::new();
    let _ = write!(out, "\n#ControllerGroup\t{}", m.group.unwrap_or_default());
    let _ = write!(out, "\n#ControllerLeaderId\t{}", m.controller_leader_id.unwrap_or_default());
    let _ = write!(out, "\n#ControllerLeaderAddress\t{}", m.controller_leader_address.unwrap_or_default());
    for peer in m.peers.unwrap_or_default().split(';').filter(|p| !p.is_empty()) {
        let _ = write!(out, "\n#Peer:\t{peer}");
    }
    println!("{out}");
    Ok(())
}

/// The broker sets of `cluster` in the name server's cluster info.
fn sets_of<'a>(
    info: &'a ferromq_protocol::body::ClusterInfo,
    cluster: &str,
) -> anyhow::Result<&'a std::collections::BTreeSet<String>> {
    info.cluster_addr_table.get(cluster).with_context(|| format!("no cluster {cluster} in the name server"))
}

/// `getBrokerEpoch`: each replica's epoch file (GET_BROKER_EPOCH_CACHE), the replicas found in
/// the name server's cluster info. Java: `GetBrokerEpochSubCommand` (the last epoch is printed
/// as ending at the broker's max offset).
pub(crate) async fn get_broker_epoch(ctx: &Ctx, a: BrokerEpochArgs) -> anyhow::Result<()> {
    loop {
        let info = ctx.client.cluster_info().await?;
        let names: Vec<String> = match (&a.broker_name, &a.cluster) {
            (Some(name), _) => vec![name.clone()],
            (None, Some(cluster)) => sets_of(&info, cluster)?.iter().cloned().collect(),
            (None, None) => anyhow::bail!("give a broker name (-b) or a cluster name (-c)"),
        };
        let mut all = Vec::new();
        let mut out = String::new();
        for name in &names {
            let data =
                info.broker_addr_table.get(name).with_context(|| format!("no broker set {name} in the name server"))?;
            for addr in data.broker_addrs.values() {
                let cache = ctx.client.broker_epoch_cache(addr).await?;
                let _ = write!(
                    out,
                    "\n#clusterName\t{}\n#brokerName\t{}\n#brokerAddr\t{addr}\n#brokerId\t{}",
                    cache.cluster_name, cache.broker_name, cache.broker_id
                );
                for (i, e) in cache.epoch_list.iter().enumerate() {
                    let end = if i + 1 == cache.epoch_list.len() { cache.max_offset } else { e.end_offset };
                    let _ = write!(
                        out,
                        "\n#Epoch: EpochEntry{{epoch={}, startOffset={}, endOffset={end}}}",
                        e.epoch, e.start_offset
                    );
                }
                all.push(json_from_str(&String::from_utf8_lossy(&ferromq_protocol::body::JsonBody::encode(&cache)))?);
            }
        }
        if ctx.json {
            print_json(&JsonValue::Array(all))?;
        } else {
            println!("{out}");
        }
        let Some(every) = a.interval else { return Ok(()) };
        tokio::time::sleep(Duration::from_secs(every)).await;
    }
}

pub(crate) async fn get_sync_state_set(ctx: &Ctx, a: SyncStateSetArgs) -> anyhow::Result<()> {
    loop {
        let mut names = a.broker_names.clone();
        if let Some(cluster) = &a.cluster {
            let info = ctx.client.cluster_info().await?;
            names.extend(sets_of(&info, cluster)?.iter().cloned());
        }
        anyhow::ensure!(!names.is_empty(), "name the broker sets with -b, or a cluster with -c");
        let data = ctx.client.sync_state_data(&a.controller, &names).await?;
        if ctx.json {
            print_json(&data)?;
        } else {
            print!("{}", sync_state_text(&data));
        }
        let Some(every) = a.interval else { return Ok(()) };
        tokio::time::sleep(Duration::from_secs(every)).await;
    }
}

/// mqadmin's lines for each broker set of a BrokerReplicasInfo body.
fn sync_state_text(data: &JsonValue) -> String {
    let mut out = String::new();
    let Some(table) = data.get("replicasInfoTable").and_then(JsonValue::as_object) else { return out };
    let text = |v: Option<&JsonValue>| match v {
        Some(JsonValue::String(s)) => s.clone(),
        Some(JsonValue::Null) | None => "null".to_owned(),
        Some(other) => other.to_string(),
    };
    for (name, set) in table {
        let in_sync = set.get("inSyncReplicas").and_then(JsonValue::as_array).cloned().unwrap_or_default();
        let not_in_sync = set.get("notInSyncReplicas").and_then(JsonValue::as_array).cloned().unwrap_or_default();
        let _ = write!(
            out,
            "\n#brokerName\t{name}\n#MasterBrokerId\t{}\n#MasterAddr\t{}\n#MasterEpoch\t{}\n#SyncStateSetEpoch\t{}\n#SyncStateSetNums\t{}\n",
            text(set.get("masterBrokerId")),
            text(set.get("masterAddress")),
            text(set.get("masterEpoch")),
            text(set.get("syncStateSetEpoch")),
            in_sync.len()
        );
        for (label, list) in [("InSyncReplica", &in_sync), ("NotInSyncReplica", &not_in_sync)] {
            for r in list {
                let _ = write!(
                    out,
                    "\n{label}:\tReplicaIdentity{{brokerName='{}', brokerId={}, brokerAddress='{}', alive={}}}\n",
                    text(r.get("brokerName")),
                    text(r.get("brokerId")),
                    text(r.get("brokerAddress")),
                    text(r.get("alive"))
                );
            }
        }
    }
    out
}

pub(crate) async fn elect_master(ctx: &Ctx, a: ElectMasterArgs) -> anyhow::Result<()> {
    let e = ctx.client.elect_master(&a.controller, &a.cluster, &a.broker_name, a.broker_id).await?;
    let h = &e.header;
    if ctx.json {
        return print_json(&json!({
            "clusterName": a.cluster,
            "brokerName": a.broker_name,
            "masterBrokerId": h.master_broker_id,
            "masterAddress": h.master_address,
            "masterEpoch": h.master_epoch,
            "syncStateSetEpoch": h.sync_state_set_epoch,
            "unchanged": e.unchanged,
            "body": e.body,
        }));
    }
    if e.unchanged {
        println!("broker {} is the master of {} already", a.broker_id, a.broker_name);
    }
    println!(
        "\n#clusterName\t{}\n#brokerName\t{}\n#brokerMasterAddr\t{}\n#brokerMasterId\t{}\n#masterEpoch\t{}\n#syncStateSetEpoch\t{}",
        a.cluster,
        a.broker_name,
        h.master_address.clone().unwrap_or_default(),
        h.master_broker_id.map(|i| i.to_string()).unwrap_or_default(),
        h.master_epoch.unwrap_or_default(),
        h.sync_state_set_epoch.unwrap_or_default()
    );
    Ok(())
}

pub(crate) async fn clean_broker_metadata(ctx: &Ctx, a: CleanBrokerMetadataArgs) -> anyhow::Result<()> {
    ctx.client
        .clean_broker_metadata(&a.controller, a.cluster.as_deref(), &a.broker_name, a.ids.as_deref(), a.clean_living)
        .await?;
    println!("clear broker {} metadata from controller success! ", a.broker_name);
    Ok(())
}

pub(crate) async fn get_controller_config(ctx: &Ctx, a: ControllerAddrArgs) -> anyhow::Result<()> {
    for addr in a.controller.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let pairs = ctx.client.controller_config(addr).await?;
        print_settings(addr, &pairs);
    }
    Ok(())
}
