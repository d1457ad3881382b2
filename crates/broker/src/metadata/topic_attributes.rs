//! Topic attributes (RocketMQ 5): the `attributes` of UPDATE_AND_CREATE_TOPIC is a list of
//! changes (`+key=value` adds or replaces, `-key` removes) applied to the topic's current
//! attributes, checked against the attributes a topic may have. Java: `AttributeParser`,
//! `AttributeUtil#alterCurrentAttributes`, `TopicAttributes`.

use std::collections::BTreeMap;

/// What values an attribute takes.
enum Values {
    /// One of a fixed set.
    OneOf(&'static [&'static str]),
    /// An integer in a range.
    Range(i64, i64),
}

/// An attribute a topic may carry.
struct Attribute {
    name: &'static str,
    /// Whether an existing topic's value may change (the queue type and cleanup policy are
    /// fixed at creation).
    changeable: bool,
    values: Values,
}

/// Java: `TopicAttributes.ALL`.
const TOPIC_ATTRIBUTES: [Attribute; 4] = [
    Attribute { name: "queue.type", changeable: false, values: Values::OneOf(&["BatchCQ", "SimpleCQ"]) },
    Attribute { name: "cleanup.policy", changeable: false, values: Values::OneOf(&["DELETE", "COMPACTION"]) },
    Attribute {
        name: "message.type",
        changeable: true,
        values: Values::OneOf(&["UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"]),
    },
    Attribute { name: "reserve.time", changeable: true, values: Values::Range(-1, i64::MAX) },
];

/// Whether `changes` set `message.type` to MIXED, which a broker refuses unless
/// `enableMixedMessageType`.
pub(crate) fn sets_mixed_message_type(changes: &[AttributeChange]) -> bool {
    changes.iter().any(|c| c.add && c.key == "message.type" && c.value == "MIXED")
}

/// One requested change: `+key=value` (`add` true) or `-key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AttributeChange {
    pub key: String,
    pub value: String,
    pub add: bool,
}

/// Parses `+k1=v1,-k2,...` (empty: no change). Java: `AttributeParser#parseToMap`.
///
/// # Errors
/// The reason, in Java's words, for an entry without its sign or a key given twice.
pub(crate) fn parse_changes(text: &str) -> Result<Vec<AttributeChange>, String> {
    let mut changes: Vec<AttributeChange> = Vec::new();
    if text.is_empty() {
        return Ok(changes);
    }
    for item in text.split(',') {
        let change = match item.split_once('=') {
            Some((key, value)) => {
                if !key.contains('+') {
                    return Err(format!("add/alter attribute format is wrong: {key}"));
                }
                AttributeChange { key: real_key(key)?, value: value.to_owned(), add: true }
            }
            None => {
                if !item.contains('-') {
                    return Err(format!("delete attribute format is wrong: {item}"));
                }
                AttributeChange { key: real_key(item)?, value: String::new(), add: false }
            }
        };
        if changes.iter().any(|c| c.key == change.key) {
            return Err(format!("alter duplication key. key: {}", change.key));
        }
        changes.push(change);
    }
    Ok(changes)
}

/// The changes of a topic config's `attributes` map as UPDATE_AND_CREATE_TOPIC_LIST carries
/// it: `"+key": "value"` adds or replaces, `"-key"` removes. Java: `AttributeUtil` reading
/// the signed keys of `TopicConfig#getAttributes`.
///
/// # Errors
/// As [`parse_changes`], for a key without its sign.
pub(crate) fn changes_from_map(attributes: &BTreeMap<String, String>) -> Result<Vec<AttributeChange>, String> {
    attributes
        .iter()
        .map(|(signed, value)| match signed.chars().next() {
            Some('+') => Ok(AttributeChange { key: real_key(signed)?, value: value.clone(), add: true }),
            Some('-') => Ok(AttributeChange { key: real_key(signed)?, value: String::new(), add: false }),
            _ => Err(format!("add/alter attribute format is wrong: {signed}")),
        })
        .collect()
}

/// The key without its sign; a key holding a sign of its own is malformed.
fn real_key(signed: &str) -> Result<String, String> {
    let key = signed.get(1..).unwrap_or("");
    if key.is_empty() || key.contains('+') || key.contains('-') {
        return Err("kv string format wrong.".to_owned());
    }
    Ok(key.to_owned())
}

