//! Upper-case hex, as `UtilAll.bytes2string` writes it, for message ids.

const DIGITS: &[u8; 16] = b"0123456789ABCDEF";

/// Appends `bytes` to `out` as upper-case hex, two characters per byte.
pub(crate) fn push_upper_hex(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0F)]));
    }
}

/// Decodes hex of either case (Java upper-cases before parsing); `None` on odd length or a bad
/// digit, where Java would silently produce garbage.
pub(crate) fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let raw = text.as_bytes();
    if !raw.len().is_multiple_of(2) {
        return None;
    }
    raw.chunks_exact(2).map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?)).collect()
}

fn digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'A'..=b'F' => Some(c - b'A' + 10),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_bad_digits() {
        let mut s = String::new();
        push_upper_hex(&mut s, &[0x00, 0x7F, 0xAB, 0xFF]);
        assert_eq!(s, "007FABFF");
        assert_eq!(decode_hex("007fabFF"), Some(vec![0x00, 0x7F, 0xAB, 0xFF]));
        assert_eq!(decode_hex("0"), None);
        assert_eq!(decode_hex("0G"), None);
        assert_eq!(decode_hex("é0"), None);
    }
}
