//! Who may change the name server's tables when ACL is on: broker registrations and operator
//! changes (the codes [`crate::address_gate`] lists) must be signed by an account allowed to.
//!
//! * ACL 2.0 (`authenticationEnabled` / `authorizationEnabled`): a user of `authConfigPath`
//!   (`users.json`, `acls.json`; reread when they change) whose signature verifies, and who is
//!   SUPER or has a policy allowing the request's action on its cluster (`Cluster:<name>`, or
//!   `Cluster:*` for what names no cluster). Refusals are NO_PERMISSION, as 5.3 answers.
//! * ACL 1.0 (`aclEnable`): an admin account of `plain_acl.yml`, or a global white address
//!   (how 4.x brokers, which do not sign, keep registering). Refusals are SYSTEM_ERROR.
//!
//! Route queries and other reads stay open, as on Java's name server, which checks nothing:
//! every client would otherwise need an account here as well as on the brokers. See
//! docs/decisions/0020-name-server-and-ha-authentication.md.

use std::collections::HashSet;
use std::sync::Arc;

use ferromq_auth::plain::{Denial, PlainAccessValidator};
use ferromq_auth::v2::{AuthService, AuthSettings};
use ferromq_auth::DenialLog;
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::{Connection, HandlerFuture, RequestHandler};

use crate::address_gate::{ADMIN_CODES, BROKER_CODES};

/// The settings of the ACL 2.0 checks on the name server: both on, no whitelist, and `*` as
/// the cluster of requests that name none (the name server serves every cluster).
pub(crate) fn v2_settings() -> AuthSettings {
    AuthSettings {
        authentication_enabled: true,
        authorization_enabled: true,
        authentication_whitelist: HashSet::new(),
        authorization_whitelist: HashSet::new(),
        cluster_name: "*".to_owned(),
    }
}

/// The name server's dispatcher behind ACL 2.0 and ACL 1.0 for writing requests.
pub(crate) struct AuthGate {
    inner: Arc<dyn RequestHandler>,
    v2: Option<Arc<AuthService>>,
    plain: Option<Arc<PlainAccessValidator>>,
    log: DenialLog,
}

impl std::fmt::Debug for AuthGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthGate").field("v2", &self.v2.is_some()).field("plain", &self.plain.is_some()).finish()
    }
}

impl AuthGate {
    pub(crate) fn new(
        inner: Arc<dyn RequestHandler>,
        v2: Option<Arc<AuthService>>,
        plain: Option<Arc<PlainAccessValidator>>,
    ) -> Self {
        AuthGate { inner, v2, plain, log: DenialLog::new() }
    }

    fn refuse(
        &self,
        conn: &Connection,
        request: &RemotingCommand,
        code: i32,
        denial: Denial,
        acl: &'static str,
    ) -> HandlerFuture {
        self.log.log(&denial, request.code, conn.remote_addr(), acl);
        let answer = (!request.is_oneway()).then(|| RemotingCommand::response_to(request, code, Some(denial.reason)));
        Box::pin(std::future::ready(answer))
    }
}

impl RequestHandler for AuthGate {
    fn handle(&self, conn: Connection, request: RemotingCommand) -> HandlerFuture {
        if !BROKER_CODES.contains(&request.code) && !ADMIN_CODES.contains(&request.code) {
            return self.inner.handle(conn, request);
        }
        let ip = conn.remote_addr().ip();
        // A refusal is checked again against the files as they are now: the periodic reload
        // may not have seen a user created a moment ago (in `ferromq standalone` the broker
        // writes its first user while its first registration is on the way here).
        if let Some(v2) = &self.v2 {
            let checked = v2.check(&request, ip).or_else(|_| {
                if let Err(e) = v2.metadata().reload_if_changed() {
                    tracing::error!(error = %e, "ACL 2.0 users or ACLs changed but cannot be read; the previous ones stay in force");
                }
                v2.check(&request, ip)
            });
            if let Err(denial) = checked {
                return self.refuse(&conn, &request, response_code::NO_PERMISSION, denial, "2.0");
            }
        }
        if let Some(plain) = &self.plain {
            let checked = plain.validate(&request, ip).or_else(|_| {
                if let Err(e) = plain.reload_if_changed() {
                    tracing::error!(error = %e, "ACL files changed but cannot be loaded; the previous rules stay in force");
                }
                plain.validate(&request, ip)
            });
            if let Err(denial) = checked {
                return self.refuse(&conn, &request, response_code::SYSTEM_ERROR, denial, "1.0");
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
