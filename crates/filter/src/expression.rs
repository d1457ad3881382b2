//! A compiled filter expression and its evaluation against a message's properties.
//!
//! The tree has the same shape Java's parser builds, so that evaluation order, short-circuits
//! and null handling come out the same: `a <> b` is `NOT (a = b)`, `IS NULL` is an equality
//! with a NULL constant, `BETWEEN` is `>= AND <=` and `NOT BETWEEN` is `< OR >`, and a bare
//! property used as a condition is wrapped in a boolean cast. Parsing lives in `parser.rs`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;

use crate::error::EvalError;
use crate::java_number::{compare_doubles, parse_double};
use crate::value::{compare, Value};

/// A parsed SQL92 filter, ready to evaluate against messages. Build one with
/// [`parse`](crate::parse).
///
/// `Display` writes an equivalent expression in canonical form (keywords upper-case, operands
/// parenthesized where needed), which parses back to an equal `Expression`.
#[derive(Debug, Clone, PartialEq)]
pub struct Expression {
    pub(crate) root: Node,
}

/// The result of evaluating a filter: SQL's three-valued logic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Truth {
    /// The condition holds; only this matches.
    True,
    /// The condition does not hold.
    False,
    /// The condition depends on a property the message does not carry (SQL's unknown, Java's
    /// `null` result).
    Unknown,
}

impl Truth {
    /// Whether this is [`Truth::True`].
    pub fn is_true(self) -> bool {
        self == Truth::True
    }
}

/// Read access to a message's properties by name.
///
/// Java evaluates against `MessageEvaluationContext`, a `Map<String, String>` of the user and
/// system properties (TAGS, KEYS, ...); a missing name is null.
pub trait Properties {
    /// The value of property `name`, or `None` if the message does not carry it.
    fn property(&self, name: &str) -> Option<&str>;
}

impl<K, V, S> Properties for HashMap<K, V, S>
where
    K: std::borrow::Borrow<str> + Hash + Eq,
    V: AsRef<str>,
    S: BuildHasher,
{
    fn property(&self, name: &str) -> Option<&str> {
        self.get(name).map(AsRef::as_ref)
    }
}

impl<K, V> Properties for BTreeMap<K, V>
where
    K: std::borrow::Borrow<str> + Ord,
    V: AsRef<str>,
{
    fn property(&self, name: &str) -> Option<&str> {
        self.get(name).map(AsRef::as_ref)
    }
}

/// A list of name/value pairs; the first pair with the name wins.
impl<K: AsRef<str>, V: AsRef<str>> Properties for [(K, V)] {
    fn property(&self, name: &str) -> Option<&str> {
        self.iter().find(|(k, _)| k.as_ref() == name).map(|(_, v)| v.as_ref())
    }
}

/// [`Properties`] backed by a lookup function, for property stores this crate does not know.
/// Build one with [`properties_fn`].
pub struct PropertiesFn<'a, F> {
    lookup: F,
    // Ties the values' lifetime to this struct so `property` can hand them out.
    values: PhantomData<&'a str>,
}

impl<F> fmt::Debug for PropertiesFn<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PropertiesFn")
    }
}

/// Wraps a lookup function as [`Properties`]: `properties_fn(|name| message.get(name))`.
pub fn properties_fn<'a, F>(lookup: F) -> PropertiesFn<'a, F>
where
    F: Fn(&str) -> Option<&'a str>,
{
    PropertiesFn { lookup, values: PhantomData }
}

impl<'a, F> Properties for PropertiesFn<'a, F>
where
    F: Fn(&str) -> Option<&'a str>,
{
    fn property(&self, name: &str) -> Option<&str> {
        (self.lookup)(name)
    }
}

