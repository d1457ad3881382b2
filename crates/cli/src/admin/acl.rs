//! ACL 1.0 commands: mqadmin's `updateAclConfig`, `deleteAclConfig`, `updateGlobalWhiteAddr`,
//! `clusterAclConfigVersion` and `getAclConfig`. With `-c` they reach every broker of the
//! cluster, slaves included, as mqadmin does (each broker keeps its own ACL files).

use ferromq_client::admin::{json, json_from_str, JsonMap, JsonValue};
use ferromq_protocol::header::CreateAccessConfigRequestHeader;

use super::output::{format_ms, print_json, Table};
use super::Ctx;

/// Where an ACL command goes.
#[derive(Debug, clap::Args)]
pub(crate) struct AclTarget {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Every broker (masters and slaves) of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
}

impl AclTarget {
    async fn addrs(&self, ctx: &Ctx) -> anyhow::Result<Vec<String>> {
        if let Some(addr) = &self.broker_addr {
            return Ok(vec![addr.clone()]);
        }
        let Some(cluster) = &self.cluster else {
            anyhow::bail!("give a broker address (-b) or a cluster name (-c)");
        };
        let all = ctx.client.all_broker_addrs(cluster).await?;
        if all.is_empty() {
            anyhow::bail!("cluster {cluster} has no broker (asked {})", ctx.client.namesrv_addrs().join(";"));
        }
        Ok(all.into_iter().map(|(_, addr)| addr).collect())
    }
}

/// `updateAclConfig`.
#[derive(Debug, clap::Args)]
pub(crate) struct UpdateAclConfigArgs {
    #[command(flatten)]
    target: AclTarget,
    /// The account's access key (at least 7 characters).
    #[arg(short = 'a', long = "accessKey")]
    access_key: String,
    /// Its secret key (at least 7 characters; required for a new account).
    #[arg(short = 's', long = "secretKey")]
    secret_key: Option<String>,
    /// Addresses trusted without a signature (e.g. `192.168.1.*`).
    #[arg(short = 'w', long = "whiteRemoteAddress")]
    white_remote_address: Option<String>,
    /// Permission on topics not listed: PUB, SUB, PUB|SUB or DENY.
    #[arg(short = 'i', long = "defaultTopicPerm")]
    default_topic_perm: Option<String>,
    /// Permission on groups not listed.
    #[arg(short = 'u', long = "defaultGroupPerm")]
    default_group_perm: Option<String>,
    /// Topic permissions, comma-separated `topic=PERM`.
    #[arg(short = 't', long = "topicPerms")]
    topic_perms: Option<String>,
    /// Group permissions, comma-separated `group=PERM`.
    #[arg(short = 'g', long = "groupPerms")]
    group_perms: Option<String>,
    /// Whether the account is an admin (true|false).
    #[arg(short = 'm', long = "admin")]
    admin: Option<bool>,
}

pub(crate) async fn update_acl_config(ctx: &Ctx, a: UpdateAclConfigArgs) -> anyhow::Result<()> {
    let header = CreateAccessConfigRequestHeader {
        access_key: a.access_key.clone(),
        secret_key: a.secret_key,
        white_remote_address: a.white_remote_address,
        admin: Some(a.admin.unwrap_or(false)),
        default_topic_perm: a.default_topic_perm,
        default_group_perm: a.default_group_perm,
        topic_perms: a.topic_perms,
        group_perms: a.group_perms,
    };
    let mut done = Vec::new();
    for addr in a.target.addrs(ctx).await? {
        ctx.client.update_acl_config(&addr, &header).await?;
        if !ctx.json {
            println!("create or update plain access config to {addr} success.");
        }
        done.push(addr);
    }
    if ctx.json {
        return print_json(&json!({ "accessKey": a.access_key, "brokers": done }));
    }
    Ok(())
}

/// `deleteAclConfig`.
#[derive(Debug, clap::Args)]
pub(crate) struct DeleteAclConfigArgs {
    #[command(flatten)]
    target: AclTarget,
    /// The account to delete.
    #[arg(short = 'a', long = "accessKey")]
    access_key: String,
}

pub(crate) async fn delete_acl_config(ctx: &Ctx, a: DeleteAclConfigArgs) -> anyhow::Result<()> {
    let mut done = Vec::new();
    for addr in a.target.addrs(ctx).await? {
        ctx.client.delete_acl_config(&addr, &a.access_key).await?;
        if !ctx.json {
            println!("delete plain access config account from {addr} success.");
        }
        done.push(addr);
    }
    if ctx.json {
        return print_json(&json!({ "accessKey": a.access_key, "brokers": done }));
    }
    Ok(())
}

