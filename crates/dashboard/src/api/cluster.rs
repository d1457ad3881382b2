//! Cluster page: brokers with their runtime figures, a broker's configuration.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value as JsonValue};

use crate::error::ApiError;
use crate::http::ApiRequest;
use crate::state::Dashboard;

/// `/cluster/list.query`: `{"clusterInfo": ClusterInfo, "brokerServer": {brokerName: {brokerId:
/// runtime info}}, "messageTypes": {type: label}}`. A broker that does not answer has an empty runtime table.
pub(crate) async fn list(d: &Dashboard) -> Result<JsonValue, ApiError> {
    let admin = d.admin();
    let cluster = admin.cluster_info().await?;
    let mut servers = Map::new();
    for (name, data) in &cluster.broker_addr_table {
        let mut members = Map::new();
        for (id, addr) in &data.broker_addrs {
            let info: BTreeMap<String, String> = admin.broker_runtime_info(addr).await.unwrap_or_default();
            members.insert(id.to_string(), json!(info));
        }
        servers.insert(name.clone(), JsonValue::Object(members));
    }
    // The message types the topic form offers, as rocketmq-dashboard lists them.
    let types: Map<String, JsonValue> = super::topic::MESSAGE_TYPES
        .iter()
        .map(|t| ((*t).to_owned(), JsonValue::String(format!("MESSAGE_TYPE_{t}"))))
        .collect();
    Ok(json!({ "clusterInfo": cluster, "brokerServer": servers, "messageTypes": types }))
}

/// `/cluster/brokerConfig.query?brokerAddr=`: the broker's configuration as a key-value map.
pub(crate) async fn broker_config(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let addr = r.required("brokerAddr")?;
    let entries = d.admin().broker_config(addr).await?;
    Ok(JsonValue::Object(entries.into_iter().map(|(k, v)| (k, JsonValue::String(v))).collect()))
}
