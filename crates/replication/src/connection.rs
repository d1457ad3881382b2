//! One slave's connection on the master: a read side taking the slave's offset reports and a
//! write side shipping CommitLog frames from where the slave stands. Both run in one task;
//! when either ends, the connection closes. Java: `DefaultHAConnection` with its
//! `ReadSocketService` and `WriteSocketService`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, error, info, trace, warn};

use crate::flow::FlowMonitor;
use crate::frame::{encode_transfer_header, ReportReader};
use crate::link::{Link, LinkReader, LinkWriter};
use crate::service::MasterShared;

/// Bytes read from a slave at once; reports are 8 bytes, so this only bounds a burst.
const REPORT_READ_BUFFER_BYTES: usize = 4 * 1024;

/// Frame bytes gathered into one write when more data is ready (fewer system calls while a
/// slave catches up).
const WRITE_BURST_BYTES: usize = 256 * 1024;

/// Why a slave connection closed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectionClosed {
    #[error("the slave closed the connection")]
    Eof,
    #[error("nothing read from the slave within haHousekeepingInterval ({0:?})")]
    Expired(Duration),
    #[error("socket error")]
    Io(#[from] std::io::Error),
    #[error("a write did not complete within haHousekeepingInterval ({0:?})")]
    WriteStalled(Duration),
    #[error("the HA service is shutting down")]
    ShutDown,
    #[error("the slave reports offset {slave}, beyond the master's CommitLog end {master}: its log has diverged")]
    Diverged { slave: i64, master: i64 },
}

/// What the master knows about one slave.
#[derive(Debug)]
pub(crate) struct SlaveConnection {
    pub(crate) addr: SocketAddr,
    /// The slave's last reported offset; -1 before the first report. Java: `slaveAckOffset`.
    ack: AtomicI64,
    /// The slave's first report: where shipping starts. Java: `slaveRequestOffset`.
    request: watch::Sender<i64>,
    /// Where the next frame starts; -1 until shipping starts. Java: `nextTransferFromWhere`.
    transfer_from: AtomicI64,
    pub(crate) flow: FlowMonitor,
}

impl SlaveConnection {
    pub(crate) fn new(addr: SocketAddr, cap_per_second: Option<u64>) -> SlaveConnection {
        SlaveConnection {
            addr,
            ack: AtomicI64::new(-1),
            request: watch::Sender::new(-1),
            transfer_from: AtomicI64::new(-1),
            flow: FlowMonitor::new(cap_per_second),
        }
    }

    pub(crate) fn ack(&self) -> i64 {
        self.ack.load(Ordering::Acquire)
    }

    pub(crate) fn transfer_from(&self) -> i64 {
        self.transfer_from.load(Ordering::Acquire)
    }

    /// Records a report; returns the previous acknowledged offset.
    pub(crate) fn take_report(&self, offset: i64) -> i64 {
        let previous = self.ack.swap(offset, Ordering::AcqRel);
        let first = self.request.send_if_modified(|r| {
            let first = *r < 0;
            if first {
                *r = offset;
            }
            first
        });
        if first {
            info!(remote_addr = %self.addr, physical_offset = offset, "slave requests data from its offset");
        }
        previous
    }
}

/// Serves one slave until the connection ends or the service shuts down.
pub(crate) async fn serve(
    shared: Arc<MasterShared>,
    link: Link,
    addr: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
) {
    let conn = Arc::new(SlaveConnection::new(addr, shared.flow_cap()));
    shared.add_connection(conn.clone());
    let Link { reader, writer } = link;
    let closed = tokio::select! {
        r = read_reports(&shared, &conn, reader) => r,
        r = ship(&shared, &conn, writer) => r,
        _ = crate::stopped(&mut shutdown) => ConnectionClosed::ShutDown,
    };
    shared.remove_connection(&conn);
    match &closed {
        ConnectionClosed::Expired(_) | ConnectionClosed::WriteStalled(_) => {
            warn!(remote_addr = %addr, reason = %closed, "ha housekeeping: slave connection closed")
        }
        ConnectionClosed::Io(e) => warn!(remote_addr = %addr, error = %e, "slave connection failed"),
        ConnectionClosed::Diverged { .. } => error!(remote_addr = %addr, reason = %closed, "slave refused"),
        _ => info!(remote_addr = %addr, reason = %closed, "slave connection closed"),
    }
}

/// Takes offset reports until the slave goes away or stays silent too long.
async fn read_reports(shared: &MasterShared, conn: &SlaveConnection, mut reader: LinkReader) -> ConnectionClosed {
    let housekeeping = shared.config.housekeeping_interval();
    let mut reports = ReportReader::default();
    let mut buf = vec![0u8; REPORT_READ_BUFFER_BYTES];
    loop {
        let n = match tokio::time::timeout(housekeeping, reader.read(&mut buf)).await {
            Err(_) => return ConnectionClosed::Expired(housekeeping),
            Ok(Err(e)) => return ConnectionClosed::Io(e),
            Ok(Ok(0)) => return ConnectionClosed::Eof,
            Ok(Ok(n)) => n,
        };
        if let Some(offset) = reports.feed(&buf[..n]) {
            trace!(remote_addr = %conn.addr, physical_offset = offset, "slave report");
            // A slave only ever holds bytes this master shipped: one that claims more has a
            // diverged log (an old master's, another group's). Its acknowledgements would let a
            // SYNC_MASTER confirm sends no replica holds, so it is refused (Java only warns).
            let master = shared.store.max_phy_offset();
            if offset > master {
                return ConnectionClosed::Diverged { slave: offset, master };
            }
            let previous = conn.take_report(offset);
            shared.acknowledged(offset, previous);
        }
    }
}

