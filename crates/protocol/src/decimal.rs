//! Integers as decimal text without the formatting machinery: every header carries a few
//! (code, opaque, offsets), and `write!` costs several times this loop per number.

/// The decimal text of `v` (a leading `-` when negative), as `{v}` would print it.
#[derive(Debug, Clone, Copy)]
pub struct Decimal {
    buf: [u8; 20],
    start: usize,
}

impl Decimal {
    /// Formats `v`.
    pub fn new(v: i64) -> Decimal {
        let mut buf = [0u8; 20];
        let mut n = v.unsigned_abs();
        let mut start = buf.len();
        loop {
            start -= 1;
            buf[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if v < 0 {
            // i64::MIN has 19 digits: there is always room for the sign.
            start -= 1;
            buf[start] = b'-';
        }
        Decimal { buf, start }
    }

    /// The text's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // Only ASCII digits and '-' were written.
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }
}

/// Appends `v` in decimal to `out`.
pub fn push_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(Decimal::new(v).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_display_does() {
        for v in [0, 1, -1, 9, 10, -10, 99, 100, 12345, i64::from(i32::MAX), i64::from(i32::MIN), i64::MAX, i64::MIN] {
            assert_eq!(Decimal::new(v).as_str(), v.to_string());
            let mut out = b"x".to_vec();
            push_i64(&mut out, v);
            assert_eq!(out, format!("x{v}").into_bytes());
        }
    }
}
