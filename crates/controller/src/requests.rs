//! The controller's requests against its state (controller-mode.md §3.3): each handler checks a
//! request in Java's order and answers with the reply and the events to commit. The caller
//! (the Raft leader) appends the events, waits for them to commit and be applied, and only then
//! sends the reply; a handler never changes the state itself.
//!
//! Deviations from Java (docs/decisions/0015): ELECT_MASTER for a set that never had a master
//! lets the requesting broker win only if it is a registered replica of the set; and
//! CLEAN_BROKER_DATA with `isCleanLivingBroker` cleans the listed ids only (Java then ignores the
//! list and removes the whole set).

use std::collections::{BTreeMap, BTreeSet};

use ferromq_protocol::response_code as code;

use crate::elect::{elect, Ballot};
use crate::error::ControllerError;
use crate::event::{
    AlterSyncStateSetEvent, ApplyBrokerIdEvent, CleanBrokerDataEvent, ElectMasterEvent, Event, UpdateBrokerAddressEvent,
};
use crate::live::LiveTable;
use crate::state::{BrokerSet, ReplicaState};

/// A reply and the events that must commit before it is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<R> {
    /// What the requester gets once the events are applied.
    pub reply: R,
    /// The changes, in order.
    pub events: Vec<Event>,
}

fn outcome<R>(reply: R, events: Vec<Event>) -> Outcome<R> {
    Outcome { reply, events }
}

/// The master and SyncStateSet of a set as a reply carries them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaView {
    /// The master, if any (REGISTER_BROKER: only when it is alive).
    pub master_broker_id: Option<i64>,
    /// The master's address.
    pub master_address: Option<String>,
    /// The master epoch.
    pub master_epoch: i32,
    /// The SyncStateSet epoch.
    pub sync_state_set_epoch: i32,
    /// The SyncStateSet.
    pub sync_state_set: BTreeSet<i64>,
}

impl ReplicaView {
    fn of(set: &BrokerSet) -> ReplicaView {
        ReplicaView {
            master_broker_id: set.master_broker_id,
            master_address: set.master_address().map(str::to_owned),
            master_epoch: set.master_epoch,
            sync_state_set_epoch: set.sync_state_set_epoch,
            sync_state_set: set.sync_state_set.clone(),
        }
    }
}

/// CONTROLLER_ALTER_SYNC_STATE_SET (1001), sent by a master.
#[derive(Debug, Clone)]
pub struct AlterSyncStateSet {
    /// The set.
    pub broker_name: String,
    /// The requesting master.
    pub master_broker_id: i64,
    /// The master epoch it knows.
    pub master_epoch: i32,
    /// The SyncStateSet epoch it knows.
    pub sync_state_set_epoch: i32,
    /// The SyncStateSet it proposes.
    pub new_sync_state_set: BTreeSet<i64>,
}

/// CONTROLLER_ELECT_MASTER (1002).
#[derive(Debug, Clone)]
pub struct ElectMaster {
    /// The cluster.
    pub cluster_name: String,
    /// The set.
    pub broker_name: String,
    /// The requesting broker, or -1 (`None`) when the controller itself triggers it.
    pub broker_id: Option<i64>,
    /// Admin `electMaster`: make `broker_id` the master.
    pub designate_elect: bool,
}

/// The answer to an election that has a master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elected {
    /// The master (new, or the current one for CONTROLLER_MASTER_STILL_EXIST).
    pub view: ReplicaView,
    /// The set's cluster.
    pub cluster_name: String,
    /// The set.
    pub broker_name: String,
    /// Every replica's address by id (`brokerMemberGroup.brokerAddrs`).
    pub broker_addrs: BTreeMap<i64, String>,
    /// True when the master did not change (answered with code 2011).
    pub still_exists: bool,
}

/// CONTROLLER_APPLY_BROKER_ID (1013).
#[derive(Debug, Clone)]
pub struct ApplyBrokerId {
    /// The cluster.
    pub cluster_name: String,
    /// The set.
    pub broker_name: String,
    /// The id the broker asks for.
    pub applied_broker_id: i64,
    /// `"<brokerAddr>;<timestampMs>"`.
    pub register_check_code: String,
}

