//! The run report: rates, latency summaries, environment; printed as a table and as JSON.

use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::histogram::{Histogram, LatencySummary};

/// Messages per second over `elapsed` (0 for an empty interval).
pub fn per_second(count: u64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s <= 0.0 {
        0.0
    } else {
        count as f64 / s
    }
}

/// Megabytes (10^6 bytes) per second over `elapsed`.
pub fn mb_per_second(bytes: u64, elapsed: Duration) -> f64 {
    per_second(bytes, elapsed) / 1_000_000.0
}

/// Producer side of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProduceResult {
    /// Wall time from the first send to the last response, in seconds.
    pub elapsed_s: f64,
    /// Messages sent (every one of them was acknowledged or failed).
    pub sent: u64,
    /// Messages the broker acknowledged with SUCCESS (oneway: written to the socket).
    pub acked: u64,
    /// Messages whose request failed, timed out or got a non-SUCCESS response.
    pub failed: u64,
    /// Requests sent (one per message, or one per batch).
    pub requests: u64,
    /// Body bytes acknowledged.
    pub bytes: u64,
    /// Acknowledged messages per second.
    pub msgs_per_s: f64,
    /// Acknowledged body megabytes (10^6 bytes) per second.
    pub mb_per_s: f64,
    /// Round-trip latency of successful requests in microseconds (a batch counts once).
    pub latency_us: LatencySummary,
    /// The first failure seen, if any.
    pub first_error: Option<String>,
}

impl ProduceResult {
    /// Fills the rates and latency from the counters.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        elapsed: Duration,
        sent: u64,
        acked: u64,
        failed: u64,
        requests: u64,
        bytes: u64,
        latency: &Histogram,
        first_error: Option<String>,
    ) -> Self {
        ProduceResult {
            elapsed_s: elapsed.as_secs_f64(),
            sent,
            acked,
            failed,
            requests,
            bytes,
            msgs_per_s: per_second(acked, elapsed),
            mb_per_s: mb_per_second(bytes, elapsed),
            latency_us: latency.summary(),
            first_error,
        }
    }
}

/// Consumer side of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsumeResult {
    /// Wall time of the consuming phase, in seconds.
    pub elapsed_s: f64,
    /// Queues pulled.
    pub queues: u32,
    /// Messages received.
    pub consumed: u64,
    /// Body bytes received.
    pub bytes: u64,
    /// Pull requests that failed or got an unexpected response.
    pub pull_errors: u64,
    /// Messages per second.
    pub msgs_per_s: f64,
    /// Body megabytes (10^6 bytes) per second.
    pub mb_per_s: f64,
    /// End-to-end latency in milliseconds: receive time minus the message's born timestamp
    /// (producer clock; millisecond resolution).
    pub e2e_latency_ms: LatencySummary,
    /// The first failure seen, if any.
    pub first_error: Option<String>,
}

/// Where and how the run was made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// The command line, program name first.
    pub command_line: Vec<String>,
    /// `git rev-parse --short HEAD`, or "unknown".
    pub commit: String,
    /// Host name, or "unknown".
    pub hostname: String,
    /// Logical CPUs available.
    pub cpus: usize,
    /// Start time, ms since the Unix epoch.
    pub started_at_ms: u64,
}

impl Environment {
    /// Collects the environment of this process.
    pub fn collect(command_line: Vec<String>) -> Self {
        let commit = std::process::Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "unknown".into());
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "unknown".into());
        Environment {
            command_line,
            commit,
            hostname,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            started_at_ms: crate::now_ms(),
        }
    }
}

/// Settings the run used (after defaults and bounds).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// `produce`, `consume` or `e2e`.
    pub mode: String,
    /// Name server address, if one was used.
    pub namesrv: Option<String>,
    /// The broker loaded.
    pub broker: String,
    /// Topic.
    pub topic: String,
    /// Queues used.
    pub queues: u32,
    /// Requests in flight (senders).
    pub in_flight: u32,
    /// Connections to the broker.
    pub connections: u32,
    /// Body size in bytes.
    pub message_size: u32,
    /// Messages per request.
    pub batch: u32,
    /// Whether each message carried a KEYS property.
    pub keys: bool,
    /// Whether sends were oneway.
    pub oneway: bool,
    /// Message limit (0: none).
    pub count_limit: u64,
    /// Time limit in seconds.
    pub duration_s: u64,
    /// Whether consuming started at offset 0 instead of the queues' max.
    pub from_start: bool,
    /// Whether the connections used TLS (absent in reports from before it existed).
    #[serde(default)]
    pub tls: bool,
    /// Light queues each message was dispatched to (`INNER_MULTI_DISPATCH`; 0: none).
    #[serde(default)]
    pub lmq_fanout: u32,
    /// Distinct light queues the messages' targets were drawn from.
    #[serde(default)]
    pub lmq_queues: u64,
}

