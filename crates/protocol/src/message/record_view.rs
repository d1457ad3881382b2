//! A validated, zero-copy view of one stored record, and the blank-or-record peek the store
//! uses while scanning a commit-log file.
//!
//! Java: `CommitLog#checkMessageAndReturnSize` (the same checks, without dispatching).

use std::net::SocketAddr;

use crate::message::crc::crc32_masked;
use crate::message::cursor::Cursor;
use crate::message::error::MessageError;
use crate::message::host::read_host;
use crate::message::layout::{body_len_pos, MessageVersion, BLANK_MAGIC_CODE, BLANK_MARKER_LEN, MIN_RECORD_LEN};
use crate::message::properties::find_property;
use crate::message::sysflag::{BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG};
use crate::message::tag::tags_code;

/// What starts at a commit-log position: a record, or the end-of-file blank marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordOrBlank<T> {
    /// A record (or whatever the decoder made of it).
    Record(T),
    /// The blank marker: the rest of this file, `remaining` bytes from the marker on, is unused
    /// and the next record is at the start of the next file.
    Blank {
        /// Bytes from the marker to the end of its file, the marker included (at least 8).
        remaining: u32,
    },
}

/// Reads only TOTALSIZE and MAGICCODE: how many bytes the entry at the start of `buf` takes,
/// without checking its insides. Needs 8 bytes.
///
/// For a record the size is TOTALSIZE, which may exceed `buf.len()`: the caller then knows how
/// much more to read.
pub fn peek_record_size(buf: &[u8]) -> Result<RecordOrBlank<usize>, MessageError> {
    Ok(match peek_at(buf, 0)? {
        Peek::Record { total_size, .. } => RecordOrBlank::Record(total_size),
        Peek::Blank { remaining } => RecordOrBlank::Blank { remaining },
    })
}

/// The 8-byte prefix of a commit-log entry.
enum Peek {
    Record { total_size: usize, version: MessageVersion },
    Blank { remaining: u32 },
}

fn peek_at(buf: &[u8], base: usize) -> Result<Peek, MessageError> {
    let mut c = Cursor::new(buf, base);
    let total_size = c.i32("TOTALSIZE")?;
    let magic = c.u32("MAGICCODE")?;
    if magic == BLANK_MAGIC_CODE {
        return match u32::try_from(total_size) {
            Ok(remaining) if remaining as usize >= BLANK_MARKER_LEN => Ok(Peek::Blank { remaining }),
            _ => Err(MessageError::InvalidBlank { offset: base, remaining: total_size }),
        };
    }
    let version = MessageVersion::from_magic_code(magic).ok_or(MessageError::BadMagic { offset: base, magic })?;
    match usize::try_from(total_size) {
        Ok(size) if size >= MIN_RECORD_LEN => Ok(Peek::Record { total_size: size, version }),
        _ => Err(MessageError::InvalidTotalSize { offset: base, total_size, min: MIN_RECORD_LEN }),
    }
}

/// One stored record, checked and split into fields, borrowing everything from the input.
///
/// Parsing validates the layout completely (magic, sizes, ports, TOTALSIZE equal to the sum of
/// the parsed lengths) but not the body CRC and not the UTF-8 of topic and properties, which
/// [`verify_body_crc`](Self::verify_body_crc), [`topic_str`](Self::topic_str) and
/// [`properties_str`](Self::properties_str) check on demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// The whole record, `total_size` bytes.
    pub bytes: &'a [u8],
    /// TOTALSIZE.
    pub total_size: usize,
    /// From MAGICCODE.
    pub version: MessageVersion,
    /// BODYCRC as stored.
    pub body_crc: u32,
    /// QUEUEID.
    pub queue_id: i32,
    /// FLAG.
    pub flag: i32,
    /// QUEUEOFFSET.
    pub queue_offset: i64,
    /// PHYSICALOFFSET.
    pub physical_offset: i64,
    /// SYSFLAG.
    pub sys_flag: i32,
    /// BORNTIMESTAMP.
    pub born_timestamp_ms: i64,
    /// BORNHOST.
    pub born_host: SocketAddr,
    /// STORETIMESTAMP.
    pub store_timestamp_ms: i64,
    /// STOREHOSTADDRESS.
    pub store_host: SocketAddr,
    /// RECONSUMETIMES.
    pub reconsume_times: i32,
    /// PREPARED TRANSACTION OFFSET.
    pub prepared_transaction_offset: i64,
    /// BODY, as stored (possibly compressed).
    pub body: &'a [u8],
    /// TOPIC bytes.
    pub topic: &'a [u8],
    /// PROPERTIES bytes.
    pub properties: &'a [u8],
    /// Offset of the record within the input the caller gave, for error reports.
    base: usize,
}