/// CONTROLLER_REGISTER_BROKER (1003).
#[derive(Debug, Clone)]
pub struct RegisterBroker {
    /// The cluster.
    pub cluster_name: String,
    /// The set.
    pub broker_name: String,
    /// The broker's id.
    pub broker_id: i64,
    /// Its address now.
    pub broker_address: String,
}

/// CLEAN_BROKER_DATA (1011).
#[derive(Debug, Clone)]
pub struct CleanBrokerData {
    /// The set.
    pub broker_name: String,
    /// `"1;2;3"`; `None` cleans the whole set.
    pub broker_ids_to_clean: Option<String>,
    /// Clean even replicas that are alive (and a set with a master).
    pub clean_living_broker: bool,
}

/// Liveness of one replica in GET_SYNC_STATE_DATA.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaIdentity {
    /// The set.
    pub broker_name: String,
    /// The replica.
    pub broker_id: i64,
    /// Its address.
    pub broker_address: String,
    /// Whether its heartbeat is current.
    pub alive: bool,
}

/// One set in GET_SYNC_STATE_DATA's `BrokerReplicasInfo`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicasInfo {
    /// The master, if any.
    pub master_broker_id: Option<i64>,
    /// Its address.
    pub master_address: Option<String>,
    /// The master epoch.
    pub master_epoch: i32,
    /// The SyncStateSet epoch.
    pub sync_state_set_epoch: i32,
    /// Members of the SyncStateSet.
    pub in_sync_replicas: Vec<ReplicaIdentity>,
    /// The other registered replicas.
    pub not_in_sync_replicas: Vec<ReplicaIdentity>,
}

/// The controller's decisions on its state and the heartbeat table.
#[derive(Debug, Default)]
pub struct Requests {
    /// `enableElectUncleanMaster`.
    pub enable_elect_unclean_master: bool,
}

fn set_of<'a>(state: &'a ReplicaState, broker_name: &str, missing: i32) -> Result<&'a BrokerSet, ControllerError> {
    state
        .set(broker_name)
        .ok_or_else(|| ControllerError::new(missing, format!("broker set {broker_name} is not registered")))
}

impl Requests {
    /// ALTER_SYNC_STATE_SET: the master proposes a new SyncStateSet.
    ///
    /// # Errors
    /// The codes of §3.3, checked in Java's order.
    pub fn alter_sync_state_set(
        &self,
        state: &ReplicaState,
        live: &LiveTable,
        req: &AlterSyncStateSet,
        now_ms: i64,
    ) -> Result<Outcome<(i32, BTreeSet<i64>)>, ControllerError> {
        let failed = code::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED;
        let set = set_of(state, &req.broker_name, failed)?;
        if set.sync_state_set == req.new_sync_state_set {
            return Err(ControllerError::new(failed, "the SyncStateSet is unchanged"));
        }
        if set.master_broker_id != Some(req.master_broker_id) {
            return Err(ControllerError::new(
                code::CONTROLLER_INVALID_MASTER,
                format!(
                    "broker {} is not the master of {} ({:?} is)",
                    req.master_broker_id, req.broker_name, set.master_broker_id
                ),
            ));
        }
        if set.master_epoch != req.master_epoch {
            return Err(ControllerError::new(
                code::CONTROLLER_FENCED_MASTER_EPOCH,
                format!("master epoch {} is stale (now {})", req.master_epoch, set.master_epoch),
            ));
        }
        if set.sync_state_set_epoch != req.sync_state_set_epoch {
            return Err(ControllerError::new(
                code::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                format!("SyncStateSet epoch {} is stale (now {})", req.sync_state_set_epoch, set.sync_state_set_epoch),
            ));
        }
        if let Some(id) = req.new_sync_state_set.iter().find(|id| !set.replicas.contains_key(id)) {
            return Err(ControllerError::new(
                code::CONTROLLER_INVALID_REPLICAS,
                format!("replica {id} is not registered"),
            ));
        }
        if let Some(id) =
            req.new_sync_state_set.iter().find(|&&id| !live.is_alive(&set.cluster_name, &set.broker_name, id, now_ms))
        {
            return Err(ControllerError::new(code::CONTROLLER_BROKER_NOT_ALIVE, format!("replica {id} is not alive")));
        }
        if !req.new_sync_state_set.contains(&req.master_broker_id) {
            return Err(ControllerError::new(failed, "the new SyncStateSet does not hold the master"));
        }
        let event = Event::AlterSyncStateSet(AlterSyncStateSetEvent {
            broker_name: req.broker_name.clone(),
            new_sync_state_set: req.new_sync_state_set.clone(),
        });
        Ok(outcome((set.sync_state_set_epoch + 1, req.new_sync_state_set.clone()), vec![event]))
    }

