//! One change of the subscription-group table as its journal
//! (`subscriptionGroup.json.journal`) records it: a group put or deleted, or a group's
//! forbidden bits on one topic, with the table's data version after the change.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use ferromq_protocol::body::{DataVersion, SubscriptionGroupConfig};

/// A journal record of the subscription-group table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GroupChange {
    /// The table's version once the change is made.
    pub(crate) data_version: DataVersion,
    /// The group as it is now (created or updated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) put: Option<SubscriptionGroupConfig>,
    /// A group deleted, with its forbidden entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) delete: Option<String>,
    /// A group's forbidden bits on one topic as they are now (0: the entry is gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) forbidden: Option<ForbiddenChange>,
}

/// The forbidden bits of `group` on `topic`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ForbiddenChange {
    pub(crate) group: String,
    pub(crate) topic: String,
    pub(crate) bits: i32,
}

/// The tables a change applies to.
pub(crate) struct GroupTables<'a> {
    pub(crate) groups: &'a mut HashMap<String, SubscriptionGroupConfig>,
    pub(crate) forbidden: &'a mut BTreeMap<String, BTreeMap<String, i32>>,
    pub(crate) data_version: &'a mut DataVersion,
}

impl GroupChange {
    fn version_only(data_version: DataVersion) -> Self {
        Self { data_version, put: None, delete: None, forbidden: None }
    }

    /// `config` was created or updated.
    pub(crate) fn put(config: SubscriptionGroupConfig, data_version: DataVersion) -> Self {
        Self { put: Some(config), ..Self::version_only(data_version) }
    }

    /// `group` was deleted.
    pub(crate) fn delete(group: &str, data_version: DataVersion) -> Self {
        Self { delete: Some(group.to_owned()), ..Self::version_only(data_version) }
    }

    /// `group`'s forbidden bits on `topic` became `bits`.
    pub(crate) fn forbidden(group: &str, topic: &str, bits: i32, data_version: DataVersion) -> Self {
        let forbidden = ForbiddenChange { group: group.to_owned(), topic: topic.to_owned(), bits };
        Self { forbidden: Some(forbidden), ..Self::version_only(data_version) }
    }

    /// Replays the change onto a table loaded from the file.
    pub(crate) fn apply(self, t: GroupTables<'_>) {
        if let Some(group) = self.delete {
            t.groups.remove(&group);
            t.forbidden.remove(&group);
        }
        if let Some(config) = self.put {
            t.groups.insert(config.group_name.clone(), config);
        }
        if let Some(f) = self.forbidden {
            set_forbidden(t.forbidden, &f.group, &f.topic, f.bits);
        }
        *t.data_version = self.data_version;
    }
}

/// Sets `group`'s bits on `topic`; 0 removes the entry, and a group left with none.
pub(crate) fn set_forbidden(table: &mut BTreeMap<String, BTreeMap<String, i32>>, group: &str, topic: &str, bits: i32) {
    if bits == 0 {
        if let Some(topics) = table.get_mut(group) {
            topics.remove(topic);
            if topics.is_empty() {
                table.remove(group);
            }
        }
    } else {
        table.entry(group.to_owned()).or_default().insert(topic.to_owned(), bits);
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
        let mut changed = SubscriptionGroupConfig::new("A");
        changed.retry_max_times = 3;
        let records = vec![
            GroupChange::put(SubscriptionGroupConfig::new("A"), v(2)),
            GroupChange::put(SubscriptionGroupConfig::new("B"), v(3)),
            GroupChange::forbidden("B", "T", 2, v(4)),
            GroupChange::forbidden("A", "T", 1, v(5)),
            GroupChange::forbidden("A", "U", 4, v(6)),
            GroupChange::forbidden("A", "T", 0, v(7)),
            GroupChange::put(changed.clone(), v(8)),
            GroupChange::delete("B", v(9)),
        ];
        let (mut groups, mut forbidden, mut version) = (HashMap::new(), BTreeMap::new(), v(1));
        let mut replay = |records: Vec<GroupChange>| {
            for r in records {
                r.apply(GroupTables { groups: &mut groups, forbidden: &mut forbidden, data_version: &mut version });
            }
            (groups.clone(), forbidden.clone(), version)
        };
        let once = replay(records.clone());
        assert_eq!(replay(records), once);
        assert_eq!(once.0.len(), 1);
        assert_eq!(once.0.get("A"), Some(&changed));
        assert_eq!(once.1, BTreeMap::from([("A".to_owned(), BTreeMap::from([("U".to_owned(), 4)]))]));
        assert_eq!(once.2, v(9));
    }

    #[test]
    fn records_are_one_json_object_each_and_read_back() {
        let v = DataVersion { counter: 7, state_version: 0, timestamp: 5 };
        for record in [
            GroupChange::put(SubscriptionGroupConfig::new("g"), v),
            GroupChange::delete("g", v),
            GroupChange::forbidden("g", "T", 3, v),
        ] {
            let line = serde_json::to_string(&record).unwrap();
            assert!(!line.contains('\n'), "{line}");
            assert_eq!(serde_json::from_str::<GroupChange>(&line).unwrap(), record);
        }
    }
}
