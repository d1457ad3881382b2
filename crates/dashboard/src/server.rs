//! The dashboard's HTTP server: the embedded pages at `/`, the JSON API at rocketmq-dashboard's
//! paths, everything else 404. HTTP/1.1 with keep-alive, a bounded number of connections and
//! request bodies.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, HOST, ORIGIN};
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

use crate::error::ApiError;
use crate::http::{failure, success, ApiRequest, BODY_MAX};
use crate::state::Dashboard;

/// Connections served at once (a browser opens about six); more wait for a slot.
pub const CONNECTIONS_MAX: usize = 64;

/// Binds the dashboard's port.
///
/// # Errors
/// The address cannot be bound, with what to change.
pub async fn bind(addr: &str) -> Result<TcpListener, String> {
    TcpListener::bind(addr).await.map_err(|e| {
        format!("cannot listen on {addr} for the dashboard: {e}; pick a free port with --dashboard-port (or --port)")
    })
}

/// The address a bound dashboard serves on, for banners (0.0.0.0 shown as 127.0.0.1).
pub fn url(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("http://127.0.0.1:{}/", addr.port())
    } else {
        format!("http://{addr}/")
    }
}

/// Serves `dashboard` on `listener` until `shutdown` completes; the collector runs meanwhile.
pub async fn serve(listener: TcpListener, dashboard: Arc<Dashboard>, shutdown: impl Future<Output = ()>) {
    if let Ok(local) = listener.local_addr() {
        info!(address = %local, "dashboard at {}", url(local));
    }
    let collector = tokio::spawn(crate::collector::run(dashboard.clone()));
    let served = dashboard.clone();
    let handler = move |request| answer(served.clone(), request);
    ferromq_metrics::http::serve_http(listener, "dashboard", CONNECTIONS_MAX, shutdown, handler).await;
    collector.abort();
    dashboard.shutdown().await;
}

type HttpResponse = Response<Full<Bytes>>;

fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> HttpResponse {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The pages poll the API; nothing here may be served stale.
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn json_response(status: StatusCode, value: &serde_json::Value) -> HttpResponse {
    let body = serde_json::to_vec(value).unwrap_or_default();
    respond(status, "application/json;charset=UTF-8", Bytes::from(body))
}

/// A request another site's page makes the browser send (a form post from elsewhere): refused,
/// so that visiting a hostile page cannot delete topics through a dashboard on localhost.
fn cross_site(request: &Request<Incoming>) -> bool {
    let headers = request.headers();
    if headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) == Some("cross-site") {
        return true;
    }
    let (Some(origin), Some(host)) = (headers.get(ORIGIN), headers.get(HOST)) else { return false };
    let (Ok(origin), Ok(host)) = (origin.to_str(), host.to_str()) else { return true };
    let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    !origin_host.eq_ignore_ascii_case(host)
}

async fn answer(dashboard: Arc<Dashboard>, request: Request<Incoming>) -> Result<HttpResponse, Infallible> {
    let path = request.uri().path().to_owned();
    if let Some(asset) = crate::assets::find(&path) {
        if request.method() != Method::GET && request.method() != Method::HEAD {
            return Ok(respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain", Bytes::from_static(b"GET only\n")));
        }
        return Ok(respond(StatusCode::OK, asset.content_type, Bytes::from_static(asset.body)));
    }
    if !crate::api::is_api_path(&path) {
        return Ok(respond(StatusCode::NOT_FOUND, "text/plain", Bytes::from_static(b"not found\n")));
    }
    if request.method() != Method::GET && request.method() != Method::HEAD && cross_site(&request) {
        warn!(%path, "dashboard refused a cross-site request");
        let error = ApiError::bad("cross-site requests are refused; use the dashboard's own pages");
        return Ok(json_response(StatusCode::FORBIDDEN, &failure(&error)));
    }
    let query = request.uri().query().map(str::to_owned);
    let content_type = request.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let method = request.method().clone();
    let body = match Limited::new(request.into_body(), BODY_MAX).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => {
            let error = ApiError::bad(format!("cannot read the request body (at most {BODY_MAX} bytes): {e}"));
            return Ok(json_response(StatusCode::PAYLOAD_TOO_LARGE, &failure(&error)));
        }
    };
    let result = match ApiRequest::parse(query.as_deref(), content_type.as_deref(), &body) {
        Ok(api_request) => crate::api::dispatch(&dashboard, &method, &path, &api_request).await,
        Err(e) => Err(e),
    };
    Ok(match result {
        Ok(data) => json_response(StatusCode::OK, &success(data)),
        Err(e) => {
            debug!(%path, error = %e.chain(), "dashboard request failed");
            json_response(StatusCode::OK, &failure(&e))
        }
    })
}
