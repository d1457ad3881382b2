//! Socket addresses as RocketMQ lays them out: raw IP bytes (4 or 16) then an `int32` port.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::BufMut;

use crate::message::cursor::Cursor;
use crate::message::error::MessageError;

/// Encoded length of an IPv4 host: 4 address bytes and a 4-byte port.
pub(crate) const HOST_V4_LEN: usize = 8;
/// Encoded length of an IPv6 host: 16 address bytes and a 4-byte port.
pub(crate) const HOST_V6_LEN: usize = 20;

pub(crate) const fn host_len(is_v6: bool) -> usize {
    if is_v6 {
        HOST_V6_LEN
    } else {
        HOST_V4_LEN
    }
}

/// Writes the address bytes and the port as `int32`. Only the IP and port are kept: IPv6 flow
/// info and scope id have no place in the format.
pub(crate) fn put_host(buf: &mut impl BufMut, addr: &SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => buf.put_slice(&ip.octets()),
        IpAddr::V6(ip) => buf.put_slice(&ip.octets()),
    }
    buf.put_i32(i32::from(addr.port()));
}

/// Reads a host whose family the caller knows (from SYSFLAG or the id length).
pub(crate) fn read_host(cursor: &mut Cursor<'_>, is_v6: bool, field: &'static str) -> Result<SocketAddr, MessageError> {
    let ip = if is_v6 {
        IpAddr::V6(Ipv6Addr::from(cursor.bytes::<16>(field)?))
    } else {
        IpAddr::V4(Ipv4Addr::from(cursor.bytes::<4>(field)?))
    };
    let offset = cursor.offset();
    let port = cursor.i32(field)?;
    let port = u16::try_from(port).map_err(|_| MessageError::InvalidPort { field, offset, port })?;
    Ok(SocketAddr::new(ip, port))
}
