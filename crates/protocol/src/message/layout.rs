//! Where each field of the stored message record sits (fact sheet 3.1), the two record
//! versions, the end-of-file blank marker, and in-place edits of the fields the store fills in
//! after encoding.
//!
//! Positions are byte offsets from the start of the record. Everything up to BORNHOST is at a
//! fixed position; from STORETIMESTAMP on, positions shift by 12 bytes when the born host is
//! IPv6, and from RECONSUMETIMES on, by another 12 when the store host is IPv6.
//! Java: `MessageDecoder` position constants, `MessageExtEncoder#calMsgLength`.

use crate::message::cursor::Cursor;
use crate::message::error::MessageError;
use crate::message::host::host_len;
use crate::message::sysflag::{BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG};

/// MAGICCODE of a V1 record (one-byte topic length). Java: `MESSAGE_MAGIC_CODE` (-626843481).
pub const MAGIC_CODE_V1: u32 = 0xDAA3_20A7;
/// MAGICCODE of a V2 record (two-byte topic length, 5.1+). Java: `MESSAGE_MAGIC_CODE_V2`.
pub const MAGIC_CODE_V2: u32 = 0xDAA3_20AB;
/// MAGICCODE of the end-of-file blank marker. Java: `BLANK_MAGIC_CODE` (-875286124).
pub const BLANK_MAGIC_CODE: u32 = 0xCBD4_3194;
/// Size of the blank marker: `int32 remaining` + `int32 BLANK_MAGIC_CODE`. A writer always keeps
/// this much room at the end of a file. Java: `END_FILE_MIN_BLANK_LENGTH`.
pub const BLANK_MARKER_LEN: usize = 8;

/// Position of TOTALSIZE.
pub const TOTAL_SIZE_POS: usize = 0;
/// Position of MAGICCODE.
pub const MAGIC_CODE_POS: usize = 4;
/// Position of BODYCRC.
pub const BODY_CRC_POS: usize = 8;
/// Position of QUEUEID.
pub const QUEUE_ID_POS: usize = 12;
/// Position of FLAG.
pub const FLAG_POS: usize = 16;
/// Position of QUEUEOFFSET (`int64`), filled in by the store under its append lock.
pub const QUEUE_OFFSET_POS: usize = 20;
/// Position of PHYSICALOFFSET (`int64`), filled in by the store under its append lock.
pub const PHYSICAL_OFFSET_POS: usize = 28;
/// Position of SYSFLAG.
pub const SYS_FLAG_POS: usize = 36;
/// Position of BORNTIMESTAMP.
pub const BORN_TIMESTAMP_POS: usize = 40;
/// Position of BORNHOST.
pub const BORN_HOST_POS: usize = 48;
/// Smallest possible record: V1, IPv4 hosts, empty body, topic and properties.
pub const MIN_RECORD_LEN: usize = 91;
/// Longest topic a V1 record can hold: Java reads its length as a signed byte.
pub const MAX_TOPIC_LEN_V1: usize = i8::MAX as usize;
/// Longest topic a V2 record can hold: its length is a signed `int16`.
pub const MAX_TOPIC_LEN_V2: usize = i16::MAX as usize;

/// The record format version, told apart by MAGICCODE. Java: `MessageVersion`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum MessageVersion {
    /// Magic `0xDAA320A7`: topic length is one signed byte, so topics are at most 127 bytes.
    #[default]
    V1,
    /// Magic `0xDAA320AB`: topic length is an `int16`.
    V2,
}

impl MessageVersion {
    /// The MAGICCODE written for this version.
    pub const fn magic_code(self) -> u32 {
        match self {
            MessageVersion::V1 => MAGIC_CODE_V1,
            MessageVersion::V2 => MAGIC_CODE_V2,
        }
    }

    /// The version with this MAGICCODE, if any.
    pub const fn from_magic_code(magic: u32) -> Option<Self> {
        match magic {
            MAGIC_CODE_V1 => Some(MessageVersion::V1),
            MAGIC_CODE_V2 => Some(MessageVersion::V2),
            _ => None,
        }
    }

