//! Static topics (RIP-21): the logic-queue mapping a broker keeps in
//! `config/topicQueueMapping.json`, ships in its registration and answers GET_TOPIC_CONFIG
//! with. Java: `org.apache.rocketmq.remoting.protocol.statictopic` (`LogicQueueMappingItem`,
//! `TopicQueueMappingInfo`, `TopicQueueMappingDetail`, `TopicConfigAndQueueMapping`,
//! `TopicRemappingDetailWrapper`) and `TopicQueueMappingSerializeWrapper`.
//!
//! A static topic has `totalQueues` *logic* queues with global ids `0..totalQueues`. Each logic
//! queue is a list of items ordered by generation: each item is a physical queue on one broker
//! holding the logic offsets from its `logicOffset` on; the last item is the one written to
//! (the leader). Moving a logic queue adds an item on the new broker; the old one keeps its
//! messages, read through the new leader. The offset arithmetic and the validity checks of a
//! mapping live here with the types, as both the broker and the admin tool apply them.

use std::collections::{BTreeMap, BTreeSet};

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::body::{lenient, BodyError, DataVersion, JsonBody, TopicConfig};

/// Java's `MixAll.METADATA_SCOPE_GLOBAL`: the default scope of a mapping.
pub const METADATA_SCOPE_GLOBAL: &str = "__global__";
/// Java's `MixAll.LOGICAL_QUEUE_MOCK_BROKER_PREFIX`: clients that understand mappings put
/// logic queues under a made-up broker named this plus the scope.
pub const LOGICAL_QUEUE_MOCK_BROKER_PREFIX: &str = "__syslo__";
/// Java's `TopicQueueMappingUtils.DEFAULT_BLOCK_SEQ_SIZE`: a moved queue's new leader starts
/// at the old end rounded up to a multiple of this, leaving room for late writes to the old one.
pub const DEFAULT_BLOCK_SEQ_SIZE: i64 = 10_000;

/// The `lo` header field of a request that addresses a broker's physical queue (Java sets it
/// on requests one broker forwards to another). A client that does not map logic queues (it
/// lists queues from a route's `queueDatas`) sends it so a static topic's physical queues are
/// what its queue ids mean; Java brokers read it the same way.
pub const PHYSICAL_QUEUE: Option<bool> = Some(false);

/// One generation of a logic queue: a physical queue on `bname` holding the logic offsets from
/// `logicOffset` on (`-1` while a move has not fixed it yet).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LogicQueueMappingItem {
    /// The broker holding the physical queue.
    #[serde(deserialize_with = "lenient::or_default")]
    pub bname: String,
    /// Physical end offset, exclusive; `-1` while open.
    #[serde(deserialize_with = "lenient::int")]
    pub end_offset: i64,
    /// Generation: grows by one per move.
    #[serde(deserialize_with = "lenient::int")]
    pub gen: i32,
    /// Logic offset of the item's first message; `-1` until decided.
    #[serde(deserialize_with = "lenient::int")]
    pub logic_offset: i64,
    /// The physical queue id on `bname`.
    #[serde(deserialize_with = "lenient::int")]
    pub queue_id: i32,
    /// Physical start offset (always 0 as Java creates items).
    #[serde(deserialize_with = "lenient::int")]
    pub start_offset: i64,
    /// Reserved (`-1`).
    #[serde(deserialize_with = "lenient::int")]
    pub time_of_end: i64,
    /// Reserved (`-1`).
    #[serde(deserialize_with = "lenient::int")]
    pub time_of_start: i64,
}

impl Default for LogicQueueMappingItem {
    fn default() -> Self {
        Self {
            bname: String::new(),
            end_offset: -1,
            gen: 0,
            logic_offset: 0,
            queue_id: 0,
            start_offset: 0,
            time_of_end: -1,
            time_of_start: -1,
        }
    }
}

