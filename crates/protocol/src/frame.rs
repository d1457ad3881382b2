//! The remoting frame: `int32 length | int32 (type << 24 | header length) | header | body`.
//!
//! `decode_frame` is incremental: it takes a growing buffer and returns `Ok(None)` until a
//! whole frame is there, so a transport can call it after every read. Oversized and malformed
//! frames are errors; the transport decides to close the connection. Java: `NettyDecoder`,
//! `NettyEncoder`, `RemotingCommand#decode`.

use bytes::{Buf, BufMut, BytesMut};

use crate::command::{RemotingCommand, SerializeType};
use crate::header_codec;

/// Largest frame accepted, counting the 4-byte length field (Java:
/// `com.rocketmq.remoting.frameMaxLength`, 16 MiB).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Largest header length representable in the 24-bit header-length field.
const MAX_HEADER_BYTES: usize = 0x00FF_FFFF;

/// Why a frame could not be decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The length field announces more than the configured maximum.
    #[error("frame of {length} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// Announced frame length including the length field.
        length: usize,
        /// Configured maximum.
        max: usize,
    },
    /// The length field is smaller than the header-length word it must contain.
    #[error("frame length {length} is too small to hold a header")]
    TooShort {
        /// The announced length.
        length: i64,
    },
    /// The header length runs past the end of the frame.
    #[error("header length {header_length} exceeds the frame's {available} bytes")]
    HeaderLengthExceedsFrame {
        /// Announced header length.
        header_length: usize,
        /// Bytes available after the header-length word.
        available: usize,
    },
    /// The serialize type byte is neither JSON (0) nor ROCKETMQ (1).
    #[error("unknown serialize type {0}")]
    UnknownSerializeType(u8),
    /// The JSON header does not parse.
    #[error("malformed JSON header at byte {offset}: {reason}")]
    JsonHeader {
        /// Position in the header.
        offset: usize,
        /// What is wrong there.
        reason: &'static str,
    },
    /// The binary header ends inside a field.
    #[error("binary header truncated in {field} at byte {offset} ({needed} bytes needed)")]
    BinaryHeaderTruncated {
        /// The field being read.
        field: &'static str,
        /// Position in the header.
        offset: usize,
        /// Bytes the field needed.
        needed: usize,
    },
    /// A length in the binary header is negative.
    #[error("negative {field} {length} at byte {offset} of the binary header")]
    BinaryHeaderNegativeLength {
        /// The field being read.
        field: &'static str,
        /// Position in the header.
        offset: usize,
        /// The value read.
        length: i64,
    },
    /// A string in the binary header is not UTF-8.
    #[error("{field} at byte {offset} of the binary header is not UTF-8")]
    BinaryHeaderUtf8 {
        /// The field being read.
        field: &'static str,
        /// Position in the header.
        offset: usize,
    },
    /// A header field is longer than its length field can express.
    #[error("{field} of {length} bytes exceeds the {max}-byte limit of the binary header")]
    FieldTooLong {
        /// Which field.
        field: &'static str,
        /// Its length.
        length: usize,
        /// The limit.
        max: usize,
    },
    /// The header is too large for the 24-bit length field.
    #[error("header of {0} bytes does not fit the 24-bit header length")]
    HeaderTooLarge(usize),
}

/// Appends the whole frame for `cmd` (length field included) to `out`, with the header in
/// `serialize_type`; a body in parts ([`RemotingCommand::body_tail`]) is copied in after it.
///
/// # Errors
/// [`FrameError::HeaderTooLarge`] when the header exceeds 16 MiB - 1,
/// [`FrameError::TooLarge`] when the frame exceeds [`MAX_FRAME_BYTES`], and
/// [`FrameError::FieldTooLong`] for an extFields key over 32767 bytes in the binary layout.
pub fn encode_frame(
    cmd: &RemotingCommand,
    serialize_type: SerializeType,
    out: &mut BytesMut,
) -> Result<(), FrameError> {
    encode_frame_head(cmd, serialize_type, out)?;
    for part in &cmd.body_tail {
        out.put_slice(part);
    }
    Ok(())
}

