//! The offset message id: store host and commit-log offset in hex (fact sheet 3.4).
//!
//! This is the `msgId` of a send response and the `offsetMsgId` of Java clients; it locates a
//! message in one broker's commit log. Java: `MessageDecoder#createMessageId`/`#decodeMessageId`.

use std::net::SocketAddr;

use crate::message::cursor::Cursor;
use crate::message::error::MessageError;
use crate::message::hex::{decode_hex, push_upper_hex};
use crate::message::host::{put_host, HOST_V4_LEN, HOST_V6_LEN};

/// Length of an offset message id with an IPv4 store host: (4 + 4 + 8) bytes in hex.
pub const OFFSET_MSG_ID_LEN_V4: usize = 2 * (HOST_V4_LEN + 8);
/// Length of an offset message id with an IPv6 store host: (16 + 4 + 8) bytes in hex.
pub const OFFSET_MSG_ID_LEN_V6: usize = 2 * (HOST_V6_LEN + 8);

/// `hex(store IP + int32 port + int64 offset)` in upper case: 32 characters for an IPv4 host,
/// 56 for IPv6.
pub fn create_offset_msg_id(store_host: SocketAddr, commit_log_offset: i64) -> String {
    let mut id = String::with_capacity(OFFSET_MSG_ID_LEN_V6);
    push_offset_msg_id(&mut id, store_host, commit_log_offset);
    id
}

/// Appends the offset message id of [`create_offset_msg_id`] to `out` without allocating
/// (the CommitLog writes one per record while it holds its lock).
pub fn push_offset_msg_id(out: &mut String, store_host: SocketAddr, commit_log_offset: i64) {
    let mut raw = [0u8; HOST_V6_LEN + 8];
    let mut buf = &mut raw[..];
    put_host(&mut buf, &store_host);
    let host_len = HOST_V6_LEN + 8 - buf.len();
    raw[host_len..host_len + 8].copy_from_slice(&commit_log_offset.to_be_bytes());
    push_upper_hex(out, &raw[..host_len + 8]);
}

/// Parses an offset message id back into store host and commit-log offset.
///
/// Hex of either case is accepted. The length must be exactly 32 (IPv4) or 56 (IPv6); Java
/// treats every length other than 32 as IPv6 and fails later, we fail up front.
pub fn decode_offset_msg_id(id: &str) -> Result<(SocketAddr, i64), MessageError> {
    let invalid = |reason| MessageError::InvalidMessageId { id: id.to_owned(), reason };
    let is_v6 = match id.len() {
        OFFSET_MSG_ID_LEN_V4 => false,
        OFFSET_MSG_ID_LEN_V6 => true,
        _ => return Err(invalid("length is neither 32 (IPv4) nor 56 (IPv6)")),
    };
    let raw = decode_hex(id).ok_or_else(|| invalid("not hexadecimal"))?;
    let mut c = Cursor::new(&raw, 0);
    let host =
        crate::message::host::read_host(&mut c, is_v6, "store host").map_err(|_| invalid("port outside 0..=65535"))?;
    let offset = c.i64("offset").map_err(|_| invalid("too short"))?;
    Ok((host, offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn round_trips_negative_offsets_and_both_families() {
        for host in [
            SocketAddr::new(Ipv4Addr::new(255, 1, 2, 3).into(), 65535),
            SocketAddr::new(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1).into(), 0),
        ] {
            let id = create_offset_msg_id(host, -5);
            assert_eq!(decode_offset_msg_id(&id), Ok((host, -5)));
        }
    }

    #[test]
    fn push_appends_the_same_id() {
        let v4 = SocketAddr::new(Ipv4Addr::new(10, 0, 0, 1).into(), 10911);
        let v6 = SocketAddr::new(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1).into(), 10911);
        let mut ids = String::from("x,");
        push_offset_msg_id(&mut ids, v4, 0x1234);
        ids.push(',');
        push_offset_msg_id(&mut ids, v6, 7);
        assert_eq!(ids, format!("x,{},{}", create_offset_msg_id(v4, 0x1234), create_offset_msg_id(v6, 7)));
        assert_eq!(create_offset_msg_id(v4, 0x1234), "0A00000100002A9F0000000000001234");
    }

    #[test]
    fn rejects_bad_lengths_and_digits_with_context() {
        let err = decode_offset_msg_id("ABC").unwrap_err();
        assert!(matches!(err, MessageError::InvalidMessageId { ref id, .. } if id == "ABC"));
        let multibyte = "é".repeat(16);
        assert_eq!(multibyte.len(), 32);
        assert!(decode_offset_msg_id(&multibyte).is_err());
    }
}