impl Expression {
    /// Evaluates the filter against one message's properties.
    ///
    /// Java: `Expression#evaluate` with a `MessageEvaluationContext`.
    ///
    /// Property values are strings. Compared with a number literal, a value is read as that
    /// literal's Java type: `Integer.valueOf` for integer literals that fit an int,
    /// `Long.valueOf` for larger ones, `Double.valueOf` for literals with a point or exponent.
    /// So `price > 100` fails on a price of "129.5" while `price > 100.0` works. Two properties
    /// ordered with `<`, `>` are both read as doubles; `=` on two strings compares the text.
    /// A missing property makes a comparison unknown, except that Java's `=` answers false (not
    /// unknown) when only its right side is missing.
    ///
    /// # Errors
    ///
    /// Where Java's evaluation throws: a property compared with a number that is not a valid
    /// Java number of that type, or a boolean compared with a string in the order Java cannot
    /// handle. Evaluation stops at the first such comparison it reaches, in Java's order, so
    /// `TRUE OR a > 1` never fails but `a > 1 OR TRUE` fails when `a` is not a number.
    pub fn evaluate<P: Properties + ?Sized>(&self, properties: &P) -> Result<Truth, EvalError> {
        Ok(match eval(&self.root, properties)? {
            Value::Bool(true) => Truth::True,
            Value::Bool(false) => Truth::False,
            // The root is always boolean-typed (the parser guarantees it), so this is null.
            _ => Truth::Unknown,
        })
    }

    /// Whether a message with these properties passes the filter: only a [`Truth::True`]
    /// result does, and an evaluation error counts as no match, as in Java's
    /// `ExpressionMessageFilter#isMatchedByCommitLog`.
    pub fn matches<P: Properties + ?Sized>(&self, properties: &P) -> bool {
        matches!(self.evaluate(properties), Ok(Truth::True))
    }
}

/// One node of the tree. Each variant names the Java class that behaves the same way.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// `ConstantExpression` (numbers, strings) and `BooleanConstantExpression` (TRUE, FALSE,
    /// NULL).
    Literal(Literal),
    /// `PropertyExpression`.
    Property(Box<str>),
    /// `UnaryExpression.createNegate`.
    Negate(Box<Node>),
    /// `UnaryExpression.createNOT`; the operand is boolean-typed.
    Not(Box<Node>),
    /// `UnaryExpression.createBooleanCast`: a property used as a condition.
    BooleanCast(Box<Node>),
    /// `LogicExpression.createAND`.
    And(Box<Node>, Box<Node>),
    /// `LogicExpression.createOR`.
    Or(Box<Node>, Box<Node>),
    /// `ComparisonExpression.doCreateEqual`; also `IS NULL` with a NULL literal on the right.
    Equal(Box<Node>, Box<Node>),
    /// `ComparisonExpression.createGreaterThan` and friends.
    Order(OrderOp, Box<Node>, Box<Node>),
    /// `ComparisonExpression.createBetween` (`value >= low AND value <= high`) and
    /// `createNotBetween` (`value < low OR value > high`). Java builds those trees with the
    /// value shared by both comparisons; evaluating it once gives the same result, and a
    /// separate node avoids copying the value's subtree.
    Between { value: Box<Node>, low: Box<Node>, high: Box<Node>, negated: bool },
    /// `UnaryExpression.createInExpression`.
    In { property: Box<str>, values: InList, negated: bool },
    /// `ComparisonExpression.ContainsExpression` and friends.
    Text { op: TextOp, negated: bool, operand: Box<Node>, pattern: Box<str> },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Literal {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(Box<str>),
}

