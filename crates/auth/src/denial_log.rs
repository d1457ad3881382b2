//! Refusals logged once per (account, resource) a minute, never per request: a client retrying
//! a forbidden send thousands of times a second must not flood the log.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::warn;

use crate::plain::Denial;

/// How often one (account, resource) refusal is logged.
const PERIOD: Duration = Duration::from_secs(60);
/// Distinct (account, resource) pairs remembered; past it the memory starts over (a flood of
/// invented keys must not grow it without bound).
const KEYS_MAX: usize = 10_000;

/// (access key, resource) of a refusal.
type Key = (Option<String>, Option<String>);

/// The rate limiter of one server's refusal log.
#[derive(Debug, Default)]
pub struct DenialLog {
    logged: Mutex<HashMap<Key, Instant>>,
}

impl DenialLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Logs `denial` of `request` (a remoting code, a gRPC request name) from `remote` under
    /// `acl` ("1.0", "2.0") unless the same account and resource were logged within the
    /// minute. Returns whether it logged.
    pub fn log(&self, denial: &Denial, request: impl Display, remote: impl Display, acl: &'static str) -> bool {
        let key = (denial.access_key.clone(), denial.resource.clone());
        let now = Instant::now();
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        if logged.get(&key).is_some_and(|at| now.duration_since(*at) < PERIOD) {
            return false;
        }
        if logged.len() >= KEYS_MAX {
            logged.clear();
        }
        logged.insert(key, now);
        warn!(remote_addr = %remote, request = %request, acl, access_key = denial.access_key.as_deref().unwrap_or(""),
            resource = denial.resource.as_deref().unwrap_or(""), reason = %denial.reason,
            "request refused (logged once a minute per account and resource)");
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(ak: &str, resource: &str) -> Denial {
        Denial { reason: "no".into(), access_key: Some(ak.into()), resource: Some(resource.into()) }
    }

    #[test]
    fn one_line_per_account_and_resource_a_minute() {
        let log = DenialLog::new();
        let addr = "127.0.0.1:1";
        assert!(log.log(&denial("a", "t1"), 10, addr, "2.0"));
        assert!(!log.log(&denial("a", "t1"), 10, addr, "2.0"));
        assert!(log.log(&denial("a", "t2"), 10, addr, "2.0"));
        assert!(log.log(&denial("b", "t1"), 10, addr, "2.0"));
    }

    #[test]
    fn memory_is_bounded() {
        let log = DenialLog::new();
        let addr = "127.0.0.1:1";
        for i in 0..KEYS_MAX + 5 {
            log.log(&denial(&i.to_string(), "t"), 10, addr, "1.0");
        }
        assert!(log.logged.lock().unwrap().len() <= KEYS_MAX);
    }
}
