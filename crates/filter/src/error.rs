//! The crate's error types: why a filter expression was rejected ([`FilterError`]), why its
//! evaluation failed ([`EvalError`]), and why a bloom filter could not be built or used
//! ([`BloomFilterError`]).
//!
//! Java RocketMQ reports all of these as exceptions whose text is the only detail; here each
//! cause is a variant, so the broker can map them without matching on messages.

use std::fmt;

/// Where in the expression text an error was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    /// Byte offset into the expression text.
    pub offset: usize,
    /// 1-based line; `\n`, `\r` and `\r\n` each end a line, as in Java's JavaCC lexer.
    pub line: u32,
    /// 1-based column, counted in characters (not bytes) from the start of the line.
    pub column: u32,
}

impl Position {
    /// The position of byte `offset` in `text`. An offset past the end, or inside a multi-byte
    /// character, is clamped back to the nearest character boundary.
    pub(crate) fn locate(text: &str, offset: usize) -> Position {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let mut line = 1u32;
        let mut column = 1u32;
        let mut chars = text[..offset].chars().peekable();
        while let Some(c) = chars.next() {
            let ends_line = match c {
                '\n' => true,
                // "\r\n" is one line break: let the '\n' end the line.
                '\r' => chars.peek() != Some(&'\n'),
                _ => false,
            };
            if ends_line {
                line = line.saturating_add(1);
                column = 1;
            } else if c != '\r' {
                column = column.saturating_add(1);
            }
        }
        Position { offset, line, column }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {} (byte {})", self.line, self.column, self.offset)
    }
}

/// A filter expression that [`parse`](crate::parse) rejected: where, and why.
///
/// Java rejects the same expressions with `MQFilterException("Invalid MessageSelector. ")`
/// wrapping a JavaCC `ParseException`, a `TokenMgrError` or a `RuntimeException` thrown while
/// building the expression tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid SQL92 filter at {position}: {kind}")]
#[non_exhaustive]
pub struct FilterError {
    /// Where the problem was found.
    pub position: Position,
    /// What the problem is.
    pub kind: ParseErrorKind,
}

impl FilterError {
    /// Boxed, because the parser passes errors up through many small frames.
    pub(crate) fn at(text: &str, offset: usize, kind: ParseErrorKind) -> Box<FilterError> {
        Box::new(FilterError { position: Position::locate(text, offset), kind })
    }
}

/// Why an expression was rejected. The Java class or check that rejects the same input is named
/// on each variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// A character that starts no token (Java: `TokenMgrError`).
    #[error("unexpected character {0:?}")]
    UnexpectedCharacter(char),
    /// A `'` with no closing quote (Java: `TokenMgrError`).
    #[error("string literal has no closing quote")]
    UnterminatedString,
    /// A `/*` with no closing `*/` (Java: `TokenMgrError`).
    #[error("block comment has no closing */")]
    UnterminatedComment,
    /// The grammar does not allow this token here (Java: `ParseException`).
    #[error("expected {expected}, found {found}")]
    UnexpectedToken {
        /// What was found, for example "identifier" or "end of input".
        found: &'static str,
        /// What the grammar allows at this point.
        expected: &'static str,
    },
    /// A decimal literal above `Long.MAX_VALUE` (Java: `ConstantExpression.createFromDecimal`).
    #[error("integer literal does not fit in a Java long")]
    IntegerOutOfRange,
    /// A floating-point literal that is infinite or rounds to zero
    /// (Java: `ConstantExpression.createFloat` compares with `Double.MAX_VALUE`/`MIN_VALUE`).
    #[error("floating-point literal is zero or beyond the range of a Java double")]
    FloatOutOfRange,
    /// A number, string or negation where a boolean is required: the whole filter, an operand
    /// of AND/OR, or the operand of NOT (Java: `SelectorParser.asBooleanExpression`).
    #[error("expression does not result in a boolean value")]
    NotBoolean,
    /// `NULL` as an operand of `=` or `<>` (Java: `ComparisonExpression.checkEqualOperand`).
    #[error("NULL cannot be compared with = or <>; use IS NULL")]
    NullComparedForEquality,
    /// `TRUE`/`FALSE` compared with a number or string literal
    /// (Java: `ComparisonExpression.checkEqualOperandCompatability`).
    #[error("a boolean literal cannot be compared with a number or string literal")]
    BooleanComparedWithNonBoolean,
    /// A string, boolean or NULL literal, or a boolean expression, as an operand of `<`, `<=`,
    /// `>`, `>=` or BETWEEN (Java: `ComparisonExpression.checkLessThanOperand`).
    #[error("only numbers and properties can be ordered with <, <=, >, >= or BETWEEN")]
    NotOrderable,
    /// `BETWEEN NULL AND ...` (Java: `ComparisonExpression.createBetween`).
    #[error("BETWEEN bounds cannot be NULL")]
    BetweenNullBound,
    /// `BETWEEN` with literal bounds whose upper bound is below the lower one
    /// (Java: `ComparisonExpression.createBetween`).
    #[error("BETWEEN upper bound is less than its lower bound")]
    BetweenBoundsReversed,
    /// `BETWEEN` with literal bounds that cannot be compared with each other
    /// (Java: the comparison in `ComparisonExpression.createBetween` throws).
    #[error("BETWEEN bounds cannot be compared with each other")]
    BetweenBoundsIncomparable,
    /// The left side of `IN` is not a property (Java: `ComparisonExpression.createInFilter`).
    #[error("the left side of IN must be a property")]
    InRequiresProperty,
    /// Parentheses or unary operators nested deeper than
    /// [`MAX_NESTING`](crate::MAX_NESTING), or a tree deeper than
    /// [`MAX_DEPTH`](crate::MAX_DEPTH). Java has no explicit limit; it fails with a
    /// `StackOverflowError` somewhere beyond.
    #[error("expression is nested too deeply")]
    TooDeep,
}

