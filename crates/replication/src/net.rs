//! Socket plumbing both replication protocols share (classic HA and AutoSwitchHA): the master's
//! accept loop, vectored writes with a deadline, and the small helpers of their logs.

use std::future::Future;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferromq_config::IpBlock;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::warn;

use crate::link::{HaListener, Link, LinkWriter};
use crate::service::MAX_SLAVE_CONNECTIONS;

/// Pause after a failed accept (for example out of file descriptors) before the next one.
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// Parses `haSlaveWhiteList`.
///
/// # Errors
/// The entry that is neither an address nor a CIDR block.
pub fn parse_white_list(text: &str) -> Result<Vec<IpBlock>, String> {
    IpBlock::parse_list("haSlaveWhiteList", text)
}

/// Accepts replicas on `listener` until `shutdown`, serving each with `serve` on its own task
/// (at most [`MAX_SLAVE_CONNECTIONS`] at once; more are refused). A peer outside a non-empty
/// `haSlaveWhiteList` is closed at once, before a byte is read or written; the others pass the
/// listener's TLS and authentication ([`crate::link`]) within `first_byte_timeout` each step.
/// Returns once every connection task has ended (each sees the same shutdown signal).
pub(crate) async fn accept_loop<F, Fut>(
    listener: HaListener,
    white_list: &str,
    first_byte_timeout: Duration,
    shutdown: watch::Receiver<bool>,
    serve: F,
) where
    F: Fn(Link, SocketAddr, watch::Receiver<bool>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (listener, admission) = listener.into_parts();
    let serve = std::sync::Arc::new(serve);
    // The broker checked the list at start; an entry that does not parse admits nobody.
    let allowed = parse_white_list(white_list).unwrap_or_else(|e| {
        warn!(error = %e, "the HA port admits no replica");
        IpBlock::parse("255.255.255.255").into_iter().collect()
    });
    let mut connections = JoinSet::new();
    let mut stop = shutdown.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, addr)) => {
                    if !allowed.is_empty() && !allowed.iter().any(|a| a.contains(addr.ip())) {
                        warn!(remote_addr = %addr, "HA connection refused: the address is not in haSlaveWhiteList");
                        drop(stream);
                        continue;
                    }
                    if connections.len() >= MAX_SLAVE_CONNECTIONS {
                        warn!(remote_addr = %addr, limit = MAX_SLAVE_CONNECTIONS, "too many replica connections; refusing");
                        continue;
                    }
                    let (admission, serve, stop) = (admission.clone(), serve.clone(), shutdown.clone());
                    connections.spawn(async move {
                        if let Some(link) = admission.admit(stream, addr, first_byte_timeout).await {
                            serve(link, addr, stop).await;
                        }
                    });
                }
                Err(e) => {
                    warn!(error = %e, "accepting a replica connection failed");
                    tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = crate::stopped(&mut stop) => break,
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// Why a write did not complete.
#[derive(Debug)]
pub(crate) enum WriteFailed {
    /// The socket failed.
    Io(std::io::Error),
    /// It did not complete within the limit.
    Stalled,
}

/// Writes `parts` (frame headers and bodies) with as few vectored writes as the socket allows,
/// within `limit`.
pub(crate) async fn write_parts(writer: &mut LinkWriter, parts: &[Bytes], limit: Duration) -> Result<(), WriteFailed> {
    let write_all = async {
        let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
        let mut slices = &mut slices[..];
        while !slices.is_empty() {
            let n = writer.write_vectored(slices).await?;
            if n == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::WriteZero));
            }
            IoSlice::advance_slices(&mut slices, n);
        }
        Ok(())
    };
    match tokio::time::timeout(limit, write_all).await {
        Ok(result) => result.map_err(WriteFailed::Io),
        Err(_) => Err(WriteFailed::Stalled),
    }
}

pub(crate) use ferromq_config::error_chain;

