//! Producer page: a producer group's connections.

use std::collections::BTreeMap;

use serde_json::{json, Value as JsonValue};

use super::shared::{connection_json, strip_sys};
use crate::error::ApiError;
use crate::http::ApiRequest;
use crate::state::Dashboard;

/// `/producer/producerConnection.query?producerGroup=&topic=`: `{"connectionSet": [...]}`, the
/// group's clients on every broker of the topic's route (each client once).
pub(crate) async fn connection(d: &Dashboard, r: &ApiRequest) -> Result<JsonValue, ApiError> {
    let group = r.required("producerGroup")?;
    let topic = strip_sys(r.required("topic")?);
    let admin = d.admin();
    let mut clients = BTreeMap::new();
    let mut last_error = None;
    let brokers = admin.route_brokers(topic).await?;
    for (_, addr) in &brokers {
        match admin.producer_connection(addr, group).await {
            Ok(c) => {
                for x in c.connection_set {
                    clients.entry(x.client_id.clone()).or_insert(x);
                }
            }
            Err(e) => last_error = Some(e),
        }
    }
    if clients.is_empty() {
        if let Some(e) = last_error {
            return Err(e.into());
        }
    }
    let set: Vec<JsonValue> = clients.values().map(connection_json).collect();
    Ok(json!({ "connectionSet": set }))
}
