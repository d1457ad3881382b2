//! The properties string: `name 0x01 value 0x02` repeated, carried both in the `properties`
//! request header and inside every stored record (fact sheet 3.3).
//!
//! Java: `MessageDecoder#messageProperties2String` and `#string2messageProperties`.

use std::borrow::Cow;
use std::collections::HashMap;

use super::keys;

/// Separates a property name from its value. Java: `MessageDecoder.NAME_VALUE_SEPARATOR`.
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// Ends every property, including the last. Java: `MessageDecoder.PROPERTY_SEPARATOR`.
pub const PROPERTY_SEPARATOR: char = '\u{2}';
/// Longest properties string a record can hold: its length prefix is a signed `int16`.
pub const MAX_PROPERTIES_LEN: usize = i16::MAX as usize;

/// Above this many entries, decoding removes duplicate names through a hash index instead of a
/// linear scan, so a hostile 32 KiB string cannot make decoding quadratic.
const LINEAR_DEDUP_MAX: usize = 16;

/// Message properties in insertion order.
///
/// Backed by a `Vec` rather than a map so that encoding is deterministic and reproduces the
/// order a producer chose (Java uses a `HashMap`, whose order is arbitrary but fixed for a given
/// key set; no peer depends on the order). Messages carry a handful of properties, so the
/// linear lookups are cheaper than hashing. Names are unique: [`insert`](Self::insert) replaces
/// an existing value in place.
///
/// The values share one text buffer (decoding copies the wire string once and points into
/// it): a send's properties cost two allocations, not one per value.
///
/// An entry survives an encode/decode round trip when its name is non-empty and contains neither
/// separator, and its value is non-empty and contains no [`PROPERTY_SEPARATOR`]. Other entries are
/// still encoded verbatim, as Java does, and then skipped by the tolerant decoder.
#[derive(Clone, Default)]
pub struct MessageProperties {
    /// Name and value range in `text`. Names RocketMQ defines are kept as `&'static str`.
    entries: Vec<(Cow<'static, str>, u32, u32)>,
    text: String,
    /// Bytes of `text` no value uses: a decoded string's names and separators, replaced or
    /// removed values.
    garbage: usize,
    /// A bit per name held ([`name_bit`]; a removed name's bit may stay): most lookups are for
    /// names a message does not carry (DELAY, the timer and transaction names on a plain
    /// send), and this answers those without comparing names.
    names: u64,
}

/// The bit of `name` in [`MessageProperties::names`]: from its length, last and middle
/// bytes, weighted so that the names a producer sets (KEYS, TAGS, WAIT, UNIQ_KEY and the
/// broker's CLUSTER) share no bit with the names a send looks for and rarely finds (DELAY,
/// the timer, transaction and light-queue names); 48 bits for RocketMQ's 66 names.
fn name_bit(name: &str) -> u64 {
    let b = name.as_bytes();
    let (last, middle) = (b.last().copied().unwrap_or(0), b.get(b.len() / 2).copied().unwrap_or(0));
    let h = (b.len() as u32).wrapping_add(u32::from(last) * 11).wrapping_add(u32::from(middle) * 27);
    1 << (h % 64)
}

impl PartialEq for MessageProperties {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for MessageProperties {}

impl std::fmt::Debug for MessageProperties {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// A property name: the static one when RocketMQ defines it, else owned.
pub trait PropertyName {
    /// The name to store.
    fn into_name(self) -> Cow<'static, str>;
}

impl PropertyName for &str {
    fn into_name(self) -> Cow<'static, str> {
        known_name(self).map_or_else(|| Cow::Owned(self.to_owned()), Cow::Borrowed)
    }
}

impl PropertyName for String {
    fn into_name(self) -> Cow<'static, str> {
        known_name(&self).map_or(Cow::Owned(self), Cow::Borrowed)
    }
}

impl PropertyName for &String {
    fn into_name(self) -> Cow<'static, str> {
        self.as_str().into_name()
    }
}