impl Literal {
    pub(crate) fn value(&self) -> Value<'_> {
        match self {
            Literal::Null => Value::Null,
            Literal::Bool(b) => Value::Bool(*b),
            Literal::Int(i) => Value::Int(*i),
            Literal::Long(l) => Value::Long(*l),
            Literal::Double(d) => Value::Double(*d),
            Literal::Str(s) => Value::Str(s),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OrderOp {
    Gt,
    Ge,
    Lt,
    Le,
}

impl OrderOp {
    fn holds(self, ordering: std::cmp::Ordering) -> bool {
        match self {
            OrderOp::Gt => ordering.is_gt(),
            OrderOp::Ge => ordering.is_ge(),
            OrderOp::Lt => ordering.is_lt(),
            OrderOp::Le => ordering.is_le(),
        }
    }

    fn padded_symbol(self) -> &'static str {
        match self {
            OrderOp::Gt => " > ",
            OrderOp::Ge => " >= ",
            OrderOp::Lt => " < ",
            OrderOp::Le => " <= ",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextOp {
    Contains,
    StartsWith,
    EndsWith,
}

impl TextOp {
    fn holds(self, haystack: &str, pattern: &str) -> bool {
        match self {
            TextOp::Contains => haystack.contains(pattern),
            TextOp::StartsWith => haystack.starts_with(pattern),
            TextOp::EndsWith => haystack.ends_with(pattern),
        }
    }

    fn keyword(self) -> &'static str {
        match self {
            TextOp::Contains => "CONTAINS",
            TextOp::StartsWith => "STARTSWITH",
            TextOp::EndsWith => "ENDSWITH",
        }
    }
}

/// The string list of an `IN`, sorted and without duplicates so lookups are a binary search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InList(Vec<Box<str>>);

impl InList {
    pub(crate) fn new(mut values: Vec<Box<str>>) -> InList {
        values.sort_unstable();
        values.dedup();
        InList(values)
    }

    fn contains(&self, value: &str) -> bool {
        self.0.binary_search_by(|v| (**v).cmp(value)).is_ok()
    }
}

/// Evaluates `node`, in Java's operand order. This is where evaluation recurses, so it only
/// dispatches: unoptimized builds give a function one stack slot per temporary of every
/// branch, and keeping the branches in helpers keeps the per-level cost small.
fn eval<'a, P: Properties + ?Sized>(node: &'a Node, props: &'a P) -> Result<Value<'a>, EvalError> {
    match node {
        Node::Literal(literal) => Ok(literal.value()),
        Node::Property(name) => Ok(props.property(name).map_or(Value::Null, Value::Str)),
        Node::Negate(operand) => eval(operand, props).map(negate),
        Node::Not(operand) => eval(operand, props).map(not),
        Node::BooleanCast(operand) => eval(operand, props).map(boolean_cast),
        Node::And(left, right) => eval_and(left, right, props),
        Node::Or(left, right) => eval_or(left, right, props),
        Node::Equal(left, right) => eval_equal(left, right, props),
        Node::Order(op, left, right) => eval_order(*op, left, right, props),
        Node::Between { value, low, high, negated } => eval_between(value, low, high, *negated, props),
        Node::In { property, values, negated } => Ok(eval_in(property, values, *negated, props)),
        Node::Text { op, negated, operand, pattern } => eval_text(*op, *negated, operand, pattern, props),
    }
}

/// Java negates numbers only; a string or boolean gives null.
fn negate(value: Value<'_>) -> Value<'_> {
    match value {
        Value::Int(i) => Value::Int(i.wrapping_neg()),
        Value::Long(l) => Value::Long(l.wrapping_neg()),
        Value::Double(d) => Value::Double(-d),
        _ => Value::Null,
    }
}

fn not(value: Value<'_>) -> Value<'_> {
    match value {
        Value::Bool(b) => Value::Bool(!b),
        _ => Value::Null,
    }
}

/// Java: `createBooleanCast`. Property values are strings, never Boolean objects, so a
/// present property casts to false.
fn boolean_cast(value: Value<'_>) -> Value<'_> {
    match value {
        Value::Null => Value::Null,
        Value::Bool(b) => Value::Bool(b),
        _ => Value::Bool(false),
    }
}

/// Java: `LogicExpression.createAND`. The right side is skipped when the left decides, which
/// matters because the right side might fail.
fn eval_and<'a, P: Properties + ?Sized>(left: &'a Node, right: &'a Node, props: &'a P) -> Result<Value<'a>, EvalError> {
    let l = truth(eval(left, props)?);
    if l == Some(false) {
        return Ok(Value::Bool(false));
    }
    Ok(and(l, truth(eval(right, props)?)))
}

/// Java: `LogicExpression.createOR`, short-circuiting like AND.
fn eval_or<'a, P: Properties + ?Sized>(left: &'a Node, right: &'a Node, props: &'a P) -> Result<Value<'a>, EvalError> {
    let l = truth(eval(left, props)?);
    if l == Some(true) {
        return Ok(Value::Bool(true));
    }
    Ok(or(l, truth(eval(right, props)?)))
}

/// Java: `ComparisonExpression.doCreateEqual`. Both sides are evaluated first.
fn eval_equal<'a, P: Properties + ?Sized>(
    left: &'a Node,
    right: &'a Node,
    props: &'a P,
) -> Result<Value<'a>, EvalError> {
    let l = eval(left, props)?;
    let r = eval(right, props)?;
    Ok(match (l, r) {
        (Value::Null, Value::Null) => Value::Bool(true),
        // Java answers null only when the left side is null; a null right side (including
        // IS NULL on a present value) is simply not equal.
        (Value::Null, _) => Value::Null,
        (_, Value::Null) => Value::Bool(false),
        (l, r) => Value::Bool(compare(l, r)?.is_eq()),
    })
}

