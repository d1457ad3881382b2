//! ACL 1.0's admin requests (4.x codes 50-54): accounts and global white addresses of a
//! broker's `plain_acl.yml`. Java: `MQClientAPIImpl#createPlainAccessConfig` and siblings.

use ferromq_protocol::body::AclConfig;
use ferromq_protocol::header::{
    CreateAccessConfigRequestHeader, DeleteAccessConfigRequestHeader, GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
};
use ferromq_protocol::{request_code, RemotingCommand};

use crate::admin::client::{code_name, decode_header, AdminClient};
use crate::admin::error::AdminError;

impl AdminClient {
    /// UPDATE_AND_CREATE_ACL_CONFIG: creates the account or changes the fields given.
    ///
    /// # Errors
    /// Transport failures and refusals, naming `addr`.
    pub async fn update_acl_config(
        &self,
        addr: &str,
        account: &CreateAccessConfigRequestHeader,
    ) -> Result<(), AdminError> {
        let request = RemotingCommand::request(request_code::UPDATE_AND_CREATE_ACL_CONFIG).with_header(account);
        self.call_ok(addr, request).await.map(drop)
    }

    /// DELETE_ACL_CONFIG.
    ///
    /// # Errors
    /// Transport failures and refusals, naming `addr`.
    pub async fn delete_acl_config(&self, addr: &str, access_key: &str) -> Result<(), AdminError> {
        let header = DeleteAccessConfigRequestHeader { access_key: access_key.to_owned() };
        let request = RemotingCommand::request(request_code::DELETE_ACL_CONFIG).with_header(&header);
        self.call_ok(addr, request).await.map(drop)
    }

    /// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: replaces the global white addresses of one ACL file
    /// (the broker's default file when `acl_file` is `None`).
    ///
    /// # Errors
    /// Transport failures and refusals, naming `addr`.
    pub async fn update_global_white_addrs(
        &self,
        addr: &str,
        addrs: &[String],
        acl_file: Option<&str>,
    ) -> Result<(), AdminError> {
        let header = UpdateGlobalWhiteAddrsConfigRequestHeader {
            global_white_addrs: addrs.join(","),
            acl_file_full_path: acl_file.map(str::to_owned),
        };
        let request = RemotingCommand::request(request_code::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG).with_header(&header);
        self.call_ok(addr, request).await.map(drop)
    }

    /// GET_BROKER_CLUSTER_ACL_INFO: the data versions of the broker's ACL files.
    ///
    /// # Errors
    /// Transport failures and refusals, naming `addr`.
    pub async fn acl_versions(&self, addr: &str) -> Result<GetBrokerAclConfigResponseHeader, AdminError> {
        let request = RemotingCommand::request(request_code::GET_BROKER_CLUSTER_ACL_INFO);
        let response = self.call_ok(addr, request).await?;
        decode_header(addr, code_name(request_code::GET_BROKER_CLUSTER_ACL_INFO), &response)
    }

    /// GET_BROKER_CLUSTER_ACL_CONFIG: every account (secret keys included) and global white
    /// address; admin accounts only.
    ///
    /// # Errors
    /// Transport failures and refusals, naming `addr`.
    pub async fn acl_config(&self, addr: &str) -> Result<AclConfig, AdminError> {
        self.call_body(addr, RemotingCommand::request(request_code::GET_BROKER_CLUSTER_ACL_CONFIG)).await
    }
}
