//! `ExtFields`: the string map that carries a command's typed header.
//!
//! A header has about a dozen fields and every request builds and reads one, so the map is a
//! vector kept sorted by key (JSON output then has fastjson's alphabetical key order and
//! encoding is deterministic), keys are `&'static str` whenever they are names a header
//! declares or a decoder recognizes, and the values share one text buffer: building or
//! decoding a header allocates no key and no value of its own.

use std::borrow::Cow;

/// A field name: borrowed for the names headers use, owned for anything else received.
pub type ExtKey = Cow<'static, str>;

/// The custom-header map, sorted by key.
#[derive(Clone, Default)]
pub struct ExtFields {
    /// Key and the value's byte range in `text`, sorted by key.
    entries: Vec<(ExtKey, u32, u32)>,
    /// The values back to back. A replaced or removed value's bytes stay until `garbage`
    /// outweighs the live ones.
    text: String,
    /// Bytes of `text` no entry refers to.
    garbage: usize,
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
        ExtFields { entries: Vec::with_capacity(n), text: String::with_capacity(n * 16), garbage: 0 }
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _, _)| k.as_ref().cmp(key))
    }

    fn value(&self, i: usize) -> &str {
        let (_, start, end) = &self.entries[i];
        &self.text[*start as usize..*end as usize]
    }

    /// Sets `key` to `value`; returns the value it replaces.
    pub fn insert(&mut self, key: ExtKey, value: &str) -> Option<String> {
        self.insert_with(key, |text| text.push_str(value))
    }

    /// Sets `key` to the text `write` appends to the buffer it is given (a number is then
    /// printed in place, not into a string of its own); returns the value it replaces.
    pub fn insert_with(&mut self, key: ExtKey, write: impl FnOnce(&mut String)) -> Option<String> {
        match self.try_insert_with(key, |text| {
            write(text);
            Ok::<(), std::convert::Infallible>(())
        }) {
            Ok(replaced) => replaced,
            Err(never) => match never {},
        }
    }

    /// As [`insert_with`](Self::insert_with), for a `write` that may fail (a decoder writing
    /// a value as it reads it): on failure nothing is set and the map is as it was.
    ///
    /// # Errors
    /// What `write` returned.
    pub fn try_insert_with<E>(
        &mut self,
        key: ExtKey,
        write: impl FnOnce(&mut String) -> Result<(), E>,
    ) -> Result<Option<String>, E> {
        if self.entries.capacity() == 0 {
            // Room for a typical header at the first field, instead of growing field by field.
            self.entries.reserve(12);
            self.text.reserve(192);
        }
        let start = self.text.len();
        if let Err(e) = write(&mut self.text) {
            self.text.truncate(start);
            return Err(e);
        }
        Ok(self.index_value(key, start))
    }

    /// Points `key` at the value just appended to the text from `start` on.
    fn index_value(&mut self, key: ExtKey, start: usize) -> Option<String> {
        // Headers live in frames of at most 16 MiB, far below u32::MAX.
        let range = (start as u32, self.text.len() as u32);
        // Headers are usually built and sent in key order: append without a search.
        if self.entries.last().is_none_or(|(last, _, _)| last.as_ref() < key.as_ref()) {
            self.entries.push((key, range.0, range.1));
            return None;
        }
        match self.find(&key) {
            Ok(i) => {
                let old = self.value(i).to_owned();
                self.garbage += old.len();
                self.entries[i] = (key, range.0, range.1);
                self.compact_if_wasteful();
                Some(old)
            }
            Err(i) => {
                self.entries.insert(i, (key, range.0, range.1));
                None
            }
        }
    }

    fn compact_if_wasteful(&mut self) {
        crate::shared_text::compact_if_wasteful(&mut self.text, &mut self.garbage, &mut self.entries);
    }

    /// Index of `key`. A header has a dozen or so fields, often one-letter ones, and a scan
    /// that compares lengths first beats a binary search's calls to `memcmp` there.
    fn position(&self, key: &str) -> Option<usize> {
        if self.entries.len() > 24 {
            return self.find(key).ok();
        }
        self.entries.iter().position(|(k, _, _)| k.len() == key.len() && k.as_ref() == key)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.position(key).map(|i| self.value(i))
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.find(key).ok()?;
        let old = self.value(i).to_owned();
        self.entries.remove(i);
        self.garbage += old.len();
        self.compact_if_wasteful();
        Some(old)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Fields in key order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { fields: self, next: 0 }
    }

    /// Keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _, _)| k.as_ref())
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
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &str) -> bool) {
        let text = &self.text;
        let mut dropped = 0;
        self.entries.retain(|(k, start, end)| {
            let kept = keep(k, &text[*start as usize..*end as usize]);
            if !kept {
                dropped += (end - start) as usize;
            }
            kept
        });
        self.garbage += dropped;
        self.compact_if_wasteful();
    }
}

/// The fields of an [`ExtFields`] in key order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    fields: &'a ExtFields,
    next: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let fields = self.fields;
        let (k, _, _) = fields.entries.get(self.next)?;
        let value = fields.value(self.next);
        self.next += 1;
        Some((k.as_ref(), value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.fields.entries.len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a ExtFields {
    type Item = (&'a str, &'a str);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Equal when the same keys map to the same values (however the text buffers are laid out).
impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for ExtFields {}

impl std::fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut fields = ExtFields::new();
        for (k, v) in iter {
            fields.insert(intern_key(k.as_ref()), v.as_ref());
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
        assert_eq!(f.insert("topic".into(), "T"), None);
        assert_eq!(f.insert(intern_key("a"), "g"), None);
        assert_eq!(f.insert("zeta".to_owned().into(), "z"), None);
        assert_eq!(f.insert("topic".into(), "T2"), Some("T".into()));
        assert_eq!(f.keys().collect::<Vec<_>>(), ["a", "topic", "zeta"]);
        assert_eq!(f.get("topic"), Some("T2"));
        assert_eq!(f.remove("a"), Some("g".into()));
        assert!(!f.contains_key("a"));
        f.retain(|k, _| k != "zeta");
        assert_eq!(f.iter().collect::<Vec<_>>(), [("topic", "T2")]);
        assert_eq!(format!("{f:?}"), r#"{"topic": "T2"}"#);
        let g: ExtFields = [("b", "2"), ("a", "1")].into_iter().collect();
        assert_eq!(g.keys().collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn lookups_agree_whether_scanned_or_searched() {
        for n in [3usize, 24, 25, 40] {
            let f: ExtFields = (0..n).map(|i| (format!("k{i}"), format!("v{i}"))).collect();
            for i in 0..n {
                assert_eq!(f.get(&format!("k{i}")), Some(format!("v{i}").as_str()), "{n} fields");
            }
            assert!(!f.contains_key("k"), "{n} fields");
            assert_eq!(f.get(&format!("k{n}")), None);
        }
    }

    #[test]
    fn a_field_set_over_and_over_does_not_grow_the_buffer() {
        let mut f = ExtFields::new();
        f.insert("other".into(), "kept");
        for i in 0..10_000 {
            f.insert("offset".into(), &format!("{i:>20}"));
        }
        assert_eq!(f.get("offset").map(str::trim), Some("9999"));
        assert_eq!(f.get("other"), Some("kept"));
        assert!(f.text.len() < 4096, "text buffer grew to {}", f.text.len());
        let mut g = ExtFields::new();
        g.insert("offset".into(), &format!("{:>20}", 9999));
        g.insert("other".into(), "kept");
        assert_eq!(f, g, "equal whatever the buffer layout");
    }
}