impl<'a> RecordView<'a> {
    /// Parses the record or blank marker at the start of `buf`.
    ///
    /// Errors: [`MessageError::Truncated`] when `buf` ends before TOTALSIZE bytes (a torn
    /// tail), [`MessageError::FieldOverrun`] or [`MessageError::SizeMismatch`] when the lengths
    /// inside disagree with TOTALSIZE, and the field-specific variants otherwise.
    pub fn parse(buf: &'a [u8]) -> Result<RecordOrBlank<RecordView<'a>>, MessageError> {
        Self::parse_at(buf, 0)
    }

    /// As [`parse`](Self::parse), reporting offsets as if `buf` started at `base`.
    pub(crate) fn parse_at(buf: &'a [u8], base: usize) -> Result<RecordOrBlank<RecordView<'a>>, MessageError> {
        let (total_size, version) = match peek_at(buf, base)? {
            Peek::Blank { remaining } => return Ok(RecordOrBlank::Blank { remaining }),
            Peek::Record { total_size, version } => (total_size, version),
        };
        let bytes = buf.get(..total_size).ok_or(MessageError::Truncated {
            field: "record",
            offset: base,
            needed: total_size,
            available: buf.len(),
        })?;
        // From here on every read stays inside the declared record, so running out of bytes
        // means the lengths inside contradict TOTALSIZE, not that the input is short.
        let view = Self::parse_fields(bytes, base, version).map_err(|e| match e {
            MessageError::Truncated { field, offset, needed, .. } => {
                MessageError::FieldOverrun { field, offset, needed, record_offset: base, total_size }
            }
            other => other,
        })?;
        Ok(RecordOrBlank::Record(view))
    }

    fn parse_fields(bytes: &'a [u8], base: usize, version: MessageVersion) -> Result<Self, MessageError> {
        let total_size = bytes.len();
        let mut c = Cursor::new(bytes, base);
        c.take(8, "TOTALSIZE and MAGICCODE")?;
        let body_crc = c.u32("BODYCRC")?;
        let queue_id = c.i32("QUEUEID")?;
        let flag = c.i32("FLAG")?;
        let queue_offset = c.i64("QUEUEOFFSET")?;
        let physical_offset = c.i64("PHYSICALOFFSET")?;
        let sys_flag = c.i32("SYSFLAG")?;
        let born_timestamp_ms = c.i64("BORNTIMESTAMP")?;
        let born_host = read_host(&mut c, sys_flag & BORNHOST_V6_FLAG != 0, "BORNHOST")?;
        let store_timestamp_ms = c.i64("STORETIMESTAMP")?;
        let store_host = read_host(&mut c, sys_flag & STOREHOSTADDRESS_V6_FLAG != 0, "STOREHOSTADDRESS")?;
        let reconsume_times = c.i32("RECONSUMETIMES")?;
        let prepared_transaction_offset = c.i64("PREPARED TRANSACTION OFFSET")?;
        debug_assert_eq!(c.pos(), body_len_pos(sys_flag));
        let body_len = c.len_i32("BODY length")?;
        let body = c.take(body_len, "BODY")?;
        let topic_len = match version {
            MessageVersion::V1 => c.len_i8("TOPIC length")?,
            MessageVersion::V2 => c.len_i16("TOPIC length")?,
        };
        let topic = c.take(topic_len, "TOPIC")?;
        let properties_len = c.len_i16("PROPERTIES length")?;
        let properties = c.take(properties_len, "PROPERTIES")?;
        if c.remaining() != 0 {
            return Err(MessageError::SizeMismatch {
                field: "TOTALSIZE",
                offset: base,
                declared: total_size as u64,
                computed: c.pos() as u64,
            });
        }
        Ok(RecordView {
            bytes,
            total_size,
            version,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag,
            born_timestamp_ms,
            born_host,
            store_timestamp_ms,
            store_host,
            reconsume_times,
            prepared_transaction_offset,
            body,
            topic,
            properties,
            base,
        })
    }

    /// Offset of the body within the record.
    pub fn body_pos(&self) -> usize {
        body_len_pos(self.sys_flag) + 4
    }

    /// Offset of the topic bytes within the record.
    pub fn topic_pos(&self) -> usize {
        self.body_pos() + self.body.len() + self.version.topic_len_size()
    }

    /// Offset of the properties bytes within the record.
    pub fn properties_pos(&self) -> usize {
        self.topic_pos() + self.topic.len() + 2
    }

    /// The topic as text.
    pub fn topic_str(&self) -> Result<&'a str, MessageError> {
        std::str::from_utf8(self.topic)
            .map_err(|_| MessageError::InvalidUtf8 { field: "TOPIC", offset: self.base + self.topic_pos() })
    }

    /// The properties string as text.
    pub fn properties_str(&self) -> Result<&'a str, MessageError> {
        std::str::from_utf8(self.properties)
            .map_err(|_| MessageError::InvalidUtf8 { field: "PROPERTIES", offset: self.base + self.properties_pos() })
    }