/// The static spelling of the names producers and the broker set on nearly every message.
fn known_name(name: &str) -> Option<&'static str> {
    const KNOWN: &[&str] = &[
        keys::KEYS,
        keys::TAGS,
        keys::WAIT,
        keys::DELAY,
        keys::UNIQ_KEY,
        keys::CLUSTER,
        keys::RETRY_TOPIC,
        keys::REAL_TOPIC,
        keys::REAL_QID,
        keys::TRAN_MSG,
        keys::PGROUP,
        keys::MIN_OFFSET,
        keys::MAX_OFFSET,
        keys::ORIGIN_MESSAGE_ID,
        keys::RECONSUME_TIME,
        keys::MAX_RECONSUME_TIMES,
        keys::CONSUME_START_TIME,
        keys::CORRELATION_ID,
        keys::REPLY_TO_CLIENT,
        keys::MSG_TYPE,
        keys::MSG_REGION,
        keys::TRACE_ON,
        keys::INSTANCE_ID,
        keys::TRANSACTION_ID,
        keys::SHARDING_KEY,
        keys::TIMER_DELIVER_MS,
        keys::TIMER_DELAY_SEC,
        keys::TIMER_DELAY_MS,
        keys::TIMER_OUT_MS,
        keys::TIMER_ENQUEUE_MS,
        keys::TIMER_DEQUEUE_MS,
        keys::TIMER_ROLL_TIMES,
        keys::DLQ_ORIGIN_TOPIC,
        keys::DLQ_ORIGIN_MESSAGE_ID,
        keys::TRACE_CONTEXT,
    ];
    KNOWN.iter().find(|k| k.len() == name.len() && **k == name).copied()
}

impl MessageProperties {
    /// An empty set of properties.
    pub fn new() -> Self {
        MessageProperties::default()
    }

    /// Number of properties.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no properties.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.position(name).map(|i| self.value(i))
    }

    /// Whether `name` is set.
    pub fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    /// Sets `name` to `value`, keeping its position if it was already set; returns the old value.
    pub fn insert(&mut self, name: impl PropertyName, value: impl AsRef<str>) -> Option<String> {
        let name = name.into_name();
        let range = self.push_text(value.as_ref());
        match self.position(&name) {
            Some(i) => {
                let old = self.value(i).to_owned();
                self.garbage += old.len();
                (self.entries[i].1, self.entries[i].2) = range;
                self.compact_if_wasteful();
                Some(old)
            }
            None => {
                if self.entries.capacity() == 0 {
                    // Room for a producer's usual few and what the broker adds.
                    self.entries.reserve(6);
                }
                self.push_entry(name, range);
                None
            }
        }
    }

    /// Removes `name`, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        let i = self.position(name)?;
        let old = self.value(i).to_owned();
        self.entries.remove(i);
        self.garbage += old.len();
        self.compact_if_wasteful();
        Some(old)
    }

    /// Adds a name not held yet, its value at `range` of the text.
    fn push_entry(&mut self, name: Cow<'static, str>, range: (u32, u32)) {
        self.names |= name_bit(&name);
        self.entries.push((name, range.0, range.1));
    }

    fn value(&self, i: usize) -> &str {
        let (_, start, end) = &self.entries[i];
        &self.text[*start as usize..*end as usize]
    }

    /// Appends `value` to the text; its range there.
    fn push_text(&mut self, value: &str) -> (u32, u32) {
        let start = self.text.len();
        self.text.push_str(value);
        // Properties travel in frames and records far below 4 GiB.
        (start as u32, self.text.len() as u32)
    }

    fn compact_if_wasteful(&mut self) {
        crate::shared_text::compact_if_wasteful(&mut self.text, &mut self.garbage, &mut self.entries);
    }

    /// The properties as `(name, value)` pairs in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.entries.iter().map(|(k, start, end)| (k.as_ref(), &self.text[*start as usize..*end as usize]))
    }

    /// Length in bytes of [`encode`](Self::encode)'s output, without building it.
    pub fn encoded_len(&self) -> usize {
        self.entries.iter().map(|(k, start, end)| k.len() + (end - start) as usize + 2).sum()
    }

    /// The wire string: `name 0x01 value 0x02` per entry, so it ends with 0x02 unless empty.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(self.encoded_len());
        self.encode_into(&mut out);
        out
    }

    /// Appends the wire string to `out`.
    pub fn encode_into(&self, out: &mut String) {
        for (name, value) in self.iter() {
            out.push_str(name);
            out.push(NAME_VALUE_SEPARATOR);
            out.push_str(value);
            out.push(PROPERTY_SEPARATOR);
        }
    }

    /// Parses a wire string tolerantly, as Java does: malformed segments are skipped (see
    /// [`iter_properties`]) and when a name repeats the later value wins, at the position of
    /// the first occurrence.
    pub fn decode(text: &str) -> Self {
        let mut props = MessageProperties::new();
        // The entries are sized once, with room for what the broker adds (CLUSTER, UNIQ_KEY),
        // from the segments counted by a byte count that vectorizes: an upper bound of the
        // entries, exact for a well-formed string.
        let count = text.bytes().filter(|&b| b == PROPERTY_SEPARATOR as u8).count()
            + usize::from(!text.is_empty() && !text.ends_with(PROPERTY_SEPARATOR));
        props.entries.reserve(count + 2);
        // The values point into one copy of the wire string, with room for the broker's own.
        props.text.reserve(text.len() + 64);
        props.text.push_str(text);
        // Where `value`, a slice of `text`, starts and ends in the copy.
        let range = |value: &str| {
            let start = value.as_ptr() as usize - text.as_ptr() as usize;
            (start as u32, (start + value.len()) as u32)
        };
        let skipped = |props: &MessageProperties| {
            text.len() - props.entries.iter().map(|(_, s, e)| (e - s) as usize).sum::<usize>()
        };
        if count <= LINEAR_DEDUP_MAX {
            for (name, value) in iter_properties(text) {
                let (start, end) = range(value);
                match props.position(name) {
                    Some(i) => (props.entries[i].1, props.entries[i].2) = (start, end),
                    None => props.push_entry(name.into_name(), (start, end)),
                }
            }
            props.garbage = skipped(&props);
            return props;
        }
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(count);
        for (name, value) in iter_properties(text) {
            let (start, end) = range(value);
            match index.get(name) {
                Some(&i) => (props.entries[i].1, props.entries[i].2) = (start, end),
                None => {
                    index.insert(name, props.entries.len());
                    props.push_entry(name.into_name(), (start, end));
                }
            }
        }
        props.garbage = skipped(&props);
        props
    }

    fn position(&self, name: &str) -> Option<usize> {
        if self.names & name_bit(name) == 0 {
            return None;
        }
        self.entries.iter().position(|(k, _, _)| k == name)
    }
}

