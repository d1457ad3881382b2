//! Access control in front of the broker's processors, and ACL 2.0's admin requests.
//!
//! [`AuthGate`] runs ACL 2.0 (`authenticationEnabled` / `authorizationEnabled`: refusals are
//! NO_PERMISSION, as 5.3 answers) and ACL 1.0 (`aclEnable`: SYSTEM_ERROR, as 4.x answers) for
//! every request from a listener; a refusal is logged once per (account, resource) per minute.
//! In-process connections (the proxy in local mode, which authenticates its own clients)
//! reach the dispatcher directly. The user and ACL store is open whatever the switches, so
//! users can be prepared before authentication is turned on (Java: when a metadata provider
//! is configured).

use std::sync::Arc;

use ferromq_auth::plain::{Denial, PlainAccessValidator};
use ferromq_auth::v2::model::{canonical_subject, Acl, PolicyType, Resource, UserChange, UserType};
use ferromq_auth::v2::{config_json, parse_whitelist, AuthError, AuthMetadata, AuthService, AuthSettings};
use ferromq_auth::DenialLog;
use ferromq_protocol::body::{AclInfo, JsonBody, UserInfo};
use ferromq_protocol::header::{
    AclRequestHeader, DeleteAclRequestHeader, ListAclsRequestHeader, ListUsersRequestHeader, UserRequestHeader,
};
use ferromq_protocol::signature::{SessionCredentials, ACCESS_KEY};
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::{Connection, Dispatcher, HandlerFuture, RequestHandler};
use tracing::{info, warn};

use crate::broker::{Broker, BrokerError};
use crate::config::BrokerSettings;
use crate::processor::{failure, header_or_fail, success};

/// Java's class names FerroMQ's built-in providers stand for (blank means the same).
const KNOWN_PROVIDERS: &[&str] = &[
    "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
    "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
    "org.apache.rocketmq.auth.authentication.strategy.StatelessAuthenticationStrategy",
    "org.apache.rocketmq.auth.authentication.strategy.StatefulAuthenticationStrategy",
    "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
    "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider",
    "org.apache.rocketmq.auth.authorization.strategy.StatelessAuthorizationStrategy",
    "org.apache.rocketmq.auth.authorization.strategy.StatefulAuthorizationStrategy",
];

/// What `broker.conf` says about ACL 2.0, ready to run.
#[derive(Debug)]
pub(crate) struct AuthSetup {
    /// The user and ACL store.
    pub(crate) metadata: Arc<AuthMetadata>,
    /// The checks, when either switch is on.
    pub(crate) service: Option<Arc<AuthService>>,
    /// `innerClientAuthenticationCredentials`: what the broker signs its own requests with.
    pub(crate) inner_credentials: Option<SessionCredentials>,
}

