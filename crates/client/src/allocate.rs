//! How subscribe-mode consumers share a topic's queues. Java: `AllocateMessageQueueStrategy`.

use std::collections::BTreeMap;

use ferromq_protocol::body::MessageQueue;

/// Virtual nodes per client on the consistent-hash ring by default (Java: 10).
pub const DEFAULT_VIRTUAL_NODES: usize = 10;

/// How a consumer group shares a topic's queues among its clients.
/// Java: the `AllocateMessageQueueStrategy` implementations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllocateStrategy {
    /// Contiguous, near-equal ranges of the sorted queues. Java: `AllocateMessageQueueAveragely`.
    #[default]
    Averagely,
    /// Queue `i` of the sorted queues goes to client `i % n` of the sorted clients.
    /// Java: `AllocateMessageQueueAveragelyByCircle`.
    AveragelyByCircle,
    /// Every client gets exactly this list. Java: `AllocateMessageQueueByConfig`.
    ByConfig(Vec<MessageQueue>),
    /// Queues routed over an MD5 hash ring of the clients, each client with `virtual_nodes`
    /// points on it ([`DEFAULT_VIRTUAL_NODES`] in Java). Java: `AllocateMessageQueueConsistentHash`.
    ConsistentHash {
        /// Points per client on the ring.
        virtual_nodes: usize,
    },
}

impl AllocateStrategy {
    /// Java's name of the strategy (`getName`).
    pub fn name(&self) -> &'static str {
        match self {
            AllocateStrategy::Averagely => "AVG",
            AllocateStrategy::AveragelyByCircle => "AVG_BY_CIRCLE",
            AllocateStrategy::ByConfig(_) => "CONFIG",
            AllocateStrategy::ConsistentHash { .. } => "CONSISTENT_HASH",
        }
    }

    /// The queues `client_id` gets out of `all` shared among `client_ids`. A client not in
    /// `client_ids`, or empty `all` or `client_ids`, gets nothing (Java logs and returns
    /// nothing, or throws for empty inputs).
    pub fn allocate(&self, all: &[MessageQueue], client_ids: &[String], client_id: &str) -> Vec<MessageQueue> {
        if all.is_empty() || !client_ids.iter().any(|c| c == client_id) {
            return Vec::new();
        }
        match self {
            AllocateStrategy::Averagely => allocate_averagely(all, client_ids, client_id),
            AllocateStrategy::AveragelyByCircle => allocate_by_circle(all, client_ids, client_id),
            AllocateStrategy::ByConfig(queues) => queues.clone(),
            AllocateStrategy::ConsistentHash { virtual_nodes } => {
                allocate_consistent_hash(all, client_ids, client_id, *virtual_nodes)
            }
        }
    }
}

/// The queues `client_id` gets out of `all` shared among `client_ids`.
/// Java: `AllocateMessageQueueAveragely`.
pub fn allocate_averagely(all: &[MessageQueue], client_ids: &[String], client_id: &str) -> Vec<MessageQueue> {
    let mut mqs = all.to_vec();
    mqs.sort();
    let mut cids = client_ids.to_vec();
    cids.sort();
    let Some(index) = cids.iter().position(|c| c == client_id) else { return Vec::new() };
    if mqs.is_empty() {
        return Vec::new();
    }
    let (n, c) = (mqs.len(), cids.len());
    let rem = n % c;
    let average = if n <= c {
        1
    } else if rem > 0 && index < rem {
        n / c + 1
    } else {
        n / c
    };
    let start = if rem > 0 && index < rem { index * average } else { index * average + rem };
    let range = average.min(n.saturating_sub(start));
    (0..range).map(|i| mqs[(start + i) % n].clone()).collect()
}

/// Every `n`-th sorted queue starting at the client's sorted index.
/// Java: `AllocateMessageQueueAveragelyByCircle` (the Java rebalance sorts both lists first).
fn allocate_by_circle(all: &[MessageQueue], client_ids: &[String], client_id: &str) -> Vec<MessageQueue> {
    let mut mqs = all.to_vec();
    mqs.sort();
    let mut cids = client_ids.to_vec();
    cids.sort();
    cids.dedup();
    let Some(index) = cids.iter().position(|c| c == client_id) else { return Vec::new() };
    mqs.into_iter().skip(index).step_by(cids.len()).collect()
}

