//! ACL page (ACL 2.0): users and their policies on the brokers, through AUTH_* requests
//! 3001-3010. rocketmq-dashboard's `/acl/*` paths and bodies.

use std::collections::BTreeMap;

use ferromq_client::admin::AdminClient;
use ferromq_protocol::body::{AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo};
use serde::Deserialize;
use serde_json::{json, Value as JsonValue};

use super::shared::target_masters;
use crate::error::ApiError;
use crate::http::ApiRequest;
use crate::state::Dashboard;

/// The masters `clusterName` and `brokerName` select; every master when neither is given.
async fn targets(admin: &AdminClient, cluster: Option<&str>, broker: Option<&str>) -> Result<Vec<String>, ApiError> {
    let non_blank = |v: Option<&str>| v.map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    let (clusters, brokers): (Vec<String>, Vec<String>) =
        (non_blank(cluster).into_iter().collect(), non_blank(broker).into_iter().collect());
    if clusters.is_empty() && brokers.is_empty() {
        let info = admin.cluster_info().await?;
        return Ok(info.broker_addr_table.values().filter_map(|b| b.master_addr().map(str::to_owned)).collect());
    }
    Ok(target_masters(admin, &clusters, &brokers).await?.into_iter().map(|(_, addr)| addr).collect())
}

/// `/acl/users.query?clusterName=&brokerName=`: the users of the selected brokers (each once,
/// as the first broker holds it).
pub(crate) async fn users(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let admin = d.admin();
    let mut users = BTreeMap::new();
    for addr in targets(&admin, r.param("clusterName"), r.param("brokerName")).await? {
        for u in admin.list_users(&addr, None).await? {
            let name = u.username.clone().unwrap_or_default();
            users.entry(name).or_insert(u);
        }
    }
    Ok(json!(users.into_values().collect::<Vec<_>>()))
}

/// `/acl/acls.query?clusterName=&brokerName=&searchParam=`: the policies of the selected
/// brokers, one entry per resource; `searchParam` keeps subjects or resources containing it.
pub(crate) async fn acls(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let admin = d.admin();
    let search = r.param("searchParam").map(str::trim).filter(|s| !s.is_empty());
    let mut acls = BTreeMap::new();
    for addr in targets(&admin, r.param("clusterName"), r.param("brokerName")).await? {
        for acl in admin.list_acls(&addr, None, None).await? {
            let subject = acl.subject.clone().unwrap_or_default();
            acls.entry(subject).or_insert(acl);
        }
    }
    let matches = |a: &AclInfo| {
        search.is_none_or(|s| {
            a.subject.as_deref().is_some_and(|x| x.contains(s))
                || a.policies
                    .iter()
                    .flat_map(|p| &p.entries)
                    .any(|e| e.resource.as_deref().is_some_and(|x| x.contains(s)))
        })
    };
    Ok(json!(acls.into_values().filter(matches).collect::<Vec<_>>()))
}

/// The body of `/acl/createUser.do` and `/acl/updateUser.do`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UserRequest {
    #[serde(default)]
    cluster_name: Option<String>,
    #[serde(default)]
    broker_name: Option<String>,
    user_info: UserInfo,
}

/// `/acl/createUser.do` (`update` false) and `/acl/updateUser.do`: on every selected broker.
pub(crate) async fn put_user(d: &Dashboard, r: &ApiRequest, update: bool) -> Result<JsonValue, ApiError> {
    let req: UserRequest = r.json()?;
    if req.user_info.username.as_deref().is_none_or(|u| u.trim().is_empty()) {
        return Err(ApiError::bad("userInfo.username is required"));
    }
    let admin = d.admin();
    for addr in targets(&admin, req.cluster_name.as_deref(), req.broker_name.as_deref()).await? {
        if update {
            admin.update_user(&addr, &req.user_info).await?;
        } else {
            admin.create_user(&addr, &req.user_info).await?;
        }
    }
    Ok(JsonValue::Bool(true))
}

/// `/acl/deleteUser.do?username=&clusterName=&brokerName=`.
pub(crate) async fn delete_user(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let username = r.required("username")?;
    let admin = d.admin();
    for addr in targets(&admin, r.param("clusterName"), r.param("brokerName")).await? {
        admin.delete_user(&addr, username).await?;
    }
    Ok(JsonValue::Bool(true))
}

/// A policy entry as the ACL page sends it: several resources with the same actions.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EntryRequest {
    resource: Vec<String>,
    #[serde(default)]
    actions: Vec<String>,
    #[serde(default)]
    source_ips: Vec<String>,
    #[serde(default)]
    decision: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicyRequestItem {
    #[serde(default)]
    policy_type: Option<String>,
    entries: Vec<EntryRequest>,
}

/// The body of `/acl/createAcl.do` and `/acl/updateAcl.do`. Java: `PolicyRequest`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicyRequest {
    #[serde(default)]
    cluster_name: Option<String>,
    #[serde(default)]
    broker_name: Option<String>,
    subject: String,
    policies: Vec<PolicyRequestItem>,
}

/// `/acl/createAcl.do` (`update` false) and `/acl/updateAcl.do`: the subject's policies on
/// every selected broker, one entry per resource.
pub(crate) async fn put_acl(d: &Dashboard, r: &ApiRequest, update: bool) -> Result<JsonValue, ApiError> {
    let req: PolicyRequest = r.json()?;
    if req.subject.trim().is_empty() {
        return Err(ApiError::bad("subject is required (User:name)"));
    }
    let policies = req
        .policies
        .into_iter()
        .map(|p| PolicyInfo {
            policy_type: p.policy_type,
            entries: p
                .entries
                .into_iter()
                .flat_map(|e| {
                    e.resource.into_iter().map(move |resource| PolicyEntryInfo {
                        resource: Some(resource),
                        actions: e.actions.clone(),
                        source_ips: e.source_ips.clone(),
                        decision: e.decision.clone(),
                    })
                })
                .collect(),
        })
        .collect();
    let acl = AclInfo { subject: Some(req.subject.trim().to_owned()), policies };
    let admin = d.admin();
    for addr in targets(&admin, req.cluster_name.as_deref(), req.broker_name.as_deref()).await? {
        admin.put_acl(&addr, &acl, update).await?;
    }
    Ok(JsonValue::Bool(true))
}

/// `/acl/deleteAcl.do?subject=&resource=&clusterName=&brokerName=`: the subject's policies
/// (only those on `resource` when given).
pub(crate) async fn delete_acl(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let subject = r.required("subject")?;
    let resource = r.param("resource").map(str::trim).filter(|s| !s.is_empty());
    let admin = d.admin();
    for addr in targets(&admin, r.param("clusterName"), r.param("brokerName")).await? {
        admin.delete_acl(&addr, subject, None, resource).await?;
    }
    Ok(JsonValue::Bool(true))
}
