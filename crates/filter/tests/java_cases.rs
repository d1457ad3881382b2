//! Checks the filter against results recorded from Java RocketMQ's own filter module
//! (tests/data/java_filter_cases.tsv): which expressions parse, and what each evaluates to
//! against a fixed set of messages.

use std::collections::HashMap;

use ferromq_filter::{parse, Truth};

/// The property maps the recorded results refer to, in column order.
fn messages() -> Vec<HashMap<&'static str, &'static str>> {
    let maps: [&[(&str, &str)]; 7] = [
        &[],
        &[("a", "5"), ("b", "x"), ("c", "true")],
        &[("a", "3000000000"), ("b", "2.5"), ("c", "abc")],
        &[("a", " 7 "), ("b", "NaN"), ("c", "-0.0")],
        &[("a", "5.5"), ("b", "0x10p0"), ("c", "1d")],
        &[
            ("a", "hello"),
            ("b", "-3"),
            ("c", "TRUE"),
            ("value", "axb"),
            ("TAGS", "''tag''"),
            ("up", "up"),
            ("low", "low"),
        ],
        &[("a", "3"), ("b", "5"), ("c", "6"), ("d", "1"), ("x", "axbdc")],
    ];
    maps.iter().map(|pairs| pairs.iter().copied().collect()).collect()
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            other => panic!("bad escape \\{other:?} in {text:?}"),
        }
    }
    out
}

/// What this crate answers for one expression, in the fixture's notation.
fn answer(expression: &str, messages: &[HashMap<&str, &str>]) -> String {
    let Ok(filter) = parse(expression) else {
        return "ERR".to_owned();
    };
    let results: Vec<&str> = messages
        .iter()
        .map(|props| match filter.evaluate(props) {
            Ok(Truth::True) => "T",
            Ok(Truth::False) => "F",
            Ok(Truth::Unknown) => "N",
            Err(_) => "E",
        })
        .collect();
    results.join(" ")
}

#[test]
fn parse_and_evaluation_match_java_rocketmq() {
    let data = include_str!("data/java_filter_cases.tsv");
    let messages = messages();
    let mut checked = 0;
    let mut failures = Vec::new();
    for line in data.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (expression, expected) = line.rsplit_once('\t').expect("expression, tab, expected");
        let expression = unescape(expression);
        let actual = answer(&expression, &messages);
        if actual != expected {
            failures.push(format!("{expression:?}: java {expected}, ours {actual}"));
        }
        checked += 1;
    }
    assert!(checked > 150, "only {checked} cases read");
    assert!(failures.is_empty(), "{} of {checked} differ:\n{}", failures.len(), failures.join("\n"));
}
