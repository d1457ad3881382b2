//! The stored message record as an owned value: what the commit log holds and what pull,
//! query and view responses carry unchanged (fact sheet 3.1).
//!
//! Java: `MessageDecoder#encode`/`#decode`, `MessageExtEncoder#encode`.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};

use bytes::{BufMut, Bytes, BytesMut};

use crate::message::crc::crc32_masked;
use crate::message::error::MessageError;
use crate::message::host::put_host;
use crate::message::keys;
use crate::message::layout::{record_len, MessageVersion};
use crate::message::message_id::create_offset_msg_id;
use crate::message::properties::{find_property, MessageProperties, MAX_PROPERTIES_LEN};
use crate::message::record_view::{RecordOrBlank, RecordView};
use crate::message::sysflag::{BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG};
use crate::message::tag::tags_code;

/// One stored message with every field of the record. TOTALSIZE is not stored: it follows from
/// the other fields ([`encoded_len`](Self::encoded_len)).
///
/// Fields the store assigns inside its append lock (QUEUEOFFSET, PHYSICALOFFSET,
/// STORETIMESTAMP) may be left at 0 and patched into the encoded bytes later with
/// [`crate::message::patch_queue_offset`] and friends.
///
/// `Debug` prints the body's length, never its content.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// Record version; decides how the topic length is written. V1 holds topics up to 127 bytes.
    pub version: MessageVersion,
    /// BODYCRC to write; `None` makes the encoder compute the masked CRC of `body`. Decoding
    /// always yields `Some` with the stored value.
    pub body_crc: Option<u32>,
    /// QUEUEID.
    pub queue_id: i32,
    /// FLAG: the producer's user flag.
    pub flag: i32,
    /// QUEUEOFFSET: index in the consume queue (0 for prepared and rolled-back transactions).
    pub queue_offset: i64,
    /// PHYSICALOFFSET: this record's own commit-log offset.
    pub physical_offset: i64,
    /// SYSFLAG. The encoder sets or clears the two IPv6 host bits to match `born_host` and
    /// `store_host` (see [`effective_sys_flag`](Self::effective_sys_flag)).
    pub sys_flag: i32,
    /// BORNTIMESTAMP, producer clock.
    pub born_timestamp_ms: i64,
    /// BORNHOST: the producer's address. IPv6 flow info and scope id are not stored.
    pub born_host: SocketAddr,
    /// STORETIMESTAMP, broker clock.
    pub store_timestamp_ms: i64,
    /// STOREHOSTADDRESS: the broker's address. IPv6 flow info and scope id are not stored.
    pub store_host: SocketAddr,
    /// RECONSUMETIMES.
    pub reconsume_times: i32,
    /// PREPARED TRANSACTION OFFSET: for a committed transactional message, the commit-log offset
    /// of its half message; else 0.
    pub prepared_transaction_offset: i64,
    /// BODY as stored (compressed if SYSFLAG says so).
    pub body: Bytes,
    /// TOPIC.
    pub topic: String,
    /// The properties string exactly as stored (see [`MessageProperties`] to build or parse it).
    /// Kept raw so a decoded record re-encodes to the same bytes.
    pub properties: String,
}

impl Default for StoredMessage {
    /// An empty V1 message with zeroed fields and `0.0.0.0:0` hosts, for struct-update syntax.
    fn default() -> Self {
        let unspecified = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0);
        StoredMessage {
            version: MessageVersion::V1,
            body_crc: None,
            queue_id: 0,
            flag: 0,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: 0,
            born_timestamp_ms: 0,
            born_host: unspecified,
            store_timestamp_ms: 0,
            store_host: unspecified,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::new(),
            topic: String::new(),
            properties: String::new(),
        }
    }
}

impl fmt::Debug for StoredMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Bodies are user data: keep them out of logs and panic messages.
        f.debug_struct("StoredMessage")
            .field("version", &self.version)
            .field("body_crc", &self.body_crc)
            .field("queue_id", &self.queue_id)
            .field("flag", &self.flag)
            .field("queue_offset", &self.queue_offset)
            .field("physical_offset", &self.physical_offset)
            .field("sys_flag", &self.sys_flag)
            .field("born_timestamp_ms", &self.born_timestamp_ms)
            .field("born_host", &self.born_host)
            .field("store_timestamp_ms", &self.store_timestamp_ms)
            .field("store_host", &self.store_host)
            .field("reconsume_times", &self.reconsume_times)
            .field("prepared_transaction_offset", &self.prepared_transaction_offset)
            .field("body_len", &self.body.len())
            .field("topic", &self.topic)
            .field("properties", &self.properties)
            .finish()
    }
}

