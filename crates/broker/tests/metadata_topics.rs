//! The topic table against real files: Java-written topics.json, round trips, the change
//! journal, auto-creation from `TBW102`, retry topics and name validation.

use std::path::PathBuf;

use ferromq_broker::metadata::{
    is_not_allowed_send_topic, is_system_topic, validate_topic, TopicConfigManager, TopicConfigOptions,
    AUTO_CREATE_TOPIC_KEY_TOPIC,
};
use ferromq_protocol::body::{JsonBody, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType};

const BROKER: &str = "broker-a";
const CLUSTER: &str = "DefaultCluster";

fn topics_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("config").join("topics.json")
}

fn load(dir: &tempfile::TempDir, options: TopicConfigOptions) -> TopicConfigManager {
    TopicConfigManager::load(topics_path(dir), BROKER, CLUSTER, options).unwrap()
}

fn auto_create_off() -> TopicConfigOptions {
    TopicConfigOptions { auto_create_topic_enable: false, ..TopicConfigOptions::default() }
}

/// topics.json as a Java 5.x broker writes it (fastjson pretty format, tabs), with a key this
/// version does not know.
const JAVA_TOPICS_JSON: &str = "{\n\t\"dataVersion\":{\n\t\t\"counter\":7,\n\t\t\"stateVersion\":0,\n\t\t\
\"timestamp\":1700000000000\n\t},\n\t\"topicConfigTable\":{\n\t\t\"TopicTest\":{\n\t\t\t\"attributes\":{\n\t\t\t\t\
\"message.type\":\"FIFO\"\n\t\t\t},\n\t\t\t\"order\":true,\n\t\t\t\"perm\":6,\n\t\t\t\"readQueueNums\":4,\n\t\t\t\
\"topicFilterType\":\"SINGLE_TAG\",\n\t\t\t\"topicName\":\"TopicTest\",\n\t\t\t\"topicSysFlag\":0,\n\t\t\t\
\"writeQueueNums\":4\n\t\t},\n\t\t\"SCHEDULE_TOPIC_XXXX\":{\n\t\t\t\"attributes\":{},\n\t\t\t\"order\":false,\n\t\t\t\
\"perm\":4,\n\t\t\t\"readQueueNums\":18,\n\t\t\t\"topicFilterType\":\"SINGLE_TAG\",\n\t\t\t\
\"topicName\":\"SCHEDULE_TOPIC_XXXX\",\n\t\t\t\"topicSysFlag\":0,\n\t\t\t\"writeQueueNums\":18\n\t\t}\n\t},\n\t\
\"futureKey\":{\"x\":[1,2]}\n}";

#[test]
fn java_topics_file_loads_over_system_topics() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(topics_path(&dir).parent().unwrap()).unwrap();
    std::fs::write(topics_path(&dir), JAVA_TOPICS_JSON).unwrap();
    let topics = load(&dir, TopicConfigOptions::default());

    let test = topics.select("TopicTest").unwrap();
    assert_eq!((test.read_queue_nums, test.write_queue_nums, test.perm, test.order), (4, 4, 6, true));
    assert_eq!(test.attributes["message.type"], "FIFO");
    assert!(topics.is_order_topic("TopicTest"));
    // The file's version of a system topic wins over the built-in one.
    assert_eq!(topics.select("SCHEDULE_TOPIC_XXXX").unwrap().perm, 4);
    // System topics not in the file are still there.
    assert_eq!(topics.select("TBW102").unwrap().perm, 7);
    assert_eq!(topics.data_version().counter, 7);
    assert_eq!(topics.data_version().timestamp, 1_700_000_000_000);
}

#[test]
fn topics_round_trip_through_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let topics = load(&dir, TopicConfigOptions::default());
    let mut config = TopicConfig::new("Orders", 3, 5);
    config.perm = 4;
    config.order = true;
    config.topic_sys_flag = 1;
    config.attributes.insert("queue.type".into(), "BatchCQ".into());
    topics.update(config.clone()).unwrap();
    let written = topics.all();

    let reloaded = load(&dir, TopicConfigOptions::default());
    assert_eq!(reloaded.select("Orders"), Some(config));
    assert_eq!(reloaded.all(), written);
    // The change is in the journal until the periodic persist writes the file.
    reloaded.persist().unwrap();
    let on_disk = TopicConfigSerializeWrapper::decode(&std::fs::read(topics_path(&dir)).unwrap()).unwrap();
    assert_eq!(on_disk, written);
}