/// Queues whose ring successor is one of `client_id`'s virtual nodes.
/// Java: `AllocateMessageQueueConsistentHash` over `ConsistentHashRouter`.
fn allocate_consistent_hash(
    all: &[MessageQueue],
    client_ids: &[String],
    client_id: &str,
    virtual_nodes: usize,
) -> Vec<MessageQueue> {
    let mut cids: Vec<&str> = client_ids.iter().map(String::as_str).collect();
    cids.sort_unstable();
    cids.dedup();
    // On a hash collision the later point wins, as with Java's `TreeMap#put`; sorting the
    // clients first makes the ring independent of the order the broker listed them in.
    let mut ring: BTreeMap<u32, &str> = BTreeMap::new();
    for cid in cids {
        for i in 0..virtual_nodes {
            ring.insert(md5_hash(&format!("{cid}-{i}")), cid);
        }
    }
    let Some((_, &first)) = ring.first_key_value() else { return Vec::new() };
    all.iter()
        .filter(|mq| {
            let h = md5_hash(&queue_key(mq));
            let owner = ring.range(h..).next().map_or(first, |(_, &c)| c);
            owner == client_id
        })
        .cloned()
        .collect()
}

/// Java's `MessageQueue#toString`, the queue's key on the ring.
fn queue_key(mq: &MessageQueue) -> String {
    format!("MessageQueue [topic={}, brokerName={}, queueId={}]", mq.topic, mq.broker_name, mq.queue_id)
}

