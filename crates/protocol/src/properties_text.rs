//! Java `.properties` text: broker and name-server config files and the bodies of
//! UPDATE_NAMESRV_CONFIG, GET_NAMESRV_CONFIG, UPDATE_BROKER_CONFIG and GET_BROKER_CONFIG.
//! Java: `java.util.Properties#load` (via `MixAll.string2Properties`) and
//! `MixAll.properties2String`.
//!
//! Reading follows Java's rules: `#`/`!` comment lines, `key=value`, `key: value` and
//! `key value`, whitespace around the separator and at line start skipped, trailing
//! whitespace of a value kept, odd trailing backslash continues the line, and `\t \n \r \f
//! \\ \uXXXX` escapes. Writing gives `key=value` lines, escaping only what Java's reader
//! would otherwise change. Mapping keys onto config structs is not done here.

use std::collections::BTreeMap;

use crate::body::BodyError;

/// The whitespace Java's properties reader skips: space, tab, form feed.
const WHITESPACE: [char; 3] = [' ', '\t', '\u{c}'];

/// Parses properties text into `(key, value)` pairs in file order. A key may repeat; Java
/// keeps the last value (see [`parse_map`]).
///
/// Java's `string2Properties` reads the text as ISO-8859-1 bytes; here it is already Unicode,
/// so non-ASCII characters come through whether or not they are `\u`-escaped.
///
/// # Errors
///
/// [`BodyError::PropertiesUnicodeEscape`] when `\u` is not followed by four hex digits
/// (Java rejects the whole text then too).
pub fn parse(text: &str) -> Result<Vec<(String, String)>, BodyError> {
    let mut entries = Vec::new();
    let mut logical = String::new();
    let mut logical_start_line = 0;
    let mut continuing = false;
    for (index, natural) in natural_lines(text).enumerate() {
        let stripped = natural.trim_start_matches(WHITESPACE);
        if !continuing {
            if stripped.is_empty() || stripped.starts_with(['#', '!']) {
                continue;
            }
            logical.clear();
            logical_start_line = index + 1;
        }
        let trailing_backslashes = stripped.bytes().rev().take_while(|&b| b == b'\\').count();
        continuing = trailing_backslashes % 2 == 1;
        if continuing {
            logical.push_str(&stripped[..stripped.len() - 1]);
        } else {
            logical.push_str(stripped);
            if !logical.is_empty() {
                entries.push(split_entry(&logical, logical_start_line)?);
            }
        }
    }
    if continuing && !logical.is_empty() {
        entries.push(split_entry(&logical, logical_start_line)?);
    }
    Ok(entries)
}

/// Parses properties text into a map; a repeated key keeps its last value, as in Java.
///
/// # Errors
///
/// As [`parse`].
pub fn parse_map(text: &str) -> Result<BTreeMap<String, String>, BodyError> {
    Ok(parse(text)?.into_iter().collect())
}

/// Writes `key=value\n` lines in the given order, like Java's `MixAll.properties2String`.
///
/// Unlike Java, which writes raw text, characters that Java's reader would alter are escaped:
/// backslash, line breaks, tab and form feed everywhere; space, `=` and `:` in keys; `#`/`!`
/// at the start of a key; a leading space in a value; and any character outside printable
/// ASCII as `\uXXXX` (Java reads these bodies as ISO-8859-1, so raw UTF-8 would arrive
/// garbled). [`parse`] gives back exactly the input pairs.
pub fn to_text<I, K, V>(entries: I) -> String
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut out = String::new();
    for (key, value) in entries {
        escape_into(key.as_ref(), true, &mut out);
        out.push('=');
        escape_into(value.as_ref(), false, &mut out);
        out.push('\n');
    }
    out
}

/// Splits on `\n`, `\r\n` or `\r`, like Java's line reader.
fn natural_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        match rest.find(['\n', '\r']) {
            Some(end) => {
                let line = &rest[..end];
                let break_len = if rest[end..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[end + break_len..];
                Some(line)
            }
            None => {
                let line = rest;
                rest = "";
                Some(line)
            }
        }
    })
}

/// Splits a logical line into unescaped key and value.
fn split_entry(line: &str, line_number: usize) -> Result<(String, String), BodyError> {
    let mut key_end = line.len();
    let mut value_start = line.len();
    let mut has_separator = false;
    let mut escaped = false;
    for (index, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => {
                (key_end, value_start, has_separator) = (index, index + 1, true);
                break;
            }
            ' ' | '\t' | '\u{c}' => {
                (key_end, value_start) = (index, index + 1);
                break;
            }
            _ => {}
        }
    }
    let mut value = line[value_start..].trim_start_matches(WHITESPACE);
    if !has_separator {
        if let Some(after) = value.strip_prefix(['=', ':']) {
            value = after.trim_start_matches(WHITESPACE);
        }
    }
    Ok((unescape(&line[..key_end], line_number)?, unescape(value, line_number)?))
}

/// Resolves backslash escapes. `\uXXXX` units are collected so surrogate pairs combine; a
/// lone surrogate becomes U+FFFD.
fn unescape(text: &str, line_number: usize) -> Result<String, BodyError> {
    if !text.contains('\\') {
        return Ok(text.to_owned());
    }
    let mut out = String::with_capacity(text.len());
    let mut units: Vec<u16> = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            flush_units(&mut units, &mut out);
            out.push(c);
            continue;
        }
        let Some(escaped) = chars.next() else {
            // A trailing lone backslash was a line continuation; nothing to add.
            break;
        };
        if escaped == 'u' {
            units.push(read_hex_unit(&mut chars, line_number)?);
            continue;
        }
        flush_units(&mut units, &mut out);
        out.push(match escaped {
            't' => '\t',
            'n' => '\n',
            'r' => '\r',
            'f' => '\u{c}',
            other => other,
        });
    }
    flush_units(&mut units, &mut out);
    Ok(out)
}