/// Appends the frame for `cmd` up to the end of `cmd.body` to `out`: the length field
/// (counting the whole body, tail included), the header and `cmd.body`. The caller writes the
/// parts of [`RemotingCommand::body_tail`] after it, in order, to complete the frame.
///
/// # Errors
/// As [`encode_frame`].
pub fn encode_frame_head(
    cmd: &RemotingCommand,
    serialize_type: SerializeType,
    out: &mut BytesMut,
) -> Result<(), FrameError> {
    // The header is built in a buffer kept by the thread (every answer needs one; its length
    // goes before it), which keeps its capacity unless a huge header grew it.
    thread_local! {
        static HEADER: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(HEADER_SCRATCH_BYTES));
    }
    HEADER.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let header = &mut *scratch;
        header.clear();
        let encoded = encode_head_with(cmd, serialize_type, header, out);
        if header.capacity() > 4 * HEADER_SCRATCH_BYTES {
            *header = Vec::with_capacity(HEADER_SCRATCH_BYTES);
        }
        encoded
    })
}

/// What a thread keeps for encoding headers.
const HEADER_SCRATCH_BYTES: usize = 1024;

fn encode_head_with(
    cmd: &RemotingCommand,
    serialize_type: SerializeType,
    header: &mut Vec<u8>,
    out: &mut BytesMut,
) -> Result<(), FrameError> {
    header_codec::encode_header(cmd, serialize_type, header)?;
    if header.len() > MAX_HEADER_BYTES {
        return Err(FrameError::HeaderTooLarge(header.len()));
    }
    let body_len = cmd.body_len();
    let length = 4 + header.len() + body_len;
    if length + 4 > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge { length: length + 4, max: MAX_FRAME_BYTES });
    }
    out.reserve(4 + length - (body_len - cmd.body.len()));
    out.put_i32(length as i32);
    out.put_u32(((serialize_type.code() as u32) << 24) | header.len() as u32);
    out.put_slice(header);
    out.put_slice(&cmd.body);
    Ok(())
}

/// Decodes one frame from the front of `buf`, consuming it. Returns `Ok(None)` when `buf`
/// does not yet hold a whole frame. The body is a zero-copy slice of `buf`'s storage.
///
/// # Errors
/// Any [`FrameError`]; after an error the stream position is lost and the connection should
/// be closed.
pub fn decode_frame(buf: &mut BytesMut, max_frame_bytes: usize) -> Result<Option<RemotingCommand>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let length = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if length < 4 {
        return Err(FrameError::TooShort { length: length.into() });
    }
    let length = length as usize;
    if length + 4 > max_frame_bytes {
        return Err(FrameError::TooLarge { length: length + 4, max: max_frame_bytes });
    }
    if buf.len() < 4 + length {
        buf.reserve(4 + length - buf.len());
        return Ok(None);
    }
    buf.advance(4);
    let mut frame = buf.split_to(length);
    let word = frame.get_u32();
    let type_code = (word >> 24) as u8;
    let header_length = (word & 0x00FF_FFFF) as usize;
    let serialize_type = SerializeType::from_code(type_code).ok_or(FrameError::UnknownSerializeType(type_code))?;
    if header_length > frame.len() {
        return Err(FrameError::HeaderLengthExceedsFrame { header_length, available: frame.len() });
    }
    let header = frame.split_to(header_length);
    let mut cmd = header_codec::decode_header(serialize_type, &header)?;
    cmd.body = frame.freeze();
    Ok(Some(cmd))
}

/// The serialize type announced by a complete frame at the front of `buf`, if there is one.
/// Servers do not need it (they answer in their configured type); tests and tools do.
pub fn peek_serialize_type(buf: &[u8]) -> Option<SerializeType> {
    buf.get(4).and_then(|&b| SerializeType::from_code(b))
}
