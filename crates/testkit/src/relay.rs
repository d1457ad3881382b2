//! A TCP relay between a slave and its master that a test can cut (close every link), stall
//! (stop forwarding in both directions while keeping the sockets open, as a dead network path
//! does) or slow down (a bandwidth cap).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// A TCP relay a test puts between two peers, to cut or stall their link.
#[derive(Debug)]
pub struct Relay {
    addr: SocketAddr,
    stalled: watch::Sender<bool>,
    /// Bytes per second each direction may forward; 0 = as fast as it can.
    rate: watch::Sender<u64>,
    cuts: watch::Sender<u64>,
    accepted: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Relay {
    /// Listens on 127.0.0.1 (any port) and relays every connection to `target`.
    ///
    /// # Panics
    /// When the relay cannot bind.
    pub async fn start(target: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
        let addr = listener.local_addr().expect("relay address");
        let stalled = watch::Sender::new(false);
        let rate = watch::Sender::new(0u64);
        let cuts = watch::Sender::new(0u64);
        let accepted = Arc::new(AtomicUsize::new(0));
        let (stall_rx, cut_rx, count) = (stalled.subscribe(), cuts.subscribe(), accepted.clone());
        let rate_rx = rate.subscribe();
        let task = tokio::spawn(async move {
            let mut links = JoinSet::new();
            loop {
                let Ok((inbound, _)) = listener.accept().await else { continue };
                let Ok(outbound) = TcpStream::connect(target).await else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                links.spawn(link(inbound, outbound, stall_rx.clone(), rate_rx.clone(), cut_rx.clone()));
                while links.try_join_next().is_some() {}
            }
        });
        Relay { addr, stalled, rate, cuts, accepted, task }
    }

    /// Where the slave should connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every open link; new connections are still relayed.
    pub fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Stops forwarding bytes (both directions); sockets stay open.
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }

    /// Forwards again.
    pub fn resume(&self) {
        self.stalled.send_replace(false);
    }

    /// Forwards at most `bytes_per_second` in each direction (a slow link); 0 lifts the cap.
    pub fn slow(&self, bytes_per_second: u64) {
        self.rate.send_replace(bytes_per_second);
    }

    /// Connections relayed so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        // Aborting the accept task drops its JoinSet, which aborts every link.
        self.task.abort();
    }
}

async fn link(
    inbound: TcpStream,
    outbound: TcpStream,
    stalled: watch::Receiver<bool>,
    rate: watch::Receiver<u64>,
    mut cuts: watch::Receiver<u64>,
) {
    cuts.mark_unchanged();
    let (in_read, in_write) = inbound.into_split();
    let (out_read, out_write) = outbound.into_split();
    tokio::select! {
        _ = pump(in_read, out_write, stalled.clone(), rate.clone()) => {}
        _ = pump(out_read, in_write, stalled, rate) => {}
        _ = cuts.changed() => {}
    }
}

/// Bytes read at a time when the link is slowed, so the pace stays smooth.
const SLOW_CHUNK: usize = 1024;

async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut stalled: watch::Receiver<bool>,
    rate: watch::Receiver<u64>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if stalled.wait_for(|s| !*s).await.is_err() {
            return;
        }
        let bytes_per_second = *rate.borrow();
        let room = if bytes_per_second > 0 { SLOW_CHUNK } else { buf.len() };
        let n = match from.read(&mut buf[..room]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // A stall that began during the read holds these bytes too.
        if stalled.wait_for(|s| !*s).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
        if bytes_per_second > 0 {
            let pause = std::time::Duration::from_secs_f64(n as f64 / bytes_per_second as f64);
            tokio::time::sleep(pause).await;
        }
    }
}
