//! The `/metrics` HTTP server over real TCP: Prometheus text by default (parsed by a
//! Prometheus text parser), OpenMetrics on request, 404/405 otherwise; and the process
//! figures of this test process.

use std::sync::Arc;

use ferromq_metrics::exporter;
use ferromq_metrics::registry::{Metrics, Node};
use ferromq_metrics::MetricsConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn get(addr: &str, request: &str) -> (String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    let text = String::from_utf8(raw).expect("utf-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
    (head.to_owned(), body.to_owned())
}

#[tokio::test]
async fn metrics_are_served_as_prometheus_text_and_openmetrics() {
    let node =
        Node { cluster: "DefaultCluster".into(), node_type: "broker", node_id: "broker-a".into(), extra: Vec::new() };
    let config = MetricsConfig { metrics_label: "env:test".into(), ..Default::default() };
    let mut metrics = Metrics::new(&node, &config).expect("labels");
    metrics.register_collector(Box::new(ferromq_metrics::process::ProcessCollector));
    let listener = exporter::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(exporter::serve(listener, Arc::new(metrics), async {
        let _ = stopped.await;
    }));

    let (head, body) = get(&addr, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"), "{head}");
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).expect("Prometheus text");
    let rss = scrape.samples.iter().find(|s| s.metric == "process_resident_memory_bytes").expect("rss");
    assert_eq!(rss.labels.get("cluster"), Some("DefaultCluster"));
    assert_eq!(rss.labels.get("node_type"), Some("broker"));
    assert_eq!(rss.labels.get("node_id"), Some("broker-a"));
    assert_eq!(rss.labels.get("env"), Some("test"));
    match rss.value {
        prometheus_parse::Value::Gauge(v) => assert!(v > 1_000_000.0, "{v}"),
        ref other => panic!("rss is {other:?}"),
    }
    let cpu = scrape.samples.iter().find(|s| s.metric == "process_cpu_seconds_total").expect("cpu");
    assert!(matches!(cpu.value, prometheus_parse::Value::Counter(v) if v >= 0.0), "{:?}", cpu.value);
    assert!(body.contains("# TYPE process_cpu_seconds_total counter"), "{body}");

    let (head, body) = get(
        &addr,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text; version=1.0.0\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(head.to_ascii_lowercase().contains("content-type: application/openmetrics-text"), "{head}");
    assert!(body.trim_end().ends_with("# EOF"), "{body}");

    let (head, _) = get(&addr, "GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    let (head, _) =
        get(&addr, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 405"), "{head}");
    // Garbage instead of HTTP: that connection is closed, the server goes on.
    let mut junk = tokio::net::TcpStream::connect(&addr).await.unwrap();
    junk.write_all(b"\x00\x01\x02 not http\r\n\r\n").await.unwrap();
    let mut sink = Vec::new();
    let _ = junk.read_to_end(&mut sink).await;
    let (head, _) = get(&addr, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    let _ = stop.send(());
    server.await.unwrap();
}

#[tokio::test]
async fn a_taken_port_is_an_error_naming_the_keys() {
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let e = exporter::bind(&addr).await.expect_err("taken");
    assert!(e.contains(&addr) && e.contains("metricsPromExporterPort"), "{e}");
    assert_eq!(exporter::listen_address("", "10.0.0.1", 5557), "10.0.0.1:5557");
    assert_eq!(exporter::listen_address("::1", "x", 5557), "[::1]:5557");
}
