//! `RemotingCommand`: the one message shape of RocketMQ's remoting protocol.
//!
//! A command is a request or a response (flag bit 0), optionally oneway (flag bit 1), with a
//! code, a correlation id (`opaque`), a remark, the string map `extFields` that carries every
//! typed header, and an opaque body. Byte layout lives in `frame` and `header_codec`; this module
//! is only the value and its constructors. Java: `RemotingCommand`.

use bytes::Bytes;

use crate::header::{CommandHeader, HeaderError};
use crate::version;

pub use crate::ext_fields::ExtFields;

/// Flag bit 0: the command is a response.
pub const FLAG_RESPONSE: i32 = 1;
/// Flag bit 1: the request expects no response.
pub const FLAG_ONEWAY: i32 = 1 << 1;

/// How a header is serialized; the high byte of the header-length word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SerializeType {
    /// Type 0: the header is a JSON object. Java's default.
    #[default]
    Json,
    /// Type 1: the compact binary layout (Java: `RocketMQSerializable`).
    RocketMq,
}

impl SerializeType {
    /// The wire code of this serialization.
    pub fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    /// The serialization for a wire code, if known.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }

    /// The name RocketMQ uses in configuration (`JSON` / `ROCKETMQ`).
    pub fn name(self) -> &'static str {
        match self {
            SerializeType::Json => "JSON",
            SerializeType::RocketMq => "ROCKETMQ",
        }
    }

    /// Parses a configuration name, case-insensitively.
    pub fn from_name(name: &str) -> Option<Self> {
        if name.eq_ignore_ascii_case("JSON") {
            Some(SerializeType::Json)
        } else if name.eq_ignore_ascii_case("ROCKETMQ") {
            Some(SerializeType::RocketMq)
        } else {
            None
        }
    }
}

macro_rules! language_codes {
    ($($variant:ident = $code:literal => $name:literal,)*) => {
        /// The sender's implementation language (Java: `LanguageCode`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum LanguageCode {
            $(
                #[allow(missing_docs)]
                $variant,
            )*
        }

        impl LanguageCode {
            /// The one-byte code used by the binary header.
            pub fn code(self) -> u8 {
                match self { $(LanguageCode::$variant => $code,)* }
            }

            /// The language for a binary code. Unknown codes read as `Other`: the language is
            /// informational and must never make a request fail.
            pub fn from_code(code: u8) -> Self {
                match code { $($code => LanguageCode::$variant,)* _ => LanguageCode::Other }
            }

            /// The enum name used by the JSON header, e.g. `"JAVA"`.
            pub fn name(self) -> &'static str {
                match self { $(LanguageCode::$variant => $name,)* }
            }

            /// The language for a JSON name; unknown names read as `Other`.
            pub fn from_name(name: &str) -> Self {
                match name { $($name => LanguageCode::$variant,)* _ => LanguageCode::Other }
            }
        }
    };
}

language_codes! {
    Java = 0 => "JAVA",
    Cpp = 1 => "CPP",
    DotNet = 2 => "DOTNET",
    Python = 3 => "PYTHON",
    Delphi = 4 => "DELPHI",
    Erlang = 5 => "ERLANG",
    Ruby = 6 => "RUBY",
    Other = 7 => "OTHER",
    Http = 8 => "HTTP",
    Go = 9 => "GO",
    Php = 10 => "PHP",
    Oms = 11 => "OMS",
    Rust = 12 => "RUST",
    NodeJs = 13 => "NODE_JS",
}

/// One remoting command, request or response.
#[derive(Debug, Clone, PartialEq)]
pub struct RemotingCommand {
    /// Request code for requests, response code for responses.
    pub code: i32,
    /// Sender's language.
    pub language: LanguageCode,
    /// Sender's `MQVersion` ordinal (see [`crate::version`]).
    pub version: i32,
    /// Correlation id; a response copies its request's.
    pub opaque: i32,
    /// Bit field: [`FLAG_RESPONSE`], [`FLAG_ONEWAY`].
    pub flag: i32,
    /// Error text or status name. `None` and empty are the same on the binary wire.
    pub remark: Option<String>,
    /// Typed header fields as strings, keyed by Java field name.
    pub ext_fields: ExtFields,
    /// Payload; may be empty. With [`Self::body_tail`], its first part.
    pub body: Bytes,
    /// The rest of the payload, after `body`, as buffers that already exist elsewhere: a pull
    /// answers with the stored messages as slices of the mapped CommitLog, and the connection
    /// writes them with vectored writes instead of copying them into one buffer. Empty for
    /// nearly every command (a decoded frame never has one); whoever reads a body that may
    /// have a tail uses [`Self::body_len`]; encoding the frame writes the tail after `body`.
    pub body_tail: Vec<Bytes>,
}

