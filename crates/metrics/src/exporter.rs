//! The HTTP server behind `metricsExporterType=PROM`: `GET /metrics` answers every series in
//! Prometheus text 0.0.4, or in OpenMetrics text when the scraper's `Accept` names
//! `application/openmetrics-text`. Anything else is 404 (405 for other methods).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::registry::{Format, Metrics};

/// Scrapes served at once; more connections wait for a slot.
pub const CONNECTIONS_MAX: usize = 16;

/// Where `/metrics` listens: `host` (`metricsPromExporterHost`, else `fallback_host`) and port.
pub fn listen_address(host: &str, fallback_host: &str, port: u16) -> String {
    let host = if host.trim().is_empty() { fallback_host } else { host.trim() };
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Binds the exporter's port.
///
/// # Errors
/// The address cannot be bound, with the keys to change.
pub async fn bind(addr: &str) -> Result<TcpListener, String> {
    TcpListener::bind(addr).await.map_err(|e| {
        format!(
            "cannot listen on {addr} for Prometheus metrics: {e}; set metricsPromExporterPort (and \
             metricsPromExporterHost) to a free address, or metricsExporterType=DISABLE"
        )
    })
}

/// Serves `metrics` on `listener` until `shutdown` completes.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>, shutdown: impl Future<Output = ()>) {
    let local = listener.local_addr().map_or_else(|_| "?".to_owned(), |a| a.to_string());
    info!(address = %local, "Prometheus metrics at http://{local}/metrics");
    let handler = move |request| answer(metrics.clone(), request);
    crate::http::serve_http(listener, "metrics", CONNECTIONS_MAX, shutdown, handler).await;
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

async fn answer(metrics: Arc<Metrics>, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.uri().path() != "/metrics" {
        return Ok(text(StatusCode::NOT_FOUND, "not found: the metrics are at /metrics\n"));
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return Ok(text(StatusCode::METHOD_NOT_ALLOWED, "only GET /metrics\n"));
    }
    let open_metrics = request
        .headers()
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let format = if open_metrics { Format::OpenMetrics } else { Format::Prometheus };
    // Collectors read files and locks: off the async workers.
    let rendered = tokio::task::spawn_blocking(move || metrics.render(format)).await;
    Ok(match rendered {
        Ok(Ok(body)) => {
            let mut response = Response::new(Full::new(Bytes::from(body)));
            response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(format.content_type()));
            response
        }
        Ok(Err(_)) | Err(_) => {
            warn!("a metrics collector failed; the scrape is answered 500");
            text(StatusCode::INTERNAL_SERVER_ERROR, "metrics could not be collected; see the server log\n")
        }
    })
}

/// The address a bound exporter serves on (for banners and tests).
pub fn url(addr: SocketAddr) -> String {
    format!("http://{addr}/metrics")
}

/// A process's metrics ready to serve: the bound port, the registry (process figures and
/// `rocketmq_rpc_latency` registered; the caller adds its collectors) and the RPC observer to
/// set on its remoting servers.
#[derive(Debug)]
pub struct Prepared {
    /// The exporter's port.
    pub listener: TcpListener,
    /// The registry.
    pub metrics: Metrics,
    /// Feeds `rocketmq_rpc_latency`.
    pub rpc: crate::rpc::RpcMetrics,
}

/// What `config` asks for: `None` unless `metricsExporterType=PROM` (OTLP_GRPC and LOG are
/// not served by FerroMQ: a warning says so and metrics stay off). `fallback_host` is where
/// `/metrics` listens when `metricsPromExporterHost` is empty.
///
/// # Errors
/// A malformed `metricsLabel`, or the port cannot be bound (named with the keys to change).
pub async fn prepare(
    config: &crate::MetricsConfig,
    node: &crate::registry::Node,
    fallback_host: &str,
) -> Result<Option<Prepared>, String> {
    match config.metrics_exporter_type {
        crate::ExporterType::Prom => {}
        crate::ExporterType::Disable => return Ok(None),
        other => {
            warn!(
                metricsExporterType = ?other,
                "FerroMQ serves metrics to Prometheus only: set metricsExporterType=PROM (and scrape /metrics) or DISABLE; metrics are off"
            );
            return Ok(None);
        }
    }
    let mut metrics = Metrics::new(node, config)?;
    let rpc = crate::rpc::RpcMetrics::register(metrics.registry_mut());
    metrics.register_collector(Box::new(crate::process::ProcessCollector));
    let addr = listen_address(&config.metrics_prom_exporter_host, fallback_host, config.metrics_prom_exporter_port);
    let listener = bind(&addr).await?;
    Ok(Some(Prepared { listener, metrics, rpc }))
}
