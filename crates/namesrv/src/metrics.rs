//! The name server's metrics, when its config says `metricsExporterType=PROM` (the broker's
//! keys; Java's name server has none): `rocketmq_rpc_latency` of its requests, the process
//! figures, and how many brokers and topic routes it knows.

use std::sync::{Arc, Weak};

use ferromq_metrics::families::{emit_one, Family, Kind};
use ferromq_metrics::prometheus_client::collector::Collector;
use ferromq_metrics::prometheus_client::encoding::DescriptorEncoder;
use ferromq_metrics::{Metrics, MetricsConfig};
use ferromq_remoting::ServerConfig;

use crate::processor::NamesrvState;
use crate::{NamesrvConfig, NamesrvError};

/// With `metricsExporterType=PROM`: the bound exporter port and the registry (its RPC
/// observer set in `server_config`).
///
/// # Errors
/// A malformed key, or a port that cannot be bound.
pub(crate) async fn setup(
    config: &NamesrvConfig,
    local: Option<std::net::SocketAddr>,
    server_config: &mut ServerConfig,
) -> Result<Option<(tokio::net::TcpListener, Metrics)>, NamesrvError> {
    // The metrics keys are kept among the config's unknown keys.
    let metrics_config =
        MetricsConfig::from_unknown(&config.unknown).map_err(|e| NamesrvError::Config(e.to_string()))?;
    let node = ferromq_metrics::registry::Node {
        cluster: String::new(),
        node_type: "namesrv",
        node_id: local.map_or_else(|| format!("{}:{}", config.bind_address, config.listen_port), |a| a.to_string()),
        extra: Vec::new(),
    };
    let prepared = ferromq_metrics::exporter::prepare(&metrics_config, &node, &config.bind_address)
        .await
        .map_err(NamesrvError::Config)?;
    Ok(prepared.map(|p| {
        server_config.rpc_observer = Some(Arc::new(p.rpc));
        (p.listener, p.metrics)
    }))
}

/// Brokers and routes, read on each scrape.
#[derive(Debug)]
pub(crate) struct NamesrvCollector {
    pub(crate) state: Weak<NamesrvState>,
}

impl Collector for NamesrvCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Some(state) = self.state.upgrade() else { return Ok(()) };
        let (brokers, topics) = {
            let routes = state.routes.read().unwrap_or_else(|e| e.into_inner());
            (routes.live_broker_count(), routes.topic_count())
        };
        let gauge = |name, help| Family { name, help, unit: None, kind: Kind::Gauge };
        emit_one(&mut encoder, gauge("ferromq_namesrv_live_brokers", "Brokers registered and alive"), brokers)?;
        emit_one(&mut encoder, gauge("ferromq_namesrv_topics", "Topics with routes"), topics)
    }
}
