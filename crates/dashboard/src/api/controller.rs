//! Controller page (FerroMQ's own; rocketmq-dashboard has none): for brokers in controller
//! mode, the controller group (its leader and peers) and each broker group's master, epoch and
//! SyncStateSet, as the controller holds them.

use std::collections::BTreeSet;

use serde_json::{json, Value as JsonValue};

use crate::error::ApiError;
use crate::state::Dashboard;

/// `/controller/state.query`: `{"enabled": false}` when no broker runs in controller mode;
/// else `{"enabled": true, "controllerAddrs": [...], "controllers": [{addr, group, leaderId,
/// leaderAddr, isLeader, peers} | {addr, error}], "syncStateData": <GET_SYNC_STATE_DATA body>}`.
pub(crate) async fn state(d: &Dashboard) -> Result<JsonValue, ApiError> {
    let admin = d.admin();
    let cluster = admin.cluster_info().await?;
    let mut controller_addrs = BTreeSet::new();
    let mut broker_names = Vec::new();
    for data in cluster.broker_addr_table.values() {
        let Some(addr) = data.select_broker_addr() else { continue };
        let Ok(config) = admin.broker_config(addr).await else { continue };
        let value = |key: &str| config.iter().find(|(k, _)| k == key).map(|(_, v)| v.trim().to_owned());
        if value("enableControllerMode").as_deref() != Some("true") {
            continue;
        }
        broker_names.push(data.broker_name.clone());
        for a in value("controllerAddr").unwrap_or_default().split(';').map(str::trim).filter(|a| !a.is_empty()) {
            controller_addrs.insert(a.to_owned());
        }
    }
    if broker_names.is_empty() || controller_addrs.is_empty() {
        return Ok(json!({ "enabled": false }));
    }
    let mut controllers = Vec::new();
    for addr in &controller_addrs {
        controllers.push(match admin.controller_metadata(addr).await {
            Ok(m) => json!({ "addr": addr, "group": m.group, "leaderId": m.controller_leader_id,
                             "leaderAddr": m.controller_leader_address, "isLeader": m.is_leader,
                             "peers": m.peers }),
            Err(e) => json!({ "addr": addr, "error": ApiError::from(e).chain() }),
        });
    }
    let mut sync_state = JsonValue::Null;
    let mut sync_error = None;
    for addr in &controller_addrs {
        match admin.sync_state_data(addr, &broker_names).await {
            Ok(v) => {
                sync_state = v;
                sync_error = None;
                break;
            }
            Err(e) => sync_error = Some(ApiError::from(e).chain()),
        }
    }
    Ok(json!({ "enabled": true, "controllerAddrs": controller_addrs, "controllers": controllers,
               "brokerNames": broker_names, "syncStateData": sync_state, "syncStateError": sync_error }))
}