/// Ships CommitLog frames from the slave's first report on, heartbeats when idle.
async fn ship(shared: &MasterShared, conn: &SlaveConnection, mut writer: LinkWriter) -> ConnectionClosed {
    let mut request = conn.request.subscribe();
    let requested = match request.wait_for(|r| *r >= 0).await {
        Ok(r) => *r,
        Err(_) => return ConnectionClosed::ShutDown,
    };
    let store = &shared.store;
    let mut next = if requested == 0 {
        // An empty slave starts at the master's newest segment, not at its oldest data.
        let max = store.max_phy_offset();
        let file_size = store.config().mapped_file_size_commit_log.max(1) as i64;
        max - max % file_size
    } else {
        requested
    };
    conn.transfer_from.store(next, Ordering::Release);
    info!(remote_addr = %conn.addr, physical_offset = next, slave_request = requested, "shipping CommitLog to slave");
    let heartbeat = shared.config.heartbeat_interval();
    let write_timeout = shared.config.housekeeping_interval();
    let batch = shared.config.transfer_batch_size();
    let mut last_write = Instant::now();
    let mut warned_unreadable = false;
    loop {
        let allowance = match conn.flow.allowance() {
            Ok(n) => n,
            Err(resume_at) => {
                debug!(remote_addr = %conn.addr, "ha flow control: pausing shipping");
                tokio::time::sleep_until(resume_at.into()).await;
                continue;
            }
        };
        // Frames of at most `batch` bytes each (a Java slave relies on that), but as many as
        // are ready, up to WRITE_BURST_BYTES, in one vectored write.
        let mut frames = Vec::new();
        let mut shipped = 0usize;
        while shipped < WRITE_BURST_BYTES && shipped < allowance {
            let want = batch.min(allowance - shipped);
            let Some(body) = store.read_commit_log(next, want).filter(|b| !b.is_empty()) else { break };
            frames.push(Bytes::copy_from_slice(&encode_transfer_header(next, body.len())));
            next += body.len() as i64;
            shipped += body.len();
            frames.push(body);
        }
        if !frames.is_empty() {
            if let Err(e) = send(&mut writer, &frames, write_timeout).await {
                return e;
            }
            conn.transfer_from.store(next, Ordering::Release);
            conn.flow.record(shipped);
            last_write = Instant::now();
            warned_unreadable = false;
            continue;
        }
        if !warned_unreadable {
            warned_unreadable = warn_if_unreadable(shared, conn, next);
        }
        // Arm the wake-up before the last look, so an append in between is not missed.
        let arrived = shared.data_arrived.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        if store.read_commit_log(next, 1).is_some_and(|b| !b.is_empty()) {
            continue;
        }
        let heartbeat_at = last_write + heartbeat;
        if Instant::now() >= heartbeat_at {
            let heartbeat = [Bytes::copy_from_slice(&encode_transfer_header(next, 0))];
            if let Err(e) = send(&mut writer, &heartbeat, write_timeout).await {
                return e;
            }
            trace!(remote_addr = %conn.addr, physical_offset = next, "heartbeat to slave");
            last_write = Instant::now();
            continue;
        }
        tokio::select! {
            _ = &mut arrived => {}
            _ = tokio::time::sleep_until(heartbeat_at) => {}
        }
    }
}

/// Logs once why nothing can be shipped from `next` when it is not simply "not written yet".
fn warn_if_unreadable(shared: &MasterShared, conn: &SlaveConnection, next: i64) -> bool {
    let (min, max) = (shared.store.min_phy_offset(), shared.store.max_phy_offset());
    if next < min {
        warn!(remote_addr = %conn.addr, physical_offset = next, min_physical_offset = min,
            "slave needs CommitLog data the master has deleted; it cannot catch up");
        return true;
    }
    if next > max {
        warn!(remote_addr = %conn.addr, physical_offset = next, max_physical_offset = max,
            "slave is ahead of the master; its log may have diverged");
        return true;
    }
    false
}

/// Writes frames' headers and bodies with as few (vectored) writes as the socket allows.
async fn send(writer: &mut LinkWriter, parts: &[Bytes], limit: Duration) -> Result<(), ConnectionClosed> {
    crate::net::write_parts(writer, parts, limit).await.map_err(|e| match e {
        crate::net::WriteFailed::Io(e) => ConnectionClosed::Io(e),
        crate::net::WriteFailed::Stalled => ConnectionClosed::WriteStalled(limit),
    })
}