/// Opens the store, creates the configured SUPER users, imports ACL 1.0 accounts when asked.
///
/// # Errors
/// An unknown provider class, an unreadable store, malformed JSON in the user keys.
pub(crate) fn setup(settings: &BrokerSettings) -> Result<AuthSetup, BrokerError> {
    let c = &settings.broker;
    for (key, value) in [
        ("authenticationProvider", &c.authentication_provider),
        ("authenticationMetadataProvider", &c.authentication_metadata_provider),
        ("authenticationStrategy", &c.authentication_strategy),
        ("authorizationProvider", &c.authorization_provider),
        ("authorizationMetadataProvider", &c.authorization_metadata_provider),
        ("authorizationStrategy", &c.authorization_strategy),
    ] {
        let v = value.trim();
        if !v.is_empty() && !KNOWN_PROVIDERS.contains(&v) {
            return Err(BrokerError::Config(format!(
                "{key}={v}: FerroMQ has the built-in (local) providers only; leave {key} empty or set Java's default class"
            )));
        }
    }
    let dir = settings.store.store_path_root_dir.join("config");
    let metadata = Arc::new(AuthMetadata::open(&dir).map_err(|e| BrokerError::Config(format!("ACL 2.0 store: {e}")))?);
    if let Some((user, password)) = config_json::init_user(&c.init_authentication_user).map_err(BrokerError::Config)? {
        metadata.ensure_super_user(&user, &password).map_err(|e| BrokerError::Config(e.to_string()))?;
    }
    let mut inner_credentials = None;
    if let Some((ak, sk)) =
        config_json::inner_credentials(&c.inner_client_authentication_credentials).map_err(BrokerError::Config)?
    {
        metadata.ensure_super_user(&ak, &sk).map_err(|e| BrokerError::Config(e.to_string()))?;
        inner_credentials = Some(SessionCredentials::new(ak, sk));
    }
    if c.migrate_auth_from_v1_enabled {
        let (file, dir) = settings.plain_acl_paths();
        let plain = PlainAccessValidator::load(file, dir)
            .map_err(|e| BrokerError::Config(format!("migrateAuthFromV1Enabled=true: {e}")))?;
        let (_, accounts) = plain.config();
        let added = metadata.import_plain(&accounts).map_err(|e| BrokerError::Config(e.to_string()))?;
        info!(accounts = accounts.len(), added, "ACL 1.0 accounts imported as ACL 2.0 users");
    }
    let service = (c.authentication_enabled || c.authorization_enabled).then(|| {
        if c.authorization_enabled && !c.authentication_enabled {
            warn!("authorizationEnabled without authenticationEnabled: the user a request names is trusted unchecked");
        }
        if c.authentication_enabled && metadata.snapshot().users.is_empty() {
            warn!("authenticationEnabled=true but there is no user: every request will be refused; set initAuthenticationUser");
        }
        info!(authentication = c.authentication_enabled, authorization = c.authorization_enabled, "ACL 2.0 enabled");
        Arc::new(AuthService::new(
            AuthSettings {
                authentication_enabled: c.authentication_enabled,
                authorization_enabled: c.authorization_enabled,
                authentication_whitelist: parse_whitelist(&c.authentication_whitelist),
                authorization_whitelist: parse_whitelist(&c.authorization_whitelist),
                cluster_name: c.broker_cluster_name.clone(),
            },
            metadata.clone(),
        ))
    });
    Ok(AuthSetup { metadata, service, inner_credentials })
}

/// The dispatcher behind ACL 2.0 and ACL 1.0.
pub(crate) struct AuthGate {
    inner: Arc<Dispatcher>,
    v2: Option<Arc<AuthService>>,
    plain: Option<Arc<PlainAccessValidator>>,
    logged: DenialLog,
}

impl std::fmt::Debug for AuthGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthGate").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl AuthGate {
    pub(crate) fn new(
        inner: Arc<Dispatcher>,
        v2: Option<Arc<AuthService>>,
        plain: Option<Arc<PlainAccessValidator>>,
    ) -> Self {
        AuthGate { inner, v2, plain, logged: DenialLog::new() }
    }

    fn refuse(&self, request: &RemotingCommand, code: i32, denial: Denial) -> HandlerFuture {
        let answer = (!request.is_oneway()).then(|| RemotingCommand::response_to(request, code, Some(denial.reason)));
        Box::pin(std::future::ready(answer))
    }
}

impl RequestHandler for AuthGate {
    fn handle(&self, conn: Connection, request: RemotingCommand) -> HandlerFuture {
        let ip = conn.remote_addr().ip();
        if let Some(v2) = &self.v2 {
            if let Err(denial) = v2.check(&request, ip) {
                self.logged.log(&denial, request.code, conn.remote_addr(), "2.0");
                return self.refuse(&request, response_code::NO_PERMISSION, denial);
            }
        }
        if let Some(plain) = &self.plain {
            if let Err(denial) = plain.validate(&request, ip) {
                self.logged.log(&denial, request.code, conn.remote_addr(), "1.0");
                return self.refuse(&request, response_code::SYSTEM_ERROR, denial);
            }
        }
        self.inner.handle(conn, request)
    }

