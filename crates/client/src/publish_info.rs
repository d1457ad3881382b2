//! A topic's publish info: the writable queues a producer picks from, built from the name
//! server's route. Java: `TopicPublishInfo` and `MQClientInstance#topicRouteData2TopicPublishInfo`.

use std::sync::atomic::{AtomicUsize, Ordering};

use std::collections::BTreeMap;

use ferromq_protocol::body::static_topic::{mock_broker_name, LOGICAL_QUEUE_MOCK_BROKER_PREFIX};
use ferromq_protocol::body::{perm, MessageQueue, TopicQueueMappingInfo, TopicRouteData};

/// The queues of one topic a producer may write to.
#[derive(Debug, Default)]
pub(crate) struct PublishInfo {
    /// Writable queues, grouped by broker name.
    pub(crate) queues: Vec<MessageQueue>,
    /// Round-robin position.
    next: AtomicUsize,
}

/// A static topic's route mappings: logic queue id -> the broker leading it (the mapping of
/// the newest epoch wins where two claim one). Java:
/// `ClientMetadata#topicRouteData2EndpointsForStaticTopic`.
pub(crate) fn logic_queue_leaders(route: &TopicRouteData) -> BTreeMap<i32, String> {
    let mut leaders: BTreeMap<i32, (i64, String)> = BTreeMap::new();
    for (bname, info) in route.topic_queue_mapping_by_broker.iter().flatten() {
        let Ok(info) = serde_json::from_value::<TopicQueueMappingInfo>(info.clone()) else { continue };
        if info.bname != *bname {
            continue;
        }
        for logic in info.curr_id_map.keys() {
            let newer = leaders.get(logic).is_none_or(|(epoch, _)| info.epoch > *epoch);
            if newer {
                leaders.insert(*logic, (info.epoch, info.bname.clone()));
            }
        }
    }
    leaders.into_iter().map(|(logic, (_, bname))| (logic, bname)).collect()
}

/// A static topic's logic queues, under the made-up broker name of their scope, for those with
/// a leader; empty for other topics.
pub(crate) fn logic_queues(topic: &str, route: &TopicRouteData) -> Vec<MessageQueue> {
    let leaders = logic_queue_leaders(route);
    if leaders.is_empty() {
        return Vec::new();
    }
    let scope = route
        .topic_queue_mapping_by_broker
        .iter()
        .flatten()
        .find_map(|(_, info)| serde_json::from_value::<TopicQueueMappingInfo>(info.clone()).ok())
        .map_or_else(|| TopicQueueMappingInfo::default().scope, |info| info.scope);
    let broker = mock_broker_name(&scope);
    leaders.keys().map(|logic| MessageQueue::new(topic, &broker, *logic)).collect()
}

/// Whether `mq` is a static topic's logic queue (its broker name is made up).
pub(crate) fn is_logic_queue(mq: &MessageQueue) -> bool {
    mq.broker_name.starts_with(LOGICAL_QUEUE_MOCK_BROKER_PREFIX)
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
        // A static topic: its logic queues, each sent to the broker leading it.
        let logic = logic_queues(topic, route);
        if !logic.is_empty() {
            return PublishInfo { queues: logic, next: AtomicUsize::new(0) };
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
