//! Message filters of pulls: tag hash codes (expression type `TAG`, the default) or a
//! compiled SQL92 expression over the message properties (`SQL92`, with
//! `enablePropertyFilter`). SQL expressions a consumer registered through its heartbeat are
//! compiled once and kept per topic and group with the subscription version they came with,
//! and the bloom-filter bits of `<group>#<topic>`. With `enableCalcFilterBitMap` (and the
//! store's `enableConsumeQueueExt`) every dispatched message is evaluated against the
//! registered expressions of its topic and the bits of those it matches are stored in its
//! ConsumeQueue extension unit; pulls then skip messages whose bitmap lacks their bits without
//! reading them. Java: `ExpressionMessageFilter`, `ConsumerFilterManager`,
//! `ConsumerFilterData`, `CommitLogDispatcherCalcBitMap`.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use ferromq_filter::{properties_fn, BloomFilter, Expression, FilterError};
use ferromq_protocol::message::{find_property, java_string_hash, RecordOrBlank, RecordView};
use ferromq_store::{CqExtUnit, MessageFilter};
use tracing::{info, warn};

/// Expression type of tag subscriptions.
pub(crate) const EXPRESSION_TYPE_TAG: &str = "TAG";
/// Expression type of SQL subscriptions.
pub(crate) const EXPRESSION_TYPE_SQL92: &str = "SQL92";

/// Java `ExpressionType.isTagType`: absent, empty or `TAG`.
pub(crate) fn is_tag_type(expression_type: Option<&str>) -> bool {
    matches!(expression_type, None | Some("") | Some(EXPRESSION_TYPE_TAG))
}

/// A compiled SQL92 subscription. Java: `ConsumerFilterData`.
#[derive(Debug)]
pub(crate) struct ConsumerFilterData {
    /// The expression as the consumer wrote it.
    pub expression: String,
    /// Its compiled form.
    pub compiled: Expression,
    /// The subscription version it was registered with.
    pub client_version: i64,
    /// When it was compiled (ms); bitmaps of messages stored before say nothing about it.
    pub born_time: i64,
    /// Its bloom-filter bit positions (heartbeat-registered expressions only).
    pub bloom_positions: Option<Vec<i32>>,
}

impl ConsumerFilterData {
    /// Whether `properties` (a record's properties string) match the expression.
    fn matches_properties(&self, properties: &str) -> bool {
        self.compiled.matches(&properties_fn(|name| find_property(properties, name)))
    }
}

/// Compiles `expression` of `expression_type` (only SQL92 compiles; other non-tag types are
/// not supported, as in Java's `FilterFactory`).
pub(crate) fn build(
    expression: &str,
    expression_type: &str,
    client_version: i64,
) -> Result<ConsumerFilterData, String> {
    if expression_type != EXPRESSION_TYPE_SQL92 {
        return Err(format!("expression type {expression_type} is not supported"));
    }
    let compiled = ferromq_filter::parse(expression).map_err(|e: FilterError| e.to_string())?;
    Ok(ConsumerFilterData {
        expression: expression.to_owned(),
        compiled,
        client_version,
        born_time: crate::broker::now_ms(),
        bloom_positions: None,
    })
}

/// SQL92 subscriptions registered through heartbeats, by topic and group. Java:
/// `ConsumerFilterManager`.
#[derive(Debug)]
pub(crate) struct ConsumerFilterManager {
    table: RwLock<HashMap<String, HashMap<String, Arc<ConsumerFilterData>>>>,
    bloom: BloomFilter,
}

impl Default for ConsumerFilterManager {
    fn default() -> Self {
        ConsumerFilterManager::new(20, 32)
    }
}

impl ConsumerFilterManager {
    /// A manager whose bloom filter is sized by `maxErrorRateOfBloomFilter` (%) and
    /// `expectConsumerNumUseFilter`; values Java would reject fall back to its defaults.
    pub(crate) fn new(max_error_rate_percent: i32, expected_consumers: i32) -> Self {
        let bloom = BloomFilter::new(max_error_rate_percent, expected_consumers).unwrap_or_else(|e| {
            warn!(error = %e, "bloom filter settings rejected; using 20% and 32");
            BloomFilter::new(20, 32).unwrap_or_else(|_| unreachable!("the defaults are valid"))
        });
        ConsumerFilterManager { table: RwLock::default(), bloom }
    }

    /// The bloom filter every bitmap is built with.
    pub(crate) fn bloom(&self) -> BloomFilter {
        self.bloom
    }

