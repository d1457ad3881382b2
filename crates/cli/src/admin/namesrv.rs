//! Name-server commands: wipeWritePerm, addWritePerm, getNamesrvConfig, updateNamesrvConfig,
//! updateKvConfig, deleteKvConfig. Each goes to every name server given with -n. Java:
//! `tools/command/broker/WipeWritePermSubCommand`, `AddWritePermSubCommand`,
//! `namesrv/GetNamesrvConfigCommand`, `UpdateNamesrvConfigCommand`, `UpdateKvConfigCommand`,
//! `DeleteKvConfigCommand`.

use std::collections::BTreeMap;

use ferromq_client::admin::json;

use crate::admin::output::{print_json, print_settings};
use crate::admin::Ctx;

#[derive(Debug, clap::Args)]
pub(crate) struct BrokerNameArgs {
    /// Broker group name.
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
}

/// `wipeWritePerm` (`add` false: a broker group stops taking messages through the name
/// servers' routes) and `addWritePerm` (`add` true: it takes them again).
pub(crate) async fn change_write_perm(ctx: &Ctx, a: BrokerNameArgs, add: bool) -> anyhow::Result<()> {
    let (verb, count_key) = if add { ("add", "addTopicCount") } else { ("wipe", "wipeTopicCount") };
    let mut counts = BTreeMap::new();
    for namesrv in ctx.client.namesrv_addrs() {
        let count = if add {
            ctx.client.add_write_perm(namesrv, &a.broker_name).await?
        } else {
            ctx.client.wipe_write_perm(namesrv, &a.broker_name).await?
        };
        if !ctx.json {
            println!("{verb} write perm of broker[{}] in name server[{namesrv}] OK, {count}", a.broker_name);
        }
        counts.insert(namesrv.clone(), count);
    }
    if ctx.json {
        return print_json(&json!({ "brokerName": a.broker_name, count_key: counts }));
    }
    Ok(())
}

/// `getNamesrvConfig`: every name server's settings.
pub(crate) async fn get_namesrv_config(ctx: &Ctx) -> anyhow::Result<()> {
    let mut all = BTreeMap::new();
    for namesrv in ctx.client.namesrv_addrs() {
        let entries = ctx.client.namesrv_config(namesrv).await?;
        if !ctx.json {
            print_settings(namesrv, &entries);
        }
        all.insert(namesrv.clone(), entries.into_iter().collect::<BTreeMap<_, _>>());
    }
    if ctx.json {
        return print_json(&json!(all));
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct KeyValueArgs {
    /// Setting name.
    #[arg(short = 'k', long = "key")]
    key: String,
    /// New value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

/// `updateNamesrvConfig`: changes one setting on every name server.
pub(crate) async fn update_namesrv_config(ctx: &Ctx, a: KeyValueArgs) -> anyhow::Result<()> {
    let entries = BTreeMap::from([(a.key.clone(), a.value.clone())]);
    for namesrv in ctx.client.namesrv_addrs() {
        ctx.client.update_namesrv_config(namesrv, &entries).await?;
    }
    if ctx.json {
        return print_json(&json!({ "namesrvAddrs": ctx.client.namesrv_addrs(), "key": a.key, "value": a.value }));
    }
    println!("update name server config success!{}", ctx.client.namesrv_addrs().join(";"));
    println!("{} : {}", a.key, a.value);
    Ok(())
}

#[derive(Debug, clap::Args)]
pub(crate) struct KvArgs {
    /// Namespace.
    #[arg(short = 's', long = "namespace")]
    namespace: String,
    /// Key.
    #[arg(short = 'k', long = "key")]
    key: String,
    /// Value (updateKvConfig only).
    #[arg(short = 'v', long = "value")]
    value: Option<String>,
}

/// `updateKvConfig`: creates or updates a KV entry on every name server.
pub(crate) async fn update_kv_config(ctx: &Ctx, a: KvArgs) -> anyhow::Result<()> {
    let Some(value) = a.value.as_deref() else { anyhow::bail!("updateKvConfig needs a value: -v <value>") };
    ctx.client.put_kv_config(&a.namespace, &a.key, value).await?;
    if ctx.json {
        return print_json(&json!({ "namespace": a.namespace, "key": a.key, "value": value }));
    }
    println!("create or update kv config to namespace success.");
    Ok(())
}

/// `deleteKvConfig`: removes a KV entry from every name server.
pub(crate) async fn delete_kv_config(ctx: &Ctx, a: KvArgs) -> anyhow::Result<()> {
    ctx.client.delete_kv_config(&a.namespace, &a.key).await?;
    if ctx.json {
        return print_json(&json!({ "namespace": a.namespace, "key": a.key, "deleted": true }));
    }
    println!("delete kv config from namespace success.");
    Ok(())
}
