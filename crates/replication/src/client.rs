//! `HaClient`: the slave's side of replication. It connects to the master's HA address,
//! reports its CommitLog end, appends every frame the master ships at exactly that end, and
//! reports again after each batch that moved it and on every heartbeat interval. A frame it
//! cannot append (a different offset, bytes that are not records there) closes the
//! connection with the reason logged; it reconnects after a pause, and also at once when the
//! master address changes. Java: `DefaultHAClient`.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::net::{error_chain, now_ms};
use bytes::BytesMut;
use ferromq_protocol::signature::SessionCredentials;
use ferromq_remoting::tls::ClientTls;
use ferromq_store::{FlushDiskType, MessageStore, ReplicaAppendError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{error, info, trace, warn};

use crate::config::HaConfig;
use crate::flow::FlowMonitor;
use crate::frame::{decode_transfer, encode_report, FrameError};
use crate::link::{Link, LinkWriter};
use crate::runtime_info::{HaClientRuntimeInfo, HaRuntimeInfo};

/// How much the slave reads from the socket at once (frames are at most 32 KiB by default).
const READ_CHUNK_BYTES: usize = 256 * 1024;

/// Settings of the client that are not RocketMQ keys.
#[derive(Debug, Clone)]
pub struct HaClientOptions {
    /// Pause between a closed (or failed) connection and the next attempt. Java: 5 s.
    pub reconnect_interval: Duration,
    /// How long a connection attempt may take.
    pub connect_timeout: Duration,
    /// Connect with TLS (the broker's own client TLS).
    pub tls: Option<ClientTls>,
    /// Authenticate to the master with these (`innerClientAuthenticationCredentials`).
    pub credentials: Option<SessionCredentials>,
}

impl Default for HaClientOptions {
    fn default() -> Self {
        HaClientOptions {
            reconnect_interval: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(3),
            tls: None,
            credentials: None,
        }
    }
}

/// Why a connection to the master ended.
#[derive(Debug, thiserror::Error)]
enum Closed {
    #[error("the master closed the connection")]
    Eof,
    #[error("nothing read from the master within haHousekeepingInterval ({0:?})")]
    Expired(Duration),
    #[error("socket error")]
    Io(#[from] std::io::Error),
    #[error("a report could not be written within haHousekeepingInterval ({0:?})")]
    WriteStalled(Duration),
    #[error("bad frame from the master")]
    Frame(#[from] FrameError),
    #[error("the master's data cannot be appended")]
    Refused(#[from] ReplicaAppendError),
    #[error("the store did not flush replicated data (SYNC_FLUSH)")]
    FlushFailed,
    #[error("the master address changed")]
    MasterChanged,
}

/// State shared by the client handle and its task.
#[derive(Debug)]
struct ClientShared {
    store: Arc<MessageStore>,
    config: HaConfig,
    options: HaClientOptions,
    master: watch::Sender<Option<String>>,
    connected: AtomicBool,
    last_read_ms: AtomicI64,
    last_write_ms: AtomicI64,
    flow: FlowMonitor,
}

/// The slave's HA client. Dropping it stops the connection; call
/// [`shutdown`](Self::shutdown) to wait for that.
#[derive(Debug)]
pub struct HaClient {
    shared: Arc<ClientShared>,
    background: crate::net::Background,
}

impl HaClient {
    /// Starts replicating into `store` from the master at `haMasterAddress` (if set; else
    /// from the address given to [`update_master_address`](Self::update_master_address)).
    /// Must be called inside a tokio runtime.
    pub fn start(store: Arc<MessageStore>, config: HaConfig) -> HaClient {
        HaClient::start_with(store, config, HaClientOptions::default())
    }

    /// As [`start`](Self::start), with explicit [`HaClientOptions`].
    pub fn start_with(store: Arc<MessageStore>, config: HaConfig, options: HaClientOptions) -> HaClient {
        let master = config.master_address().map(str::to_owned);
        let shared = Arc::new(ClientShared {
            store,
            config,
            options,
            master: watch::Sender::new(master),
            connected: AtomicBool::new(false),
            last_read_ms: AtomicI64::new(0),
            last_write_ms: AtomicI64::new(0),
            flow: FlowMonitor::new(None),
        });
        let background = crate::net::Background::spawn(|stop| run(shared.clone(), stop));
        HaClient { shared, background }
    }

    /// Sets the master's HA address (`ip:port`): from the name server's REGISTER_BROKER answer
    /// (`haServerAddr`) or an admin update. An empty string forgets it. A different address
    /// closes the current connection and connects to the new one at once. Java:
    /// `DefaultHAClient#updateHaMasterAddress`.
    pub fn update_master_address(&self, addr: &str) {
        let addr = Some(addr.trim()).filter(|a| !a.is_empty()).map(str::to_owned);
        let changed = self.shared.master.send_if_modified(|current| {
            if *current == addr {
                return false;
            }
            info!(old = ?current, new = ?addr, "master HA address updated");
            current.clone_from(&addr);
            true
        });
        if !changed {
            trace!("master HA address unchanged");
        }
    }

    /// The master's HA address, if known.
    pub fn master_address(&self) -> Option<String> {
        self.shared.master.borrow().clone()
    }

    /// Whether a connection to the master is open.
    pub fn is_connected(&self) -> bool {
        self.shared.connected.load(Ordering::Acquire)
    }

    /// The replication state for GET_BROKER_HA_STATUS. Java: `DefaultHAService#getRuntimeInfo`
    /// (slave side).
    pub fn runtime_info(&self) -> HaRuntimeInfo {
        let s = &self.shared;
        HaRuntimeInfo {
            master: false,
            ha_client_runtime_info: HaClientRuntimeInfo {
                master_addr: self.master_address(),
                transferred_byte_in_second: i64::try_from(s.flow.bytes_in_last_second()).unwrap_or(i64::MAX),
                max_offset: s.store.max_phy_offset(),
                last_read_timestamp: s.last_read_ms.load(Ordering::Acquire),
                last_write_timestamp: s.last_write_ms.load(Ordering::Acquire),
                master_flush_offset: 0,
            },
            ..HaRuntimeInfo::default()
        }
    }

    /// Closes the connection and stops reconnecting; returns when the task has ended.
    pub async fn shutdown(&self) {
        self.background.stop().await;
    }
}

/// Connects, replicates, and reconnects until shutdown.
async fn run(shared: Arc<ClientShared>, shutdown: watch::Receiver<bool>) {
    let s = &shared;
    crate::net::follow_master(&s.master, &s.options, &s.connected, shutdown, |stream| async move {
        s.connected.store(true, Ordering::Release);
        replicate(s, stream).await
    })
    .await;
}

impl crate::net::LinkEnd for Closed {
    fn master_changed() -> Self {
        Closed::MasterChanged
    }

    fn is_master_changed(&self) -> bool {
        matches!(self, Closed::MasterChanged)
    }

    fn log(&self, master: &str) {
        match self {
            Closed::Refused(e) => error!(master, error = %error_chain(e),
                "master pushed data this slave cannot append; connection closed"),
            Closed::Frame(e) => error!(master, error = %e, "bad frame from master; connection closed"),
            Closed::FlushFailed => error!(master, "replicated data could not be flushed; connection closed"),
            Closed::Io(e) => warn!(master, error = %e, "connection to master failed"),
            other => warn!(master, reason = %other, "connection to master closed"),
        }
    }
}

/// One connection: report, then apply frames and report as the CommitLog grows.
async fn replicate(shared: &ClientShared, link: Link) -> Closed {
    let store = &shared.store;
    let heartbeat = shared.config.heartbeat_interval();
    let housekeeping = shared.config.housekeeping_interval();
    let sync_flush = store.config().flush_disk_type == FlushDiskType::SyncFlush;
    let Link { mut reader, mut writer } = link;
    // Whole records are the replica's end; a record head held back from an earlier
    // connection is dropped when the master restarts from here.
    let mut reported = store.max_phy_offset();
    if let Err(e) = report(shared, &mut writer, reported, housekeeping).await {
        return e;
    }
    info!(physical_offset = reported, "reported offset to master");
    let mut last_write = Instant::now();
    let mut last_read = Instant::now();
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    loop {
        if buf.capacity() - buf.len() < READ_CHUNK_BYTES / 4 {
            buf.reserve(READ_CHUNK_BYTES);
        }
        tokio::select! {
            read = reader.read_buf(&mut buf) => {
                match read {
                    Ok(0) => return Closed::Eof,
                    Ok(n) => {
                        last_read = Instant::now();
                        shared.last_read_ms.store(now_ms(), Ordering::Release);
                        shared.flow.record(n);
                    }
                    Err(e) => return Closed::Io(e),
                }
                loop {
                    let transfer = match decode_transfer(&mut buf) {
                        Ok(Some(t)) => t,
                        Ok(None) => break,
                        Err(e) => return Closed::Frame(e),
                    };
                    trace!(physical_offset = transfer.offset, size = transfer.body.len(), "frame from master");
                    if let Err(e) = store.append_replicated(transfer.offset, &transfer.body) {
                        return Closed::Refused(e);
                    }
                }
                let end = store.max_phy_offset();
                if end > reported {
                    // Under SYNC_FLUSH a slave acknowledges only what is on its disk.
                    if sync_flush && !store.wait_flushed(end).await {
                        return Closed::FlushFailed;
                    }
                    if let Err(e) = report(shared, &mut writer, end, housekeeping).await {
                        return e;
                    }
                    reported = end;
                    last_write = Instant::now();
                }
            }
            _ = tokio::time::sleep_until(last_write + heartbeat) => {
                if let Err(e) = report(shared, &mut writer, reported, housekeeping).await {
                    return e;
                }
                last_write = Instant::now();
            }
            _ = tokio::time::sleep_until(last_read + housekeeping) => return Closed::Expired(housekeeping),
        }
    }
}

async fn report(shared: &ClientShared, writer: &mut LinkWriter, offset: i64, limit: Duration) -> Result<(), Closed> {
    match tokio::time::timeout(limit, writer.write_all(&encode_report(offset))).await {
        Ok(Ok(())) => {
            shared.last_write_ms.store(now_ms(), Ordering::Release);
            trace!(physical_offset = offset, "report to master");
            Ok(())
        }
        Ok(Err(e)) => Err(Closed::Io(e)),
        Err(_) => Err(Closed::WriteStalled(limit)),
    }
}
