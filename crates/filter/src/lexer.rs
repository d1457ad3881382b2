//! Tokens of the SQL92 filter language, produced on demand.
//!
//! This mirrors the token rules of Java's `SelectorParser.jj` (JavaCC, longest match, keywords
//! case-insensitive). It does not decode literal values; the parser does, because Java's
//! literal checks (range, zero floats) are part of building the tree.
//!
//! The lexer is pulled one token at a time on purpose: Java's parser stops as soon as the
//! grammar is satisfied and never reads the rest of the input, so text after a complete
//! expression is only an error if the one token the parser peeks at fails to lex.

use crate::error::{FilterError, ParseErrorKind};

/// Kinds of token. Keywords are listed first, in Java's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenKind {
    Not,
    And,
    Or,
    Between,
    In,
    True,
    False,
    Null,
    Is,
    Contains,
    StartsWith,
    EndsWith,
    /// `0`, or `[1-9][0-9]*` with an optional `l`/`L` suffix.
    Decimal,
    /// Digits with a `.` and/or an exponent.
    Float,
    /// `'...'` with `''` standing for one quote.
    Str,
    /// `[a-zA-Z_$][a-zA-Z0-9_$]*` that is not a keyword.
    Ident,
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    LParen,
    Comma,
    RParen,
    Plus,
    Minus,
    Eof,
}

impl TokenKind {
    /// How an error message names this kind of token.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            TokenKind::Not => "NOT",
            TokenKind::And => "AND",
            TokenKind::Or => "OR",
            TokenKind::Between => "BETWEEN",
            TokenKind::In => "IN",
            TokenKind::True => "TRUE",
            TokenKind::False => "FALSE",
            TokenKind::Null => "NULL",
            TokenKind::Is => "IS",
            TokenKind::Contains => "CONTAINS",
            TokenKind::StartsWith => "STARTSWITH",
            TokenKind::EndsWith => "ENDSWITH",
            TokenKind::Decimal => "an integer literal",
            TokenKind::Float => "a floating-point literal",
            TokenKind::Str => "a string literal",
            TokenKind::Ident => "an identifier",
            TokenKind::Eq => "'='",
            TokenKind::Ne => "'<>'",
            TokenKind::Gt => "'>'",
            TokenKind::Ge => "'>='",
            TokenKind::Lt => "'<'",
            TokenKind::Le => "'<='",
            TokenKind::LParen => "'('",
            TokenKind::Comma => "','",
            TokenKind::RParen => "')'",
            TokenKind::Plus => "'+'",
            TokenKind::Minus => "'-'",
            TokenKind::Eof => "the end of the expression",
        }
    }
}

const KEYWORDS: [(&str, TokenKind); 12] = [
    ("NOT", TokenKind::Not),
    ("AND", TokenKind::And),
    ("OR", TokenKind::Or),
    ("BETWEEN", TokenKind::Between),
    ("IN", TokenKind::In),
    ("TRUE", TokenKind::True),
    ("FALSE", TokenKind::False),
    ("NULL", TokenKind::Null),
    ("IS", TokenKind::Is),
    ("CONTAINS", TokenKind::Contains),
    ("STARTSWITH", TokenKind::StartsWith),
    ("ENDSWITH", TokenKind::EndsWith),
];

/// One token: its kind and its byte range in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) kind: TokenKind,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// Splits filter text into tokens, skipping whitespace and comments.
#[derive(Debug)]
pub(crate) struct Lexer<'s> {
    src: &'s str,
    pos: usize,
}