impl StoredMessage {
    /// SYSFLAG as it will be written: `sys_flag` with the IPv6 host bits taken from the
    /// addresses, so the layout always matches them.
    pub fn effective_sys_flag(&self) -> i32 {
        let mut flag = self.sys_flag & !(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG);
        if self.born_host.is_ipv6() {
            flag |= BORNHOST_V6_FLAG;
        }
        if self.store_host.is_ipv6() {
            flag |= STOREHOSTADDRESS_V6_FLAG;
        }
        flag
    }

    /// TOTALSIZE of the encoded record. Meaningful only if [`validate`](Self::validate) passes.
    pub fn encoded_len(&self) -> usize {
        record_len(self.version, self.effective_sys_flag(), self.body.len(), self.topic.len(), self.properties.len())
    }

    /// Checks that every length fits its prefix: topic within the version's limit, properties
    /// at most 32767 bytes, the whole record within `i32::MAX`.
    pub fn validate(&self) -> Result<(), MessageError> {
        let max_topic = self.version.max_topic_len();
        if self.topic.len() > max_topic {
            return Err(MessageError::TooLong { field: "TOPIC", length: self.topic.len(), max: max_topic });
        }
        if self.properties.len() > MAX_PROPERTIES_LEN {
            return Err(MessageError::TooLong {
                field: "PROPERTIES",
                length: self.properties.len(),
                max: MAX_PROPERTIES_LEN,
            });
        }
        let max_total = i32::MAX as usize;
        // Body first: on 32-bit targets the sum below could otherwise wrap.
        if self.body.len() > max_total || self.encoded_len() > max_total {
            return Err(MessageError::TooLong { field: "TOTALSIZE", length: self.encoded_len(), max: max_total });
        }
        Ok(())
    }

    /// Appends the encoded record to `buf`. Writes nothing if [`validate`](Self::validate)
    /// fails. BODYCRC is `body_crc`, or the masked CRC of the body when that is `None`.
    pub fn encode_into(&self, buf: &mut BytesMut) -> Result<(), MessageError> {
        self.validate()?;
        let total_size = self.encoded_len();
        let sys_flag = self.effective_sys_flag();
        let body_crc = self.body_crc.unwrap_or_else(|| crc32_masked(&self.body));
        buf.reserve(total_size);
        let start = buf.len();
        // The casts below cannot truncate: validate() bounded every length.
        buf.put_i32(total_size as i32);
        buf.put_u32(self.version.magic_code());
        buf.put_u32(body_crc);
        buf.put_i32(self.queue_id);
        buf.put_i32(self.flag);
        buf.put_i64(self.queue_offset);
        buf.put_i64(self.physical_offset);
        buf.put_i32(sys_flag);
        buf.put_i64(self.born_timestamp_ms);
        put_host(buf, &self.born_host);
        buf.put_i64(self.store_timestamp_ms);
        put_host(buf, &self.store_host);
        buf.put_i32(self.reconsume_times);
        buf.put_i64(self.prepared_transaction_offset);
        buf.put_i32(self.body.len() as i32);
        buf.put_slice(&self.body);
        match self.version {
            MessageVersion::V1 => buf.put_u8(self.topic.len() as u8),
            MessageVersion::V2 => buf.put_i16(self.topic.len() as i16),
        }
        buf.put_slice(self.topic.as_bytes());
        buf.put_i16(self.properties.len() as i16);
        buf.put_slice(self.properties.as_bytes());
        assert_eq!(buf.len() - start, total_size, "record length must match its TOTALSIZE");
        Ok(())
    }

    /// Encodes into a fresh buffer.
    pub fn encode(&self) -> Result<BytesMut, MessageError> {
        let mut buf = BytesMut::new();
        self.encode_into(&mut buf)?;
        Ok(buf)
    }

    /// Decodes the record at the start of `buf`, copying the body; returns it and its length.
    /// The blank marker is an error here ([`MessageError::UnexpectedBlank`]); use
    /// [`decode_or_blank`](Self::decode_or_blank) when scanning a commit-log file.
    pub fn decode(buf: &[u8]) -> Result<(StoredMessage, usize), MessageError> {
        expect_record(Self::decode_or_blank(buf)?, 0)
    }

