//! A topic's publish info: the writable queues a producer picks from, built from the name
//! server's route. Java: `TopicPublishInfo` and `MQClientInstance#topicRouteData2TopicPublishInfo`.

use std::sync::atomic::{AtomicUsize, Ordering};

use ferromq_protocol::body::{perm, MessageQueue, TopicRouteData};

/// The queues of one topic a producer may write to.
#[derive(Debug, Default)]
pub(crate) struct PublishInfo {
    /// Writable queues, grouped by broker name.
    pub(crate) queues: Vec<MessageQueue>,
    /// Round-robin position.
    next: AtomicUsize,
}

impl PublishInfo {
    /// Builds the queues of `topic` from `route`. With `orderTopicConf`
    /// (`brokerName:queueNum;...`) those queues are used as given; otherwise each writable
    /// broker group with a master contributes `writeQueueNums` queues.
    pub(crate) fn from_route(topic: &str, route: &TopicRouteData) -> Self {
        let mut queues = Vec::new();
        let conf = route.order_topic_conf.as_deref().unwrap_or("").trim();
        if !conf.is_empty() {
            for item in conf.split(';') {
                let Some((broker, nums)) = item.split_once(':') else { continue };
                let nums: i32 = nums.trim().parse().unwrap_or(0);
                queues.extend((0..nums).map(|q| MessageQueue::new(topic, broker.trim(), q)));
            }
            return PublishInfo { queues, next: AtomicUsize::new(0) };
        }
        let mut datas = route.queue_datas.clone();
        datas.sort();
        for qd in datas.iter().filter(|qd| perm::is_writeable(qd.perm)) {
            let has_master =
                route.broker_datas.iter().any(|bd| bd.broker_name == qd.broker_name && bd.master_addr().is_some());
            if has_master {
                queues.extend((0..qd.write_queue_nums).map(|q| MessageQueue::new(topic, &qd.broker_name, q)));
            }
        }
        PublishInfo { queues, next: AtomicUsize::new(0) }
    }

    /// Whether any queue is writable.
    pub(crate) fn is_ok(&self) -> bool {
        !self.queues.is_empty()
    }

    /// The next queue round-robin, avoiding `last_broker` when another broker has queues.
    /// Java: `TopicPublishInfo#selectOneMessageQueue(String)`.
    pub(crate) fn select(&self, last_broker: Option<&str>) -> Option<&MessageQueue> {
        self.select_where(|mq| last_broker.is_none_or(|b| mq.broker_name != b)).or_else(|| self.select_where(|_| true))
    }

    /// The next queue round-robin that satisfies `accept`, if any does.
    pub(crate) fn select_where(&self, accept: impl Fn(&MessageQueue) -> bool) -> Option<&MessageQueue> {
        let n = self.queues.len();
        for _ in 0..n {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % n;
            if accept(&self.queues[i]) {
                return Some(&self.queues[i]);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ferromq_protocol::body::{BrokerData, QueueData};

    use super::*;

    fn route(groups: &[(&str, i32, bool)]) -> TopicRouteData {
        let mut r = TopicRouteData::default();
        for (name, perm, master) in groups {
            r.queue_datas.push(QueueData {
                broker_name: (*name).into(),
                perm: *perm,
                read_queue_nums: 4,
                write_queue_nums: 2,
                topic_sys_flag: 0,
            });
            let id = if *master { 0 } else { 1 };
            r.broker_datas.push(BrokerData::new("c", *name, BTreeMap::from([(id, format!("{name}:1"))])));
        }
        r
    }

    #[test]
    fn only_writable_groups_with_a_master_give_queues() {
        let r = route(&[("b", perm::PERM_READ_WRITE, true), ("a", perm::PERM_READ, true), ("c", 6, false)]);
        let info = PublishInfo::from_route("T", &r);
        assert_eq!(info.queues, vec![MessageQueue::new("T", "b", 0), MessageQueue::new("T", "b", 1)]);
    }

    #[test]
    fn order_topic_conf_defines_the_queues() {
        let mut r = route(&[("a", 6, true)]);
        r.order_topic_conf = Some("a:1;b:2".into());
        let info = PublishInfo::from_route("T", &r);
        assert_eq!(info.queues.len(), 3);
        assert_eq!(info.queues[2], MessageQueue::new("T", "b", 1));
    }

    #[test]
    fn select_avoids_the_last_broker() {
        let info = PublishInfo::from_route("T", &route(&[("a", 6, true), ("b", 6, true)]));
        for _ in 0..8 {
            assert_eq!(info.select(Some("a")).unwrap().broker_name, "b");
        }
        let one = PublishInfo::from_route("T", &route(&[("a", 6, true)]));
        assert_eq!(one.select(Some("a")).unwrap().broker_name, "a");
    }
}
