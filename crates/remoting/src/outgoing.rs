//! What a connection's writer sends: frames queued whole, or with a body in parts that are
//! written where they are (a pull's stored messages are slices of the mapped CommitLog), and
//! the batch the writer gathers them into for one vectored write.

use std::io::IoSlice;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Linux's `IOV_MAX`: the most buffers one `writev` takes.
pub(crate) const MAX_IOV: usize = 1024;

/// A body part shorter than this is copied into the batch's buffer rather than written as a
/// buffer of its own: an iovec entry costs the kernel more than copying a few hundred bytes.
const COPY_BELOW_BYTES: usize = 256;

/// A queued frame (or frames) is copied into the batch's buffer below this size and written
/// as a buffer of its own from it.
const SHARE_FROM_BYTES: usize = 64 * 1024;

/// One item of a connection's write queue.
#[derive(Debug)]
pub(crate) enum Outgoing {
    /// Whole frames.
    Frames(Bytes),
    /// One frame whose body continues after its head: the head (length field, header, first
    /// body part), then the parts, in order.
    Parts(Bytes, Vec<Bytes>),
}

/// Queued frames gathered for one write: small ones copied into one buffer, large buffers
/// kept as they are, in order.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// Buffers sealed so far, in write order; none is empty.
    chunks: Vec<Bytes>,
    /// Bytes copied since the last sealed chunk.
    open: BytesMut,
    len: usize,
}

impl Batch {
    /// Bytes gathered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is gathered.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the batch should take no more before it is written: a megabyte, or nearly as
    /// many buffers as one `writev` takes (a frame in parts adds at most 33 for a default pull
    /// of 32 messages; a larger one only makes the write loop take two calls).
    pub(crate) fn is_full(&self) -> bool {
        self.len >= 1024 * 1024 || self.chunks.len() + 64 >= MAX_IOV
    }

    /// Adds a queued item after those already gathered.
    pub(crate) fn push(&mut self, item: Outgoing) {
        match item {
            Outgoing::Frames(frames) => self.add(frames, SHARE_FROM_BYTES),
            Outgoing::Parts(head, parts) => {
                self.add(head, SHARE_FROM_BYTES);
                for part in parts {
                    self.add(part, COPY_BELOW_BYTES);
                }
            }
        }
    }

    fn add(&mut self, bytes: Bytes, share_from: usize) {
        self.len += bytes.len();
        if bytes.len() < share_from {
            self.open.extend_from_slice(&bytes);
        } else {
            self.seal();
            self.chunks.push(bytes);
        }
    }

    fn seal(&mut self) {
        if !self.open.is_empty() {
            self.chunks.push(self.open.split().freeze());
        }
    }

    /// Writes everything gathered to `sink` and empties the batch. A stream that takes
    /// several buffers in one call gets them with vectored writes; any other (TLS) gets them
    /// copied into one buffer, one write.
    pub(crate) async fn write_to<W: AsyncWrite + Unpin + ?Sized>(&mut self, sink: &mut W) -> std::io::Result<()> {
        self.seal();
        let outcome = match self.chunks.len() {
            0 => Ok(()),
            1 => sink.write_all(&self.chunks[0]).await,
            _ if sink.is_write_vectored() => write_all_vectored(sink, &self.chunks).await,
            _ => {
                let mut joined = BytesMut::with_capacity(self.len);
                for chunk in &self.chunks {
                    joined.extend_from_slice(chunk);
                }
                sink.write_all(&joined).await
            }
        };
        self.chunks.clear();
        self.len = 0;
        // The open buffer's storage is reused once the sealed chunks that share it are gone.
        self.open.clear();
        outcome
    }
}

