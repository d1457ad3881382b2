//! ACL 1.0's files kept current and its 4.x admin requests (codes 50-54). The check itself runs
//! in `auth::AuthGate`.

use std::sync::Arc;
use std::time::Duration;

use ferromq_auth::plain::{AccountUpdate, PlainAccessValidator};
use ferromq_protocol::body::{AclConfig, JsonBody, PlainAccessConfigBody};
use ferromq_protocol::header::{
    CreateAccessConfigRequestHeader, DeleteAccessConfigRequestHeader, GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
};
use ferromq_protocol::{response_code, RemotingCommand};
use tracing::error;

use crate::broker::Broker;
use crate::processor::{failure, header_or_fail, success};

/// How often the ACL files are checked for changes (Java's file watcher: 500 ms).
pub(crate) const ACL_RELOAD_PERIOD: Duration = Duration::from_millis(500);

/// Checks the ACL files every [`ACL_RELOAD_PERIOD`] until the validator is dropped elsewhere.
pub(crate) async fn watch_files(validator: Arc<PlainAccessValidator>) {
    let mut tick = tokio::time::interval(ACL_RELOAD_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let v = validator.clone();
        // File reads off the runtime's worker threads.
        match tokio::task::spawn_blocking(move || v.reload_if_changed()).await {
            Ok(Err(e)) => {
                error!(error = %e, "ACL files changed but cannot be loaded; the previous rules stay in force")
            }
            Ok(Ok(_)) => {}
            Err(e) => error!(error = %e, "ACL reload task failed"),
        }
    }
}

fn acl_disabled(req: &RemotingCommand) -> RemotingCommand {
    failure(req, response_code::SYSTEM_ERROR, "ACL is not enabled on this broker; set aclEnable=true in broker.conf")
}

fn split_list(text: Option<String>) -> Option<Vec<String>> {
    text.map(|t| t.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
}

impl Broker {
    /// UPDATE_AND_CREATE_ACL_CONFIG (50).
    pub(crate) fn update_acl_config(&self, req: &RemotingCommand) -> RemotingCommand {
        let Some(acl) = &self.acl else {
            return acl_disabled(req);
        };
        let h = header_or_fail!(req, CreateAccessConfigRequestHeader);
        let update = AccountUpdate {
            access_key: h.access_key,
            secret_key: h.secret_key.filter(|s| !s.is_empty()),
            white_remote_address: h.white_remote_address,
            admin: h.admin.unwrap_or(false),
            default_topic_perm: h.default_topic_perm,
            default_group_perm: h.default_group_perm,
            topic_perms: split_list(h.topic_perms),
            group_perms: split_list(h.group_perms),
        };
        match acl.update_account(update) {
            Ok(()) => success(req),
            Err(e) => failure(req, response_code::SYSTEM_ERROR, e.to_string()),
        }
    }

    /// DELETE_ACL_CONFIG (51).
    pub(crate) fn delete_acl_config(&self, req: &RemotingCommand) -> RemotingCommand {
        let Some(acl) = &self.acl else {
            return acl_disabled(req);
        };
        let h = header_or_fail!(req, DeleteAccessConfigRequestHeader);
        match acl.delete_account(&h.access_key) {
            Ok(()) => success(req),
            Err(e) => failure(req, response_code::SYSTEM_ERROR, e.to_string()),
        }
    }

    /// GET_BROKER_CLUSTER_ACL_INFO (52).
    pub(crate) fn get_broker_acl_info(&self, req: &RemotingCommand) -> RemotingCommand {
        let Some(acl) = &self.acl else {
            return acl_disabled(req);
        };
        let versions = acl.data_versions();
        let header = GetBrokerAclConfigResponseHeader {
            version: Some(String::from_utf8_lossy(&acl.default_data_version().encode()).into_owned()),
            all_acl_file_version: serde_json::to_string(&versions).ok(),
            broker_name: Some(self.config.broker_name.clone()),
            broker_addr: Some(self.config.broker_addr()),
            cluster_name: Some(self.config.broker_cluster_name.clone()),
        };
        success(req).with_header(&header)
    }

    /// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53).
    pub(crate) fn update_global_white_addrs(&self, req: &RemotingCommand) -> RemotingCommand {
        let Some(acl) = &self.acl else {
            return acl_disabled(req);
        };
        let h = header_or_fail!(req, UpdateGlobalWhiteAddrsConfigRequestHeader);
        let addrs = split_list(Some(h.global_white_addrs)).unwrap_or_default();
        match acl.update_global_white_addrs(addrs, h.acl_file_full_path.as_deref()) {
            Ok(()) => success(req),
            Err(e) => failure(req, response_code::SYSTEM_ERROR, e.to_string()),
        }
    }

    /// GET_BROKER_CLUSTER_ACL_CONFIG (54): every account with its secret key; admin only.
    pub(crate) fn get_broker_acl_config(&self, req: &RemotingCommand) -> RemotingCommand {
        let Some(acl) = &self.acl else {
            return acl_disabled(req);
        };
        let (global_white_addrs, accounts) = acl.config();
        let body = AclConfig {
            global_white_addrs,
            plain_access_configs: accounts
                .into_iter()
                .map(|a| PlainAccessConfigBody {
                    access_key: a.access_key,
                    secret_key: a.secret_key,
                    white_remote_address: a.white_remote_address,
                    admin: a.admin,
                    default_topic_perm: a.default_topic_perm,
                    default_group_perm: a.default_group_perm,
                    topic_perms: a.topic_perms,
                    group_perms: a.group_perms,
                })
                .collect(),
        };
        success(req).with_body(body.encode())
    }
}