fn read_hex_unit(chars: &mut std::str::Chars<'_>, line_number: usize) -> Result<u16, BodyError> {
    let mut unit: u16 = 0;
    for _ in 0..4 {
        let digit = chars
            .next()
            .and_then(|c| c.to_digit(16))
            .ok_or(BodyError::PropertiesUnicodeEscape { line: line_number })?;
        // Four hex digits fit a u16 exactly.
        unit = (unit << 4) | digit as u16;
    }
    Ok(unit)
}

fn flush_units(units: &mut Vec<u16>, out: &mut String) {
    if units.is_empty() {
        return;
    }
    out.extend(char::decode_utf16(units.drain(..)).map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER)));
}

fn escape_into(text: &str, is_key: bool, out: &mut String) {
    for (index, c) in text.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{c}' => out.push_str("\\f"),
            ' ' if is_key || index == 0 => out.push_str("\\ "),
            '=' | ':' if is_key => {
                out.push('\\');
                out.push(c);
            }
            '#' | '!' if is_key && index == 0 => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0_u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text).unwrap()
    }

    fn p(key: &str, value: &str) -> (String, String) {
        (key.to_owned(), value.to_owned())
    }

    #[test]
    fn separators_and_whitespace() {
        assert_eq!(
            pairs("a=1\nb : 2\n  c 3\nd\te=f\ng   =   h  \ni:\nj\n"),
            vec![p("a", "1"), p("b", "2"), p("c", "3"), p("d", "e=f"), p("g", "h  "), p("i", ""), p("j", ""),]
        );
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        assert_eq!(
            pairs("# comment\n! also\n   # indented\n\n \t\nk=v # not a comment\n"),
            vec![p("k", "v # not a comment")]
        );
    }

    #[test]
    fn line_continuation_skips_leading_whitespace() {
        assert_eq!(pairs("list=a,\\\n    b,\\\r\n\tc\nnext=1"), vec![p("list", "a,b,c"), p("next", "1")]);
    }

    #[test]
    fn even_trailing_backslashes_do_not_continue() {
        assert_eq!(pairs("path=C:\\\\dir\\\\\nx=y"), vec![p("path", "C:\\dir\\"), p("x", "y")]);
    }

    #[test]
    fn continuation_at_end_of_text_keeps_content() {
        assert_eq!(pairs("k=v\\"), vec![p("k", "v")]);
    }

    #[test]
    fn comment_marker_inside_continuation_is_content() {
        assert_eq!(pairs("k=a\\\n#b"), vec![p("k", "a#b")]);
    }

    #[test]
    fn escapes_are_resolved() {
        assert_eq!(
            pairs(r"k\ e\=y\:z=t\tn\nr\rf\fq\\\u0041\u00e9\ud83d\ude00\x"),
            vec![p("k e=y:z", "t\tn\nr\rf\u{c}q\\Aé😀x")]
        );
    }

    #[test]
    fn lone_surrogate_becomes_replacement_character() {
        assert_eq!(pairs(r"k=\ud800x"), vec![p("k", "\u{fffd}x")]);
    }

    #[test]
    fn bad_unicode_escape_names_the_line() {
        let err = parse("a=1\n\n# c\nb=\\u12G4\n").unwrap_err();
        assert!(matches!(err, BodyError::PropertiesUnicodeEscape { line: 4 }));
        assert!(matches!(parse("x=\\u12").unwrap_err(), BodyError::PropertiesUnicodeEscape { line: 1 }));
    }

    #[test]
    fn old_mac_line_breaks() {
        assert_eq!(pairs("a=1\rb=2\r\n\rc=3"), vec![p("a", "1"), p("b", "2"), p("c", "3")]);
    }

    #[test]
    fn map_keeps_last_value() {
        let map = parse_map("k=1\nk=2\n").unwrap();
        assert_eq!(map["k"], "2");
    }

    #[test]
    fn writes_plain_lines_unescaped() {
        assert_eq!(
            to_text([("listenPort", "9876"), ("rocketmqHome", "/opt/rocketmq")]),
            "listenPort=9876\nrocketmqHome=/opt/rocketmq\n"
        );
    }

    #[test]
    fn writes_escapes_only_where_needed() {
        assert_eq!(to_text([("#k ey:=", " v=a:b#!\\\n\té")]), "\\#k\\ ey\\:\\==\\ v=a:b#!\\\\\\n\\t\\u00E9\n");
        assert_eq!(to_text([("", "")]), "=\n");
        assert_eq!(to_text([("emoji", "😀")]), "emoji=\\uD83D\\uDE00\n");
    }

    #[test]
    fn written_text_parses_back() {
        let entries = vec![
            p("#k ey:=", " v=a:b#!\\\n\té"),
            p("", ""),
            p("trailing", "ends with backslash\\"),
            p("!bang", "  spaced  "),
            p("😀", "\u{0}\u{7f}"),
        ];
        assert_eq!(parse(&to_text(entries.clone())).unwrap(), entries);
    }
}
