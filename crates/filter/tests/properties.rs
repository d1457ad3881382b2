//! Property tests for the filter.
//!
//! 1. Random expression trees (Java-valid by construction) are printed as text in varied
//!    styles, parsed, and evaluated against random messages; the result must equal what a
//!    reference evaluator computes directly on the generated tree. The reference is written
//!    from Java's documented behaviour, independently of the crate's evaluator: it works on
//!    the un-desugared tree (BETWEEN, IN, IS NULL, <> as such), coerces by promotion, and
//!    knows Java's `Double.valueOf` results for the value pool from a table.
//! 2. Arbitrary text, and soups of grammar tokens, never make the parser panic; whatever
//!    parses prints back to text that parses to the same expression.

use std::cmp::Ordering;
use std::collections::HashMap;

use ferromq_filter::{parse, Truth};
use proptest::prelude::*;

// ----- the generated model -----

const NAMES: [&str; 3] = ["a", "b", "c"];

/// Property values, with Java's `Double.valueOf` of each (`None` = NumberFormatException).
/// Java's `Integer.valueOf`/`Long.valueOf` agree with Rust's `parse` on these ASCII strings.
const VALUES: [(&str, Option<f64>); 25] = [
    ("5", Some(5.0)),
    ("-3", Some(-3.0)),
    ("+7", Some(7.0)),
    ("2.5", Some(2.5)),
    ("1e3", Some(1000.0)),
    ("3000000000", Some(3e9)),
    ("abc", None),
    ("", None),
    ("true", None),
    ("NaN", Some(f64::NAN)),
    (" 7 ", Some(7.0)),
    ("0x10p0", Some(16.0)),
    ("1d", Some(1.0)),
    ("-0", Some(-0.0)),
    ("007", Some(7.0)),
    ("9223372036854775808", Some(9.223_372_036_854_776e18)),
    ("x", None),
    ("Infinity", Some(f64::INFINITY)),
    ("-0.0", Some(-0.0)),
    ("1.5f", Some(1.5)),
    ("2147483648", Some(2_147_483_648.0)),
    ("it's", None),
    ("10", Some(10.0)),
    ("0", Some(0.0)),
    // Every string literal the generator writes (`STRINGS`) needs its Java double here too.
    ("7", Some(7.0)),
];

const STRINGS: [&str; 8] = ["x", "", "5", "abc", "true", "it's", "7", "2.5"];

#[derive(Debug, Clone)]
enum Val {
    Prop(&'static str),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(&'static str),
    Bool(bool),
    Neg(Box<Val>),
}

#[derive(Debug, Clone, Copy)]
enum OrderOp {
    Gt,
    Ge,
    Lt,
    Le,
}

#[derive(Debug, Clone, Copy)]
enum TextOp {
    Contains,
    StartsWith,
    EndsWith,
}

#[derive(Debug, Clone)]
enum Side {
    Val(Val),
    Cond(Box<Cond>),
}

