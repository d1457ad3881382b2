//! The AutoSwitchHA wire format of controller mode (controller-mode.md §6.1): plain TCP on the
//! HA port, every integer big-endian, every frame starting with the sender's connection state.
//!
//! | direction      | frame                                                                  |
//! |----------------|------------------------------------------------------------------------|
//! | slave → master | handshake, 16 B: `int32 state=1, int16 syncFromLastFile, int16 asyncLearner, int64 slaveBrokerId` |
//! | master → slave | handshake, 20 B + body: `int32 state=1, int32 bodySize, int64 maxPhyOffset, int32 lastEpoch`, then `bodySize / 12` × `int32 epoch, int64 startOffset` |
//! | slave → master | transfer report, 12 B: `int32 state=2, int64 slaveMaxOffset` |
//! | master → slave | transfer, 36 B + body: `int32 state=2, int32 bodySize, int64 startOffset, int32 epoch, int64 epochStartOffset, int64 confirmOffset`, then CommitLog bytes |
//!
//! Java: `AutoSwitchHAClient`, `AutoSwitchHAConnection`. Bytes in, values out: no sockets here.
//! Readers take what the socket gave, in any split, and return whole frames; a frame that
//! cannot be honoured (unknown state, a size past the bounds) is an error and the caller closes
//! the connection.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::epoch_file::EpochEntry;

/// `HAConnectionState` ordinals on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum HaConnectionState {
    /// Not connected yet.
    Ready = 0,
    /// Exchanging handshakes.
    Handshake = 1,
    /// Shipping CommitLog data.
    Transfer = 2,
    /// Paused.
    Suspend = 3,
    /// Closed.
    Shutdown = 4,
}

/// Size of the slave's handshake.
pub const SLAVE_HANDSHAKE_SIZE: usize = 16;
/// Size of the master's handshake header.
pub const MASTER_HANDSHAKE_HEADER_SIZE: usize = 20;
/// Size of one epoch entry in the master's handshake body.
pub const EPOCH_ENTRY_SIZE: usize = 12;
/// Size of the slave's transfer report.
pub const SLAVE_REPORT_SIZE: usize = 12;
/// Size of the master's transfer header.
pub const MASTER_TRANSFER_HEADER_SIZE: usize = 36;
/// The most epoch entries a handshake may carry (one per master change: far more than any
/// broker set sees).
pub const MAX_EPOCH_ENTRIES: usize = 1 << 16;
/// The largest transfer body accepted (Java's masters send `haTransferBatchSize`, 32 KiB by
/// default; a slave's read buffer is 4 MiB).
pub const MAX_TRANSFER_BODY_BYTES: usize = 4 * 1024 * 1024 - MASTER_TRANSFER_HEADER_SIZE;

/// A frame that cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The state field is not one the sender may send here.
    #[error("unexpected HA connection state {0} in a frame")]
    State(i32),
    /// A negative size or one past the bounds.
    #[error("HA frame body of {size} bytes is out of bounds (at most {max})")]
    Size {
        /// The size announced.
        size: i64,
        /// The bound.
        max: usize,
    },
    /// A handshake body that is not whole epoch entries.
    #[error("HA handshake body of {0} bytes is not a whole number of 12-byte epoch entries")]
    EpochBody(usize),
}

/// The slave's handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlaveHandshake {
    /// Start at the master's last CommitLog file instead of its first (`syncFromLastFile`).
    pub sync_from_last_file: bool,
    /// Never joins the SyncStateSet (`asyncLearner`).
    pub async_learner: bool,
    /// The slave's controller-assigned id.
    pub slave_broker_id: i64,
}

/// The master's handshake: where its log ends and its epochs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterHandshake {
    /// The master's CommitLog max offset.
    pub max_phy_offset: i64,
    /// Its newest epoch.
    pub last_epoch: i32,
    /// Its epoch list, oldest first.
    pub epochs: Vec<EpochEntry>,
}

/// A frame from the master: CommitLog bytes (or none: a heartbeat) with the epoch they belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterTransfer {
    /// Where `body` starts in the master's CommitLog.
    pub start_offset: i64,
    /// The epoch the bytes were written in (a batch never crosses an epoch).
    pub epoch: i32,
    /// Where that epoch starts.
    pub epoch_start_offset: i64,
    /// The master's confirm offset.
    pub confirm_offset: i64,
    /// Raw CommitLog bytes.
    pub body: Bytes,
}

/// A frame from the slave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlaveFrame {
    /// The handshake.
    Handshake(SlaveHandshake),
    /// A transfer report: the slave's CommitLog max offset (the first one says where to start).
    Report(i64),
}

/// A frame from the master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MasterFrame {
    /// The handshake.
    Handshake(MasterHandshake),
    /// Data or a heartbeat.
    Transfer(MasterTransfer),
}