/// Why evaluating an expression against a message failed.
///
/// Java throws from `Expression#evaluate` in these cases; the broker logs the exception and
/// treats the message as not matching, which is what [`Expression::matches`] does.
///
/// [`Expression::matches`]: crate::Expression::matches
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A string (a property value) compared with a number could not be read as that number's
    /// Java type (Java: `NumberFormatException` from `Integer.valueOf`, `Long.valueOf` or
    /// `Double.valueOf` in `ComparisonExpression`).
    #[error("a value compared with a number is not a valid Java {target}")]
    NumberFormat {
        /// The Java type the string was read as: "int", "long" or "double".
        target: &'static str,
    },
    /// A boolean on the left of `=` compared with a string on the right. Java's
    /// `ComparisonExpression` casts the boolean to `String` here and fails with a
    /// `ClassCastException`; the reverse order compares fine.
    #[error("a boolean on the left of = cannot be compared with a string")]
    BooleanComparedWithString,
}

/// Why a [`BloomFilter`](crate::BloomFilter) could not be built or used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BloomFilterError {
    /// The error rate must be at least 1 % and below 100 % (Java: `BloomFilter` constructor).
    #[error("bloom filter error rate must be in 1..=99 percent, got {error_rate_percent}")]
    ErrorRateOutOfRange {
        /// The rejected rate.
        error_rate_percent: i32,
    },
    /// The expected number of members must be positive (Java: `BloomFilter` constructor).
    #[error("bloom filter expected member count must be positive, got {expected_n}")]
    ExpectedCountTooSmall {
        /// The rejected count.
        expected_n: i32,
    },
    /// A bitmap whose length does not match the filter's `m` bits.
    #[error("bitmap has {actual_bytes} bytes, the bloom filter needs {expected_bytes}")]
    BitmapLength {
        /// Bytes the filter needs.
        expected_bytes: usize,
        /// Bytes supplied.
        actual_bytes: usize,
    },
    /// A set of bit positions that did not come from this filter: wrong count or out of range
    /// (Java: `BloomFilter.isValid` and `BitsArray.checkBitPosition`).
    #[error("bit positions do not belong to this bloom filter")]
    ForeignPositions,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_counts_lines_and_characters() {
        let text = "a = 1\r\nAND b = 'é'\rOR\n#";
        assert_eq!(Position::locate(text, 0), Position { offset: 0, line: 1, column: 1 });
        assert_eq!(Position::locate(text, 4), Position { offset: 4, line: 1, column: 5 });
        let b = text.find('b').unwrap();
        assert_eq!(Position::locate(text, b), Position { offset: b, line: 2, column: 5 });
        let after_e = text.find('é').unwrap() + 'é'.len_utf8();
        assert_eq!(Position::locate(text, after_e).column, 11);
        let or = text.find("OR").unwrap();
        assert_eq!(Position::locate(text, or), Position { offset: or, line: 3, column: 1 });
        let hash = text.len() - 1;
        assert_eq!(Position::locate(text, hash), Position { offset: hash, line: 4, column: 1 });
    }

    #[test]
    fn position_clamps_offsets_inside_characters_and_past_the_end() {
        assert_eq!(Position::locate("é", 1).offset, 0);
        assert_eq!(Position::locate("ab", 9), Position { offset: 2, line: 1, column: 3 });
    }
}
