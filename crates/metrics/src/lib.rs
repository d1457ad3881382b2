//! Metrics under RocketMQ 5.x's names, served to Prometheus (observability.md §1).
//!
//! * [`MetricsConfig`]: Java's exporter keys (`metricsExporterType`, `metricsPromExporterHost`,
//!   `metricsPromExporterPort`, `metricsLabel`), shared by broker, name server and proxy.
//! * [`Metrics`]: the registry a process fills, with the constant labels every series carries
//!   (`cluster`, `node_type`, `node_id` and the `metricsLabel` pairs).
//! * [`exporter`]: the HTTP server behind `/metrics` (Prometheus text 0.0.4, or OpenMetrics when
//!   the scraper asks for it).
//! * [`CounterTable`]: the hot-path counters by topic or group, bounded in keys.
//! * [`rpc`]: `rocketmq_rpc_latency` of every remoting request, as a handler wrapper.
//! * [`process`]: the process's memory, CPU, descriptors and threads, read from `/proc`.
//!
//! Gauges that describe state (lag, topics, disk) are not kept up to date on the hot path: a
//! [`prometheus_client::collector::Collector`] of each component reads them at scrape time.

pub mod config;
pub mod counters;
pub mod exporter;
pub mod families;
pub mod http;
pub mod process;
pub mod registry;
pub mod rpc;

pub use config::{ExporterType, MetricsConfig};
pub use counters::CounterTable;
pub use registry::Metrics;

pub use prometheus_client;