    fn runs_inline(&self, code: i32) -> bool {
        self.inner.runs_inline(code)
    }

    fn on_connection_closed(&self, conn: &Connection) {
        self.inner.on_connection_closed(conn);
    }
}

/// An admin failure as Java answers it: its own refusals NO_PERMISSION, a failed write
/// SYSTEM_ERROR.
fn auth_failure(req: &RemotingCommand, e: &AuthError) -> RemotingCommand {
    match e {
        AuthError::Authentication(m) | AuthError::Authorization(m) => {
            failure(req, response_code::NO_PERMISSION, m.clone())
        }
        AuthError::System(m) => {
            warn!(error = %m, code = req.code, "ACL 2.0 admin request failed");
            failure(
                req,
                response_code::SYSTEM_ERROR,
                format!("An system error occurred, please try again later. ({m})"),
            )
        }
    }
}

impl Broker {
    /// Whether the request's signer is not a SUPER user (an unsigned request counts as SUPER:
    /// authentication is then off, as Java reasons).
    fn not_super_login(&self, req: &RemotingCommand) -> bool {
        match req.ext(ACCESS_KEY).filter(|a| !a.is_empty()) {
            None => false,
            Some(ak) => self.auth.user(ak).is_none_or(|u| u.user_type != UserType::Super),
        }
    }

    fn user_change(req: &RemotingCommand, username: Option<String>) -> Result<UserChange, Box<RemotingCommand>> {
        let Some(username) = username.filter(|u| !u.trim().is_empty()) else {
            return Err(Box::new(failure(req, response_code::INVALID_PARAMETER, "The username is blank")));
        };
        let info = if req.body.is_empty() {
            UserInfo::default()
        } else {
            UserInfo::decode(&req.body)
                .map_err(|e| Box::new(failure(req, response_code::INVALID_PARAMETER, format!("UserInfo body: {e}"))))?
        };
        UserChange::from_info(&info, &username).map_err(|e| Box::new(auth_failure(req, &e)))
    }

