//! The cluster proxy's copy of the brokers' users and ACLs (Java:
//! `ProxyAuthenticationMetadataProvider` and `ProxyAuthorizationMetadataProvider`, which ask a
//! broker per user with AUTH_GET_USER / AUTH_GET_ACL and cache the answers).
//!
//! FerroMQ copies everything instead: every `userCacheRefreshSecond` (or
//! `aclCacheRefreshSecond`, the shorter) it asks the masters of `rocketMQClusterName`, in
//! broker-name order, for AUTH_LIST_USER (3005) and AUTH_LIST_ACL (3010), and the first master
//! answering both replaces the in-memory copy the proxy's `AuthService` reads. A call is then
//! decided without a broker round trip, and a flood of invented user names cannot turn into a
//! flood of broker requests. The requests are signed with `innerClientAuthenticationCredentials`
//! (by the proxy's broker connections), so that user must be SUPER on the brokers.
//!
//! When no broker answers, the last good copy stays in use (and a warning says so once it is
//! older than `userCacheExpiredSecond`), and the round is tried again within
//! [`RETRY_AFTER_FAILURE`]. Until a first copy arrives the proxy knows no user, so every call
//! that must be authenticated or authorized is refused: never open by default.
//!
//! Not here: the decision (`ferromq_auth::v2::AuthService`); the users and ACLs must be the
//! same on every master (the admin CLI's `-c <cluster>` does that), as Java's proxy assumes.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ferromq_auth::v2::{AuthMetadata, AuthService, Snapshot};
use ferromq_config::error_chain;
use ferromq_protocol::body::{AclInfo, JsonBody, UserInfo};
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::config::ProxyAuthConfig;
use crate::proxy::Proxy;
use crate::status::ProxyError;

/// Time allowed for one list request to a broker.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// The longest wait before a failed round is tried again.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(3);

/// Why a round got no copy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// No name server told the masters of the cluster.
    #[error("cannot learn the masters of cluster {cluster} from the name servers: {source}")]
    NameServer {
        /// `rocketMQClusterName`.
        cluster: String,
        /// The last name server's failure.
        #[source]
        source: ProxyError,
    },
    /// The name servers know no master of the cluster.
    #[error("no master of cluster {cluster} is registered with the name servers (rocketMQClusterName)")]
    NoMaster {
        /// `rocketMQClusterName`.
        cluster: String,
    },
    /// A master could not be reached.
    #[error("broker {broker_name} ({addr}) did not answer request code {request_code}: {source}")]
    Unreachable {
        /// The broker group.
        broker_name: String,
        /// Its master's address.
        addr: String,
        /// AUTH_LIST_USER or AUTH_LIST_ACL.
        request_code: i32,
        /// The transport failure.
        #[source]
        source: ProxyError,
    },
    /// A master refused (NO_PERMISSION: the proxy's user is not SUPER there, or unsigned).
    #[error("broker {broker_name} ({addr}) refused request code {request_code} with code {code}: {remark}")]
    Refused {
        /// The broker group.
        broker_name: String,
        /// Its master's address.
        addr: String,
        /// AUTH_LIST_USER or AUTH_LIST_ACL.
        request_code: i32,
        /// The response code.
        code: i32,
        /// The broker's remark.
        remark: String,
    },
    /// A master's lists do not read as users and ACLs.
    #[error("broker {broker_name} ({addr}) sent users or ACLs that do not read: {reason}")]
    Body {
        /// The broker group.
        broker_name: String,
        /// Its master's address.
        addr: String,
        /// What is wrong.
        reason: String,
    },
}

/// Turns ACL 2.0 on for a cluster proxy when `config` asks for it: an in-memory copy of the
/// brokers' users and ACLs behind `proxy.auth`, and the task keeping it up to date (owned by
/// the caller, which aborts it at shutdown). `None` when both switches are off.
pub fn start(proxy: &Arc<Proxy>, config: &ProxyAuthConfig) -> Option<JoinHandle<()>> {
    if !config.enabled() {
        return None;
    }
    let metadata = Arc::new(AuthMetadata::in_memory(Snapshot::default()));
    let service = Arc::new(AuthService::new(config.settings.clone(), metadata.clone()));
    if proxy.auth.set(service).is_err() {
        warn!("the proxy's ACL 2.0 was set already; the cluster copy of users and ACLs is not started");
        return None;
    }
    info!(
        authentication = config.settings.authentication_enabled,
        authorization = config.settings.authorization_enabled,
        inner_user = config.inner_credentials.as_ref().map_or("", |c| c.access_key.as_str()),
        refresh_s = config.refresh.as_secs(),
        cluster = %config.settings.cluster_name,
        "proxy ACL 2.0 enabled: users and ACLs are read from the cluster's masters; every checked call is refused \
         until the first copy arrives"
    );
    Some(tokio::spawn(run(Arc::downgrade(proxy), metadata, config.refresh, config.stale_after)))
}

