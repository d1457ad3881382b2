//! Recursive-descent parser for the SQL92 filter grammar, with Java's tree-building checks.
//!
//! The functions follow the productions of Java's `SelectorParser.jj` (`or_expr` is
//! `orExpression`, and so on), including where it looks ahead: one token everywhere, two after
//! `IS` (for `IS NULL`) and after `NOT` in a comparison (for `NOT IN`, `NOT BETWEEN`, ...).
//! The checks Java makes while building nodes (`ComparisonExpression.create*`,
//! `asBooleanExpression`) are made at the same points, so the same texts are rejected.
//!
//! Like Java, parsing stops once a complete expression has been read and the next token does
//! not continue it: `a = 1 b = 2` is the filter `a = 1`. That next token must still lex.
//!
//! The functions that recurse (one call chain per level of parentheses) keep few locals and
//! leave node building to helpers, because unoptimized builds give every temporary its own
//! stack slot and the nesting limit has to be safe on a 2 MiB thread in those builds too.

use std::collections::VecDeque;

use crate::error::{FilterError, ParseErrorKind};
use crate::expression::{Expression, InList, Literal, Node, OrderOp, TextOp};
use crate::lexer::{decode_string, Lexer, Token, TokenKind};
use crate::value::compare;

/// The deepest nesting of parentheses and unary operators (`NOT`, `-`, `+`) the parser
/// accepts. It bounds the parser's recursion; Java fails with a stack overflow somewhere far
/// beyond this, and real filters stay far below it.
pub const MAX_NESTING: u32 = 100;

/// The deepest expression tree the parser builds. A chain of `AND`/`OR` grows the tree one
/// level per operand, and evaluation, printing and dropping recurse once per level, so this
/// bounds their stack use. About a thousand chained conditions fit.
///
/// Measured at both limits: parsing needs about 140 KiB of stack and evaluation about
/// 270 KiB in optimized builds (about 430 KiB and 1.1 MiB unoptimized), so any thread with
/// the default 2 MiB stack can parse and evaluate every accepted filter.
pub const MAX_DEPTH: u32 = 1024;

/// Errors are boxed inside the parser to keep the recursive functions' frames small.
type PResult<T> = Result<T, Box<FilterError>>;

/// Parses a SQL92 filter expression (the `subscription` of a consumer whose expression type
/// is `SQL92`).
///
/// Java: `SelectorParser.parse`. The same texts are accepted and rejected, including Java's
/// leniencies: keywords in any case, a bare property as a condition (`a` is true only for a
/// boolean-valued property, so never for a message property), and anything after a complete
/// expression ignored as long as its first token is not an operator that would continue it.
///
/// # Errors
///
/// [`FilterError`] with the position and cause of the first problem: a lexical error, a
/// syntax error, or one of Java's construction checks (for example `a > 'x'`, `a = NULL`,
/// `a BETWEEN 5 AND 1`, or a filter that is not boolean, like `1`).
pub fn parse(text: &str) -> Result<Expression, FilterError> {
    let mut parser = Parser { src: text, lexer: Lexer::new(text), ahead: VecDeque::new(), nesting: 0 };
    let root = parser.or_expr().and_then(|root| parser.as_boolean(root)).map_err(|e| *e)?;
    Ok(Expression { root: *root.node })
}

/// A parsed sub-expression: its node, the node's tree depth, and where its text starts (for
/// error positions).
#[derive(Debug)]
struct Sub {
    node: Box<Node>,
    depth: u32,
    start: usize,
}

/// An operator of Java's `comparisonExpression` loop, after its keyword(s).
#[derive(Debug, Clone, Copy)]
enum ComparisonOp {
    Order(OrderOp),
    Text(TextOp, bool),
    Between(bool),
    In(bool),
}

#[derive(Debug)]
struct Parser<'s> {
    src: &'s str,
    lexer: Lexer<'s>,
    /// Tokens read but not consumed; never more than two.
    ahead: VecDeque<Token>,
    /// Current nesting of parentheses and unary operators.
    nesting: u32,
}