impl LogicQueueMappingItem {
    /// A new open item, as Java's tools create them.
    pub fn new(gen: i32, queue_id: i32, bname: &str, logic_offset: i64) -> Self {
        Self { gen, queue_id, bname: bname.to_owned(), logic_offset, ..Self::default() }
    }

    /// Java's `computeStaticQueueOffsetLoosely`: the logic offset of a physical one, clamped
    /// to the item's range; `-1` while the item's logic offset is undecided.
    pub fn static_offset_loosely(&self, physical: i64) -> i64 {
        if self.logic_offset < 0 {
            return -1;
        }
        if physical < self.start_offset {
            return self.logic_offset;
        }
        if self.end_offset >= self.start_offset && self.end_offset < physical {
            return self.logic_offset + (self.end_offset - self.start_offset);
        }
        self.logic_offset + (physical - self.start_offset)
    }

    /// Java's `computeStaticQueueOffsetStrictly`: the logic offset of a physical one (not
    /// clamped at the end).
    pub fn static_offset_strictly(&self, physical: i64) -> i64 {
        if physical < self.start_offset {
            return self.logic_offset;
        }
        self.logic_offset + (physical - self.start_offset)
    }

    /// Java's `computePhysicalQueueOffset`.
    pub fn physical_offset(&self, logic: i64) -> i64 {
        (logic - self.logic_offset) + self.start_offset
    }

    /// Java's `computeMaxStaticQueueOffset`: the logic end when the item is sealed, else its
    /// start.
    pub fn max_static_offset(&self) -> i64 {
        if self.end_offset >= self.start_offset {
            self.logic_offset + self.end_offset - self.start_offset
        } else {
            self.logic_offset
        }
    }

    /// Java's `checkIfEndOffsetDecided`.
    pub fn end_decided(&self) -> bool {
        self.end_offset > self.start_offset
    }

    /// Java's `checkIfLogicoffsetDecided`.
    pub fn logic_offset_decided(&self) -> bool {
        self.logic_offset >= 0
    }

    /// Java's `computeOffsetDelta`: what a client adds to a physical offset read from this
    /// item (the pull answer's `offsetDelta`).
    pub fn offset_delta(&self) -> i64 {
        self.logic_offset - self.start_offset
    }
}

/// What a route carries per broker: the logic ids the broker leads and their physical queues.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicQueueMappingInfo {
    /// The broker this mapping belongs to.
    #[serde(deserialize_with = "lenient::or_default")]
    pub bname: String,
    /// Logic id -> physical id, for the logic queues this broker leads.
    #[serde(deserialize_with = "lenient::or_default")]
    pub curr_id_map: BTreeMap<i32, i32>,
    /// Marked while an update is half done.
    #[serde(deserialize_with = "lenient::boolean")]
    pub dirty: bool,
    /// Fences older mappings: a broker refuses a smaller one.
    #[serde(deserialize_with = "lenient::int")]
    pub epoch: i64,
    /// Scope of the logic ids ([`METADATA_SCOPE_GLOBAL`] by default).
    #[serde(deserialize_with = "lenient::or_default")]
    pub scope: String,
    /// The topic.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic: String,
    /// Number of logic queues of the topic.
    #[serde(deserialize_with = "lenient::int")]
    pub total_queues: i32,
}

impl Default for TopicQueueMappingInfo {
    fn default() -> Self {
        Self {
            bname: String::new(),
            curr_id_map: BTreeMap::new(),
            dirty: false,
            epoch: 0,
            scope: METADATA_SCOPE_GLOBAL.to_owned(),
            topic: String::new(),
            total_queues: 0,
        }
    }
}

impl JsonBody for TopicQueueMappingInfo {}