/// Copies the users and ACLs every `every` until the proxy is dropped (or the task aborted).
/// The first round runs at once; a failed round is tried again after at most
/// [`RETRY_AFTER_FAILURE`] (a proxy started with its cluster must not refuse everyone for a
/// whole period because the brokers had not registered yet).
pub async fn run(proxy: Weak<Proxy>, metadata: Arc<AuthMetadata>, every: Duration, stale_after: Duration) {
    let mut freshness = Freshness::new();
    let mut pause = Duration::ZERO;
    loop {
        // Counted from the end of a round, which can outlast the period (name server, then
        // brokers, each up to its timeout): rounds never come in a burst.
        tokio::time::sleep(pause).await;
        pause = every;
        let Some(p) = proxy.upgrade() else { return };
        let outcome = fetch(&p).await;
        drop(p);
        let now = Instant::now();
        match outcome {
            Ok(copy) => {
                let (users, acls) = (copy.snapshot.users.len(), copy.snapshot.acls.len());
                // In memory: replacing cannot fail on a write.
                let changed = metadata.replace_all(copy.snapshot).unwrap_or(true);
                match freshness.succeeded(now) {
                    Recovery::First => {
                        info!(broker_name = %copy.broker_name, users, acls, "proxy read the users and ACLs")
                    }
                    Recovery::AfterFailures { failed_for } => info!(broker_name = %copy.broker_name, users, acls,
                        failed_for_s = failed_for.as_secs(), "proxy reads the users and ACLs again"),
                    Recovery::Steady if changed => info!(broker_name = %copy.broker_name, users, acls,
                        "proxy's copy of the users and ACLs changed"),
                    Recovery::Steady => debug!(broker_name = %copy.broker_name, "users and ACLs unchanged"),
                }
            }
            Err(e) => {
                pause = every.min(RETRY_AFTER_FAILURE);
                let error = error_chain(&e);
                match freshness.failed(now, stale_after, &error) {
                    Failure::First { ever_succeeded: false } => warn!(error,
                        "proxy cannot read the users and ACLs from the brokers; every checked call is refused until it can"),
                    Failure::First { ever_succeeded: true } => warn!(error,
                        "proxy cannot read the users and ACLs from the brokers; deciding with the last copy"),
                    Failure::Changed => warn!(error, "proxy still cannot read the users and ACLs, now for this reason"),
                    Failure::BecameStale { age } => warn!(error, age_s = age.as_secs(),
                        "proxy's copy of the users and ACLs is older than userCacheExpiredSecond; still deciding with it"),
                    Failure::Again => debug!(error, "users and ACLs still unreadable; retrying next round"),
                }
            }
        }
    }
}

/// One master's users and ACLs.
struct MasterCopy {
    broker_name: String,
    snapshot: Snapshot,
}

/// The first master of the cluster, in broker-name order, that answers both lists.
async fn fetch(p: &Proxy) -> Result<MasterCopy, FetchError> {
    let cluster = p.config.rocketmq_cluster_name.clone();
    let masters = p
        .brokers
        .cluster_masters(&cluster)
        .await
        .map_err(|source| FetchError::NameServer { cluster: cluster.clone(), source })?;
    let mut last = FetchError::NoMaster { cluster };
    for (broker_name, addr) in masters {
        match fetch_from(p, &broker_name, &addr).await {
            Ok(snapshot) => return Ok(MasterCopy { broker_name, snapshot }),
            Err(e) => {
                debug!(broker_name, addr, error = %e, "users and ACLs not read from this master; trying the next");
                last = e;
            }
        }
    }
    Err(last)
}

async fn fetch_from(p: &Proxy, broker_name: &str, addr: &str) -> Result<Snapshot, FetchError> {
    let users: Vec<UserInfo> = list(p, broker_name, addr, request_code::AUTH_LIST_USER).await?;
    let acls: Vec<AclInfo> = list(p, broker_name, addr, request_code::AUTH_LIST_ACL).await?;
    Snapshot::from_infos(users, acls).map_err(|e| FetchError::Body {
        broker_name: broker_name.to_owned(),
        addr: addr.to_owned(),
        reason: e.to_string(),
    })
}