/// `current` with `changes` applied; a topic being created (`create`) may only add.
/// Java: `AttributeUtil#alterCurrentAttributes`.
///
/// # Errors
/// The reason, in Java's words: removing on create or a key the topic lacks, an unknown key,
/// changing a fixed attribute, or a value outside the attribute's set or range.
pub(crate) fn alter(
    create: bool,
    current: &BTreeMap<String, String>,
    changes: &[AttributeChange],
) -> Result<BTreeMap<String, String>, String> {
    let mut result = current.clone();
    for change in changes {
        if create && !change.add {
            return Err(format!("only add attribute is supported while creating topic. key: {}", change.key));
        }
        if !change.add && !current.contains_key(&change.key) {
            return Err(format!("attempt to delete a nonexistent key: {}", change.key));
        }
        let attribute = TOPIC_ATTRIBUTES
            .iter()
            .find(|a| a.name == change.key)
            .ok_or_else(|| format!("unsupported key: {}", change.key))?;
        if !create && !attribute.changeable {
            return Err(format!("attempt to update an unchangeable attribute. key: {}", change.key));
        }
        if change.add {
            verify(attribute, &change.value)?;
            result.insert(change.key.clone(), change.value.clone());
        } else {
            result.remove(&change.key);
        }
    }
    Ok(result)
}

fn verify(attribute: &Attribute, value: &str) -> Result<(), String> {
    match attribute.values {
        Values::OneOf(set) if set.contains(&value) => Ok(()),
        Values::OneOf(set) => Err(format!("value is not in set: [{}]", set.join(", "))),
        Values::Range(min, max) => match value.parse::<i64>() {
            Ok(v) if (min..=max).contains(&v) => Ok(()),
            Ok(_) => Err(format!("value is not in range({min}, {max})")),
            Err(_) => Err(format!("For input string: \"{value}\"")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn apply(create: bool, current: &[(&str, &str)], text: &str) -> Result<BTreeMap<String, String>, String> {
        alter(create, &map(current), &parse_changes(text)?)
    }

    #[test]
    fn an_update_merges_into_the_current_attributes() {
        let current = [("message.type", "FIFO"), ("queue.type", "SimpleCQ")];
        assert_eq!(apply(false, &current, "").unwrap(), map(&current), "no change keeps them all");
        assert_eq!(
            apply(false, &current, "+reserve.time=72").unwrap(),
            map(&[("message.type", "FIFO"), ("queue.type", "SimpleCQ"), ("reserve.time", "72")])
        );
        assert_eq!(apply(false, &current, "-message.type").unwrap(), map(&[("queue.type", "SimpleCQ")]));
        assert_eq!(apply(true, &[], "+message.type=DELAY,+queue.type=BatchCQ").unwrap().len(), 2);
    }

    #[test]
    fn bad_changes_are_refused_with_javas_reasons() {
        let current = [("queue.type", "SimpleCQ")];
        let refused = |create, text: &str| apply(create, &current, text).unwrap_err();
        assert_eq!(
            refused(true, "-queue.type"),
            "only add attribute is supported while creating topic. key: queue.type"
        );
        assert_eq!(refused(false, "-message.type"), "attempt to delete a nonexistent key: message.type");
        assert_eq!(refused(false, "+foo=1"), "unsupported key: foo");
        assert_eq!(
            refused(false, "+queue.type=BatchCQ"),
            "attempt to update an unchangeable attribute. key: queue.type"
        );
        assert!(refused(false, "+message.type=SOMETIMES").starts_with("value is not in set"));
        assert!(refused(false, "+reserve.time=-2").starts_with("value is not in range"));
        assert_eq!(refused(false, "message.type=FIFO"), "add/alter attribute format is wrong: message.type");
        assert_eq!(refused(false, "message.type"), "delete attribute format is wrong: message.type");
        assert_eq!(
            refused(false, "+message.type=FIFO,+message.type=NORMAL"),
            "alter duplication key. key: message.type"
        );
        assert_eq!(refused(false, "+=1"), "kv string format wrong.");
    }
}