#[derive(Debug, Clone)]
enum Cond {
    Lit(Option<bool>),
    Bare(&'static str),
    Not(Box<Cond>),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Order(OrderOp, Val, Val),
    Eq { negated: bool, left: Side, right: Side },
    IsNull { negated: bool, operand: Val },
    Between { negated: bool, value: Val, low: Val, high: Val },
    In { negated: bool, prop: &'static str, list: Vec<&'static str> },
    Text { op: TextOp, negated: bool, operand: Val, pattern: &'static str },
}

// ----- strategies -----

fn numeric_leaf() -> impl Strategy<Value = Val> {
    prop_oneof![
        prop::sample::select(&NAMES[..]).prop_map(Val::Prop),
        (0i32..=12).prop_map(Val::Int),
        prop::sample::select(vec![100, i32::MAX]).prop_map(Val::Int),
        prop::sample::select(vec![2_147_483_648i64, 3_000_000_000, i64::MAX]).prop_map(Val::Long),
        prop::sample::select(vec![0.5, 2.5, 7.0, 1000.0, 1.5e-3, 3e9, 1e-320]).prop_map(Val::Double),
    ]
}

/// Any value operand.
fn val() -> impl Strategy<Value = Val> {
    let leaf = prop_oneof![
        4 => numeric_leaf(),
        1 => prop::sample::select(&STRINGS[..]).prop_map(Val::Str),
        1 => any::<bool>().prop_map(Val::Bool),
    ];
    leaf.prop_recursive(2, 4, 1, |inner| inner.prop_map(|v| Val::Neg(Box::new(v))))
}

/// Operands Java lets `<`, `>`, BETWEEN order: numbers, properties, negations of anything.
fn orderable() -> impl Strategy<Value = Val> {
    prop_oneof![3 => numeric_leaf(), 1 => val().prop_map(|v| Val::Neg(Box::new(v)))]
}

fn is_literal(v: &Val) -> bool {
    matches!(v, Val::Int(_) | Val::Long(_) | Val::Double(_) | Val::Str(_) | Val::Bool(_))
}

fn leaf_cond() -> impl Strategy<Value = Cond> {
    let order_op = prop::sample::select(vec![OrderOp::Gt, OrderOp::Ge, OrderOp::Lt, OrderOp::Le]);
    let text_op = prop::sample::select(vec![TextOp::Contains, TextOp::StartsWith, TextOp::EndsWith]);
    prop_oneof![
        1 => prop::sample::select(vec![Some(true), Some(false), None]).prop_map(Cond::Lit),
        1 => prop::sample::select(&NAMES[..]).prop_map(Cond::Bare),
        3 => (order_op, orderable(), orderable()).prop_map(|(op, l, r)| Cond::Order(op, l, r)),
        3 => (any::<bool>(), val(), val())
            // Java rejects a TRUE/FALSE literal compared with a number or string literal.
            .prop_filter("boolean literal = other literal", |(_, l, r)| {
                !(matches!(l, Val::Bool(_)) && is_literal(r) && !matches!(r, Val::Bool(_)))
            })
            .prop_map(|(negated, l, r)| Cond::Eq { negated, left: Side::Val(l), right: Side::Val(r) }),
        1 => (any::<bool>(), val()).prop_map(|(negated, operand)| Cond::IsNull { negated, operand }),
        2 => (any::<bool>(), orderable(), orderable(), orderable()).prop_map(|(negated, value, low, high)| {
            // Java rejects literal bounds in the wrong order (for BETWEEN, not NOT BETWEEN).
            let reversed = !negated
                && is_literal(&low)
                && is_literal(&high)
                && reference_compare(&literal(&high), &literal(&low)) == Ok(Ordering::Less);
            let (low, high) = if reversed { (high, low) } else { (low, high) };
            Cond::Between { negated, value, low, high }
        }),
        2 => (any::<bool>(), prop::sample::select(&NAMES[..]), prop::collection::vec(prop::sample::select(&STRINGS[..]), 1..5))
            .prop_map(|(negated, prop, list)| Cond::In { negated, prop, list }),
        2 => (text_op, any::<bool>(), val(), prop::sample::select(vec!["x", "", "a", "5", "'", "bc"]))
            .prop_map(|(op, negated, operand, pattern)| Cond::Text { op, negated, operand, pattern }),
    ]
}

fn cond() -> impl Strategy<Value = Cond> {
    leaf_cond().prop_recursive(4, 24, 2, |inner| {
        let compound_side = inner
            .clone()
            .prop_filter("a side must be a boolean expression", |c| !matches!(c, Cond::Bare(_) | Cond::Lit(_)));
        prop_oneof![
            inner.clone().prop_map(|c| Cond::Not(Box::new(c))),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| Cond::And(Box::new(l), Box::new(r))),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| Cond::Or(Box::new(l), Box::new(r))),
            (
                any::<bool>(),
                compound_side.clone(),
                prop_oneof![val().prop_map(Side::Val), compound_side.prop_map(|c| Side::Cond(Box::new(c)))]
            )
                .prop_map(|(negated, l, right)| Cond::Eq { negated, left: Side::Cond(Box::new(l)), right }),
        ]
    })
}