/// The list a master answers `code` (no filter) with; Java answers an empty list without body.
async fn list<T>(p: &Proxy, broker_name: &str, addr: &str, code: i32) -> Result<Vec<T>, FetchError>
where
    Vec<T>: JsonBody,
{
    let resp =
        p.brokers.invoke(addr, RemotingCommand::request(code), Some(REQUEST_TIMEOUT)).await.map_err(|source| {
            FetchError::Unreachable {
                broker_name: broker_name.to_owned(),
                addr: addr.to_owned(),
                request_code: code,
                source,
            }
        })?;
    if resp.code != response_code::SUCCESS {
        return Err(FetchError::Refused {
            broker_name: broker_name.to_owned(),
            addr: addr.to_owned(),
            request_code: code,
            code: resp.code,
            remark: resp.remark.unwrap_or_default(),
        });
    }
    if resp.body.is_empty() {
        return Ok(Vec::new());
    }
    <Vec<T>>::decode(&resp.body).map_err(|e| FetchError::Body {
        broker_name: broker_name.to_owned(),
        addr: addr.to_owned(),
        reason: e.to_string(),
    })
}

/// How a success follows the rounds before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recovery {
    /// The first copy.
    First,
    /// The first copy after failed rounds, failing since `failed_for`.
    AfterFailures { failed_for: Duration },
    /// Another success.
    Steady,
}

/// How a failure follows the rounds before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// The first of a run of failures.
    First { ever_succeeded: bool },
    /// A failure for another reason than the one before.
    Changed,
    /// The copy just got older than the stale age.
    BecameStale { age: Duration },
    /// Another failure.
    Again,
}

/// The copy's age and the run of failures: what decides how loudly a round is logged.
#[derive(Debug)]
struct Freshness {
    last_success: Option<Instant>,
    failing_since: Option<Instant>,
    /// The text of the last failure of the current run.
    last_error: String,
    stale_reported: bool,
}

impl Freshness {
    fn new() -> Self {
        Freshness { last_success: None, failing_since: None, last_error: String::new(), stale_reported: false }
    }

    fn succeeded(&mut self, now: Instant) -> Recovery {
        let first = self.last_success.is_none();
        self.last_success = Some(now);
        self.stale_reported = false;
        match self.failing_since.take() {
            _ if first => Recovery::First,
            Some(since) => Recovery::AfterFailures { failed_for: now.duration_since(since) },
            None => Recovery::Steady,
        }
    }

    fn failed(&mut self, now: Instant, stale_after: Duration, error: &str) -> Failure {
        let same_error = std::mem::replace(&mut self.last_error, error.to_owned()) == error;
        if self.failing_since.is_none() {
            self.failing_since = Some(now);
            return Failure::First { ever_succeeded: self.last_success.is_some() };
        }
        if let Some(last) = self.last_success {
            let age = now.duration_since(last);
            if age >= stale_after && !self.stale_reported {
                self.stale_reported = true;
                return Failure::BecameStale { age };
            }
        }
        if same_error {
            Failure::Again
        } else {
            Failure::Changed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_loud_once_and_staleness_once() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let stale = Duration::from_secs(100);
        let mut f = Freshness::new();
        let e = "broker refused";
        assert_eq!(f.failed(s(0), stale, e), Failure::First { ever_succeeded: false });
        assert_eq!(f.failed(s(200), stale, e), Failure::Again, "never read: nothing to be stale");
        assert_eq!(f.failed(s(201), stale, "no master"), Failure::Changed, "another reason is told");
        assert_eq!(f.failed(s(202), stale, "no master"), Failure::Again);
        assert_eq!(f.succeeded(s(203)), Recovery::First);
        assert_eq!(f.succeeded(s(204)), Recovery::Steady);
        assert_eq!(f.failed(s(210), stale, e), Failure::First { ever_succeeded: true });
        assert_eq!(f.failed(s(250), stale, e), Failure::Again);
        assert_eq!(f.failed(s(304), stale, e), Failure::BecameStale { age: Duration::from_secs(100) });
        assert_eq!(f.failed(s(400), stale, e), Failure::Again, "stale is reported once");
        assert_eq!(f.succeeded(s(401)), Recovery::AfterFailures { failed_for: Duration::from_secs(191) });
        assert_eq!(f.failed(s(402), stale, e), Failure::First { ever_succeeded: true });
    }
}
