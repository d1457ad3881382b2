//! The subscription group table against real files: Java-written subscriptionGroup.json, round
//! trips and auto-creation.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ferromq_broker::metadata::{
    SubscriptionGroupConfig, SubscriptionGroupManager, SubscriptionGroupOptions, SubscriptionGroupWrapper,
    CID_SYS_RMQ_TRANS, TOOLS_CONSUMER_GROUP,
};
use ferromq_protocol::body::JsonBody;
use serde_json::json;

fn groups_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("config").join("subscriptionGroup.json")
}

fn load(dir: &tempfile::TempDir) -> SubscriptionGroupManager {
    SubscriptionGroupManager::load(groups_path(dir), SubscriptionGroupOptions::default()).unwrap()
}

/// subscriptionGroup.json as Java 5.x writes it, plus a field this version does not know.
const JAVA_GROUPS_JSON: &str = r#"{
	"dataVersion":{"counter":12,"stateVersion":0,"timestamp":1700000000123},
	"forbiddenTable":{"orders":{"TopicA":2}},
	"subscriptionGroupTable":{
		"orders":{
			"attributes":{},
			"brokerId":0,
			"consumeBroadcastEnable":false,
			"consumeEnable":true,
			"consumeFromMinEnable":true,
			"consumeMessageOrderly":true,
			"consumeTimeoutMinute":15,
			"groupName":"orders",
			"groupRetryPolicy":{"customizedRetryPolicy":{"next":[1000,5000]},"type":"CUSTOMIZED"},
			"groupSysFlag":0,
			"notifyConsumerIdsChangedEnable":true,
			"retryMaxTimes":5,
			"retryQueueNums":2,
			"subscriptionDataSet":[{"expression":"*","expressionType":"TAG","topic":"TopicA"}],
			"whichBrokerWhenConsumeSlowly":1,
			"someFutureFlag":true
		},
		"minimal":{"groupName":"minimal"}
	}
}"#;

#[test]
fn java_groups_file_loads() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(groups_path(&dir).parent().unwrap()).unwrap();
    std::fs::write(groups_path(&dir), JAVA_GROUPS_JSON).unwrap();
    let groups = load(&dir);

    let orders = groups.find("orders", false).unwrap();
    assert!(orders.consume_message_orderly && !orders.consume_broadcast_enable);
    assert_eq!((orders.retry_max_times, orders.retry_queue_nums), (5, 2));
    assert_eq!(orders.group_retry_policy["customizedRetryPolicy"]["next"], json!([1000, 5000]));
    assert_eq!(orders.subscription_data_set.len(), 1);
    assert_eq!(groups.find("minimal", false), Some(SubscriptionGroupConfig::new("minimal")));
    assert_eq!(groups.forbidden("orders", "TopicA"), 2);
    assert!(groups.is_forbidden("orders", "TopicA", 1));
    assert_eq!(groups.data_version().counter, 12);
    // Predefined groups are there too.
    assert!(groups.contains(TOOLS_CONSUMER_GROUP) && groups.contains(CID_SYS_RMQ_TRANS));
}

#[test]
fn groups_round_trip_through_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let groups = load(&dir);
    let config = SubscriptionGroupConfig {
        consume_enable: false,
        retry_max_times: 3,
        broker_id: 1,
        attributes: BTreeMap::from([("k".into(), "v".into())]),
        group_retry_policy: json!({"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000}}),
        subscription_data_set: vec![json!({"topic": "T", "expression": "a||b"})],
        ..SubscriptionGroupConfig::new("g1")
    };
    groups.update(config.clone()).unwrap();
    groups.update_forbidden("g1", "T", 3, true).unwrap();
    let written = groups.all();

    // Reloaded from the journal alone, then from the file the periodic persist writes.
    let reloaded = load(&dir);
    assert_eq!(reloaded.find("g1", false), Some(config));
    assert_eq!(reloaded.all(), written);
    groups.persist().unwrap();
    let on_disk = SubscriptionGroupWrapper::decode(&std::fs::read(groups_path(&dir)).unwrap()).unwrap();
    assert_eq!(on_disk, written);
}

#[test]
fn unknown_group_is_auto_created_only_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let groups = load(&dir);
    assert_eq!(groups.find("newGroup", false), None);
    assert!(!groups.contains("newGroup"));

    let version = groups.data_version();
    let created = groups.find("newGroup", true).unwrap();
    assert_eq!(created, SubscriptionGroupConfig::new("newGroup"));
    assert_eq!(groups.data_version().counter, version.counter + 1);
    // The second lookup finds it without bumping.
    assert_eq!(groups.find("newGroup", true), Some(created.clone()));
    assert_eq!(groups.data_version().counter, version.counter + 1);
    // Journaled at once and still dirty: the periodic persist writes the file.
    assert_eq!(load(&dir).find("newGroup", false), Some(created.clone()));
    assert!(groups.persist_if_dirty().unwrap());
    assert_eq!(load(&dir).find("newGroup", false), Some(created));
}

#[test]
fn invalid_group_names_are_never_auto_created() {
    let dir = tempfile::tempdir().unwrap();
    let groups = load(&dir);
    for name in ["", "bad group", "a/b", &"g".repeat(121)] {
        assert_eq!(groups.find(name, true), None, "{name:?}");
    }
}

#[test]
fn deleting_a_group_removes_it_and_its_forbidden_bits() {
    let dir = tempfile::tempdir().unwrap();
    let groups = load(&dir);
    groups.update(SubscriptionGroupConfig::new("g")).unwrap();
    groups.update_forbidden("g", "T", 0, true).unwrap();
    assert!(groups.delete("g").unwrap());
    assert!(!groups.delete("g").unwrap());
    let reloaded = load(&dir);
    assert!(!reloaded.contains("g"));
    assert_eq!(reloaded.forbidden("g", "T"), 0);
    assert!(groups.update(SubscriptionGroupConfig::new("")).is_err());
}

#[test]
fn auto_created_groups_are_on_disk_without_waiting_for_the_periodic_persist() {
    let dir = tempfile::tempdir().unwrap();
    let groups = load(&dir);
    assert!(groups.find("cg_auto_created", true).is_some());
    // No persist call: as after a SIGKILL right after the heartbeat that created it.
    drop(groups);
    let reloaded = load(&dir);
    assert!(reloaded.contains("cg_auto_created"), "the auto-created group was lost");
}
