//! Connections a remoting port hands to the gRPC server by their first bytes.
//!
//! Java's proxy serves both protocols on its remoting port (`remotingListenPort`, 8080): a
//! connection whose first four bytes, after any TLS, are `PRI ` (the start of the HTTP/2
//! preface) is gRPC (`enableRemotingLocalProxyGrpc`, on by default). No remoting frame can start
//! so: those bytes read as a frame length of 1.35 GB, far over any frame limit. Java relays such
//! a connection over a second TCP connection to its own gRPC port; here the connection itself,
//! with the bytes already read, is handed through a bounded channel ([`Http2Handoff`]) to the
//! gRPC server in the same process, which serves it as one of its own.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;
use tracing::{debug, warn};

/// The first four bytes of the HTTP/2 connection preface (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`).
pub const HTTP2_PREFACE_START: [u8; 4] = *b"PRI ";

/// Connections handed over but not yet taken by the gRPC server; beyond it a new one is closed.
pub const HANDOFF_QUEUE: usize = 128;

/// A byte stream the gRPC server can serve.
pub trait HandedIo: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> HandedIo for T {}

/// One connection handed over: its stream (the bytes read to classify it come first) and
/// where it comes from.
pub struct HandedConnection {
    /// The connection, TLS already removed when it had any.
    pub stream: Prefixed<Box<dyn HandedIo>>,
    /// The client's address (a trusted load balancer's PROXY header already applied).
    pub peer: SocketAddr,
    /// The local address the client connected to, when the socket could tell.
    pub local_addr: Option<SocketAddr>,
    /// Whether the client connected with TLS.
    pub tls: bool,
}

impl std::fmt::Debug for HandedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandedConnection")
            .field("peer", &self.peer)
            .field("local_addr", &self.local_addr)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

/// Where a remoting server sends the connections that start with the HTTP/2 preface
/// ([`crate::ServerConfig::http2_handoff`]).
#[derive(Clone, Debug)]
pub struct Http2Handoff {
    to: mpsc::Sender<HandedConnection>,
}

impl Http2Handoff {
    /// A handoff and the receiving end the gRPC server takes connections from; at most
    /// `capacity` (at least 1) wait there.
    pub fn channel(capacity: usize) -> (Http2Handoff, mpsc::Receiver<HandedConnection>) {
        let (to, from) = mpsc::channel(capacity.max(1));
        (Http2Handoff { to }, from)
    }

    /// Hands `conn` over; when the gRPC server is gone or has [`HANDOFF_QUEUE`] connections
    /// waiting, the connection is closed (logged).
    pub fn hand(&self, conn: HandedConnection) {
        let peer = conn.peer;
        match self.to.try_send(conn) {
            Ok(()) => debug!(remote_addr = %peer, "gRPC on the remoting port: handed to the gRPC server"),
            Err(mpsc::error::TrySendError::Full(_)) => warn!(
                remote_addr = %peer,
                "gRPC on the remoting port: the gRPC server has too many connections waiting; closing this one"
            ),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                warn!(remote_addr = %peer, "gRPC on the remoting port: the gRPC server is not running; closing");
            }
        }
    }
}

/// A stream whose first bytes were read already: reads return those first, then the stream's.
/// Writes go straight to the stream.
#[derive(Debug)]
pub struct Prefixed<S> {
    prefix: [u8; 4],
    start: u8,
    end: u8,
    inner: S,
}

impl<S> Prefixed<S> {
    /// `inner`, with `prefix` (at most 4 bytes) put back in front of what it reads.
    ///
    /// # Panics
    /// If `prefix` is longer than 4 bytes.
    pub fn new(prefix: &[u8], inner: S) -> Prefixed<S> {
        let mut buf = [0u8; 4];
        buf[..prefix.len()].copy_from_slice(prefix);
        Prefixed { prefix: buf, start: 0, end: prefix.len() as u8, inner }
    }

