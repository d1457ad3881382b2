//! The broker's side of replication: a SYNC_MASTER send waits for its replicas after the
//! store accepted it (Java: `CommitLog#handleHA` / `submitReplicaRequest`), and
//! GET_BROKER_HA_STATUS (907) reports the HA state. The protocol itself is
//! `ferromq-replication`; `broker.rs` starts the classic master service or slave client, and in
//! controller mode `controller_mode.rs` swaps the AutoSwitchHA ones as the role changes.

use std::sync::Arc;

use ferromq_auth::plain::PlainAccessValidator;
use ferromq_auth::v2::model::{UserStatus, UserType};
use ferromq_auth::v2::AuthMetadata;
use ferromq_protocol::body::JsonBody;
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::tls::ServerTls;
use ferromq_replication::autoswitch::{AutoSwitchMaster, AutoSwitchSlave};
use ferromq_replication::{HaClient, HaClientOptions, HaListener, HaService, ReplicaAuthenticator, ReplicaWaitError};
use ferromq_store::{PutMessageResult, PutMessageStatus};
use tokio::net::TcpListener;
use tracing::debug;

use crate::broker::Broker;
use crate::config::BrokerRole;
use crate::processor::{failure, success};

/// The replication service running now.
#[derive(Debug, Clone, Default)]
pub(crate) enum Replication {
    /// None (a fenced controller-mode broker, or between roles).
    #[default]
    None,
    /// Classic master: ships to slaves.
    Master(Arc<HaService>),
    /// Classic slave: follows the master.
    Slave(Arc<HaClient>),
    /// Controller-mode master (AutoSwitchHA).
    AutoSwitchMaster(Arc<AutoSwitchMaster>),
    /// Controller-mode replica (AutoSwitchHA).
    AutoSwitchSlave(Arc<AutoSwitchSlave>),
}

/// How the HA port and the replica's link are secured (TLS and FerroMQ's HA authentication,
/// `ferromq_replication`'s `link` module): fixed at start, for classic and controller mode.
#[derive(Debug, Clone, Default)]
pub(crate) struct HaSecurity {
    /// The broker's `tls.server.mode` and certificate, for the HA port too.
    pub(crate) server_tls: ServerTls,
    /// Who may replicate, when ACL and `haAuthenticationEnabled` are on.
    pub(crate) authenticator: Option<Arc<dyn ReplicaAuthenticator>>,
    /// A replica's TLS and credentials.
    pub(crate) client: HaClientOptions,
}

impl HaSecurity {
    /// `listener` as the master's HA port.
    pub(crate) fn listener(&self, listener: TcpListener) -> HaListener {
        let l = HaListener::from(listener).with_tls(self.server_tls.clone());
        match &self.authenticator {
            Some(a) => l.with_authenticator(a.clone()),
            None => l,
        }
    }
}

/// The accounts that may replicate a master: SUPER users of ACL 2.0 (when authentication is
/// on), admin accounts of ACL 1.0 (when `aclEnable`). The brokers of a group share them.
#[derive(Debug)]
pub(crate) struct ReplicaAccounts {
    pub(crate) v2: Option<Arc<AuthMetadata>>,
    pub(crate) plain: Option<Arc<PlainAccessValidator>>,
}

impl ReplicaAuthenticator for ReplicaAccounts {
    fn secret(&self, access_key: &str) -> Option<String> {
        let v2 = self
            .v2
            .as_ref()
            .and_then(|m| m.user(access_key))
            .filter(|u| u.user_type == UserType::Super && u.user_status == UserStatus::Enable);
        if let Some(user) = v2 {
            return Some(user.password);
        }
        let (_, accounts) = self.plain.as_ref()?.config();
        accounts.into_iter().find(|a| a.admin && a.access_key == access_key).map(|a| a.secret_key)
    }
}

/// The role the broker acts in now: fixed by `brokerRole`/`brokerId` in classic mode, changed
/// by the controller in controller mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RuntimeRole {
    /// Java's `brokerRole` as it is now (SLAVE while fenced).
    pub(crate) broker_role: BrokerRole,
    /// The id registered with the name servers (0 for a master).
    pub(crate) broker_id: i64,
    /// Controller mode before the controller named a role: no writes, no registration.
    pub(crate) fenced: bool,
}

/// The role a send is admitted under, read once with the replication service of that role.
/// The slave's refusal and the SYNC_MASTER's wait follow this one reading: a controller-mode
/// master can step down while a message is stored, and its answer must then not become
/// SUCCESS because the broker is no longer SYNC_MASTER when the store answers (ADR 0016).
#[derive(Debug, Clone)]
pub(crate) struct WriteRole {
    pub(crate) broker_role: BrokerRole,
    replication: Replication,
}

impl Broker {
    /// The role now, and the replication service it runs with. Read in that order: a new
    /// master starts its service before it takes the SYNC_MASTER role, so a SYNC_MASTER reading
    /// sees that service, or (the broker stepped down since) another one.
    pub(crate) fn write_role(&self) -> WriteRole {
        let broker_role = self.role().broker_role;
        WriteRole { broker_role, replication: self.replication() }
    }