impl Parser<'_> {
    // ----- token access -----

    fn peek(&mut self) -> PResult<Token> {
        if self.ahead.is_empty() {
            let token = self.lexer.next_token()?;
            self.ahead.push_back(token);
        }
        Ok(self.ahead[0])
    }

    fn peek_second(&mut self) -> PResult<Token> {
        self.peek()?;
        if self.ahead.len() < 2 {
            let token = self.lexer.next_token()?;
            self.ahead.push_back(token);
        }
        Ok(self.ahead[1])
    }

    fn advance(&mut self) -> PResult<Token> {
        let token = self.peek()?;
        self.ahead.pop_front();
        Ok(token)
    }

    /// Consumes the next token if it is `kind`, returning where it starts.
    fn eat(&mut self, kind: TokenKind) -> PResult<Option<usize>> {
        let token = self.peek()?;
        if token.kind != kind {
            return Ok(None);
        }
        self.ahead.pop_front();
        Ok(Some(token.start))
    }

    fn expect(&mut self, kind: TokenKind, expected: &'static str) -> PResult<Token> {
        let token = self.peek()?;
        if token.kind != kind {
            return Err(self.unexpected(token, expected));
        }
        self.advance()
    }

    fn unexpected(&self, token: Token, expected: &'static str) -> Box<FilterError> {
        let found = token.kind.describe();
        self.error(token.start, ParseErrorKind::UnexpectedToken { found, expected })
    }

    fn error(&self, offset: usize, kind: ParseErrorKind) -> Box<FilterError> {
        FilterError::at(self.src, offset, kind)
    }

    // ----- grammar (these recurse) -----

    /// `and_expr (OR and_expr)*`
    fn or_expr(&mut self) -> PResult<Sub> {
        let mut left = self.and_expr()?;
        while let Some(at) = self.eat(TokenKind::Or)? {
            let right = self.and_expr()?;
            left = self.logical(Node::Or, left, right, at)?;
        }
        Ok(left)
    }

    /// `equality_expr (AND equality_expr)*`
    fn and_expr(&mut self) -> PResult<Sub> {
        let mut left = self.equality_expr()?;
        while let Some(at) = self.eat(TokenKind::And)? {
            let right = self.equality_expr()?;
            left = self.logical(Node::And, left, right, at)?;
        }
        Ok(left)
    }

    /// `comparison_expr (= comparison_expr | <> comparison_expr | IS NULL | IS NOT NULL)*`
    fn equality_expr(&mut self) -> PResult<Sub> {
        let mut left = self.comparison_expr()?;
        loop {
            let op = self.peek()?;
            left = match op.kind {
                TokenKind::Eq | TokenKind::Ne => {
                    self.advance()?;
                    let right = self.comparison_expr()?;
                    self.equal(left, right, op)?
                }
                TokenKind::Is => self.is_null(left)?,
                _ => return Ok(left),
            };
        }
    }

    /// `unary_expr` followed by any number of `> x`, `>= x`, `< x`, `<= x`,
    /// `[NOT] CONTAINS 's'`, `[NOT] STARTSWITH 's'`, `[NOT] ENDSWITH 's'`,
    /// `[NOT] BETWEEN x AND y`, `[NOT] IN ('s', ...)`.
    fn comparison_expr(&mut self) -> PResult<Sub> {
        let mut left = self.unary_expr()?;
        while let Some((op, at)) = self.comparison_op()? {
            left = match op {
                ComparisonOp::Order(op) => {
                    let right = self.unary_expr()?;
                    self.order(op, left, right, at)?
                }
                ComparisonOp::Between(negated) => {
                    let low = self.unary_expr()?;
                    self.expect(TokenKind::And, "AND between the BETWEEN bounds")?;
                    let high = self.unary_expr()?;
                    self.between(left, low, high, negated, at)?
                }
                ComparisonOp::Text(op, negated) => self.text(op, negated, left)?,
                ComparisonOp::In(negated) => self.in_list(left, negated, at)?,
            };
        }
        Ok(left)
    }

    /// `(+ | - | NOT)* primary` where primary is a literal, a property, or `( or_expr )`.
    /// The prefix operators are read in a loop and applied innermost first, which builds the
    /// same tree (and makes the same checks in the same order) as Java's recursion.
    fn unary_expr(&mut self) -> PResult<Sub> {
        let depth_before = self.nesting;
        let mut prefixes = Vec::new();
        let mut token = self.peek()?;
        while matches!(token.kind, TokenKind::Plus | TokenKind::Minus | TokenKind::Not) {
            self.enter(token)?;
            self.advance()?;
            prefixes.push(token);
            token = self.peek()?;
        }
        let operand = if token.kind == TokenKind::LParen {
            self.enter(token)?;
            self.advance()?;
            let inner = self.or_expr()?;
            self.expect(TokenKind::RParen, "')'")?;
            // Parentheses build no node.
            Sub { start: token.start, ..inner }
        } else {
            self.primary(token)?
        };
        self.nesting = depth_before;
        self.apply_prefixes(prefixes, operand)
    }

    // ----- helpers (these do not recurse) -----

    fn enter(&mut self, token: Token) -> PResult<()> {
        if self.nesting >= MAX_NESTING {
            return Err(self.error(token.start, ParseErrorKind::TooDeep));
        }
        self.nesting += 1;
        Ok(())
    }

    /// A literal or a property.
    fn primary(&mut self, token: Token) -> PResult<Sub> {
        let text = &self.src[token.start..token.end];
        let node = match token.kind {
            TokenKind::Str => Node::Literal(Literal::Str(decode_string(text).into())),
            TokenKind::Decimal => Node::Literal(self.decimal(text, token.start)?),
            TokenKind::Float => Node::Literal(self.float(text, token.start)?),
            TokenKind::True => Node::Literal(Literal::Bool(true)),
            TokenKind::False => Node::Literal(Literal::Bool(false)),
            TokenKind::Null => Node::Literal(Literal::Null),
            TokenKind::Ident => Node::Property(text.into()),
            _ => return Err(self.unexpected(token, "a property, a literal, '(', NOT, '+' or '-'")),
        };
        self.advance()?;
        Ok(Sub { node: Box::new(node), depth: 1, start: token.start })
    }

    /// Java's unary plus builds no node; minus negates; NOT wants a boolean operand.
    fn apply_prefixes(&self, prefixes: Vec<Token>, mut operand: Sub) -> PResult<Sub> {
        for prefix in prefixes.into_iter().rev() {
            operand = match prefix.kind {
                TokenKind::Minus => self.unary(Node::Negate, operand, prefix.start)?,
                TokenKind::Not => {
                    let operand = self.as_boolean(operand)?;
                    self.unary(Node::Not, operand, prefix.start)?
                }
                _ => Sub { start: prefix.start, ..operand },
            };
        }
        Ok(operand)
    }

    /// Reads the operator of one round of Java's comparison loop, if the next token starts
    /// one. After NOT, Java looks two tokens ahead and fails if none of its NOT forms follows.
    fn comparison_op(&mut self) -> PResult<Option<(ComparisonOp, usize)>> {
        let token = self.peek()?;
        let (negated, keyword) = match token.kind {
            TokenKind::Gt => return self.take_op(ComparisonOp::Order(OrderOp::Gt)),
            TokenKind::Ge => return self.take_op(ComparisonOp::Order(OrderOp::Ge)),
            TokenKind::Lt => return self.take_op(ComparisonOp::Order(OrderOp::Lt)),
            TokenKind::Le => return self.take_op(ComparisonOp::Order(OrderOp::Le)),
            TokenKind::Contains | TokenKind::StartsWith | TokenKind::EndsWith | TokenKind::Between | TokenKind::In => {
                (false, token.kind)
            }
            TokenKind::Not => match self.peek_second()?.kind {
                kind @ (TokenKind::Contains
                | TokenKind::StartsWith
                | TokenKind::EndsWith
                | TokenKind::Between
                | TokenKind::In) => {
                    self.advance()?;
                    (true, kind)
                }
                _ => {
                    let second = self.peek_second()?;
                    return Err(self.unexpected(second, "CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN after NOT"));
                }
            },
            _ => return Ok(None),
        };
        let op = match keyword {
            TokenKind::Contains => ComparisonOp::Text(TextOp::Contains, negated),
            TokenKind::StartsWith => ComparisonOp::Text(TextOp::StartsWith, negated),
            TokenKind::EndsWith => ComparisonOp::Text(TextOp::EndsWith, negated),
            TokenKind::Between => ComparisonOp::Between(negated),
            _ => ComparisonOp::In(negated),
        };
        self.advance()?;
        Ok(Some((op, token.start)))
    }

    fn take_op(&mut self, op: ComparisonOp) -> PResult<Option<(ComparisonOp, usize)>> {
        let token = self.advance()?;
        Ok(Some((op, token.start)))
    }

    fn string_literal(&mut self) -> PResult<Box<str>> {
        let token = self.expect(TokenKind::Str, "a string literal")?;
        Ok(decode_string(&self.src[token.start..token.end]).into())
    }

    /// Java: `ConstantExpression.createFromDecimal`: a long, narrowed to int when it fits.
    fn decimal(&self, text: &str, at: usize) -> PResult<Literal> {
        let digits = text.trim_end_matches(['l', 'L']);
        let value: i64 = digits.parse().map_err(|_| self.error(at, ParseErrorKind::IntegerOutOfRange))?;
        Ok(i32::try_from(value).map_or(Literal::Long(value), Literal::Int))
    }

    /// Java: `ConstantExpression.createFloat`, which rejects infinity and (by comparing with
    /// `Double.MIN_VALUE`, the smallest positive double) zero.
    fn float(&self, text: &str, at: usize) -> PResult<Literal> {
        match text.parse::<f64>() {
            Ok(value) if value.is_finite() && value > 0.0 => Ok(Literal::Double(value)),
            _ => Err(self.error(at, ParseErrorKind::FloatOutOfRange)),
        }
    }

    // ----- node construction, with Java's checks -----

    fn node(&self, node: Node, depth: u32, start: usize, at: usize) -> PResult<Sub> {
        if depth > MAX_DEPTH {
            return Err(self.error(at, ParseErrorKind::TooDeep));
        }
        Ok(Sub { node: Box::new(node), depth, start })
    }

    fn unary(&self, make: fn(Box<Node>) -> Node, operand: Sub, at: usize) -> PResult<Sub> {
        let start = at.min(operand.start);
        self.node(make(operand.node), operand.depth + 1, start, at)
    }

    fn binary(&self, make: fn(Box<Node>, Box<Node>) -> Node, l: Sub, r: Sub, at: usize) -> PResult<Sub> {
        let depth = l.depth.max(r.depth) + 1;
        self.node(make(l.node, r.node), depth, l.start, at)
    }

    /// Java: `LogicExpression.createOR`/`createAND` of two `asBooleanExpression`s.
    fn logical(&self, make: fn(Box<Node>, Box<Node>) -> Node, l: Sub, r: Sub, at: usize) -> PResult<Sub> {
        let l = self.as_boolean(l)?;
        let r = self.as_boolean(r)?;
        self.binary(make, l, r, at)
    }

    /// Java: `SelectorParser.asBooleanExpression`: boolean expressions pass, a property is
    /// wrapped in a boolean cast, anything else is an error.
    fn as_boolean(&self, sub: Sub) -> PResult<Sub> {
        if is_boolean(&sub.node) {
            return Ok(sub);
        }
        if matches!(*sub.node, Node::Property(_)) {
            let at = sub.start;
            return self.unary(Node::BooleanCast, sub, at);
        }
        Err(self.error(sub.start, ParseErrorKind::NotBoolean))
    }

    /// Java: `ComparisonExpression.createEqual`, and `createNotEqual` (its negation) for `<>`.
    fn equal(&self, l: Sub, r: Sub, op: Token) -> PResult<Sub> {
        for operand in [&l, &r] {
            if matches!(*operand.node, Node::Literal(Literal::Null)) {
                return Err(self.error(operand.start, ParseErrorKind::NullComparedForEquality));
            }
        }
        if let (Node::Literal(lv), Node::Literal(rv)) = (&*l.node, &*r.node) {
            if matches!(lv, Literal::Bool(_)) && !matches!(rv, Literal::Bool(_)) {
                return Err(self.error(op.start, ParseErrorKind::BooleanComparedWithNonBoolean));
            }
        }
        let equal = self.binary(Node::Equal, l, r, op.start)?;
        if op.kind == TokenKind::Ne {
            return self.unary(Node::Not, equal, op.start);
        }
        Ok(equal)
    }

    /// `IS NULL` or `IS NOT NULL`, from the IS token on. Java: `ComparisonExpression
    /// .createIsNull`, an unchecked equality with NULL, and `createIsNotNull`, its negation.
    fn is_null(&mut self, operand: Sub) -> PResult<Sub> {
        let negated = self.peek_second()?.kind != TokenKind::Null;
        let at = self.advance()?.start;
        if negated {
            self.expect(TokenKind::Not, "NOT or NULL after IS")?;
        }
        self.expect(TokenKind::Null, "NULL after IS NOT")?;
        let null = Sub { node: Box::new(Node::Literal(Literal::Null)), depth: 1, start: at };
        let is_null = self.binary(Node::Equal, operand, null, at)?;
        if negated {
            return self.unary(Node::Not, is_null, at);
        }
        Ok(is_null)
    }

    /// Java: `ComparisonExpression.createGreaterThan` and friends.
    fn order(&self, op: OrderOp, l: Sub, r: Sub, at: usize) -> PResult<Sub> {
        self.check_orderable(&l)?;
        self.check_orderable(&r)?;
        let depth = l.depth.max(r.depth) + 1;
        self.node(Node::Order(op, l.node, r.node), depth, l.start, at)
    }

    /// Java: `ComparisonExpression.checkLessThanOperand`: literals must be numbers, and boolean
    /// expressions cannot be ordered.
    fn check_orderable(&self, operand: &Sub) -> PResult<()> {
        let orderable = match &*operand.node {
            Node::Literal(literal) => matches!(literal, Literal::Int(_) | Literal::Long(_) | Literal::Double(_)),
            node => !is_boolean(node),
        };
        if orderable {
            Ok(())
        } else {
            Err(self.error(operand.start, ParseErrorKind::NotOrderable))
        }
    }

    /// `[NOT] BETWEEN low AND high`. Java: `createBetween` checks literal bounds (not NULL, in
    /// order) before the two comparisons check their operands; `createNotBetween` only has the
    /// comparisons' checks.
    fn between(&self, value: Sub, low: Sub, high: Sub, negated: bool, at: usize) -> PResult<Sub> {
        if !negated {
            if let (Node::Literal(lo), Node::Literal(hi)) = (&*low.node, &*high.node) {
                if *lo == Literal::Null || *hi == Literal::Null {
                    return Err(self.error(low.start, ParseErrorKind::BetweenNullBound));
                }
                match compare(hi.value(), lo.value()) {
                    Ok(ordering) if ordering.is_lt() => {
                        return Err(self.error(low.start, ParseErrorKind::BetweenBoundsReversed))
                    }
                    Ok(_) => {}
                    Err(_) => return Err(self.error(low.start, ParseErrorKind::BetweenBoundsIncomparable)),
                }
            }
        }
        for operand in [&value, &low, &value, &high] {
            self.check_orderable(operand)?;
        }
        let depth = value.depth.max(low.depth).max(high.depth) + 1;
        let node = Node::Between { value: value.node, low: low.node, high: high.node, negated };
        self.node(node, depth, value.start, at)
    }

    /// `('s', ...)` after `[NOT] IN`. Java: `createInFilter` wants a property on the left,
    /// checked after the list is read.
    fn in_list(&mut self, left: Sub, negated: bool, at: usize) -> PResult<Sub> {
        self.expect(TokenKind::LParen, "'(' after IN")?;
        let mut values = vec![self.string_literal()?];
        while self.eat(TokenKind::Comma)?.is_some() {
            values.push(self.string_literal()?);
        }
        self.expect(TokenKind::RParen, "',' or ')' in the IN list")?;
        let Node::Property(property) = *left.node else {
            return Err(self.error(left.start, ParseErrorKind::InRequiresProperty));
        };
        let node = Node::In { property, values: InList::new(values), negated };
        self.node(node, 2, left.start, at)
    }

    /// The `'s'` after `[NOT] CONTAINS|STARTSWITH|ENDSWITH`; Java checks nothing.
    fn text(&mut self, op: TextOp, negated: bool, operand: Sub) -> PResult<Sub> {
        let pattern = self.string_literal()?;
        let (depth, start) = (operand.depth + 1, operand.start);
        let node = Node::Text { op, negated, operand: operand.node, pattern };
        self.node(node, depth, start, start)
    }
}

