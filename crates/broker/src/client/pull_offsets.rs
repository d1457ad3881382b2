//! Where each pull consumer group's last pull left each queue: the offset the next pull starts
//! from. The consume statistics and `/metrics` tell messages delivered but not yet committed
//! (in flight) from those not delivered yet (ready) by it. Java:
//! `ConsumerOffsetManager#pullOffsetTable` (`commitPullOffset`, `queryPullOffset`). In memory
//! only, as in Java; bounded by the groups and queues that pull.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// `topic@group` -> queue id -> next pull offset.
#[derive(Debug, Default)]
pub struct PullOffsets {
    table: Mutex<HashMap<String, HashMap<i32, i64>>>,
}

impl PullOffsets {
    fn table(&self) -> MutexGuard<'_, HashMap<String, HashMap<i32, i64>>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A pull of `key` (`topic@group`) on `queue_id` answered up to `next` (exclusive).
    pub fn commit(&self, key: &str, queue_id: i32, next: i64) {
        let mut table = self.table();
        match table.get_mut(key) {
            Some(queues) => {
                queues.insert(queue_id, next);
            }
            None => {
                table.insert(key.to_owned(), HashMap::from([(queue_id, next)]));
            }
        }
    }

    /// Where the next pull of `key` on `queue_id` starts, if the group pulled it.
    pub fn query(&self, key: &str, queue_id: i32) -> Option<i64> {
        self.table().get(key).and_then(|q| q.get(&queue_id)).copied()
    }

    /// Forgets `key` (an offset reset moved the group; the next pull says where it is).
    pub fn forget(&self, key: &str) {
        self.table().remove(key);
    }

    /// Forgets every topic of `group` (the group was deleted).
    pub fn forget_group(&self, group: &str) {
        self.table().retain(|k, _| k.split_once('@').is_none_or(|(_, g)| g != group));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pulls_are_remembered_per_queue_and_forgotten_on_reset() {
        let p = PullOffsets::default();
        assert_eq!(p.query("T@g", 0), None);
        p.commit("T@g", 0, 5);
        p.commit("T@g", 0, 9);
        p.commit("T@g", 1, 2);
        p.commit("U@g", 0, 1);
        p.commit("T@h", 0, 3);
        assert_eq!((p.query("T@g", 0), p.query("T@g", 1)), (Some(9), Some(2)));
        p.forget("T@g");
        assert_eq!(p.query("T@g", 0), None);
        p.forget_group("g");
        assert_eq!((p.query("U@g", 0), p.query("T@h", 0)), (None, Some(3)));
    }
}