    /// Size of the topic length prefix: 1 or 2 bytes.
    pub const fn topic_len_size(self) -> usize {
        match self {
            MessageVersion::V1 => 1,
            MessageVersion::V2 => 2,
        }
    }

    /// Longest topic, in bytes, this version can hold.
    pub const fn max_topic_len(self) -> usize {
        match self {
            MessageVersion::V1 => MAX_TOPIC_LEN_V1,
            MessageVersion::V2 => MAX_TOPIC_LEN_V2,
        }
    }

    /// The version the store picks for a topic of `topic_len` bytes: V1 when it fits, as
    /// `autoMessageVersionOnTopicLen` does.
    pub const fn for_topic_len(topic_len: usize) -> Self {
        if topic_len <= MAX_TOPIC_LEN_V1 {
            MessageVersion::V1
        } else {
            MessageVersion::V2
        }
    }
}

/// Length of BORNHOST (8 or 20) under `sys_flag`.
pub const fn born_host_len(sys_flag: i32) -> usize {
    host_len(sys_flag & BORNHOST_V6_FLAG != 0)
}

/// Length of STOREHOSTADDRESS (8 or 20) under `sys_flag`.
pub const fn store_host_len(sys_flag: i32) -> usize {
    host_len(sys_flag & STOREHOSTADDRESS_V6_FLAG != 0)
}

/// Position of STORETIMESTAMP: 56 with an IPv4 born host, 68 with an IPv6 one.
pub const fn store_timestamp_pos(sys_flag: i32) -> usize {
    BORN_HOST_POS + born_host_len(sys_flag)
}

/// Position of STOREHOSTADDRESS.
pub const fn store_host_pos(sys_flag: i32) -> usize {
    store_timestamp_pos(sys_flag) + 8
}

/// Position of RECONSUMETIMES.
pub const fn reconsume_times_pos(sys_flag: i32) -> usize {
    store_host_pos(sys_flag) + store_host_len(sys_flag)
}

/// Position of PREPARED TRANSACTION OFFSET.
pub const fn prepared_transaction_offset_pos(sys_flag: i32) -> usize {
    reconsume_times_pos(sys_flag) + 4
}

/// Position of the BODY length; the body follows it. 84 for IPv4 hosts.
pub const fn body_len_pos(sys_flag: i32) -> usize {
    prepared_transaction_offset_pos(sys_flag) + 8
}

/// TOTALSIZE of a record with these lengths (in bytes). Java: `MessageExtEncoder#calMsgLength`.
pub const fn record_len(
    version: MessageVersion,
    sys_flag: i32,
    body_len: usize,
    topic_len: usize,
    properties_len: usize,
) -> usize {
    body_len_pos(sys_flag) + 4 + body_len + version.topic_len_size() + topic_len + 2 + properties_len
}

/// The 8-byte end-of-file blank marker: `remaining` (bytes from the marker to the end of the
/// file, the marker included) then [`BLANK_MAGIC_CODE`].
///
/// The writer puts it where the next record (plus a marker) no longer fits and continues in the
/// next file; readers jump to the next file when they see it. Fails if `remaining` is below
/// [`BLANK_MARKER_LEN`] or does not fit the `int32` field.
pub fn blank_marker(remaining: u32) -> Result<[u8; BLANK_MARKER_LEN], MessageError> {
    let declared = i32::try_from(remaining).map_err(|_| MessageError::TooLong {
        field: "blank remaining",
        length: remaining as usize,
        max: i32::MAX as usize,
    })?;
    if remaining < BLANK_MARKER_LEN as u32 {
        return Err(MessageError::InvalidBlank { offset: 0, remaining: declared });
    }
    let mut marker = [0u8; BLANK_MARKER_LEN];
    marker[..4].copy_from_slice(&declared.to_be_bytes());
    marker[4..].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
    Ok(marker)
}

