//! `GroupList`: a set of consumer group names (QUERY_TOPIC_CONSUME_BY_WHO 300).
//! Java: `org.apache.rocketmq.remoting.protocol.body.GroupList`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody};

/// Consumer group names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupList {
    /// The groups, sorted.
    #[serde(deserialize_with = "lenient::or_default")]
    pub group_list: BTreeSet<String>,
}

impl JsonBody for GroupList {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let list = GroupList { group_list: ["g2", "g1"].into_iter().map(String::from).collect() };
        assert_eq!(list.encode(), br#"{"groupList":["g1","g2"]}"#);
        assert_eq!(GroupList::decode(&list.encode()).unwrap(), list);
        assert_eq!(GroupList::decode(br#"{"groupList":null}"#).unwrap(), GroupList::default());
    }
}
