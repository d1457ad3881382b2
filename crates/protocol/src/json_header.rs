//! The JSON header (serialize type 0) decoder.
//!
//! Every request and response carries one, so it is read by a parser written for this one
//! object shape rather than a general deserializer: known fields are matched as they come,
//! extFields values go straight into [`ExtFields`] (a string without escapes is copied once,
//! with no intermediate value), and anything else is checked and skipped. The grammar is
//! JSON's (RFC 8259): strings must be valid UTF-8 without raw control characters, escapes and
//! surrogate pairs are checked, numbers follow JSON's syntax, nothing may follow the object.
//!
//! Leniency, as Java's fastjson and the other clients need: extFields values may be numbers or
//! booleans (kept as their text; a number in its shortest form, as `i64`/`u64`/`f64` print
//! it) and null values are dropped; `language` may be a name or a numeric code; a repeated
//! field keeps its last value; unknown fields are ignored.

use std::borrow::Cow;

use crate::command::{ExtFields, LanguageCode, RemotingCommand};
use crate::ext_fields::intern_key;
use crate::frame::FrameError;

/// Nesting allowed inside unknown fields (serde_json's default recursion limit).
const MAX_DEPTH: usize = 128;

/// Bytes that end a plain run inside a string: the closing quote, a backslash and the control
/// characters JSON forbids there.
static STRING_SPECIAL: [bool; 256] = {
    let mut table = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        table[c] = true;
        c += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// Bytes up to the closing quote of a string whose content starts `rest` (escaped pairs
/// skipped), or all of `rest` when unterminated.
fn escaped_len(rest: &[u8]) -> usize {
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            b'"' => return i,
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    rest.len()
}

/// Decodes a JSON header; the body is left empty.
pub(crate) fn decode_json(bytes: &[u8]) -> Result<RemotingCommand, FrameError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| FrameError::JsonHeader { offset: e.valid_up_to(), reason: "invalid UTF-8" })?;
    let mut p = Parser { b: bytes, s: text, pos: 0 };
    let mut cmd = RemotingCommand {
        code: 0,
        // Java's default when the field is absent.
        language: LanguageCode::Java,
        version: 0,
        opaque: 0,
        flag: 0,
        remark: None,
        ext_fields: ExtFields::new(),
        body: bytes::Bytes::new(),
        body_tail: Vec::new(),
    };
    p.expect(b'{', "expected an object")?;
    if p.peek() == Some(b'}') {
        p.pos += 1;
    } else {
        loop {
            let key = p.string()?;
            p.expect(b':', "expected ':' after a field name")?;
            match key.as_ref() {
                "code" => cmd.code = p.int()?,
                "flag" => cmd.flag = p.int()?,
                "opaque" => cmd.opaque = p.int()?,
                "version" => cmd.version = p.int()?,
                "language" => {
                    cmd.language = match p.scalar()? {
                        None => LanguageCode::Other,
                        Some(s) => match s.parse::<u8>() {
                            Ok(code) => LanguageCode::from_code(code),
                            Err(_) => LanguageCode::from_name(&s),
                        },
                    }
                }
                "remark" => cmd.remark = p.string_or_null()?.map(Cow::into_owned),
                "extFields" => cmd.ext_fields = p.ext_fields()?,
                _ => p.skip(0)?,
            }
            if p.next_member(b'}')? {
                break;
            }
        }
    }
    p.ws();
    if p.pos != bytes.len() {
        return Err(p.err("trailing characters after the header object"));
    }
    Ok(cmd)
}

