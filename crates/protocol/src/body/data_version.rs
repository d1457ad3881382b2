//! `DataVersion`: the (state version, counter, timestamp) triple that tells a peer whether a
//! table (topic configs, subscription groups, offsets, queue mappings) changed since it last
//! looked. Java: `org.apache.rocketmq.remoting.protocol.DataVersion`.
//!
//! Owns the value and its ordering only; who bumps it and when is up to the table owners.

use std::cmp::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody};

/// Version stamp of a replicated table.
///
/// JSON: `{"counter":N,"stateVersion":S,"timestamp":ms}` (Java's `AtomicLong` counter is
/// written as a plain number). The default has timestamp 0 rather than "now", so values are
/// reproducible; use [`DataVersion::now`] for a fresh one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DataVersion {
    /// Bumped on every change.
    #[serde(deserialize_with = "lenient::int")]
    pub counter: i64,
    /// Controller-mode epoch of the data (0 in classic deployments).
    #[serde(deserialize_with = "lenient::int")]
    pub state_version: i64,
    /// Wall-clock milliseconds of the last change.
    #[serde(deserialize_with = "lenient::int")]
    pub timestamp: i64,
}

impl JsonBody for DataVersion {}

impl DataVersion {
    /// A version with counter 0 stamped with the current wall-clock time, like Java's
    /// `new DataVersion()`.
    pub fn now() -> Self {
        Self { timestamp: current_millis(), ..Self::default() }
    }

    /// Marks a change: counter + 1, state version 0, timestamp = now.
    /// Java: `DataVersion#nextVersion()`.
    pub fn next_version(&mut self) {
        self.next_version_at(0, current_millis());
    }

    /// Marks a change with an explicit state version and timestamp (deterministic form of
    /// [`DataVersion::next_version`]).
    pub fn next_version_at(&mut self, state_version: i64, timestamp_ms: i64) {
        self.state_version = state_version;
        self.timestamp = timestamp_ms;
        self.counter = self.counter.wrapping_add(1);
    }
}

/// Orders by state version, then counter, then timestamp. Java: `DataVersion#compare`.
impl Ord for DataVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.state_version
            .cmp(&other.state_version)
            .then(self.counter.cmp(&other.counter))
            .then(self.timestamp.cmp(&other.timestamp))
    }
}

impl PartialOrd for DataVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

fn current_millis() -> i64 {
    // A clock before 1970 is a broken host; 0 keeps the value well-formed.
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_counter_as_number_in_alphabetical_order() {
        let version = DataVersion { counter: 3, state_version: 1, timestamp: 1_700_000_000_000 };
        assert_eq!(version.encode(), br#"{"counter":3,"stateVersion":1,"timestamp":1700000000000}"#);
    }

    #[test]
    fn decodes_partial_and_string_numbers() {
        let version = DataVersion::decode(br#"{"counter":"9","timestamp":5}"#).unwrap();
        assert_eq!(version, DataVersion { counter: 9, state_version: 0, timestamp: 5 });
    }

    #[test]
    fn next_version_bumps_counter_and_resets_state() {
        let mut version = DataVersion { counter: 1, state_version: 4, timestamp: 0 };
        version.next_version_at(0, 77);
        assert_eq!((version.counter, version.state_version, version.timestamp), (2, 0, 77));
        version.next_version();
        assert_eq!(version.counter, 3);
        assert!(version.timestamp > 77);
    }

    #[test]
    fn ordering_puts_state_version_before_counter() {
        let a = DataVersion { counter: 100, state_version: 0, timestamp: 9 };
        let b = DataVersion { counter: 1, state_version: 1, timestamp: 0 };
        assert!(a < b);
        let c = DataVersion { counter: 101, ..a };
        assert!(a < c);
        let d = DataVersion { timestamp: 10, ..a };
        assert!(a < d);
    }
}
