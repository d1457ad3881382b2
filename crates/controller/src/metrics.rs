//! The controller's `/metrics` (`metricsExporterType=PROM` in controller.conf): Java's
//! controller meter (controller-mode and observability fact sheets) — `role` (1 on the leader,
//! 0 on a follower), `active_broker_num` by cluster and broker set, `election_total` by
//! result, `dledger_disk_usage` (the Raft store's bytes) — plus `rocketmq_rpc_latency` of its
//! requests and the process figures.

use std::sync::Weak;

use ferromq_metrics::families::{emit, emit_one, Family, Folded, Kind, Series};
use ferromq_metrics::prometheus_client::collector::Collector;
use ferromq_metrics::prometheus_client::encoding::DescriptorEncoder;

use crate::node::ControllerNode;

/// Reads the node's state on each scrape.
#[derive(Debug)]
pub struct ControllerCollector {
    /// The node (gone once it stopped).
    pub node: Weak<ControllerNode>,
}

impl Collector for ControllerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Some(node) = self.node.upgrade() else { return Ok(()) };
        let (name, addr, group) = node.identity();
        let mut folded = Folded::default();
        let role =
            Series::new(vec![("address", addr), ("group", group), ("peer_id", name)], u8::from(node.is_leader()));
        let family = |name, help, unit, kind| Family { name, help, unit, kind };
        emit(
            &mut encoder,
            family("role", "1 on the controller group's leader, 0 on a follower", None, Kind::Gauge),
            vec![role],
            1,
            &mut folded,
        )?;
        let active = node
            .active_brokers()
            .into_iter()
            .map(|((cluster, set), n)| Series::new(vec![("cluster", cluster), ("broker_set", set)], n))
            .collect();
        let help = "Broker replicas whose heartbeats are current, by cluster and broker set";
        emit(&mut encoder, family("active_broker_num", help, None, Kind::Gauge), active, usize::MAX, &mut folded)?;
        let elections = node
            .election_counts()
            .into_iter()
            .map(|(result, n)| Series::new(vec![("election_result", result.to_owned())], n))
            .collect();
        let help = "Master elections decided by this node, by result";
        emit(&mut encoder, family("election", help, None, Kind::Counter), elections, usize::MAX, &mut folded)?;
        let help = "Bytes of the Raft log and snapshots in controllerStorePath";
        emit_one(&mut encoder, family("dledger_disk_usage", help, Some("bytes"), Kind::Gauge), node.store_bytes())
    }
}