#[test]
fn update_and_delete_bump_the_data_version() {
    let dir = tempfile::tempdir().unwrap();
    let topics = load(&dir, TopicConfigOptions::default());
    let start = topics.data_version();
    topics.update(TopicConfig::new("T", 1, 1)).unwrap();
    assert_eq!(topics.data_version().counter, start.counter + 1);
    assert!(topics.delete("T").unwrap());
    assert_eq!(topics.data_version().counter, start.counter + 2);
    assert!(!topics.delete("T").unwrap());
    assert_eq!(topics.data_version().counter, start.counter + 2);
    assert!(!load(&dir, TopicConfigOptions::default()).contains("T"));
    assert!(topics.update(TopicConfig::new("", 1, 1)).is_err());
}

#[test]
fn auto_created_topic_inherits_from_tbw102() {
    let dir = tempfile::tempdir().unwrap();
    let topics = load(&dir, TopicConfigOptions::default());
    let start = topics.data_version();

    let ensured = topics.create_topic_in_send_message("NewTopic", "TBW102", "10.0.0.9:5555", 4, 0).unwrap().unwrap();
    assert!(ensured.created);
    let created = ensured.config;
    assert_eq!((created.read_queue_nums, created.write_queue_nums), (4, 4));
    assert_eq!(created.perm, 6, "inherit bit dropped");
    assert_eq!(created.topic_filter_type, TopicFilterType::SingleTag);
    assert_eq!(topics.data_version().counter, start.counter + 1);

    // Queue count is capped by the default topic's write queues (8).
    let capped = topics.create_topic_in_send_message("Big", "TBW102", "h", 64, 1).unwrap().unwrap().config;
    assert_eq!((capped.read_queue_nums, capped.write_queue_nums, capped.topic_sys_flag), (8, 8, 1));
    // A negative client value gives 0 queues, as in Java.
    let empty = topics.create_topic_in_send_message("Neg", "TBW102", "h", -3, 0).unwrap().unwrap().config;
    assert_eq!(empty.write_queue_nums, 0);

    // An existing topic is returned unchanged and nothing is bumped.
    let version = topics.data_version();
    let again = topics.create_topic_in_send_message("NewTopic", "TBW102", "h", 1, 0).unwrap().unwrap();
    assert!(!again.created, "the second call finds the topic");
    assert_eq!(again.config, created);
    assert_eq!(topics.data_version(), version);

    // Marked dirty; the broker's periodic persist writes it.
    assert!(topics.persist_if_dirty().unwrap());
    assert_eq!(load(&dir, TopicConfigOptions::default()).select("NewTopic"), Some(created));
}

#[test]
fn auto_create_honours_default_topic_perm() {
    let dir = tempfile::tempdir().unwrap();
    let topics = load(&dir, TopicConfigOptions::default());
    let mut read_only_default = TopicConfig::new("ReadOnlyDefault", 4, 4);
    read_only_default.perm = 4 | 1;
    topics.update(read_only_default).unwrap();
    let mut not_inheritable = TopicConfig::new("PlainDefault", 4, 4);
    not_inheritable.perm = 6;
    topics.update(not_inheritable).unwrap();

    let created = topics.create_topic_in_send_message("FromRo", "ReadOnlyDefault", "h", 8, 0).unwrap().unwrap().config;
    assert_eq!((created.perm, created.write_queue_nums), (4, 4));
    assert_eq!(topics.create_topic_in_send_message("X", "PlainDefault", "h", 8, 0).unwrap(), None);
    assert_eq!(topics.create_topic_in_send_message("X", "NoSuchDefault", "h", 8, 0).unwrap(), None);
    assert!(!topics.contains("X"));
}

#[test]
fn auto_create_is_refused_when_disabled() {
    let dir = tempfile::tempdir().unwrap();
    let topics = load(&dir, auto_create_off());
    assert_eq!(topics.select(AUTO_CREATE_TOPIC_KEY_TOPIC), None, "TBW102 is not created");
    assert_eq!(topics.create_topic_in_send_message("X", "TBW102", "h", 4, 0).unwrap(), None);

    // Even if an earlier run with auto-creation on left TBW102 in topics.json.
    let dir = tempfile::tempdir().unwrap();
    load(&dir, TopicConfigOptions::default()).persist().unwrap();
    let topics = load(&dir, auto_create_off());
    assert_eq!(topics.select("TBW102").unwrap().perm, 7);
    assert_eq!(topics.create_topic_in_send_message("X", "TBW102", "h", 4, 0).unwrap(), None);
    assert!(!topics.contains("X"));
}

#[test]
fn retry_and_dlq_topics_are_created_on_send_back() {
    let dir = tempfile::tempdir().unwrap();
    let topics = load(&dir, auto_create_off());
    let retry = topics.create_topic_in_send_back("%RETRY%group", 1, 6, 0).unwrap();
    assert!(retry.created);
    let retry = retry.config;
    assert_eq!((retry.read_queue_nums, retry.write_queue_nums, retry.perm), (1, 1, 6));
    let dlq = topics.create_topic_in_send_back("%DLQ%group", 1, 6, 0).unwrap().config;
    assert_eq!(dlq.topic_name, "%DLQ%group");
    // Existing topics are returned as they are, not created.
    let again = topics.create_topic_in_send_back("%RETRY%group", 3, 2, 0).unwrap();
    assert!(!again.created);
    assert_eq!(again.config, retry);
    assert!(topics.persist_if_dirty().unwrap());
    let reloaded = load(&dir, auto_create_off());
    assert!(reloaded.contains("%RETRY%group") && reloaded.contains("%DLQ%group"));
}

