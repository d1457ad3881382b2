//! Java's string-to-number conversions, as the filter uses them on property values.
//!
//! Property values are strings. When one is compared with a number, Java converts it with
//! `Integer.valueOf`, `Long.valueOf` or `Double.valueOf` (chosen by the number's type), or with
//! `Boolean.valueOf` against a boolean. These accept different text than Rust's `parse`
//! (Java's double parser trims control characters and spaces, takes `1d`/`1f` suffixes and hex
//! floats, but not `inf` or `nan`), and the filter's result depends on exactly which strings
//! convert, so they are reproduced here.
//!
//! Java's integer parsers also accept non-ASCII decimal digits (Arabic-Indic, Devanagari,
//! fullwidth, ...); so do these, using Java 17's table. Other Java versions differ only in
//! scripts added to Unicode since.

use crate::error::EvalError;

/// Java: `Integer.valueOf(String)`.
pub(crate) fn parse_int(s: &str) -> Result<i32, EvalError> {
    parse_integer(s, i64::from(i32::MIN), i64::from(i32::MAX))
        .and_then(|v| i32::try_from(v).ok())
        .ok_or(EvalError::NumberFormat { target: "int" })
}

/// Java: `Long.valueOf(String)`.
pub(crate) fn parse_long(s: &str) -> Result<i64, EvalError> {
    parse_integer(s, i64::MIN, i64::MAX).ok_or(EvalError::NumberFormat { target: "long" })
}

/// Java: `Boolean.valueOf(String)`: true exactly for "true" in any letter case.
pub(crate) fn parse_boolean(s: &str) -> bool {
    s.eq_ignore_ascii_case("true")
}

/// Java's `Long.parseLong` digit loop: an optional sign, then at least one digit, no blanks.
/// It accumulates negatively so that the most negative value parses without overflow.
fn parse_integer(s: &str, min: i64, max: i64) -> Option<i64> {
    let (negative, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let limit = if negative { min } else { -max };
    let mut acc: i64 = 0;
    for c in digits.chars() {
        acc = acc.checked_mul(10)?.checked_sub(i64::from(java_digit(c)?))?;
        if acc < limit {
            return None;
        }
    }
    Some(if negative { acc } else { -acc })
}

/// The zero of every run of ten decimal digits (Unicode category Nd) in the Basic
/// Multilingual Plane, as Java 17's `Character.digit(char, 10)` knows them. Java's parsers
/// read a string one UTF-16 unit at a time, so digits outside that plane never count.
const DIGIT_ZEROS: [u32; 37] = [
    0x0030, 0x0660, 0x06F0, 0x07C0, 0x0966, 0x09E6, 0x0A66, 0x0AE6, 0x0B66, 0x0BE6, 0x0C66, 0x0CE6, 0x0D66, 0x0DE6,
    0x0E50, 0x0ED0, 0x0F20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90, 0x1B50, 0x1BB0, 0x1C40,
    0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
];

/// Java: `Character.digit(c, 10)`.
fn java_digit(c: char) -> Option<u32> {
    let c = u32::from(c);
    let run = DIGIT_ZEROS.partition_point(|&zero| zero <= c).checked_sub(1)?;
    let value = c - DIGIT_ZEROS[run];
    (value < 10).then_some(value)
}

/// Java: `Double.valueOf(String)` (`FloatingDecimal.readJavaFormatString`).
///
/// Accepts, after trimming characters up to U+0020 from both ends: an optional sign, then
/// `NaN`, `Infinity`, a hex float (`0x1.8p3`), or decimal digits with at most one point and at
/// least one digit, an optional exponent, and an optional `f`, `F`, `d` or `D` suffix.
pub(crate) fn parse_double(s: &str) -> Result<f64, EvalError> {
    parse_java_double(s).ok_or(EvalError::NumberFormat { target: "double" })
}

fn parse_java_double(s: &str) -> Option<f64> {
    let text = s.trim_matches(|c: char| c <= ' ');
    let bytes = text.as_bytes();
    let sign_len = usize::from(matches!(bytes.first()?, b'+' | b'-'));
    let negative = bytes[0] == b'-';
    let body = &text[sign_len..];
    let signed = |v: f64| if negative { -v } else { v };
    match body.as_bytes().first()? {
        b'N' => return (body == "NaN").then_some(f64::NAN),
        b'I' => return (body == "Infinity").then_some(signed(f64::INFINITY)),
        b'0' if matches!(body.as_bytes().get(1), Some(b'x' | b'X')) => return parse_hex_double(&body[2..]).map(signed),
        _ => {}
    }
    let end = decimal_end(body.as_bytes())?;
    // The validated text is a subset of what Rust's parser accepts, and both round correctly.
    text[..sign_len + end].parse::<f64>().ok()
}

/// Validates a decimal body and returns where its number ends (before any `fFdD` suffix).
fn decimal_end(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    let mut digits = 0usize;
    let mut points = 0usize;
    while let Some(&c) = b.get(i) {
        match c {
            b'0'..=b'9' => digits += 1,
            b'.' => points += 1,
            _ => break,
        }
        i += 1;
    }
    if digits == 0 || points > 1 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == exp_start {
            return None;
        }
    }
    match &b[i..] {
        [] => Some(i),
        [b'f' | b'F' | b'd' | b'D'] => Some(i),
        _ => None,
    }
}