impl SlaveHandshake {
    /// The 16 bytes.
    pub fn encode(&self) -> [u8; SLAVE_HANDSHAKE_SIZE] {
        let mut out = [0u8; SLAVE_HANDSHAKE_SIZE];
        out[..4].copy_from_slice(&(HaConnectionState::Handshake as i32).to_be_bytes());
        out[4..6].copy_from_slice(&i16::from(self.sync_from_last_file).to_be_bytes());
        out[6..8].copy_from_slice(&i16::from(self.async_learner).to_be_bytes());
        out[8..].copy_from_slice(&self.slave_broker_id.to_be_bytes());
        out
    }
}

/// A transfer report of `slave_max_offset`.
pub fn encode_report(slave_max_offset: i64) -> [u8; SLAVE_REPORT_SIZE] {
    let mut out = [0u8; SLAVE_REPORT_SIZE];
    out[..4].copy_from_slice(&(HaConnectionState::Transfer as i32).to_be_bytes());
    out[4..].copy_from_slice(&slave_max_offset.to_be_bytes());
    out
}

impl MasterHandshake {
    /// The header and body.
    pub fn encode(&self) -> Vec<u8> {
        let body = self.epochs.len() * EPOCH_ENTRY_SIZE;
        let mut out = Vec::with_capacity(MASTER_HANDSHAKE_HEADER_SIZE + body);
        out.put_i32(HaConnectionState::Handshake as i32);
        out.put_i32(i32::try_from(body).unwrap_or(i32::MAX));
        out.put_i64(self.max_phy_offset);
        out.put_i32(self.last_epoch);
        for e in &self.epochs {
            out.put_i32(e.epoch);
            out.put_i64(e.start_offset);
        }
        out
    }
}

impl MasterTransfer {
    /// The 36-byte header (the body follows it on the wire).
    ///
    /// # Panics
    /// If the body exceeds `i32::MAX` bytes (callers cap batches far below).
    pub fn encode_header(&self) -> [u8; MASTER_TRANSFER_HEADER_SIZE] {
        let size = i32::try_from(self.body.len()).expect("transfer batches are capped far below 2 GiB");
        let mut out = [0u8; MASTER_TRANSFER_HEADER_SIZE];
        let mut w = &mut out[..];
        w.put_i32(HaConnectionState::Transfer as i32);
        w.put_i32(size);
        w.put_i64(self.start_offset);
        w.put_i32(self.epoch);
        w.put_i64(self.epoch_start_offset);
        w.put_i64(self.confirm_offset);
        out
    }
}

/// The master's reader of what a slave sends.
#[derive(Debug, Default)]
pub struct SlaveFrameReader {
    buf: BytesMut,
}

impl SlaveFrameReader {
    /// Adds bytes read from the socket.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame, `Ok(None)` until one is complete.
    ///
    /// # Errors
    /// [`FrameError::State`] for a state a slave does not send.
    pub fn next_frame(&mut self) -> Result<Option<SlaveFrame>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let state = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        match state {
            1 if self.buf.len() >= SLAVE_HANDSHAKE_SIZE => {
                let mut f = self.buf.split_to(SLAVE_HANDSHAKE_SIZE);
                f.advance(4);
                let sync_from_last_file = f.get_i16() != 0;
                let async_learner = f.get_i16() != 0;
                let slave_broker_id = f.get_i64();
                Ok(Some(SlaveFrame::Handshake(SlaveHandshake { sync_from_last_file, async_learner, slave_broker_id })))
            }
            2 if self.buf.len() >= SLAVE_REPORT_SIZE => {
                let mut f = self.buf.split_to(SLAVE_REPORT_SIZE);
                f.advance(4);
                Ok(Some(SlaveFrame::Report(f.get_i64())))
            }
            1 | 2 => Ok(None),
            other => Err(FrameError::State(other)),
        }
    }
}

/// The slave's reader of what its master sends.
#[derive(Debug, Default)]
pub struct MasterFrameReader {
    buf: BytesMut,
}

