//! The replica's side of AutoSwitchHA. Java: `AutoSwitchHAClient`.
//!
//! Per connection: send the handshake, read the master's epochs, cut the local log to the last
//! offset both logs agree on (the newest epoch both hold with the same start, up to the
//! earlier of its two ends), report that offset, then append each frame at exactly the local
//! end, record each newer epoch the frames carry, follow the master's confirm offset and
//! report after data and on every heartbeat interval. Anything that does not fit (no shared
//! epoch, a frame at another offset, bytes that are not records) closes the connection with
//! the reason logged; it reconnects after a pause, and at once when the master changes.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use ferromq_store::{FlushDiskType, MessageStore, ReplicaAppendError, TruncateError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{error, info, trace, warn};

use super::{epochs, SharedEpochs};
use crate::autoswitch_frame::{encode_report, FrameError, MasterFrame, MasterFrameReader, SlaveHandshake};
use crate::client::HaClientOptions;
use crate::config::HaConfig;
use crate::epoch_file::EpochFileError;
use crate::link::{Link, LinkWriter};
use crate::net::{error_chain, now_ms};
use crate::runtime_info::{HaClientRuntimeInfo, HaRuntimeInfo};

const READ_CHUNK_BYTES: usize = 256 * 1024;

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
    #[error("the master sent data before its handshake")]
    NoHandshake,
    #[error("this log shares no epoch with the master's (local {local:?}, master {master:?}): it cannot be reconciled by truncation")]
    NoConsistentPoint { local: Vec<(i32, i64)>, master: Vec<(i32, i64)> },
    #[error("cannot truncate the log to the consistent point")]
    Truncate(#[from] TruncateError),
    #[error("epoch file")]
    Epochs(#[from] EpochFileError),
    #[error("the master's data cannot be appended")]
    Refused(#[from] ReplicaAppendError),
    #[error("the store did not flush replicated data (SYNC_FLUSH)")]
    FlushFailed,
    #[error("the master changed")]
    MasterChanged,
}

#[derive(Debug)]
struct Shared {
    store: Arc<MessageStore>,
    config: HaConfig,
    options: HaClientOptions,
    broker_id: i64,
    epochs: SharedEpochs,
    master: watch::Sender<Option<String>>,
    connected: AtomicBool,
    last_read_ms: AtomicI64,
    last_write_ms: AtomicI64,
}

/// The replica's AutoSwitchHA client. Dropping it closes the connection;
/// [`shutdown`](Self::shutdown) waits for that.
#[derive(Debug)]
pub struct AutoSwitchSlave {
    shared: Arc<Shared>,
    background: crate::net::Background,
}

impl AutoSwitchSlave {
    /// Starts replicating into `store` as broker `broker_id` from the master's HA address
    /// (`None`: wait for [`update_master_address`](Self::update_master_address)). Dispatch is
    /// bounded by the confirm offset the master sends. Must be called inside a tokio runtime.
    pub fn start(
        store: Arc<MessageStore>,
        config: HaConfig,
        options: HaClientOptions,
        broker_id: i64,
        epoch_file: SharedEpochs,
        master: Option<String>,
    ) -> AutoSwitchSlave {
        store.bound_dispatch_by_confirm(true);
        let shared = Arc::new(Shared {
            store,
            config,
            options,
            broker_id,
            epochs: epoch_file,
            master: watch::Sender::new(master),
            connected: AtomicBool::new(false),
            last_read_ms: AtomicI64::new(0),
            last_write_ms: AtomicI64::new(0),
        });
        let background = crate::net::Background::spawn(|stop| run(shared.clone(), stop));
        AutoSwitchSlave { shared, background }
    }

    /// Points the client at another master HA address (empty: none); a change reconnects.
    pub fn update_master_address(&self, addr: &str) {
        let addr = Some(addr.trim()).filter(|a| !a.is_empty()).map(str::to_owned);
        self.shared.master.send_if_modified(|current| {
            if *current == addr {
                return false;
            }
            info!(old = ?current, new = ?addr, "master HA address updated");
            current.clone_from(&addr);
            true
        });
    }

    /// The master's HA address, if known.
    pub fn master_address(&self) -> Option<String> {
        self.shared.master.borrow().clone()
    }

    /// Whether a connection to the master is open (and past its handshake).
    pub fn is_connected(&self) -> bool {
        self.shared.connected.load(Ordering::Acquire)
    }

    /// The replication state for GET_BROKER_HA_STATUS (replica side).
    pub fn runtime_info(&self) -> HaRuntimeInfo {
        let s = &self.shared;
        HaRuntimeInfo {
            master: false,
            ha_client_runtime_info: HaClientRuntimeInfo {
                master_addr: self.master_address(),
                transferred_byte_in_second: 0,
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

async fn run(shared: Arc<Shared>, shutdown: watch::Receiver<bool>) {
    let s = &shared;
    crate::net::follow_master(&s.master, &s.options, &s.connected, shutdown, |stream| replicate(s, stream)).await;
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
            Closed::Io(e) => warn!(master, error = %e, "connection to master failed"),
            Closed::Eof | Closed::Expired(_) | Closed::WriteStalled(_) => {
                warn!(master, reason = %self, "connection to master closed")
            }
            other => error!(master, reason = %error_chain(other), "replication stopped; reconnecting"),
        }
    }
}

async fn replicate(shared: &Shared, link: Link) -> Closed {
    let store = &shared.store;
    let heartbeat = shared.config.heartbeat_interval();
    let housekeeping = shared.config.housekeeping_interval();
    let sync_flush = store.config().flush_disk_type == FlushDiskType::SyncFlush;
    let Link { mut reader, mut writer } = link;
    let handshake = SlaveHandshake {
        sync_from_last_file: shared.config.sync_from_last_file,
        async_learner: shared.config.async_learner,
        slave_broker_id: shared.broker_id,
    };
    if let Err(e) = write(shared, &mut writer, &handshake.encode(), housekeeping).await {
        return e;
    }
    let mut frames = MasterFrameReader::default();
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut reported: Option<i64> = None;
    let mut last_write = Instant::now();
    let mut last_read = Instant::now();
    loop {
        if buf.capacity() - buf.len() < READ_CHUNK_BYTES / 4 {
            buf.reserve(READ_CHUNK_BYTES);
        }
        buf.clear();
        let heartbeat_at = if reported.is_some() { last_write + heartbeat } else { last_read + housekeeping };
        tokio::select! {
            read = reader.read_buf(&mut buf) => {
                match read {
                    Ok(0) => return Closed::Eof,
                    Ok(_) => {
                        last_read = Instant::now();
                        shared.last_read_ms.store(now_ms(), Ordering::Release);
                    }
                    Err(e) => return Closed::Io(e),
                }
                frames.feed(&buf);
                loop {
                    let frame = match frames.next_frame() {
                        Ok(Some(f)) => f,
                        Ok(None) => break,
                        Err(e) => return Closed::Frame(e),
                    };
                    match frame {
                        MasterFrame::Handshake(h) => {
                            let from = match truncate_to_consistent_point(shared, &h) {
                                Ok(from) => from,
                                Err(e) => return e,
                            };
                            if let Err(e) = write(shared, &mut writer, &encode_report(from), housekeeping).await {
                                return e;
                            }
                            info!(physical_offset = from, master_max = h.max_phy_offset, master_epoch = h.last_epoch,
                                "handshake done; replicating from the consistent point");
                            reported = Some(from);
                            last_write = Instant::now();
                            shared.connected.store(true, Ordering::Release);
                        }
                        MasterFrame::Transfer(t) => {
                            if reported.is_none() {
                                return Closed::NoHandshake;
                            }
                            trace!(physical_offset = t.start_offset, size = t.body.len(), epoch = t.epoch, "frame from master");
                            if !t.body.is_empty() {
                                let newer = epochs(&shared.epochs).last().is_none_or(|e| t.epoch > e.epoch);
                                if newer {
                                    if let Err(e) = epochs(&shared.epochs).append(t.epoch, t.epoch_start_offset) {
                                        return Closed::Epochs(e);
                                    }
                                    info!(epoch = t.epoch, start_offset = t.epoch_start_offset, "new epoch from master");
                                }
                            }
                            if let Err(e) = store.append_replicated(t.start_offset, &t.body) {
                                return Closed::Refused(e);
                            }
                            // Never past what this replica holds (Java: min of the two).
                            let confirm = t.confirm_offset.min(store.max_phy_offset());
                            if confirm > store.confirm_offset() {
                                store.set_confirm_offset(confirm);
                            }
                        }
                    }
                }
                let end = store.max_phy_offset();
                if reported.is_some_and(|r| end > r) {
                    if sync_flush && !store.wait_flushed(end).await {
                        return Closed::FlushFailed;
                    }
                    if let Err(e) = write(shared, &mut writer, &encode_report(end), housekeeping).await {
                        return e;
                    }
                    reported = Some(end);
                    last_write = Instant::now();
                }
            }
            _ = tokio::time::sleep_until(heartbeat_at) => {
                let Some(at) = reported else { return Closed::Expired(housekeeping) };
                if let Err(e) = write(shared, &mut writer, &encode_report(at), housekeeping).await {
                    return e;
                }
                last_write = Instant::now();
            }
            _ = tokio::time::sleep_until(last_read + housekeeping) => return Closed::Expired(housekeeping),
        }
    }
}

/// Cuts the log (and the epoch list) to the last offset it shares with the master; returns
/// where replication resumes (0 for a replica without epochs: the master picks the start).
fn truncate_to_consistent_point(shared: &Shared, h: &crate::autoswitch_frame::MasterHandshake) -> Result<i64, Closed> {
    let store = &shared.store;
    let mut file = epochs(&shared.epochs);
    if file.entries().is_empty() {
        // A new replica. Whatever it holds belongs to no epoch and cannot be checked against
        // the master: it is dropped, so the master's bytes land on an empty log.
        let min = store.min_phy_offset();
        if store.max_phy_offset() > min {
            warn!(max_physical_offset = store.max_phy_offset(), "replica without epochs holds data; dropping it");
            store.truncate_files(min)?;
        }
        return Ok(0);
    }
    let local_max = store.max_phy_offset();
    let Some(point) = file.consistent_point(local_max, &h.epochs, h.max_phy_offset) else {
        return Err(Closed::NoConsistentPoint {
            local: file.entries().iter().map(|e| (e.epoch, e.start_offset)).collect(),
            master: h.epochs.iter().map(|e| (e.epoch, e.start_offset)).collect(),
        });
    };
    if point < local_max {
        warn!(physical_offset = point, local_max, "truncating the log to the point it shares with the master");
        store.truncate_files(point)?;
    }
    file.truncate_from_offset(point)?;
    Ok(point.min(store.max_phy_offset()))
}

async fn write(shared: &Shared, writer: &mut LinkWriter, bytes: &[u8], limit: Duration) -> Result<(), Closed> {
    match tokio::time::timeout(limit, writer.write_all(bytes)).await {
        Ok(Ok(())) => {
            shared.last_write_ms.store(now_ms(), Ordering::Release);
            Ok(())
        }
        Ok(Err(e)) => Err(Closed::Io(e)),
        Err(_) => Err(Closed::WriteStalled(limit)),
    }
}
