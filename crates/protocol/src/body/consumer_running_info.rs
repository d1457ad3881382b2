//! The GET_CONSUMER_RUNNING_INFO (307) response body: what one consumer client reports about
//! a group it runs (its settings, subscriptions, per-queue state and per-topic rates).
//! Java: `ConsumerRunningInfo`, `ProcessQueueInfo`, `PopProcessQueueInfo`, `ConsumeStatus`.
//!
//! The queue tables are keyed by queue, so the body is written in fastjson's object-key form
//! (see the private `queue_map` module). Properties are Java `Properties`: string values,
//! though fastjson peers may send numbers, which are read as their text. Turning the body
//! into mqadmin's report is the admin tool's job.

use std::collections::BTreeMap;

use serde::de::Deserializer;
use serde::{Deserialize, Serialize};

use crate::body::{lenient, queue_map, BodyError, JsonBody, MessageQueue, SubscriptionData};

/// Property: the client's name servers, each followed by `;`.
pub const PROP_NAMESERVER_ADDR: &str = "PROP_NAMESERVER_ADDR";
/// Property: the size of the consumer's listener pool.
pub const PROP_THREADPOOL_CORE_SIZE: &str = "PROP_THREADPOOL_CORE_SIZE";
/// Property: `true` for an orderly listener.
pub const PROP_CONSUME_ORDERLY: &str = "PROP_CONSUMEORDERLY";
/// Property: `CONSUME_PASSIVELY` (push) or `CONSUME_ACTIVELY` (pull).
pub const PROP_CONSUME_TYPE: &str = "PROP_CONSUME_TYPE";
/// Property: the client's version name, such as `V5_3_3`.
pub const PROP_CLIENT_VERSION: &str = "PROP_CLIENT_VERSION";
/// Property: when the consumer started, milliseconds since the epoch.
pub const PROP_CONSUMER_START_TIMESTAMP: &str = "PROP_CONSUMER_START_TIMESTAMP";

/// One consumer client's view of a group it runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerRunningInfo {
    /// Java: a thread dump, when the request asked for one (`jstackEnable`).
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lenient::or_default")]
    pub jstack: Option<String>,
    /// 5.x pop consumption: queue -> its state.
    #[serde(serialize_with = "queue_map::serialize", deserialize_with = "queue_map::deserialize")]
    pub mq_pop_table: BTreeMap<MessageQueue, PopProcessQueueInfo>,
    /// Assigned queue -> its state.
    #[serde(serialize_with = "queue_map::serialize", deserialize_with = "queue_map::deserialize")]
    pub mq_table: BTreeMap<MessageQueue, ProcessQueueInfo>,
    /// The consumer's settings under their Java field names, plus the `PROP_*` keys.
    #[serde(deserialize_with = "properties")]
    pub properties: BTreeMap<String, String>,
    /// Topic -> pull and consume rates.
    #[serde(deserialize_with = "lenient::or_default")]
    pub status_table: BTreeMap<String, ConsumeStatus>,
    /// The subscriptions, ordered by `topic@subString` as Java's `TreeSet`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub subscription_set: Vec<SubscriptionData>,
    /// 5.x: whatever the application chose to report.
    #[serde(deserialize_with = "lenient::or_default")]
    pub user_consumer_info: BTreeMap<String, String>,
}

impl ConsumerRunningInfo {
    /// The `PROP_CONSUME_TYPE` property; a push consumer unless it says `CONSUME_ACTIVELY`
    /// (or `PULL`). Java: `isPushType`.
    pub fn is_push_type(&self) -> bool {
        self.properties.get(PROP_CONSUME_TYPE).is_none_or(|t| !matches!(t.as_str(), "CONSUME_ACTIVELY" | "PULL"))
    }

    /// Sorts the subscriptions by `topic@subString` and drops repeats, as Java's `TreeSet`.
    pub fn sort_subscriptions(&mut self) {
        let key = |s: &SubscriptionData| format!("{}@{}", s.topic, s.sub_string);
        self.subscription_set.sort_by_key(key);
        self.subscription_set.dedup_by(|a, b| key(a) == key(b));
    }
}

