//! Which broker of a queue's broker name a consumer pulls the queue from next: the broker id
//! the last pull answer suggested (`suggestWhichBrokerId`), the master until there is one.
//! A master that finds a consumer reading cold data (beyond `accessMessageInMemoryMaxRatio`)
//! suggests the group's `whichBrokerWhenConsumeSlowly` slave when `slaveReadEnable` is on,
//! and a slave sends the consumer back to the master once it has caught up.
//! Java: `PullAPIWrapper#pullFromWhichNodeTable`, `updatePullFromWhichNode`,
//! `recalculatePullFromWhichNode`. Turning a broker id into an address (with the fall-backs
//! when that broker is not in the route) is `ClientInstance::find_broker_in_subscribe`.

use std::collections::HashMap;
use std::sync::Mutex;

use ferromq_protocol::body::{MessageQueue, MASTER_ID};
use tracing::debug;

use crate::client_instance::lock;

/// Queue -> broker id of its next pull, one table per consumer. Its size is bounded by the
/// queues the consumer has pulled; entries stay, as in Java, so a queue assigned again
/// resumes where the broker sent it.
#[derive(Debug, Default)]
pub(crate) struct PullNodeTable {
    nodes: Mutex<HashMap<MessageQueue, i64>>,
}

impl PullNodeTable {
    /// Records the broker id a pull answer suggested for `mq`.
    /// Java: `PullAPIWrapper#updatePullFromWhichNode`.
    pub(crate) fn suggest(&self, mq: &MessageQueue, broker_id: i64) {
        let previous = lock(&self.nodes).insert(mq.clone(), broker_id);
        if previous.unwrap_or(MASTER_ID) != broker_id {
            debug!(topic = %mq.topic, queue_id = mq.queue_id, broker_name = %mq.broker_name, broker_id,
                "pulls of the queue move to the suggested broker");
        }
    }

    /// The broker id the next pull of `mq` goes to: the last suggestion, else the master.
    /// Java: `PullAPIWrapper#recalculatePullFromWhichNode` (without `connectBrokerByUser`).
    pub(crate) fn node_of(&self, mq: &MessageQueue) -> i64 {
        lock(&self.nodes).get(mq).copied().unwrap_or(MASTER_ID)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_start_on_the_master_and_follow_the_last_suggestion() {
        let table = PullNodeTable::default();
        let (q0, q1) = (MessageQueue::new("T", "broker-a", 0), MessageQueue::new("T", "broker-a", 1));
        assert_eq!(table.node_of(&q0), MASTER_ID);
        table.suggest(&q0, 1);
        assert_eq!(table.node_of(&q0), 1);
        assert_eq!(table.node_of(&q1), MASTER_ID, "per queue");
        table.suggest(&q0, MASTER_ID);
        assert_eq!(table.node_of(&q0), MASTER_ID);
    }
}