    /// Boxes the stream, keeping the prefix.
    pub fn boxed(self) -> Prefixed<Box<dyn HandedIo>>
    where
        S: HandedIo,
    {
        Prefixed { prefix: self.prefix, start: self.start, end: self.end, inner: Box::new(self.inner) }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.start < this.end {
            let rest = &this.prefix[this.start as usize..this.end as usize];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.start += n as u8;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Reads the first four bytes of a connection (fewer when it ends first), waiting at most
/// `timeout`. `None` (logged) when it sent nothing, failed or stayed silent.
pub(crate) async fn read_first_bytes<S: AsyncRead + Unpin>(
    stream: &mut S,
    peer: SocketAddr,
    timeout: Duration,
) -> Option<([u8; 4], usize)> {
    let mut first = [0u8; 4];
    let mut got = 0;
    let read = async {
        while got < first.len() {
            match stream.read(&mut first[got..]).await {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(())) if got > 0 => Some((first, got)),
        Ok(Ok(())) => {
            debug!(remote_addr = %peer, "connection closed before sending anything");
            None
        }
        Ok(Err(e)) => {
            debug!(remote_addr = %peer, error = %e, "reading the first bytes of a connection failed");
            None
        }
        Err(_) => {
            debug!(remote_addr = %peer, "connection sent fewer than 4 bytes within the idle time; closing it");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_prefixed_stream_reads_its_prefix_then_the_rest_and_writes_through() {
        let (mut near, far) = tokio::io::duplex(64);
        near.write_all(b" * HTTP/2.0").await.unwrap();
        let mut s = Prefixed::new(b"PRI", far);
        // A one-byte buffer takes the prefix a byte at a time.
        let mut one = [0u8; 1];
        s.read_exact(&mut one).await.unwrap();
        assert_eq!(&one, b"P");
        let mut rest = [0u8; 13];
        s.read_exact(&mut rest).await.unwrap();
        assert_eq!(&rest, b"RI * HTTP/2.0");
        s.write_all(b"back").await.unwrap();
        let mut back = [0u8; 4];
        near.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"back");
    }

    #[tokio::test]
    async fn first_bytes_wait_for_four_and_stop_at_the_end_or_the_timeout() {
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let (mut near, mut far) = tokio::io::duplex(64);
        let reader = tokio::spawn(async move {
            let got = read_first_bytes(&mut far, peer, Duration::from_secs(5)).await;
            (got, far)
        });
        // The preface in two pieces still makes four bytes.
        near.write_all(b"PR").await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        near.write_all(b"I *").await.unwrap();
        let (got, _far) = reader.await.unwrap();
        assert_eq!(got, Some((HTTP2_PREFACE_START, 4)));

        // Two bytes then the end: the two bytes.
        let (mut near, mut far) = tokio::io::duplex(64);
        near.write_all(b"ab").await.unwrap();
        drop(near);
        assert_eq!(read_first_bytes(&mut far, peer, Duration::from_secs(5)).await, Some((*b"ab\0\0", 2)));

        // Nothing then the end, and silence past the timeout: nothing.
        let (near, mut far) = tokio::io::duplex(64);
        drop(near);
        assert_eq!(read_first_bytes(&mut far, peer, Duration::from_secs(5)).await, None);
        let (_near, mut far) = tokio::io::duplex(64);
        assert_eq!(read_first_bytes(&mut far, peer, Duration::from_millis(50)).await, None);
    }

    #[tokio::test]
    async fn a_full_or_closed_handoff_closes_the_connection() {
        let (handoff, mut rx) = Http2Handoff::channel(1);
        let peer: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let conn = |_: u8| {
            let (near, far) = tokio::io::duplex(8);
            let c =
                HandedConnection { stream: Prefixed::new(b"PRI ", far).boxed(), peer, local_addr: None, tls: false };
            (near, c)
        };
        let (_kept, first) = conn(1);
        handoff.hand(first);
        let (mut dropped, second) = conn(2);
        handoff.hand(second);
        // The second did not fit: its stream was dropped, so its peer reads the end.
        let mut buf = [0u8; 1];
        assert_eq!(dropped.read(&mut buf).await.unwrap(), 0);
        let mut got = rx.recv().await.unwrap();
        let mut four = [0u8; 4];
        got.stream.read_exact(&mut four).await.unwrap();
        assert_eq!(four, HTTP2_PREFACE_START);
        drop(rx);
        let (mut closed, third) = conn(3);
        handoff.hand(third);
        assert_eq!(closed.read(&mut buf).await.unwrap(), 0);
    }
}
