//! Consumer and delay offsets against real files, and the `MetadataStore` bundle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use ferromq_broker::metadata::{
    config_dir, ConsumerOffsetManager, DelayOffsetSerializeWrapper, DelayOffsetTable, MetadataOptions, MetadataStore,
    CONSUMER_OFFSET_FILE_NAME, DELAY_OFFSET_FILE_NAME, SUBSCRIPTION_GROUP_FILE_NAME, TOPICS_FILE_NAME,
};
use ferromq_protocol::body::{ConsumerOffsetSerializeWrapper, JsonBody, TopicConfig};

fn offsets_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("config").join(CONSUMER_OFFSET_FILE_NAME)
}

fn write(path: &PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// consumerOffset.json as Java writes it: unquoted queue-id keys, a getter-derived extra key.
const JAVA_OFFSETS_JSON: &str = r#"{
	"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},
	"groupTopicMap":{"g1":["TopicTest","%RETRY%g1"]},
	"offsetTable":{
		"TopicTest@g1":{0:123,1:456},
		"%RETRY%g1@g1":{0:0},
		"TopicTest@g2":{3:9}
	}
}"#;

#[test]
fn java_offsets_file_with_bare_keys_loads() {
    let dir = tempfile::tempdir().unwrap();
    write(&offsets_path(&dir), JAVA_OFFSETS_JSON);
    let offsets = ConsumerOffsetManager::load(offsets_path(&dir)).unwrap();
    assert_eq!(offsets.query_offset("g1", "TopicTest", 0), Some(123));
    assert_eq!(offsets.query_offset("g1", "TopicTest", 1), Some(456));
    assert_eq!(offsets.query_offset("g1", "TopicTest", 2), None);
    assert_eq!(offsets.query_group_offsets("g2", "TopicTest"), BTreeMap::from([(3, 9)]));
    assert_eq!(offsets.data_version().counter, 3);
    assert!(!offsets.is_dirty(), "nothing changed since the file was written");
}

#[test]
fn java_4x_offsets_file_without_data_version_loads() {
    let dir = tempfile::tempdir().unwrap();
    write(&offsets_path(&dir), r#"{"offsetTable":{"T@g":{0:1}}}"#);
    let offsets = ConsumerOffsetManager::load(offsets_path(&dir)).unwrap();
    assert_eq!(offsets.query_offset("g", "T", 0), Some(1));
    assert!(offsets.data_version().timestamp > 0);
}

#[test]
fn offsets_round_trip_as_standard_json() {
    let dir = tempfile::tempdir().unwrap();
    let offsets = ConsumerOffsetManager::load(offsets_path(&dir)).unwrap();
    offsets.commit_offset("127.0.0.1:1", "g", "T", 0, 10);
    offsets.commit_offset("127.0.0.1:1", "g", "T", 10, 20);
    offsets.commit_offset("127.0.0.1:1", "g", "%RETRY%g", 0, 1);
    assert!(offsets.persist_if_dirty().unwrap());
    assert!(!offsets.persist_if_dirty().unwrap(), "clean after a write");

    let text = std::fs::read_to_string(offsets_path(&dir)).unwrap();
    let standard: serde_json::Value = serde_json::from_str(&text).expect("standard JSON on disk");
    assert_eq!(standard["offsetTable"]["T@g"]["10"], 20);
    let reloaded = ConsumerOffsetManager::load(offsets_path(&dir)).unwrap();
    assert_eq!(reloaded.snapshot(), offsets.snapshot());
    assert_eq!(ConsumerOffsetSerializeWrapper::decode(text.as_bytes()).unwrap(), offsets.snapshot());
}

#[test]
fn commit_keeps_the_offset_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let offsets = ConsumerOffsetManager::load(offsets_path(&dir)).unwrap();
    offsets.commit_offset("h", "g", "T", 0, 100);
    offsets.commit_offset("h", "g", "T", 0, 40);
    assert_eq!(offsets.query_offset("g", "T", 0), Some(40), "no monotonic check, as in Java");
}

#[test]
fn topics_and_groups_are_found_through_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let offsets = ConsumerOffsetManager::load(offsets_path(&dir)).unwrap();
    offsets.commit_offset("h", "g1", "A", 0, 1);
    offsets.commit_offset("h", "g1", "B", 0, 1);
    offsets.commit_offset("h", "g2", "A", 0, 1);
    offsets.commit_offset("h", "g12", "C", 0, 1);
    assert_eq!(offsets.which_topic_by_consumer("g1"), BTreeSet::from(["A".to_owned(), "B".to_owned()]));
    assert_eq!(offsets.which_group_by_topic("A"), BTreeSet::from(["g1".to_owned(), "g2".to_owned()]));
    assert!(offsets.which_group_by_topic("Z").is_empty());
}