    /// ELECT_MASTER: by a broker without a master, by an admin, or by the controller when a
    /// master died. `Ok` with `still_exists` is answered with CONTROLLER_MASTER_STILL_EXIST.
    ///
    /// # Errors
    /// CONTROLLER_BROKER_NEED_TO_BE_REGISTERED for an unknown set; without a candidate,
    /// CONTROLLER_MASTER_NOT_AVAILABLE when the controller asked (the set is then recorded as
    /// masterless) and CONTROLLER_ELECT_MASTER_FAILED otherwise.
    pub fn elect_master(
        &self,
        state: &ReplicaState,
        live: &LiveTable,
        req: &ElectMaster,
        now_ms: i64,
    ) -> Result<Outcome<Elected>, ControllerError> {
        let set = set_of(state, &req.broker_name, code::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED)?;
        let requester = req.broker_id.filter(|&id| id >= 0);
        let first_election = set.master_epoch == 0;
        let chosen = match requester {
            Some(id) if first_election && set.replicas.contains_key(&id) => Some(id),
            _ => elect(
                set,
                Ballot {
                    live,
                    now_ms,
                    prefer: requester.filter(|_| req.designate_elect),
                    unclean: self.enable_elect_unclean_master,
                },
            ),
        };
        let broker_addrs: BTreeMap<i64, String> = set.replicas.iter().map(|(id, r)| (*id, r.address.clone())).collect();
        match chosen {
            Some(id) if set.master_broker_id == Some(id) => Ok(outcome(
                Elected {
                    view: ReplicaView::of(set),
                    cluster_name: set.cluster_name.clone(),
                    broker_name: set.broker_name.clone(),
                    broker_addrs,
                    still_exists: true,
                },
                Vec::new(),
            )),
            Some(id) => {
                let view = ReplicaView {
                    master_broker_id: Some(id),
                    master_address: set.address_of(id).map(str::to_owned),
                    master_epoch: set.master_epoch + 1,
                    sync_state_set_epoch: set.sync_state_set_epoch + 1,
                    sync_state_set: BTreeSet::from([id]),
                };
                let event = Event::ElectMaster(ElectMasterEvent {
                    new_master_elected: true,
                    broker_name: req.broker_name.clone(),
                    new_master_broker_id: Some(id),
                });
                Ok(outcome(
                    Elected {
                        view,
                        cluster_name: set.cluster_name.clone(),
                        broker_name: set.broker_name.clone(),
                        broker_addrs,
                        still_exists: false,
                    },
                    vec![event],
                ))
            }
            None if requester.is_none() => Err(ControllerError::new(
                code::CONTROLLER_MASTER_NOT_AVAILABLE,
                format!("no replica of {} can be master now", req.broker_name),
            )),
            None => Err(ControllerError::new(
                code::CONTROLLER_ELECT_MASTER_FAILED,
                format!("no replica of {} can be master now", req.broker_name),
            )),
        }
    }

    /// The event that records a controller-triggered election without a winner: the master
    /// epoch moves on and the set has no master (fencing the dead one). The caller commits it
    /// when [`Requests::elect_master`] answered CONTROLLER_MASTER_NOT_AVAILABLE.
    pub fn no_master_event(broker_name: &str) -> Event {
        Event::ElectMaster(ElectMasterEvent {
            new_master_elected: false,
            broker_name: broker_name.to_owned(),
            new_master_broker_id: None,
        })
    }

