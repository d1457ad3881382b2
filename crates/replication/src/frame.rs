//! The classic HA wire format: plain TCP, no RemotingCommand framing.
//!
//! | direction      | frame                                                    |
//! |----------------|----------------------------------------------------------|
//! | slave → master | `int64 slaveMaxOffset` (big-endian), 8 bytes             |
//! | master → slave | `int64 physicalOffset`, `int32 bodySize`, `bodySize` raw CommitLog bytes |
//!
//! A body of size 0 is a heartbeat. Java: `DefaultHAClient.REPORT_HEADER_SIZE`,
//! `DefaultHAConnection.TRANSFER_HEADER_SIZE`. Bytes in, values out: no sockets here.

use bytes::{Buf, Bytes, BytesMut};

/// Size of a slave's offset report.
pub const REPORT_HEADER_SIZE: usize = 8;
/// Size of the header of a master's transfer frame.
pub const TRANSFER_HEADER_SIZE: usize = 12;
/// The largest transfer body a slave accepts: Java's slave reads into a 4 MiB buffer, so a
/// master never sends more in one frame.
pub const MAX_TRANSFER_BODY_BYTES: usize = 4 * 1024 * 1024 - TRANSFER_HEADER_SIZE;

/// A slave's report: its CommitLog end offset.
pub fn encode_report(offset: i64) -> [u8; REPORT_HEADER_SIZE] {
    offset.to_be_bytes()
}

/// The header of a transfer frame carrying `body_len` bytes from `offset`.
///
/// # Panics
/// If `body_len` exceeds `i32::MAX` (callers cap bodies at the batch size).
pub fn encode_transfer_header(offset: i64, body_len: usize) -> [u8; TRANSFER_HEADER_SIZE] {
    let size = i32::try_from(body_len).expect("transfer bodies are capped far below 2 GiB");
    let mut header = [0u8; TRANSFER_HEADER_SIZE];
    header[..8].copy_from_slice(&offset.to_be_bytes());
    header[8..].copy_from_slice(&size.to_be_bytes());
    header
}

/// The master's side of the report stream: only the newest complete report in what has
/// been read counts (reports are absolute offsets, so older ones carry nothing). Java:
/// `ReadSocketService#processReadEvent`.
#[derive(Debug, Default)]
pub struct ReportReader {
    partial: [u8; REPORT_HEADER_SIZE],
    len: usize,
}

impl ReportReader {
    /// Takes bytes just read; returns the last report they complete, if any.
    pub fn feed(&mut self, bytes: &[u8]) -> Option<i64> {
        let total = self.len + bytes.len();
        let end = total - total % REPORT_HEADER_SIZE;
        if end == 0 {
            self.partial[self.len..total].copy_from_slice(bytes);
            self.len = total;
            return None;
        }
        let start = end - REPORT_HEADER_SIZE;
        let mut frame = [0u8; REPORT_HEADER_SIZE];
        for (i, b) in frame.iter_mut().enumerate() {
            let k = start + i;
            *b = if k < self.len { self.partial[k] } else { bytes[k - self.len] };
        }
        // `end` >= 8 > `self.len`, so the remainder lies in `bytes`.
        let rest = &bytes[end - self.len..];
        self.partial[..rest.len()].copy_from_slice(rest);
        self.len = rest.len();
        Some(i64::from_be_bytes(frame))
    }
}

/// A transfer frame as the slave receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// Where the body starts in the master's CommitLog.
    pub offset: i64,
    /// Raw CommitLog bytes (empty for a heartbeat).
    pub body: Bytes,
}

/// A transfer header that cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The body size is negative or larger than a slave accepts.
    #[error(
        "transfer frame at physical offset {offset} announces {size} body bytes (at most {MAX_TRANSFER_BODY_BYTES})"
    )]
    BadBodySize {
        /// The frame's offset.
        offset: i64,
        /// The announced size.
        size: i32,
    },
}

/// Takes one complete transfer frame off the front of `buf`; `Ok(None)` while it is
/// incomplete. The body is handed out without copying.
///
/// # Errors
/// [`FrameError::BadBodySize`]; the connection cannot continue after it.
pub fn decode_transfer(buf: &mut BytesMut) -> Result<Option<Transfer>, FrameError> {
    if buf.len() < TRANSFER_HEADER_SIZE {
        return Ok(None);
    }
    let offset = i64::from_be_bytes(buf[..8].try_into().expect("8 bytes checked above"));
    let size = i32::from_be_bytes(buf[8..12].try_into().expect("4 bytes checked above"));
    let body_len = match usize::try_from(size) {
        Ok(n) if n <= MAX_TRANSFER_BODY_BYTES => n,
        _ => return Err(FrameError::BadBodySize { offset, size }),
    };
    if buf.len() < TRANSFER_HEADER_SIZE + body_len {
        // Room for the whole frame, so the next reads complete it without regrowing.
        buf.reserve(TRANSFER_HEADER_SIZE + body_len - buf.len());
        return Ok(None);
    }
    buf.advance(TRANSFER_HEADER_SIZE);
    Ok(Some(Transfer { offset, body: buf.split_to(body_len).freeze() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_last_complete_report_counts_across_reads() {
        let mut r = ReportReader::default();
        let mut stream = Vec::new();
        for v in [5i64, 6, 0x0102_0304_0506_0708] {
            stream.extend_from_slice(&encode_report(v));
        }
        assert_eq!(r.feed(&stream[..3]), None);
        assert_eq!(r.feed(&stream[3..9]), Some(5), "the first report completes across two reads");
        assert_eq!(r.feed(&stream[9..23]), Some(6), "a frame completed in this read, the next one not yet");
        assert_eq!(r.feed(&stream[23..24]), Some(0x0102_0304_0506_0708));
        assert_eq!(r.feed(&[]), None);
        // Several whole frames in one read: the newest wins.
        assert_eq!(r.feed(&stream), Some(0x0102_0304_0506_0708));
    }

    #[test]
    fn transfer_frames_decode_incrementally_and_bad_sizes_are_refused() {
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&encode_transfer_header(4096, 3));
        wire.extend_from_slice(b"abc");
        wire.extend_from_slice(&encode_transfer_header(4099, 0));
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for b in wire.iter() {
            buf.extend_from_slice(&[*b]);
            while let Some(t) = decode_transfer(&mut buf).unwrap() {
                got.push(t);
            }
        }
        assert_eq!(
            got,
            vec![
                Transfer { offset: 4096, body: Bytes::from_static(b"abc") },
                Transfer { offset: 4099, body: Bytes::new() }
            ]
        );
        let mut bad = BytesMut::from(&encode_transfer_header(0, 0)[..]);
        bad[8..12].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(decode_transfer(&mut bad), Err(FrameError::BadBodySize { offset: 0, size: -1 }));
    }
}
