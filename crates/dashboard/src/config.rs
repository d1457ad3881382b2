//! What the dashboard needs to run: the name servers and how it talks to them.

use std::time::Duration;

use ferromq_client::admin::DEFAULT_TIMEOUT;
use ferromq_remoting::ClientConfig;

/// rocketmq-dashboard's port.
pub const DEFAULT_PORT: u16 = 8082;
/// rocketmq-dashboard's `msgTrackTopicName` default (Java: `TopicValidator.RMQ_SYS_TRACE_TOPIC`).
pub const DEFAULT_TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

/// The dashboard's settings. rocketmq-dashboard's names in brackets.
#[derive(Debug, Clone)]
pub struct DashboardConfig {
    /// Name servers, `;`-separated (`rocketmq.config.namesrvAddrs`).
    pub namesrv_addr: String,
    /// How admin connections are made: credentials for brokers with ACL on
    /// (`accessKey`/`secretKey`), TLS (`useTLS`).
    pub client: ClientConfig,
    /// Per-request timeout (`timeoutMillis`).
    pub timeout: Duration,
    /// The trace topic searched by the message trace page (`msgTrackTopicName`).
    pub trace_topic: String,
    /// How often the collector samples broker and topic TPS for the charts (Java's
    /// `enableDashBoardCollect` samples each minute; a live chart wants finer points).
    pub collect_interval: Duration,
}

impl DashboardConfig {
    /// Settings for the cluster behind `namesrv_addr`, every other value the default.
    pub fn new(namesrv_addr: impl Into<String>) -> Self {
        DashboardConfig {
            namesrv_addr: namesrv_addr.into(),
            client: ClientConfig::default().with_zone_from_env(),
            timeout: DEFAULT_TIMEOUT,
            trace_topic: DEFAULT_TRACE_TOPIC.to_owned(),
            collect_interval: Duration::from_secs(5),
        }
    }
}
