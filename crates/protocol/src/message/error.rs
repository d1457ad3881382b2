//! The error type shared by every codec in the `message` module.

/// Why a message-format value could not be encoded or decoded.
///
/// Offsets are byte positions relative to the start of the buffer handed to the decoder (for
/// [`crate::message::StoredMessage::decode_all`], the start of the whole concatenation), so an
/// operator can find the bad bytes with a hex dump.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// The input ended (or the declared record ended) before a field was complete.
    #[error("{field} at offset {offset} needs {needed} bytes but only {available} remain")]
    Truncated {
        /// Field being read, named as in the RocketMQ layout tables (e.g. `BODY`).
        field: &'static str,
        /// Where the field starts.
        offset: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the buffer (or in the declared record) at `offset`.
        available: usize,
    },
    /// MAGICCODE is neither V1, V2 nor the end-of-file blank.
    #[error("unknown MAGICCODE {magic:#010x} at offset {offset}")]
    BadMagic {
        /// Where the record starts.
        offset: usize,
        /// The magic value found.
        magic: u32,
    },
    /// A record was expected but the end-of-file blank marker was found.
    #[error("end-of-file blank marker (remaining {remaining}) at offset {offset} where a record was expected")]
    UnexpectedBlank {
        /// Where the marker starts.
        offset: usize,
        /// Bytes from the marker to the end of its file.
        remaining: u32,
    },
    /// A blank marker whose length cannot be right (shorter than the marker itself).
    #[error("blank marker at offset {offset} declares {remaining} remaining bytes, less than its own 8")]
    InvalidBlank {
        /// Where the marker starts.
        offset: usize,
        /// The declared remaining length, as read.
        remaining: i32,
    },
    /// TOTALSIZE is smaller than the smallest possible record.
    #[error("TOTALSIZE {total_size} at offset {offset} is below the minimum of {min}")]
    InvalidTotalSize {
        /// Where the record starts.
        offset: usize,
        /// The declared size, as read.
        total_size: i32,
        /// The smallest size a well-formed record can have.
        min: usize,
    },
    /// A length prefix is negative.
    #[error("{field} at offset {offset} has negative length {length}")]
    NegativeLength {
        /// The length field.
        field: &'static str,
        /// Where the length field starts.
        offset: usize,
        /// The value read.
        length: i32,
    },
    /// A length inside a record or batch entry runs past the entry's declared TOTALSIZE.
    #[error("{field} at offset {offset} needs {needed} bytes, past the end of the {total_size}-byte entry at offset {record_offset}")]
    FieldOverrun {
        /// The field that does not fit.
        field: &'static str,
        /// Where the field starts.
        offset: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Where the record or batch entry starts.
        record_offset: usize,
        /// Its declared TOTALSIZE.
        total_size: usize,
    },
    /// The lengths inside a record or batch entry do not add up to its declared total size.
    #[error("{field} at offset {offset} declares {declared} bytes but its fields add up to {computed}")]
    SizeMismatch {
        /// The size field (`TOTALSIZE`).
        field: &'static str,
        /// Where the record or entry starts.
        offset: usize,
        /// The declared size.
        declared: u64,
        /// The size implied by the parsed lengths.
        computed: u64,
    },
    /// A text field is not valid UTF-8.
    #[error("{field} at offset {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// The field.
        field: &'static str,
        /// Where the field's bytes start.
        offset: usize,
    },
    /// A host port does not fit in 0..=65535.
    #[error("{field} at offset {offset} has port {port}, outside 0..=65535")]
    InvalidPort {
        /// The host field.
        field: &'static str,
        /// Where the port starts.
        offset: usize,
        /// The port value read.
        port: i32,
    },
    /// A value is too long for its length prefix (encode side) or for a protocol limit.
    #[error("{field} is {length} bytes, more than the limit of {max}")]
    TooLong {
        /// The field.
        field: &'static str,
        /// Its length in bytes.
        length: usize,
        /// The largest length allowed.
        max: usize,
    },
    /// BODYCRC does not match the body.
    #[error(
        "BODYCRC of record at physical offset {physical_offset} is {stored:#010x}, body hashes to {computed:#010x}"
    )]
    BodyCrcMismatch {
        /// PHYSICALOFFSET of the record, which identifies it in the commit log.
        physical_offset: i64,
        /// The CRC stored in the record.
        stored: u32,
        /// The CRC computed from the body.
        computed: u32,
    },
    /// A message id string is malformed.
    #[error("invalid message id {id:?}: {reason}")]
    InvalidMessageId {
        /// The id as given.
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}