/// Java's hex float syntax after the `0x`: `hex+ .?` or `hex* . hex+`, then `[pP][+-]?digits`,
/// then an optional `fFdD` suffix. Rounds to nearest, ties to even, like Java.
fn parse_hex_double(b: &str) -> Option<f64> {
    let b = b.as_bytes();
    let mut i = 0;
    // Significant bits so far (at most 64 + 4), the binary exponent of its lowest bit, and
    // whether any non-zero digit was dropped beyond that.
    let mut mantissa: u128 = 0;
    let mut exp2: i64 = 0;
    let mut sticky = false;
    let mut digits = 0usize;
    let mut seen_point = false;
    while let Some(&c) = b.get(i) {
        if c == b'.' {
            if seen_point {
                return None;
            }
            seen_point = true;
        } else if let Some(d) = (c as char).to_digit(16) {
            digits += 1;
            if mantissa >> 64 == 0 {
                mantissa = (mantissa << 4) | u128::from(d);
                if seen_point {
                    exp2 -= 4;
                }
            } else {
                sticky |= d != 0;
                if !seen_point {
                    exp2 += 4;
                }
            }
        } else {
            break;
        }
        i += 1;
    }
    if digits == 0 || !matches!(b.get(i), Some(b'p' | b'P')) {
        return None;
    }
    i += 1;
    let exp_negative = b.get(i) == Some(&b'-');
    if matches!(b.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let exp_start = i;
    let mut exp: i64 = 0;
    while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
        // Anything beyond this saturates to zero or infinity anyway.
        exp = (exp * 10 + i64::from(c - b'0')).min(1 << 40);
        i += 1;
    }
    if i == exp_start || !matches!(&b[i..], [] | [b'f' | b'F' | b'd' | b'D']) {
        return None;
    }
    let exp = if exp_negative { -exp } else { exp };
    Some(round_to_double(mantissa, exp2 + exp, sticky))
}

/// `mantissa * 2^exp2` (plus a sliver more if `sticky`), rounded to the nearest double.
fn round_to_double(mantissa: u128, exp2: i64, sticky: bool) -> f64 {
    if mantissa == 0 {
        return 0.0;
    }
    let bits = i64::from(128 - mantissa.leading_zeros());
    // Binary exponent of the leading bit, and how many bits the result can keep.
    let top = exp2 + bits - 1;
    if top > 1023 {
        return f64::INFINITY;
    }
    let precision = if top >= -1022 { 53 } else { 53 - (-1022 - top) };
    if precision < 0 {
        return 0.0;
    }
    let drop = bits - precision;
    let mut kept = if drop <= 0 {
        mantissa << -drop
    } else {
        let drop = drop as u32;
        let dropped = mantissa & ((1u128 << drop) - 1);
        let half = 1u128 << (drop - 1);
        let kept = mantissa >> drop;
        let above_half = dropped > half || (dropped == half && sticky);
        let tie = dropped == half && !sticky;
        if above_half || (tie && kept & 1 == 1) {
            kept + 1
        } else {
            kept
        }
    };
    if precision < 53 {
        // Subnormal: the kept bits are the raw fraction field. A carry into bit 52 lands
        // exactly on the smallest normal number's encoding.
        return f64::from_bits(kept as u64);
    }
    let mut top = top;
    if kept >> 53 != 0 {
        kept >>= 1;
        top += 1;
        if top > 1023 {
            return f64::INFINITY;
        }
    }
    let biased = (top + 1023) as u64;
    f64::from_bits((biased << 52) | (kept as u64 & ((1u64 << 52) - 1)))
}