impl<'s> Lexer<'s> {
    pub(crate) fn new(src: &'s str) -> Lexer<'s> {
        Lexer { src, pos: 0 }
    }

    /// The next token, or the lexical error at the current position. After the end of input
    /// this keeps returning `Eof`.
    pub(crate) fn next_token(&mut self) -> Result<Token, Box<FilterError>> {
        self.skip_blanks_and_comments()?;
        let start = self.pos;
        let bytes = self.src.as_bytes();
        let Some(&first) = bytes.get(start) else {
            return Ok(Token { kind: TokenKind::Eof, start, end: start });
        };
        let (kind, end) = match first {
            b'a'..=b'z' | b'A'..=b'Z' | b'_' | b'$' => self.word(start),
            b'0'..=b'9' | b'.' => self.number(start)?,
            b'\'' => (TokenKind::Str, self.string(start)?),
            b'=' => (TokenKind::Eq, start + 1),
            b'<' => match bytes.get(start + 1) {
                Some(b'=') => (TokenKind::Le, start + 2),
                Some(b'>') => (TokenKind::Ne, start + 2),
                _ => (TokenKind::Lt, start + 1),
            },
            b'>' => match bytes.get(start + 1) {
                Some(b'=') => (TokenKind::Ge, start + 2),
                _ => (TokenKind::Gt, start + 1),
            },
            b'(' => (TokenKind::LParen, start + 1),
            b')' => (TokenKind::RParen, start + 1),
            b',' => (TokenKind::Comma, start + 1),
            b'+' => (TokenKind::Plus, start + 1),
            b'-' => (TokenKind::Minus, start + 1),
            _ => return Err(self.unexpected_char(start)),
        };
        self.pos = end;
        Ok(Token { kind, start, end })
    }

    /// Skips Java's SPECIAL_TOKEN and SKIP rules: the five blank characters, `--` comments and
    /// `/* */` comments, in any order.
    fn skip_blanks_and_comments(&mut self) -> Result<(), Box<FilterError>> {
        let bytes = self.src.as_bytes();
        loop {
            match bytes.get(self.pos..self.pos + 2) {
                Some(b"--") => {
                    // Java's LINE_COMMENT must end with a line break. At the end of input
                    // without one, the longest token JavaCC finds is a lone '-', so the text
                    // is two minus signs and whatever follows, not a comment.
                    let rest = &bytes[self.pos + 2..];
                    match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                        Some(i) => self.pos += 2 + i + 1,
                        None => return Ok(()),
                    }
                }
                Some(b"/*") => {
                    let rest = &self.src[self.pos + 2..];
                    match rest.find("*/") {
                        Some(i) => self.pos += 2 + i + 2,
                        None => return Err(FilterError::at(self.src, self.pos, ParseErrorKind::UnterminatedComment)),
                    }
                }
                _ => match bytes.get(self.pos) {
                    Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0c') => self.pos += 1,
                    _ => return Ok(()),
                },
            }
        }
    }

    fn word(&self, start: usize) -> (TokenKind, usize) {
        let bytes = self.src.as_bytes();
        let len = bytes[start..]
            .iter()
            .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_' || *b == b'$'))
            .unwrap_or(bytes.len() - start);
        let end = start + len;
        let word = &self.src[start..end];
        let kind = KEYWORDS
            .iter()
            .find(|(keyword, _)| keyword.eq_ignore_ascii_case(word))
            .map_or(TokenKind::Ident, |&(_, kind)| kind);
        (kind, end)
    }

    /// Java's DECIMAL_LITERAL and FLOATING_POINT_LITERAL, longest match:
    /// `0 | [1-9][0-9]*[lL]?`, `[0-9]+ . [0-9]* exp?`, `. [0-9]+ exp?`, `[0-9]+ exp`.
    /// There are no hex or octal literals: `0x1F` lexes as `0` followed by the identifier
    /// `x1F`, and `007` as three decimal literals.
    fn number(&self, start: usize) -> Result<(TokenKind, usize), Box<FilterError>> {
        let bytes = self.src.as_bytes();
        let digits_end = skip_digits(bytes, start);
        let has_int_digits = digits_end > start;
        if bytes.get(digits_end) == Some(&b'.') {
            let frac_end = skip_digits(bytes, digits_end + 1);
            if !has_int_digits && frac_end == digits_end + 1 {
                // A lone '.' starts no token.
                return Err(self.unexpected_char(start));
            }
            let end = exponent_end(bytes, frac_end).unwrap_or(frac_end);
            return Ok((TokenKind::Float, end));
        }
        if let Some(end) = exponent_end(bytes, digits_end) {
            return Ok((TokenKind::Float, end));
        }
        if bytes[start] == b'0' {
            return Ok((TokenKind::Decimal, start + 1));
        }
        let end = match bytes.get(digits_end) {
            Some(b'l' | b'L') => digits_end + 1,
            _ => digits_end,
        };
        Ok((TokenKind::Decimal, end))
    }

