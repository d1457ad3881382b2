//! ACL 2.0 commands: mqadmin's `createUser`, `updateUser`, `deleteUser`, `getUser`,
//! `listUser`, `createAcl`, `updateAcl`, `deleteAcl`, `getAcl`, `listAcl`, `copyUser` and
//! `copyAcl`, with mqadmin's flags and tables. Changes with `-c` reach every broker of the
//! cluster (slaves included, as mqadmin); reads with `-c` ask its masters.

use ferromq_client::admin::json;
use ferromq_protocol::body::{AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo};

use super::output::{print_json, Table};
use super::Ctx;

/// `-b brokerAddr` or `-c clusterName`.
#[derive(Debug, clap::Args)]
pub(crate) struct Target {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    broker_addr: Option<String>,
    /// Every broker of this cluster (changes) or its masters (reads).
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
}

impl Target {
    async fn addrs(&self, ctx: &Ctx, write: bool) -> anyhow::Result<Vec<String>> {
        if let Some(addr) = &self.broker_addr {
            return Ok(vec![addr.clone()]);
        }
        let Some(cluster) = &self.cluster else {
            anyhow::bail!("give a broker address (-b) or a cluster name (-c)");
        };
        let found =
            if write { ctx.client.all_broker_addrs(cluster).await? } else { ctx.client.master_addrs(cluster).await? };
        if found.is_empty() {
            anyhow::bail!("cluster {cluster} has no broker (asked {})", ctx.client.namesrv_addrs().join(";"));
        }
        Ok(found.into_iter().map(|(_, a)| a).collect())
    }
}

fn list(text: Option<&str>) -> Vec<String> {
    text.map(|t| t.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()).unwrap_or_default()
}

/// `createUser` / `updateUser`.
#[derive(Debug, clap::Args)]
pub(crate) struct UserArgs {
    #[command(flatten)]
    target: Target,
    /// The user name (also the access key clients sign with).
    #[arg(short = 'u', long = "username")]
    username: String,
    /// The password (the secret key).
    #[arg(short = 'p', long = "password")]
    password: Option<String>,
    /// Super or Normal.
    #[arg(short = 't', long = "userType")]
    user_type: Option<String>,
    /// enable or disable (updateUser).
    #[arg(short = 's', long = "userStatus")]
    user_status: Option<String>,
}

pub(crate) async fn put_user(ctx: &Ctx, a: UserArgs, update: bool) -> anyhow::Result<()> {
    let user = UserInfo {
        username: Some(a.username.clone()),
        password: a.password,
        user_type: a.user_type,
        user_status: a.user_status,
    };
    let verb = if update { "update" } else { "create" };
    let mut done = Vec::new();
    for addr in a.target.addrs(ctx, true).await? {
        if update {
            ctx.client.update_user(&addr, &user).await?;
        } else {
            ctx.client.create_user(&addr, &user).await?;
        }
        if !ctx.json {
            println!("{verb} user to {addr} success.");
        }
        done.push(addr);
    }
    if ctx.json {
        return print_json(&json!({ "username": a.username, "brokers": done }));
    }
    Ok(())
}

/// `deleteUser` / `getUser`.
#[derive(Debug, clap::Args)]
pub(crate) struct UsernameArgs {
    #[command(flatten)]
    target: Target,
    /// The user name.
    #[arg(short = 'u', long = "username")]
    username: String,
}

pub(crate) async fn delete_user(ctx: &Ctx, a: UsernameArgs) -> anyhow::Result<()> {
    let mut done = Vec::new();
    for addr in a.target.addrs(ctx, true).await? {
        ctx.client.delete_user(&addr, &a.username).await?;
        if !ctx.json {
            println!("delete user to {addr} success.");
        }
        done.push(addr);
    }
    if ctx.json {
        return print_json(&json!({ "username": a.username, "brokers": done }));
    }
    Ok(())
}

fn user_table(users: &[UserInfo]) -> Table {
    let mut t = Table::new(&["#UserName", "#Password", "#UserType", "#UserStatus"]);
    for u in users {
        let s = |v: &Option<String>| v.clone().unwrap_or_default();
        t.row(vec![s(&u.username), s(&u.password), s(&u.user_type), s(&u.user_status)]);
    }
    t
}

fn user_json(u: &UserInfo) -> ferromq_client::admin::JsonValue {
    json!({ "username": u.username, "password": u.password, "userType": u.user_type, "userStatus": u.user_status })
}

