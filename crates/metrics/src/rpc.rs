//! `rocketmq_rpc_latency` (histogram, milliseconds): every remoting request a server served,
//! by request code, response code, long polling and result, as Java's
//! `RemotingMetricsManager` labels them (`protocol_type=remoting`, codes as lower-case
//! RocketMQ constant names, unknown codes as their number).

use ferromq_protocol::{request_code, response_code};
use ferromq_remoting::{Rpc, RpcObserver};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// Java's buckets (ms).
pub const BUCKETS_MS: [f64; 9] = [1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0];

/// The most label sets the histogram keeps; further ones are counted under `request_code`
/// and `response_code` `_other` (a client sending made-up codes cannot grow it).
pub const LABEL_SETS_MAX: usize = 2_000;

/// One series' labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    protocol_type: &'static str,
    request_code: std::borrow::Cow<'static, str>,
    response_code: std::borrow::Cow<'static, str>,
    is_long_polling: &'static str,
    result: &'static str,
}

fn new_histogram() -> Histogram {
    Histogram::new(BUCKETS_MS)
}

/// The label of a code without a RocketMQ constant name: its number (known codes take their
/// name in lower case, made once in [`CodeNames`]).
fn code_label(code: i32) -> std::borrow::Cow<'static, str> {
    std::borrow::Cow::Owned(code.to_string())
}

/// The latency histogram, fed by the remoting servers it is set on.
#[derive(Debug, Clone)]
pub struct RpcMetrics {
    latency: Family<RpcLabels, Histogram, fn() -> Histogram>,
    /// Label values of known codes, made once: the hot path does not allocate for them.
    names: std::sync::Arc<CodeNames>,
    /// Label sets made so far (bounded by [`LABEL_SETS_MAX`]).
    sets: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The series found so far, by the codes that name them: a request finds its histogram
    /// without building and hashing its label strings (bounded as the family is).
    series: std::sync::Arc<std::sync::RwLock<SeriesByCodes>>,
}

/// Request code, response code (`None`: a oneway request), long polling, result.
type SeriesKey = (i32, Option<i32>, bool, u8);

type SeriesByCodes = std::collections::HashMap<SeriesKey, Histogram, std::hash::BuildHasherDefault<KeyHasher>>;

/// A multiplicative hash for a handful of small integers (the std hasher resists collision
/// attacks this bounded, integer-keyed map does not need to).
#[derive(Default)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_i32(&mut self, n: i32) {
        self.write_u64(u64::from(n as u32));
    }

    fn write_isize(&mut self, n: isize) {
        self.write_u64(n as u64);
    }
}

#[derive(Debug, Default)]
struct CodeNames {
    requests: std::collections::HashMap<i32, &'static str>,
    responses: std::collections::HashMap<i32, &'static str>,
}

impl CodeNames {
    fn build() -> Self {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let mut names = CodeNames::default();
        // Request codes run up to a few thousand; response codes are small or negative.
        for code in -1..=5_000 {
            if let Some(n) = request_code::name(code) {
                names.requests.insert(code, leak(n.to_ascii_lowercase()));
            }
            if let Some(n) = response_code::name(code) {
                names.responses.insert(code, leak(n.to_ascii_lowercase()));
            }
        }
        names
    }
}

impl RpcMetrics {
    /// Registers `rocketmq_rpc_latency` in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let latency = Family::<RpcLabels, Histogram, fn() -> Histogram>::new_with_constructor(new_histogram);
        registry.register_with_unit(
            "rocketmq_rpc_latency",
            "Time from a request's arrival to its answer being written",
            Unit::Other("milliseconds".to_owned()),
            latency.clone(),
        );
        RpcMetrics {
            latency,
            names: std::sync::Arc::new(CodeNames::build()),
            sets: Default::default(),
            series: Default::default(),
        }
    }

    fn labels(&self, rpc: &Rpc, folded: bool) -> RpcLabels {
        let request = match (folded, self.names.requests.get(&rpc.request_code)) {
            (true, _) => std::borrow::Cow::Borrowed(crate::families::FOLDED),
            (false, Some(n)) => std::borrow::Cow::Borrowed(*n),
            (false, None) => code_label(rpc.request_code),
        };
        let response = match rpc.response_code {
            None => std::borrow::Cow::Borrowed(""),
            Some(_) if folded => std::borrow::Cow::Borrowed(crate::families::FOLDED),
            Some(code) => match self.names.responses.get(&code) {
                Some(n) => std::borrow::Cow::Borrowed(*n),
                None => code_label(code),
            },
        };
        RpcLabels {
            protocol_type: "remoting",
            request_code: request,
            response_code: response,
            is_long_polling: if rpc.long_polling { "true" } else { "false" },
            result: rpc.result.label(),
        }
    }
}

