//! The collector: every `collect_interval` it samples each broker's put and get TPS (from
//! GET_BROKER_RUNTIME_INFO) and, less often, each topic's in and out TPS and day totals
//! (VIEW_BROKER_STATS_DATA `TOPIC_PUT_NUMS` of the topic and `GROUP_GET_NUMS` of each group
//! consuming it, on the brokers of its route, as rocketmq-dashboard collects them), keeping the
//! last [`POINTS`] samples of each series in memory for the charts. rocketmq-dashboard samples each minute into daily files; FerroMQ keeps an hour
//! in memory (bounded: [`BROKERS_MAX`] brokers, [`TOPICS_MAX`] topics) and writes nothing.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use ferromq_protocol::topic_validator::{is_retry_or_dlq_topic, is_system_topic};
use tracing::debug;

use crate::state::Dashboard;

/// Samples kept per series (an hour at the default 5 s interval).
pub(crate) const POINTS: usize = 720;
/// Brokers whose TPS is kept; more are not charted.
pub(crate) const BROKERS_MAX: usize = 64;
/// Topics whose TPS is kept (the first by name; system, retry and DLQ topics are not charted).
pub(crate) const TOPICS_MAX: usize = 100;
/// Consumer groups of a topic whose deliveries are counted.
const GROUPS_PER_TOPIC_MAX: usize = 32;
/// Topics are sampled every this many broker samples (each costs a request per broker).
const TOPIC_EVERY: u64 = 3;

/// One sample: when (ms since the epoch) and the value.
pub(crate) type Point = (i64, f64);

/// One sample of a topic.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct TopicPoint {
    /// When (ms since the epoch).
    pub(crate) at: i64,
    /// Messages stored per second (the last minute).
    pub(crate) in_tps: f64,
    /// Messages stored in the last day.
    pub(crate) in_day: i64,
    /// Messages delivered per second to every group (the last minute).
    pub(crate) out_tps: f64,
    /// Messages delivered in the last day.
    pub(crate) out_day: i64,
}

/// A broker's series.
#[derive(Debug, Default)]
pub(crate) struct BrokerSeries {
    /// Messages stored per second.
    pub(crate) put: VecDeque<Point>,
    /// Messages delivered per second.
    pub(crate) get: VecDeque<Point>,
}

/// The sampled series.
#[derive(Debug, Default)]
pub(crate) struct History {
    /// By `brokerName:brokerId`.
    pub(crate) brokers: BTreeMap<String, BrokerSeries>,
    /// By topic.
    pub(crate) topics: BTreeMap<String, VecDeque<TopicPoint>>,
    /// Topics past [`TOPICS_MAX`] at the last topic sample.
    pub(crate) topics_not_charted: usize,
}

fn push<P>(series: &mut VecDeque<P>, point: P) {
    if series.len() == POINTS {
        series.pop_front();
    }
    series.push_back(point);
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The first figure of a runtime-info TPS value (`"12.5 11.0 10.2"`: the last 10 s, 1 min, 10 min).
pub(crate) fn first_tps(value: Option<&String>) -> f64 {
    value.and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse().ok()).unwrap_or(0.0)
}

/// Whether a topic is charted: user topics only (not RocketMQ's, not retry or DLQ topics, not
/// the topics brokers and clusters register under their own names).
pub(crate) fn charted(topic: &str, cluster: &ferromq_protocol::body::ClusterInfo) -> bool {
    !is_system_topic(topic)
        && !is_retry_or_dlq_topic(topic)
        && !cluster.cluster_addr_table.contains_key(topic)
        && !cluster.broker_addr_table.contains_key(topic)
}