/// One assigned queue's state in the client. Java: `ProcessQueueInfo` (`droped` sic).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProcessQueueInfo {
    /// Messages pulled and not consumed yet.
    #[serde(deserialize_with = "lenient::int")]
    pub cached_msg_count: i32,
    /// The largest queue offset among them (0 when none).
    #[serde(deserialize_with = "lenient::int")]
    pub cached_msg_max_offset: i64,
    /// The smallest queue offset among them (0 when none).
    #[serde(deserialize_with = "lenient::int")]
    pub cached_msg_min_offset: i64,
    /// Their body bytes, in whole MiB.
    #[serde(rename = "cachedMsgSizeInMiB", deserialize_with = "lenient::int")]
    pub cached_msg_size_in_mib: i32,
    /// The consumed offset the client would commit (-1 when unknown).
    #[serde(deserialize_with = "lenient::int")]
    pub commit_offset: i64,
    /// The queue was dropped and is being removed.
    #[serde(rename = "droped", deserialize_with = "lenient::boolean")]
    pub dropped: bool,
    /// When a listener last finished with the queue's messages (ms since the epoch).
    #[serde(deserialize_with = "lenient::int")]
    pub last_consume_timestamp: i64,
    /// When the queue's broker lock was last taken or renewed (orderly; ms since the epoch).
    #[serde(deserialize_with = "lenient::int")]
    pub last_lock_timestamp: i64,
    /// When a pull of the queue last answered (ms since the epoch).
    #[serde(deserialize_with = "lenient::int")]
    pub last_pull_timestamp: i64,
    /// Orderly: the broker lock is held.
    #[serde(deserialize_with = "lenient::boolean")]
    pub locked: bool,
    /// Orderly: messages handed to the listener and not finished.
    #[serde(deserialize_with = "lenient::int")]
    pub transaction_msg_count: i32,
    /// Orderly: the largest queue offset among them.
    #[serde(deserialize_with = "lenient::int")]
    pub transaction_msg_max_offset: i64,
    /// Orderly: the smallest queue offset among them.
    #[serde(deserialize_with = "lenient::int")]
    pub transaction_msg_min_offset: i64,
    /// Orderly: unlock attempts of a dropped queue.
    #[serde(deserialize_with = "lenient::int")]
    pub try_unlock_times: i64,
}

/// One queue's state under pop consumption. Java: `PopProcessQueueInfo` (`droped` sic).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PopProcessQueueInfo {
    /// The queue was dropped.
    #[serde(rename = "droped", deserialize_with = "lenient::boolean")]
    pub dropped: bool,
    /// When the queue was last popped (ms since the epoch).
    #[serde(deserialize_with = "lenient::int")]
    pub last_pop_timestamp: i64,
    /// Popped messages not acknowledged yet.
    #[serde(deserialize_with = "lenient::int")]
    pub wait_ack_count: i32,
}

/// One topic's rates in a consumer over the last minute (failed messages over the last hour).
/// Java: `ConsumeStatus`, filled by `ConsumerStatsManager#consumeStatus`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsumeStatus {
    /// Messages whose consumption failed in the last hour.
    #[serde(rename = "consumeFailedMsgs", deserialize_with = "lenient::int")]
    pub consume_failed_msgs: i64,
    /// Failed messages per second.
    #[serde(rename = "consumeFailedTPS", deserialize_with = "lenient::or_default")]
    pub consume_failed_tps: f64,
    /// Consumed messages per second.
    #[serde(rename = "consumeOKTPS", deserialize_with = "lenient::or_default")]
    pub consume_ok_tps: f64,
    /// Mean listener call time, ms.
    #[serde(rename = "consumeRT", deserialize_with = "lenient::or_default")]
    pub consume_rt: f64,
    /// Mean pull round trip, ms.
    #[serde(rename = "pullRT", deserialize_with = "lenient::or_default")]
    pub pull_rt: f64,
    /// Pulled messages per second.
    #[serde(rename = "pullTPS", deserialize_with = "lenient::or_default")]
    pub pull_tps: f64,
}