impl<K: PropertyName, V: AsRef<str>> FromIterator<(K, V)> for MessageProperties {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut props = MessageProperties::new();
        props.extend(iter);
        props
    }
}

impl<K: PropertyName, V: AsRef<str>> Extend<(K, V)> for MessageProperties {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

/// Iterates over the well-formed `(name, value)` pairs of a wire string without allocating,
/// duplicates included, in order.
///
/// The string is split on 0x02 (the last segment may lack it). A segment counts only if its
/// first 0x01 has at least one byte before it and one after it: a non-empty name and a non-empty
/// value. Java additionally skips segments shorter than 3 characters, which that rule already
/// implies. Later 0x01 bytes belong to the value.
pub fn iter_properties(text: &str) -> PropertiesIter<'_> {
    PropertiesIter { rest: text }
}

/// The value of `name` in a wire string, without allocating. When the name repeats, the last
/// value wins, matching [`MessageProperties::decode`] and Java.
pub fn find_property<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let [value] = find_properties(text, [name]);
    value
}

/// The values of several `names` in a wire string, in one pass and without allocating; as
/// [`find_property`] for each.
pub fn find_properties<'a, const N: usize>(text: &'a str, names: [&str; N]) -> [Option<&'a str>; N] {
    let mut found = [None; N];
    for (k, v) in iter_properties(text) {
        if let Some(i) = names.iter().position(|n| *n == k) {
            found[i] = Some(v);
        }
    }
    found
}

/// Iterator returned by [`iter_properties`].
#[derive(Debug, Clone)]
pub struct PropertiesIter<'a> {
    /// What is left to split.
    rest: &'a str,
}