#[test]
fn clone_copies_one_topic_of_a_group() {
    let dir = tempfile::tempdir().unwrap();
    let offsets = ConsumerOffsetManager::load(offsets_path(&dir)).unwrap();
    offsets.commit_offset("h", "src", "T", 0, 5);
    offsets.commit_offset("h", "src", "T", 1, 6);
    offsets.commit_offset("h", "src", "U", 0, 7);
    offsets.commit_offset("h", "dst", "T", 2, 99);
    offsets.clone_offset("src", "dst", "T");
    assert_eq!(offsets.query_group_offsets("dst", "T"), BTreeMap::from([(0, 5), (1, 6)]));
    assert_eq!(offsets.query_group_offsets("dst", "U"), BTreeMap::new());
    offsets.clone_offset("nobody", "dst", "T");
    assert_eq!(offsets.query_group_offsets("dst", "T").len(), 2);
}

#[test]
fn remove_by_group_and_by_topic() {
    let dir = tempfile::tempdir().unwrap();
    let offsets = ConsumerOffsetManager::load(offsets_path(&dir)).unwrap();
    for (group, topic) in [("g", "A"), ("g", "B"), ("gg", "A"), ("h", "B")] {
        offsets.commit_offset("host", group, topic, 0, 1);
    }
    assert!(offsets.remove_offset("g"));
    assert!(!offsets.remove_offset("g"));
    assert_eq!(offsets.which_topic_by_consumer("g"), BTreeSet::new());
    assert_eq!(offsets.query_offset("gg", "A", 0), Some(1), "a group whose name contains g stays");
    assert!(offsets.remove_topic("B"));
    assert_eq!(offsets.query_offset("h", "B", 0), None);
    assert_eq!(offsets.snapshot().offset_table.keys().collect::<Vec<_>>(), ["A@gg"]);
    offsets.persist().unwrap();
    assert_eq!(ConsumerOffsetManager::load(offsets_path(&dir)).unwrap().snapshot(), offsets.snapshot());
}

#[test]
fn delay_offsets_read_java_file_and_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config").join(DELAY_OFFSET_FILE_NAME);
    write(&path, r#"{"dataVersion":{"counter":2,"stateVersion":0,"timestamp":5},"offsetTable":{1:0,2:17,18:4}}"#);
    let table = DelayOffsetTable::load(&path).unwrap();
    assert_eq!((table.get(1), table.get(2), table.get(18), table.get(3)), (Some(0), Some(17), Some(4), None));
    assert_eq!(table.data_version().counter, 2);

    table.set(3, 8);
    assert!(table.persist_if_dirty().unwrap());
    let reloaded = DelayOffsetTable::load(&path).unwrap();
    assert_eq!(reloaded.snapshot(), table.snapshot());
    assert_eq!(reloaded.snapshot().offset_table, BTreeMap::from([(1, 0), (2, 17), (3, 8), (18, 4)]));
    let body = DelayOffsetSerializeWrapper::decode(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(body, table.snapshot());
}

#[test]
fn metadata_store_loads_and_persists_all_four_files() {
    let root = tempfile::tempdir().unwrap();
    let dir = config_dir(root.path());
    let store = MetadataStore::load(&dir, MetadataOptions::default()).unwrap();
    store.topics().update(TopicConfig::new("T", 2, 2)).unwrap();
    assert!(store.groups().find("g", true).is_some());
    store.offsets().commit_offset("h", "g", "T", 1, 42);
    store.delay_offsets().set(1, 7);
    store.persist_all().unwrap();
    for name in [TOPICS_FILE_NAME, SUBSCRIPTION_GROUP_FILE_NAME, CONSUMER_OFFSET_FILE_NAME, DELAY_OFFSET_FILE_NAME] {
        assert!(dir.join(name).is_file(), "{name}");
    }

    let reloaded = MetadataStore::load(&dir, MetadataOptions::default()).unwrap();
    assert!(reloaded.topics().contains("T"));
    assert!(reloaded.groups().contains("g"));
    assert_eq!(reloaded.offsets().query_offset("g", "T", 1), Some(42));
    assert_eq!(reloaded.delay_offsets().get(1), Some(7));
    assert_eq!(reloaded.topics().all(), store.topics().all());
}