fn eval_order<'a, P: Properties + ?Sized>(
    op: OrderOp,
    left: &'a Node,
    right: &'a Node,
    props: &'a P,
) -> Result<Value<'a>, EvalError> {
    let l = eval(left, props)?;
    order(op, l, right, props)
}

/// `value >= low AND value <= high`, or `value < low OR value > high` when negated, with the
/// value evaluated once.
fn eval_between<'a, P: Properties + ?Sized>(
    value: &'a Node,
    low: &'a Node,
    high: &'a Node,
    negated: bool,
    props: &'a P,
) -> Result<Value<'a>, EvalError> {
    let v = eval(value, props)?;
    if negated {
        let lt = truth(order(OrderOp::Lt, v, low, props)?);
        if lt == Some(true) {
            return Ok(Value::Bool(true));
        }
        Ok(or(lt, truth(order(OrderOp::Gt, v, high, props)?)))
    } else {
        let ge = truth(order(OrderOp::Ge, v, low, props)?);
        if ge == Some(false) {
            return Ok(Value::Bool(false));
        }
        Ok(and(ge, truth(order(OrderOp::Le, v, high, props)?)))
    }
}

/// Java: `UnaryExpression.createInExpression`; a missing property is null, not false.
fn eval_in<'a, P: Properties + ?Sized>(property: &str, values: &InList, negated: bool, props: &'a P) -> Value<'a> {
    match props.property(property) {
        None => Value::Null,
        Some(v) => Value::Bool(values.contains(v) != negated),
    }
}

/// Java: `ContainsExpression` and friends. Null and non-strings are false for both the plain
/// and the NOT form, and an empty pattern is false before the operand is even evaluated.
fn eval_text<'a, P: Properties + ?Sized>(
    op: TextOp,
    negated: bool,
    operand: &'a Node,
    pattern: &str,
    props: &'a P,
) -> Result<Value<'a>, EvalError> {
    if pattern.is_empty() {
        return Ok(Value::Bool(false));
    }
    Ok(match eval(operand, props)? {
        Value::Str(s) => Value::Bool(op.holds(s, pattern) != negated),
        _ => Value::Bool(false),
    })
}

/// Java: the `>`, `>=`, `<`, `<=` forms of `ComparisonExpression#evaluate`, with the left
/// side already evaluated. A null left side yields null without evaluating the right one.
fn order<'a, P: Properties + ?Sized>(
    op: OrderOp,
    left: Value<'a>,
    right: &'a Node,
    props: &'a P,
) -> Result<Value<'a>, EvalError> {
    if left == Value::Null {
        return Ok(Value::Null);
    }
    let ordering = match (left, eval(right, props)?) {
        (_, Value::Null) => return Ok(Value::Null),
        // Java refuses to order two strings and reads both as doubles instead.
        (Value::Str(l), Value::Str(r)) => compare_doubles(parse_double(l)?, parse_double(r)?),
        (l, r) => compare(l, r)?,
    };
    Ok(Value::Bool(op.holds(ordering)))
}

/// SQL AND of two truths where the left one is not false.
fn and(l: Option<bool>, r: Option<bool>) -> Value<'static> {
    match (l, r) {
        (_, Some(false)) | (Some(false), _) => Value::Bool(false),
        (Some(true), Some(true)) => Value::Bool(true),
        _ => Value::Null,
    }
}

/// SQL OR of two truths where the left one is not true.
fn or(l: Option<bool>, r: Option<bool>) -> Value<'static> {
    match (l, r) {
        (_, Some(true)) | (Some(true), _) => Value::Bool(true),
        (Some(false), Some(false)) => Value::Bool(false),
        _ => Value::Null,
    }
}

/// A boolean-typed operand's value as SQL truth; these only produce booleans or null.
fn truth(value: Value<'_>) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(b),
        _ => None,
    }
}

impl fmt::Display for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_node(f, &self.root)
    }
}

