//! `KVTable`: a string-to-string table (GET_KVLIST_BY_NAMESPACE, the order-topic config returned
//! to a registering broker). Java: `org.apache.rocketmq.remoting.protocol.body.KVTable`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody};

/// Key -> value pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KVTable {
    /// The entries.
    #[serde(deserialize_with = "lenient::or_default")]
    pub table: BTreeMap<String, String>,
}

impl JsonBody for KVTable {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let table = KVTable { table: BTreeMap::from([("TopicA".to_owned(), "broker-a:4".to_owned())]) };
        assert_eq!(table.encode(), br#"{"table":{"TopicA":"broker-a:4"}}"#);
        assert_eq!(KVTable::decode(&table.encode()).unwrap(), table);
        assert_eq!(KVTable::decode(b"{}").unwrap(), KVTable::default());
    }
}