impl JsonBody for ConsumerRunningInfo {
    /// fastjson's form, with queue objects as keys; not standard JSON.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1024 + 400 * self.mq_table.len());
        out.push(b'{');
        if let Some(jstack) = &self.jstack {
            out.extend_from_slice(b"\"jstack\":");
            queue_map::write_value(jstack, &mut out);
            out.push(b',');
        }
        out.extend_from_slice(b"\"mqPopTable\":");
        queue_map::write_map(&self.mq_pop_table, &mut out);
        out.extend_from_slice(b",\"mqTable\":");
        queue_map::write_map(&self.mq_table, &mut out);
        out.extend_from_slice(b",\"properties\":");
        queue_map::write_value(&self.properties, &mut out);
        out.extend_from_slice(b",\"statusTable\":");
        queue_map::write_value(&self.status_table, &mut out);
        out.extend_from_slice(b",\"subscriptionSet\":");
        queue_map::write_value(&self.subscription_set, &mut out);
        out.extend_from_slice(b",\"userConsumerInfo\":");
        queue_map::write_value(&self.user_consumer_info, &mut out);
        out.push(b'}');
        out
    }

    /// The same as [`ConsumerRunningInfo::encode`]: the body has no integer-keyed map.
    fn encode_fastjson(&self) -> Vec<u8> {
        self.encode()
    }

    /// Reads fastjson's object keys, string keys holding a queue's JSON, and the usual
    /// lenient forms.
    fn decode(bytes: &[u8]) -> Result<Self, BodyError> {
        queue_map::decode(bytes)
    }
}

