//! `<storePathRootDir>/config/topicQueueMapping.json`: the static topics' logic-queue mappings
//! this broker holds, one [`TopicQueueMappingDetail`] per topic. Written by
//! UPDATE_AND_CREATE_STATIC_TOPIC (persisted at once, as Java does), registered with name
//! servers as [`TopicQueueMappingInfo`]s, copied by slaves. Java: `TopicQueueMappingManager`.
//!
//! An update is fenced as Java fences it: a smaller epoch or another scope is refused, and for
//! every logic queue the broker already hosts, the items of a generation both lists have must
//! name the same physical queue (see [`static_topic::check_immutable`]); a logic queue the new
//! mapping leaves out keeps its old items (a newer epoch) or is refused (the same epoch).
//! `force` skips the fencing but still keeps the items of left-out queues.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use ferromq_protocol::body::static_topic::{self, MappingError};
use ferromq_protocol::body::{
    DataVersion, TopicQueueMappingDetail, TopicQueueMappingInfo, TopicQueueMappingSerializeWrapper,
};

use crate::metadata::{ConfigFile, MetadataError};

/// Why an update was refused or not saved.
#[derive(Debug, thiserror::Error)]
pub enum MappingUpdateError {
    /// The mapping breaks the rules.
    #[error(transparent)]
    Invalid(#[from] MappingError),
    /// The file could not be written.
    #[error(transparent)]
    Persist(#[from] MetadataError),
}

#[derive(Debug, Default)]
struct Table {
    data_version: DataVersion,
    mappings: BTreeMap<String, Arc<TopicQueueMappingDetail>>,
}

/// The static topics' mappings of this broker.
#[derive(Debug)]
pub struct TopicQueueMappingManager {
    file: ConfigFile,
    table: Mutex<Table>,
}

impl TopicQueueMappingManager {
    /// Reads `path` (or its backup); a missing file is an empty table.
    ///
    /// # Errors
    /// As [`ConfigFile::load`].
    pub fn load(path: impl Into<PathBuf>) -> Result<Self, MetadataError> {
        let file = ConfigFile::new(path);
        let loaded = file.load::<TopicQueueMappingSerializeWrapper>()?;
        if loaded.needs_rewrite() {
            file.mark_dirty();
        }
        let wrapper = loaded.into_value().unwrap_or_default();
        let table = Table {
            data_version: wrapper.data_version,
            mappings: wrapper.topic_queue_mapping_info_map.into_iter().map(|(t, d)| (t, Arc::new(d))).collect(),
        };
        Ok(Self { file, table: Mutex::new(table) })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The mapping of `topic`, when it is a static topic here.
    pub fn get(&self, topic: &str) -> Option<Arc<TopicQueueMappingDetail>> {
        self.table().mappings.get(topic).cloned()
    }

    /// Is any topic static here? (Lets request paths skip the lookup.)
    pub fn is_empty(&self) -> bool {
        self.table().mappings.is_empty()
    }

    /// Installs `new` for its topic after the checks of the module doc, and saves the file.
    ///
    /// # Errors
    /// The rule broken, or the write that failed (the table then holds the new mapping and
    /// stays dirty for the next periodic write).
    pub fn update(&self, mut new: TopicQueueMappingDetail, force: bool) -> Result<(), MappingUpdateError> {
        for items in new.hosted_queues.values() {
            static_topic::check_item_offsets(items)?;
        }
        {
            let mut table = self.table();
            if let Some(old) = table.mappings.get(&new.topic) {
                if !force {
                    check_fencing(old, &new)?;
                }
                let epoch_equal = new.epoch == old.epoch;
                for (global, items) in &old.hosted_queues {
                    if !new.hosted_queues.contains_key(global) {
                        if epoch_equal && !force {
                            return Err(MappingError("Cannot accept equal epoch with null data".into()).into());
                        }
                        new.hosted_queues.insert(*global, items.clone());
                    }
                }
            }
            table.mappings.insert(new.topic.clone(), Arc::new(new));
            table.data_version.next_version();
        }
        self.file.mark_dirty();
        self.persist_if_dirty()?;
        Ok(())
    }

    /// Forgets `topic`'s mapping (the topic was deleted); true if it had one.
    pub fn delete(&self, topic: &str) -> bool {
        let removed = {
            let mut table = self.table();
            let removed = table.mappings.remove(topic).is_some();
            if removed {
                table.data_version.next_version();
            }
            removed
        };
        if removed {
            self.file.mark_dirty();
        }
        removed
    }

    /// What registrations carry: topic -> the route's view of each mapping.
    pub fn infos(&self) -> BTreeMap<String, TopicQueueMappingInfo> {
        self.table().mappings.iter().map(|(t, d)| (t.clone(), d.to_info())).collect()
    }

    /// The whole table (the file's shape, and what GET_ALL_TOPIC_CONFIG adds for slaves).
    pub fn snapshot(&self) -> TopicQueueMappingSerializeWrapper {
        let table = self.table();
        TopicQueueMappingSerializeWrapper {
            data_version: table.data_version,
            topic_queue_mapping_info_map: table.mappings.iter().map(|(t, d)| (t.clone(), (**d).clone())).collect(),
        }
    }

    /// Makes the table `master`'s (a slave following its master); true if it changed.
    pub fn replace_all(&self, master: TopicQueueMappingSerializeWrapper) -> bool {
        let mappings: BTreeMap<String, Arc<TopicQueueMappingDetail>> =
            master.topic_queue_mapping_info_map.into_iter().map(|(t, d)| (t, Arc::new(d))).collect();
        {
            let mut table = self.table();
            if table.mappings == mappings {
                return false;
            }
            table.mappings = mappings;
            table.data_version = master.data_version;
        }
        self.file.mark_dirty();
        true
    }

    /// Writes the file when something changed.
    ///
    /// # Errors
    /// As [`ConfigFile::persist`].
    pub fn persist_if_dirty(&self) -> Result<bool, MetadataError> {
        self.file.persist_if_dirty(|| self.snapshot())
    }
}

/// Java's non-forced checks of `TopicQueueMappingManager#updateTopicQueueMapping`.
fn check_fencing(old: &TopicQueueMappingDetail, new: &TopicQueueMappingDetail) -> Result<(), MappingError> {
    if new.epoch < old.epoch {
        return Err(MappingError(format!("Can't accept data with small epoch {} < {}", new.epoch, old.epoch)));
    }
    if new.scope != old.scope {
        return Err(MappingError(format!("Can't accept data with unmatched scope {} != {}", new.scope, old.scope)));
    }
    let epoch_equal = new.epoch == old.epoch;
    for (global, old_items) in &old.hosted_queues {
        if let Some(new_items) = new.hosted_queues.get(global) {
            static_topic::check_immutable(old_items, new_items, epoch_equal)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ferromq_protocol::body::LogicQueueMappingItem;

    use super::*;

    fn detail(epoch: i64, hosted: &[(i32, Vec<LogicQueueMappingItem>)]) -> TopicQueueMappingDetail {
        let mut d = TopicQueueMappingDetail::new("T", 2, "a", epoch);
        d.hosted_queues = hosted.iter().cloned().collect();
        d
    }

    #[test]
    fn updates_are_fenced_by_epoch_and_immutable_items_and_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("topicQueueMapping.json");
        let manager = TopicQueueMappingManager::load(&path).unwrap();
        let first = vec![LogicQueueMappingItem::new(0, 0, "a", 0)];
        manager.update(detail(10, &[(0, first.clone())]), false).unwrap();

        let older = manager.update(detail(9, &[(0, first.clone())]), false).unwrap_err();
        assert_eq!(older.to_string(), "Can't accept data with small epoch 9 < 10");
        let moved_physical = vec![LogicQueueMappingItem::new(0, 1, "a", 0)];
        assert!(manager.update(detail(11, &[(0, moved_physical.clone())]), false).is_err());
        // force replaces what fencing refuses.
        manager.update(detail(11, &[(0, moved_physical)]), true).unwrap();
        // A newer mapping that leaves a hosted queue out keeps its items.
        manager.update(detail(12, &[(1, vec![LogicQueueMappingItem::new(0, 2, "a", 0)])]), false).unwrap();
        let kept = manager.get("T").unwrap();
        assert_eq!(kept.hosted_queues[&0][0].queue_id, 1);
        assert_eq!(kept.hosted_queues[&1][0].queue_id, 2);

        let reloaded = TopicQueueMappingManager::load(&path).unwrap();
        assert_eq!(reloaded.get("T").unwrap(), kept);
        assert_eq!(reloaded.infos()["T"].curr_id_map, BTreeMap::from([(0, 1), (1, 2)]));
        assert!(reloaded.delete("T"));
        assert!(reloaded.get("T").is_none());
    }
}