    /// GET_NEXT_BROKER_ID: 1 for a new set.
    pub fn next_broker_id(&self, state: &ReplicaState, broker_name: &str) -> i64 {
        state.set(broker_name).map_or(1, |s| s.next_assign_broker_id)
    }

    /// APPLY_BROKER_ID.
    ///
    /// # Errors
    /// CONTROLLER_BROKER_ID_INVALID: a new set's first id is not 1, or the id is taken by
    /// another broker (a different check code).
    pub fn apply_broker_id(&self, state: &ReplicaState, req: &ApplyBrokerId) -> Result<Outcome<()>, ControllerError> {
        let event = || {
            Event::ApplyBrokerId(ApplyBrokerIdEvent {
                cluster_name: req.cluster_name.clone(),
                broker_name: req.broker_name.clone(),
                broker_address: req.register_check_code.split(';').next().unwrap_or_default().to_owned(),
                register_check_code: req.register_check_code.clone(),
                new_broker_id: req.applied_broker_id,
            })
        };
        let invalid = |why: String| Err(ControllerError::new(code::CONTROLLER_BROKER_ID_INVALID, why));
        match state.set(&req.broker_name) {
            None if req.applied_broker_id == 1 => Ok(outcome((), vec![event()])),
            None => invalid(format!("the first id of a new broker set is 1, not {}", req.applied_broker_id)),
            Some(_) if req.applied_broker_id < 1 => {
                invalid(format!("broker id {} is not positive", req.applied_broker_id))
            }
            Some(set) => match set.replicas.get(&req.applied_broker_id) {
                None => Ok(outcome((), vec![event()])),
                Some(r) if r.register_check_code == req.register_check_code => Ok(outcome((), vec![event()])),
                Some(r) => invalid(format!("broker id {} is taken by {}", req.applied_broker_id, r.address)),
            },
        }
    }

    /// REGISTER_BROKER: the master is reported only when it is alive.
    ///
    /// # Errors
    /// CONTROLLER_BROKER_NEED_TO_BE_REGISTERED when the set or the id is unknown.
    pub fn register_broker(
        &self,
        state: &ReplicaState,
        live: &LiveTable,
        req: &RegisterBroker,
        now_ms: i64,
    ) -> Result<Outcome<ReplicaView>, ControllerError> {
        let need = code::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED;
        let set = set_of(state, &req.broker_name, need)?;
        let Some(replica) = set.replicas.get(&req.broker_id) else {
            return Err(ControllerError::new(
                need,
                format!("broker id {} has no id in {}", req.broker_id, req.broker_name),
            ));
        };
        let mut events = Vec::new();
        if replica.address != req.broker_address {
            events.push(Event::UpdateBrokerAddress(UpdateBrokerAddressEvent {
                cluster_name: req.cluster_name.clone(),
                broker_name: req.broker_name.clone(),
                broker_address: req.broker_address.clone(),
                broker_id: req.broker_id,
            }));
        }
        let mut view = ReplicaView::of(set);
        let master_alive =
            set.master_broker_id.is_some_and(|m| live.is_alive(&set.cluster_name, &set.broker_name, m, now_ms));
        if !master_alive {
            view.master_broker_id = None;
            view.master_address = None;
        } else if set.master_broker_id == Some(req.broker_id) {
            view.master_address = Some(req.broker_address.clone());
        }
        Ok(outcome(view, events))
    }

    /// GET_REPLICA_INFO.
    ///
    /// # Errors
    /// CONTROLLER_BROKER_METADATA_NOT_EXIST for an unknown set.
    pub fn replica_info(&self, state: &ReplicaState, broker_name: &str) -> Result<ReplicaView, ControllerError> {
        set_of(state, broker_name, code::CONTROLLER_BROKER_METADATA_NOT_EXIST).map(ReplicaView::of)
    }

