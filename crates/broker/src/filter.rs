//! Message filters of pulls: tag hash codes (expression type `TAG`, the default) or a
//! compiled SQL92 expression over the message properties (`SQL92`, with
//! `enablePropertyFilter`). SQL expressions a consumer registered through its heartbeat are
//! compiled once and kept per topic and group with the subscription version they came with.
//! Java: `ExpressionMessageFilter`, `ConsumerFilterManager`, `ConsumerFilterData`.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use ferromq_filter::{properties_fn, Expression, FilterError};
use ferromq_protocol::message::{find_property, java_string_hash, RecordOrBlank, RecordView};
use ferromq_store::MessageFilter;
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
    Ok(ConsumerFilterData { expression: expression.to_owned(), compiled, client_version })
}

/// SQL92 subscriptions registered through heartbeats, by topic and group. Java:
/// `ConsumerFilterManager`.
#[derive(Debug, Default)]
pub(crate) struct ConsumerFilterManager {
    table: RwLock<HashMap<String, HashMap<String, Arc<ConsumerFilterData>>>>,
}

impl ConsumerFilterManager {
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
            Ok(data) => {
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
    /// A SQL92 expression over the properties.
    Sql(Arc<ConsumerFilterData>),
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
            PullFilter::Sql(_) => None,
        }
    }
}

impl MessageFilter for PullFilter {
    fn is_matched_by_consume_queue(&self, tags_code: i64) -> bool {
        match self {
            PullFilter::Tags(codes) => codes.as_ref().is_none_or(|c| c.contains(&tags_code)),
            PullFilter::Sql(_) => true,
        }
    }

    fn is_matched_by_commit_log(&self, record: &[u8]) -> bool {
        let PullFilter::Sql(data) = self else { return true };
        let Ok(RecordOrBlank::Record(view)) = RecordView::parse(record) else { return false };
        let Ok(properties) = view.properties_str() else { return false };
        data.compiled.matches(&properties_fn(|name| find_property(properties, name)))
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
        assert!(f.is_matched_by_consume_queue(i64::from(java_string_hash("b"))));
        assert!(!f.is_matched_by_consume_queue(i64::from(java_string_hash("c"))));
        assert!(is_tag_type(None) && is_tag_type(Some("")) && is_tag_type(Some("TAG")));
        assert!(!is_tag_type(Some("SQL92")) && !is_tag_type(Some("tag")));
        assert!(build("a = 1", "FOO", 0).unwrap_err().contains("not supported"));
    }
}
