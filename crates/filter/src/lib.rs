//! RocketMQ's SQL92 message filter and the consume-queue bloom filter, as plain values.
//!
//! A consumer that subscribes with expression type `SQL92` sends a condition over message
//! properties, such as `region = 'eu' AND level >= 3`. The broker compiles it once with
//! [`parse`] and then asks [`Expression::matches`] for every candidate message. With
//! `enableCalcFilterBitMap`, it also evaluates subscriptions at dispatch time and records the
//! result in a [`BloomFilter`] bitmap, so pulls can skip messages without reading them.
//!
//! Everything here behaves like Java RocketMQ's `filter` module, quirks included (see
//! [`parse`] and [`Expression::evaluate`]); each item names its Java counterpart.
//!
//! Module map:
//!
//! - `lexer`: tokens of the filter language (Java: the JavaCC token rules of
//!   `SelectorParser.jj`).
//! - `parser`: the grammar and the checks Java makes while building the tree; [`parse`].
//! - `expression`: the tree, evaluation with SQL three-valued logic, and printing;
//!   [`Expression`], [`Truth`], [`Properties`].
//! - `value`: evaluated values and Java's comparison rules between them
//!   (Java: `ComparisonExpression`).
//! - `java_number`: Java's `Integer`/`Long`/`Double`/`Boolean.valueOf` on property strings.
//! - `bloom`: [`BloomFilter`] sizing, bit positions and bitmap helpers
//!   (Java: `BloomFilter`, `BitsArray`).
//! - `murmur3`: MurmurHash3 x64 128, the hash behind the bloom filter (Java: Guava).
//! - `error`: [`FilterError`], [`EvalError`], [`BloomFilterError`].
//!
//! Deliberately not here: tag filtering (a hash-code set, kept in the broker), the
//! subscription bookkeeping (`ConsumerFilterManager`), and storage of bitmaps. The crate does
//! no I/O and has no async code.

mod bloom;
mod error;
mod expression;
mod java_number;
mod lexer;
mod murmur3;
mod parser;
mod value;

pub use bloom::{set_bit, test_bit, BloomFilter};
pub use error::{BloomFilterError, EvalError, FilterError, ParseErrorKind, Position};
pub use expression::{properties_fn, Expression, Properties, PropertiesFn, Truth};
pub use parser::{parse, MAX_DEPTH, MAX_NESTING};
