//! The replicated tables (controller-mode.md §3.1): per broker set, its replicas and ids, its
//! master with the master epoch, and its SyncStateSet with the SyncStateSet epoch. Only
//! [`ReplicaState::apply`] changes them, one [`Event`] at a time; the same events in the same
//! order give the same state on every node, and the state (with the last applied log index)
//! is the snapshot.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::event::Event;

/// One replica of a broker set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Replica {
    /// Its address (`ip:port`), as it last registered.
    pub address: String,
    /// The check code it applied for its id with (`"<brokerAddr>;<timestampMs>"`).
    pub register_check_code: String,
}

/// A broker set (all replicas of one `brokerName`): Java's `BrokerReplicaInfo` and
/// `SyncStateInfo` together (they share the key and are created and removed together).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerSet {
    /// The cluster.
    pub cluster_name: String,
    /// The set's name.
    pub broker_name: String,
    /// The id the next new replica gets (ids start at 1).
    pub next_assign_broker_id: i64,
    /// Registered replicas by id.
    pub replicas: BTreeMap<i64, Replica>,
    /// Incremented by every election, won or not; 0 until the first.
    pub master_epoch: i32,
    /// The current master, if any.
    pub master_broker_id: Option<i64>,
    /// The replicas in sync with the master.
    pub sync_state_set: BTreeSet<i64>,
    /// Incremented by every change of the SyncStateSet.
    pub sync_state_set_epoch: i32,
}

impl BrokerSet {
    fn new(cluster_name: &str, broker_name: &str) -> BrokerSet {
        BrokerSet {
            cluster_name: cluster_name.to_owned(),
            broker_name: broker_name.to_owned(),
            next_assign_broker_id: 1,
            replicas: BTreeMap::new(),
            master_epoch: 0,
            master_broker_id: None,
            sync_state_set: BTreeSet::new(),
            sync_state_set_epoch: 0,
        }
    }

    /// The address of replica `id`, if registered.
    pub fn address_of(&self, id: i64) -> Option<&str> {
        self.replicas.get(&id).map(|r| r.address.as_str())
    }

    /// The master's address, if there is a master.
    pub fn master_address(&self) -> Option<&str> {
        self.master_broker_id.and_then(|id| self.address_of(id))
    }
}

/// Every broker set the controller knows, by broker name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaState {
    /// The broker sets by name.
    pub sets: BTreeMap<String, BrokerSet>,
}

impl ReplicaState {
    /// The set named `broker_name`.
    pub fn set(&self, broker_name: &str) -> Option<&BrokerSet> {
        self.sets.get(broker_name)
    }