fn message() -> impl Strategy<Value = Vec<(&'static str, &'static str)>> {
    let value = prop::sample::select(VALUES.iter().map(|(s, _)| *s).collect::<Vec<_>>());
    prop::collection::vec((prop::sample::select(&NAMES[..]), value), 0..4)
}

// ----- printing the model as filter text -----

/// Prints the model with varied keyword case, blanks and comments, driven by `style`.
struct Printer {
    out: String,
    style: u64,
}

impl Printer {
    fn roll(&mut self, n: u64) -> u64 {
        self.style = self.style.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.style >> 33) % n
    }

    /// A separator between tokens: never empty, and never a `--` comment right after a minus
    /// sign (which would start a longer comment and swallow the sign).
    fn blank(&mut self) {
        let after_minus = self.out.ends_with('-');
        let choice = self.roll(12);
        let text = match choice {
            0 => "\t",
            1 => "\n",
            2 => "\r\n",
            3 => "  ",
            4 => " /* c */ ",
            5 if !after_minus => " -- c\n",
            _ => " ",
        };
        self.out.push_str(text);
    }

    fn keyword(&mut self, keyword: &str) {
        self.blank();
        match self.roll(3) {
            0 => self.out.push_str(keyword),
            1 => self.out.push_str(&keyword.to_lowercase()),
            _ => {
                let mixed: String = keyword
                    .chars()
                    .enumerate()
                    .map(|(i, c)| if i % 2 == 1 { c.to_ascii_lowercase() } else { c })
                    .collect();
                self.out.push_str(&mixed);
            }
        }
        self.blank();
    }

    fn string(&mut self, s: &str) {
        self.out.push('\'');
        self.out.push_str(&s.replace('\'', "''"));
        self.out.push('\'');
    }

    fn val(&mut self, v: &Val) {
        match v {
            Val::Prop(p) => self.out.push_str(p),
            Val::Int(i) => {
                self.out.push_str(&i.to_string());
                if *i != 0 && self.roll(4) == 0 {
                    self.out.push('L');
                }
            }
            Val::Long(l) => self.out.push_str(&l.to_string()),
            Val::Double(d) => {
                let text = if self.roll(2) == 0 { format!("{d:?}") } else { format!("{d:e}") };
                self.out.push_str(&text);
            }
            Val::Str(s) => self.string(s),
            Val::Bool(b) => self.out.push_str(if *b { "TRUE" } else { "FALSE" }),
            Val::Neg(inner) => {
                self.out.push('-');
                if matches!(**inner, Val::Neg(_)) || self.roll(3) == 0 {
                    self.out.push('(');
                    self.val(inner);
                    self.out.push(')');
                } else {
                    if self.roll(2) == 0 {
                        self.out.push(' ');
                    }
                    self.val(inner);
                }
            }
        }
    }

    fn side(&mut self, side: &Side) {
        match side {
            Side::Val(v) => self.val(v),
            Side::Cond(c) => self.parenthesized(c),
        }
    }

    fn parenthesized(&mut self, c: &Cond) {
        self.out.push('(');
        self.cond(c);
        self.out.push(')');
    }

    fn cond(&mut self, c: &Cond) {
        match c {
            Cond::Lit(Some(true)) => self.out.push_str("TRUE"),
            Cond::Lit(Some(false)) => self.out.push_str("FALSE"),
            Cond::Lit(None) => self.out.push_str("NULL"),
            Cond::Bare(p) => self.out.push_str(p),
            Cond::Not(inner) => {
                self.keyword("NOT");
                self.parenthesized(inner);
            }
            Cond::And(l, r) | Cond::Or(l, r) => {
                // AND binds tighter than OR, so an AND needs no parentheses inside an OR.
                let is_and = matches!(c, Cond::And(..));
                let bare_ok = |x: &Cond| match x {
                    Cond::Or(..) => false,
                    Cond::And(..) => !is_and,
                    _ => true,
                };
                if bare_ok(l) && self.roll(2) == 0 {
                    self.cond(l);
                } else {
                    self.parenthesized(l);
                }
                self.keyword(if is_and { "AND" } else { "OR" });
                if bare_ok(r) && !matches!(**r, Cond::And(..) | Cond::Or(..)) && self.roll(2) == 0 {
                    self.cond(r);
                } else {
                    self.parenthesized(r);
                }
            }
            Cond::Order(op, l, r) => {
                self.val(l);
                self.blank();
                self.out.push_str(match op {
                    OrderOp::Gt => ">",
                    OrderOp::Ge => ">=",
                    OrderOp::Lt => "<",
                    OrderOp::Le => "<=",
                });
                self.blank();
                self.val(r);
            }
            Cond::Eq { negated, left, right } => {
                self.side(left);
                self.blank();
                self.out.push_str(if *negated { "<>" } else { "=" });
                self.blank();
                self.side(right);
            }
            Cond::IsNull { negated, operand } => {
                self.val(operand);
                self.keyword("IS");
                if *negated {
                    self.keyword("NOT");
                }
                self.keyword("NULL");
            }
            Cond::Between { negated, value, low, high } => {
                self.val(value);
                if *negated {
                    self.keyword("NOT");
                }
                self.keyword("BETWEEN");
                self.val(low);
                self.keyword("AND");
                self.val(high);
            }
            Cond::In { negated, prop, list } => {
                self.out.push_str(prop);
                if *negated {
                    self.keyword("NOT");
                }
                self.keyword("IN");
                self.out.push('(');
                for (i, s) in list.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                        self.blank();
                    }
                    self.string(s);
                }
                self.out.push(')');
            }
            Cond::Text { op, negated, operand, pattern } => {
                self.val(operand);
                if *negated {
                    self.keyword("NOT");
                }
                self.keyword(match op {
                    TextOp::Contains => "CONTAINS",
                    TextOp::StartsWith => "STARTSWITH",
                    TextOp::EndsWith => "ENDSWITH",
                });
                self.string(pattern);
            }
        }
    }
}