/// A broker's whole mapping of one static topic: [`TopicQueueMappingInfo`] plus the item lists
/// of every logic queue it hosts (leads now or held before).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicQueueMappingDetail {
    /// The broker this mapping belongs to.
    #[serde(deserialize_with = "lenient::or_default")]
    pub bname: String,
    /// As sent (Java's tools leave it empty here; routes carry the computed one).
    #[serde(deserialize_with = "lenient::or_default")]
    pub curr_id_map: BTreeMap<i32, i32>,
    /// Marked while an update is half done.
    #[serde(deserialize_with = "lenient::boolean")]
    pub dirty: bool,
    /// Fences older mappings.
    #[serde(deserialize_with = "lenient::int")]
    pub epoch: i64,
    /// Global id -> items, oldest generation first.
    #[serde(deserialize_with = "lenient::or_default")]
    pub hosted_queues: BTreeMap<i32, Vec<LogicQueueMappingItem>>,
    /// Scope of the logic ids.
    #[serde(deserialize_with = "lenient::or_default")]
    pub scope: String,
    /// The topic.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic: String,
    /// Number of logic queues of the topic.
    #[serde(deserialize_with = "lenient::int")]
    pub total_queues: i32,
}

impl Default for TopicQueueMappingDetail {
    fn default() -> Self {
        Self {
            bname: String::new(),
            curr_id_map: BTreeMap::new(),
            dirty: false,
            epoch: 0,
            hosted_queues: BTreeMap::new(),
            scope: METADATA_SCOPE_GLOBAL.to_owned(),
            topic: String::new(),
            total_queues: 0,
        }
    }
}

impl JsonBody for TopicQueueMappingDetail {}

impl TopicQueueMappingDetail {
    /// An empty mapping of `topic` on `bname`.
    pub fn new(topic: &str, total_queues: i32, bname: &str, epoch: i64) -> Self {
        Self { topic: topic.to_owned(), total_queues, bname: bname.to_owned(), epoch, ..Self::default() }
    }

    /// Java's `buildIdMap(LEVEL_0)`: logic id -> physical id of the queues this broker leads.
    pub fn leader_id_map(&self) -> BTreeMap<i32, i32> {
        self.hosted_queues
            .iter()
            .filter_map(|(global, items)| {
                let leader = items.last()?;
                (leader.bname == self.bname).then_some((*global, leader.queue_id))
            })
            .collect()
    }

    /// Java's `cloneAsMappingInfo`: what the broker registers for routes. As in Java the scope
    /// is the default one and `dirty` is false.
    pub fn to_info(&self) -> TopicQueueMappingInfo {
        TopicQueueMappingInfo {
            bname: self.bname.clone(),
            curr_id_map: self.leader_id_map(),
            dirty: false,
            epoch: self.epoch,
            scope: METADATA_SCOPE_GLOBAL.to_owned(),
            topic: self.topic.clone(),
            total_queues: self.total_queues,
        }
    }

    /// Java's `computeMaxOffsetFromMapping`: the largest logic offset the mapping itself
    /// proves for `global` (`-1` when not hosted).
    pub fn max_offset_from_mapping(&self, global: i32) -> i64 {
        self.hosted_queues.get(&global).and_then(|items| items.last()).map_or(-1, |i| i.max_static_offset())
    }

    /// Does this broker lead logic queue `global`?
    pub fn leads(&self, global: i32) -> bool {
        self.hosted_queues.get(&global).and_then(|items| items.last()).is_some_and(|i| i.bname == self.bname)
    }

    /// The logic id this broker's physical queue `physical` leads, if any.
    pub fn global_led_by(&self, physical: i32) -> Option<i32> {
        self.hosted_queues.iter().find_map(|(global, items)| {
            let leader = items.last()?;
            (leader.bname == self.bname && leader.queue_id == physical).then_some(*global)
        })
    }
}

/// Java's `TopicQueueMappingUtils.getMockBrokerName`: the made-up broker name under which
/// clients that understand mappings list a static topic's logic queues.
pub fn mock_broker_name(scope: &str) -> String {
    if scope == METADATA_SCOPE_GLOBAL {
        format!("{LOGICAL_QUEUE_MOCK_BROKER_PREFIX}{}", &scope[2..])
    } else {
        format!("{LOGICAL_QUEUE_MOCK_BROKER_PREFIX}{scope}")
    }
}