    /// Applies one committed event. Events were validated when the leader made them; an event
    /// that names a set that has gone since (e.g. cleaned in between) changes nothing.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::AlterSyncStateSet(e) => {
                if let Some(set) = self.sets.get_mut(&e.broker_name) {
                    set.sync_state_set = e.new_sync_state_set.clone();
                    set.sync_state_set_epoch += 1;
                }
            }
            Event::ApplyBrokerId(e) => {
                let set = self
                    .sets
                    .entry(e.broker_name.clone())
                    .or_insert_with(|| BrokerSet::new(&e.cluster_name, &e.broker_name));
                set.replicas.insert(
                    e.new_broker_id,
                    Replica { address: e.broker_address.clone(), register_check_code: e.register_check_code.clone() },
                );
                set.next_assign_broker_id = set.next_assign_broker_id.max(e.new_broker_id + 1);
            }
            Event::ElectMaster(e) => {
                if let Some(set) = self.sets.get_mut(&e.broker_name) {
                    set.master_epoch += 1;
                    match e.new_master_broker_id.filter(|_| e.new_master_elected) {
                        Some(id) => {
                            set.master_broker_id = Some(id);
                            set.sync_state_set = BTreeSet::from([id]);
                            set.sync_state_set_epoch += 1;
                        }
                        None => set.master_broker_id = None,
                    }
                }
            }
            Event::CleanBrokerData(e) => match e.broker_id_set_to_clean.as_ref().filter(|ids| !ids.is_empty()) {
                None => {
                    self.sets.remove(&e.broker_name);
                }
                Some(ids) => {
                    if let Some(set) = self.sets.get_mut(&e.broker_name) {
                        for id in ids {
                            set.replicas.remove(id);
                            set.sync_state_set.remove(id);
                            if set.master_broker_id == Some(*id) {
                                set.master_broker_id = None;
                            }
                        }
                        if set.replicas.is_empty() {
                            self.sets.remove(&e.broker_name);
                        }
                    }
                }
            },
            Event::UpdateBrokerAddress(e) => {
                if let Some(replica) = self.sets.get_mut(&e.broker_name).and_then(|s| s.replicas.get_mut(&e.broker_id))
                {
                    replica.address = e.broker_address.clone();
                }
            }
        }
    }

    /// The state as snapshot bytes (JSON).
    pub fn to_snapshot(&self) -> Vec<u8> {
        // Maps keyed by strings and integers only: serializing cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A state from [`ReplicaState::to_snapshot`] bytes.
    ///
    /// # Errors
    /// The bytes are not a snapshot of this state.
    pub fn from_snapshot(bytes: &[u8]) -> Result<ReplicaState, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::*;

    fn apply_id(state: &mut ReplicaState, id: i64, addr: &str) {
        state.apply(&Event::ApplyBrokerId(ApplyBrokerIdEvent {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            broker_address: addr.into(),
            register_check_code: format!("{addr};1"),
            new_broker_id: id,
        }));
    }

    #[test]
    fn events_build_the_tables_as_the_fact_sheet_says() {
        let mut s = ReplicaState::default();
        apply_id(&mut s, 1, "a:1");
        apply_id(&mut s, 2, "a:2");
        let set = s.set("b").unwrap();
        assert_eq!((set.next_assign_broker_id, set.master_epoch, set.sync_state_set_epoch), (3, 0, 0));
        assert_eq!(set.master_broker_id, None);

        let elect = |id: Option<i64>| {
            Event::ElectMaster(ElectMasterEvent {
                new_master_elected: id.is_some(),
                broker_name: "b".into(),
                new_master_broker_id: id,
            })
        };
        s.apply(&elect(Some(1)));
        let set = s.set("b").unwrap();
        assert_eq!((set.master_broker_id, set.master_epoch, set.sync_state_set_epoch), (Some(1), 1, 1));
        assert_eq!(set.sync_state_set, BTreeSet::from([1]));
        assert_eq!(set.master_address(), Some("a:1"));

        s.apply(&Event::AlterSyncStateSet(AlterSyncStateSetEvent {
            broker_name: "b".into(),
            new_sync_state_set: [1, 2].into(),
        }));
        let set = s.set("b").unwrap();
        assert_eq!((set.sync_state_set.len(), set.sync_state_set_epoch), (2, 2));

        // An election without a winner: epoch up, no master, the set kept.
        s.apply(&elect(None));
        let set = s.set("b").unwrap();
        assert_eq!((set.master_broker_id, set.master_epoch, set.sync_state_set_epoch), (None, 2, 2));
        assert_eq!(set.sync_state_set.len(), 2);

        s.apply(&Event::UpdateBrokerAddress(UpdateBrokerAddressEvent {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            broker_address: "z:2".into(),
            broker_id: 2,
        }));
        assert_eq!(s.set("b").unwrap().address_of(2), Some("z:2"));

        // Snapshot round trip.
        assert_eq!(ReplicaState::from_snapshot(&s.to_snapshot()).unwrap(), s);

        // Cleaning one id removes it from the set; the last one removes the broker set.
        s.apply(&Event::CleanBrokerData(CleanBrokerDataEvent {
            broker_name: "b".into(),
            broker_id_set_to_clean: Some([2].into()),
        }));
        let set = s.set("b").unwrap();
        assert!(!set.replicas.contains_key(&2) && !set.sync_state_set.contains(&2));
        s.apply(&Event::CleanBrokerData(CleanBrokerDataEvent {
            broker_name: "b".into(),
            broker_id_set_to_clean: Some([1].into()),
        }));
        assert!(s.set("b").is_none());

        apply_id(&mut s, 1, "a:1");
        s.apply(&Event::CleanBrokerData(CleanBrokerDataEvent {
            broker_name: "b".into(),
            broker_id_set_to_clean: None,
        }));
        assert!(s.sets.is_empty());
    }

    #[test]
    fn ids_applied_out_of_order_keep_the_next_id_above_all() {
        let mut s = ReplicaState::default();
        apply_id(&mut s, 1, "a:1");
        apply_id(&mut s, 5, "a:5");
        apply_id(&mut s, 3, "a:3");
        assert_eq!(s.set("b").unwrap().next_assign_broker_id, 6);
    }
}
