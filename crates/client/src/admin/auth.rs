//! ACL 2.0's admin requests (5.3 codes 3001-3010): users and ACLs of a broker. Java:
//! `MQClientAPIImpl#createUser` and siblings. The broker answers NO_PERMISSION with its reason
//! for refused changes.

use ferromq_protocol::body::{AclInfo, JsonBody, UserInfo};
use ferromq_protocol::header::{
    AclRequestHeader, DeleteAclRequestHeader, ListAclsRequestHeader, ListUsersRequestHeader, UserRequestHeader,
};
use ferromq_protocol::{request_code, RemotingCommand};

use crate::admin::client::{code_name, AdminClient};
use crate::admin::error::AdminError;

impl AdminClient {
    async fn user_call(
        &self,
        addr: &str,
        code: i32,
        username: &str,
        body: Option<&UserInfo>,
    ) -> Result<RemotingCommand, AdminError> {
        let mut request =
            RemotingCommand::request(code).with_header(&UserRequestHeader { username: Some(username.to_owned()) });
        if let Some(body) = body {
            request = request.with_body(body.encode());
        }
        self.call_ok(addr, request).await
    }

    /// AUTH_CREATE_USER.
    ///
    /// # Errors
    /// Transport failures and refusals, naming `addr`.
    pub async fn create_user(&self, addr: &str, user: &UserInfo) -> Result<(), AdminError> {
        let name = user.username.clone().unwrap_or_default();
        self.user_call(addr, request_code::AUTH_CREATE_USER, &name, Some(user)).await.map(drop)
    }

    /// AUTH_UPDATE_USER: the fields given change.
    ///
    /// # Errors
    /// Transport failures and refusals, naming `addr`.
    pub async fn update_user(&self, addr: &str, user: &UserInfo) -> Result<(), AdminError> {
        let name = user.username.clone().unwrap_or_default();
        self.user_call(addr, request_code::AUTH_UPDATE_USER, &name, Some(user)).await.map(drop)
    }

    /// AUTH_DELETE_USER (and the user's ACL).
    ///
    /// # Errors
    /// Transport failures and refusals, naming `addr`.
    pub async fn delete_user(&self, addr: &str, username: &str) -> Result<(), AdminError> {
        self.user_call(addr, request_code::AUTH_DELETE_USER, username, None).await.map(drop)
    }

    /// AUTH_GET_USER: the user, password included; `None` when there is none.
    ///
    /// # Errors
    /// Transport failures, refusals and bodies that do not parse, naming `addr`.
    pub async fn get_user(&self, addr: &str, username: &str) -> Result<Option<UserInfo>, AdminError> {
        let response = self.user_call(addr, request_code::AUTH_GET_USER, username, None).await?;
        decode_optional(addr, request_code::AUTH_GET_USER, &response.body)
    }

    /// AUTH_LIST_USER: users whose name contains `filter`.
    ///
    /// # Errors
    /// Transport failures, refusals and bodies that do not parse, naming `addr`.
    pub async fn list_users(&self, addr: &str, filter: Option<&str>) -> Result<Vec<UserInfo>, AdminError> {
        let header = ListUsersRequestHeader { filter: filter.map(str::to_owned) };
        let response =
            self.call_ok(addr, RemotingCommand::request(request_code::AUTH_LIST_USER).with_header(&header)).await?;
        Ok(decode_optional(addr, request_code::AUTH_LIST_USER, &response.body)?.unwrap_or_default())
    }

    /// AUTH_CREATE_ACL (`update` false) or AUTH_UPDATE_ACL: the policies are merged into the
    /// subject's ACL.
    ///
    /// # Errors
    /// Transport failures and refusals, naming `addr`.
    pub async fn put_acl(&self, addr: &str, acl: &AclInfo, update: bool) -> Result<(), AdminError> {
        let code = if update { request_code::AUTH_UPDATE_ACL } else { request_code::AUTH_CREATE_ACL };
        let header = AclRequestHeader { subject: acl.subject.clone() };
        self.call_ok(addr, RemotingCommand::request(code).with_header(&header).with_body(acl.encode())).await.map(drop)
    }

    /// AUTH_DELETE_ACL: the subject's ACL, or one resource's entry of a policy.
    ///
    /// # Errors
    /// Transport failures and refusals, naming `addr`.
    pub async fn delete_acl(
        &self,
        addr: &str,
        subject: &str,
        policy_type: Option<&str>,
        resource: Option<&str>,
    ) -> Result<(), AdminError> {
        let header = DeleteAclRequestHeader {
            subject: Some(subject.to_owned()),
            policy_type: policy_type.map(str::to_owned),
            resource: resource.map(str::to_owned),
        };
        self.call_ok(addr, RemotingCommand::request(request_code::AUTH_DELETE_ACL).with_header(&header)).await.map(drop)
    }

    /// AUTH_GET_ACL.
    ///
    /// # Errors
    /// Transport failures, refusals and bodies that do not parse, naming `addr`.
    pub async fn get_acl(&self, addr: &str, subject: &str) -> Result<Option<AclInfo>, AdminError> {
        let header = AclRequestHeader { subject: Some(subject.to_owned()) };
        let response =
            self.call_ok(addr, RemotingCommand::request(request_code::AUTH_GET_ACL).with_header(&header)).await?;
        decode_optional(addr, request_code::AUTH_GET_ACL, &response.body)
    }

    /// AUTH_LIST_ACL.
    ///
    /// # Errors
    /// Transport failures, refusals and bodies that do not parse, naming `addr`.
    pub async fn list_acls(
        &self,
        addr: &str,
        subject: Option<&str>,
        resource: Option<&str>,
    ) -> Result<Vec<AclInfo>, AdminError> {
        let header = ListAclsRequestHeader {
            subject_filter: subject.map(str::to_owned),
            resource_filter: resource.map(str::to_owned),
        };
        let response =
            self.call_ok(addr, RemotingCommand::request(request_code::AUTH_LIST_ACL).with_header(&header)).await?;
        Ok(decode_optional(addr, request_code::AUTH_LIST_ACL, &response.body)?.unwrap_or_default())
    }
}

/// A body that Java leaves out when there is nothing to say.
fn decode_optional<B: JsonBody>(addr: &str, code: i32, body: &[u8]) -> Result<Option<B>, AdminError> {
    if body.is_empty() {
        return Ok(None);
    }
    B::decode(body).map(Some).map_err(|source| AdminError::Body {
        addr: addr.to_owned(),
        request: code_name(code),
        source,
    })
}