impl RemotingCommand {
    fn new(code: i32, language: LanguageCode) -> Self {
        RemotingCommand {
            code,
            language,
            version: version::CURRENT,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: ExtFields::new(),
            body: Bytes::new(),
            body_tail: Vec::new(),
        }
    }

    /// A request with `code`, sent as a Rust client.
    pub fn request(code: i32) -> Self {
        Self::new(code, LanguageCode::Rust)
    }

    /// A response with `code` and an optional remark. Servers answer as `JAVA`, as the Java
    /// servers do, because some clients branch on the peer's language.
    pub fn response(code: i32, remark: impl Into<Option<String>>) -> Self {
        let mut cmd = Self::new(code, LanguageCode::Java);
        cmd.flag = FLAG_RESPONSE;
        cmd.remark = remark.into();
        cmd
    }

    /// A response with `code` and `remark` correlated to `request`.
    pub fn response_to(request: &RemotingCommand, code: i32, remark: impl Into<Option<String>>) -> Self {
        let mut cmd = Self::response(code, remark);
        cmd.opaque = request.opaque;
        cmd
    }

    /// Sets the typed header, replacing any extFields it names.
    pub fn with_header<H: CommandHeader>(mut self, header: &H) -> Self {
        header.write_ext_fields(&mut self.ext_fields);
        self
    }

    /// Sets the body.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets the body as `parts`, written one after another without being copied into one
    /// buffer (see [`Self::body_tail`]).
    pub fn with_body_parts(mut self, mut parts: Vec<Bytes>) -> Self {
        if parts.is_empty() {
            self.body = Bytes::new();
        } else {
            self.body = parts.remove(0);
        }
        self.body_tail = parts;
        self
    }

    /// The payload's length, tail included.
    pub fn body_len(&self) -> usize {
        self.body.len() + self.body_tail.iter().map(Bytes::len).sum::<usize>()
    }

    /// Sets the correlation id.
    pub fn with_opaque(mut self, opaque: i32) -> Self {
        self.opaque = opaque;
        self
    }

    /// Marks the request oneway: the peer sends no response.
    pub fn into_oneway(mut self) -> Self {
        self.flag |= FLAG_ONEWAY;
        self
    }

    /// Reads the typed header from `extFields`.
    ///
    /// # Errors
    /// [`HeaderError`] naming the missing or malformed field.
    pub fn decode_header<H: CommandHeader>(&self) -> Result<H, HeaderError> {
        H::read_ext_fields(&self.ext_fields)
    }

    /// Whether this is a response.
    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// Whether this is a oneway request.
    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// One extField by key.
    pub fn ext(&self, key: &str) -> Option<&str> {
        self.ext_fields.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_codes_round_trip_and_unknown_reads_as_other() {
        for code in 0..=13u8 {
            let lang = LanguageCode::from_code(code);
            assert_eq!(lang.code(), code);
            assert_eq!(LanguageCode::from_name(lang.name()), lang);
        }
        assert_eq!(LanguageCode::from_code(200), LanguageCode::Other);
        assert_eq!(LanguageCode::from_name("COBOL"), LanguageCode::Other);
        assert_eq!(LanguageCode::Rust.code(), 12);
        assert_eq!(LanguageCode::NodeJs.name(), "NODE_JS");
    }

    #[test]
    fn response_copies_opaque_and_sets_flag() {
        let req = RemotingCommand::request(105).with_opaque(42).into_oneway();
        assert!(req.is_oneway());
        assert!(!req.is_response());
        let resp = RemotingCommand::response_to(&req, 17, Some("x".to_string()));
        assert_eq!(resp.opaque, 42);
        assert!(resp.is_response());
        assert_eq!(resp.language, LanguageCode::Java);
    }

    #[test]
    fn a_body_in_parts_keeps_the_first_as_body_and_the_rest_in_order() {
        let parts = vec![Bytes::from_static(b"ab"), Bytes::new(), Bytes::from_static(b"cde"), Bytes::from_static(b"f")];
        let cmd = RemotingCommand::response(0, None).with_body_parts(parts);
        assert_eq!((cmd.body.as_ref(), cmd.body_tail.len(), cmd.body_len()), (&b"ab"[..], 3, 6));
        let tail: Vec<u8> = cmd.body_tail.iter().flat_map(|p| p.iter().copied()).collect();
        assert_eq!(tail, b"cdef");
        let empty = RemotingCommand::response(0, None).with_body_parts(Vec::new());
        assert_eq!((empty.body_len(), empty.body_tail.len()), (0, 0));
    }
}