/// The whole report, as written with `--json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always "ferromq bench".
    pub tool: String,
    /// Where the run was made.
    pub environment: Environment,
    /// Settings.
    pub config: RunConfig,
    /// Producer figures, for `produce` and `e2e`.
    pub produce: Option<ProduceResult>,
    /// Consumer figures, for `consume` and `e2e`.
    pub consume: Option<ConsumeResult>,
}

impl Report {
    /// The report as pretty-printed JSON, newline-terminated.
    pub fn to_json(&self) -> String {
        // Plain data with string keys: serialization cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// Reads a report written by [`to_json`](Self::to_json).
    ///
    /// # Errors
    /// The text is not a well-formed report.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// A human-readable table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let c = &self.config;
        let _ = writeln!(
            out,
            "ferromq bench {} | broker {} | topic {} ({} queues) | {} B x{} | {} in flight | commit {}",
            c.mode, c.broker, c.topic, c.queues, c.message_size, c.batch, c.in_flight, self.environment.commit
        );
        let _ = writeln!(
            out,
            "{:<8} {:>10} {:>10} {:>8} {:>11} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}  unit",
            "side", "msgs", "failed", "secs", "msgs/s", "MB/s", "p50", "p90", "p99", "p999", "max"
        );
        if let Some(p) = &self.produce {
            let l = &p.latency_us;
            let _ = writeln!(
                out,
                "{:<8} {:>10} {:>10} {:>8.2} {:>11.0} {:>8.2} {:>9} {:>9} {:>9} {:>9} {:>9}  us/request",
                "produce", p.acked, p.failed, p.elapsed_s, p.msgs_per_s, p.mb_per_s, l.p50, l.p90, l.p99, l.p999, l.max
            );
        }
        if let Some(k) = &self.consume {
            let l = &k.e2e_latency_ms;
            let _ = writeln!(
                out,
                "{:<8} {:>10} {:>10} {:>8.2} {:>11.0} {:>8.2} {:>9} {:>9} {:>9} {:>9} {:>9}  ms end-to-end",
                "consume",
                k.consumed,
                k.pull_errors,
                k.elapsed_s,
                k.msgs_per_s,
                k.mb_per_s,
                l.p50,
                l.p90,
                l.p99,
                l.p999,
                l.max
            );
        }
        for e in [
            self.produce.as_ref().and_then(|p| p.first_error.as_ref()),
            self.consume.as_ref().and_then(|c| c.first_error.as_ref()),
        ]
        .into_iter()
        .flatten()
        {
            let _ = writeln!(out, "first error: {e}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(per_second(1000, Duration::from_millis(500)), 2000.0);
        assert_eq!(per_second(5, Duration::ZERO), 0.0);
        assert!((mb_per_second(3_000_000, Duration::from_secs(2)) - 1.5).abs() < 1e-12);
    }

    #[test]
    fn produce_result_fills_rates_from_acked() {
        let mut h = Histogram::new();
        h.record_n(100, 9);
        h.record(5000);
        let r = ProduceResult::new(Duration::from_secs(2), 12, 10, 2, 10, 10 * 1024, &h, Some("x".into()));
        assert_eq!(r.msgs_per_s, 5.0);
        assert!((r.mb_per_s - 10.0 * 1024.0 / 2.0 / 1e6).abs() < 1e-12);
        assert_eq!((r.latency_us.p50, r.latency_us.p90, r.latency_us.max), (100, 100, 5000));
        assert_eq!(r.latency_us.p99, 5000);
        assert_eq!(r.sent, r.acked + r.failed);
    }

    #[test]
    fn report_round_trips_through_json_and_prints() {
        let r = Report {
            tool: "ferromq bench".into(),
            environment: Environment::collect(vec!["ferromq".into(), "bench".into()]),
            config: RunConfig { mode: "e2e".into(), ..Default::default() },
            produce: Some(ProduceResult::default()),
            consume: Some(ConsumeResult::default()),
        };
        let back = Report::from_json(&r.to_json()).unwrap();
        assert_eq!(back, r);
        assert!(r.environment.cpus >= 1);
        let table = r.table();
        assert!(table.contains("produce") && table.contains("consume"), "{table}");
    }
}
