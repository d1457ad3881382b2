//! The two header serializations: JSON (type 0) and the ROCKETMQ binary layout (type 1).
//!
//! Decoding accepts both whatever the server is configured to send; encoding uses the
//! configured one. The body is not handled here (see `frame`). Java: `RemotingSerializable`,
//! `RocketMQSerializable`.

use crate::decimal::push_i64;

use crate::command::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
use crate::ext_fields::intern_key;
use crate::frame::FrameError;

/// Fixed part of the binary header: code, language, version, opaque, flag, remark length,
/// extFields length.
const BINARY_FIXED_BYTES: usize = 2 + 1 + 2 + 4 + 4 + 4 + 4;

/// Encodes the header of `cmd` in `serialize_type` and appends it to `out`.
///
/// # Errors
/// [`FrameError::FieldTooLong`] when an extFields key does not fit the binary layout's int16
/// length (Java would silently wrap the length and corrupt the frame).
pub(crate) fn encode_header(
    cmd: &RemotingCommand,
    serialize_type: SerializeType,
    out: &mut Vec<u8>,
) -> Result<(), FrameError> {
    match serialize_type {
        SerializeType::Json => {
            encode_json(cmd, out);
            Ok(())
        }
        SerializeType::RocketMq => encode_binary(cmd, out),
    }
}

/// Decodes a header of `serialize_type`; the body is left empty.
pub(crate) fn decode_header(serialize_type: SerializeType, bytes: &[u8]) -> Result<RemotingCommand, FrameError> {
    match serialize_type {
        SerializeType::Json => crate::json_header::decode_json(bytes),
        SerializeType::RocketMq => decode_binary(bytes),
    }
}

/// Appends `s` as a JSON string literal. Escapes what JSON requires (quote, backslash, control
/// characters) and nothing else, as fastjson does; non-ASCII stays UTF-8.
fn json_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    // Header values (ids, offsets, names) almost never need an escape: a check without early
    // exit, which the compiler vectorizes, then one copy.
    let plain = bytes.iter().fold(true, |plain, &b| plain & (b >= 0x20) & (b != b'"') & (b != b'\\'));
    if plain {
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short: &[u8] = match b {
            b'"' => br#"\""#,
            b'\\' => br"\\",
            b'\n' => br"\n",
            b'\r' => br"\r",
            b'\t' => br"\t",
            0x00..=0x1F => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if short.is_empty() {
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xF)]]);
        } else {
            out.extend_from_slice(short);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Writes keys in alphabetical order, nulls omitted, as fastjson does for `RemotingCommand`.
fn encode_json(cmd: &RemotingCommand, out: &mut Vec<u8>) {
    out.reserve(128 + cmd.ext_fields.len() * 32);
    out.extend_from_slice(b"{\"code\":");
    push_i64(out, i64::from(cmd.code));
    if !cmd.ext_fields.is_empty() {
        out.extend_from_slice(b",\"extFields\":{");
        for (i, (k, v)) in cmd.ext_fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json_string(out, k);
            out.push(b':');
            json_string(out, v);
        }
        out.push(b'}');
    }
    out.extend_from_slice(b",\"flag\":");
    push_i64(out, i64::from(cmd.flag));
    out.extend_from_slice(b",\"language\":\"");
    out.extend_from_slice(cmd.language.name().as_bytes());
    out.extend_from_slice(b"\",\"opaque\":");
    push_i64(out, i64::from(cmd.opaque));
    if let Some(remark) = &cmd.remark {
        out.extend_from_slice(b",\"remark\":");
        json_string(out, remark);
    }
    out.extend_from_slice(b",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    push_i64(out, i64::from(cmd.version));
    out.push(b'}');
}

fn encode_binary(cmd: &RemotingCommand, out: &mut Vec<u8>) -> Result<(), FrameError> {
    if let Some(key) = cmd.ext_fields.keys().find(|k| k.len() > i16::MAX as usize) {
        return Err(FrameError::FieldTooLong { field: "extFields key", length: key.len(), max: i16::MAX as usize });
    }
    // Codes and versions are int16 in this layout; Java truncates the same way, so codes
    // above 32767 (the 5.x pop codes) cannot travel in a binary header.
    out.extend_from_slice(&(cmd.code as i16).to_be_bytes());
    out.push(cmd.language.code());
    out.extend_from_slice(&(cmd.version as i16).to_be_bytes());
    out.extend_from_slice(&cmd.opaque.to_be_bytes());
    out.extend_from_slice(&cmd.flag.to_be_bytes());
    match cmd.remark.as_deref() {
        Some(remark) if !remark.is_empty() => {
            out.extend_from_slice(&(remark.len() as i32).to_be_bytes());
            out.extend_from_slice(remark.as_bytes());
        }
        _ => out.extend_from_slice(&0i32.to_be_bytes()),
    }
    let len_at = out.len();
    out.extend_from_slice(&0i32.to_be_bytes());
    for (k, v) in &cmd.ext_fields {
        out.extend_from_slice(&(k.len() as i16).to_be_bytes());
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(&(v.len() as i32).to_be_bytes());
        out.extend_from_slice(v.as_bytes());
    }
    let ext_len = (out.len() - len_at - 4) as i32;
    out[len_at..len_at + 4].copy_from_slice(&ext_len.to_be_bytes());
    Ok(())
}

/// A bounds-checked big-endian reader over the binary header.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], FrameError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or(FrameError::BinaryHeaderTruncated { field, offset: self.pos, needed: n })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], FrameError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, field)?);
        Ok(a)
    }

    fn length(&mut self, raw: i64, field: &'static str) -> Result<usize, FrameError> {
        usize::try_from(raw).map_err(|_| FrameError::BinaryHeaderNegativeLength {
            field,
            offset: self.pos,
            length: raw,
        })
    }

    fn str(&mut self, len: usize, field: &'static str) -> Result<&'a str, FrameError> {
        let offset = self.pos;
        let bytes = self.take(len, field)?;
        std::str::from_utf8(bytes).map_err(|_| FrameError::BinaryHeaderUtf8 { field, offset })
    }

    fn string(&mut self, len: usize, field: &'static str) -> Result<String, FrameError> {
        self.str(len, field).map(str::to_owned)
    }
}

