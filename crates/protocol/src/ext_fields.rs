//! `ExtFields`: the string map that carries a command's typed header.
//!
//! A header has about a dozen fields and every request builds and reads one, so the map is a
//! vector kept sorted by key (JSON output then has fastjson's alphabetical key order and
//! encoding is deterministic), and keys are `&'static str` whenever they are names a header
//! declares or a decoder recognizes: no allocation per key.

use std::borrow::Cow;

/// A field name: borrowed for the names headers use, owned for anything else received.
pub type ExtKey = Cow<'static, str>;

/// The custom-header map, sorted by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtFields {
    entries: Vec<(ExtKey, String)>,
}

/// Field names of the headers on the hot paths (send, pull, offsets and their responses),
/// sorted, so a decoded key is looked up instead of allocated. Anything else is kept owned.
const KNOWN_KEYS: &[&str] = &[
    "MSG_REGION",
    "TRACE_ON",
    "bname",
    "bornTimestamp",
    "brokerName",
    "commitOffset",
    "consumerGroup",
    "defaultTopic",
    "defaultTopicQueueNums",
    "expressionType",
    "flag",
    "maxMsgNums",
    "maxOffset",
    "maxReconsumeTimes",
    "minOffset",
    "msgId",
    "nextBeginOffset",
    "offset",
    "producerGroup",
    "properties",
    "queueId",
    "queueOffset",
    "recallHandle",
    "reconsumeTimes",
    "subVersion",
    "subscription",
    "suggestWhichBrokerId",
    "suspendTimeoutMillis",
    "sysFlag",
    "topic",
    "transactionId",
    "unitMode",
];

/// The one-letter names of SEND_MESSAGE_V2's header, indexed by letter.
const LETTERS: [&str; 26] = [
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w",
    "x", "y", "z",
];

/// `key` as a static name when it is a known one, else owned. A string comparison costs about
/// what an allocation does, so one-letter names are indexed and longer ones are matched by
/// length first.
pub fn intern_key(key: &str) -> ExtKey {
    if let [b @ b'a'..=b'z'] = key.as_bytes() {
        return Cow::Borrowed(LETTERS[usize::from(b - b'a')]);
    }
    match KNOWN_KEYS.iter().find(|k| k.len() == key.len() && **k == key) {
        Some(k) => Cow::Borrowed(k),
        None => Cow::Owned(key.to_owned()),
    }
}

impl ExtFields {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty map with room for `n` fields.
    pub fn with_capacity(n: usize) -> Self {
        ExtFields { entries: Vec::with_capacity(n) }
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.as_ref().cmp(key))
    }

    /// Sets `key` to `value`; returns the value it replaces.
    pub fn insert(&mut self, key: ExtKey, value: String) -> Option<String> {
        // Headers are usually built and sent in key order: append without a search.
        if self.entries.last().is_none_or(|(last, _)| last.as_ref() < key.as_ref()) {
            self.entries.push((key, value));
            return None;
        }
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&String> {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Fields in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &String)> {
        self.entries.iter().map(|(k, v)| (k.as_ref(), v))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_ref())
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Keeps the fields `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &mut String) -> bool) {
        self.entries.retain_mut(|(k, v)| keep(k, v));
    }
}

impl<'a> IntoIterator for &'a ExtFields {
    type Item = (&'a str, &'a String);
    type IntoIter =
        std::iter::Map<std::slice::Iter<'a, (ExtKey, String)>, fn(&'a (ExtKey, String)) -> (&'a str, &'a String)>;

    fn into_iter(self) -> Self::IntoIter {
        fn pair((k, v): &(ExtKey, String)) -> (&str, &String) {
            (k.as_ref(), v)
        }
        self.entries.iter().map(pair)
    }
}

impl<K: AsRef<str>, V: Into<String>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut fields = ExtFields::new();
        for (k, v) in iter {
            fields.insert(intern_key(k.as_ref()), v.into());
        }
        fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_keys_are_sorted_and_interned() {
        assert!(KNOWN_KEYS.windows(2).all(|w| w[0] < w[1]), "binary search needs sorted names");
        assert!(matches!(intern_key("topic"), Cow::Borrowed("topic")));
        assert!(matches!(intern_key("someOtherField"), Cow::Owned(_)));
    }

    #[test]
    fn keeps_key_order_replaces_and_removes() {
        let mut f = ExtFields::new();
        assert_eq!(f.insert("topic".into(), "T".into()), None);
        assert_eq!(f.insert(intern_key("a"), "g".into()), None);
        assert_eq!(f.insert("zeta".to_owned().into(), "z".into()), None);
        assert_eq!(f.insert("topic".into(), "T2".into()), Some("T".into()));
        assert_eq!(f.keys().collect::<Vec<_>>(), ["a", "topic", "zeta"]);
        assert_eq!(f.get("topic").map(String::as_str), Some("T2"));
        assert_eq!(f.remove("a"), Some("g".into()));
        assert!(!f.contains_key("a"));
        f.retain(|k, _| k != "zeta");
        assert_eq!(f.iter().collect::<Vec<_>>(), [("topic", &"T2".to_owned())]);
        let g: ExtFields = [("b", "2"), ("a", "1")].into_iter().collect();
        assert_eq!(g.keys().collect::<Vec<_>>(), ["a", "b"]);
    }
}
