//! Pieces several pages use: queue names as rocketmq-dashboard keys them, the brokers a
//! change is sent to, system-name checks.

use std::collections::BTreeSet;

use ferromq_client::admin::AdminClient;
use ferromq_protocol::body::{ClusterInfo, MessageQueue};
use ferromq_protocol::topic_validator::is_system_topic;

use crate::error::ApiError;

/// Java's `MessageQueue#toString`, which is how the dashboard keys maps of queues.
pub(crate) fn mq_key(q: &MessageQueue) -> String {
    format!("MessageQueue [topic={}, brokerName={}, queueId={}]", q.topic, q.broker_name, q.queue_id)
}

/// rocketmq-dashboard's marker of system topics and groups in lists.
pub(crate) const SYS_PREFIX: &str = "%SYS%";

/// `name` without the dashboard's `%SYS%` marker.
pub(crate) fn strip_sys(name: &str) -> &str {
    name.strip_prefix(SYS_PREFIX).unwrap_or(name)
}

/// Whether `topic` is a system topic: RocketMQ's, or one a broker or cluster registers under
/// its own name.
pub(crate) fn system_topic(topic: &str, cluster: &ClusterInfo) -> bool {
    is_system_topic(topic)
        || cluster.cluster_addr_table.contains_key(topic)
        || cluster.broker_addr_table.contains_key(topic)
}

/// The master addresses (with broker names) a change for `clusters` and `brokers` goes to:
/// every master of each cluster named, and the master of each broker named.
///
/// # Errors
/// Both lists empty, or a name the cluster does not know.
pub(crate) async fn target_masters(
    admin: &AdminClient,
    clusters: &[String],
    brokers: &[String],
) -> Result<Vec<(String, String)>, ApiError> {
    if clusters.iter().chain(brokers).all(|s| s.trim().is_empty()) {
        return Err(ApiError::bad("clusterName or brokerName can not be all blank"));
    }
    let info = admin.cluster_info().await?;
    let mut names = BTreeSet::new();
    for cluster in clusters.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let members = info
            .cluster_addr_table
            .get(cluster)
            .ok_or_else(|| ApiError::NotFound(format!("cluster {cluster} is not known to the name server")))?;
        names.extend(members.iter().cloned());
    }
    names.extend(brokers.iter().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()));
    let mut targets = Vec::new();
    for name in names {
        let data = info
            .broker_addr_table
            .get(&name)
            .ok_or_else(|| ApiError::NotFound(format!("broker {name} is not known to the name server")))?;
        let addr =
            data.master_addr().ok_or_else(|| ApiError::NotFound(format!("broker {name} has no master online")))?;
        targets.push((name, addr.to_owned()));
    }
    Ok(targets)
}

/// A client connection as rocketmq-dashboard shows it (Java's `Connection` plus `versionDesc`).
pub(crate) fn connection_json(c: &ferromq_protocol::body::Connection) -> serde_json::Value {
    let mut v = serde_json::json!(c);
    v["versionDesc"] = serde_json::Value::String(ferromq_protocol::version::name(c.version));
    v
}

/// Milliseconds since the epoch as Jackson writes a `java.util.Date` in Spring Boot
/// (`2025-01-02T03:04:05.678+00:00`, UTC).
pub(crate) fn iso_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = ferromq_protocol::civil_date::civil_from_days(secs.div_euclid(86_400));
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}+00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms.rem_euclid(1000)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_are_keyed_as_java_prints_them() {
        let q = MessageQueue::new("T", "broker-a", 3);
        assert_eq!(mq_key(&q), "MessageQueue [topic=T, brokerName=broker-a, queueId=3]");
        assert_eq!(strip_sys("%SYS%RMQ_SYS_TRACE_TOPIC"), "RMQ_SYS_TRACE_TOPIC");
        assert_eq!(strip_sys("g"), "g");
        assert_eq!(iso_time(1_700_000_000_123), "2023-11-14T22:13:20.123+00:00");
    }
}
