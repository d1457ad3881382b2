//! The JSON bodies of the controller's answers (controller-mode.md §2), with Java's field
//! names; those brokers read too live in `ferromq_protocol::body`.

use std::collections::BTreeMap;

use serde::Serialize;

pub use ferromq_protocol::body::{BrokerMemberGroup, ElectMasterResponseBody, SyncStateSet};

/// GET_SYNC_STATE_DATA's answer body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerReplicasInfo {
    /// Per broker set.
    pub replicas_info_table: BTreeMap<String, crate::requests::ReplicasInfo>,
}

/// Serializes a body (plain data: cannot fail).
pub fn to_json<T: Serialize>(body: &T) -> Vec<u8> {
    serde_json::to_vec(body).unwrap_or_default()
}
