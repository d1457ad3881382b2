//! The SEND_BATCH_MESSAGE request body: one short record per message (fact sheet 3.6).
//!
//! Each entry is `TOTALSIZE, MAGICCODE (0), BODYCRC (0), FLAG, BODY length + BODY,
//! PROPERTIES length + PROPERTIES`. Topic, queue, hosts and times come from the request header;
//! the broker turns each entry into a full stored record.
//! Java: `MessageDecoder#encodeMessage`/`#decodeMessage`, `MessageExtEncoder#encodeBatch`.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use crate::message::cursor::Cursor;
use crate::message::error::MessageError;
use crate::message::properties::MAX_PROPERTIES_LEN;

/// Size of an entry with empty body and properties: five `int32`s and an `int16`.
pub const BATCH_ENTRY_MIN_LEN: usize = 4 + 4 + 4 + 4 + 4 + 2;

/// One message of a batch. `Debug` prints the body's length, never its content.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct BatchEntry {
    /// The producer's user flag.
    pub flag: i32,
    /// The message body.
    pub body: Bytes,
    /// The message's own properties string (the Java client puts a UNIQ_KEY in each).
    pub properties: String,
}

impl fmt::Debug for BatchEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchEntry")
            .field("flag", &self.flag)
            .field("body_len", &self.body.len())
            .field("properties", &self.properties)
            .finish()
    }
}

impl BatchEntry {
    /// TOTALSIZE of this entry.
    pub fn encoded_len(&self) -> usize {
        BATCH_ENTRY_MIN_LEN + self.body.len() + self.properties.len()
    }

    fn validate(&self) -> Result<(), MessageError> {
        if self.properties.len() > MAX_PROPERTIES_LEN {
            return Err(MessageError::TooLong {
                field: "PROPERTIES",
                length: self.properties.len(),
                max: MAX_PROPERTIES_LEN,
            });
        }
        let max_total = i32::MAX as usize;
        if self.body.len() > max_total || self.encoded_len() > max_total {
            return Err(MessageError::TooLong { field: "TOTALSIZE", length: self.encoded_len(), max: max_total });
        }
        Ok(())
    }

    fn encode_into(&self, buf: &mut BytesMut) {
        // Lengths were bounded by validate(), so the casts cannot truncate.
        buf.put_i32(self.encoded_len() as i32);
        buf.put_i32(0); // MAGICCODE: the Java client sends 0, the broker ignores it
        buf.put_i32(0); // BODYCRC: likewise; the broker computes it per entry
        buf.put_i32(self.flag);
        buf.put_i32(self.body.len() as i32);
        buf.put_slice(&self.body);
        buf.put_i16(self.properties.len() as i16);
        buf.put_slice(self.properties.as_bytes());
    }
}

/// Encodes a batch body exactly as the Java and C++ clients write it. Fails, writing nothing,
/// if an entry's properties exceed 32767 bytes or an entry exceeds `i32::MAX` bytes.
pub fn encode_batch(entries: &[BatchEntry]) -> Result<BytesMut, MessageError> {
    for entry in entries {
        entry.validate()?;
    }
    let mut buf = BytesMut::with_capacity(entries.iter().map(BatchEntry::encoded_len).sum());
    for entry in entries {
        entry.encode_into(&mut buf);
    }
    Ok(buf)
}

/// Decodes a batch body; the entry bodies share `body`'s memory.
///
/// MAGICCODE and BODYCRC are ignored, as the broker ignores them. Every length is checked:
/// TOTALSIZE must cover at least the fixed fields, lie within the input, and equal the sum of
/// the parsed lengths (every known client writes it exactly; the Java broker does not read it).
pub fn decode_batch(body: &Bytes) -> Result<Vec<BatchEntry>, MessageError> {
    let mut entries = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        let (entry, len) = decode_entry(body, pos)?;
        entries.push(entry);
        pos += len;
    }
    Ok(entries)
}