pub(crate) async fn get_user(ctx: &Ctx, a: UsernameArgs) -> anyhow::Result<()> {
    let mut out = Vec::new();
    for addr in a.target.addrs(ctx, false).await? {
        let user = ctx.client.get_user(&addr, &a.username).await?;
        if !ctx.json {
            match &user {
                Some(u) => user_table(std::slice::from_ref(u)).print(),
                None => println!("user {} not found on {addr}", a.username),
            }
        }
        out.push(json!({ "brokerAddr": addr, "user": user.as_ref().map(user_json) }));
    }
    if ctx.json {
        return print_json(&json!(out));
    }
    Ok(())
}

/// `listUser`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListUserArgs {
    #[command(flatten)]
    target: Target,
    /// Users whose name contains this.
    #[arg(short = 'f', long = "filter")]
    filter: Option<String>,
}

pub(crate) async fn list_user(ctx: &Ctx, a: ListUserArgs) -> anyhow::Result<()> {
    let mut out = Vec::new();
    for addr in a.target.addrs(ctx, false).await? {
        let users = ctx.client.list_users(&addr, a.filter.as_deref()).await?;
        if !ctx.json {
            println!("get user from {addr} success.");
            user_table(&users).print();
        }
        out.push(json!({ "brokerAddr": addr, "users": users.iter().map(user_json).collect::<Vec<_>>() }));
    }
    if ctx.json {
        return print_json(&json!(out));
    }
    Ok(())
}

/// `createAcl` / `updateAcl`.
#[derive(Debug, clap::Args)]
pub(crate) struct AclArgs {
    #[command(flatten)]
    target: Target,
    /// The subject, e.g. `User:alice`.
    #[arg(short = 's', long = "subject")]
    subject: String,
    /// Resources, comma-separated: `Topic:orders`, `Group:g*`, `Topic:*`, `*`.
    #[arg(short = 'r', long = "resources")]
    resources: String,
    /// Actions, comma-separated: Pub, Sub, Create, Update, Delete, Get, List, All.
    #[arg(short = 'a', long = "actions")]
    actions: String,
    /// Source addresses or CIDR blocks, comma-separated (default: anywhere).
    #[arg(short = 'i', long = "sourceIp")]
    source_ip: Option<String>,
    /// Allow or Deny.
    #[arg(short = 'd', long = "decision")]
    decision: String,
}

pub(crate) async fn put_acl(ctx: &Ctx, a: AclArgs, update: bool) -> anyhow::Result<()> {
    let actions = list(Some(&a.actions));
    let source_ips = list(a.source_ip.as_deref());
    let entries = list(Some(&a.resources))
        .into_iter()
        .map(|r| PolicyEntryInfo {
            resource: Some(r),
            actions: actions.clone(),
            source_ips: source_ips.clone(),
            decision: Some(a.decision.clone()),
        })
        .collect();
    let acl = AclInfo { subject: Some(a.subject.clone()), policies: vec![PolicyInfo { policy_type: None, entries }] };
    let verb = if update { "update" } else { "create" };
    let mut done = Vec::new();
    for addr in a.target.addrs(ctx, true).await? {
        ctx.client.put_acl(&addr, &acl, update).await?;
        if !ctx.json {
            println!("{verb} acl to {addr} success.");
        }
        done.push(addr);
    }
    if ctx.json {
        return print_json(&json!({ "subject": a.subject, "brokers": done }));
    }
    Ok(())
}

/// `deleteAcl`.
#[derive(Debug, clap::Args)]
pub(crate) struct DeleteAclArgs {
    #[command(flatten)]
    target: Target,
    /// The subject, e.g. `User:alice`.
    #[arg(short = 's', long = "subject")]
    subject: String,
    /// Only these resources' entries (comma-separated); default: the whole ACL.
    #[arg(short = 'r', long = "resources")]
    resources: Option<String>,
}

pub(crate) async fn delete_acl(ctx: &Ctx, a: DeleteAclArgs) -> anyhow::Result<()> {
    let resources = list(a.resources.as_deref());
    let mut done = Vec::new();
    for addr in a.target.addrs(ctx, true).await? {
        if resources.is_empty() {
            ctx.client.delete_acl(&addr, &a.subject, None, None).await?;
        }
        for r in &resources {
            ctx.client.delete_acl(&addr, &a.subject, None, Some(r)).await?;
        }
        if !ctx.json {
            println!("delete acl to {addr} success.");
        }
        done.push(addr);
    }
    if ctx.json {
        return print_json(&json!({ "subject": a.subject, "brokers": done }));
    }
    Ok(())
}

