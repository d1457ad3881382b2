//! `<storePathRootDir>/config/messageRequestMode.json`: per topic and group, whether the
//! group PULLs or POPs (and the pop share). Written by SET_MESSAGE_REQUEST_MODE, read by
//! QUERY_ASSIGNMENT, copied by slaves (GET_ALL_MESSAGE_REQUEST_MODE). Java:
//! `MessageRequestModeManager`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use ferromq_protocol::body::{MessageRequestModeSerializeWrapper, SetMessageRequestModeRequestBody};

use crate::metadata::{ConfigFile, MetadataError};

/// The request modes of every topic and group.
#[derive(Debug)]
pub struct MessageRequestModeManager {
    file: ConfigFile,
    modes: Mutex<BTreeMap<String, BTreeMap<String, SetMessageRequestModeRequestBody>>>,
}

impl MessageRequestModeManager {
    /// Reads `path` (or its backup); a missing file is an empty table.
    ///
    /// # Errors
    /// As [`ConfigFile::load`].
    pub fn load(path: impl Into<PathBuf>) -> Result<Self, MetadataError> {
        let file = ConfigFile::new(path);
        let loaded = file.load::<MessageRequestModeSerializeWrapper>()?;
        if loaded.needs_rewrite() {
            file.mark_dirty();
        }
        let wrapper = loaded.into_value().unwrap_or_default();
        Ok(MessageRequestModeManager { file, modes: Mutex::new(wrapper.message_request_mode_map) })
    }

    fn modes(&self) -> MutexGuard<'_, BTreeMap<String, BTreeMap<String, SetMessageRequestModeRequestBody>>> {
        self.modes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the mode of a topic and group.
    pub fn set(&self, body: SetMessageRequestModeRequestBody) {
        self.modes().entry(body.topic.clone()).or_default().insert(body.consumer_group.clone(), body);
        self.file.mark_dirty();
    }

    /// The mode of a topic and group, if set.
    pub fn get(&self, topic: &str, group: &str) -> Option<SetMessageRequestModeRequestBody> {
        self.modes().get(topic).and_then(|g| g.get(group)).cloned()
    }

    /// The whole table (the file's and GET_ALL_MESSAGE_REQUEST_MODE's shape).
    pub fn snapshot(&self) -> MessageRequestModeSerializeWrapper {
        MessageRequestModeSerializeWrapper { message_request_mode_map: self.modes().clone() }
    }

    /// Makes the table `master`'s (a slave following its master); true if it changed.
    pub fn replace_all(&self, master: MessageRequestModeSerializeWrapper) -> bool {
        let mut modes = self.modes();
        if *modes == master.message_request_mode_map {
            return false;
        }
        *modes = master.message_request_mode_map;
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
