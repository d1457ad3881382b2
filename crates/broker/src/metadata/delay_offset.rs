//! The delay-level progress table, persisted as `<storePathRootDir>/config/delayOffset.json`
//! (`{"offsetTable":{1:0,2:17},"dataVersion":{..}}`): delay level -> next consume-queue offset
//! of `SCHEDULE_TOPIC_XXXX` queue `level - 1`. Also the GET_ALL_DELAY_OFFSET body.
//! Java: the offset table of `ScheduleMessageService`, `DelayOffsetSerializeWrapper`.
//!
//! Only the table: the delay service (`schedule.rs`) advances it on a master, and a slave
//! copies its master's. Like the consumer offsets it is written by the periodic persist when
//! dirty.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::{Deserialize, Deserializer, Serialize};
use tracing::info;

use ferromq_protocol::body::{DataVersion, JsonBody};

use crate::metadata::config_file::ConfigFile;
use crate::metadata::MetadataError;

/// Updates between two data-version bumps (`delayOffsetUpdateVersionStep`).
pub const DELAY_OFFSET_UPDATE_VERSION_STEP: u64 = 200;

/// delayOffset.json and the GET_ALL_DELAY_OFFSET body. Java: `DelayOffsetSerializeWrapper`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DelayOffsetSerializeWrapper {
    /// Version of the table (absent in 4.x files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_version: Option<DataVersion>,
    /// Delay level (1-based) -> next consume-queue offset.
    #[serde(deserialize_with = "null_as_default")]
    pub offset_table: BTreeMap<i32, i64>,
}

impl JsonBody for DelayOffsetSerializeWrapper {}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// The delay offsets. All methods take `&self`.
#[derive(Debug)]
pub struct DelayOffsetTable {
    file: ConfigFile,
    state: RwLock<DelayState>,
}

#[derive(Debug)]
struct DelayState {
    offsets: BTreeMap<i32, i64>,
    data_version: DataVersion,
    updates: u64,
}

impl DelayOffsetTable {
    /// Reads `path` (or its `.bak`); a missing file is an empty table.
    ///
    /// # Errors
    ///
    /// As [`ConfigFile::load`].
    pub fn load(path: impl Into<PathBuf>) -> Result<Self, MetadataError> {
        let file = ConfigFile::new(path);
        let loaded = file.load::<DelayOffsetSerializeWrapper>()?;
        if loaded.needs_rewrite() {
            file.mark_dirty();
        }
        let wrapper = loaded.into_value().unwrap_or_default();
        info!(levels = wrapper.offset_table.len(), "delay offsets loaded");
        let state = DelayState {
            offsets: wrapper.offset_table,
            data_version: wrapper.data_version.unwrap_or_else(DataVersion::now),
            updates: 0,
        };
        Ok(Self { file, state: RwLock::new(state) })
    }

    /// The next offset of delay level `level`, if recorded.
    pub fn get(&self, level: i32) -> Option<i64> {
        self.read().offsets.get(&level).copied()
    }

    /// Records the next offset of delay level `level`; bumps the data version every
    /// [`DELAY_OFFSET_UPDATE_VERSION_STEP`] updates. Java: `ScheduleMessageService#updateOffset`.
    pub fn set(&self, level: i32, offset: i64) {
        let mut state = self.write();
        state.offsets.insert(level, offset);
        state.updates += 1;
        if state.updates.is_multiple_of(DELAY_OFFSET_UPDATE_VERSION_STEP) {
            state.data_version.next_version();
        }
        self.file.mark_dirty();
    }

    /// Makes the table `master`'s (a slave following its master), taking its data version
    /// when it has one. Marks the table dirty and returns true if anything changed; persisting
    /// is left to the caller. Java: `SlaveSynchronize#syncDelayOffset`, which writes the
    /// master's body as delayOffset.json and (Java 5) reloads the table from it.
    pub fn replace_all(&self, master: DelayOffsetSerializeWrapper) -> bool {
        let mut state = self.write();
        let version = master.data_version.unwrap_or(state.data_version);
        if state.offsets == master.offset_table && state.data_version == version {
            return false;
        }
        state.offsets = master.offset_table;
        state.data_version = version;
        self.file.mark_dirty();
        true
    }

    /// A copy of the table with its version.
    pub fn snapshot(&self) -> DelayOffsetSerializeWrapper {
        let state = self.read();
        DelayOffsetSerializeWrapper { data_version: Some(state.data_version), offset_table: state.offsets.clone() }
    }

    /// The table's current version.
    pub fn data_version(&self) -> DataVersion {
        self.read().data_version
    }

    /// Writes delayOffset.json now.
    ///
    /// # Errors
    ///
    /// As [`ConfigFile::persist`].
    pub fn persist(&self) -> Result<(), MetadataError> {
        self.file.persist(|| self.snapshot())
    }

    /// Writes delayOffset.json if it changed since the last write; returns whether it wrote.
    ///
    /// # Errors
    ///
    /// As [`ConfigFile::persist`].
    pub fn persist_if_dirty(&self) -> Result<bool, MetadataError> {
        self.file.persist_if_dirty(|| self.snapshot())
    }

    fn read(&self) -> RwLockReadGuard<'_, DelayState> {
        // Writers do one insert and a counter bump; a panic cannot leave them half done.
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, DelayState> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_java_file_with_bare_keys() {
        let wrapper: DelayOffsetSerializeWrapper =
            ferromq_protocol::json::parse_lenient(br#"{"offsetTable":{1:0,2:17},"unknown":true}"#).unwrap();
        assert_eq!(wrapper.offset_table, BTreeMap::from([(1, 0), (2, 17)]));
        assert_eq!(wrapper.data_version, None);
    }

    #[test]
    fn version_bumps_every_step_updates() {
        let dir = tempfile::tempdir().unwrap();
        let table = DelayOffsetTable::load(dir.path().join("d.json")).unwrap();
        let start = table.data_version().counter;
        for i in 0..DELAY_OFFSET_UPDATE_VERSION_STEP {
            table.set(1, i64::try_from(i).unwrap());
        }
        assert_eq!(table.data_version().counter, start + 1);
        assert_eq!(table.get(1), Some(199));
        assert_eq!(table.get(2), None);
    }

    #[test]
    fn replace_all_takes_the_masters_table_and_version() {
        let dir = tempfile::tempdir().unwrap();
        let table = DelayOffsetTable::load(dir.path().join("d.json")).unwrap();
        table.set(5, 9);
        table.persist().unwrap();
        let version = DataVersion { counter: 7, state_version: 0, timestamp: 42 };
        let master =
            DelayOffsetSerializeWrapper { data_version: Some(version), offset_table: BTreeMap::from([(1, 3)]) };
        assert!(table.replace_all(master.clone()));
        assert_eq!((table.get(1), table.get(5), table.data_version()), (Some(3), None, version));
        assert!(!table.replace_all(master), "same table and version: nothing to do");
        // A 4.x master sends no version: the slave keeps its own.
        assert!(table.replace_all(DelayOffsetSerializeWrapper { data_version: None, offset_table: BTreeMap::new() }));
        assert_eq!((table.get(1), table.data_version()), (None, version));
        assert!(table.persist_if_dirty().unwrap());
    }
}