fn print(c: &Cond, style: u64) -> String {
    let mut printer = Printer { out: String::new(), style };
    printer.cond(c);
    printer.out
}

// ----- the reference evaluator -----

/// A value during reference evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
enum R {
    Null,
    B(bool),
    I(i32),
    L(i64),
    D(f64),
    S(&'static str),
}

/// Evaluation failed where Java throws.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Fails;

type Props = HashMap<&'static str, &'static str>;

fn literal(v: &Val) -> R {
    match v {
        Val::Int(i) => R::I(*i),
        Val::Long(l) => R::L(*l),
        Val::Double(d) => R::D(*d),
        Val::Str(s) => R::S(s),
        Val::Bool(b) => R::B(*b),
        Val::Prop(_) | Val::Neg(_) => unreachable!("not a literal"),
    }
}

fn value(v: &Val, props: &Props) -> R {
    match v {
        Val::Prop(p) => props.get(p).map_or(R::Null, |s| R::S(s)),
        Val::Neg(inner) => match value(inner, props) {
            R::I(i) => R::I(i.wrapping_neg()),
            R::L(l) => R::L(l.wrapping_neg()),
            R::D(d) => R::D(-d),
            _ => R::Null,
        },
        literal_value => literal(literal_value),
    }
}

/// Java's `Double.compare`: a total order with -0.0 below 0.0 and NaN above everything.
fn java_double_order(a: f64, b: f64) -> Ordering {
    let canonical = |x: f64| if x.is_nan() { f64::NAN } else { x };
    canonical(a).total_cmp(&canonical(b))
}

fn java_double(s: &str) -> Result<f64, Fails> {
    VALUES.iter().find(|(v, _)| *v == s).and_then(|(_, d)| *d).ok_or(Fails)
}

/// Numbers as (rank, value): int < long < double; the lower-ranked side is promoted.
fn numeric(r: R) -> Option<(u8, f64, i64)> {
    match r {
        R::I(i) => Some((0, f64::from(i), i64::from(i))),
        R::L(l) => Some((1, l as f64, l)),
        R::D(d) => Some((2, d, 0)),
        _ => None,
    }
}

/// Reads a string as a number of the given rank, as Java's `valueOf` of that type would.
fn string_as(rank: u8, s: &'static str) -> Result<R, Fails> {
    match rank {
        0 => s.parse::<i32>().map(R::I).map_err(|_| Fails),
        1 => s.parse::<i64>().map(R::L).map_err(|_| Fails),
        _ => java_double(s).map(R::D),
    }
}

/// Java's comparison of two non-null values, written by promotion.
fn reference_compare(l: &R, r: &R) -> Result<Ordering, Fails> {
    match (*l, *r) {
        (R::S(a), R::S(b)) => Ok(a.encode_utf16().cmp(b.encode_utf16())),
        (R::B(a), R::B(b)) => Ok(a.cmp(&b)),
        (R::S(s), R::B(b)) => Ok(s.eq_ignore_ascii_case("true").cmp(&b)),
        (R::B(_), R::S(_)) => Err(Fails),
        (R::S(s), other) => reference_compare(&string_as(numeric(other).ok_or(Fails)?.0, s)?, &other),
        (other, R::S(s)) => reference_compare(&other, &string_as(numeric(other).ok_or(Fails)?.0, s)?),
        (a, b) => match (numeric(a), numeric(b)) {
            (Some((ra, da, ia)), Some((rb, db, ib))) => {
                Ok(if ra.max(rb) == 2 { java_double_order(da, db) } else { ia.cmp(&ib) })
            }
            // A boolean and a number: Java gives up and answers "less".
            _ => Ok(Ordering::Less),
        },
    }
}

fn order_holds(op: OrderOp, o: Ordering) -> bool {
    match op {
        OrderOp::Gt => o == Ordering::Greater,
        OrderOp::Ge => o != Ordering::Less,
        OrderOp::Lt => o == Ordering::Less,
        OrderOp::Le => o != Ordering::Greater,
    }
}

/// `l op r` for `<`, `<=`, `>`, `>=`: null if either side is (the right one unread when the
/// left is null); two strings are both read as doubles.
fn order(op: OrderOp, l: R, r: &Val, props: &Props) -> Result<Option<bool>, Fails> {
    if l == R::Null {
        return Ok(None);
    }
    let r = value(r, props);
    let ordering = match (l, r) {
        (_, R::Null) => return Ok(None),
        (R::S(a), R::S(b)) => java_double_order(java_double(a)?, java_double(b)?),
        (a, b) => reference_compare(&a, &b)?,
    };
    Ok(Some(order_holds(op, ordering)))
}

fn side(s: &Side, props: &Props) -> Result<R, Fails> {
    match s {
        Side::Val(v) => Ok(value(v, props)),
        Side::Cond(c) => Ok(reference(c, props)?.map_or(R::Null, R::B)),
    }
}

fn not(x: Option<bool>) -> Option<bool> {
    x.map(|b| !b)
}

/// The reference: Java's result for the generated tree (None = null).
fn reference(c: &Cond, props: &Props) -> Result<Option<bool>, Fails> {
    Ok(match c {
        Cond::Lit(x) => *x,
        // Properties are strings, and a string cast to boolean is false.
        Cond::Bare(p) => props.get(p).map(|_| false),
        Cond::Not(inner) => not(reference(inner, props)?),
        Cond::And(l, r) => match reference(l, props)? {
            Some(false) => Some(false),
            lv => match (lv, reference(r, props)?) {
                (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
        },
        Cond::Or(l, r) => match reference(l, props)? {
            Some(true) => Some(true),
            lv => match (lv, reference(r, props)?) {
                (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
        },
        Cond::Order(op, l, r) => order(*op, value(l, props), r, props)?,
        Cond::Eq { negated, left, right } => {
            let (l, r) = (side(left, props)?, side(right, props)?);
            let equal = match (l, r) {
                (R::Null, R::Null) => Some(true),
                (R::Null, _) => None,
                (_, R::Null) => Some(false),
                (a, b) => Some(reference_compare(&a, &b)? == Ordering::Equal),
            };
            if *negated {
                not(equal)
            } else {
                equal
            }
        }
        Cond::IsNull { negated, operand } => Some((value(operand, props) == R::Null) != *negated),
        Cond::Between { negated: false, value: v, low, high } => {
            let v = value(v, props);
            match order(OrderOp::Ge, v, low, props)? {
                Some(false) => Some(false),
                ge => match (ge, order(OrderOp::Le, v, high, props)?) {
                    (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                },
            }
        }
        Cond::Between { negated: true, value: v, low, high } => {
            let v = value(v, props);
            match order(OrderOp::Lt, v, low, props)? {
                Some(true) => Some(true),
                lt => match (lt, order(OrderOp::Gt, v, high, props)?) {
                    (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                },
            }
        }
        Cond::In { negated, prop, list } => props.get(prop).map(|v| list.contains(v) != *negated),
        Cond::Text { op, negated, operand, pattern } => {
            if pattern.is_empty() {
                Some(false)
            } else {
                match value(operand, props) {
                    R::S(s) => Some(
                        match op {
                            TextOp::Contains => s.contains(pattern),
                            TextOp::StartsWith => s.starts_with(pattern),
                            TextOp::EndsWith => s.ends_with(pattern),
                        } != *negated,
                    ),
                    _ => Some(false),
                }
            }
        }
    })
}

fn expected(c: &Cond, props: &Props) -> Result<Truth, Fails> {
    Ok(match reference(c, props)? {
        Some(true) => Truth::True,
        Some(false) => Truth::False,
        None => Truth::Unknown,
    })
}

// ----- the properties -----

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn parsed_text_evaluates_like_the_reference(
        c in cond(),
        style in any::<u64>(),
        messages in prop::collection::vec(message(), 4),
    ) {
        let text = print(&c, style);
        let filter = match parse(&text) {
            Ok(filter) => filter,
            Err(err) => return Err(TestCaseError::fail(format!("{text:?} did not parse: {err}"))),
        };
        for pairs in &messages {
            let props: Props = pairs.iter().copied().collect();
            let ours = filter.evaluate(&props).map_err(|_| Fails);
            prop_assert_eq!(ours, expected(&c, &props), "{:?} with {:?}", text, props);
        }
        let printed = filter.to_string();
        prop_assert_eq!(parse(&printed).ok(), Some(filter), "{:?} printed as {:?}", text, printed);
    }
}

/// Grammar-shaped fragments, some invalid, for the no-panic test.
const SOUP: [&str; 70] = [
    "a",
    "b",
    "$p",
    "_q",
    "note",
    "NOT",
    "not",
    "AND",
    "or",
    "BETWEEN",
    "IN",
    "TRUE",
    "false",
    "NULL",
    "IS",
    "CONTAINS",
    "StartsWith",
    "ENDSWITH",
    "0",
    "1",
    "5",
    "007",
    "0L",
    "5L",
    "3000000000",
    "9223372036854775808",
    "1.5",
    "5.",
    ".5",
    "1e3",
    "0.0",
    "1e400",
    "0x10",
    "1e",
    "'x'",
    "''",
    "'a''b'",
    "'",
    "=",
    "<>",
    ">",
    ">=",
    "<",
    "<=",
    "(",
    ")",
    ",",
    "+",
    "-",
    "--",
    "/**/",
    "/*",
    "*/",
    "-- c\n",
    "#",
    "!",
    ".",
    "\"",
    "é",
    "\u{0}",
    "\r",
    "\n",
    "\t",
    " ",
    "(",
    ")",
    "'5'",
    "-5",
    "a = 1",
    "a IN ('x')",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        let _ = parse(&text);
    }

    #[test]
    fn token_soup_never_panics_and_round_trips(
        tokens in prop::collection::vec(prop::sample::select(&SOUP[..]), 0..24),
        glue in prop::collection::vec(prop::sample::select(vec!["", " ", "  ", "\n"]), 24),
        pairs in message(),
    ) {
        let text: String = tokens.iter().zip(&glue).flat_map(|(t, g)| [*t, *g]).collect();
        if let Ok(filter) = parse(&text) {
            let props: Props = pairs.into_iter().collect();
            let _ = filter.evaluate(&props);
            let printed = filter.to_string();
            prop_assert_eq!(parse(&printed).ok(), Some(filter), "{:?} printed as {:?}", text, printed);
        }
    }
}