impl RpcObserver for RpcMetrics {
    fn observe(&self, rpc: &Rpc) {
        let ms = rpc.elapsed.as_secs_f64() * 1000.0;
        let key: SeriesKey = (rpc.request_code, rpc.response_code, rpc.long_polling, rpc.result as u8);
        if let Some(h) = self.series.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
            h.observe(ms);
            return;
        }
        let labels = self.labels(rpc, false);
        let histogram = match self.latency.get(&labels) {
            Some(h) => h.clone(),
            None => {
                let made = self.sets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let labels = if made >= LABEL_SETS_MAX { self.labels(rpc, true) } else { labels };
                self.latency.get_or_create(&labels).clone()
            }
        };
        histogram.observe(ms);
        // Keys past the family's bound map to its folded series; the cache stops growing at
        // twice that bound, so a client sending made-up codes cannot grow it either.
        let mut series = self.series.write().unwrap_or_else(|e| e.into_inner());
        if series.len() < 2 * LABEL_SETS_MAX {
            series.insert(key, histogram);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ferromq_remoting::RpcResult;

    use super::*;
    use crate::registry::{Format, Metrics, Node};

    #[test]
    fn requests_are_counted_by_code_result_and_bucket() {
        let node = Node { cluster: "C".into(), node_type: "broker", node_id: "b".into(), extra: Vec::new() };
        let mut metrics = Metrics::new(&node, &crate::MetricsConfig::default()).unwrap();
        let rpc = RpcMetrics::register(metrics.registry_mut());
        let call = |code, response, ms, result| Rpc {
            request_code: code,
            response_code: response,
            long_polling: false,
            result,
            elapsed: Duration::from_millis(ms),
        };
        rpc.observe(&call(request_code::SEND_MESSAGE_V2, Some(response_code::SUCCESS), 2, RpcResult::Success));
        rpc.observe(&call(request_code::SEND_MESSAGE_V2, Some(response_code::SUCCESS), 50, RpcResult::Success));
        rpc.observe(&call(request_code::HEART_BEAT, None, 0, RpcResult::Oneway));
        rpc.observe(&call(77_777, Some(response_code::REQUEST_CODE_NOT_SUPPORTED), 0, RpcResult::Success));
        rpc.observe(&Rpc {
            long_polling: true,
            ..call(request_code::PULL_MESSAGE, Some(response_code::PULL_NOT_FOUND), 900, RpcResult::Success)
        });
        let text = metrics.render(Format::Prometheus).unwrap();
        let base = r#"cluster="C",node_type="broker",node_id="b",protocol_type="remoting""#;
        for line in [
            format!(
                r#"rocketmq_rpc_latency_milliseconds_count{{{base},request_code="send_message_v2",response_code="success",is_long_polling="false",result="success"}} 2"#
            ),
            format!(
                r#"rocketmq_rpc_latency_milliseconds_bucket{{{base},request_code="send_message_v2",response_code="success",is_long_polling="false",result="success",le="3"}} 1"#
            ),
            format!(
                r#"rocketmq_rpc_latency_milliseconds_bucket{{{base},request_code="send_message_v2",response_code="success",is_long_polling="false",result="success",le="100"}} 2"#
            ),
            format!(
                r#"rocketmq_rpc_latency_milliseconds_count{{{base},request_code="heart_beat",response_code="",is_long_polling="false",result="oneway"}} 1"#
            ),
            format!(
                r#"rocketmq_rpc_latency_milliseconds_count{{{base},request_code="77777",response_code="request_code_not_supported",is_long_polling="false",result="success"}} 1"#
            ),
            format!(
                r#"rocketmq_rpc_latency_milliseconds_count{{{base},request_code="pull_message",response_code="pull_not_found",is_long_polling="true",result="success"}} 1"#
            ),
        ] {
            assert!(text.contains(&line), "missing {line}\n{text}");
        }
    }
}