    /// CLEAN_BROKER_DATA.
    ///
    /// # Errors
    /// CONTROLLER_INVALID_CLEAN_BROKER_METADATA: a non-numeric id; unless `clean_living_broker`,
    /// the whole set while it has a master or a listed replica that is alive; an unknown set.
    pub fn clean_broker_data(
        &self,
        state: &ReplicaState,
        live: &LiveTable,
        req: &CleanBrokerData,
        now_ms: i64,
    ) -> Result<Outcome<()>, ControllerError> {
        let invalid = |why: String| ControllerError::new(code::CONTROLLER_INVALID_CLEAN_BROKER_METADATA, why);
        let ids: Option<BTreeSet<i64>> =
            match req.broker_ids_to_clean.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
                None => None,
                Some(list) => Some(
                    list.split(';')
                        .filter(|s| !s.trim().is_empty())
                        .map(|s| {
                            s.trim().parse::<i64>().map_err(|_| invalid(format!("broker id {s:?} is not a number")))
                        })
                        .collect::<Result<_, _>>()?,
                ),
            };
        let set = state
            .set(&req.broker_name)
            .ok_or_else(|| invalid(format!("broker set {} is not registered", req.broker_name)))?;
        if !req.clean_living_broker {
            match &ids {
                None if set.master_broker_id.is_some() => {
                    return Err(invalid(format!("broker set {} still has a master", req.broker_name)));
                }
                Some(ids) => {
                    if let Some(id) =
                        ids.iter().find(|&&id| live.is_alive(&set.cluster_name, &set.broker_name, id, now_ms))
                    {
                        return Err(invalid(format!("broker {id} of {} is alive", req.broker_name)));
                    }
                }
                None => {}
            }
        }
        Ok(outcome(
            (),
            vec![Event::CleanBrokerData(CleanBrokerDataEvent {
                broker_name: req.broker_name.clone(),
                broker_id_set_to_clean: ids,
            })],
        ))
    }

    /// GET_SYNC_STATE_DATA: the sets named (unknown names are left out).
    pub fn sync_state_data(
        &self,
        state: &ReplicaState,
        live: &LiveTable,
        broker_names: &[String],
        now_ms: i64,
    ) -> BTreeMap<String, ReplicasInfo> {
        let mut out = BTreeMap::new();
        for name in broker_names {
            let Some(set) = state.set(name) else { continue };
            let identity = |id: i64, r: &crate::state::Replica| ReplicaIdentity {
                broker_name: set.broker_name.clone(),
                broker_id: id,
                broker_address: r.address.clone(),
                alive: live.is_alive(&set.cluster_name, &set.broker_name, id, now_ms),
            };
            let (mut in_sync, mut not_in_sync) = (Vec::new(), Vec::new());
            for (id, r) in &set.replicas {
                if set.sync_state_set.contains(id) {
                    in_sync.push(identity(*id, r));
                } else {
                    not_in_sync.push(identity(*id, r));
                }
            }
            out.insert(
                name.clone(),
                ReplicasInfo {
                    master_broker_id: set.master_broker_id,
                    master_address: set.master_address().map(str::to_owned),
                    master_epoch: set.master_epoch,
                    sync_state_set_epoch: set.sync_state_set_epoch,
                    in_sync_replicas: in_sync,
                    not_in_sync_replicas: not_in_sync,
                },
            );
        }
        out
    }

    /// The sets without a live master (the leader's "need re-elect" scan every
    /// `scanInactiveMasterInterval`): each gets a controller-triggered election, so a set whose
    /// master died, or whose last election found nobody, gets a master as soon as a candidate
    /// is alive.
    pub fn masters_to_replace(&self, state: &ReplicaState, live: &LiveTable, now_ms: i64) -> Vec<String> {
        state
            .sets
            .values()
            .filter(|s| s.master_broker_id.is_none_or(|m| !live.is_alive(&s.cluster_name, &s.broker_name, m, now_ms)))
            .map(|s| s.broker_name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::tests::beat;

    const NOW: i64 = 1_000;

    macro_rules! commit {
        ($s:ident, $e:expr) => {{
            let o = $e;
            commit_outcome(&mut $s, o)
        }};
    }

    fn commit_outcome<R>(state: &mut ReplicaState, o: Outcome<R>) -> R {
        for e in &o.events {
            state.apply(e);
        }
        o.reply
    }

    fn apply(r: &Requests, s: &mut ReplicaState, id: i64) {
        let req = ApplyBrokerId {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            applied_broker_id: id,
            register_check_code: format!("a:{id};42"),
        };
        let o = r.apply_broker_id(s, &req).unwrap();
        commit_outcome(s, o);
    }

    fn code_of<T: std::fmt::Debug>(r: Result<T, ControllerError>) -> i32 {
        r.unwrap_err().code
    }

    fn elect_req(id: Option<i64>, designate: bool) -> ElectMaster {
        ElectMaster { cluster_name: "c".into(), broker_name: "b".into(), broker_id: id, designate_elect: designate }
    }

    /// Three replicas: ids, first election, SyncStateSet growth, master death, failover.
    #[test]
    fn a_broker_set_from_ids_to_failover() {
        let r = Requests::default();
        let mut s = ReplicaState::default();
        let mut live = LiveTable::default();
        assert_eq!(r.next_broker_id(&s, "b"), 1);
        let bad = ApplyBrokerId {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            applied_broker_id: 2,
            register_check_code: "a:2;1".into(),
        };
        assert_eq!(code_of(r.apply_broker_id(&s, &bad)), code::CONTROLLER_BROKER_ID_INVALID);
        for id in 1..=3 {
            assert_eq!(r.next_broker_id(&s, "b"), id);
            apply(&r, &mut s, id);
            live.heartbeat(beat(id, NOW, 0, 0, 0));
        }
        // The same broker may apply again (same check code); another may not take the id.
        assert!(r.apply_broker_id(&s, &ApplyBrokerId { register_check_code: "a:2;42".into(), ..bad.clone() }).is_ok());
        assert_eq!(
            code_of(r.apply_broker_id(&s, &ApplyBrokerId { register_check_code: "x:9;1".into(), ..bad.clone() })),
            code::CONTROLLER_BROKER_ID_INVALID
        );
        assert_eq!(s.set("b").unwrap().address_of(2), Some("a:2"));

        // Register: known ids only; no master yet.
        let reg = |id: i64, addr: &str| RegisterBroker {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            broker_id: id,
            broker_address: addr.into(),
        };
        assert_eq!(
            code_of(r.register_broker(&s, &live, &reg(9, "a:9"), NOW)),
            code::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
        );
        let view = commit!(s, r.register_broker(&s, &live, &reg(2, "a:2"), NOW).unwrap());
        assert_eq!((view.master_broker_id, view.master_epoch), (None, 0));

        // First election: the requester wins outright, even if another has more data.
        live.heartbeat(beat(3, NOW, 0, 1_000, 0));
        let e = commit!(s, r.elect_master(&s, &live, &elect_req(Some(2), false), NOW).unwrap());
        assert_eq!((e.view.master_broker_id, e.view.master_epoch, e.view.sync_state_set_epoch), (Some(2), 1, 1));
        assert_eq!(e.view.master_address.as_deref(), Some("a:2"));
        assert_eq!(e.broker_addrs.len(), 3);
        // Asked again: the master still exists, nothing changes.
        let again = r.elect_master(&s, &live, &elect_req(Some(1), false), NOW).unwrap();
        assert!(again.reply.still_exists && again.events.is_empty());
        assert_eq!(again.reply.view.master_broker_id, Some(2));

        // A replica moves: its address is updated on registration.
        let view = commit!(s, r.register_broker(&s, &live, &reg(1, "z:1"), NOW).unwrap());
        assert_eq!(s.set("b").unwrap().address_of(1), Some("z:1"));
        assert_eq!((view.master_broker_id, view.master_address.as_deref()), (Some(2), Some("a:2")));

        // The master grows its SyncStateSet; stale epochs and non-masters are fenced.
        let alter = |ids: &[i64], master: i64, me: i32, sse: i32| AlterSyncStateSet {
            broker_name: "b".into(),
            master_broker_id: master,
            master_epoch: me,
            sync_state_set_epoch: sse,
            new_sync_state_set: ids.iter().copied().collect(),
        };
        assert_eq!(
            code_of(r.alter_sync_state_set(&s, &live, &alter(&[2], 2, 1, 1), NOW)),
            code::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
        );
        assert_eq!(
            code_of(r.alter_sync_state_set(&s, &live, &alter(&[1, 2], 1, 1, 1), NOW)),
            code::CONTROLLER_INVALID_MASTER
        );
        assert_eq!(
            code_of(r.alter_sync_state_set(&s, &live, &alter(&[1, 2], 2, 0, 1), NOW)),
            code::CONTROLLER_FENCED_MASTER_EPOCH
        );
        assert_eq!(
            code_of(r.alter_sync_state_set(&s, &live, &alter(&[1, 2], 2, 1, 0), NOW)),
            code::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
        );
        assert_eq!(
            code_of(r.alter_sync_state_set(&s, &live, &alter(&[2, 7], 2, 1, 1), NOW)),
            code::CONTROLLER_INVALID_REPLICAS
        );
        assert_eq!(
            code_of(r.alter_sync_state_set(&s, &live, &alter(&[1, 3], 2, 1, 1), NOW)),
            code::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
            "a set without the master"
        );
        let (epoch, set) = commit!(s, r.alter_sync_state_set(&s, &live, &alter(&[1, 2, 3], 2, 1, 1), NOW).unwrap());
        assert_eq!((epoch, set.len()), (2, 3));
        assert_eq!(s.set("b").unwrap().sync_state_set_epoch, 2);

        // A dead replica cannot join.
        let later = NOW + 20_000;
        live.heartbeat(beat(2, later, 1, 5_000, 0));
        live.heartbeat(beat(3, later, 1, 5_000, 0));
        assert_eq!(
            code_of(r.alter_sync_state_set(&s, &live, &alter(&[1, 2], 2, 1, 2), later)),
            code::CONTROLLER_BROKER_NOT_ALIVE
        );

        // The master dies: the scan finds the set, the controller elects the in-sync replica
        // with the most data; the old master's epoch is fenced.
        live.heartbeat(beat(1, later, 1, 4_000, 0));
        let much_later = later + 5_000;
        live.heartbeat(beat(1, much_later, 1, 4_000, 0));
        live.heartbeat(beat(3, much_later, 1, 5_000, 0));
        live.remove("c", "b", 2);
        assert_eq!(r.masters_to_replace(&s, &live, much_later), vec!["b".to_owned()]);
        let e = commit!(s, r.elect_master(&s, &live, &elect_req(None, false), much_later).unwrap());
        assert_eq!((e.view.master_broker_id, e.view.master_epoch), (Some(3), 2));
        assert!(r.masters_to_replace(&s, &live, much_later).is_empty());
        assert_eq!(
            code_of(r.alter_sync_state_set(&s, &live, &alter(&[2, 3], 2, 1, 3), much_later)),
            code::CONTROLLER_INVALID_MASTER,
            "the old master is fenced"
        );

        // Admin electMaster designates replica 1: refused while it is out of the SyncStateSet,
        // done once the new master has taken it back in.
        assert_eq!(
            code_of(r.elect_master(&s, &live, &elect_req(Some(1), true), much_later)),
            code::CONTROLLER_ELECT_MASTER_FAILED
        );
        commit!(s, r.alter_sync_state_set(&s, &live, &alter(&[1, 3], 3, 2, 3), much_later).unwrap());
        let e = commit!(s, r.elect_master(&s, &live, &elect_req(Some(1), true), much_later).unwrap());
        assert_eq!((e.view.master_broker_id, e.view.master_epoch), (Some(1), 3));
        assert!(!e.still_exists);

        // Everyone dies: the controller's election finds nobody (2004), a broker's fails (2012).
        let dead = much_later + 60_000;
        assert_eq!(
            code_of(r.elect_master(&s, &live, &elect_req(None, false), dead)),
            code::CONTROLLER_MASTER_NOT_AVAILABLE
        );
        assert_eq!(
            code_of(r.elect_master(&s, &live, &elect_req(Some(1), false), dead)),
            code::CONTROLLER_ELECT_MASTER_FAILED
        );
        s.apply(&Requests::no_master_event("b"));
        let info = r.replica_info(&s, "b").unwrap();
        assert_eq!((info.master_broker_id, info.master_epoch), (None, 4));
        assert_eq!(r.masters_to_replace(&s, &live, dead), vec!["b".to_owned()], "a masterless set is retried");
    }

    #[test]
    fn unknown_sets_get_their_codes() {
        let r = Requests::default();
        let (s, live) = (ReplicaState::default(), LiveTable::default());
        assert_eq!(code_of(r.replica_info(&s, "b")), code::CONTROLLER_BROKER_METADATA_NOT_EXIST);
        assert_eq!(
            code_of(r.elect_master(&s, &live, &elect_req(Some(1), false), NOW)),
            code::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
        );
        let clean = CleanBrokerData { broker_name: "b".into(), broker_ids_to_clean: None, clean_living_broker: false };
        assert_eq!(
            code_of(r.clean_broker_data(&s, &live, &clean, NOW)),
            code::CONTROLLER_INVALID_CLEAN_BROKER_METADATA
        );
        assert!(r.sync_state_data(&s, &live, &["b".into()], NOW).is_empty());
    }

    #[test]
    fn clean_broker_data_refuses_what_is_alive_unless_told() {
        let r = Requests::default();
        let mut s = ReplicaState::default();
        let mut live = LiveTable::default();
        for id in 1..=2 {
            apply(&r, &mut s, id);
            live.heartbeat(beat(id, NOW, 0, 0, 0));
        }
        commit!(s, r.elect_master(&s, &live, &elect_req(Some(1), false), NOW).unwrap());
        let clean = |ids: Option<&str>, living: bool| CleanBrokerData {
            broker_name: "b".into(),
            broker_ids_to_clean: ids.map(str::to_owned),
            clean_living_broker: living,
        };
        let invalid = code::CONTROLLER_INVALID_CLEAN_BROKER_METADATA;
        assert_eq!(code_of(r.clean_broker_data(&s, &live, &clean(None, false), NOW)), invalid, "the set has a master");
        assert_eq!(code_of(r.clean_broker_data(&s, &live, &clean(Some("2"), false), NOW)), invalid, "2 is alive");
        assert_eq!(code_of(r.clean_broker_data(&s, &live, &clean(Some("2;x"), true), NOW)), invalid, "not a number");

        // Replica 2 dies: it can be cleaned; with isCleanLivingBroker only the listed ids go.
        let later = NOW + 30_000;
        live.heartbeat(beat(1, later, 0, 0, 0));
        commit!(s, r.clean_broker_data(&s, &live, &clean(Some("2"), false), later).unwrap());
        assert!(s.set("b").unwrap().address_of(2).is_none());
        apply(&r, &mut s, 3);
        commit!(s, r.clean_broker_data(&s, &live, &clean(Some("3"), true), later).unwrap());
        let set = s.set("b").unwrap();
        assert_eq!(set.replicas.keys().copied().collect::<Vec<_>>(), vec![1]);

        // GET_SYNC_STATE_DATA shows who is in sync and alive.
        let data = r.sync_state_data(&s, &live, &["b".into()], later);
        let b = &data["b"];
        assert_eq!((b.master_broker_id, b.master_address.as_deref()), (Some(1), Some("a:1")));
        assert_eq!(b.in_sync_replicas.len(), 1);
        assert!(b.in_sync_replicas[0].alive);
        let json = serde_json::to_string(&data).unwrap();
        assert!(
            json.contains(r#""inSyncReplicas":[{"brokerName":"b","brokerId":1,"brokerAddress":"a:1","alive":true}]"#),
            "{json}"
        );

        commit!(s, r.clean_broker_data(&s, &live, &clean(None, true), later).unwrap());
        assert!(s.sets.is_empty());
    }
}