#[test]
fn registration_body_lists_every_topic_with_the_version() {
    let dir = tempfile::tempdir().unwrap();
    let topics = load(&dir, TopicConfigOptions::default());
    topics.update(TopicConfig::new("T", 2, 2)).unwrap();
    let all = topics.all();
    assert_eq!(all.data_version, topics.data_version());
    assert_eq!(all.topic_config_table.len(), topics.len());
    assert!(all.topic_config_table.contains_key("T") && all.topic_config_table.contains_key(BROKER));
}

#[test]
fn topic_validation_matches_java() {
    assert_eq!(validate_topic("").unwrap_err(), "The specified topic is blank.");
    assert_eq!(
        validate_topic(&"t".repeat(128)).unwrap_err(),
        format!("The specified topic: {}, is longer than topic max length: 127", "t".repeat(128))
    );
    assert!(validate_topic(&"t".repeat(127)).is_ok());
    for illegal in ["my topic", "a/b", "a.b", "t\u{e9}", "a\tb"] {
        assert_eq!(
            validate_topic(illegal).unwrap_err(),
            format!("The specified topic: {illegal}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")
        );
    }
    for legal in ["%RETRY%g", "%DLQ%g", "a|b", "Topic-1_x", "TBW102"] {
        assert_eq!(validate_topic(legal), Ok(()), "{legal}");
    }
    assert!(validate_topic(&format!("%RETRY%{}", "g".repeat(200))).is_ok());
}

#[test]
fn send_restrictions_and_system_topics() {
    for topic in [
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    ] {
        assert!(is_not_allowed_send_topic(topic), "{topic}");
        assert!(is_system_topic(topic), "{topic}");
    }
    assert!(!is_not_allowed_send_topic("TopicTest") && !is_not_allowed_send_topic("%RETRY%g"));
    assert!(is_system_topic("rmq_sys_wheel_timer") && is_system_topic("BenchmarkTest"));

    let dir = tempfile::tempdir().unwrap();
    let topics = load(&dir, TopicConfigOptions::default());
    assert!(topics.is_system_topic(CLUSTER) && topics.is_system_topic(BROKER));
    assert!(!is_system_topic(CLUSTER));
}

fn journal_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("config").join("topics.json.journal")
}

#[test]
fn changes_since_the_last_persist_are_replayed_from_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let topics = load(&dir, TopicConfigOptions::default());
    topics.update(TopicConfig::new("Kept", 2, 2)).unwrap();
    topics.update(TopicConfig::new("Gone", 2, 2)).unwrap();
    topics.persist().unwrap();
    assert_eq!(std::fs::metadata(journal_path(&dir)).unwrap().len(), 0, "the persist covers every record");
    // Changes after the persist: only in the journal when the process dies.
    topics.update(TopicConfig::new("Kept", 4, 4)).unwrap();
    assert!(topics.delete("Gone").unwrap());
    topics.create_topic_in_send_back("%RETRY%g", 1, 6, 0).unwrap();
    let expected = topics.all();
    topics.wait_durable();
    drop(topics);

    let reloaded = load(&dir, TopicConfigOptions::default());
    assert_eq!(reloaded.all(), expected, "topics and data version as before the crash");
    assert!(reloaded.persist_if_dirty().unwrap(), "replayed changes are written at the next persist");
    assert_eq!(std::fs::metadata(journal_path(&dir)).unwrap().len(), 0);
    let on_disk = TopicConfigSerializeWrapper::decode(&std::fs::read(topics_path(&dir)).unwrap()).unwrap();
    assert_eq!(on_disk, expected);
}

#[test]
fn a_persist_keeps_the_records_appended_while_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let topics = std::sync::Arc::new(load(&dir, TopicConfigOptions::default()));
    let writer = {
        let topics = topics.clone();
        std::thread::spawn(move || {
            for i in 0..2_000 {
                topics.update(TopicConfig::new(format!("T{i}"), 1, 1)).unwrap();
            }
        })
    };
    // Persists racing the updates: each drops only the records its copy covers.
    while !writer.is_finished() {
        topics.persist().unwrap();
    }
    writer.join().unwrap();
    let expected = topics.all();
    drop(topics);
    let reloaded = load(&dir, TopicConfigOptions::default());
    assert_eq!(reloaded.all(), expected);
}