fn decode_entry(body: &Bytes, start: usize) -> Result<(BatchEntry, usize), MessageError> {
    let rest = body.get(start..).unwrap_or_default();
    let total_raw = Cursor::new(rest, start).i32("TOTALSIZE")?;
    let total_size = usize::try_from(total_raw)
        .ok()
        .filter(|&size| size >= BATCH_ENTRY_MIN_LEN)
        .ok_or(MessageError::InvalidTotalSize { offset: start, total_size: total_raw, min: BATCH_ENTRY_MIN_LEN })?;
    let entry_bytes = rest.get(..total_size).ok_or(MessageError::Truncated {
        field: "batch entry",
        offset: start,
        needed: total_size,
        available: rest.len(),
    })?;
    // Inside the declared entry, running out of bytes means its lengths contradict TOTALSIZE.
    let overrun = |e: MessageError| match e {
        MessageError::Truncated { field, offset, needed, .. } => {
            MessageError::FieldOverrun { field, offset, needed, record_offset: start, total_size }
        }
        other => other,
    };
    let mut c = Cursor::new(entry_bytes, start);
    c.take(12, "TOTALSIZE, MAGICCODE and BODYCRC").map_err(overrun)?;
    let flag = c.i32("FLAG").map_err(overrun)?;
    let body_len = c.len_i32("BODY length").map_err(overrun)?;
    let body_pos = start + c.pos();
    c.take(body_len, "BODY").map_err(overrun)?;
    let properties_len = c.len_i16("PROPERTIES length").map_err(overrun)?;
    let properties_offset = c.offset();
    let properties = c.take(properties_len, "PROPERTIES").map_err(overrun)?;
    if c.remaining() != 0 {
        return Err(MessageError::SizeMismatch {
            field: "TOTALSIZE",
            offset: start,
            declared: total_size as u64,
            computed: c.pos() as u64,
        });
    }
    let properties = std::str::from_utf8(properties)
        .map_err(|_| MessageError::InvalidUtf8 { field: "PROPERTIES", offset: properties_offset })?
        .to_owned();
    let entry = BatchEntry { flag, body: body.slice(body_pos..body_pos + body_len), properties };
    Ok((entry, total_size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(body: &'static [u8], properties: &str) -> BatchEntry {
        BatchEntry { flag: 1, body: Bytes::from_static(body), properties: properties.to_owned() }
    }

    #[test]
    fn bodies_share_the_input() {
        let encoded = encode_batch(&[entry(b"abc", "k\u{1}v\u{2}"), entry(b"", "")]).unwrap().freeze();
        let decoded = decode_batch(&encoded).unwrap();
        assert_eq!(decoded[0].body.as_ptr(), encoded[BATCH_ENTRY_MIN_LEN - 2..].as_ptr());
        assert!(decode_batch(&Bytes::new()).unwrap().is_empty());
    }

    #[test]
    fn rejects_inconsistent_lengths() {
        let good = encode_batch(&[entry(b"abc", "p")]).unwrap();
        let total = good.len();

        let mut cut = good.clone();
        cut.truncate(total - 1);
        assert!(matches!(decode_batch(&cut.freeze()), Err(MessageError::Truncated { field: "batch entry", .. })));

        let mut long_body = good.clone();
        long_body[16..20].copy_from_slice(&100i32.to_be_bytes());
        assert!(matches!(decode_batch(&long_body.freeze()), Err(MessageError::FieldOverrun { field: "BODY", .. })));

        let mut padded = good.clone();
        padded[..4].copy_from_slice(&((total + 1) as i32).to_be_bytes());
        padded.put_u8(0);
        assert!(matches!(decode_batch(&padded.freeze()), Err(MessageError::SizeMismatch { .. })));

        let mut tiny = good.clone();
        tiny[..4].copy_from_slice(&21i32.to_be_bytes());
        assert!(matches!(decode_batch(&tiny.freeze()), Err(MessageError::InvalidTotalSize { min: 22, .. })));
    }

    #[test]
    fn encode_refuses_oversized_properties() {
        let big = BatchEntry { properties: "x".repeat(32_768), ..BatchEntry::default() };
        assert!(matches!(encode_batch(&[big]), Err(MessageError::TooLong { field: "PROPERTIES", .. })));
    }
}
