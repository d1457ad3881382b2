//! The proxy's metrics (cluster mode), when `rmq-proxy.json` says `metricsExporterType=PROM`
//! (Java's `ProxyConfig` keys): `rocketmq_proxy_up`, `rocketmq_rpc_latency` of its remoting
//! port, the gRPC clients it knows, and the process figures. Constant labels: `cluster`
//! (proxyClusterName), `node_type=proxy`, `node_id` (proxyName) and `proxy_mode`.

use std::sync::{Arc, Weak};

use ferromq_metrics::exporter::Prepared;
use ferromq_metrics::families::{emit_one, Family, Kind};
use ferromq_metrics::prometheus_client::collector::Collector;
use ferromq_metrics::prometheus_client::encoding::DescriptorEncoder;
use ferromq_metrics::MetricsConfig;

use crate::config::ProxyConfig;
use crate::proxy::Proxy;

/// The exporter `config` asks for, if any.
///
/// # Errors
/// A malformed key, or the port cannot be bound.
pub async fn prepare(config: &ProxyConfig) -> Result<Option<Prepared>, String> {
    let node = ferromq_metrics::registry::Node {
        cluster: config.proxy_cluster_name.clone(),
        node_type: "proxy",
        node_id: config.proxy_name.clone(),
        extra: vec![("proxy_mode", config.proxy_mode.clone())],
    };
    // The metrics keys are kept among the config's unknown keys.
    let metrics_config = MetricsConfig::from_unknown(&config.unknown).map_err(|e| e.to_string())?;
    ferromq_metrics::exporter::prepare(&metrics_config, &node, &config.bind_address).await
}

/// What the proxy knows, read on each scrape.
#[derive(Debug)]
pub struct ProxyCollector {
    /// The proxy.
    pub proxy: Weak<Proxy>,
}

impl Collector for ProxyCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let gauge = |name, help| Family { name, help, unit: None, kind: Kind::Gauge };
        let Some(proxy) = self.proxy.upgrade() else { return Ok(()) };
        emit_one(&mut encoder, gauge("rocketmq_proxy_up", "1 while the proxy serves"), 1u32)?;
        emit_one(&mut encoder, gauge("ferromq_proxy_grpc_clients", "gRPC clients the proxy knows"), proxy.clients.len())
    }
}

/// Serves `prepared` with the proxy's collector until the process ends.
pub fn serve(mut prepared: Prepared, proxy: &Arc<Proxy>) -> impl std::future::Future<Output = ()> + Send + 'static {
    prepared.metrics.register_collector(Box::new(ProxyCollector { proxy: Arc::downgrade(proxy) }));
    ferromq_metrics::exporter::serve(prepared.listener, Arc::new(prepared.metrics), std::future::pending())
}