    /// The value of one property, found without allocating (the last one wins on repeats).
    pub fn property(&self, name: &str) -> Result<Option<&'a str>, MessageError> {
        Ok(find_property(self.properties_str()?, name))
    }

    /// The consume-queue tags code: the Java hash of TAGS, 0 without tags.
    pub fn tags_code(&self) -> Result<i64, MessageError> {
        Ok(tags_code(self.property(crate::message::keys::TAGS)?))
    }

    /// Checks BODYCRC against the stored body bytes.
    pub fn verify_body_crc(&self) -> Result<(), MessageError> {
        let computed = crc32_masked(self.body);
        if computed == self.body_crc {
            Ok(())
        } else {
            Err(MessageError::BodyCrcMismatch {
                physical_offset: self.physical_offset,
                stored: self.body_crc,
                computed,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(total: i32, magic: u32) -> Vec<u8> {
        let mut v = total.to_be_bytes().to_vec();
        v.extend_from_slice(&magic.to_be_bytes());
        v
    }

    #[test]
    fn peek_distinguishes_blank_record_and_garbage() {
        assert_eq!(peek_record_size(&header(100, 0xDAA3_20A7)), Ok(RecordOrBlank::Record(100)));
        assert_eq!(peek_record_size(&header(4096, BLANK_MAGIC_CODE)), Ok(RecordOrBlank::Blank { remaining: 4096 }));
        assert_eq!(
            peek_record_size(&header(-1, BLANK_MAGIC_CODE)),
            Err(MessageError::InvalidBlank { offset: 0, remaining: -1 })
        );
        assert_eq!(peek_record_size(&header(100, 7)), Err(MessageError::BadMagic { offset: 0, magic: 7 }));
        assert_eq!(
            peek_record_size(&header(90, 0xDAA3_20AB)),
            Err(MessageError::InvalidTotalSize { offset: 0, total_size: 90, min: 91 })
        );
        assert!(matches!(peek_record_size(&[0, 0, 0]), Err(MessageError::Truncated { field: "TOTALSIZE", .. })));
    }

    #[test]
    fn short_input_is_truncated_not_corrupt() {
        let mut buf = header(200, 0xDAA3_20A7);
        buf.resize(150, 0);
        assert_eq!(
            RecordView::parse(&buf),
            Err(MessageError::Truncated { field: "record", offset: 0, needed: 200, available: 150 })
        );
    }
}