/// Wall-clock milliseconds (the runtime info's timestamps).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// How a replica's link to its master ended, as [`follow_master`] needs to know it.
pub(crate) trait LinkEnd: std::fmt::Display {
    /// The end caused by a new master address.
    fn master_changed() -> Self;
    /// Whether this is that end (reconnect at once, quietly).
    fn is_master_changed(&self) -> bool;
    /// Logs why the link ended.
    fn log(&self, master: &str);
}

/// A replica's connection loop: connects to the master address in `master` (waiting while there
/// is none), runs `replicate` on the connection until it ends, the address changes or
/// `shutdown`; then pauses `reconnect_interval` (cut short by a new address) and starts again.
/// `connected` is cleared whenever a connection ends (`replicate` sets it).
pub(crate) async fn follow_master<E, F, Fut>(
    master: &watch::Sender<Option<String>>,
    options: &crate::HaClientOptions,
    connected: &std::sync::atomic::AtomicBool,
    mut shutdown: watch::Receiver<bool>,
    mut replicate: F,
) where
    E: LinkEnd,
    F: FnMut(Link) -> Fut,
    Fut: Future<Output = E>,
{
    use std::sync::atomic::Ordering;
    let mut master = master.subscribe();
    loop {
        let addr = master.borrow_and_update().clone();
        let Some(addr) = addr else {
            tokio::select! {
                _ = master.changed() => continue,
                _ = crate::stopped(&mut shutdown) => return,
            }
        };
        let attempt = tokio::select! {
            c = tokio::time::timeout(options.connect_timeout, TcpStream::connect(&addr)) => c,
            _ = crate::stopped(&mut shutdown) => return,
        };
        match attempt {
            Ok(Ok(stream)) => {
                let linked = tokio::select! {
                    l = crate::link::connect(stream, &addr, options.tls.as_ref(), options.credentials.as_ref()) => l,
                    _ = crate::stopped(&mut shutdown) => return,
                };
                let stream = match linked {
                    Ok(link) => link,
                    Err(e) => {
                        warn!(master = %addr, error = %error_chain(&e), "cannot set up the link to master");
                        tokio::select! {
                            _ = tokio::time::sleep(options.reconnect_interval) => {}
                            _ = master.changed() => {}
                            _ = crate::stopped(&mut shutdown) => return,
                        }
                        continue;
                    }
                };
                tracing::info!(master = %addr, tls = options.tls.is_some(), authenticated = options.credentials.is_some(), "connected to master");
                let end = tokio::select! {
                    end = replicate(stream) => end,
                    _ = master.changed() => E::master_changed(),
                    _ = crate::stopped(&mut shutdown) => {
                        connected.store(false, Ordering::Release);
                        return;
                    }
                };
                connected.store(false, Ordering::Release);
                if end.is_master_changed() {
                    tracing::info!(master = %addr, "master address changed; reconnecting");
                    continue;
                }
                end.log(&addr);
            }
            Ok(Err(e)) => warn!(master = %addr, error = %e, "cannot connect to master"),
            Err(_) => warn!(master = %addr, timeout = ?options.connect_timeout, "cannot connect to master: timed out"),
        }
        tokio::select! {
            _ = tokio::time::sleep(options.reconnect_interval) => {}
            _ = master.changed() => {}
            _ = crate::stopped(&mut shutdown) => return,
        }
    }
}

/// A service's background task and the signal that stops it. Dropping it signals the stop;
/// [`stop`](Self::stop) also waits for the task.
#[derive(Debug)]
pub(crate) struct Background {
    shutdown: watch::Sender<bool>,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Background {
    /// Spawns `body` with the stop signal it must watch.
    pub(crate) fn spawn<Fut>(body: impl FnOnce(watch::Receiver<bool>) -> Fut) -> Background
    where
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (shutdown, stop) = watch::channel(false);
        let task = tokio::spawn(body(stop));
        Background { shutdown, task: std::sync::Mutex::new(Some(task)) }
    }

    /// Signals the stop without waiting.
    pub(crate) fn signal(&self) {
        self.shutdown.send_replace(true);
    }

    /// Signals the stop and waits for the task to end.
    pub(crate) async fn stop(&self) {
        self.signal();
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.signal();
    }
}