/// Writes a node. Like `eval`, this recursion point only dispatches, to keep frames small.
fn write_node(f: &mut fmt::Formatter<'_>, node: &Node) -> fmt::Result {
    match node {
        Node::Literal(literal) => write_literal(f, literal),
        Node::Property(name) => f.write_str(name),
        Node::BooleanCast(operand) => write_node(f, operand),
        Node::Negate(operand) => write_negate(f, operand),
        Node::Not(operand) => write_prefixed(f, "NOT ", operand),
        Node::And(l, r) => write_binary(f, l, " AND ", r),
        Node::Or(l, r) => write_binary(f, l, " OR ", r),
        Node::Equal(l, r) if matches!(**r, Node::Literal(Literal::Null)) => write_suffixed(f, l, " IS NULL"),
        Node::Equal(l, r) => write_binary(f, l, " = ", r),
        Node::Order(op, l, r) => write_binary(f, l, op.padded_symbol(), r),
        Node::Between { value, low, high, negated } => write_between(f, value, low, high, *negated),
        Node::In { property, values, negated } => write_in(f, property, values, *negated),
        Node::Text { op, negated, operand, pattern } => write_text(f, *op, *negated, operand, pattern),
    }
}

/// A minus sign, then the operand; anything but a single token is parenthesized so that no
/// `--` (a comment) can appear.
fn write_negate(f: &mut fmt::Formatter<'_>, operand: &Node) -> fmt::Result {
    f.write_str("-")?;
    match operand {
        Node::Literal(_) | Node::Property(_) => write_node(f, operand),
        _ => write_parenthesized(f, operand),
    }
}

fn write_prefixed(f: &mut fmt::Formatter<'_>, prefix: &str, operand: &Node) -> fmt::Result {
    f.write_str(prefix)?;
    write_operand(f, operand)
}

fn write_suffixed(f: &mut fmt::Formatter<'_>, operand: &Node, suffix: &str) -> fmt::Result {
    write_operand(f, operand)?;
    f.write_str(suffix)
}

fn write_binary(f: &mut fmt::Formatter<'_>, l: &Node, op: &str, r: &Node) -> fmt::Result {
    write_operand(f, l)?;
    f.write_str(op)?;
    write_operand(f, r)
}

fn write_between(f: &mut fmt::Formatter<'_>, value: &Node, low: &Node, high: &Node, negated: bool) -> fmt::Result {
    write_operand(f, value)?;
    f.write_str(if negated { " NOT BETWEEN " } else { " BETWEEN " })?;
    write_binary(f, low, " AND ", high)
}

fn write_in(f: &mut fmt::Formatter<'_>, property: &str, values: &InList, negated: bool) -> fmt::Result {
    f.write_str(property)?;
    f.write_str(if negated { " NOT IN (" } else { " IN (" })?;
    for (i, v) in values.0.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write_string(f, v)?;
    }
    f.write_str(")")
}

fn write_text(f: &mut fmt::Formatter<'_>, op: TextOp, negated: bool, operand: &Node, pattern: &str) -> fmt::Result {
    write_operand(f, operand)?;
    f.write_str(if negated { " NOT " } else { " " })?;
    f.write_str(op.keyword())?;
    f.write_str(" ")?;
    write_string(f, pattern)
}

/// Writes an operand, in parentheses unless it is a single token or a negated one (`-5`).
/// Parentheses never change the tree, so this is always safe.
fn write_operand(f: &mut fmt::Formatter<'_>, node: &Node) -> fmt::Result {
    match node {
        Node::Literal(_) | Node::Property(_) | Node::BooleanCast(_) => write_node(f, node),
        Node::Negate(inner) if matches!(**inner, Node::Literal(_) | Node::Property(_)) => write_node(f, node),
        _ => write_parenthesized(f, node),
    }
}

fn write_parenthesized(f: &mut fmt::Formatter<'_>, node: &Node) -> fmt::Result {
    f.write_str("(")?;
    write_node(f, node)?;
    f.write_str(")")
}

fn write_literal(f: &mut fmt::Formatter<'_>, literal: &Literal) -> fmt::Result {
    match literal {
        Literal::Null => f.write_str("NULL"),
        Literal::Bool(true) => f.write_str("TRUE"),
        Literal::Bool(false) => f.write_str("FALSE"),
        Literal::Int(i) => write!(f, "{i}"),
        Literal::Long(l) => write!(f, "{l}"),
        // Debug prints the shortest text that reads back to the same double and always has a
        // '.' or an exponent, which is what the grammar's floating-point literal needs.
        Literal::Double(d) => write!(f, "{d:?}"),
        Literal::Str(s) => write_string(f, s),
    }
}

