//! The election policy (Java's `DefaultElectPolicy`, controller-mode.md §4): who becomes the
//! master of a broker set.
//!
//! Candidates are the alive members of the SyncStateSet; only when `enableElectUncleanMaster`
//! is on, and none of them can be chosen, every alive registered replica (that can lose
//! messages: a replica outside the set may miss acknowledged data). Among candidates: the old
//! master if it is one (and no other replica is preferred), else the preferred replica (admin
//! `electMaster`) if it is one, else the highest epoch, then the highest max offset, then the
//! lowest `brokerElectionPriority`, then the lowest id.
//!
//! Two deviations from Java, both toward the safe side (docs/decisions/0015): Java compares max
//! offsets as a difference cast to `int`, so offsets 2 GiB apart can order the wrong way (the
//! replica with less data wins); and candidates that compare equal collapse in its `TreeSet`,
//! so which one wins is arbitrary. Here offsets compare as 64-bit numbers and ties go to the
//! lowest id.

use std::collections::BTreeSet;

use crate::live::{BrokerLiveInfo, LiveTable};
use crate::state::BrokerSet;

/// An election's inputs beyond the broker set.
#[derive(Debug, Clone, Copy)]
pub struct Ballot<'a> {
    /// The heartbeat table (who is alive, and their epochs and offsets).
    pub live: &'a LiveTable,
    /// The time to judge liveness at.
    pub now_ms: i64,
    /// The replica an admin asked for (`designateElect`).
    pub prefer: Option<i64>,
    /// `enableElectUncleanMaster`.
    pub unclean: bool,
}

/// The replica to make master, `None` when no replica can be.
pub fn elect(set: &BrokerSet, ballot: Ballot<'_>) -> Option<i64> {
    let alive = |ids: &mut dyn Iterator<Item = i64>| -> Vec<&BrokerLiveInfo> {
        ids.filter_map(|id| ballot.live.alive(&set.cluster_name, &set.broker_name, id, ballot.now_ms)).collect()
    };
    let in_sync = alive(&mut set.sync_state_set.iter().copied());
    if let Some(id) = choose(&in_sync, set.master_broker_id, ballot.prefer) {
        return Some(id);
    }
    if ballot.unclean {
        let registered: BTreeSet<i64> = set.replicas.keys().copied().collect();
        let all = alive(&mut registered.into_iter());
        return choose(&all, set.master_broker_id, ballot.prefer);
    }
    None
}

fn choose(candidates: &[&BrokerLiveInfo], old_master: Option<i64>, prefer: Option<i64>) -> Option<i64> {
    let has = |id: i64| candidates.iter().any(|c| c.broker_id == id);
    if let Some(old) = old_master.filter(|&old| has(old)) {
        if prefer.is_none_or(|p| p == old) {
            return Some(old);
        }
    }
    if let Some(p) = prefer {
        return has(p).then_some(p);
    }
    candidates
        .iter()
        .max_by(|a, b| {
            a.epoch
                .cmp(&b.epoch)
                .then(a.max_offset.cmp(&b.max_offset))
                .then(b.election_priority.cmp(&a.election_priority))
                .then(b.broker_id.cmp(&a.broker_id))
        })
        .map(|c| c.broker_id)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::live::tests::beat;
    use crate::state::Replica;

    fn set(ids: &[i64], in_sync: &[i64], master: Option<i64>) -> BrokerSet {
        BrokerSet {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            next_assign_broker_id: ids.iter().max().unwrap_or(&0) + 1,
            replicas: ids
                .iter()
                .map(|&id| (id, Replica { address: format!("a:{id}"), register_check_code: String::new() }))
                .collect::<BTreeMap<_, _>>(),
            master_epoch: 1,
            master_broker_id: master,
            sync_state_set: in_sync.iter().copied().collect(),
            sync_state_set_epoch: 1,
        }
    }

    fn ballot(live: &LiveTable, prefer: Option<i64>, unclean: bool) -> Ballot<'_> {
        Ballot { live, now_ms: 1_000, prefer, unclean }
    }

    #[test]
    fn epoch_then_offset_then_priority_then_id() {
        let mut live = LiveTable::default();
        live.heartbeat(beat(1, 1_000, 3, 100, 5));
        live.heartbeat(beat(2, 1_000, 4, 50, 5));
        live.heartbeat(beat(3, 1_000, 4, 60, 5));
        let s = set(&[1, 2, 3], &[1, 2, 3], None);
        assert_eq!(elect(&s, ballot(&live, None, false)), Some(3), "higher epoch, then larger offset");

        live.heartbeat(beat(2, 1_000, 4, 60, 1));
        assert_eq!(elect(&s, ballot(&live, None, false)), Some(2), "equal offsets: lower priority wins");
        live.heartbeat(beat(3, 1_000, 4, 60, 1));
        assert_eq!(elect(&s, ballot(&live, None, false)), Some(2), "all equal: the lower id");

        // Offsets far apart compare as 64-bit numbers (Java's int cast would invert these).
        live.heartbeat(beat(2, 1_000, 4, 1 << 32, 1));
        live.heartbeat(beat(3, 1_000, 4, (1 << 33) + 1, 1));
        assert_eq!(elect(&s, ballot(&live, None, false)), Some(3));
    }

    #[test]
    fn old_master_stays_unless_another_is_preferred() {
        let mut live = LiveTable::default();
        live.heartbeat(beat(1, 1_000, 1, 0, 0));
        live.heartbeat(beat(2, 1_000, 9, 999, 0));
        let s = set(&[1, 2], &[1, 2], Some(1));
        assert_eq!(elect(&s, ballot(&live, None, false)), Some(1));
        assert_eq!(elect(&s, ballot(&live, Some(1), false)), Some(1));
        assert_eq!(elect(&s, ballot(&live, Some(2), false)), Some(2));
        assert_eq!(elect(&s, ballot(&live, Some(7), false)), None, "a preferred replica that cannot be chosen");
    }

    #[test]
    fn only_alive_in_sync_replicas_unless_unclean() {
        let mut live = LiveTable::default();
        live.heartbeat(beat(1, -20_000, 1, 0, 0)); // timed out
        live.heartbeat(beat(2, 1_000, 1, 0, 0)); // alive, not in sync
        let s = set(&[1, 2], &[1], Some(1));
        assert_eq!(elect(&s, ballot(&live, None, false)), None);
        assert_eq!(elect(&s, ballot(&live, None, true)), Some(2));
        assert_eq!(elect(&set(&[1, 2], &[1], None), ballot(&LiveTable::default(), None, true)), None);
    }
}