struct Parser<'a> {
    b: &'a [u8],
    /// `b` as text, validated once: a string or number between ASCII delimiters is a slice of
    /// it, with no validation of its own.
    s: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, reason: &'static str) -> FrameError {
        FrameError::JsonHeader { offset: self.pos, reason }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.pos) {
            self.pos += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.pos).copied()
    }

    fn expect(&mut self, c: u8, reason: &'static str) -> Result<(), FrameError> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(reason))
        }
    }

    /// After a member or element: `true` at the closing `close`, `false` after a comma.
    fn next_member(&mut self, close: u8) -> Result<bool, FrameError> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(false)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(true)
            }
            _ => Err(self.err(if close == b'}' { "expected ',' or '}'" } else { "expected ',' or ']'" })),
        }
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<(), FrameError> {
        if self.b[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.err("invalid literal"))
        }
    }

    /// A string literal; borrowed from the input unless it has escapes.
    fn string(&mut self) -> Result<Cow<'a, str>, FrameError> {
        self.expect(b'"', "expected a string")?;
        let start = self.pos;
        self.scan_plain();
        match self.b.get(self.pos) {
            None => return Err(self.err("unterminated string")),
            Some(b'"') => {
                // Both ends are ASCII quotes, hence character boundaries.
                let s = self.s.get(start..self.pos).ok_or_else(|| self.err("invalid UTF-8"))?;
                self.pos += 1;
                return Ok(Cow::Borrowed(s));
            }
            Some(b'\\') => {}
            Some(_) => return Err(self.err("control character in a string")),
        }
        // Sized once for the whole string (its escaped length bounds the unescaped one): a
        // properties value has an escape per separator, and growing by segment reallocated
        // several times.
        let mut out = String::with_capacity(escaped_len(&self.b[start..]));
        self.pos = start;
        self.string_rest_into(&mut out)?;
        Ok(Cow::Owned(out))
    }

    /// A string literal, unescaped, appended to `out`: an extFields value goes straight into
    /// the map's text, escaped or not, with no string of its own.
    fn string_into(&mut self, out: &mut String) -> Result<(), FrameError> {
        self.expect(b'"', "expected a string")?;
        self.string_rest_into(out)
    }

    /// The rest of a string literal whose opening quote is behind `pos`, up to and past its
    /// closing quote, unescaped into `out`.
    fn string_rest_into(&mut self, out: &mut String) -> Result<(), FrameError> {
        loop {
            let from = self.pos;
            self.scan_plain();
            // A run starts after a quote or an escape and stops at an ASCII byte: both ends are
            // character boundaries of the text validated once.
            out.push_str(self.s.get(from..self.pos).ok_or_else(|| self.err("invalid UTF-8"))?);
            match self.b.get(self.pos) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let c = self.escape()?;
                    out.push(c);
                }
                Some(_) => return Err(self.err("control character in a string")),
            }
        }
    }

    /// The character an escape stands for, its backslash behind `pos`.
    fn escape(&mut self) -> Result<char, FrameError> {
        let c = match self.b.get(self.pos) {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                return self.unicode_escape();
            }
            _ => return Err(self.err("invalid escape")),
        };
        self.pos += 1;
        Ok(c)
    }

    /// Moves past bytes that need no attention inside a string (one table lookup each).
    fn scan_plain(&mut self) {
        let rest = &self.b[self.pos..];
        self.pos += rest.iter().position(|&c| STRING_SPECIAL[usize::from(c)]).unwrap_or(rest.len());
    }

    /// The character of a `\u` escape whose 4 hex digits start at `pos` (a surrogate pair
    /// takes a second escape).
    fn unicode_escape(&mut self) -> Result<char, FrameError> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if !self.b[self.pos..].starts_with(b"\\u") {
                    return Err(self.err("lone leading surrogate"));
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(self.err("invalid trailing surrogate"));
                }
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.err("lone trailing surrogate")),
            c => c,
        };
        char::from_u32(code).ok_or_else(|| self.err("invalid unicode escape"))
    }

    fn hex4(&mut self) -> Result<u32, FrameError> {
        let digits = self.b.get(self.pos..self.pos + 4).ok_or_else(|| self.err("truncated unicode escape"))?;
        let mut v = 0;
        for &d in digits {
            let n = (d as char).to_digit(16).ok_or_else(|| self.err("invalid unicode escape"))?;
            v = v * 16 + n;
        }
        self.pos += 4;
        Ok(v)
    }

    /// A number literal's text, checked against JSON's number grammar.
    fn number(&mut self) -> Result<&'a str, FrameError> {
        self.ws();
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while let Some(b'0'..=b'9') = p.b.get(p.pos) {
                p.pos += 1;
            }
            p.pos > from
        };
        if self.b.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        match self.b.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.err("invalid number")),
        }
        if self.b.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if !digits(self) {
                return Err(self.err("invalid number"));
            }
        }
        if let Some(b'e' | b'E') = self.b.get(self.pos) {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.b.get(self.pos) {
                self.pos += 1;
            }
            if !digits(self) {
                return Err(self.err("invalid number"));
            }
        }
        // Only ASCII digits and signs were consumed.
        self.s.get(start..self.pos).ok_or_else(|| self.err("invalid number"))
    }

    /// A 32-bit integer field. `-0` is a float in JSON readers (serde_json, fastjson), so it
    /// is refused like other floats.
    fn int(&mut self) -> Result<i32, FrameError> {
        let start = self.pos;
        let text = self.number()?;
        text.parse()
            .ok()
            .filter(|_| text != "-0")
            .ok_or(FrameError::JsonHeader { offset: start, reason: "expected a 32-bit integer" })
    }

    fn string_or_null(&mut self) -> Result<Option<Cow<'a, str>>, FrameError> {
        if self.peek() == Some(b'n') {
            self.literal(b"null")?;
            return Ok(None);
        }
        self.string().map(Some)
    }

    /// A string, number or boolean as text; `None` for null.
    fn scalar(&mut self) -> Result<Option<Cow<'a, str>>, FrameError> {
        match self.peek() {
            Some(b'"') => self.string().map(Some),
            Some(b'n') => self.literal(b"null").map(|()| None),
            Some(b't') => self.literal(b"true").map(|()| Some(Cow::Borrowed("true"))),
            Some(b'f') => self.literal(b"false").map(|()| Some(Cow::Borrowed("false"))),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.pos;
                let text = self.number()?;
                let value = canonical_number(text)
                    .ok_or(FrameError::JsonHeader { offset: start, reason: "number out of range" })?;
                Ok(Some(Cow::Owned(value)))
            }
            _ => Err(self.err("expected a string, number, boolean or null")),
        }
    }

    fn ext_fields(&mut self) -> Result<ExtFields, FrameError> {
        match self.peek() {
            Some(b'n') => {
                self.literal(b"null")?;
                return Ok(ExtFields::new());
            }
            Some(b'{') => self.pos += 1,
            _ => return Err(self.err("extFields must be an object or null")),
        }
        let mut fields = ExtFields::with_capacity(16);
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(fields);
        }
        loop {
            let key = self.string()?;
            self.expect(b':', "expected ':' after a field name")?;
            if self.peek() == Some(b'"') {
                fields.try_insert_with(intern_key(&key), |text| self.string_into(text))?;
            } else if let Some(value) = self.scalar()? {
                fields.insert(intern_key(&key), &value);
            }
            if self.next_member(b'}')? {
                return Ok(fields);
            }
        }
    }

    /// Checks and skips any value.
    fn skip(&mut self, depth: usize) -> Result<(), FrameError> {
        if depth >= MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    self.string()?;
                    self.expect(b':', "expected ':' after a field name")?;
                    self.skip(depth + 1)?;
                    if self.next_member(b'}')? {
                        return Ok(());
                    }
                }
            }
            Some(b'[') => {
                self.pos += 1;
                if self.peek() == Some(b']') {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    self.skip(depth + 1)?;
                    if self.next_member(b']')? {
                        return Ok(());
                    }
                }
            }
            // Only the syntax of a skipped number matters, not its range.
            Some(b'-' | b'0'..=b'9') => self.number().map(drop),
            _ => self.scalar().map(drop),
        }
    }
}