/// serde `deserialize_with` of Java `Properties`: string values, numbers and booleans as their
/// text, `null` values dropped (Java's `Properties` holds no nulls); a `null` map is empty.
fn properties<'de, D: Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, String>, D::Error> {
    let raw: Option<BTreeMap<String, serde_json::Value>> = Option::deserialize(deserializer)?;
    Ok(raw
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(key, value)| {
            let text = match value {
                serde_json::Value::Null => return None,
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            Some((key, text))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn sample() -> ConsumerRunningInfo {
        let subscription = SubscriptionData {
            code_set: BTreeSet::from([2_598_919]),
            sub_string: "TagA".into(),
            sub_version: 1_700_000_000_000,
            tags_set: BTreeSet::from(["TagA".into()]),
            topic: "T".into(),
            ..SubscriptionData::default()
        };
        let queue_info = ProcessQueueInfo {
            cached_msg_count: 2,
            cached_msg_max_offset: 11,
            cached_msg_min_offset: 10,
            commit_offset: 10,
            last_consume_timestamp: 1_700_000_000_002,
            last_pull_timestamp: 1_700_000_000_001,
            ..ProcessQueueInfo::default()
        };
        ConsumerRunningInfo {
            jstack: None,
            mq_pop_table: BTreeMap::new(),
            mq_table: BTreeMap::from([(MessageQueue::new("T", "b", 0), queue_info)]),
            properties: BTreeMap::from([
                (PROP_CONSUME_TYPE.to_owned(), "CONSUME_PASSIVELY".to_owned()),
                ("consumerGroup".to_owned(), "g".to_owned()),
            ]),
            status_table: BTreeMap::from([(
                "T".to_owned(),
                ConsumeStatus { consume_ok_tps: 1.5, pull_rt: 2.0, pull_tps: 1.5, ..ConsumeStatus::default() },
            )]),
            subscription_set: vec![subscription],
            user_consumer_info: BTreeMap::new(),
        }
    }

    /// The shape Java's `RemotingSerializable#encode` (fastjson) gives: keys alphabetical, the
    /// queue table keyed by queue objects, doubles with a fraction, no `jstack` when null.
    #[test]
    fn golden_bytes_in_fastjson_form() {
        let golden = concat!(
            r#"{"mqPopTable":{},"mqTable":{{"brokerName":"b","queueId":0,"topic":"T"}:"#,
            r#"{"cachedMsgCount":2,"cachedMsgMaxOffset":11,"cachedMsgMinOffset":10,"cachedMsgSizeInMiB":0,"#,
            r#""commitOffset":10,"droped":false,"lastConsumeTimestamp":1700000000002,"lastLockTimestamp":0,"#,
            r#""lastPullTimestamp":1700000000001,"locked":false,"transactionMsgCount":0,"#,
            r#""transactionMsgMaxOffset":0,"transactionMsgMinOffset":0,"tryUnlockTimes":0}},"#,
            r#""properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","consumerGroup":"g"},"#,
            r#""statusTable":{"T":{"consumeFailedMsgs":0,"consumeFailedTPS":0.0,"consumeOKTPS":1.5,"#,
            r#""consumeRT":0.0,"pullRT":2.0,"pullTPS":1.5}},"#,
            r#""subscriptionSet":[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","#,
            r#""subString":"TagA","subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T"}],"#,
            r#""userConsumerInfo":{}}"#
        );
        let info = sample();
        assert_eq!(String::from_utf8(info.encode()).unwrap(), golden);
        assert_eq!(ConsumerRunningInfo::decode(golden.as_bytes()).unwrap(), info);
        let with_jstack = ConsumerRunningInfo { jstack: Some("dump".into()), ..info };
        let text = String::from_utf8(with_jstack.encode()).unwrap();
        assert!(text.starts_with(r#"{"jstack":"dump","mqPopTable":{}"#), "{text}");
        assert_eq!(ConsumerRunningInfo::decode(text.as_bytes()).unwrap(), with_jstack);
    }

    /// What a Java 4.x client sends: no pop table or user info, a numeric property, nulls.
    #[test]
    fn reads_java_output_leniently() {
        let java = concat!(
            r#"{"jstack":null,"mqTable":{{"brokerName":"b","queueId":3,"topic":"T"}:{"commitOffset":"7","#,
            r#""droped":true,"locked":1}},"properties":{"PROP_CONSUMER_START_TIMESTAMP":1700000000000,"#,
            r#""PROP_CONSUME_TYPE":"CONSUME_ACTIVELY","nothing":null},"statusTable":null,"#,
            r#""subscriptionSet":[{"topic":"T","subString":"*"}],"unknown":1}"#
        );
        let info = ConsumerRunningInfo::decode(java.as_bytes()).unwrap();
        let queue = info.mq_table[&MessageQueue::new("T", "b", 3)];
        assert_eq!((queue.commit_offset, queue.dropped, queue.locked), (7, true, true));
        assert_eq!(info.properties[PROP_CONSUMER_START_TIMESTAMP], "1700000000000");
        assert!(!info.properties.contains_key("nothing"));
        assert!(!info.is_push_type());
        assert!(info.status_table.is_empty() && info.mq_pop_table.is_empty() && info.jstack.is_none());
        assert_eq!(info.subscription_set[0].sub_string, "*");
    }

    #[test]
    fn subscriptions_sort_as_java_tree_set() {
        let sub = |topic: &str, expr: &str| SubscriptionData {
            topic: topic.into(),
            sub_string: expr.into(),
            ..SubscriptionData::default()
        };
        let mut info = ConsumerRunningInfo {
            subscription_set: vec![sub("b", "*"), sub("a", "x"), sub("b", "*"), sub("a", "*")],
            ..ConsumerRunningInfo::default()
        };
        info.sort_subscriptions();
        let keys: Vec<(&str, &str)> =
            info.subscription_set.iter().map(|s| (s.topic.as_str(), s.sub_string.as_str())).collect();
        assert_eq!(keys, [("a", "*"), ("a", "x"), ("b", "*")]);
        assert!(info.is_push_type(), "no PROP_CONSUME_TYPE reads as push");
    }
}
