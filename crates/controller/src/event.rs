//! The controller's events: the only changes to its replicated state, and what its Raft log
//! holds (controller-mode.md §3.2).
//!
//! An event is encoded as Java's DLedger controller writes its log entries: a big-endian
//! `int16` event type, then the event as JSON with Java's field names. Our Raft log is not
//! Java's, so the encoding only has to be stable for our own log and snapshots; keeping Java's
//! makes a log dump readable next to Java's documentation.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::EventDecodeError;

/// A change to the replicated state. Applying the same events in the same order gives the same
/// state on every controller node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// The master replaced its SyncStateSet (type 1).
    AlterSyncStateSet(AlterSyncStateSetEvent),
    /// A broker took an id in its broker set (type 2).
    ApplyBrokerId(ApplyBrokerIdEvent),
    /// An election ended, with or without a master (type 3).
    ElectMaster(ElectMasterEvent),
    /// Replicas or a whole broker set were removed (type 5).
    CleanBrokerData(CleanBrokerDataEvent),
    /// A replica registered from a new address (type 6).
    UpdateBrokerAddress(UpdateBrokerAddressEvent),
}

/// Type 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlterSyncStateSetEvent {
    /// The broker set.
    pub broker_name: String,
    /// The new SyncStateSet (broker ids).
    pub new_sync_state_set: BTreeSet<i64>,
}

/// Type 2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyBrokerIdEvent {
    /// The cluster of the broker set.
    pub cluster_name: String,
    /// The broker set.
    pub broker_name: String,
    /// The replica's address (`ip:port`).
    pub broker_address: String,
    /// `"<brokerAddr>;<timestampMs>"`: lets the same broker apply for its id again.
    pub register_check_code: String,
    /// The id taken.
    pub new_broker_id: i64,
}

/// Type 3.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElectMasterEvent {
    /// Whether a master was elected (false: the set is left without one).
    pub new_master_elected: bool,
    /// The broker set.
    pub broker_name: String,
    /// The new master, when elected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_master_broker_id: Option<i64>,
}

/// Type 5.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanBrokerDataEvent {
    /// The broker set.
    pub broker_name: String,
    /// The replicas removed; `None` (or empty) removes the whole set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_id_set_to_clean: Option<BTreeSet<i64>>,
}

/// Type 6.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateBrokerAddressEvent {
    /// The cluster of the broker set.
    pub cluster_name: String,
    /// The broker set.
    pub broker_name: String,
    /// The replica's new address.
    pub broker_address: String,
    /// The replica.
    pub broker_id: i64,
}

impl Event {
    /// Java's `EventType` number.
    pub fn type_id(&self) -> i16 {
        match self {
            Event::AlterSyncStateSet(_) => 1,
            Event::ApplyBrokerId(_) => 2,
            Event::ElectMaster(_) => 3,
            Event::CleanBrokerData(_) => 5,
            Event::UpdateBrokerAddress(_) => 6,
        }
    }

    /// `int16 type (big-endian) | JSON`.
    pub fn encode(&self) -> Vec<u8> {
        let json = match self {
            Event::AlterSyncStateSet(e) => serde_json::to_vec(e),
            Event::ApplyBrokerId(e) => serde_json::to_vec(e),
            Event::ElectMaster(e) => serde_json::to_vec(e),
            Event::CleanBrokerData(e) => serde_json::to_vec(e),
            Event::UpdateBrokerAddress(e) => serde_json::to_vec(e),
        }
        // Plain structs of strings, integers and sets: serializing cannot fail.
        .unwrap_or_default();
        let mut out = Vec::with_capacity(2 + json.len());
        out.extend_from_slice(&self.type_id().to_be_bytes());
        out.extend_from_slice(&json);
        out
    }

    /// Decodes what [`Event::encode`] wrote.
    ///
    /// # Errors
    /// A short entry, an unknown type (4, Java's read marker, is not an event here) or JSON that
    /// does not fit the type.
    pub fn decode(bytes: &[u8]) -> Result<Event, EventDecodeError> {
        let Some((head, json)) = bytes.split_first_chunk::<2>() else {
            return Err(EventDecodeError::Truncated(bytes.len()));
        };
        let kind = i16::from_be_bytes(*head);
        let bad = |e: serde_json::Error| EventDecodeError::Json { kind, message: e.to_string() };
        Ok(match kind {
            1 => Event::AlterSyncStateSet(serde_json::from_slice(json).map_err(bad)?),
            2 => Event::ApplyBrokerId(serde_json::from_slice(json).map_err(bad)?),
            3 => Event::ElectMaster(serde_json::from_slice(json).map_err(bad)?),
            5 => Event::CleanBrokerData(serde_json::from_slice(json).map_err(bad)?),
            6 => Event::UpdateBrokerAddress(serde_json::from_slice(json).map_err(bad)?),
            other => return Err(EventDecodeError::UnknownType(other)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alter_sync_state_set_golden_bytes() {
        let e = Event::AlterSyncStateSet(AlterSyncStateSetEvent {
            broker_name: "broker-a".into(),
            new_sync_state_set: [1, 2].into(),
        });
        let mut want = vec![0x00, 0x01];
        want.extend_from_slice(br#"{"brokerName":"broker-a","newSyncStateSet":[1,2]}"#);
        assert_eq!(e.encode(), want);
        assert_eq!(Event::decode(&want).unwrap(), e);
    }

    #[test]
    fn every_event_round_trips() {
        let events = [
            Event::ApplyBrokerId(ApplyBrokerIdEvent {
                cluster_name: "c".into(),
                broker_name: "b".into(),
                broker_address: "127.0.0.1:10911".into(),
                register_check_code: "127.0.0.1:10911;1700000000000".into(),
                new_broker_id: 1,
            }),
            Event::ElectMaster(ElectMasterEvent {
                new_master_elected: true,
                broker_name: "b".into(),
                new_master_broker_id: Some(2),
            }),
            Event::ElectMaster(ElectMasterEvent {
                new_master_elected: false,
                broker_name: "b".into(),
                new_master_broker_id: None,
            }),
            Event::CleanBrokerData(CleanBrokerDataEvent { broker_name: "b".into(), broker_id_set_to_clean: None }),
            Event::CleanBrokerData(CleanBrokerDataEvent {
                broker_name: "b".into(),
                broker_id_set_to_clean: Some([3].into()),
            }),
            Event::UpdateBrokerAddress(UpdateBrokerAddressEvent {
                cluster_name: "c".into(),
                broker_name: "b".into(),
                broker_address: "10.0.0.2:10911".into(),
                broker_id: 2,
            }),
        ];
        for e in events {
            let bytes = e.encode();
            assert_eq!(i16::from_be_bytes([bytes[0], bytes[1]]), e.type_id());
            assert_eq!(Event::decode(&bytes).unwrap(), e);
        }
    }

    #[test]
    fn bad_entries_are_errors() {
        assert_eq!(Event::decode(&[0x00]), Err(EventDecodeError::Truncated(1)));
        assert_eq!(Event::decode(b"\x00\x04{}"), Err(EventDecodeError::UnknownType(4)));
        assert!(matches!(Event::decode(b"\x00\x01{\"brokerName\":3}"), Err(EventDecodeError::Json { kind: 1, .. })));
    }
}
