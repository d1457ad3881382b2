//! Subscription data from a tag expression. Java: `FilterAPI`.

use std::time::{SystemTime, UNIX_EPOCH};

use ferromq_protocol::body::{SubscriptionData, SUB_ALL};
use ferromq_protocol::message::java_string_hash;

/// Parses a tag expression (`TagA || TagB`, `*`) into subscription data.
/// Java: `FilterAPI#buildSubscriptionData`.
pub fn build_subscription(topic: &str, expression: &str) -> SubscriptionData {
    let expression = expression.trim();
    let mut sub = SubscriptionData {
        topic: topic.to_owned(),
        sub_string: expression.to_owned(),
        sub_version: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64),
        ..SubscriptionData::default()
    };
    if expression.is_empty() || expression == SUB_ALL {
        sub.sub_string = SUB_ALL.to_owned();
        return sub;
    }
    for tag in expression.split("||").map(str::trim).filter(|t| !t.is_empty()) {
        sub.tags_set.insert(tag.to_owned());
        sub.code_set.insert(java_string_hash(tag));
    }
    sub
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
