//! `LocalOffsetStore`: the consumed offsets of a broadcasting consumer, kept by the client in
//! `<base>/<clientId>/<group>/offsets.json`. Java: `LocalFileOffsetStore` (the file holds an
//! `OffsetSerializeWrapper`, `{"offsetTable":{MessageQueue: offset}}`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use ferromq_protocol::body::{JsonBody, MessageQueue, ResetOffsetBody};
use tracing::warn;

/// Where offsets live without a configured directory: `$HOME/.rocketmq_offsets`.
/// Java: `rocketmq.client.localOffsetStoreDir`, default `user.home/.rocketmq_offsets`.
pub(crate) fn default_offset_store_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".rocketmq_offsets")
}

/// The offsets of one group of one client, mirrored in a file.
#[derive(Debug)]
pub(crate) struct LocalOffsetStore {
    path: PathBuf,
    table: BTreeMap<MessageQueue, i64>,
}

impl LocalOffsetStore {
    /// The store of `group` for `client_id` under `base`, with the offsets its file holds (a
    /// missing file is empty; an unreadable one falls back to its `.bak`, then to empty).
    /// Java: `LocalFileOffsetStore#load` / `readLocalOffset`.
    pub(crate) fn load(base: &Path, client_id: &str, group: &str) -> Self {
        let path = base.join(client_id).join(group).join("offsets.json");
        let table = read_table(&path).or_else(|| read_table(&path.with_extension("json.bak"))).unwrap_or_default();
        LocalOffsetStore { path, table }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn get(&self, mq: &MessageQueue) -> Option<i64> {
        self.table.get(mq).copied()
    }

    pub(crate) fn set(&mut self, mq: &MessageQueue, offset: i64) {
        self.table.insert(mq.clone(), offset);
    }

    /// Writes the table atomically: a temporary file, fsync, rename over the old one.
    /// Java: `LocalFileOffsetStore#persistAll` (`MixAll.string2File`).
    pub(crate) fn persist(&self) -> std::io::Result<()> {
        let body = ResetOffsetBody { offset_table: self.table.clone() }.encode();
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = self.path.with_extension("json.tmp");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
        }
        if self.path.exists() {
            // Best effort, as Java keeps the previous file as `.bak`.
            let _ = std::fs::copy(&self.path, self.path.with_extension("json.bak"));
        }
        std::fs::rename(&tmp, &self.path)
    }
}

fn read_table(path: &Path) -> Option<BTreeMap<MessageQueue, i64>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            warn!(path = %path.display(), error = %e, "offset file unreadable");
            return None;
        }
    };
    match ResetOffsetBody::decode(&bytes) {
        Ok(b) => Some(b.offset_table),
        Err(e) => {
            warn!(path = %path.display(), error = %e, "offset file undecodable");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let mq = MessageQueue::new("t", "b".to_owned(), 3);
        let mut s = LocalOffsetStore::load(dir.path(), "127.0.0.1@x", "g");
        assert_eq!(s.get(&mq), None);
        s.set(&mq, 42);
        s.persist().unwrap();
        s.set(&mq, 43);
        s.persist().unwrap();
        assert!(s.path().ends_with("127.0.0.1@x/g/offsets.json"));
        let again = LocalOffsetStore::load(dir.path(), "127.0.0.1@x", "g");
        assert_eq!(again.get(&mq), Some(43));
        assert!(!s.path().with_extension("json.tmp").exists());
    }
}