impl MasterFrameReader {
    /// Adds bytes read from the socket.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame, `Ok(None)` until one is complete.
    ///
    /// # Errors
    /// An unknown state, a negative or out-of-bounds size, a handshake body that is not whole
    /// epoch entries.
    pub fn next_frame(&mut self) -> Result<Option<MasterFrame>, FrameError> {
        if self.buf.len() < 8 {
            return Ok(None);
        }
        let state = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        let size = i32::from_be_bytes([self.buf[4], self.buf[5], self.buf[6], self.buf[7]]);
        let (header, max) = match state {
            1 => (MASTER_HANDSHAKE_HEADER_SIZE, MAX_EPOCH_ENTRIES * EPOCH_ENTRY_SIZE),
            2 => (MASTER_TRANSFER_HEADER_SIZE, MAX_TRANSFER_BODY_BYTES),
            other => return Err(FrameError::State(other)),
        };
        let body =
            usize::try_from(size).ok().filter(|&s| s <= max).ok_or(FrameError::Size { size: size.into(), max })?;
        if state == 1 && body % EPOCH_ENTRY_SIZE != 0 {
            return Err(FrameError::EpochBody(body));
        }
        if self.buf.len() < header + body {
            self.buf.reserve(header + body - self.buf.len());
            return Ok(None);
        }
        let mut h = self.buf.split_to(header);
        let payload = self.buf.split_to(body).freeze();
        h.advance(8);
        if state == 1 {
            let max_phy_offset = h.get_i64();
            let last_epoch = h.get_i32();
            let mut p = payload;
            let epochs = (0..body / EPOCH_ENTRY_SIZE)
                .map(|_| EpochEntry { epoch: p.get_i32(), start_offset: p.get_i64() })
                .collect();
            return Ok(Some(MasterFrame::Handshake(MasterHandshake { max_phy_offset, last_epoch, epochs })));
        }
        Ok(Some(MasterFrame::Transfer(MasterTransfer {
            start_offset: h.get_i64(),
            epoch: h.get_i32(),
            epoch_start_offset: h.get_i64(),
            confirm_offset: h.get_i64(),
            body: payload,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slave_frames_golden_bytes() {
        let hs = SlaveHandshake { sync_from_last_file: true, async_learner: false, slave_broker_id: 2 };
        assert_eq!(hs.encode(), [0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        assert_eq!(encode_report(0x0102_0304_0506), [0, 0, 0, 2, 0, 0, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06]);

        // Split anywhere, both frames come back in order.
        let mut all = hs.encode().to_vec();
        all.extend_from_slice(&encode_report(4096));
        for split in 0..all.len() {
            let mut r = SlaveFrameReader::default();
            let mut got = Vec::new();
            for part in [&all[..split], &all[split..]] {
                r.feed(part);
                while let Some(f) = r.next_frame().unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(got, vec![SlaveFrame::Handshake(hs), SlaveFrame::Report(4096)], "split at {split}");
        }
        let mut r = SlaveFrameReader::default();
        r.feed(&[0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(r.next_frame(), Err(FrameError::State(7)));
    }

    #[test]
    fn master_frames_golden_bytes() {
        let hs = MasterHandshake {
            max_phy_offset: 1_048_576 + 10,
            last_epoch: 2,
            epochs: vec![EpochEntry { epoch: 1, start_offset: 0 }, EpochEntry { epoch: 2, start_offset: 1_048_576 }],
        };
        let bytes = hs.encode();
        #[rustfmt::skip]
        let want: Vec<u8> = vec![
            0, 0, 0, 1,                      // state HANDSHAKE
            0, 0, 0, 24,                     // body: two 12-byte entries
            0, 0, 0, 0, 0, 0x10, 0, 10,      // maxPhyOffset
            0, 0, 0, 2,                      // lastEpoch
            0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 2, 0, 0, 0, 0, 0, 0x10, 0, 0,
        ];
        assert_eq!(bytes, want);

        let t = MasterTransfer {
            start_offset: 4096,
            epoch: 2,
            epoch_start_offset: 1_048_576,
            confirm_offset: 4000,
            body: Bytes::from_static(b"abc"),
        };
        #[rustfmt::skip]
        let want_header: [u8; 36] = [
            0, 0, 0, 2,                      // state TRANSFER
            0, 0, 0, 3,                      // bodySize
            0, 0, 0, 0, 0, 0, 0x10, 0,       // startOffset 4096
            0, 0, 0, 2,                      // epoch
            0, 0, 0, 0, 0, 0x10, 0, 0,       // epochStartOffset
            0, 0, 0, 0, 0, 0, 0x0f, 0xa0,    // confirmOffset 4000
        ];
        assert_eq!(t.encode_header(), want_header);

        let mut all = bytes.clone();
        all.extend_from_slice(&t.encode_header());
        all.extend_from_slice(b"abc");
        for split in 0..all.len() {
            let mut r = MasterFrameReader::default();
            let mut got = Vec::new();
            for part in [&all[..split], &all[split..]] {
                r.feed(part);
                while let Some(f) = r.next_frame().unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(
                got,
                vec![MasterFrame::Handshake(hs.clone()), MasterFrame::Transfer(t.clone())],
                "split at {split}"
            );
        }
    }

    #[test]
    fn bad_master_frames_are_refused() {
        let read = |bytes: &[u8]| {
            let mut r = MasterFrameReader::default();
            r.feed(bytes);
            r.next_frame()
        };
        assert_eq!(read(&[0, 0, 0, 9, 0, 0, 0, 0]), Err(FrameError::State(9)));
        assert!(matches!(read(&[0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff]), Err(FrameError::Size { size: -1, .. })));
        assert!(matches!(read(&[0, 0, 0, 2, 0x7f, 0, 0, 0]), Err(FrameError::Size { .. })));
        assert_eq!(read(&[0, 0, 0, 1, 0, 0, 0, 13]), Err(FrameError::EpochBody(13)));
        assert_eq!(read(&[0, 0, 0, 2, 0, 0, 0, 1]), Ok(None), "a header still to come");
    }
}