/// Whether Java's node for this is a `BooleanExpression`: TRUE, FALSE and NULL literals and
/// every logical or comparison node; not numbers, strings, properties or negations.
fn is_boolean(node: &Node) -> bool {
    match node {
        Node::Literal(literal) => matches!(literal, Literal::Bool(_) | Literal::Null),
        Node::Property(_) | Node::Negate(_) => false,
        Node::Not(_)
        | Node::BooleanCast(_)
        | Node::And(..)
        | Node::Or(..)
        | Node::Equal(..)
        | Node::Order(..)
        | Node::Between { .. }
        | Node::In { .. }
        | Node::Text { .. } => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ParseErrorKind::*;

    fn canonical(text: &str) -> String {
        match parse(text) {
            Ok(expression) => expression.to_string(),
            Err(err) => panic!("{text:?} should parse: {err}"),
        }
    }

    fn rejection(text: &str) -> (ParseErrorKind, u32, u32) {
        match parse(text) {
            Ok(expression) => panic!("{text:?} should be rejected, parsed as {expression}"),
            Err(err) => (err.kind, err.position.line, err.position.column),
        }
    }

    #[test]
    fn logical_operators_nest_or_over_and_over_not() {
        assert_eq!(canonical("a = 1 OR b = 2 AND c = 3"), "(a = 1) OR ((b = 2) AND (c = 3))");
        assert_eq!(canonical("(a = 1 OR b = 2) AND c = 3"), "((a = 1) OR (b = 2)) AND (c = 3)");
        assert_eq!(canonical("a = 1 AND b = 2 AND c = 3"), "((a = 1) AND (b = 2)) AND (c = 3)");
        assert_eq!(canonical("NOT a = 1 OR b"), "((NOT a) = 1) OR b");
        assert_eq!(canonical("NOT (a = 1)"), "NOT (a = 1)");
        assert_eq!(canonical("not not a"), "NOT (NOT a)");
    }

    #[test]
    fn comparisons_parse_to_java_shaped_trees() {
        assert_eq!(canonical("a = 'x'"), "a = 'x'");
        assert_eq!(canonical("a <> 'x'"), "NOT (a = 'x')");
        assert_eq!(canonical("a > 1"), "a > 1");
        assert_eq!(canonical("a >= 1.5"), "a >= 1.5");
        assert_eq!(canonical("a < -2"), "a < -2");
        assert_eq!(canonical("a <= b"), "a <= b");
        assert_eq!(canonical("a IS NULL"), "a IS NULL");
        assert_eq!(canonical("a is not null"), "NOT (a IS NULL)");
        assert_eq!(canonical("a BETWEEN 1 AND 10"), "a BETWEEN 1 AND 10");
        assert_eq!(canonical("a NOT BETWEEN 1 AND 10"), "a NOT BETWEEN 1 AND 10");
        assert_eq!(canonical("a IN ('y', 'x', 'y')"), "a IN ('x', 'y')");
        assert_eq!(canonical("a NOT IN ('x')"), "a NOT IN ('x')");
        assert_eq!(canonical("a CONTAINS 'x'"), "a CONTAINS 'x'");
        assert_eq!(canonical("a not contains 'x'"), "a NOT CONTAINS 'x'");
        assert_eq!(canonical("a StartsWith 'x'"), "a STARTSWITH 'x'");
        assert_eq!(canonical("a NOT STARTSWITH 'x'"), "a NOT STARTSWITH 'x'");
        assert_eq!(canonical("a ENDSWITH 'x'"), "a ENDSWITH 'x'");
        assert_eq!(canonical("a NOT ENDSWITH 'x'"), "a NOT ENDSWITH 'x'");
        // Comparisons chain left to right where Java's loops allow it.
        assert_eq!(canonical("a = 1 = TRUE"), "(a = 1) = TRUE");
        assert_eq!(canonical("a IS NULL IS NULL"), "(a IS NULL) IS NULL");
        assert_eq!(canonical("a CONTAINS 'x' CONTAINS 'y'"), "(a CONTAINS 'x') CONTAINS 'y'");
        assert_eq!(canonical("a BETWEEN 1 AND 2 AND b = 1"), "(a BETWEEN 1 AND 2) AND (b = 1)");
    }

    #[test]
    fn literals_keep_java_types() {
        assert_eq!(parse("a = 5").unwrap().root, parse("a = 5L").unwrap().root, "5L narrows to an int");
        let long = parse("a = 3000000000").unwrap();
        assert!(matches!(long.root, Node::Equal(_, ref r) if **r == Node::Literal(Literal::Long(3_000_000_000))));
        let int = parse("a = 2147483647").unwrap();
        assert!(matches!(int.root, Node::Equal(_, ref r) if **r == Node::Literal(Literal::Int(i32::MAX))));
        assert_eq!(canonical("a = 9223372036854775807"), "a = 9223372036854775807");
        assert_eq!(
            canonical("a > 1e3 AND a < .5E-2 AND a > 5. AND a > 1.7976931348623157e308"),
            "(((a > 1000.0) AND (a < 0.005)) AND (a > 5.0)) AND (a > 1.7976931348623157e308)"
        );
        assert_eq!(canonical("a = 'it''s'"), "a = 'it''s'");
        assert_eq!(canonical("a = ''''"), "a = ''''");
        assert_eq!(canonical("TRUE"), "TRUE");
        assert_eq!(canonical("false"), "FALSE");
        assert_eq!(canonical("NULL"), "NULL");
        assert_eq!(canonical("- - a > + - 1"), "(-(-a)) > -1");
    }

    #[test]
    fn properties_and_parentheses() {
        assert_eq!(canonical("$a_1 = _B$"), "$a_1 = _B$");
        assert_eq!(canonical("((a)) IN ('x')"), "a IN ('x')");
        assert_eq!(canonical("a"), "a");
        assert_eq!(canonical("(a) AND b"), "a AND b");
        assert_eq!(canonical("NOT a"), "NOT a");
        assert_eq!(canonical("a > -(b)"), "a > -b");
        assert_eq!(canonical("a > -(-(b))"), "a > (-(-b))");
    }

    #[test]
    fn comments_and_whitespace_are_ignored() {
        assert_eq!(canonical("/* lead */ a\t=\r\n1 -- trailing\n AND /**/ b = 2"), "(a = 1) AND (b = 2)");
    }

    /// Java never checks for the end of input: once a complete expression is read, a following
    /// token that cannot continue it ends the parse.
    #[test]
    fn text_after_a_complete_expression_is_ignored_like_java() {
        for (text, meaning) in [
            ("a = 1 b = 2", "a = 1"),
            ("a = 1)", "a = 1"),
            ("a = 1 , 'x'", "a = 1"),
            ("a = 0L", "a = 0"),
            ("a = 007", "a = 0"),
            ("a > 0x10", "a > 0"),
            ("(a = 1) (b = 2)", "a = 1"),
            ("a = 1 TRUE", "a = 1"),
            ("a = 1 - 2", "a = 1"),
            ("a = 1 --", "a = 1"),
            ("a = 1 + #", "a = 1"),
        ] {
            assert_eq!(canonical(text), meaning, "{text:?}");
        }
        // The token after the expression is still lexed, and operators are still followed.
        assert_eq!(rejection("a = 1 #").0, UnexpectedCharacter('#'));
        assert_eq!(rejection("a = 1 'open").0, UnterminatedString);
        assert_eq!(
            rejection("a = 1 AND").0,
            UnexpectedToken {
                found: "the end of the expression",
                expected: "a property, a literal, '(', NOT, '+' or '-'"
            }
        );
        assert!(matches!(rejection("a = 1 NOT b").0, UnexpectedToken { found: "an identifier", .. }));
        assert!(matches!(rejection("a = 1 IS").0, UnexpectedToken { .. }));
    }

    #[test]
    fn the_filter_must_be_boolean() {
        assert_eq!(rejection("1"), (NotBoolean, 1, 1));
        assert_eq!(rejection("'x'"), (NotBoolean, 1, 1));
        assert_eq!(rejection("-a"), (NotBoolean, 1, 1));
        assert_eq!(rejection("a = 1 OR 2"), (NotBoolean, 1, 10));
        assert_eq!(rejection("2 AND a = 1"), (NotBoolean, 1, 1));
        assert_eq!(rejection("NOT 'x'"), (NotBoolean, 1, 5));
        assert_eq!(rejection("a = 1 AND (5)"), (NotBoolean, 1, 11));
    }

    #[test]
    fn java_construction_checks_reject_these() {
        assert_eq!(rejection("a = NULL"), (NullComparedForEquality, 1, 5));
        assert_eq!(rejection("NULL <> a"), (NullComparedForEquality, 1, 1));
        assert_eq!(rejection("TRUE = 1"), (BooleanComparedWithNonBoolean, 1, 6));
        assert_eq!(rejection("FALSE = 'x'"), (BooleanComparedWithNonBoolean, 1, 7));
        assert_eq!(rejection("a > 'x'"), (NotOrderable, 1, 5));
        assert_eq!(rejection("TRUE < 1"), (NotOrderable, 1, 1));
        assert_eq!(rejection("a > NULL"), (NotOrderable, 1, 5));
        assert_eq!(rejection("NOT a > 1"), (NotOrderable, 1, 1));
        assert_eq!(rejection("a > 1 > 2"), (NotOrderable, 1, 1));
        assert_eq!(rejection("(a IN ('x')) <= 2"), (NotOrderable, 1, 1));
        assert_eq!(rejection("a BETWEEN NULL AND 5"), (BetweenNullBound, 1, 11));
        assert_eq!(rejection(" a between 10 and 0"), (BetweenBoundsReversed, 1, 12));
        assert_eq!(rejection("a BETWEEN 1.5 AND 1"), (BetweenBoundsReversed, 1, 11));
        assert_eq!(rejection("a BETWEEN 1 AND 'x'"), (BetweenBoundsIncomparable, 1, 11));
        assert_eq!(rejection("a BETWEEN TRUE AND 'x'"), (BetweenBoundsReversed, 1, 11), "'x' reads as false");
        assert_eq!(rejection("a BETWEEN 'x' AND TRUE"), (BetweenBoundsIncomparable, 1, 11));
        assert_eq!(rejection("a BETWEEN 'a' AND 'b'"), (NotOrderable, 1, 11));
        assert_eq!(rejection("a NOT BETWEEN 'b' AND 1"), (NotOrderable, 1, 15));
        assert_eq!(rejection("a NOT BETWEEN NULL AND 1"), (NotOrderable, 1, 15));
        assert_eq!(rejection("'x' IN ('x')"), (InRequiresProperty, 1, 1));
        assert_eq!(rejection("-a NOT IN ('x')"), (InRequiresProperty, 1, 1));
        assert_eq!(rejection("a > 100000000000000000000000"), (IntegerOutOfRange, 1, 5));
        assert_eq!(rejection("a > 9223372036854775808"), (IntegerOutOfRange, 1, 5));
        assert_eq!(rejection("a > -9223372036854775808"), (IntegerOutOfRange, 1, 6));
        assert_eq!(rejection("a > 0.0"), (FloatOutOfRange, 1, 5));
        assert_eq!(rejection("a > 0e5"), (FloatOutOfRange, 1, 5));
        assert_eq!(rejection("a > 2e-324"), (FloatOutOfRange, 1, 5));
        assert_eq!(rejection("a > 1e309"), (FloatOutOfRange, 1, 5));
        // Not checked by Java, so accepted.
        assert_eq!(canonical("a NOT BETWEEN 5 AND 1"), "a NOT BETWEEN 5 AND 1");
        assert_eq!(canonical("a BETWEEN -1 AND -5"), "a BETWEEN -1 AND -5");
        assert_eq!(canonical("1 = TRUE"), "1 = TRUE");
        assert_eq!(canonical("TRUE = a"), "TRUE = a");
        assert_eq!(canonical("a > -'x'"), "a > -'x'");
        assert_eq!(canonical("NULL IS NULL"), "NULL IS NULL");
        assert_eq!(canonical("5 CONTAINS 'x'"), "5 CONTAINS 'x'");
        assert_eq!(canonical("a > 3e-324"), "a > 5e-324");
    }

    #[test]
    fn syntax_errors_name_what_was_expected_and_where() {
        let at = |text: &str| {
            let err = parse(text).unwrap_err();
            match err.kind {
                UnexpectedToken { found, expected } => (found, expected, err.position.column),
                other => panic!("{text:?}: {other:?}"),
            }
        };
        assert_eq!(at(""), ("the end of the expression", "a property, a literal, '(', NOT, '+' or '-'", 1));
        assert_eq!(
            at("  -- only a comment\n"),
            ("the end of the expression", "a property, a literal, '(', NOT, '+' or '-'", 1)
        );
        assert_eq!(at("a and between 2 and 10"), ("BETWEEN", "a property, a literal, '(', NOT, '+' or '-'", 7));
        assert_eq!(at("(a = 1"), ("the end of the expression", "')'", 7));
        assert_eq!(at("a IS 5"), ("an integer literal", "NOT or NULL after IS", 6));
        assert_eq!(at("a IS NOT 5"), ("an integer literal", "NULL after IS NOT", 10));
        assert_eq!(
            at("a NOT LIKE 'x'"),
            ("an identifier", "CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN after NOT", 7)
        );
        assert_eq!(at("a IN 'x'"), ("a string literal", "'(' after IN", 6));
        assert_eq!(at("a IN (1)"), ("an integer literal", "a string literal", 7));
        assert_eq!(at("a IN ('x' 'y')"), ("a string literal", "',' or ')' in the IN list", 11));
        assert_eq!(at("a IN ()"), ("')'", "a string literal", 7));
        assert_eq!(at("a BETWEEN 1 OR 2"), ("OR", "AND between the BETWEEN bounds", 13));
        assert_eq!(at("a CONTAINS b"), ("an identifier", "a string literal", 12));
        assert_eq!(at("value contains 123"), ("an integer literal", "a string literal", 16));
        assert_eq!(at("'axb' contains "), ("the end of the expression", "a string literal", 16));
        assert_eq!(at("a = = 1"), ("'='", "a property, a literal, '(', NOT, '+' or '-'", 5));
        assert_eq!(at("a = )"), ("')'", "a property, a literal, '(', NOT, '+' or '-'", 5));
        assert_eq!(at("a =\n\n  + )"), ("')'", "a property, a literal, '(', NOT, '+' or '-'", 5));
        let err = parse("a =\n\n  + )").unwrap_err();
        assert_eq!((err.position.line, err.position.offset), (3, 9));
    }

    #[test]
    fn error_display_names_the_position() {
        let err = parse("a = 1 AND\n  b >").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid SQL92 filter at line 2, column 6 (byte 15): expected a property, a literal, '(', NOT, '+' or '-', found the end of the expression"
        );
    }

    #[test]
    fn nesting_is_bounded() {
        let nested = |n: usize| format!("{}a = 1{}", "(".repeat(n), ")".repeat(n));
        assert!(parse(&nested(MAX_NESTING as usize)).is_ok());
        let err = parse(&nested(MAX_NESTING as usize + 1)).unwrap_err();
        assert_eq!((err.kind, err.position.offset), (TooDeep, MAX_NESTING as usize));
        assert!(parse(&format!("{}a", "NOT ".repeat(MAX_NESTING as usize))).is_ok());
        assert_eq!(parse(&format!("{}a", "NOT ".repeat(MAX_NESTING as usize + 1))).unwrap_err().kind, TooDeep);
        assert_eq!(parse(&"NOT ".repeat(100_000)).unwrap_err().kind, TooDeep);
        assert_eq!(parse(&format!("{}a", "- ".repeat(100_000))).unwrap_err().kind, TooDeep);
        assert_eq!(parse(&format!("{}a", "+".repeat(100_000))).unwrap_err().kind, TooDeep);

        let chain = |n: usize| vec!["a = 1"; n].join(" OR ");
        assert!(parse(&chain(MAX_DEPTH as usize - 2)).is_ok());
        assert_eq!(parse(&chain(MAX_DEPTH as usize + 5)).unwrap_err().kind, TooDeep);
        assert_eq!(parse(&chain(100_000)).unwrap_err().kind, TooDeep);
    }

    #[test]
    fn printing_parses_back_to_the_same_tree() {
        for text in [
            "a = 1 OR b <> 'x''y' AND NOT c IS NOT NULL",
            "- - 5 = a AND a > -(-b)",
            "a NOT BETWEEN -1.5e-7 AND 3000000000 OR (a) IN ('p', 'q')",
            "(a = 1) = (b = 2) AND 'x' CONTAINS 'y' AND -a ENDSWITH ''",
            "TRUE AND FALSE OR NULL AND a",
        ] {
            let expression = parse(text).unwrap();
            let printed = expression.to_string();
            assert_eq!(parse(&printed).unwrap(), expression, "{text:?} printed as {printed:?}");
        }
    }
}
