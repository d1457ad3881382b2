//! What mqadmin asks of a 5.x controller group (controller-mode.md §8). Requests that need the
//! leader first ask the given node who leads (CONTROLLER_GET_METADATA_INFO) and go there, as
//! Java's admin does.

use ferromq_protocol::header::{
    CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader, ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
};
use ferromq_protocol::json::parse_lenient;
use ferromq_protocol::{request_code, response_code, RemotingCommand};

use crate::admin::client::{check, code_name, decode_header};
use crate::admin::{AdminClient, AdminError, JsonValue};

/// What ELECT_MASTER answered.
#[derive(Debug, Clone)]
pub struct ElectedMaster {
    /// The header: master id, address and epochs.
    pub header: ElectMasterResponseHeader,
    /// True when the replica asked for was the master already (CONTROLLER_MASTER_STILL_EXIST).
    pub unchanged: bool,
    /// The body (`brokerMemberGroup`, `syncStateSet`).
    pub body: JsonValue,
}

impl AdminClient {
    /// CONTROLLER_GET_METADATA_INFO of the controller node at `addr`.
    ///
    /// # Errors
    /// Transport failures and refusals, naming `addr`.
    pub async fn controller_metadata(&self, addr: &str) -> Result<GetMetaDataResponseHeader, AdminError> {
        let name = code_name(request_code::CONTROLLER_GET_METADATA_INFO);
        let r = self.call_ok(addr, RemotingCommand::request(request_code::CONTROLLER_GET_METADATA_INFO)).await?;
        decode_header(addr, name, &r)
    }

    /// The leader's address, as the node at `addr` knows it (`addr` when it leads).
    ///
    /// # Errors
    /// The node cannot be reached or knows no leader.
    pub async fn controller_leader(&self, addr: &str) -> Result<String, AdminError> {
        let meta = self.controller_metadata(addr).await?;
        meta.controller_leader_address.filter(|a| !a.is_empty()).ok_or_else(|| AdminError::Response {
            addr: addr.to_owned(),
            request: code_name(request_code::CONTROLLER_GET_METADATA_INFO),
            code: response_code::CONTROLLER_NOT_LEADER,
            code_name: "CONTROLLER_NOT_LEADER",
            remark: "the controller group has no leader now".to_owned(),
        })
    }

    /// CONTROLLER_GET_SYNC_STATE_DATA for `broker_names`, from the leader.
    ///
    /// # Errors
    /// Transport failures, refusals and an undecodable body.
    pub async fn sync_state_data(&self, addr: &str, broker_names: &[String]) -> Result<JsonValue, AdminError> {
        let leader = self.controller_leader(addr).await?;
        let name = code_name(request_code::CONTROLLER_GET_SYNC_STATE_DATA);
        let body = serde_json::to_vec(broker_names).unwrap_or_default();
        let r = self
            .call_ok(&leader, RemotingCommand::request(request_code::CONTROLLER_GET_SYNC_STATE_DATA).with_body(body))
            .await?;
        parse_lenient(&r.body).map_err(|source| AdminError::Body { addr: leader, request: name, source })
    }

    /// CONTROLLER_ELECT_MASTER with `designateElect`: make `broker_id` the master of
    /// `broker_name`.
    ///
    /// # Errors
    /// Transport failures and refusals (e.g. the replica is not alive or not in sync).
    pub async fn elect_master(
        &self,
        addr: &str,
        cluster: &str,
        broker_name: &str,
        broker_id: i64,
    ) -> Result<ElectedMaster, AdminError> {
        let leader = self.controller_leader(addr).await?;
        let name = code_name(request_code::CONTROLLER_ELECT_MASTER);
        let request =
            RemotingCommand::request(request_code::CONTROLLER_ELECT_MASTER).with_header(&ElectMasterRequestHeader {
                cluster_name: Some(cluster.to_owned()),
                broker_name: broker_name.to_owned(),
                broker_id: Some(broker_id),
                designate_elect: Some(true),
                invoke_time: None,
            });
        let r = self.call(&leader, request).await?;
        let r = check(&leader, name, r, &[response_code::SUCCESS, response_code::CONTROLLER_MASTER_STILL_EXIST])?;
        let header = decode_header(&leader, name, &r)?;
        let body = if r.body.is_empty() {
            JsonValue::Null
        } else {
            parse_lenient(&r.body).map_err(|source| AdminError::Body { addr: leader.clone(), request: name, source })?
        };
        Ok(ElectedMaster { header, unchanged: r.code == response_code::CONTROLLER_MASTER_STILL_EXIST, body })
    }

    /// CLEAN_BROKER_DATA: forget replicas (`ids` `"1;2"`) or a whole broker set (`None`).
    ///
    /// # Errors
    /// Transport failures and refusals (e.g. a replica is alive and `clean_living` is off).
    pub async fn clean_broker_metadata(
        &self,
        addr: &str,
        cluster: Option<&str>,
        broker_name: &str,
        ids: Option<&str>,
        clean_living: bool,
    ) -> Result<(), AdminError> {
        let leader = self.controller_leader(addr).await?;
        let request = RemotingCommand::request(request_code::CLEAN_BROKER_DATA).with_header(
            &CleanControllerBrokerDataRequestHeader {
                cluster_name: cluster.map(str::to_owned),
                broker_name: broker_name.to_owned(),
                broker_controller_ids_to_clean: ids.map(str::to_owned),
                is_clean_living_broker: Some(clean_living),
                invoke_time: None,
            },
        );
        self.call_ok(&leader, request).await.map(|_| ())
    }

    /// GET_CONTROLLER_CONFIG of the node at `addr`.
    ///
    /// # Errors
    /// Transport failures, refusals, a body that is not properties text.
    pub async fn controller_config(&self, addr: &str) -> Result<Vec<(String, String)>, AdminError> {
        self.call_properties(addr, RemotingCommand::request(request_code::GET_CONTROLLER_CONFIG)).await
    }

    /// UPDATE_CONTROLLER_CONFIG: sets `key=value` on the node at `addr`.
    ///
    /// # Errors
    /// Transport failures and refusals (a black-listed key: NO_PERMISSION).
    pub async fn update_controller_config(&self, addr: &str, key: &str, value: &str) -> Result<(), AdminError> {
        let body = format!("{key}={value}\n");
        self.call_ok(addr, RemotingCommand::request(request_code::UPDATE_CONTROLLER_CONFIG).with_body(body))
            .await
            .map(|_| ())
    }

    /// GET_BROKER_EPOCH_CACHE: a controller-mode broker's epochs and max offset. Java:
    /// `MQClientAPIImpl#getBrokerEpochCache`.
    ///
    /// # Errors
    /// Transport failures, refusals (a broker not in controller mode: SYSTEM_ERROR), an
    /// unreadable body, naming `addr`.
    pub async fn broker_epoch_cache(&self, addr: &str) -> Result<ferromq_protocol::body::EpochEntryCache, AdminError> {
        self.call_body(addr, RemotingCommand::request(request_code::GET_BROKER_EPOCH_CACHE)).await
    }
}