    /// The bitmap of a dispatched message of `topic`: the bits of every registered expression
    /// of the topic its properties match; `None` when the topic has none (no bitmap stored).
    pub(crate) fn calc_bit_map(&self, topic: &str, properties: &str) -> Option<Vec<u8>> {
        let datas: Vec<Arc<ConsumerFilterData>> =
            self.table.read().unwrap_or_else(PoisonError::into_inner).get(topic)?.values().cloned().collect();
        if datas.is_empty() {
            return None;
        }
        let mut bit_map = vec![0u8; self.bloom.byte_len()];
        for data in datas {
            let Some(positions) = &data.bloom_positions else { continue };
            if data.matches_properties(properties) {
                if let Err(e) = self.bloom.hash_to(&mut bit_map, positions) {
                    warn!(topic, expression = %data.expression, error = %e, "bloom bits not set");
                }
            }
        }
        Some(bit_map)
    }

    /// Registers (or replaces with a newer version) a group's SQL92 expression for a topic.
    /// An older version, or the same expression again, changes nothing. An expression that
    /// does not compile is logged and left out: pulls then get FILTER_DATA_NOT_EXIST.
    pub(crate) fn register(&self, topic: &str, group: &str, expression: &str, expression_type: &str, version: i64) {
        if is_tag_type(Some(expression_type)) {
            return;
        }
        if let Some(existing) = self.get(topic, group) {
            if version < existing.client_version
                || (existing.expression == expression && version == existing.client_version)
            {
                return;
            }
        }
        match build(expression, expression_type, version) {
            Ok(mut data) => {
                data.bloom_positions = Some(self.bloom.subscription_positions(group, topic));
                info!(topic, group, expression, version, "consumer filter registered");
                let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
                table.entry(topic.to_owned()).or_default().insert(group.to_owned(), Arc::new(data));
            }
            Err(e) => warn!(topic, group, expression, error = %e, "consumer filter expression does not compile"),
        }
    }

    /// The group's registered expression for a topic.
    pub(crate) fn get(&self, topic: &str, group: &str) -> Option<Arc<ConsumerFilterData>> {
        self.table.read().unwrap_or_else(PoisonError::into_inner).get(topic)?.get(group).cloned()
    }

    /// Keeps only the groups `alive` accepts (run when silent clients are dropped, so the
    /// table is bounded by the live consumer groups).
    pub(crate) fn retain_groups(&self, alive: impl Fn(&str) -> bool) {
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        table.retain(|_, groups| {
            groups.retain(|group, _| alive(group));
            !groups.is_empty()
        });
    }
}

/// What one pull accepts.
#[derive(Debug, Clone)]
pub(crate) enum PullFilter {
    /// Tag hash codes; `None` accepts everything.
    Tags(Option<Vec<i64>>),
    /// A SQL92 expression over the properties, and the bloom filter its bitmaps use.
    Sql(Arc<ConsumerFilterData>, BloomFilter),
}

impl PullFilter {
    /// A tag filter from a subscription string: `*` or empty accepts every message, else the
    /// Java hash codes of the `||`-separated tags.
    pub(crate) fn tags(sub_string: &str) -> PullFilter {
        let s = sub_string.trim();
        if s.is_empty() || s == "*" {
            return PullFilter::Tags(None);
        }
        PullFilter::Tags(Some(
            s.split("||").map(str::trim).filter(|t| !t.is_empty()).map(|t| i64::from(java_string_hash(t))).collect(),
        ))
    }

    /// The tag codes a parked pull waits for (`None`: any arrival may match).
    pub(crate) fn tag_codes(&self) -> Option<Vec<i64>> {
        match self {
            PullFilter::Tags(codes) => codes.clone(),
            PullFilter::Sql(..) => None,
        }
    }
}

impl MessageFilter for PullFilter {
    fn is_matched_by_consume_queue(&self, tags_code: i64, ext: Option<&CqExtUnit>) -> bool {
        match self {
            PullFilter::Tags(codes) => codes.as_ref().is_none_or(|c| c.contains(&tags_code)),
            PullFilter::Sql(data, bloom) => {
                // The bitmap rules a message out only if it was computed while this expression
                // was registered, with the same bloom filter, and lacks one of its bits.
                let (Some(positions), Some(ext)) = (&data.bloom_positions, ext) else { return true };
                let Some(bit_map) = ext.filter_bit_map.as_deref() else { return true };
                ext.msg_store_time < data.born_time || bloom.is_hit(bit_map, positions)
            }
        }
    }