fn write_string(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("'")?;
    f.write_str(&s.replace('\'', "''"))?;
    f.write_str("'")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    fn eval_with(text: &str, props: &[(&str, &str)]) -> Result<Truth, EvalError> {
        parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}")).evaluate(props)
    }

    fn truth_of(text: &str, props: &[(&str, &str)]) -> Truth {
        eval_with(text, props).unwrap_or_else(|e| panic!("{text:?} with {props:?}: {e}"))
    }

    use Truth::{False, True, Unknown};

    #[test]
    fn logic_is_three_valued_and_short_circuits() {
        let props = [("t", "1"), ("f", "2")];
        for (text, expected) in [
            ("t = 1 AND f = 2", True),
            ("t = 1 AND f = 1", False),
            ("t = 1 AND missing = 1", Unknown),
            ("missing = 1 AND f = 1", False),
            ("t = 1 OR missing = 1", True),
            ("missing = 1 OR t = 1", True),
            ("missing = 1 OR t = 2", Unknown),
            ("t = 2 OR f = 1", False),
            ("NOT missing = 1", Unknown),
            ("NOT (t = 2)", True),
            ("NULL OR TRUE", True),
            ("NULL AND FALSE", False),
            ("NOT NULL", Unknown),
        ] {
            assert_eq!(truth_of(text, &props), expected, "{text}");
        }
        // The side that would fail is never evaluated when the other decides.
        let props = [("n", "abc")];
        assert_eq!(truth_of("TRUE OR n > 1", &props), True);
        assert_eq!(truth_of("FALSE AND n > 1", &props), False);
        assert!(eval_with("n > 1 OR TRUE", &props).is_err());
        assert!(eval_with("NULL OR n > 1", &props).is_err());
    }

    #[test]
    fn equality_with_a_missing_property_depends_on_the_side() {
        // Java answers null only for a null left side; a null right side is plain inequality.
        assert_eq!(truth_of("a = 'x'", &[]), Unknown);
        assert_eq!(truth_of("'x' = a", &[]), False);
        assert_eq!(truth_of("a <> 'x'", &[]), Unknown);
        assert_eq!(truth_of("'x' <> a", &[]), True);
        assert_eq!(truth_of("a = b", &[("a", "1")]), False);
        assert_eq!(truth_of("a = b", &[("b", "1")]), Unknown);
        assert_eq!(truth_of("a = b", &[]), True, "two nulls are equal");
    }

    #[test]
    fn is_null_tests_presence() {
        assert_eq!(truth_of("a IS NULL", &[]), True);
        assert_eq!(truth_of("a IS NULL", &[("a", "")]), False);
        assert_eq!(truth_of("a IS NOT NULL", &[("a", "")]), True);
        assert_eq!(truth_of("(a = 1) IS NULL", &[]), True);
        assert_eq!(truth_of("5 IS NULL", &[]), False);
    }

    #[test]
    fn numbers_compare_with_numeric_property_strings() {
        let props = [("i", "5"), ("l", "3000000000"), ("d", "2.5"), ("s", "abc"), ("sp", " 7 "), ("nan", "NaN")];
        for (text, expected) in [
            ("i = 5", Ok(True)),
            ("i = 5.0", Ok(True)),
            ("i > 4", Ok(True)),
            ("i BETWEEN 5 AND 5", Ok(True)),
            ("l > 2999999999", Ok(True)),
            ("d < 3", Err(EvalError::NumberFormat { target: "int" })),
            ("d < 3.0", Ok(True)),
            ("l > 5", Err(EvalError::NumberFormat { target: "int" })),
            ("s = 5", Err(EvalError::NumberFormat { target: "int" })),
            ("s <> 5", Err(EvalError::NumberFormat { target: "int" })),
            ("sp = 7", Err(EvalError::NumberFormat { target: "int" })),
            ("sp = 7.0", Ok(True)),
            ("nan > 1e300", Ok(True)),
            ("nan = 1.5", Ok(False)),
            ("i > d", Ok(True)),
            ("s > i", Err(EvalError::NumberFormat { target: "double" })),
            ("-i = -5", Ok(Unknown)),
        ] {
            assert_eq!(eval_with(text, &props), expected, "{text}");
        }
    }

    #[test]
    fn strings_and_booleans() {
        let props = [("a", "hello"), ("t", "TRUE"), ("q", "it's")];
        assert_eq!(truth_of("a = 'hello'", &props), True);
        assert_eq!(truth_of("a = 'Hello'", &props), False);
        assert_eq!(truth_of("q = 'it''s'", &props), True);
        assert_eq!(truth_of("t = TRUE", &props), True, "the string is read as a Java boolean");
        assert_eq!(truth_of("a = FALSE", &props), True, "anything but \"true\" reads as false");
        assert_eq!(eval_with("TRUE = t", &props), Err(EvalError::BooleanComparedWithString));
        assert_eq!(truth_of("1 = TRUE", &props), False);
        assert_eq!(truth_of("(a = 'hello') = TRUE", &props), True);
        // A bare property is a boolean cast, and property values are never booleans.
        assert_eq!(truth_of("t", &props), False);
        assert_eq!(truth_of("missing", &props), Unknown);
        assert_eq!(truth_of("NOT t", &props), True);
        // NOT binds tighter than =, so this compares a boolean with a string.
        assert_eq!(eval_with("NOT a = 'x'", &props), Err(EvalError::BooleanComparedWithString));
    }

    #[test]
    fn in_and_text_operators_treat_missing_properties_differently() {
        let props = [("a", "axb")];
        assert_eq!(truth_of("a IN ('axb', 'y')", &props), True);
        assert_eq!(truth_of("a NOT IN ('axb')", &props), False);
        assert_eq!(truth_of("missing IN ('x')", &props), Unknown);
        assert_eq!(truth_of("missing NOT IN ('x')", &props), Unknown);
        assert_eq!(truth_of("a CONTAINS 'x'", &props), True);
        assert_eq!(truth_of("a STARTSWITH 'ax'", &props), True);
        assert_eq!(truth_of("a ENDSWITH 'xb'", &props), True);
        assert_eq!(truth_of("a NOT CONTAINS 'z'", &props), True);
        assert_eq!(truth_of("missing CONTAINS 'x'", &props), False);
        assert_eq!(truth_of("missing NOT CONTAINS 'x'", &props), False);
        assert_eq!(truth_of("a CONTAINS ''", &props), False);
        assert_eq!(truth_of("a NOT CONTAINS ''", &props), False);
        assert_eq!(truth_of("5 CONTAINS '5'", &props), False, "only strings contain anything");
        assert_eq!(truth_of("'é€' STARTSWITH 'é'", &props), True);
    }

    #[test]
    fn between_is_two_comparisons_with_one_evaluation() {
        let props = [("a", "5"), ("s", "x")];
        assert_eq!(truth_of("a BETWEEN 5 AND 10", &props), True);
        assert_eq!(truth_of("a BETWEEN 6 AND 10", &props), False);
        assert_eq!(truth_of("a NOT BETWEEN 6 AND 10", &props), True);
        assert_eq!(truth_of("a NOT BETWEEN 1 AND 10", &props), False);
        assert_eq!(truth_of("missing BETWEEN 1 AND 10", &props), Unknown);
        assert_eq!(truth_of("a BETWEEN missing AND 10", &props), Unknown);
        assert_eq!(truth_of("a BETWEEN 6 AND s", &props), False, "the upper bound is never read");
        assert!(eval_with("a BETWEEN 1 AND s", &props).is_err());
        assert_eq!(truth_of("a NOT BETWEEN 10 AND 1", &props), True);
    }

    #[test]
    fn expressions_can_be_shared_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Expression>();
    }

    #[test]
    fn matches_only_on_true() {
        let filter = parse("a > 1").unwrap();
        assert!(filter.matches(&[("a", "2")][..]));
        assert!(!filter.matches(&[("a", "1")][..]));
        assert!(!filter.matches(&[("b", "2")][..]));
        assert!(!filter.matches(&[("a", "x")][..]), "an evaluation error is no match");
    }

    #[test]
    fn properties_come_from_maps_slices_and_functions() {
        let filter = parse("a = 'x' AND b = 'y'").unwrap();
        let owned: HashMap<String, String> = [("a".into(), "x".into()), ("b".into(), "y".into())].into();
        let borrowed: HashMap<&str, &str> = [("a", "x"), ("b", "y")].into();
        let tree: BTreeMap<String, &str> = [("a".into(), "x"), ("b".into(), "y")].into();
        let pairs = vec![("a".to_owned(), "x".to_owned()), ("b".to_owned(), "y".to_owned())];
        assert!(filter.matches(&owned));
        assert!(filter.matches(&borrowed));
        assert!(filter.matches(&tree));
        assert!(filter.matches(pairs.as_slice()));
        assert!(filter.matches(&properties_fn(|name| borrowed.get(name).copied())));
        let dynamic: &dyn Properties = &owned;
        assert!(filter.matches(dynamic));
    }
}
