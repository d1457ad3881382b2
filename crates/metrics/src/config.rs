//! The exporter settings under Java's keys (BrokerConfig, ProxyConfig and ControllerConfig
//! carry the same ones; FerroMQ's name server reads them too).

use std::collections::BTreeMap;

use ferromq_config::{rocketmq_config, ConfigError, RocketMqConfig};

/// `metricsExporterType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExporterType {
    /// `DISABLE`: no metrics.
    Disable,
    /// `OTLP_GRPC`: pushed to an OpenTelemetry collector (not served by FerroMQ).
    OtlpGrpc,
    /// `PROM`: served over HTTP for Prometheus to scrape.
    Prom,
    /// `LOG`: written to the log now and then (not served by FerroMQ).
    Log,
}

impl ferromq_config::ConfigValue for ExporterType {
    const EXPECTED: &'static str = "DISABLE, OTLP_GRPC, PROM or LOG";
    fn parse_value(text: &str) -> Option<Self> {
        // Java reads the name case-sensitively (`MetricsExporterType.valueOf`).
        match text {
            "DISABLE" => Some(ExporterType::Disable),
            "OTLP_GRPC" => Some(ExporterType::OtlpGrpc),
            "PROM" => Some(ExporterType::Prom),
            "LOG" => Some(ExporterType::Log),
            _ => None,
        }
    }
    fn render(&self) -> String {
        match self {
            ExporterType::Disable => "DISABLE",
            ExporterType::OtlpGrpc => "OTLP_GRPC",
            ExporterType::Prom => "PROM",
            ExporterType::Log => "LOG",
        }
        .to_owned()
    }
}

/// Java's default `metricsPromExporterPort`.
pub const DEFAULT_PROM_PORT: u16 = 5557;

rocketmq_config! {
    /// How a process exports its metrics.
    pub struct MetricsConfig {
        /// `metricsExporterType`.
        metrics_exporter_type: ExporterType = "metricsExporterType", default ExporterType::Disable;
        /// `metricsPromExporterHost`: the address `/metrics` listens on; empty: the process's
        /// advertised address (brokerIP1 on a broker).
        metrics_prom_exporter_host: String = "metricsPromExporterHost", default String::new();
        /// `metricsPromExporterPort`.
        metrics_prom_exporter_port: u16 = "metricsPromExporterPort", default DEFAULT_PROM_PORT;
        /// `metricsLabel`: extra constant labels, `k1:v1,k2:v2`.
        metrics_label: String = "metricsLabel", default String::new();
        /// `metricsOtelCardinalityLimit`: the most label sets one metric shows; the rest are
        /// folded into one series whose topic and group read `_other`.
        metrics_otel_cardinality_limit: usize = "metricsOtelCardinalityLimit", default 50_000;
    }
}

impl MetricsConfig {
    /// The metrics keys among `unknown`, the keys another config struct kept without using
    /// them (the name server's and the proxy's); the rest stay unknown here too.
    ///
    /// # Errors
    /// A malformed value of a metrics key, named.
    pub fn from_unknown(unknown: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let mut metrics = MetricsConfig::default();
        for (key, value) in unknown {
            metrics.set(key, value)?;
        }
        Ok(metrics)
    }

    /// The extra constant labels of `metricsLabel`.
    ///
    /// # Errors
    /// A pair without `:` or with an empty or invalid key, named.
    pub fn extra_labels(&self) -> Result<Vec<(String, String)>, String> {
        let mut labels = Vec::new();
        for pair in self.metrics_label.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = pair.split_once(':') else {
                return Err(format!("metricsLabel: {pair:?} is not key:value"));
            };
            let key = key.trim();
            let valid = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!("metricsLabel: {key:?} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"));
            }
            labels.push((key.to_owned(), value.trim().to_owned()));
        }
        Ok(labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_defaults_are_javas() {
        let mut c = MetricsConfig::default();
        assert_eq!(c.metrics_exporter_type, ExporterType::Disable);
        assert_eq!(c.metrics_prom_exporter_port, 5557);
        assert!(c.set("metricsExporterType", "PROM").unwrap());
        assert!(c.set("metricsPromExporterPort", "9100").unwrap());
        assert_eq!((c.metrics_exporter_type, c.metrics_prom_exporter_port), (ExporterType::Prom, 9100));
        assert!(c.set("metricsExporterType", "prom").is_err());
        assert!(!c.set("brokerName", "b").unwrap());
    }

    #[test]
    fn from_unknown_takes_the_metrics_keys_and_names_a_bad_value() {
        let unknown: BTreeMap<String, String> =
            [("metricsExporterType", "PROM"), ("metricsPromExporterPort", "9100"), ("listenPort", "9876")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        let c = MetricsConfig::from_unknown(&unknown).unwrap();
        assert_eq!((c.metrics_exporter_type, c.metrics_prom_exporter_port), (ExporterType::Prom, 9100));
        assert_eq!(c.unknown.keys().collect::<Vec<_>>(), ["listenPort"]);
        assert_eq!(MetricsConfig::from_unknown(&BTreeMap::new()).unwrap().metrics_exporter_type, ExporterType::Disable);
        let bad = BTreeMap::from([("metricsPromExporterPort".to_owned(), "x".to_owned())]);
        assert!(MetricsConfig::from_unknown(&bad).unwrap_err().to_string().contains("metricsPromExporterPort"));
    }

    #[test]
    fn metrics_label_pairs_are_parsed_and_checked() {
        let mut c = MetricsConfig { metrics_label: " env:prod , zone:eu-1".into(), ..Default::default() };
        assert_eq!(
            c.extra_labels().unwrap(),
            vec![("env".to_owned(), "prod".to_owned()), ("zone".to_owned(), "eu-1".to_owned())]
        );
        c.metrics_label = "env".into();
        assert!(c.extra_labels().unwrap_err().contains("not key:value"));
        c.metrics_label = "1x:y".into();
        assert!(c.extra_labels().unwrap_err().contains("label name"));
    }
}
