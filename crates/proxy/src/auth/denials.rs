//! The log of ACL 2.0 refusals: one `warn` per (user, resource) a minute, so a client retrying
//! a refused call, or a flood of invented user names, does not flood the log.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ferromq_auth::plain::Denial;
use tracing::warn;

/// How often one (user, resource) refusal is logged.
pub const DENIAL_LOG_PERIOD: Duration = Duration::from_secs(60);
/// Distinct (user, resource) pairs remembered; past it the memory starts over.
pub const DENIAL_LOG_KEYS_MAX: usize = 10_000;

/// (user, resource) of a refusal.
type DenialKey = (Option<String>, Option<String>);

/// When each (user, resource) refusal was last logged.
#[derive(Debug, Default)]
pub struct DenialLog {
    logged: Mutex<HashMap<DenialKey, Instant>>,
}

impl DenialLog {
    /// Whether a refusal of `denial`'s (user, resource) at `now` is to be logged, noting it.
    fn due(&self, denial: &Denial, now: Instant) -> bool {
        let key = (denial.access_key.clone(), denial.resource.clone());
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        if logged.get(&key).is_some_and(|at| now.duration_since(*at) < DENIAL_LOG_PERIOD) {
            return false;
        }
        if logged.len() >= DENIAL_LOG_KEYS_MAX {
            logged.clear();
        }
        logged.insert(key, now);
        true
    }

    /// Logs a refusal of `request` (a remoting request code or a gRPC request name) from
    /// `remote`, unless the same user and resource were logged within [`DENIAL_LOG_PERIOD`].
    pub fn refused(&self, denial: &Denial, remote: IpAddr, request: &str) {
        if self.due(denial, Instant::now()) {
            warn!(remote_addr = %remote, request, access_key = denial.access_key.as_deref().unwrap_or(""),
                resource = denial.resource.as_deref().unwrap_or(""), reason = %denial.reason,
                "proxy refused a request (ACL 2.0; logged once a minute per user and resource)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(user: &str, resource: &str) -> Denial {
        Denial { reason: "no".into(), access_key: Some(user.into()), resource: Some(resource.into()) }
    }

    #[test]
    fn one_line_per_user_and_resource_a_minute() {
        let log = DenialLog::default();
        let t0 = Instant::now();
        assert!(log.due(&denial("alice", "Topic:a"), t0));
        assert!(!log.due(&denial("alice", "Topic:a"), t0 + Duration::from_secs(59)));
        assert!(log.due(&denial("alice", "Topic:b"), t0), "another resource");
        assert!(log.due(&denial("bob", "Topic:a"), t0), "another user");
        assert!(log.due(&denial("alice", "Topic:a"), t0 + DENIAL_LOG_PERIOD));
    }

    #[test]
    fn the_memory_is_bounded() {
        let log = DenialLog::default();
        let t0 = Instant::now();
        for i in 0..DENIAL_LOG_KEYS_MAX + 5 {
            log.due(&denial(&format!("u{i}"), "Topic:a"), t0);
        }
        assert!(log.logged.lock().unwrap().len() <= DENIAL_LOG_KEYS_MAX);
    }
}