/// Samples until the task is aborted.
pub(crate) async fn run(dashboard: Arc<Dashboard>) {
    let mut tick = tokio::time::interval(dashboard.config().collect_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for round in 0u64.. {
        tick.tick().await;
        sample_brokers(&dashboard).await;
        if round % TOPIC_EVERY == 0 {
            sample_topics(&dashboard).await;
        }
    }
}

async fn sample_brokers(dashboard: &Dashboard) {
    let admin = dashboard.admin();
    let cluster = match admin.cluster_info().await {
        Ok(c) => c,
        Err(e) => {
            debug!(error = %e, "dashboard collector: no cluster info");
            return;
        }
    };
    let at = now_ms();
    let mut samples = Vec::new();
    'brokers: for (name, data) in &cluster.broker_addr_table {
        for (id, addr) in &data.broker_addrs {
            if samples.len() == BROKERS_MAX {
                break 'brokers;
            }
            match admin.broker_runtime_info(addr).await {
                Ok(info) => samples.push((
                    format!("{name}:{id}"),
                    first_tps(info.get("putTps")),
                    first_tps(info.get("getTransferedTps")),
                )),
                Err(e) => debug!(broker = %addr, error = %e, "dashboard collector: no runtime info"),
            }
        }
    }
    let mut history = dashboard.history.lock().unwrap_or_else(PoisonError::into_inner);
    // Brokers gone from the cluster drop out of the charts.
    history.brokers.retain(|key, _| samples.iter().any(|(k, _, _)| k == key));
    for (key, put, get) in samples {
        let series = history.brokers.entry(key).or_default();
        push(&mut series.put, (at, put));
        push(&mut series.get, (at, get));
    }
}

async fn sample_topics(dashboard: &Dashboard) {
    let admin = dashboard.admin();
    let topics = match admin.topic_list().await {
        Ok(list) => list.topic_list,
        Err(e) => {
            debug!(error = %e, "dashboard collector: no topic list");
            return;
        }
    };
    let Ok(cluster) = admin.cluster_info().await else { return };
    let mut topics: Vec<String> = topics.into_iter().filter(|t| charted(t, &cluster)).collect();
    topics.sort();
    let not_charted = topics.len().saturating_sub(TOPICS_MAX);
    topics.truncate(TOPICS_MAX);
    let at = now_ms();
    let mut samples = Vec::with_capacity(topics.len());
    for topic in topics {
        let Ok(brokers) = admin.route_brokers(&topic).await else { continue };
        let mut point = TopicPoint { at, ..TopicPoint::default() };
        for (_, addr) in &brokers {
            // A counter never touched is answered as an error: nothing counted yet.
            if let Ok(put) = admin.broker_stats_data(addr, "TOPIC_PUT_NUMS", &topic).await {
                point.in_tps += put.stats_minute.tps;
                point.in_day += put.stats_day.sum;
            }
            let Ok(groups) = admin.topic_consume_by_who(addr, &topic).await else { continue };
            for group in groups.group_list.iter().take(GROUPS_PER_TOPIC_MAX) {
                if let Ok(get) = admin.broker_stats_data(addr, "GROUP_GET_NUMS", &format!("{topic}@{group}")).await {
                    point.out_tps += get.stats_minute.tps;
                    point.out_day += get.stats_day.sum;
                }
            }
        }
        samples.push((topic, point));
    }
    let mut history = dashboard.history.lock().unwrap_or_else(PoisonError::into_inner);
    history.topics.retain(|t, _| samples.iter().any(|(s, _)| s == t));
    history.topics_not_charted = not_charted;
    for (topic, point) in samples {
        push(history.topics.entry(topic).or_default(), point);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_keeps_the_last_points() {
        let mut s = VecDeque::new();
        for i in 0..(POINTS as i64 + 5) {
            push(&mut s, (i, 1.0));
        }
        assert_eq!(s.len(), POINTS);
        assert_eq!(s.front().unwrap().0, 5);
    }

    #[test]
    fn the_first_tps_figure_is_read() {
        assert_eq!(first_tps(Some(&"12.5 11.0 10.2".to_owned())), 12.5);
        assert_eq!(first_tps(Some(&"x".to_owned())), 0.0);
        assert_eq!(first_tps(None), 0.0);
        let mut cluster = ferromq_protocol::body::ClusterInfo::default();
        cluster.cluster_addr_table.insert("DefaultCluster".into(), ["broker-a".to_owned()].into());
        cluster.broker_addr_table.insert("broker-a".into(), Default::default());
        assert!(charted("TopicTest", &cluster));
        assert!(!charted("%RETRY%g", &cluster));
        assert!(!charted("RMQ_SYS_TRACE_TOPIC", &cluster));
        assert!(!charted("DefaultCluster", &cluster));
        assert!(!charted("broker-a", &cluster));
    }
}