    /// AUTH_CREATE_USER (3001).
    pub(crate) fn auth_create_user(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, UserRequestHeader);
        let change = match Self::user_change(req, h.username) {
            Ok(c) => c,
            Err(r) => return *r,
        };
        if change.user_type == Some(UserType::Super) && self.not_super_login(req) {
            return failure(req, response_code::SYSTEM_ERROR, "The super user can only be create by super user");
        }
        match self.auth.create_user(change) {
            Ok(()) => success(req),
            Err(e) => auth_failure(req, &e),
        }
    }

    /// AUTH_UPDATE_USER (3002).
    pub(crate) fn auth_update_user(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, UserRequestHeader);
        let change = match Self::user_change(req, h.username) {
            Ok(c) => c,
            Err(r) => return *r,
        };
        if change.user_type == Some(UserType::Super) && self.not_super_login(req) {
            return failure(req, response_code::SYSTEM_ERROR, "The super user can only be update by super user");
        }
        match self.auth.user(&change.username) {
            None => return failure(req, response_code::NO_PERMISSION, "The user is not exist"),
            Some(old) if old.user_type == UserType::Super && self.not_super_login(req) => {
                return failure(req, response_code::NO_PERMISSION, "The super user can only be update by super user");
            }
            Some(_) => {}
        }
        match self.auth.update_user(change) {
            Ok(()) => success(req),
            Err(e) => auth_failure(req, &e),
        }
    }

    /// AUTH_DELETE_USER (3003): an unknown user is a success, as in Java.
    pub(crate) fn auth_delete_user(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, UserRequestHeader);
        let Some(username) = h.username.filter(|u| !u.trim().is_empty()) else {
            return failure(req, response_code::NO_PERMISSION, "username can not be blank");
        };
        if self.auth.user(&username).is_some_and(|u| u.user_type == UserType::Super) && self.not_super_login(req) {
            return failure(req, response_code::NO_PERMISSION, "The super user can only be update by super user");
        }
        match self.auth.delete_user(&username) {
            Ok(()) => success(req),
            Err(e) => auth_failure(req, &e),
        }
    }

    /// AUTH_GET_USER (3004): the user (password included) or an empty body.
    pub(crate) fn auth_get_user(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, UserRequestHeader);
        let Some(username) = h.username.filter(|u| !u.trim().is_empty()) else {
            return failure(req, response_code::INVALID_PARAMETER, "The username is blank");
        };
        match self.auth.user(&username) {
            Some(u) => success(req).with_body(u.to_info().encode()),
            None => success(req),
        }
    }

    /// AUTH_LIST_USER (3005): users whose name contains the filter; no body when none.
    pub(crate) fn auth_list_users(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, ListUsersRequestHeader);
        let users: Vec<UserInfo> = self.auth.list_users(h.filter.as_deref()).iter().map(|u| u.to_info()).collect();
        if users.is_empty() {
            return success(req);
        }
        success(req).with_body(users.encode())
    }

    fn acl_body(req: &RemotingCommand, subject: Option<String>) -> Result<Acl, Box<RemotingCommand>> {
        let info = if req.body.is_empty() {
            None
        } else {
            Some(
                AclInfo::decode(&req.body)
                    .map_err(|e| failure(req, response_code::INVALID_PARAMETER, format!("AclInfo body: {e}")))?,
            )
        };
        let Some(info) = info.filter(|i| !i.policies.is_empty()) else {
            return Err(Box::new(failure(req, response_code::NO_PERMISSION, "The body of acl is null")));
        };
        Acl::from_info(&info, subject.as_deref()).map_err(|e| Box::new(auth_failure(req, &e)))
    }

    /// AUTH_CREATE_ACL (3006) and AUTH_UPDATE_ACL (3007): both create or merge, as in Java.
    pub(crate) fn auth_upsert_acl(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, AclRequestHeader);
        let acl = match Self::acl_body(req, h.subject) {
            Ok(a) => a,
            Err(r) => return *r,
        };
        match self.auth.upsert_acl(acl) {
            Ok(()) => success(req),
            Err(e) => auth_failure(req, &e),
        }
    }

    /// AUTH_DELETE_ACL (3008).
    pub(crate) fn auth_delete_acl(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, DeleteAclRequestHeader);
        let Some(subject) = h.subject.filter(|s| !s.trim().is_empty()) else {
            return failure(req, response_code::NO_PERMISSION, "The subject is null.");
        };
        let policy_type = h.policy_type.as_deref().and_then(PolicyType::parse).unwrap_or(PolicyType::Custom);
        let resource = match h.resource.as_deref().filter(|r| !r.trim().is_empty()) {
            None => None,
            Some(r) => match Resource::parse(r) {
                Some(r) => Some(r),
                None => return failure(req, response_code::NO_PERMISSION, format!("The resource {r} is invalid.")),
            },
        };
        match self.auth.delete_acl(&subject, policy_type, resource.as_ref()) {
            Ok(()) => success(req),
            Err(e) => auth_failure(req, &e),
        }
    }

    /// AUTH_GET_ACL (3009): the ACL, or an empty body.
    pub(crate) fn auth_get_acl(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, AclRequestHeader);
        let subject = canonical_subject(h.subject.as_deref().unwrap_or_default());
        match self.auth.acl(&subject) {
            Ok(Some(acl)) => success(req).with_body(acl.to_info().encode()),
            Ok(None) => success(req),
            Err(e) => auth_failure(req, &e),
        }
    }

    /// AUTH_LIST_ACL (3010).
    pub(crate) fn auth_list_acls(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, ListAclsRequestHeader);
        let acls: Vec<AclInfo> = self
            .auth
            .list_acls(h.subject_filter.as_deref(), h.resource_filter.as_deref())
            .iter()
            .map(Acl::to_info)
            .collect();
        if acls.is_empty() {
            return success(req);
        }
        success(req).with_body(acls.encode())
    }
}
