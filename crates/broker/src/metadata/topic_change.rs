//! One change of the topic table as the journal (`topics.json.journal`) records it: a topic
//! put or deleted, with the table's data version after the change.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use ferromq_protocol::body::{DataVersion, TopicConfig};

/// A journal record of the topic table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TopicChange {
    /// The table's version once the change is made.
    pub(crate) data_version: DataVersion,
    /// The topic as it is now (created or updated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) put: Option<TopicConfig>,
    /// A topic deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) delete: Option<String>,
}

impl TopicChange {
    /// `config` was created or updated.
    pub(crate) fn put(config: TopicConfig, data_version: DataVersion) -> Self {
        Self { data_version, put: Some(config), delete: None }
    }

    /// `topic` was deleted.
    pub(crate) fn delete(topic: &str, data_version: DataVersion) -> Self {
        Self { data_version, put: None, delete: Some(topic.to_owned()) }
    }

    /// Only the version moved.
    pub(crate) fn version(data_version: DataVersion) -> Self {
        Self { data_version, put: None, delete: None }
    }

    /// Replays the change onto a table loaded from the file.
    pub(crate) fn apply(self, topics: &mut HashMap<String, TopicConfig>, data_version: &mut DataVersion) {
        if let Some(topic) = self.delete {
            topics.remove(&topic);
        }
        if let Some(config) = self.put {
            topics.insert(config.topic_name.clone(), config);
        }
        *data_version = self.data_version;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaying_records_twice_gives_the_same_table() {
        // A crash between a compaction's file write and its journal cut replays records the
        // file already covers; the result must not change.
        let v = |counter| DataVersion { counter, state_version: 0, timestamp: 1 };
        let mut changed = TopicConfig::new("A", 4, 4);
        changed.perm = 4;
        let records = vec![
            TopicChange::put(TopicConfig::new("A", 1, 1), v(2)),
            TopicChange::put(TopicConfig::new("B", 1, 1), v(3)),
            TopicChange::put(changed.clone(), v(4)),
            TopicChange::delete("B", v(5)),
            TopicChange::version(v(6)),
        ];
        let mut topics = HashMap::new();
        let mut version = v(1);
        for r in records.clone() {
            r.apply(&mut topics, &mut version);
        }
        let once = (topics.clone(), version);
        for r in records {
            r.apply(&mut topics, &mut version);
        }
        assert_eq!((topics, version), once);
        assert_eq!(once.0.get("A"), Some(&changed));
        assert_eq!(once.1, v(6));
    }
}
