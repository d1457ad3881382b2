//! A bounds-checked big-endian reader, so decoders return errors instead of panicking.

use crate::message::error::MessageError;

/// Reads big-endian values from a slice, naming the field and absolute offset on failure.
#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Offset of `buf[0]` within the caller's whole input, added to every reported offset.
    base: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8], base: usize) -> Self {
        Cursor { buf, pos: 0, base }
    }

    /// Position within `buf`.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Absolute offset of the current position, for error reports.
    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn take(&mut self, len: usize, field: &'static str) -> Result<&'a [u8], MessageError> {
        let available = self.remaining();
        if len > available {
            return Err(MessageError::Truncated { field, offset: self.offset(), needed: len, available });
        }
        let bytes = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], MessageError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    pub(crate) fn i8(&mut self, field: &'static str) -> Result<i8, MessageError> {
        Ok(i8::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn i16(&mut self, field: &'static str) -> Result<i16, MessageError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn i32(&mut self, field: &'static str) -> Result<i32, MessageError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, MessageError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn i64(&mut self, field: &'static str) -> Result<i64, MessageError> {
        Ok(i64::from_be_bytes(self.array(field)?))
    }

    /// Reads `N` raw bytes.
    pub(crate) fn bytes<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], MessageError> {
        self.array(field)
    }

    /// Reads an `int32` length prefix that must not be negative.
    pub(crate) fn len_i32(&mut self, field: &'static str) -> Result<usize, MessageError> {
        let offset = self.offset();
        let length = self.i32(field)?;
        usize::try_from(length).map_err(|_| MessageError::NegativeLength { field, offset, length })
    }

    /// Reads an `int16` length prefix that must not be negative.
    pub(crate) fn len_i16(&mut self, field: &'static str) -> Result<usize, MessageError> {
        let offset = self.offset();
        let length = self.i16(field)?;
        usize::try_from(length).map_err(|_| MessageError::NegativeLength { field, offset, length: i32::from(length) })
    }

    /// Reads a one-byte length that Java reads as a signed byte, so values above 127 are negative.
    pub(crate) fn len_i8(&mut self, field: &'static str) -> Result<usize, MessageError> {
        let offset = self.offset();
        let length = self.i8(field)?;
        usize::try_from(length).map_err(|_| MessageError::NegativeLength { field, offset, length: i32::from(length) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_endian_and_reports_absolute_offsets() {
        let mut c = Cursor::new(&[0x00, 0x01, 0xFF, 0xFF, 0xFF, 0xFE, 0x80], 100);
        assert_eq!(c.i16("A").unwrap(), 1);
        assert_eq!(c.i32("B").unwrap(), -2);
        assert_eq!(c.len_i8("C"), Err(MessageError::NegativeLength { field: "C", offset: 106, length: -128 }));
        assert_eq!(c.i32("D"), Err(MessageError::Truncated { field: "D", offset: 107, needed: 4, available: 0 }));
    }
}
