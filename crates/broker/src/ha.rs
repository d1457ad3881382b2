//! The broker's side of replication: a SYNC_MASTER send waits for its replicas after the
//! store accepted it (Java: `CommitLog#handleHA` / `submitReplicaRequest`), and
//! GET_BROKER_HA_STATUS (907) reports the HA state. The protocol itself is
//! `ferromq-replication`; `broker.rs` starts its master service or slave client.

use ferromq_protocol::body::JsonBody;
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_replication::ReplicaWaitError;
use ferromq_store::{PutMessageResult, PutMessageStatus};
use tracing::debug;

use crate::broker::Broker;
use crate::config::BrokerRole;
use crate::processor::{failure, success};

impl Broker {
    /// For a SYNC_MASTER put that asked to wait (WAIT != false) and was stored, waits until enough
    /// replicas acknowledged it. Returns the response code and remark replacing SUCCESS (or
    /// FLUSH_DISK_TIMEOUT) when they did not: SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT, ... The
    /// message stays stored either way, as in Java, and the answer still carries its id.
    pub(crate) async fn wait_for_replicas(&self, result: &PutMessageResult) -> Option<(i32, String)> {
        if self.config.broker_role != BrokerRole::SyncMaster {
            return None;
        }
        if !matches!(result.status, PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout) {
            return None;
        }
        let append = result.append.as_ref()?;
        let ha = self.ha_service.as_ref()?;
        let next_offset = append.wrote_offset + append.wrote_bytes as i64;
        let error = ha.replicate(next_offset).await.err()?;
        debug!(next_offset, error = %error, "replicas did not acknowledge a SYNC_MASTER put");
        Some(match error {
            ReplicaWaitError::NotAvailable { .. } => (response_code::SLAVE_NOT_AVAILABLE, error.to_string()),
            ReplicaWaitError::Timeout { .. } => (response_code::FLUSH_SLAVE_TIMEOUT, error.to_string()),
            ReplicaWaitError::ShutDown => (response_code::SERVICE_NOT_AVAILABLE, error.to_string()),
            // NotEnoughInSync (Java's IN_SYNC_REPLICAS_NOT_ENOUGH) and anything later.
            _ => (response_code::SYSTEM_ERROR, error.to_string()),
        })
    }

    /// HA entries of GET_BROKER_RUNTIME_INFO. Java 5 has none beyond the CommitLog offsets;
    /// these extra keys (ignored by tools that do not know them) give the state at a glance:
    /// on a master its slaves, acked offset, fall-behind bytes and in-sync count; on a slave
    /// its master and its own end offset.
    pub(crate) fn insert_ha_runtime_info(&self, table: &mut std::collections::BTreeMap<String, String>) {
        if let Some(ha) = &self.ha_service {
            let info = ha.runtime_info();
            table.insert("haServerAddr".into(), self.ha_server_addr.clone());
            table.insert("haSlaveCount".into(), ha.connection_count().to_string());
            table.insert("haInSyncSlaveNums".into(), info.in_sync_slave_nums.to_string());
            table.insert("haPush2SlaveMaxOffset".into(), ha.push2_slave_max_offset().to_string());
            table.insert("haSlaveFallBehindBytes".into(), ha.slave_fall_behind_bytes().to_string());
        }
        if let Some(client) = &self.ha_client {
            table.insert("haMasterAddress".into(), client.master_address().unwrap_or_default());
            table.insert("haSlaveConnected".into(), client.is_connected().to_string());
            table.insert("haSlaveMaxOffset".into(), self.store.max_phy_offset().to_string());
        }
    }

    /// GET_BROKER_HA_STATUS: the master's view of its slaves or the slave's client state.
    pub(crate) fn get_broker_ha_status(&self, req: &RemotingCommand) -> RemotingCommand {
        let info = match (&self.ha_service, &self.ha_client) {
            (Some(ha), _) => ha.runtime_info(),
            (None, Some(client)) => client.runtime_info(),
            (None, None) => return failure(req, response_code::SYSTEM_ERROR, "replication is not running"),
        };
        success(req).with_body(info.encode())
    }
}