/// A number's text as the value it denotes prints: integers as `i64`/`u64`, anything else
/// (fractions, exponents, integers past 64 bits) as `f64`; `None` past `f64`'s range.
fn canonical_number(text: &str) -> Option<String> {
    if text == "-0" {
        // A float: negative zero.
        return Some((-0.0f64).to_string());
    }
    if let Ok(i) = text.parse::<i64>() {
        return Some(i.to_string());
    }
    if let Ok(u) = text.parse::<u64>() {
        return Some(u.to_string());
    }
    text.parse::<f64>().ok().filter(|f| f.is_finite()).map(|f| f.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(json: &str) -> RemotingCommand {
        decode_json(json.as_bytes()).unwrap_or_else(|e| panic!("{json}: {e}"))
    }

    fn bad(json: &[u8]) -> &'static str {
        match decode_json(json) {
            Err(FrameError::JsonHeader { reason, .. }) => reason,
            other => panic!("{}: expected a JSON header error, got {other:?}", String::from_utf8_lossy(json)),
        }
    }

    #[test]
    fn reads_a_java_request_header() {
        let cmd = ok(
            r#"{"code":310,"extFields":{"a":"PG","b":"TopicTest","e":"3","i":"UNIQ_KEY\u00017F00\u0002WAIT\u0001true\u0002","m":false,"n":null},"flag":0,"language":"JAVA","opaque":57,"serializeTypeCurrentRPC":"JSON","version":453}"#,
        );
        assert_eq!((cmd.code, cmd.flag, cmd.opaque, cmd.version), (310, 0, 57, 453));
        assert_eq!(cmd.language, LanguageCode::Java);
        assert_eq!(cmd.remark, None);
        assert_eq!(cmd.ext_fields.get("b"), Some("TopicTest"));
        assert_eq!(cmd.ext_fields.get("i"), Some("UNIQ_KEY\u{1}7F00\u{2}WAIT\u{1}true\u{2}"));
        assert_eq!(cmd.ext_fields.get("m"), Some("false"), "booleans kept as text");
        assert!(!cmd.ext_fields.contains_key("n"), "nulls dropped");
    }

    #[test]
    fn lenient_where_clients_differ() {
        let cmd = ok(" {\n\"language\" : 8 , \"remark\":\"a\\\"b\\\\c\\/d\\n\\u00e9\\ud83d\\ude00\", \"unknown\":{\"x\":[1,2.5e3,{\"y\":null}],\"z\":true},\"extFields\":{\"q\":-12,\"big\":18446744073709551615,\"f\":1.50,\"e\":1e2},\"code\":1,\"code\":2} ");
        assert_eq!(cmd.language, LanguageCode::from_code(8));
        assert_eq!(cmd.remark.as_deref(), Some("a\"b\\c/d\né😀"));
        assert_eq!(cmd.code, 2, "a repeated field keeps its last value");
        let get = |k: &str| cmd.ext_fields.get(k);
        assert_eq!(
            (get("q"), get("big"), get("f"), get("e")),
            (Some("-12"), Some("18446744073709551615"), Some("1.5"), Some("100"))
        );
        assert_eq!(ok(r#"{"extFields":null,"language":null,"remark":null}"#).ext_fields.len(), 0);
        assert_eq!(ok(r#"{"language":null}"#).language, LanguageCode::Other);
        assert_eq!(ok("{}").code, 0);
        assert_eq!(ok("{}").language, LanguageCode::Java, "Java's default for a header without one");
    }

    #[test]
    fn rejects_what_json_does_not_allow() {
        assert_eq!(bad(b""), "expected an object");
        assert_eq!(bad(b"[]"), "expected an object");
        assert_eq!(bad(b"{\"code\":1"), "expected ',' or '}'");
        assert_eq!(bad(b"{\"code\":1,}"), "expected a string");
        assert_eq!(bad(b"{\"code\":1} x"), "trailing characters after the header object");
        assert_eq!(bad(b"{\"code\":1.5}"), "expected a 32-bit integer");
        assert_eq!(bad(b"{\"code\":-0}"), "expected a 32-bit integer");
        assert_eq!(bad(b"{\"code\":2147483648}"), "expected a 32-bit integer");
        assert_eq!(bad(b"{\"code\":\"1\"}"), "invalid number");
        assert_eq!(bad(b"{\"code\":01}"), "expected ',' or '}'");
        assert_eq!(bad(b"{\"code\":-}"), "invalid number");
        assert_eq!(bad(b"{\"code\":1.}"), "invalid number");
        assert_eq!(bad(b"{\"remark\":\"a\nb\"}"), "control character in a string");
        assert_eq!(bad(b"{\"remark\":\"\xff\"}"), "invalid UTF-8");
        assert_eq!(bad(b"{\"remark\":\"\\x\"}"), "invalid escape");
        assert_eq!(bad(b"{\"remark\":\"\\ud800\"}"), "lone leading surrogate");
        assert_eq!(bad(b"{\"remark\":\"\\udc00\"}"), "lone trailing surrogate");
        assert_eq!(bad(b"{\"remark\":\"\\u12"), "truncated unicode escape");
        assert_eq!(bad(b"{\"remark\":\"\\u12x4\"}"), "invalid unicode escape");
        assert_eq!(bad(b"{\"remark\":\"abc"), "unterminated string");
        assert_eq!(bad(b"{\"remark\":7}"), "expected a string");
        assert_eq!(bad(b"{\"extFields\":[]}"), "extFields must be an object or null");
        assert_eq!(bad(b"{\"extFields\":{\"a\":{}}}"), "expected a string, number, boolean or null");
        assert_eq!(bad(b"{\"x\":tru}"), "invalid literal");
        assert_eq!(bad(b"{\"extFields\":{\"a\":1e400}}"), "number out of range");
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert_eq!(bad(deep.as_bytes()), "nesting too deep");
    }
}