/// Java's `findLogicQueueMappingItem`: the item holding logic offset `logic` (the newest whose
/// start is at or below it), or the oldest when it is below them all. Items whose logic offset
/// is undecided are skipped when `ignore_undecided`.
pub fn find_item(
    items: &[LogicQueueMappingItem],
    logic: i64,
    ignore_undecided: bool,
) -> Option<&LogicQueueMappingItem> {
    let usable = |i: &&LogicQueueMappingItem| !(ignore_undecided && i.logic_offset < 0);
    items.iter().rev().filter(usable).find(|i| logic >= i.logic_offset).or_else(|| items.iter().find(|i| usable(i)))
}

/// Java's `findNext`: the item after `current` (by generation), unless it is undecided and
/// `ignore_undecided`.
pub fn find_next<'a>(
    items: &'a [LogicQueueMappingItem],
    current: &LogicQueueMappingItem,
    ignore_undecided: bool,
) -> Option<&'a LogicQueueMappingItem> {
    let at = items.iter().position(|i| i.gen == current.gen && !(ignore_undecided && i.logic_offset < 0))?;
    let next = items.get(at + 1)?;
    (!(ignore_undecided && next.logic_offset < 0)).then_some(next)
}

/// A mapping that breaks the rules of [`check_item_offsets`], [`check_immutable`] or an
/// update's fencing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MappingError(pub String);

fn invalid<T>(reason: impl Into<String>) -> Result<T, MappingError> {
    Err(MappingError(reason.into()))
}

/// Java's `checkLogicQueueMappingItemOffset`: non-negative fields, generations and logic
/// offsets growing strictly from the oldest item to the newest, only the newest undecided.
///
/// # Errors
/// The first rule broken, with Java's wording.
pub fn check_item_offsets(items: &[LogicQueueMappingItem]) -> Result<(), MappingError> {
    let mut last_gen = -1;
    let mut last_offset = -1;
    for (index, item) in items.iter().enumerate().rev() {
        if item.start_offset < 0 || item.gen < 0 || item.queue_id < 0 {
            return invalid("The field is illegal, should not be negative");
        }
        if items.len() >= 2 && index + 2 <= items.len() && item.logic_offset < 0 {
            return invalid("The non-latest item has negative logic offset");
        }
        if last_gen != -1 && item.gen >= last_gen {
            return invalid("The gen does not increase monotonically");
        }
        if item.end_offset != -1 && item.end_offset < item.start_offset {
            return invalid("The endOffset is smaller than the start offset");
        }
        if last_offset != -1 && item.logic_offset != -1 {
            if item.logic_offset >= last_offset {
                return invalid("The base logic offset does not increase monotonically");
            }
            if item.max_static_offset() >= last_offset {
                return invalid("The max logic offset does not increase monotonically");
            }
        }
        last_gen = item.gen;
        last_offset = item.logic_offset;
    }
    Ok(())
}

/// Java's `makeSureLogicQueueMappingItemImmutable`: items of the same generation in the old
/// and new lists must name the same physical queue and logic start (once decided); with equal
/// epochs the leader must not change. Java only `assert`s the first part (off in production);
/// here it is enforced.
///
/// # Errors
/// Which rule the new list breaks.
pub fn check_immutable(
    old: &[LogicQueueMappingItem],
    new: &[LogicQueueMappingItem],
    epoch_equal: bool,
) -> Result<(), MappingError> {
    if old.is_empty() {
        return Ok(());
    }
    if new.is_empty() {
        return invalid("The new item list is null or empty");
    }
    let (mut i_old, mut i_new) = (0, 0);
    while i_old < old.len() && i_new < new.len() {
        let (o, n) = (&old[i_old], &new[i_new]);
        if n.gen < o.gen {
            i_new += 1;
        } else if o.gen < n.gen {
            i_old += 1;
        } else {
            if o.bname != n.bname || o.queue_id != n.queue_id || o.start_offset != n.start_offset {
                return invalid(format!("item of gen {} changed its physical queue", o.gen));
            }
            if o.logic_offset != -1 && o.logic_offset != n.logic_offset {
                return invalid(format!("item of gen {} changed its logic offset", o.gen));
            }
            i_old += 1;
            i_new += 1;
        }
    }
    if epoch_equal {
        let (o, n) = (&old[old.len() - 1], &new[new.len() - 1]);
        if n.gen != o.gen || n.bname != o.bname || n.queue_id != o.queue_id || n.start_offset != o.start_offset {
            return invalid("The new leader is different but epoch equal");
        }
    }
    Ok(())
}

