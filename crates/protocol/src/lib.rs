//! RocketMQ's wire and record formats as plain values.
//!
//! This crate owns the remoting frame (`RemotingCommand`), request and response codes, the typed
//! request/response headers carried in `extFields`, the JSON bodies, Java-properties text, and the
//! stored message record that the CommitLog holds and pull responses carry unchanged.
//! It deliberately does no I/O: no sockets, no files, no async runtime.

pub mod body;
pub mod civil_date;
pub mod code;
pub mod command;
pub mod decimal;
pub mod ext_fields;
pub mod frame;
pub mod header;
pub mod json;
pub mod message;
pub mod pop;
pub mod properties_text;
pub mod signature;
pub mod topic_validator;
pub mod trace;
pub mod trace_view;
pub mod version;

mod header_codec;
mod json_header;
mod shared_text;

pub use code::{request_code, response_code};
pub use command::{ExtFields, LanguageCode, RemotingCommand, SerializeType, FLAG_ONEWAY, FLAG_RESPONSE};
pub use frame::{decode_frame, encode_frame, encode_frame_head, FrameError, MAX_FRAME_BYTES};
pub use header::{CommandHeader, HeaderError};