    /// The end of a string literal starting at the quote at `start`.
    ///
    /// JavaCC takes the longest text that forms a literal. Normally that ends at the first
    /// single quote not doubled; but if no such quote follows, a `''` seen earlier could have
    /// been a closing quote followed by an opening one, and the literal ends there instead.
    /// The rest (an unclosed literal) only fails if the parser ever reads that far, which it
    /// does not when the literal is the token after a complete expression.
    fn string(&self, start: usize) -> Result<usize, Box<FilterError>> {
        let bytes = self.src.as_bytes();
        let mut i = start + 1;
        let mut shorter_end = None;
        loop {
            match bytes[i..].iter().position(|&b| b == b'\'') {
                Some(q) if bytes.get(i + q + 1) == Some(&b'\'') => {
                    shorter_end = Some(i + q + 1);
                    i += q + 2;
                }
                Some(q) => return Ok(i + q + 1),
                None => {
                    return shorter_end
                        .ok_or_else(|| FilterError::at(self.src, start, ParseErrorKind::UnterminatedString))
                }
            }
        }
    }

    fn unexpected_char(&self, at: usize) -> Box<FilterError> {
        let c = self.src[at..].chars().next().unwrap_or('\0');
        FilterError::at(self.src, at, ParseErrorKind::UnexpectedCharacter(c))
    }
}

fn skip_digits(bytes: &[u8], from: usize) -> usize {
    from + bytes.get(from..).map_or(0, |rest| rest.iter().take_while(|b| b.is_ascii_digit()).count())
}