impl<'a> Iterator for PropertiesIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        // Both separators are ASCII, so every index found is a character boundary. Split by
        // byte: a `char` pattern searches with memchr and then compares the encoded char,
        // which for these short strings costs more than the plain scan.
        while !self.rest.is_empty() {
            let bytes = self.rest.as_bytes();
            let segment = match bytes.iter().position(|&b| b == PROPERTY_SEPARATOR as u8) {
                Some(end) => {
                    let segment = &self.rest[..end];
                    self.rest = &self.rest[end + 1..];
                    segment
                }
                None => std::mem::take(&mut self.rest),
            };
            if let Some(split) = segment.bytes().position(|b| b == NAME_VALUE_SEPARATOR as u8) {
                let (name, value) = (&segment[..split], &segment[split + 1..]);
                if !name.is_empty() && !value.is_empty() {
                    return Some((name, value));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_sends_names_share_no_bit_with_the_names_it_is_asked_for() {
        let carried = [keys::KEYS, keys::TAGS, keys::WAIT, keys::UNIQ_KEY, keys::CLUSTER];
        let mask = carried.iter().fold(0, |m, n| m | name_bit(n));
        for asked in [
            keys::DELAY,
            keys::TIMER_DELIVER_MS,
            keys::TIMER_DELAY_SEC,
            keys::TIMER_DELAY_MS,
            keys::TIMER_OUT_MS,
            keys::TRAN_MSG,
            keys::SHARDING_KEY,
            keys::INNER_MULTI_DISPATCH,
            keys::INNER_MULTI_QUEUE_OFFSET,
            keys::RETRY_TOPIC,
        ] {
            assert_eq!(mask & name_bit(asked), 0, "{asked}");
        }
        // Lookups stay exact whatever the bits say.
        let p: MessageProperties = carried.iter().map(|n| (*n, "v")).collect();
        assert!(carried.iter().all(|n| p.get(n) == Some("v")));
        assert_eq!(p.get(keys::DELAY), None);
    }

    #[test]
    fn values_stay_right_through_replacements_removals_and_compaction() {
        let mut p = MessageProperties::decode("A\u{1}1\u{2}B\u{1}2\u{2}A\u{1}3\u{2}");
        assert_eq!(p.get("A"), Some("3"), "the later value wins");
        for i in 0..2000 {
            assert!(p.insert("B", i.to_string()).is_some());
        }
        assert_eq!(p.get("B"), Some("1999"));
        assert_eq!(p.remove("A").as_deref(), Some("3"));
        p.insert("C", "x".repeat(3000));
        assert_eq!(p.encode(), format!("B\u{1}1999\u{2}C\u{1}{}\u{2}", "x".repeat(3000)));
        let built: MessageProperties = [("B", "1999".to_owned()), ("C", "x".repeat(3000))].into_iter().collect();
        assert_eq!(p, built, "equal by content, whatever the text's history");
        assert!(p.text.len() < 2 * p.encoded_len(), "replaced values compacted away: {}", p.text.len());
    }

    #[test]
    fn insert_replaces_in_place_and_keeps_order() {
        let mut p = MessageProperties::new();
        assert_eq!(p.insert("A", "1"), None);
        p.insert("B", "2");
        assert_eq!(p.insert("A", "3"), Some("1".to_owned()));
        assert_eq!(p.iter().collect::<Vec<_>>(), vec![("A", "3"), ("B", "2")]);
        assert_eq!(p.remove("A"), Some("3".to_owned()));
        assert_eq!(p.encode(), "B\u{1}2\u{2}");
        assert!(MessageProperties::new().encode().is_empty());
    }

    #[test]
    fn decode_skips_malformed_segments() {
        assert!(MessageProperties::decode("").is_empty());
        assert!(MessageProperties::decode("\u{2}\u{1}\u{2}a\u{1}\u{2}\u{1}b").is_empty());
        let p = MessageProperties::decode("ab\u{1}c");
        assert_eq!(p.get("ab"), Some("c"), "the last segment needs no trailing separator");
    }

    #[test]
    fn decode_handles_many_duplicates_like_a_few() {
        let mut text = String::new();
        for i in 0..100 {
            text.push_str(&format!("k{}\u{1}{}\u{2}", i % 7, i));
        }
        let p = MessageProperties::decode(&text);
        assert_eq!(p.len(), 7);
        assert_eq!(p.iter().next(), Some(("k0", "98")));
        assert_eq!(p.get("k6"), Some("97"));
        assert_eq!(find_property(&text, "k6"), Some("97"));
        assert_eq!(find_property(&text, "k7"), None);
    }

    #[test]
    fn splitting_keeps_later_separators_in_the_value_and_skips_empty_parts() {
        let text = "a\u{1}x\u{1}y\u{2}\u{2}\u{1}v\u{2}n\u{1}\u{2}é\u{1}ü\u{2}b\u{1}2";
        assert_eq!(iter_properties(text).collect::<Vec<_>>(), vec![("a", "x\u{1}y"), ("é", "ü"), ("b", "2")]);
        assert_eq!(iter_properties("\u{2}\u{2}").next(), None);
        assert_eq!(MessageProperties::decode(text).len(), 3);
    }

    #[test]
    fn several_names_are_found_in_one_pass_the_last_value_winning() {
        let text = "A\u{1}1\u{2}B\u{1}2\u{2}A\u{1}3\u{2}";
        assert_eq!(find_properties(text, ["A", "C", "B"]), [Some("3"), None, Some("2")]);
        assert_eq!(find_properties("", ["A"]), [None]);
    }
}