/// Java's `blockSeqRoundUp`: the next multiple of `block` past `offset`, one more block when
/// `offset` is in the upper half of its block.
pub fn block_seq_round_up(offset: i64, block: i64) -> i64 {
    let (num, left) = (offset / block, offset % block);
    if left < block / 2 {
        (num + 1) * block
    } else {
        (num + 2) * block
    }
}

/// `config/topicQueueMapping.json`: topic -> mapping, with the table's version. Java:
/// `TopicQueueMappingSerializeWrapper`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicQueueMappingSerializeWrapper {
    /// Version of the table.
    #[serde(deserialize_with = "lenient::or_default")]
    pub data_version: DataVersion,
    /// Topic -> mapping.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic_queue_mapping_info_map: BTreeMap<String, TopicQueueMappingDetail>,
}

impl JsonBody for TopicQueueMappingSerializeWrapper {}

/// A topic config with its mapping: the GET_TOPIC_CONFIG answer (the mapping only when asked
/// with `lo=true` and the topic is static). Java: `TopicConfigAndQueueMapping`, which extends
/// `TopicConfig`, so the config's fields and `mappingDetail` share one JSON object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicConfigAndQueueMapping {
    /// The config.
    pub config: TopicConfig,
    /// The mapping, when there is one.
    pub mapping_detail: Option<TopicQueueMappingDetail>,
}

impl Serialize for TopicConfigAndQueueMapping {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = match serde_json::to_value(&self.config).map_err(serde::ser::Error::custom)? {
            Value::Object(o) => o,
            _ => return Err(serde::ser::Error::custom("a topic config is a JSON object")),
        };
        if let Some(detail) = &self.mapping_detail {
            object.insert("mappingDetail".into(), serde_json::to_value(detail).map_err(serde::ser::Error::custom)?);
        }
        // serde_json's map is ordered by key: the fields come out alphabetically, as fastjson.
        object.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for TopicConfigAndQueueMapping {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut object = match Value::deserialize(deserializer)? {
            Value::Object(o) => o,
            other => return Err(D::Error::custom(format!("expected a topic config object, got {other}"))),
        };
        let mapping_detail = match object.remove("mappingDetail") {
            None | Some(Value::Null) => None,
            Some(detail) => Some(serde_json::from_value(detail).map_err(D::Error::custom)?),
        };
        let config = serde_json::from_value(Value::Object(object)).map_err(D::Error::custom)?;
        Ok(Self { config, mapping_detail })
    }
}

impl JsonBody for TopicConfigAndQueueMapping {}

/// The plan of an `updateStaticTopic` / `remappingStaticTopic` run, as mqadmin writes it to a
/// file and reads it back with `-mf`. Java: `TopicRemappingDetailWrapper`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicRemappingDetailWrapper {
    /// Broker name -> its config and mapping after the run.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_config_map: BTreeMap<String, TopicConfigAndQueueMapping>,
    /// Brokers that receive moved queues.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_to_map_in: BTreeSet<String>,
    /// Brokers that give queues away.
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_to_map_out: BTreeSet<String>,
    /// The new epoch.
    #[serde(deserialize_with = "lenient::int")]
    pub epoch: i64,
    /// The topic.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic: String,
    /// `CREATE_OR_UPDATE` or `REMAPPING`.
    #[serde(deserialize_with = "lenient::or_default", rename = "type")]
    pub kind: String,
}

