//! Loading and persisting metadata files: the `.bak` fallback, refusal to drop metadata, and the
//! files left on disk by a persist.

use std::collections::BTreeMap;
use std::path::Path;

use ferromq_broker::metadata::{ConfigFile, ConsumerOffsetManager, Loaded, MetadataError, TopicConfigManager};
use ferromq_broker::metadata::{TopicConfigOptions, TOPICS_FILE_NAME};
use ferromq_protocol::body::TopicConfig;

type Table = BTreeMap<String, i64>;

fn table(entries: &[(&str, i64)]) -> Table {
    entries.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// A file persisted twice: `.bak` holds `{"a":1}`, the file `{"a":2}`.
fn persisted_twice(dir: &Path) -> ConfigFile {
    let file = ConfigFile::new(dir.join("config").join("t.json"));
    file.persist(|| table(&[("a", 1)])).unwrap();
    file.persist(|| table(&[("a", 2)])).unwrap();
    file
}

#[test]
fn truncated_file_falls_back_to_backup() {
    let dir = tempfile::tempdir().unwrap();
    let file = persisted_twice(dir.path());
    let full = std::fs::read(file.path()).unwrap();
    std::fs::write(file.path(), &full[..full.len() / 2]).unwrap();
    let reloaded = ConfigFile::new(file.path());
    assert_eq!(reloaded.load::<Table>().unwrap(), Loaded::Backup(table(&[("a", 1)])));
}

#[test]
fn garbage_file_falls_back_to_backup() {
    let dir = tempfile::tempdir().unwrap();
    let file = persisted_twice(dir.path());
    std::fs::write(file.path(), b"\x00\x01garbage\xff").unwrap();
    assert_eq!(ConfigFile::new(file.path()).load::<Table>().unwrap(), Loaded::Backup(table(&[("a", 1)])));
}

#[test]
fn missing_or_empty_file_falls_back_to_backup() {
    let dir = tempfile::tempdir().unwrap();
    let file = persisted_twice(dir.path());
    std::fs::write(file.path(), b"  \n").unwrap();
    assert_eq!(ConfigFile::new(file.path()).load::<Table>().unwrap(), Loaded::Backup(table(&[("a", 1)])));
    std::fs::remove_file(file.path()).unwrap();
    assert_eq!(ConfigFile::new(file.path()).load::<Table>().unwrap(), Loaded::Backup(table(&[("a", 1)])));
}

#[test]
fn unparsable_file_and_unparsable_backup_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = persisted_twice(dir.path());
    std::fs::write(file.path(), b"{\"a\":").unwrap();
    std::fs::write(file.backup_path(), b"not json").unwrap();
    let error = ConfigFile::new(file.path()).load::<Table>().unwrap_err();
    match error {
        MetadataError::BackupCorrupt { path, backup_path, .. } => {
            assert_eq!(path, file.path());
            assert_eq!(backup_path, file.backup_path());
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn unparsable_file_without_backup_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    std::fs::write(&path, b"{\"a\":").unwrap();
    let error = ConfigFile::new(&path).load::<Table>().unwrap_err();
    assert!(matches!(error, MetadataError::Corrupt { path: p, .. } if p == path));
    // An empty backup does not rescue it either.
    std::fs::write(dir.path().join("t.json.bak"), b"").unwrap();
    assert!(matches!(ConfigFile::new(&path).load::<Table>(), Err(MetadataError::Corrupt { .. })));
}

#[test]
fn missing_file_without_backup_loads_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::new(dir.path().join("nothing.json"));
    assert_eq!(file.load::<Table>().unwrap(), Loaded::Missing);
    std::fs::write(file.path(), b"").unwrap();
    assert_eq!(file.load::<Table>().unwrap(), Loaded::Missing);
}

#[test]
fn persist_leaves_file_and_backup_but_no_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = persisted_twice(dir.path());
    let mut names: Vec<String> = std::fs::read_dir(dir.path().join("config"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["t.json", "t.json.bak"]);
    assert_eq!(file.load::<Table>().unwrap(), Loaded::Main(table(&[("a", 2)])));
}

#[test]
fn stale_temp_file_is_ignored_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let file = persisted_twice(dir.path());
    std::fs::write(file.temp_path(), b"half a wri").unwrap();
    assert_eq!(file.load::<Table>().unwrap(), Loaded::Main(table(&[("a", 2)])));
    file.persist(|| table(&[("a", 3)])).unwrap();
    assert!(!file.temp_path().exists());
    assert_eq!(file.load::<Table>().unwrap(), Loaded::Main(table(&[("a", 3)])));
}

#[test]
fn corrupt_topics_file_is_never_replaced_by_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(TOPICS_FILE_NAME);
    std::fs::write(&path, br#"{"topicConfigTable":{"T":{"topicName":"T""#).unwrap();
    let error = TopicConfigManager::load(&path, "b", "c", TopicConfigOptions::default()).unwrap_err();
    assert!(matches!(error, MetadataError::Corrupt { .. }), "{error:?}");
    assert!(ConsumerOffsetManager::load(&path).is_err());
}

#[test]
fn manager_recovers_from_backup_and_rewrites_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(TOPICS_FILE_NAME);
    let topics = TopicConfigManager::load(&path, "b", "c", TopicConfigOptions::default()).unwrap();
    topics.update(TopicConfig::new("Kept", 2, 2)).unwrap();
    topics.persist().unwrap();
    topics.update(TopicConfig::new("Lost", 2, 2)).unwrap();
    topics.persist().unwrap();
    drop(topics);
    std::fs::write(&path, b"{{{{").unwrap();

    let topics = TopicConfigManager::load(&path, "b", "c", TopicConfigOptions::default()).unwrap();
    assert!(topics.contains("Kept"));
    assert!(!topics.contains("Lost"), "the backup holds the version before the last change");
    assert!(topics.persist_if_dirty().unwrap(), "a table recovered from the backup is rewritten");
    let backup = std::fs::read_to_string(dir.path().join("topics.json.bak")).unwrap();
    assert!(backup.contains("Kept"), "the good backup was kept, not replaced by the corrupt file");
    let topics = TopicConfigManager::load(&path, "b", "c", TopicConfigOptions::default()).unwrap();
    assert!(topics.contains("Kept"));
}
