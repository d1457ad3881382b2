//! Base64 with the URL-safe alphabet (`-` and `_`), as `java.util.Base64.getUrlEncoder()`
//! writes it (padded) and `getUrlDecoder()` reads it (padding optional; when present it must
//! be complete; nothing may follow it; no whitespace).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Encodes with `=` padding.
pub(crate) fn encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = [(n >> 18) & 63, (n >> 12) & 63, (n >> 6) & 63, n & 63];
        for (i, &c) in chars.iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[c as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn value_of(c: u8) -> Option<u32> {
    match c {
        b'A'..=b'Z' => Some(u32::from(c - b'A')),
        b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
        b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    }
}

/// Decodes; `None` where Java's URL decoder throws `IllegalArgumentException`.
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    let src = text.as_bytes();
    let mut out = Vec::with_capacity(src.len() / 4 * 3 + 2);
    let mut bits: u32 = 0;
    let mut n = 0; // characters of the current 4-character unit
    let mut i = 0;
    while i < src.len() {
        let c = src[i];
        i += 1;
        if c == b'=' {
            // "xx==" or "xxx=": the unit's padding must be complete, then the input ends.
            match n {
                2 if src.get(i) == Some(&b'=') => i += 1,
                3 => {}
                _ => return None,
            }
            if i != src.len() {
                return None;
            }
            break;
        }
        bits = (bits << 6) | value_of(c)?;
        n += 1;
        if n == 4 {
            out.extend_from_slice(&[(bits >> 16) as u8, (bits >> 8) as u8, bits as u8]);
            bits = 0;
            n = 0;
        }
    }
    match n {
        0 => {}
        1 => return None,
        2 => out.push((bits >> 4) as u8),
        _ => out.extend_from_slice(&[(bits >> 10) as u8, (bits >> 2) as u8]),
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_vectors_round_trip() {
        for (plain, coded) in
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")]
        {
            assert_eq!(encode(plain.as_bytes()), coded);
            assert_eq!(decode(coded).unwrap(), plain.as_bytes());
        }
        assert_eq!(encode(&[0xFB, 0xFF]), "-_8=");
    }

    #[test]
    fn decoding_is_as_strict_as_java() {
        assert_eq!(decode("Zg").unwrap(), b"f", "padding is optional");
        assert_eq!(decode("Zm8").unwrap(), b"fo");
        assert!(decode("Z").is_none(), "one leftover character");
        assert!(decode("Zg=").is_none(), "incomplete padding");
        assert!(decode("Z===").is_none());
        assert!(decode("Zg==Zg==").is_none(), "data after padding");
        assert!(decode("+/8=").is_none(), "standard alphabet");
        assert!(decode("v1 a b").is_none(), "whitespace");
    }
}