impl JsonBody for TopicRemappingDetailWrapper {}

/// `TopicRemappingDetailWrapper.TYPE_CREATE_OR_UPDATE`.
pub const TYPE_CREATE_OR_UPDATE: &str = "CREATE_OR_UPDATE";
/// `TopicRemappingDetailWrapper.TYPE_REMAPPING`.
pub const TYPE_REMAPPING: &str = "REMAPPING";

/// Reads a mapping body, refusing one whose item lists break [`check_item_offsets`].
///
/// # Errors
/// Malformed JSON or an invalid item list.
pub fn decode_detail(bytes: &[u8]) -> Result<TopicQueueMappingDetail, BodyError> {
    let detail = TopicQueueMappingDetail::decode(bytes)?;
    for items in detail.hosted_queues.values() {
        check_item_offsets(items).map_err(|e| BodyError::InvalidMapping(e.0))?;
    }
    Ok(detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(gen: i32, queue_id: i32, bname: &str, logic_offset: i64, end_offset: i64) -> LogicQueueMappingItem {
        LogicQueueMappingItem { end_offset, ..LogicQueueMappingItem::new(gen, queue_id, bname, logic_offset) }
    }

    /// Golden JSON from the fact sheet's field list (advanced-topics.md §3), keys as fastjson
    /// orders them.
    #[test]
    fn a_mapping_detail_has_javas_json_shape() {
        let mut detail = TopicQueueMappingDetail::new("T", 2, "broker-a", 1_700_000_000_000);
        detail.hosted_queues.insert(0, vec![item(0, 0, "broker-a", 0, -1)]);
        let expected = concat!(
            r#"{"bname":"broker-a","currIdMap":{},"dirty":false,"epoch":1700000000000,"#,
            r#""hostedQueues":{"0":[{"bname":"broker-a","endOffset":-1,"gen":0,"logicOffset":0,"queueId":0,"#,
            r#""startOffset":0,"timeOfEnd":-1,"timeOfStart":-1}]},"scope":"__global__","topic":"T","totalQueues":2}"#
        );
        assert_eq!(String::from_utf8(detail.encode()).unwrap(), expected);
        // fastjson's own form (bare integer keys) reads back the same.
        let fastjson = String::from_utf8(detail.encode_fastjson()).unwrap();
        assert!(fastjson.contains(r#""hostedQueues":{0:[{"#), "{fastjson}");
        assert_eq!(TopicQueueMappingDetail::decode(fastjson.as_bytes()).unwrap(), detail);
    }

    #[test]
    fn a_route_info_lists_only_the_queues_the_broker_leads() {
        let mut detail = TopicQueueMappingDetail::new("T", 3, "a", 5);
        detail.hosted_queues.insert(0, vec![item(0, 0, "a", 0, -1)]);
        // Logic queue 1 moved from a (physical 1) to b.
        detail.hosted_queues.insert(1, vec![item(0, 1, "a", 0, -1), item(1, 0, "b", 20_000, -1)]);
        detail.hosted_queues.insert(2, vec![item(0, 0, "b", 0, -1), item(1, 2, "a", 10_000, -1)]);
        let info = detail.to_info();
        assert_eq!(info.curr_id_map, BTreeMap::from([(0, 0), (2, 2)]));
        assert_eq!(
            String::from_utf8(info.encode()).unwrap(),
            r#"{"bname":"a","currIdMap":{"0":0,"2":2},"dirty":false,"epoch":5,"scope":"__global__","topic":"T","totalQueues":3}"#
        );
        assert!(detail.leads(0) && !detail.leads(1) && detail.leads(2));
        assert_eq!(detail.global_led_by(2), Some(2));
        assert_eq!(detail.global_led_by(1), None);
    }

    #[test]
    fn offsets_translate_as_java_computes_them() {
        let sealed = item(0, 3, "a", 0, 40);
        assert_eq!(sealed.static_offset_strictly(50), 50);
        assert_eq!(sealed.static_offset_loosely(50), 40);
        assert_eq!(sealed.max_static_offset(), 40);
        let moved = item(1, 0, "b", 10_000, -1);
        assert_eq!(moved.physical_offset(10_007), 7);
        assert_eq!(moved.static_offset_strictly(7), 10_007);
        assert_eq!(moved.offset_delta(), 10_000);
        assert_eq!(item(1, 0, "b", -1, -1).static_offset_loosely(7), -1);
        let items = vec![item(0, 3, "a", 0, -1), moved.clone(), item(2, 1, "c", -1, -1)];
        assert_eq!(find_item(&items, 5, true).unwrap().gen, 0);
        assert_eq!(find_item(&items, 10_000, true).unwrap().gen, 1);
        assert_eq!(find_item(&items, i64::MAX, true).unwrap().gen, 1);
        assert_eq!(find_item(&items, i64::MAX, false).unwrap().gen, 2);
        assert_eq!(find_next(&items, &items[0], true).unwrap().gen, 1);
        assert_eq!(find_next(&items, &items[1], true), None);
        assert_eq!(block_seq_round_up(40, DEFAULT_BLOCK_SEQ_SIZE), 10_000);
        assert_eq!(block_seq_round_up(6_000, DEFAULT_BLOCK_SEQ_SIZE), 20_000);
        assert_eq!(mock_broker_name(METADATA_SCOPE_GLOBAL), "__syslo__global__");
        assert_eq!(mock_broker_name("x"), "__syslo__x");
    }

    #[test]
    fn invalid_item_lists_are_refused() {
        assert!(check_item_offsets(&[item(0, 0, "a", 0, -1), item(1, 0, "b", 10_000, -1)]).is_ok());
        assert!(check_item_offsets(&[item(0, 0, "a", 0, -1), item(1, 0, "b", -1, -1)]).is_ok());
        let undecided_old = check_item_offsets(&[item(0, 0, "a", -1, -1), item(1, 0, "b", 10, -1)]);
        assert_eq!(undecided_old.unwrap_err().0, "The non-latest item has negative logic offset");
        let same_gen = check_item_offsets(&[item(1, 0, "a", 0, -1), item(1, 0, "b", 10, -1)]);
        assert_eq!(same_gen.unwrap_err().0, "The gen does not increase monotonically");
        let overlap = check_item_offsets(&[item(0, 0, "a", 0, 50), item(1, 0, "b", 40, -1)]);
        assert_eq!(overlap.unwrap_err().0, "The max logic offset does not increase monotonically");
        let old = [item(0, 0, "a", 0, -1)];
        assert!(check_immutable(&old, &[item(0, 0, "a", 0, -1), item(1, 0, "b", -1, -1)], false).is_ok());
        assert!(check_immutable(&old, &[item(0, 1, "a", 0, -1)], false).is_err());
        assert!(check_immutable(&old, &[item(0, 0, "a", 0, -1), item(1, 0, "b", -1, -1)], true).is_err());
    }

    #[test]
    fn a_topic_config_with_its_mapping_is_one_object() {
        let config =
            TopicConfig { topic_name: "T".into(), read_queue_nums: 1, write_queue_nums: 1, ..TopicConfig::default() };
        let with = TopicConfigAndQueueMapping {
            config: config.clone(),
            mapping_detail: Some(TopicQueueMappingDetail::new("T", 1, "a", 1)),
        };
        let json = String::from_utf8(with.encode()).unwrap();
        assert!(json.starts_with(r#"{"attributes":{},"mappingDetail":{"bname":"a","#), "{json}");
        assert!(json.ends_with(r#""writeQueueNums":1}"#), "{json}");
        assert_eq!(TopicConfigAndQueueMapping::decode(json.as_bytes()).unwrap(), with);
        // A plain config (an older broker's answer) reads with no mapping.
        let plain = TopicConfigAndQueueMapping::decode(&config.encode()).unwrap();
        assert_eq!(plain, TopicConfigAndQueueMapping { config, mapping_detail: None });
    }
}