/// The first four bytes, big-endian, of the MD5 digest of the UTF-8 key.
/// Java: `ConsistentHashRouter.MD5Hash#hash` (a non-negative `long` below 2^32).
fn md5_hash(key: &str) -> u32 {
    let digest = md5::compute(key.as_bytes());
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mqs(n: i32) -> Vec<MessageQueue> {
        (0..n).map(|q| MessageQueue::new("T", "b", q)).collect()
    }

    fn cids(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn ids(v: Vec<MessageQueue>) -> Vec<i32> {
        v.iter().map(|m| m.queue_id).collect()
    }

    #[test]
    fn averagely_shares_like_java() {
        let cids = cids(&["c1", "c2", "c3"]);
        assert_eq!(ids(allocate_averagely(&mqs(8), &cids, "c1")), vec![0, 1, 2]);
        assert_eq!(ids(allocate_averagely(&mqs(8), &cids, "c2")), vec![3, 4, 5]);
        assert_eq!(ids(allocate_averagely(&mqs(8), &cids, "c3")), vec![6, 7]);
        assert_eq!(ids(allocate_averagely(&mqs(2), &cids, "c3")), Vec::<i32>::new());
        assert_eq!(ids(allocate_averagely(&mqs(2), &cids, "c2")), vec![1]);
        assert!(allocate_averagely(&mqs(4), &cids, "other").is_empty());
        let s = AllocateStrategy::default();
        assert_eq!(s, AllocateStrategy::Averagely);
        assert_eq!(ids(s.allocate(&mqs(8), &cids, "c2")), vec![3, 4, 5]);
    }

    #[test]
    fn by_circle_deals_queues_round_robin() {
        let s = AllocateStrategy::AveragelyByCircle;
        // Unsorted inputs: both lists are sorted first.
        let cids = cids(&["c3", "c1", "c2"]);
        let mut all = mqs(8);
        all.reverse();
        assert_eq!(ids(s.allocate(&all, &cids, "c1")), vec![0, 3, 6]);
        assert_eq!(ids(s.allocate(&all, &cids, "c2")), vec![1, 4, 7]);
        assert_eq!(ids(s.allocate(&all, &cids, "c3")), vec![2, 5]);
        assert_eq!(ids(s.allocate(&mqs(2), &cids, "c3")), Vec::<i32>::new());
        assert!(s.allocate(&all, &cids, "other").is_empty());
        assert!(s.allocate(&[], &cids, "c1").is_empty());
        assert!(s.allocate(&all, &[], "c1").is_empty());
    }

    #[test]
    fn by_config_gives_every_client_the_list() {
        let configured = vec![MessageQueue::new("T", "b", 5), MessageQueue::new("U", "a", 1)];
        let s = AllocateStrategy::ByConfig(configured.clone());
        let cids = cids(&["c1", "c2"]);
        assert_eq!(s.allocate(&mqs(8), &cids, "c1"), configured);
        assert_eq!(s.allocate(&mqs(8), &cids, "c2"), configured);
        assert!(s.allocate(&mqs(8), &cids, "other").is_empty());
    }

    #[test]
    fn md5_hash_matches_java() {
        // python3: int.from_bytes(hashlib.md5(b"client-0").digest()[:4], "big")
        assert_eq!(md5_hash("client-0"), 549_064_399);
        assert_eq!(md5_hash("MessageQueue [topic=T, brokerName=b, queueId=0]"), 562_732_085);
        assert_eq!(queue_key(&MessageQueue::new("T", "b", 0)), "MessageQueue [topic=T, brokerName=b, queueId=0]");
    }

    #[test]
    fn consistent_hash_matches_an_independent_model() {
        // Expected shares computed with a Python model of Java's ring (hashlib MD5, sorted
        // ring, first point at or after the queue's hash, wrapping).
        let cids = cids(&["c1", "c2", "c3"]);
        let s = AllocateStrategy::ConsistentHash { virtual_nodes: DEFAULT_VIRTUAL_NODES };
        assert_eq!(ids(s.allocate(&mqs(8), &cids, "c1")), vec![2]);
        assert_eq!(ids(s.allocate(&mqs(8), &cids, "c2")), vec![0, 3, 4, 7]);
        assert_eq!(ids(s.allocate(&mqs(8), &cids, "c3")), vec![1, 5, 6]);
        let one = AllocateStrategy::ConsistentHash { virtual_nodes: 1 };
        assert_eq!(ids(one.allocate(&mqs(8), &cids, "c1")), Vec::<i32>::new());
        assert_eq!(ids(one.allocate(&mqs(8), &cids, "c3")), vec![1, 2, 5, 6]);
    }

    #[test]
    fn consistent_hash_is_a_stable_partition() {
        let s = AllocateStrategy::ConsistentHash { virtual_nodes: DEFAULT_VIRTUAL_NODES };
        let all = mqs(32);
        let clients = cids(&["10.0.0.1@a", "10.0.0.2@b", "10.0.0.3@c", "10.0.0.4@d"]);
        let share = |all: &[MessageQueue], clients: &[String]| -> BTreeMap<String, Vec<MessageQueue>> {
            clients.iter().map(|c| (c.clone(), s.allocate(all, clients, c))).collect()
        };
        let before = share(&all, &clients);

        // Every queue goes to exactly one client.
        let mut assigned: Vec<MessageQueue> = before.values().flatten().cloned().collect();
        assigned.sort();
        assert_eq!(assigned, all);

        // The input order does not matter.
        let mut rev_all = all.clone();
        rev_all.reverse();
        let mut rev_clients = clients.clone();
        rev_clients.reverse();
        for (c, mine) in share(&rev_all, &rev_clients) {
            let mut mine = mine;
            mine.sort();
            assert_eq!(mine, before[&c]);
        }

        // Removing a client moves only that client's queues.
        let gone = &clients[1];
        let rest: Vec<String> = clients.iter().filter(|c| *c != gone).cloned().collect();
        let after = share(&all, &rest);
        for c in &rest {
            for mq in &before[c] {
                assert!(after[c].contains(mq), "{mq:?} moved away from {c}");
            }
        }
        let moved: usize = rest.iter().map(|c| after[c].len() - before[c].len()).sum();
        assert_eq!(moved, before[gone].len());
        assert!(s.allocate(&all, &rest, gone).is_empty());

        // No virtual nodes: an empty ring gives nothing.
        let empty = AllocateStrategy::ConsistentHash { virtual_nodes: 0 };
        assert!(empty.allocate(&all, &clients, &clients[0]).is_empty());
    }

    #[test]
    fn names_match_java() {
        assert_eq!(AllocateStrategy::Averagely.name(), "AVG");
        assert_eq!(AllocateStrategy::AveragelyByCircle.name(), "AVG_BY_CIRCLE");
        assert_eq!(AllocateStrategy::ByConfig(Vec::new()).name(), "CONFIG");
        assert_eq!(AllocateStrategy::ConsistentHash { virtual_nodes: 10 }.name(), "CONSISTENT_HASH");
    }
}