    /// As [`decode`](Self::decode), but reports the blank marker as [`RecordOrBlank::Blank`].
    pub fn decode_or_blank(buf: &[u8]) -> Result<RecordOrBlank<(StoredMessage, usize)>, MessageError> {
        Ok(match RecordView::parse(buf)? {
            RecordOrBlank::Record(view) => {
                let body = Bytes::copy_from_slice(view.body);
                RecordOrBlank::Record((Self::from_view(&view, body)?, view.total_size))
            }
            RecordOrBlank::Blank { remaining } => RecordOrBlank::Blank { remaining },
        })
    }

    /// Decodes the record at the start of `buf` without copying the body: it shares `buf`.
    pub fn decode_shared(buf: &Bytes) -> Result<(StoredMessage, usize), MessageError> {
        decode_shared_at(buf, 0)
    }

    /// Decodes a concatenation of records, such as a pull response body, failing on the first
    /// bad one. The input is copied once and the bodies share that copy.
    pub fn decode_all(buf: &[u8]) -> Result<Vec<StoredMessage>, MessageError> {
        Self::iter_shared(Bytes::copy_from_slice(buf)).collect()
    }

    /// Iterates over a concatenation of records without copying bodies. After an error the
    /// iterator ends.
    pub fn iter_shared(buf: Bytes) -> RecordIter {
        RecordIter { buf, pos: 0, failed: false }
    }

    /// Checks `body_crc` (when set) against the body.
    pub fn verify_body_crc(&self) -> Result<(), MessageError> {
        let Some(stored) = self.body_crc else {
            return Ok(());
        };
        let computed = crc32_masked(&self.body);
        if stored == computed {
            Ok(())
        } else {
            Err(MessageError::BodyCrcMismatch { physical_offset: self.physical_offset, stored, computed })
        }
    }

    /// The value of one property, without parsing the whole string (last one wins on repeats).
    pub fn property(&self, name: &str) -> Option<&str> {
        find_property(&self.properties, name)
    }

    /// The properties parsed into a map.
    pub fn properties_map(&self) -> MessageProperties {
        MessageProperties::decode(&self.properties)
    }

    /// Replaces the properties string with the encoding of `props`.
    pub fn set_properties(&mut self, props: &MessageProperties) {
        self.properties = props.encode();
    }

    /// The consume-queue tags code (Java hash of TAGS, 0 without tags).
    pub fn tags_code(&self) -> i64 {
        tags_code(self.property(keys::TAGS))
    }

    /// The offset message id: store host and PHYSICALOFFSET in upper-case hex.
    pub fn offset_msg_id(&self) -> String {
        create_offset_msg_id(self.store_host, self.physical_offset)
    }

    fn from_view(view: &RecordView<'_>, body: Bytes) -> Result<StoredMessage, MessageError> {
        Ok(StoredMessage {
            version: view.version,
            body_crc: Some(view.body_crc),
            queue_id: view.queue_id,
            flag: view.flag,
            queue_offset: view.queue_offset,
            physical_offset: view.physical_offset,
            sys_flag: view.sys_flag,
            born_timestamp_ms: view.born_timestamp_ms,
            born_host: view.born_host,
            store_timestamp_ms: view.store_timestamp_ms,
            store_host: view.store_host,
            reconsume_times: view.reconsume_times,
            prepared_transaction_offset: view.prepared_transaction_offset,
            body,
            topic: view.topic_str()?.to_owned(),
            properties: view.properties_str()?.to_owned(),
        })
    }
}

fn expect_record<T>(entry: RecordOrBlank<T>, offset: usize) -> Result<T, MessageError> {
    match entry {
        RecordOrBlank::Record(record) => Ok(record),
        RecordOrBlank::Blank { remaining } => Err(MessageError::UnexpectedBlank { offset, remaining }),
    }
}

/// Decodes the record starting at `buf[pos..]`; error offsets count from the start of `buf`.
fn decode_shared_at(buf: &Bytes, pos: usize) -> Result<(StoredMessage, usize), MessageError> {
    let rest = buf.get(pos..).unwrap_or_default();
    let view = expect_record(RecordView::parse_at(rest, pos)?, pos)?;
    // The view's body is a sub-slice of `buf`, which is what `slice_ref` requires.
    let body = buf.slice_ref(view.body);
    Ok((StoredMessage::from_view(&view, body)?, view.total_size))
}

/// Iterator over concatenated records, returned by [`StoredMessage::iter_shared`].
#[derive(Debug, Clone)]
pub struct RecordIter {
    buf: Bytes,
    pos: usize,
    failed: bool,
}

