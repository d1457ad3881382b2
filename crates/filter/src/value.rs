//! Values an expression produces while it is evaluated, and Java's rules for comparing them.
//!
//! Java keeps literals as `Integer` (decimal literals that fit), `Long`, `Double`, `String` and
//! `Boolean`, and property values are always `String`. The `Integer`/`Long` split is visible:
//! a property compared with `5` is read with `Integer.valueOf`, so "3000000000" fails there but
//! not against `3000000000`. [`Value`] keeps the same five types plus null.

use std::cmp::Ordering;

use crate::error::EvalError;
use crate::java_number::{compare_doubles, parse_boolean, parse_double, parse_int, parse_long};

/// One evaluated value. Strings borrow from the expression (literals) or the message
/// (properties).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(&'a str),
}

/// Java: `ComparisonExpression.__compare(lv, rv, true)`; the flag is always true because
/// `SelectorParser.parse` sets `CONVERT_STRING_EXPRESSIONS` while it builds the tree.
///
/// Values of different types are converted towards each other: an int widens to long or
/// double, a long to double, and a string is read as whatever number type (or boolean) the
/// other side has. Pairs Java cannot convert (a boolean and a number) compare as `Less`,
/// because Java returns -1 for them. Both values must be non-null; callers handle null first.
///
/// # Errors
///
/// A string that is not a valid number of the other side's type, and a boolean on the left
/// with a string on the right (a Java `ClassCastException`).
pub(crate) fn compare(left: Value<'_>, right: Value<'_>) -> Result<Ordering, EvalError> {
    use Value::{Bool, Double, Int, Long, Null, Str};
    Ok(match (left, right) {
        (Bool(l), Bool(r)) => l.cmp(&r),
        (Int(l), Int(r)) => l.cmp(&r),
        (Long(l), Long(r)) => l.cmp(&r),
        (Double(l), Double(r)) => compare_doubles(l, r),
        // Java: String#compareTo, which orders by UTF-16 code unit.
        (Str(l), Str(r)) => l.encode_utf16().cmp(r.encode_utf16()),

        (Int(l), Long(r)) => i64::from(l).cmp(&r),
        (Int(l), Double(r)) => compare_doubles(f64::from(l), r),
        (Int(l), Str(r)) => l.cmp(&parse_int(r)?),
        (Long(l), Int(r)) => l.cmp(&i64::from(r)),
        (Long(l), Double(r)) => compare_doubles(l as f64, r),
        (Long(l), Str(r)) => l.cmp(&parse_long(r)?),
        (Double(l), Int(r)) => compare_doubles(l, f64::from(r)),
        (Double(l), Long(r)) => compare_doubles(l, r as f64),
        (Double(l), Str(r)) => compare_doubles(l, parse_double(r)?),
        (Str(l), Bool(r)) => parse_boolean(l).cmp(&r),
        (Str(l), Int(r)) => parse_int(l)?.cmp(&r),
        (Str(l), Long(r)) => parse_long(l)?.cmp(&r),
        (Str(l), Double(r)) => compare_doubles(parse_double(l)?, r),

        // Java converts the left side with `(String) lv` here, which cannot succeed.
        (Bool(_), Str(_)) => return Err(EvalError::BooleanComparedWithString),
        (Bool(_), Int(_) | Long(_) | Double(_)) | (Int(_) | Long(_) | Double(_), Bool(_)) => Ordering::Less,
        // Unreachable: every caller returns early on null, as Java does before comparing.
        (Null, _) | (_, Null) => Ordering::Less,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Value::*;

    #[test]
    fn numbers_of_different_types_widen() {
        assert_eq!(compare(Int(5), Long(5)), Ok(Ordering::Equal));
        assert_eq!(compare(Long(3_000_000_000), Int(5)), Ok(Ordering::Greater));
        assert_eq!(compare(Int(2), Double(2.5)), Ok(Ordering::Less));
        assert_eq!(compare(Double(2.0), Int(2)), Ok(Ordering::Equal));
        assert_eq!(compare(Long(i64::MAX), Double(9.223372036854776e18)), Ok(Ordering::Equal));
    }

    #[test]
    fn strings_are_read_as_the_other_sides_type() {
        assert_eq!(compare(Str("5"), Int(5)), Ok(Ordering::Equal));
        assert_eq!(compare(Int(5), Str("+5")), Ok(Ordering::Equal));
        assert_eq!(compare(Str("3000000000"), Int(5)), Err(EvalError::NumberFormat { target: "int" }));
        assert_eq!(compare(Str("3000000000"), Long(3_000_000_001)), Ok(Ordering::Less));
        assert_eq!(compare(Str("5.5"), Int(5)), Err(EvalError::NumberFormat { target: "int" }));
        assert_eq!(compare(Str("5.5"), Double(5.0)), Ok(Ordering::Greater));
        assert_eq!(compare(Double(5.0), Str(" 5d ")), Ok(Ordering::Equal));
        assert_eq!(compare(Str("abc"), Double(1.0)), Err(EvalError::NumberFormat { target: "double" }));
    }

    #[test]
    fn booleans_compare_with_strings_only_from_the_right() {
        assert_eq!(compare(Str("TRUE"), Bool(true)), Ok(Ordering::Equal));
        assert_eq!(compare(Str("yes"), Bool(false)), Ok(Ordering::Equal));
        assert_eq!(compare(Bool(true), Str("true")), Err(EvalError::BooleanComparedWithString));
        assert_eq!(compare(Bool(true), Int(1)), Ok(Ordering::Less));
        assert_eq!(compare(Int(1), Bool(true)), Ok(Ordering::Less));
        assert_eq!(compare(Bool(false), Bool(true)), Ok(Ordering::Less));
    }

    #[test]
    fn strings_order_by_utf16_code_units() {
        assert_eq!(compare(Str("abc"), Str("abd")), Ok(Ordering::Less));
        assert_eq!(compare(Str("ab"), Str("abc")), Ok(Ordering::Less));
        // U+FF21 is one UTF-16 unit above any surrogate, so it sorts after U+1F600, which
        // UTF-8 byte order would put first.
        assert_eq!(compare(Str("\u{ff21}"), Str("\u{1f600}")), Ok(Ordering::Greater));
    }
}