/// `updateGlobalWhiteAddr`.
#[derive(Debug, clap::Args)]
pub(crate) struct UpdateGlobalWhiteAddrArgs {
    #[command(flatten)]
    target: AclTarget,
    /// Global white addresses, comma-separated (they replace the file's list).
    #[arg(short = 'g', long = "globalWhiteRemoteAddresses")]
    addrs: String,
    /// The ACL file to change (default: the broker's plain_acl.yml).
    #[arg(short = 'f', long = "aclFileFullPath")]
    acl_file: Option<String>,
}

pub(crate) async fn update_global_white_addr(ctx: &Ctx, a: UpdateGlobalWhiteAddrArgs) -> anyhow::Result<()> {
    let addrs: Vec<String> = a.addrs.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
    let mut done = Vec::new();
    for addr in a.target.addrs(ctx).await? {
        ctx.client.update_global_white_addrs(&addr, &addrs, a.acl_file.as_deref()).await?;
        if !ctx.json {
            println!("update global white remote addresses to {addr} success.");
        }
        done.push(addr);
    }
    if ctx.json {
        return print_json(&json!({ "globalWhiteRemoteAddresses": addrs, "brokers": done }));
    }
    Ok(())
}

/// `clusterAclConfigVersion`: each broker's ACL files and their versions.
pub(crate) async fn cluster_acl_config_version(ctx: &Ctx, a: AclTarget) -> anyhow::Result<()> {
    let mut table = Table::new(&[
        "#Cluster Name",
        "#Broker Name",
        "#Broker Addr",
        "#AclFilePath",
        "#AclConfigVersionNum",
        "#AclLastUpdateTime",
    ]);
    let mut out = Vec::new();
    for addr in a.addrs(ctx).await? {
        let info = ctx.client.acl_versions(&addr).await?;
        let files: JsonMap<String, JsonValue> = info
            .all_acl_file_version
            .as_deref()
            .and_then(|j| json_from_str::<JsonValue>(j).ok())
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        for (file, version) in &files {
            let field = |k: &str| version.get(k).and_then(JsonValue::as_i64).unwrap_or(0);
            table.row(vec![
                info.cluster_name.clone().unwrap_or_default(),
                info.broker_name.clone().unwrap_or_default(),
                addr.clone(),
                file.clone(),
                field("counter").to_string(),
                format_ms(field("timestamp")),
            ]);
        }
        out.push(json!({
            "clusterName": info.cluster_name, "brokerName": info.broker_name, "brokerAddr": addr,
            "allAclFileVersion": files,
        }));
    }
    if ctx.json {
        return print_json(&json!(out));
    }
    table.print();
    Ok(())
}

/// `getAclConfig`: every account of a broker (admin accounts only).
pub(crate) async fn get_acl_config(ctx: &Ctx, a: AclTarget) -> anyhow::Result<()> {
    let mut out = Vec::new();
    for addr in a.addrs(ctx).await? {
        let config = ctx.client.acl_config(&addr).await?;
        if !ctx.json {
            println!("broker {addr}:");
            println!("  globalWhiteRemoteAddresses: {}", config.global_white_addrs.join(","));
            for p in &config.plain_access_configs {
                println!(
                    "  accessKey={} admin={} whiteRemoteAddress={} defaultTopicPerm={} defaultGroupPerm={} topicPerms={} groupPerms={}",
                    p.access_key,
                    p.admin,
                    p.white_remote_address.as_deref().unwrap_or(""),
                    p.default_topic_perm.as_deref().unwrap_or(""),
                    p.default_group_perm.as_deref().unwrap_or(""),
                    p.topic_perms.join(","),
                    p.group_perms.join(","),
                );
            }
        }
        out.push(json!({
            "brokerAddr": addr,
            "globalWhiteAddrs": config.global_white_addrs,
            "accounts": config.plain_access_configs.iter().map(|p| json!({
                "accessKey": p.access_key, "admin": p.admin, "whiteRemoteAddress": p.white_remote_address,
                "defaultTopicPerm": p.default_topic_perm, "defaultGroupPerm": p.default_group_perm,
                "topicPerms": p.topic_perms, "groupPerms": p.group_perms,
            })).collect::<Vec<_>>(),
        }));
    }
    if ctx.json {
        return print_json(&json!(out));
    }
    Ok(())
}