/// Java: `Double.compare` / `Double#compareTo`: numeric order, except that `-0.0` sorts below
/// `0.0` and NaN equals itself and sorts above everything.
pub(crate) fn compare_doubles(a: f64, b: f64) -> std::cmp::Ordering {
    if a < b {
        return std::cmp::Ordering::Less;
    }
    if a > b {
        return std::cmp::Ordering::Greater;
    }
    // Java's doubleToLongBits maps every NaN to one canonical pattern.
    let canonical = |v: f64| if v.is_nan() { 0x7ff8_0000_0000_0000_i64 } else { v.to_bits() as i64 };
    canonical(a).cmp(&canonical(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    #[test]
    fn integers_parse_like_java_value_of() {
        assert_eq!(parse_int("5"), Ok(5));
        assert_eq!(parse_int("+7"), Ok(7));
        assert_eq!(parse_int("-0"), Ok(0));
        assert_eq!(parse_int("007"), Ok(7));
        assert_eq!(parse_int("2147483647"), Ok(i32::MAX));
        assert_eq!(parse_int("-2147483648"), Ok(i32::MIN));
        assert_eq!(parse_int(&format!("{}1", "0".repeat(40))), Ok(1));
        for bad in ["", "+", "-", " 5", "5 ", "5.0", "1e3", "2147483648", "-2147483649", "0x10", "abc", "--5", "5L"] {
            assert!(parse_int(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_long("9223372036854775807"), Ok(i64::MAX));
        assert_eq!(parse_long("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_long("3000000000"), Ok(3_000_000_000));
        assert_eq!(parse_int("\u{663}\u{660}"), Ok(30), "Arabic-Indic digits");
        assert_eq!(parse_int("-\u{ff11}\u{ff12}"), Ok(-12), "fullwidth digits");
        assert!(parse_int("\u{1d7ce}").is_err(), "digits outside the BMP are two UTF-16 units");
        assert!(parse_int("\u{b2}").is_err(), "superscript two is not a decimal digit");
        assert!(parse_long("9223372036854775808").is_err());
        assert!(parse_long("99999999999999999999999").is_err());
    }

    #[test]
    fn doubles_parse_like_java_value_of() {
        let ok = |s: &str| parse_double(s).unwrap();
        assert_eq!(ok("2.5"), 2.5);
        assert_eq!(ok("  7 "), 7.0);
        assert_eq!(ok("\t\n1e3\u{1}"), 1000.0);
        assert_eq!(ok("1d"), 1.0);
        assert_eq!(ok("1.5F"), 1.5);
        assert_eq!(ok("5."), 5.0);
        assert_eq!(ok(".5"), 0.5);
        assert_eq!(ok("+.5e-1"), 0.05);
        assert_eq!(ok("1E+2"), 100.0);
        assert_eq!(ok("-0").to_bits(), (-0.0f64).to_bits());
        assert!(ok("NaN").is_nan());
        assert!(ok("-NaN").is_nan());
        assert_eq!(ok("-Infinity"), f64::NEG_INFINITY);
        assert_eq!(ok("1e400"), f64::INFINITY);
        assert_eq!(ok("1e-400"), 0.0);
        assert_eq!(ok("3000000000"), 3e9);
        for bad in [
            "",
            " ",
            ".",
            "+",
            "e5",
            "1e",
            "1e+",
            "1.2.3",
            "1dd",
            "1x",
            "nan",
            "inf",
            "infinity",
            "+-1",
            "1 2",
            "Infinityx",
            "0x",
            "0x1",
            "1,5",
            "٣",
        ] {
            assert!(parse_double(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn hex_doubles_round_to_nearest_even() {
        let ok = |s: &str| parse_double(s).unwrap();
        assert_eq!(ok("0x1p0"), 1.0);
        assert_eq!(ok("0X1.8P1"), 3.0);
        assert_eq!(ok("0x.8p1"), 1.0);
        assert_eq!(ok("0x10p0d"), 16.0);
        assert_eq!(ok("-0x1p-2"), -0.25);
        assert_eq!(ok("0x0p0"), 0.0);
        assert_eq!(ok("0x1.fffffffffffffp1023"), f64::MAX);
        assert_eq!(ok("0x1.fffffffffffff8p1023"), f64::INFINITY);
        assert_eq!(ok("0x1p-1074"), f64::from_bits(1));
        assert_eq!(ok("0x1p-1075"), 0.0, "a tie rounds to the even zero");
        assert_eq!(ok("0x1.0000000000001p-1075"), f64::from_bits(1));
        assert_eq!(ok("0x1.8p-1074"), f64::from_bits(2), "a tie rounds to even");
        assert_eq!(ok("0x1.00000000000008p0"), 1.0, "a tie rounds to even");
        assert_eq!(ok("0x1.00000000000018p0"), 1.0 + 2.0 * f64::EPSILON);
        assert_eq!(ok("0x1.000000000000080000000000000000001p0"), 1.0 + f64::EPSILON);
        // Both checked against Java's Double.valueOf.
        assert_eq!(ok("0x123456789abcdef0123p0").to_bits(), 0x4472_3456_789a_bcdf);
        assert_eq!(ok("0x1.fffffffffffffp-1023"), f64::MIN_POSITIVE);
        for bad in ["0x1", "0xp1", "0x.p1", "0x1.2.3p1", "0x1pp1", "0x1p", "0x1p+", "0xg1p1", "0x1p1x"] {
            assert!(parse_double(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn double_order_matches_java_compare() {
        assert_eq!(compare_doubles(1.0, 2.0), Ordering::Less);
        assert_eq!(compare_doubles(-0.0, 0.0), Ordering::Less);
        assert_eq!(compare_doubles(0.0, 0.0), Ordering::Equal);
        assert_eq!(compare_doubles(f64::NAN, f64::INFINITY), Ordering::Greater);
        assert_eq!(compare_doubles(f64::NAN, -f64::NAN), Ordering::Equal);
        assert_eq!(compare_doubles(f64::NEG_INFINITY, f64::NAN), Ordering::Less);
    }

    #[test]
    fn booleans_parse_like_java_value_of() {
        assert!(parse_boolean("true"));
        assert!(parse_boolean("TrUe"));
        assert!(!parse_boolean("yes"));
        assert!(!parse_boolean(" true"));
        assert!(!parse_boolean("1"));
    }
}
