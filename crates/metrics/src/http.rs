//! The HTTP/1.1 connection loop behind `/metrics` (and the dashboard's pages): hyper with
//! keep-alive, at most `connections_max` connections at once (more wait for a slot), a request
//! head due within [`HEADER_TIMEOUT`], until `shutdown` completes.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{debug, warn};

/// How long a connection may take to send its request head.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves each request on `listener` with `handler` until `shutdown` completes. `what` names
/// the server in its log lines.
pub async fn serve_http<H, F>(
    listener: TcpListener,
    what: &'static str,
    connections_max: usize,
    shutdown: impl Future<Output = ()>,
    handler: H,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(connections_max.max(1)));
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors and the like: wait rather than spin.
                warn!(server = what, error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let handler = handler.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let served = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), hyper::service::service_fn(handler))
                .await;
            if let Err(e) = served {
                debug!(server = what, %peer, error = %e, "connection ended with an error");
            }
        });
    }
}
