//! One process's metrics: a registry whose series all carry the constant labels.

use std::borrow::Cow;

use prometheus_client::collector::Collector;
use prometheus_client::registry::Registry;

use crate::config::MetricsConfig;

/// What a process is, for the constant labels (observability.md §1.1).
#[derive(Debug, Clone)]
pub struct Node {
    /// `cluster`: brokerClusterName (proxy: its cluster); `""` (name server, controller):
    /// no `cluster` label.
    pub cluster: String,
    /// `node_type`: `broker`, `proxy` or `namesrv`.
    pub node_type: &'static str,
    /// `node_id`: brokerName (proxy: proxyName; name server: its address).
    pub node_id: String,
    /// Further constant labels of the kind of node (the proxy's `proxy_mode`).
    pub extra: Vec<(&'static str, String)>,
}

/// The text formats `/metrics` answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text 0.0.4 (what Java's exporter serves by default).
    Prometheus,
    /// OpenMetrics 1.0 text (when the scraper's `Accept` asks for it).
    OpenMetrics,
}

impl Format {
    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// A process's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
}

impl Metrics {
    /// An empty registry with `node`'s constant labels and `config`'s `metricsLabel` pairs.
    ///
    /// # Errors
    /// A malformed `metricsLabel`, named.
    pub fn new(node: &Node, config: &MetricsConfig) -> Result<Self, String> {
        // A process outside any broker cluster (name server, controller) has no `cluster`
        // label: its own series may carry a broker cluster under that name.
        let mut labels: Vec<(Cow<'static, str>, Cow<'static, str>)> = Vec::new();
        if !node.cluster.is_empty() {
            labels.push((Cow::Borrowed("cluster"), Cow::Owned(node.cluster.clone())));
        }
        labels.push((Cow::Borrowed("node_type"), Cow::Borrowed(node.node_type)));
        labels.push((Cow::Borrowed("node_id"), Cow::Owned(node.node_id.clone())));
        labels.extend(node.extra.iter().map(|(k, v)| (Cow::Borrowed(*k), Cow::Owned(v.clone()))));
        for (k, v) in config.extra_labels()? {
            if labels.iter().any(|(known, _)| *known == k) {
                return Err(format!("metricsLabel: {k} is already a label of every series"));
            }
            labels.push((Cow::Owned(k), Cow::Owned(v)));
        }
        Ok(Metrics { registry: Registry::with_labels(labels.into_iter()) })
    }

    /// The registry, to register live metrics in.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Adds a collector, asked for its series on every scrape.
    pub fn register_collector(&mut self, collector: Box<dyn Collector>) {
        self.registry.register_collector(collector);
    }

    /// Every series, as text in `format`.
    ///
    /// # Errors
    /// A collector's write error.
    pub fn render(&self, format: Format) -> Result<String, std::fmt::Error> {
        let mut out = String::with_capacity(16 * 1024);
        match format {
            Format::Prometheus => prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?,
            Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, &self.registry)?,
        }
        Ok(out)
    }
}