    fn is_matched_by_commit_log(&self, record: &[u8]) -> bool {
        let PullFilter::Sql(data, _) = self else { return true };
        let Ok(RecordOrBlank::Record(view)) = RecordView::parse(record) else { return false };
        let Ok(properties) = view.properties_str() else { return false };
        data.matches_properties(properties)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registration_keeps_the_newest_compiling_expression() {
        let m = ConsumerFilterManager::default();
        m.register("T", "g", "a > 1", EXPRESSION_TYPE_SQL92, 5);
        assert_eq!(m.get("T", "g").unwrap().expression, "a > 1");
        m.register("T", "g", "a > 2", EXPRESSION_TYPE_SQL92, 4);
        assert_eq!(m.get("T", "g").unwrap().expression, "a > 1", "older version ignored");
        m.register("T", "g", "a >", EXPRESSION_TYPE_SQL92, 6);
        assert_eq!(m.get("T", "g").unwrap().expression, "a > 1", "a broken expression is not registered");
        m.register("T", "g", "b = 'x'", EXPRESSION_TYPE_SQL92, 7);
        assert_eq!(m.get("T", "g").unwrap().client_version, 7);
        m.register("T", "g2", "*", EXPRESSION_TYPE_TAG, 7);
        assert!(m.get("T", "g2").is_none(), "tag subscriptions are not kept here");
        m.retain_groups(|g| g != "g");
        assert!(m.get("T", "g").is_none());
    }

    #[test]
    fn tag_filters_and_types() {
        assert!(matches!(PullFilter::tags(" * "), PullFilter::Tags(None)));
        let f = PullFilter::tags("a || b");
        assert!(f.is_matched_by_consume_queue(i64::from(java_string_hash("b")), None));
        assert!(!f.is_matched_by_consume_queue(i64::from(java_string_hash("c")), None));
        assert!(is_tag_type(None) && is_tag_type(Some("")) && is_tag_type(Some("TAG")));
        assert!(!is_tag_type(Some("SQL92")) && !is_tag_type(Some("tag")));
        assert!(build("a = 1", "FOO", 0).unwrap_err().contains("not supported"));
    }
}

#[cfg(test)]
mod bloom_tests {
    use super::*;

    #[test]
    fn bitmaps_carry_the_bits_of_matching_registered_expressions() {
        let m = ConsumerFilterManager::default();
        assert_eq!(m.calc_bit_map("T", "a\u{1}1\u{2}"), None, "no expression registered");
        m.register("T", "g1", "a = 1", EXPRESSION_TYPE_SQL92, 1);
        m.register("T", "g2", "a = 2", EXPRESSION_TYPE_SQL92, 1);
        let bloom = m.bloom();
        assert_eq!(bloom.byte_len(), 14, "Java's defaults: 112 bits");
        let bit_map = m.calc_bit_map("T", "a\u{1}1\u{2}").unwrap();
        let g1 = m.get("T", "g1").unwrap();
        let g2 = m.get("T", "g2").unwrap();
        assert!(bloom.is_hit(&bit_map, g1.bloom_positions.as_ref().unwrap()));
        assert_eq!(g1.bloom_positions.as_deref(), Some(&bloom.positions("g1#T")[..]));
        // g2's bits may collide with g1's (a bloom filter), but not here with these names.
        assert!(!bloom.is_hit(&bit_map, g2.bloom_positions.as_ref().unwrap()));

        let unit = |store_time: i64, bits: &[u8]| CqExtUnit {
            tags_code: 0,
            msg_store_time: store_time,
            filter_bit_map: Some(bits.to_vec()),
        };
        let later = g2.born_time + 1;
        let f2 = PullFilter::Sql(g2.clone(), bloom);
        assert!(!f2.is_matched_by_consume_queue(0, Some(&unit(later, &bit_map))), "skipped by the bitmap");
        assert!(
            f2.is_matched_by_consume_queue(0, Some(&unit(g2.born_time - 1, &bit_map))),
            "stored before registration"
        );
        assert!(f2.is_matched_by_consume_queue(0, None), "no ext unit");
        assert!(f2.is_matched_by_consume_queue(0, Some(&unit(later, &[0u8; 3]))), "other bitmap length");
        let f1 = PullFilter::Sql(g1, bloom);
        assert!(f1.is_matched_by_consume_queue(0, Some(&unit(later, &bit_map))));
    }
}