/// The end of an exponent `[eE][+-]?[0-9]+` starting at `from`, if there is a complete one.
fn exponent_end(bytes: &[u8], from: usize) -> Option<usize> {
    if !matches!(bytes.get(from), Some(b'e' | b'E')) {
        return None;
    }
    let mut i = from + 1;
    if matches!(bytes.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let end = skip_digits(bytes, i);
    (end > i).then_some(end)
}

/// The value of a string literal token (with its quotes): `''` stands for one quote.
pub(crate) fn decode_string(token_text: &str) -> String {
    let inner = &token_text[1..token_text.len() - 1];
    inner.replace("''", "'")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lex(src: &str) -> Result<Vec<(TokenKind, &str)>, Box<FilterError>> {
        let mut lexer = Lexer::new(src);
        let mut out = Vec::new();
        loop {
            let t = lexer.next_token()?;
            if t.kind == TokenKind::Eof {
                return Ok(out);
            }
            out.push((t.kind, &src[t.start..t.end]));
        }
    }

    fn kinds(src: &str) -> Vec<TokenKind> {
        lex(src).unwrap().into_iter().map(|(k, _)| k).collect()
    }

    use TokenKind::*;

    #[test]
    fn keywords_are_case_insensitive_and_longer_words_are_identifiers() {
        assert_eq!(
            kinds("not And oR between IN true False NULL is contains StartsWith ENDSWITH"),
            [Not, And, Or, Between, In, True, False, Null, Is, Contains, StartsWith, EndsWith]
        );
        assert_eq!(lex("notx $a _b a1$").unwrap(), [(Ident, "notx"), (Ident, "$a"), (Ident, "_b"), (Ident, "a1$")]);
    }

    #[test]
    fn operators_take_the_longest_match() {
        assert_eq!(kinds("= <> < <= > >= ( ) , + -"), [Eq, Ne, Lt, Le, Gt, Ge, LParen, RParen, Comma, Plus, Minus]);
        assert_eq!(kinds("<>=>=<"), [Ne, Eq, Ge, Lt]);
    }

    #[test]
    fn numbers_follow_the_javacc_literal_rules() {
        assert_eq!(lex("123 45L 7l 0").unwrap(), [(Decimal, "123"), (Decimal, "45L"), (Decimal, "7l"), (Decimal, "0")]);
        assert_eq!(
            lex("1.5 5. .5 1e5 1E+5 2.5e-3 00.5 0e1").unwrap(),
            [
                (Float, "1.5"),
                (Float, "5."),
                (Float, ".5"),
                (Float, "1e5"),
                (Float, "1E+5"),
                (Float, "2.5e-3"),
                (Float, "00.5"),
                (Float, "0e1")
            ]
        );
        // No leading zeros, no hex, no suffix on zero: the rest becomes further tokens.
        assert_eq!(lex("007").unwrap(), [(Decimal, "0"), (Decimal, "0"), (Decimal, "7")]);
        assert_eq!(lex("0x1F").unwrap(), [(Decimal, "0"), (Ident, "x1F")]);
        assert_eq!(lex("0L").unwrap(), [(Decimal, "0"), (Ident, "L")]);
        // An incomplete exponent is not part of the number.
        assert_eq!(lex("1e").unwrap(), [(Decimal, "1"), (Ident, "e")]);
        assert_eq!(lex("1e+x").unwrap(), [(Decimal, "1"), (Ident, "e"), (Plus, "+"), (Ident, "x")]);
        assert_eq!(lex("1.e").unwrap(), [(Float, "1."), (Ident, "e")]);
        assert_eq!(lex("1.5L").unwrap(), [(Float, "1.5"), (Ident, "L")]);
        assert_eq!(lex("1.2.3").unwrap(), [(Float, "1.2"), (Float, ".3")]);
    }

    #[test]
    fn strings_keep_doubled_quotes_inside() {
        assert_eq!(lex("'a''b' ''").unwrap(), [(Str, "'a''b'"), (Str, "''")]);
        assert_eq!(decode_string("'a''b'"), "a'b");
        assert_eq!(decode_string("''''''"), "''");
        assert_eq!(decode_string("'x\ny'"), "x\ny");
        assert_eq!(lex("'é' 'ü'").unwrap(), [(Str, "'é'"), (Str, "'ü'")]);
    }

    #[test]
    fn comments_and_blanks_are_skipped() {
        assert_eq!(kinds(" \t\r\n\x0ca -- comment\n/* block * / */b/**/c/***/d"), [Ident, Ident, Ident, Ident]);
        assert_eq!(kinds("a --x\rb"), [Ident, Ident]);
    }

    #[test]
    fn a_line_comment_needs_a_line_break() {
        assert_eq!(lex("a --x").unwrap(), [(Ident, "a"), (Minus, "-"), (Minus, "-"), (Ident, "x")]);
    }

    #[test]
    fn lexical_errors_carry_their_position() {
        let err = lex("a = 'abc").unwrap_err();
        assert_eq!((err.kind, err.position.column), (ParseErrorKind::UnterminatedString, 5));
        let err = lex("a /* b").unwrap_err();
        assert_eq!((err.kind, err.position.column), (ParseErrorKind::UnterminatedComment, 3));
        let err = lex("a\n  # b").unwrap_err();
        assert_eq!(err.kind, ParseErrorKind::UnexpectedCharacter('#'));
        assert_eq!((err.position.line, err.position.column, err.position.offset), (2, 3, 4));
        for bad in ["!", "a != b", "a.b", ". 5", "/", "é", "\u{a0}", "\x0b", "\"x\"", "*", ";"] {
            assert!(lex(bad).is_err(), "{bad:?} should not lex");
        }
        assert_eq!(lex("'a").unwrap_err().kind, ParseErrorKind::UnterminatedString);
    }

    #[test]
    fn an_unclosed_string_falls_back_to_the_longest_closed_one() {
        let mut lexer = Lexer::new("'a''b''c");
        let token = lexer.next_token().unwrap();
        assert_eq!((token.kind, token.start, token.end), (Str, 0, 6));
        let err = lexer.next_token().unwrap_err();
        assert_eq!((err.kind, err.position.offset), (ParseErrorKind::UnterminatedString, 6));
    }
}