fn decode_binary(bytes: &[u8]) -> Result<RemotingCommand, FrameError> {
    if bytes.len() < BINARY_FIXED_BYTES {
        return Err(FrameError::BinaryHeaderTruncated { field: "fixed header", offset: 0, needed: BINARY_FIXED_BYTES });
    }
    let mut r = Reader { buf: bytes, pos: 0 };
    let code = i16::from_be_bytes(r.array("code")?) as i32;
    let language = LanguageCode::from_code(r.array::<1>("language")?[0]);
    let version = i16::from_be_bytes(r.array("version")?) as i32;
    let opaque = i32::from_be_bytes(r.array("opaque")?);
    let flag = i32::from_be_bytes(r.array("flag")?);
    let remark_len = i32::from_be_bytes(r.array("remark length")?);
    let remark_len = r.length(remark_len.into(), "remark length")?;
    let remark = if remark_len == 0 { None } else { Some(r.string(remark_len, "remark")?) };
    let ext_len = i32::from_be_bytes(r.array("extFields length")?);
    let ext_len = r.length(ext_len.into(), "extFields length")?;
    let ext_end = r.pos + ext_len;
    if ext_end > bytes.len() {
        return Err(FrameError::BinaryHeaderTruncated { field: "extFields", offset: r.pos, needed: ext_len });
    }
    let mut ext_fields = ExtFields::new();
    while r.pos < ext_end {
        let key_len = i16::from_be_bytes(r.array("extFields key length")?);
        let key_len = r.length(key_len.into(), "extFields key length")?;
        let key = intern_key(r.str(key_len, "extFields key")?);
        let value_len = i32::from_be_bytes(r.array("extFields value length")?);
        let value_len = r.length(value_len.into(), "extFields value length")?;
        let value = r.str(value_len, "extFields value")?;
        if r.pos > ext_end {
            return Err(FrameError::BinaryHeaderTruncated { field: "extFields entry", offset: r.pos, needed: 0 });
        }
        ext_fields.insert(key, value);
    }
    Ok(RemotingCommand {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext_fields,
        body: bytes::Bytes::new(),
        body_tail: Vec::new(),
    })
}
