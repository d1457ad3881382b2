//! How subscribe-mode consumers share a topic's queues. Java: `AllocateMessageQueueStrategy`.

use ferromq_protocol::body::MessageQueue;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn mqs(n: i32) -> Vec<MessageQueue> {
        (0..n).map(|q| MessageQueue::new("T", "b", q)).collect()
    }

    #[test]
    fn averagely_shares_like_java() {
        let cids: Vec<String> = ["c1", "c2", "c3"].iter().map(|s| s.to_string()).collect();
        let ids = |v: Vec<MessageQueue>| v.iter().map(|m| m.queue_id).collect::<Vec<_>>();
        assert_eq!(ids(allocate_averagely(&mqs(8), &cids, "c1")), vec![0, 1, 2]);
        assert_eq!(ids(allocate_averagely(&mqs(8), &cids, "c2")), vec![3, 4, 5]);
        assert_eq!(ids(allocate_averagely(&mqs(8), &cids, "c3")), vec![6, 7]);
        assert_eq!(ids(allocate_averagely(&mqs(2), &cids, "c3")), Vec::<i32>::new());
        assert_eq!(ids(allocate_averagely(&mqs(2), &cids, "c2")), vec![1]);
        assert!(allocate_averagely(&mqs(4), &cids, "other").is_empty());
    }
}