fn acl_rows(table: &mut Table, acl: &AclInfo) {
    let subject = acl.subject.clone().unwrap_or_default();
    if acl.policies.is_empty() {
        table.row(vec![subject.clone(), String::new(), String::new(), String::new(), String::new(), String::new()]);
    }
    for p in &acl.policies {
        for e in &p.entries {
            table.row(vec![
                subject.clone(),
                p.policy_type.clone().unwrap_or_default(),
                e.resource.clone().unwrap_or_default(),
                e.actions.join(","),
                e.source_ips.join(","),
                e.decision.clone().unwrap_or_default(),
            ]);
        }
    }
}

const ACL_HEADERS: [&str; 6] = ["#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision"];

fn acl_json(acl: &AclInfo) -> ferromq_client::admin::JsonValue {
    json!({
        "subject": acl.subject,
        "policies": acl.policies.iter().map(|p| json!({
            "policyType": p.policy_type,
            "entries": p.entries.iter().map(|e| json!({
                "resource": e.resource, "actions": e.actions, "sourceIps": e.source_ips, "decision": e.decision,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// `getAcl`.
#[derive(Debug, clap::Args)]
pub(crate) struct GetAclArgs {
    #[command(flatten)]
    target: Target,
    /// The subject, e.g. `User:alice`.
    #[arg(short = 's', long = "subject")]
    subject: String,
}

pub(crate) async fn get_acl(ctx: &Ctx, a: GetAclArgs) -> anyhow::Result<()> {
    let mut out = Vec::new();
    for addr in a.target.addrs(ctx, false).await? {
        let acl = ctx.client.get_acl(&addr, &a.subject).await?;
        if !ctx.json {
            let mut t = Table::new(&ACL_HEADERS);
            if let Some(acl) = &acl {
                acl_rows(&mut t, acl);
            }
            t.print();
        }
        out.push(json!({ "brokerAddr": addr, "acl": acl.as_ref().map(acl_json) }));
    }
    if ctx.json {
        return print_json(&json!(out));
    }
    Ok(())
}

/// `listAcl`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListAclArgs {
    #[command(flatten)]
    target: Target,
    /// ACLs whose subject contains this.
    #[arg(short = 's', long = "subject")]
    subject: Option<String>,
    /// Entries whose resource contains this.
    #[arg(short = 'r', long = "resource")]
    resource: Option<String>,
}

pub(crate) async fn list_acl(ctx: &Ctx, a: ListAclArgs) -> anyhow::Result<()> {
    let mut out = Vec::new();
    for addr in a.target.addrs(ctx, false).await? {
        let acls = ctx.client.list_acls(&addr, a.subject.as_deref(), a.resource.as_deref()).await?;
        if !ctx.json {
            let mut t = Table::new(&ACL_HEADERS);
            for acl in &acls {
                acl_rows(&mut t, acl);
            }
            t.print();
        }
        out.push(json!({ "brokerAddr": addr, "acls": acls.iter().map(acl_json).collect::<Vec<_>>() }));
    }
    if ctx.json {
        return print_json(&json!(out));
    }
    Ok(())
}

/// `copyUser` / `copyAcl`: from one broker to another.
#[derive(Debug, clap::Args)]
pub(crate) struct CopyArgs {
    /// The broker copied from.
    #[arg(short = 'f', long = "fromBroker")]
    from: String,
    /// The broker copied to.
    #[arg(short = 't', long = "toBroker")]
    to: String,
    /// copyUser: only these users, comma-separated.
    #[arg(short = 'u', long = "usernames")]
    usernames: Option<String>,
    /// copyAcl: only these subjects, comma-separated.
    #[arg(short = 's', long = "subjects")]
    subjects: Option<String>,
}

pub(crate) async fn copy_users(ctx: &Ctx, a: CopyArgs) -> anyhow::Result<()> {
    let names = list(a.usernames.as_deref());
    for user in ctx.client.list_users(&a.from, None).await? {
        let name = user.username.clone().unwrap_or_default();
        if !names.is_empty() && !names.contains(&name) {
            continue;
        }
        if ctx.client.get_user(&a.to, &name).await?.is_some() {
            ctx.client.update_user(&a.to, &user).await?;
        } else {
            ctx.client.create_user(&a.to, &user).await?;
        }
        println!("copy user of {name} from {} to {} success.", a.from, a.to);
    }
    Ok(())
}

pub(crate) async fn copy_acls(ctx: &Ctx, a: CopyArgs) -> anyhow::Result<()> {
    let names = list(a.subjects.as_deref());
    for acl in ctx.client.list_acls(&a.from, None, None).await? {
        let subject = acl.subject.clone().unwrap_or_default();
        if !names.is_empty() && !names.contains(&subject) {
            continue;
        }
        ctx.client.put_acl(&a.to, &acl, false).await?;
        println!("copy acl of {subject} from {} to {} success.", a.from, a.to);
    }
    Ok(())
}
