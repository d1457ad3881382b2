//! What a consumer subscribes with: [`MessageSelector`] (a tag expression or a SQL92 filter)
//! and the subscription data built from it. Java: `MessageSelector`, `FilterAPI`.
//!
//! Evaluating SQL92 is the broker's job; the client only carries the expression.

use std::time::{SystemTime, UNIX_EPOCH};

use ferromq_protocol::body::{SubscriptionData, EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG};

use crate::error::ClientError;

/// How a subscription picks messages on the broker. Java: `MessageSelector`.
///
/// A plain string converts into a tag selector, so `subscribe(topic, "TagA || TagB")` keeps
/// working where a selector is expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageSelector {
    sql: bool,
    expression: String,
}

impl MessageSelector {
    /// Messages whose properties satisfy a SQL92 expression, for example
    /// `a > 5 AND color = 'red'`. The broker must run with `enablePropertyFilter=true`.
    /// Java: `MessageSelector.bySql`.
    pub fn sql(expression: impl Into<String>) -> Self {
        MessageSelector { sql: true, expression: expression.into() }
    }

    /// Messages with one of the tags of `TagA || TagB`; `*` or empty means every message.
    /// Java: `MessageSelector.byTag`.
    pub fn tag(expression: impl Into<String>) -> Self {
        MessageSelector { sql: false, expression: expression.into() }
    }

    /// The expression as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// `TAG` or `SQL92`, as the protocol names them.
    pub fn expression_type(&self) -> &'static str {
        if self.sql {
            EXPRESSION_TYPE_SQL92
        } else {
            EXPRESSION_TYPE_TAG
        }
    }

    /// The subscription data of `topic` under this selector. Java: `FilterAPI#build`.
    ///
    /// # Errors
    /// [`ClientError::Validation`] for an empty SQL92 expression.
    pub fn subscription(&self, topic: &str) -> Result<SubscriptionData, ClientError> {
        if !self.sql {
            return Ok(build_subscription(topic, &self.expression));
        }
        if self.expression.trim().is_empty() {
            return Err(ClientError::Validation {
                topic: topic.to_owned(),
                reason: format!("Expression can't be null! {EXPRESSION_TYPE_SQL92}"),
            });
        }
        // A SQL92 subscription has no tags: the broker evaluates the expression, and the
        // client must not filter the pulled messages again.
        Ok(SubscriptionData {
            topic: topic.to_owned(),
            sub_string: self.expression.clone(),
            expression_type: EXPRESSION_TYPE_SQL92.to_owned(),
            sub_version: now_ms(),
            ..SubscriptionData::default()
        })
    }
}

impl From<&str> for MessageSelector {
    fn from(tag_expression: &str) -> Self {
        MessageSelector::tag(tag_expression)
    }
}

impl From<&String> for MessageSelector {
    fn from(tag_expression: &String) -> Self {
        MessageSelector::tag(tag_expression.as_str())
    }
}

impl From<String> for MessageSelector {
    fn from(tag_expression: String) -> Self {
        MessageSelector::tag(tag_expression)
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Parses a tag expression (`TagA || TagB`, `*`) into subscription data.
/// Java: `FilterAPI#buildSubscriptionData`.
pub fn build_subscription(topic: &str, expression: &str) -> SubscriptionData {
    SubscriptionData::of_tags(topic, expression, now_ms())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferromq_protocol::message::java_string_hash;

    #[test]
    fn tag_expressions_become_tag_and_code_sets() {
        let s = build_subscription("T", " TagA || TagB ||");
        assert_eq!(s.sub_string, "TagA || TagB ||");
        assert_eq!(s.tags_set.iter().map(String::as_str).collect::<Vec<_>>(), vec!["TagA", "TagB"]);
        assert!(s.code_set.contains(&java_string_hash("TagA")));
        assert!(s.sub_version > 0);
        let all = build_subscription("T", "*");
        assert!(all.tags_set.is_empty() && all.code_set.is_empty());
        assert_eq!(all.sub_string, "*");
    }

    #[test]
    fn sql_selectors_carry_the_expression_and_no_tags() {
        let s = MessageSelector::sql("a > 5 AND color = 'red'").subscription("T").unwrap();
        assert_eq!(s.expression_type, "SQL92");
        assert_eq!(s.sub_string, "a > 5 AND color = 'red'");
        assert!(s.tags_set.is_empty() && s.code_set.is_empty());
        assert!(!s.is_tag_type());
        assert!(s.sub_version > 0);
        let e = MessageSelector::sql("  ").subscription("T").unwrap_err();
        assert!(matches!(e, ClientError::Validation { .. }), "{e:?}");
    }

    #[test]
    fn strings_and_tag_selectors_are_tag_subscriptions() {
        let from_str: MessageSelector = "TagA || TagB".into();
        assert_eq!(from_str, MessageSelector::tag("TagA || TagB"));
        assert_eq!(from_str.expression_type(), "TAG");
        let s = from_str.subscription("T").unwrap();
        assert!(s.is_tag_type());
        assert_eq!(s.tags_set.len(), 2);
        assert_eq!(MessageSelector::tag("").subscription("T").unwrap().sub_string, "*");
    }
}