impl Iterator for RecordIter {
    type Item = Result<StoredMessage, MessageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        match decode_shared_at(&self.buf, self.pos) {
            Ok((message, len)) => {
                self.pos += len;
                Some(Ok(message))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    fn sample() -> StoredMessage {
        StoredMessage {
            topic: "T".to_owned(),
            body: Bytes::from_static(b"body"),
            properties: "TAGS\u{1}TagA\u{2}".to_owned(),
            store_host: SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 10911),
            physical_offset: 77,
            ..StoredMessage::default()
        }
    }

    #[test]
    fn decode_all_reports_offsets_in_the_whole_buffer() {
        let mut buf = sample().encode().unwrap();
        let first_len = buf.len();
        sample().encode_into(&mut buf).unwrap();
        buf.extend_from_slice(&[0, 0, 0, 1, 0xDA, 0xA3, 0x20, 0xA7]);
        assert_eq!(
            StoredMessage::decode_all(&buf),
            Err(MessageError::InvalidTotalSize { offset: 2 * first_len, total_size: 1, min: 91 })
        );
        buf.truncate(2 * first_len);
        let all = StoredMessage::decode_all(&buf).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].tags_code(), 2_598_919);
        assert_eq!(all[1].offset_msg_id().len(), 56);
    }

    #[test]
    fn corrupt_lengths_are_reported_as_overrun_or_mismatch() {
        let good = sample().encode().unwrap();
        let body_len_pos = crate::message::layout::body_len_pos(sample().effective_sys_flag());

        let mut long_body = good.clone();
        long_body[body_len_pos..body_len_pos + 4].copy_from_slice(&1000i32.to_be_bytes());
        assert!(matches!(
            StoredMessage::decode(&long_body),
            Err(MessageError::FieldOverrun { field: "BODY", record_offset: 0, .. })
        ));

        // A body one byte short makes the last body byte ('y' = 121) read as the topic length.
        let mut short_body = good.clone();
        short_body[body_len_pos..body_len_pos + 4].copy_from_slice(&3i32.to_be_bytes());
        assert!(matches!(
            StoredMessage::decode(&short_body),
            Err(MessageError::FieldOverrun { field: "TOPIC", needed: 121, .. })
        ));

        let mut negative = good.clone();
        negative[body_len_pos..body_len_pos + 4].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(matches!(
            StoredMessage::decode(&negative),
            Err(MessageError::NegativeLength { field: "BODY length", length: -1, .. })
        ));
    }

    #[test]
    fn total_size_larger_than_fields_is_a_mismatch() {
        let mut buf = sample().encode().unwrap();
        let len = buf.len();
        buf[..4].copy_from_slice(&((len + 3) as i32).to_be_bytes());
        buf.extend_from_slice(&[0; 3]);
        assert_eq!(
            StoredMessage::decode(&buf),
            Err(MessageError::SizeMismatch {
                field: "TOTALSIZE",
                offset: 0,
                declared: len as u64 + 3,
                computed: len as u64
            })
        );
    }

    #[test]
    fn v1_topic_length_is_a_signed_byte() {
        let mut msg = sample();
        msg.version = MessageVersion::V1;
        let mut buf = msg.encode().unwrap();
        let topic_len_pos = crate::message::layout::body_len_pos(msg.effective_sys_flag()) + 4 + msg.body.len();
        buf[topic_len_pos] = 0x80;
        assert!(matches!(
            StoredMessage::decode(&buf),
            Err(MessageError::NegativeLength { field: "TOPIC length", length: -128, .. })
        ));
    }

    #[test]
    fn bad_crc_and_bad_utf8_are_caught() {
        let mut msg = sample();
        msg.body_crc = Some(1);
        let buf = msg.encode().unwrap();
        let (decoded, _) = StoredMessage::decode(&buf).unwrap();
        assert!(matches!(
            decoded.verify_body_crc(),
            Err(MessageError::BodyCrcMismatch { stored: 1, physical_offset: 77, .. })
        ));

        msg.topic = "é".to_owned();
        let mut buf = msg.encode().unwrap();
        let pos = buf.len() - msg.properties.len() - 2 - 2;
        buf[pos] = 0xFF;
        assert!(matches!(StoredMessage::decode(&buf), Err(MessageError::InvalidUtf8 { field: "TOPIC", .. })));
    }

    #[test]
    fn debug_hides_the_body() {
        let text = format!("{:?}", sample());
        assert!(text.contains("body_len: 4"));
        assert!(!text.contains("98, 111"));
    }
}