/// Writes all of `chunks` (none empty), in order, at most [`MAX_IOV`] buffers per call.
async fn write_all_vectored<W: AsyncWrite + Unpin + ?Sized>(sink: &mut W, chunks: &[Bytes]) -> std::io::Result<()> {
    let mut first = 0;
    // Bytes of `chunks[first]` already written.
    let mut done = 0;
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(chunks.len().min(MAX_IOV));
    while first < chunks.len() {
        slices.clear();
        slices.push(IoSlice::new(&chunks[first][done..]));
        slices.extend(chunks[first + 1..].iter().take(MAX_IOV - 1).map(|c| IoSlice::new(c)));
        let mut written = sink.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let left = chunks[first].len() - done;
            if written >= left {
                written -= left;
                first += 1;
                done = 0;
            } else {
                done += written;
                written = 0;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A stream that takes at most `limit` bytes per call, vectored or not, and records them.
    struct Trickle {
        got: Vec<u8>,
        limit: usize,
        vectored: bool,
        calls: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
            self.calls += 1;
            let n = buf.len().min(self.limit);
            self.got.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<std::io::Result<usize>> {
            assert!(bufs.len() <= MAX_IOV, "{} buffers in one call", bufs.len());
            self.calls += 1;
            let mut n = 0;
            for buf in bufs {
                let take = buf.len().min(self.limit - n);
                self.got.extend_from_slice(&buf[..take]);
                n += take;
                if n == self.limit {
                    break;
                }
            }
            Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            self.vectored
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn pattern(len: usize, seed: u8) -> Bytes {
        (0..len).map(|i| seed.wrapping_add(i as u8)).collect::<Vec<u8>>().into()
    }

    /// Frames and parts of every size class, some empty, 1,500 parts in one frame.
    fn items() -> (Vec<Outgoing>, Vec<u8>) {
        let mut expected = Vec::new();
        let mut items = Vec::new();
        let mut add_frames = |b: Bytes, expected: &mut Vec<u8>| {
            expected.extend_from_slice(&b);
            items.push(Outgoing::Frames(b));
        };
        add_frames(pattern(10, 1), &mut expected);
        add_frames(pattern(100_000, 2), &mut expected);
        add_frames(Bytes::new(), &mut expected);
        let head = pattern(30, 3);
        let parts: Vec<Bytes> = (0..1500).map(|i| pattern([0, 5, 300, 1100][i % 4], i as u8)).collect();
        expected.extend_from_slice(&head);
        for p in &parts {
            expected.extend_from_slice(p);
        }
        items.push(Outgoing::Parts(head, parts));
        expected.extend_from_slice(&pattern(7, 9));
        items.push(Outgoing::Frames(pattern(7, 9)));
        (items, expected)
    }

    #[tokio::test]
    async fn a_batch_writes_its_bytes_in_order_however_little_each_call_takes() {
        for (vectored, limit) in [(true, usize::MAX), (true, 1), (true, 4099), (false, usize::MAX), (false, 777)] {
            let (items, expected) = items();
            let mut batch = Batch::default();
            for item in items {
                batch.push(item);
            }
            assert_eq!(batch.len(), expected.len());
            let mut sink = Trickle { got: Vec::new(), limit, vectored, calls: 0 };
            batch.write_to(&mut sink).await.unwrap();
            assert!(sink.got == expected, "vectored {vectored}, limit {limit}: bytes differ");
            assert!(batch.is_empty());
            if vectored && limit == usize::MAX {
                // 1,500 parts of which 750 are shared: a few calls, not one per buffer.
                assert!(sink.calls <= 3, "{} calls", sink.calls);
            }
            // The emptied batch is reusable.
            batch.push(Outgoing::Frames(pattern(5, 7)));
            sink.got.clear();
            batch.write_to(&mut sink).await.unwrap();
            assert_eq!(sink.got, pattern(5, 7).to_vec());
        }
    }

    #[tokio::test]
    async fn a_stream_that_takes_nothing_is_an_error_not_a_spin() {
        let mut batch = Batch::default();
        batch.push(Outgoing::Parts(pattern(10, 0), vec![pattern(1000, 1), pattern(1000, 2)]));
        let mut sink = Trickle { got: Vec::new(), limit: 0, vectored: true, calls: 0 };
        let e = batch.write_to(&mut sink).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WriteZero);
    }
}
