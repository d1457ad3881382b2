//! The error type shared by the JSON bodies, the lenient JSON reader, the compressed
//! RegisterBrokerBody codec and the `.properties` text reader.
//!
//! It does not map anything to RocketMQ response codes; processors do that.

use std::num::ParseIntError;
use std::str::Utf8Error;

/// Why a body, a compressed register-broker stream or a properties text could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
    /// The bytes are not JSON of the expected shape, even after quoting fastjson's bare
    /// integer keys.
    #[error("invalid JSON for {target}")]
    Json {
        /// Rust type name of the value being decoded.
        target: &'static str,
        /// The serde_json failure, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// A text section inside a compressed body is not UTF-8.
    #[error("{section} is not valid UTF-8")]
    Utf8 {
        /// Which part of the body.
        section: &'static str,
        /// Where the bad bytes start.
        #[source]
        source: Utf8Error,
    },
    /// The zlib stream of a compressed body is corrupt.
    #[error("compressed body is not a valid zlib stream")]
    Inflate {
        /// The decompressor's complaint.
        #[source]
        source: std::io::Error,
    },
    /// The zlib stream inflates to more than the allowed size (a zip bomb or a broken peer).
    #[error("compressed body inflates to more than {limit_bytes} bytes")]
    InflatedTooLarge {
        /// The bound that was exceeded.
        limit_bytes: usize,
    },
    /// The inflated stream ends inside a field.
    #[error("compressed body truncated in {section}: need {needed} bytes at offset {offset}, {available} left")]
    Truncated {
        /// Which field was being read.
        section: &'static str,
        /// Offset of the field in the inflated stream.
        offset: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the stream.
        available: usize,
    },
    /// A length or count field is negative.
    #[error("negative {section} {value} in compressed body")]
    NegativeLength {
        /// Which length or count.
        section: &'static str,
        /// The value read.
        value: i32,
    },
    /// A TopicConfig text line has fewer than five space-separated fields.
    #[error("topic config text {text:?} has {fields} fields, expected at least 5")]
    TopicConfigFields {
        /// The offending text.
        text: String,
        /// How many fields it has.
        fields: usize,
    },
    /// A numeric field of a TopicConfig text line is not a 32-bit integer.
    #[error("topic config text {text:?}: {field} is not an integer")]
    TopicConfigNumber {
        /// The offending text.
        text: String,
        /// Which field (`readQueueNums`, `writeQueueNums`, `perm`).
        field: &'static str,
        /// The integer parse failure.
        #[source]
        source: ParseIntError,
    },
    /// A TopicConfig text line names a filter type other than `SINGLE_TAG` / `MULTI_TAG`.
    #[error("unknown topic filter type {value:?}")]
    UnknownTopicFilterType {
        /// The name found.
        value: String,
    },
    /// A queue-mapping JSON in a compressed body has no string `topic` field.
    #[error("queue mapping #{index} in compressed body has no topic")]
    MappingWithoutTopic {
        /// Position of the mapping in the stream, from 0.
        index: usize,
    },
    /// A static topic's queue mapping whose item lists break the mapping rules.
    #[error("invalid queue mapping: {0}")]
    InvalidMapping(String),
    /// A `\uXXXX` escape in properties text is not followed by four hex digits.
    #[error("malformed \\uXXXX escape in properties text on line {line}")]
    PropertiesUnicodeEscape {
        /// 1-based line where the logical line containing the escape starts.
        line: usize,
    },
}
