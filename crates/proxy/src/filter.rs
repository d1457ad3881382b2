//! Consumers' filter expressions as remoting subscription data (Java:
//! `GrpcConverter#buildSubscriptionData`), checked before any broker sees them.

use ferromq_protocol::body::{SubscriptionData, EXPRESSION_TYPE_SQL92};

use crate::convert::now_ms;
use crate::pb::{FilterExpression, FilterType};
use crate::status::{bad, ProxyResult};

/// The subscription data of `topic` with `expression`; TAG when the type is unspecified.
///
/// # Errors
/// ILLEGAL_FILTER_EXPRESSION when a SQL92 expression does not parse.
pub fn subscription_data(topic: &str, expression: &FilterExpression) -> ProxyResult<SubscriptionData> {
    if expression.r#type == FilterType::Sql as i32 {
        ferromq_filter::parse(&expression.expression).map_err(|e| {
            bad!(IllegalFilterExpression, "SQL92 filter {:?} does not parse: {e}", expression.expression)
        })?;
        return Ok(SubscriptionData {
            topic: topic.to_owned(),
            expression_type: EXPRESSION_TYPE_SQL92.to_owned(),
            sub_string: expression.expression.clone(),
            sub_version: now_ms(),
            ..SubscriptionData::default()
        });
    }
    if expression.expression.contains('|') && expression.expression.split("||").any(|t| t.contains('|')) {
        return Err(bad!(IllegalFilterExpression, "tag expression {:?} is malformed", expression.expression));
    }
    Ok(SubscriptionData::of_tags(topic, &expression.expression, now_ms()))
}

/// The expression type and text a POP request carries.
pub fn pop_expression(expression: &FilterExpression) -> (String, String) {
    if expression.r#type == FilterType::Sql as i32 {
        (EXPRESSION_TYPE_SQL92.to_owned(), expression.expression.clone())
    } else {
        let e = expression.expression.trim();
        ("TAG".to_owned(), if e.is_empty() { "*".to_owned() } else { e.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::Code;

    #[test]
    fn tags_and_sql() {
        let tags =
            subscription_data("T", &FilterExpression { r#type: FilterType::Tag as i32, expression: "a || b".into() })
                .unwrap();
        assert_eq!(tags.tags_set.len(), 2);
        let sql = FilterExpression { r#type: FilterType::Sql as i32, expression: "a > 1".into() };
        assert_eq!(subscription_data("T", &sql).unwrap().expression_type, "SQL92");
        let bad = FilterExpression { r#type: FilterType::Sql as i32, expression: "a >".into() };
        assert_eq!(subscription_data("T", &bad).unwrap_err().code, Code::IllegalFilterExpression);
    }
}