/// Overwrites QUEUEOFFSET in an encoded record.
pub fn patch_queue_offset(record: &mut [u8], queue_offset: i64) -> Result<(), MessageError> {
    patch(record, QUEUE_OFFSET_POS, "QUEUEOFFSET", &queue_offset.to_be_bytes())
}

/// Overwrites PHYSICALOFFSET in an encoded record.
pub fn patch_physical_offset(record: &mut [u8], physical_offset: i64) -> Result<(), MessageError> {
    patch(record, PHYSICAL_OFFSET_POS, "PHYSICALOFFSET", &physical_offset.to_be_bytes())
}

/// Overwrites STORETIMESTAMP in an encoded record, locating it from the SYSFLAG already in the
/// record (the born-host family moves it).
pub fn patch_store_timestamp(record: &mut [u8], store_timestamp_ms: i64) -> Result<(), MessageError> {
    let sys_flag = Cursor::new(record.get(SYS_FLAG_POS..).unwrap_or_default(), SYS_FLAG_POS).i32("SYSFLAG")?;
    patch(record, store_timestamp_pos(sys_flag), "STORETIMESTAMP", &store_timestamp_ms.to_be_bytes())
}

fn patch(record: &mut [u8], pos: usize, field: &'static str, value: &[u8]) -> Result<(), MessageError> {
    let available = record.len().saturating_sub(pos);
    match record.get_mut(pos..pos + value.len()) {
        Some(slot) => {
            slot.copy_from_slice(value);
            Ok(())
        }
        None => Err(MessageError::Truncated { field, offset: pos, needed: value.len(), available }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_follow_host_families() {
        assert_eq!(body_len_pos(0), 84);
        assert_eq!(body_len_pos(BORNHOST_V6_FLAG), 96);
        assert_eq!(body_len_pos(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG), 108);
        assert_eq!(reconsume_times_pos(STOREHOSTADDRESS_V6_FLAG), 84 - 12 + 12);
        assert_eq!(record_len(MessageVersion::V1, 0, 0, 0, 0), MIN_RECORD_LEN);
        assert_eq!(record_len(MessageVersion::V2, 0, 5, 9, 10), 116);
    }

    #[test]
    fn magic_codes_match_java_ints() {
        assert_eq!(MAGIC_CODE_V1 as i32, -626_843_481);
        assert_eq!(MAGIC_CODE_V2 as i32, -626_843_477);
        assert_eq!(BLANK_MAGIC_CODE as i32, -875_286_124);
        assert_eq!(MessageVersion::from_magic_code(MAGIC_CODE_V2), Some(MessageVersion::V2));
        assert_eq!(MessageVersion::from_magic_code(BLANK_MAGIC_CODE), None);
    }

    #[test]
    fn blank_marker_rejects_impossible_lengths() {
        assert!(blank_marker(8).is_ok());
        assert_eq!(blank_marker(3), Err(MessageError::InvalidBlank { offset: 0, remaining: 3 }));
        assert!(matches!(blank_marker(u32::MAX), Err(MessageError::TooLong { .. })));
    }

    #[test]
    fn patching_a_short_buffer_fails_without_writing() {
        let mut buf = [0u8; 30];
        assert!(patch_queue_offset(&mut buf, -1).is_ok());
        assert_eq!(&buf[20..28], &[0xFF; 8]);
        assert_eq!(
            patch_physical_offset(&mut buf, 1),
            Err(MessageError::Truncated { field: "PHYSICALOFFSET", offset: 28, needed: 8, available: 2 })
        );
        assert_eq!(&buf[28..], &[0, 0]);
        // SYSFLAG is readable here, but STORETIMESTAMP at 56 is not.
        let mut buf = [0u8; 60];
        assert_eq!(
            patch_store_timestamp(&mut buf, 1),
            Err(MessageError::Truncated { field: "STORETIMESTAMP", offset: 56, needed: 8, available: 4 })
        );
    }
}