    /// The role now.
    pub(crate) fn role(&self) -> RuntimeRole {
        *self.role.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn set_role(&self, role: RuntimeRole) {
        *self.role.write().unwrap_or_else(std::sync::PoisonError::into_inner) = role;
    }

    /// The replication service now (a cheap clone of its handle).
    pub(crate) fn replication(&self) -> Replication {
        self.replication.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Replaces the replication service; returns the previous one (to be shut down).
    pub(crate) fn replace_replication(&self, next: Replication) -> Replication {
        std::mem::replace(&mut *self.replication.write().unwrap_or_else(std::sync::PoisonError::into_inner), next)
    }

    /// For a put admitted as SYNC_MASTER (`admitted`) that asked to wait (WAIT != false) and was
    /// stored, waits until enough replicas of that role's service acknowledged it. Returns the
    /// response code and remark replacing SUCCESS (or FLUSH_DISK_TIMEOUT) when they did not:
    /// SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT, SERVICE_NOT_AVAILABLE when the broker stepped
    /// down meanwhile, ... The message stays stored either way, as in Java, and the answer
    /// still carries its id.
    pub(crate) async fn wait_for_replicas(
        &self,
        admitted: &WriteRole,
        result: &PutMessageResult,
    ) -> Option<(i32, String)> {
        if admitted.broker_role != BrokerRole::SyncMaster {
            return None;
        }
        if !matches!(result.status, PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout) {
            return None;
        }
        let append = result.append.as_ref()?;
        let next_offset = append.wrote_offset + append.wrote_bytes as i64;
        let error = match &admitted.replication {
            Replication::Master(ha) => ha.replicate(next_offset).await.err()?,
            Replication::AutoSwitchMaster(ha) => ha.replicate(next_offset).await.err()?,
            // The master's service was gone by the time the role's service was read: the
            // broker stepped down (or is shutting down). Java answers PUT_OK then; nothing
            // will replicate this message from here, so it must not look replicated.
            _ => {
                debug!(next_offset, "a SYNC_MASTER put outlived the master role");
                return Some((
                    response_code::SERVICE_NOT_AVAILABLE,
                    "the broker stopped being master while the message was stored; it is not replicated".into(),
                ));
            }
        };
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
        match self.replication() {
            Replication::Master(ha) => {
                let info = ha.runtime_info();
                table.insert("haServerAddr".into(), self.ha_server_addr.clone());
                table.insert("haSlaveCount".into(), ha.connection_count().to_string());
                table.insert("haInSyncSlaveNums".into(), info.in_sync_slave_nums.to_string());
                table.insert("haPush2SlaveMaxOffset".into(), ha.push2_slave_max_offset().to_string());
                table.insert("haSlaveFallBehindBytes".into(), ha.slave_fall_behind_bytes().to_string());
            }
            Replication::AutoSwitchMaster(ha) => {
                let info = ha.runtime_info();
                table.insert("haServerAddr".into(), self.ha_server_addr.clone());
                table.insert("haSlaveCount".into(), ha.connection_count().to_string());
                table.insert("haInSyncSlaveNums".into(), info.in_sync_slave_nums.to_string());
                table.insert("masterEpoch".into(), ha.master_epoch().to_string());
                table.insert("confirmOffset".into(), ha.confirm_offset().to_string());
            }
            Replication::Slave(client) => {
                table.insert("haMasterAddress".into(), client.master_address().unwrap_or_default());
                table.insert("haSlaveConnected".into(), client.is_connected().to_string());
                table.insert("haSlaveMaxOffset".into(), self.store.max_phy_offset().to_string());
            }
            Replication::AutoSwitchSlave(client) => {
                table.insert("haMasterAddress".into(), client.master_address().unwrap_or_default());
                table.insert("haSlaveConnected".into(), client.is_connected().to_string());
                table.insert("haSlaveMaxOffset".into(), self.store.max_phy_offset().to_string());
                table.insert("confirmOffset".into(), self.store.confirm_offset().to_string());
            }
            Replication::None => {}
        }
    }

    /// GET_BROKER_HA_STATUS: the master's view of its slaves or the slave's client state.
    pub(crate) fn get_broker_ha_status(&self, req: &RemotingCommand) -> RemotingCommand {
        let info = match self.replication() {
            Replication::Master(ha) => ha.runtime_info(),
            Replication::Slave(client) => client.runtime_info(),
            Replication::AutoSwitchMaster(ha) => ha.runtime_info(),
            Replication::AutoSwitchSlave(client) => client.runtime_info(),
            Replication::None => return failure(req, response_code::SYSTEM_ERROR, "replication is not running"),
        };
        success(req).with_body(info.encode())
    }
}

/// Stops a replication service and waits for it.
pub(crate) async fn shut_down(replication: Replication) {
    match replication {
        Replication::None => {}
        Replication::Master(ha) => ha.shutdown().await,
        Replication::Slave(client) => client.shutdown().await,
        Replication::AutoSwitchMaster(ha) => ha.shutdown().await,
        Replication::AutoSwitchSlave(client) => client.shutdown().await,
    }
}
