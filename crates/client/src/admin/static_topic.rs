//! Static topics from the admin side: planning a creation or a move of logic queues (which
//! broker gets which logic queue, on which new physical queue) and carrying the plan out on the
//! brokers in Java's order. Java: `TopicQueueMappingUtils` (`createTopicConfigMapping`,
//! `remappingStaticTopic`, the consistency checks, `MappingAllocator`) and `MQAdminUtils`.
//!
//! Planning is pure: it takes every broker's current config and mapping of the topic (as
//! GET_TOPIC_CONFIG with `lo=true` answers) and returns the [`TopicRemappingDetailWrapper`]
//! to apply. Java's allocator shuffles brokers that hold equally few queues; this one takes
//! them in name order, so a plan is reproducible.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use ferromq_protocol::body::static_topic::{
    self, block_seq_round_up, LogicQueueMappingItem, DEFAULT_BLOCK_SEQ_SIZE, TYPE_CREATE_OR_UPDATE, TYPE_REMAPPING,
};
use ferromq_protocol::body::{
    JsonBody, MessageQueue, OffsetWrapper, TopicConfig, TopicConfigAndQueueMapping, TopicOffset,
    TopicQueueMappingDetail, TopicRemappingDetailWrapper,
};
use ferromq_protocol::header::{CreateTopicRequestHeader, GetTopicConfigRequestHeader};
use ferromq_protocol::{request_code, response_code, RemotingCommand};

use crate::admin::{AdminClient, AdminError};

/// Broker name -> the topic's config and mapping there.
pub type BrokerConfigMap = BTreeMap<String, TopicConfigAndQueueMapping>;

/// Why a plan cannot be made or applied: Java's wording where it has one.
#[derive(Debug, thiserror::Error)]
pub enum StaticTopicError {
    /// The current mappings, or the wish, are inconsistent.
    #[error("{0}")]
    Plan(String),
    /// A broker refused or could not be reached.
    #[error(transparent)]
    Admin(#[from] AdminError),
}

fn plan_err<T>(reason: impl Into<String>) -> Result<T, StaticTopicError> {
    Err(StaticTopicError::Plan(reason.into()))
}

/// A logic queue and the broker leading it (Java's `TopicQueueMappingOne`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogicQueueOwner {
    /// The leading broker.
    pub bname: String,
    /// Its items, oldest first.
    pub items: Vec<LogicQueueMappingItem>,
}

/// Java's `checkNameEpochNumConsistence`: every broker's mapping names the topic and the
/// broker, none is dirty, and all share scope, epoch and total queue number. Returns the
/// (epoch, total queues).
///
/// # Errors
/// The first inconsistency.
pub fn check_name_epoch_num(topic: &str, map: &BrokerConfigMap) -> Result<(i64, i32), StaticTopicError> {
    let (mut epoch, mut num, mut scope) = (-1_i64, -1_i32, None::<&str>);
    for (broker, config) in map {
        let Some(detail) = &config.mapping_detail else {
            return plan_err(format!("Mapping info should not be null in broker {broker}"));
        };
        if *broker != detail.bname {
            return plan_err(format!("The broker name is not equal {broker} != {} ", detail.bname));
        }
        if detail.dirty {
            return plan_err(format!("The mapping info is dirty in broker  {broker}"));
        }
        if config.config.topic_name != detail.topic || detail.topic != topic {
            return plan_err(format!("The topic name is inconsistent in broker  {broker}"));
        }
        match scope {
            Some(s) if s != detail.scope => {
                return plan_err(format!("scope does not match {} != {s} in {broker}", detail.scope));
            }
            _ => scope = Some(&detail.scope),
        }
        if epoch != -1 && epoch != detail.epoch {
            return plan_err(format!("epoch does not match {epoch} != {} in {broker}", detail.epoch));
        }
        epoch = detail.epoch;
        if num != -1 && num != detail.total_queues {
            return plan_err(format!("total queue number does not match {num} != {} in {broker}", detail.total_queues));
        }
        num = detail.total_queues;
    }
    Ok((epoch, num))
}

/// Java's `checkAndBuildMappingItems`: logic id -> its leader, from every broker's mapping
/// (newest epoch first). With `check_consistence` the ids must be exactly `0..total`.
///
/// # Errors
/// An invalid item list, a logic queue led twice, a physical queue used twice, or (checked)
/// missing ids.
pub fn logic_queue_owners(
    map: &BrokerConfigMap,
    replace: bool,
    check_consistence: bool,
) -> Result<BTreeMap<i32, LogicQueueOwner>, StaticTopicError> {
    let mut details: Vec<&TopicQueueMappingDetail> = map.values().filter_map(|c| c.mapping_detail.as_ref()).collect();
    details.sort_by_key(|d| std::cmp::Reverse(d.epoch));
    let mut max_num = 0;
    let mut owners = BTreeMap::new();
    for detail in details {
        max_num = max_num.max(detail.total_queues);
        for (global, items) in &detail.hosted_queues {
            static_topic::check_item_offsets(items).map_err(|e| StaticTopicError::Plan(e.0))?;
            let Some(leader) = items.last() else { continue };
            if leader.bname != detail.bname {
                continue;
            }
            if owners.contains_key(global) {
                if !replace {
                    return plan_err(format!("The queue id is duplicated in broker {} {}", leader.bname, detail.bname));
                }
            } else {
                owners.insert(*global, LogicQueueOwner { bname: detail.bname.clone(), items: items.clone() });
            }
        }
    }
    if check_consistence {
        if max_num as usize != owners.len() {
            return plan_err(format!(
                "The total queue number in config does not match the real hosted queues {max_num} != {}",
                owners.len()
            ));
        }
        if let Some(missing) = (0..max_num).find(|i| !owners.contains_key(i)) {
            return plan_err(format!("The queue number {missing} is not in globalIdMap"));
        }
    }
    check_physical_queues_unique(&owners)?;
    Ok(owners)
}

/// Java's `checkIfReusePhysicalQueue`.
fn check_physical_queues_unique(owners: &BTreeMap<i32, LogicQueueOwner>) -> Result<(), StaticTopicError> {
    let mut used: BTreeMap<(String, i32), i32> = BTreeMap::new();
    for (global, owner) in owners {
        for item in &owner.items {
            if let Some(other) = used.insert((item.bname.clone(), item.queue_id), *global) {
                return plan_err(format!(
                    "global queue id {global} and {other} shared the same physical queue {}-{}",
                    item.bname, item.queue_id
                ));
            }
        }
    }
    Ok(())
}

/// Java's `checkPhysicalQueueConsistence`: read queues cover write queues, items start at 0
/// and their physical queues exist on their brokers.
fn check_physical_consistence(map: &BrokerConfigMap) -> Result<(), StaticTopicError> {
    for config in map.values() {
        if config.config.read_queue_nums < config.config.write_queue_nums {
            return plan_err("Read queues is smaller than write queues");
        }
        for item in config.mapping_detail.iter().flat_map(|d| d.hosted_queues.values().flatten()) {
            if item.start_offset != 0 {
                return plan_err("The start offset does not begin from 0");
            }
            let Some(holder) = map.get(&item.bname) else {
                return plan_err("The broker of item does not exist");
            };
            if item.queue_id >= holder.config.write_queue_nums {
                return plan_err("The physical queue id is overflow the write queues");
            }
        }
    }
    Ok(())
}

/// Java's `MappingAllocator`: hands out logic ids to the brokers holding the fewest.
struct Allocator {
    broker_num: BTreeMap<String, i32>,
    id_to_broker: BTreeMap<i32, String>,
    before: Option<BTreeMap<String, i32>>,
    least: Vec<String>,
}

impl Allocator {
    fn next_broker(&mut self) -> String {
        if self.least.is_empty() {
            let min = self.broker_num.values().copied().min().unwrap_or(0);
            self.least = self.broker_num.iter().filter(|(_, n)| **n == min).map(|(b, _)| b.clone()).collect();
            // Remapping: prefer (take last) the brokers that held most before, moving least.
            if let Some(before) = &self.before {
                self.least.sort_by_key(|b| before.get(b).copied().unwrap_or(0));
            } else {
                self.least.reverse();
            }
        }
        self.least.pop().expect("an allocator has target brokers")
    }

    fn up_to(&mut self, total: i32) {
        for id in self.id_to_broker.len() as i32..total {
            let broker = self.next_broker();
            *self.broker_num.entry(broker.clone()).or_insert(0) += 1;
            self.id_to_broker.insert(id, broker);
        }
    }
}

fn new_config(topic: &str, queues: i32, bname: &str, total: i32, epoch: i64) -> TopicConfigAndQueueMapping {
    TopicConfigAndQueueMapping {
        config: TopicConfig::new(topic.to_owned(), queues, queues),
        mapping_detail: Some(TopicQueueMappingDetail::new(topic, total, bname, epoch)),
    }
}

fn detail_mut(config: &mut TopicConfigAndQueueMapping) -> &mut TopicQueueMappingDetail {
    config.mapping_detail.as_mut().expect("planned configs carry a mapping")
}

/// Java's `createTopicConfigMapping`: grows the topic to `queue_num` logic queues, new ones
/// spread over `targets` (which must include every broker already holding queues).
///
/// # Errors
/// Inconsistent current mappings, or a queue number that does not grow.
pub fn plan_create(
    topic: &str,
    queue_num: i32,
    targets: &BTreeSet<String>,
    mut map: BrokerConfigMap,
    now_ms: i64,
) -> Result<TopicRemappingDetailWrapper, StaticTopicError> {
    for (broker, config) in &map {
        let hosts = config.mapping_detail.as_ref().is_some_and(|d| !d.hosted_queues.is_empty());
        if hosts && !targets.contains(broker) {
            return plan_err(format!("The existed broker {broker} does not in target brokers "));
        }
    }
    if targets.is_empty() {
        return plan_err("Find none brokers, do nothing");
    }
    let (mut epoch, mut owners) = (now_ms, BTreeMap::new());
    if !map.is_empty() {
        epoch = check_name_epoch_num(topic, &map)?.0;
        owners = logic_queue_owners(&map, false, true)?;
        check_physical_consistence(&map)?;
    }
    if (queue_num as usize) < owners.len() {
        return plan_err(format!("Cannot decrease the queue num for static topic {queue_num} < {}", owners.len()));
    }
    if queue_num as usize == owners.len() {
        return plan_err("The topic queue num is equal the existed queue num, do nothing");
    }
    let mut broker_num: BTreeMap<String, i32> = targets.iter().map(|b| (b.clone(), 0)).collect();
    for owner in owners.values() {
        *broker_num.entry(owner.bname.clone()).or_insert(0) += 1;
    }
    let id_to_broker = owners.iter().map(|(g, o)| (*g, o.bname.clone())).collect();
    let mut allocator = Allocator { broker_num, id_to_broker, before: None, least: Vec::new() };
    allocator.up_to(queue_num);
    let new_epoch = (epoch + 1000).max(now_ms);
    for (global, broker) in &allocator.id_to_broker {
        if owners.contains_key(global) {
            continue;
        }
        let config = map.entry(broker.clone()).or_insert_with(|| new_config(topic, 0, broker, 0, now_ms));
        config.config.write_queue_nums += 1;
        config.config.read_queue_nums += 1;
        let physical = config.config.write_queue_nums - 1;
        detail_mut(config).hosted_queues.insert(*global, vec![LogicQueueMappingItem::new(0, physical, broker, 0)]);
    }
    for config in map.values_mut() {
        let detail = detail_mut(config);
        detail.epoch = new_epoch;
        detail.total_queues = queue_num;
    }
    check_name_epoch_num(topic, &map)?;
    logic_queue_owners(&map, false, true)?;
    check_physical_consistence(&map)?;
    Ok(TopicRemappingDetailWrapper {
        broker_config_map: map,
        epoch: new_epoch,
        topic: topic.to_owned(),
        kind: TYPE_CREATE_OR_UPDATE.to_owned(),
        ..TopicRemappingDetailWrapper::default()
    })
}

/// Java's `remappingStaticTopic`: moves logic queues so that `targets` lead them all, evenly,
/// each moved queue getting a new generation on its new broker (logic offset decided when the
/// plan is applied). A broker either gives queues away or receives them, never both.
///
/// # Errors
/// Inconsistent current mappings.
pub fn plan_remap(
    topic: &str,
    mut map: BrokerConfigMap,
    targets: &BTreeSet<String>,
    now_ms: i64,
) -> Result<TopicRemappingDetailWrapper, StaticTopicError> {
    if targets.is_empty() {
        return plan_err("Find none brokers, do nothing");
    }
    let (epoch, total) = check_name_epoch_num(topic, &map)?;
    let owners = logic_queue_owners(&map, false, true)?;
    check_physical_consistence(&map)?;
    let mut before: BTreeMap<String, i32> = BTreeMap::new();
    for owner in owners.values() {
        *before.entry(owner.bname.clone()).or_insert(0) += 1;
    }
    let broker_num = targets.iter().map(|b| (b.clone(), 0)).collect();
    let mut allocator =
        Allocator { broker_num, id_to_broker: BTreeMap::new(), before: Some(before), least: Vec::new() };
    allocator.up_to(total);
    let mut expected_num = allocator.broker_num;
    let mut waiting = VecDeque::new();
    let mut expected: BTreeMap<i32, String> = BTreeMap::new();
    for (global, owner) in &owners {
        match expected_num.get_mut(&owner.bname) {
            Some(n) if *n > 0 => {
                *n -= 1;
                expected.insert(*global, owner.bname.clone());
            }
            Some(_) => {
                waiting.push_back(*global);
                expected_num.remove(&owner.bname);
            }
            None => waiting.push_back(*global),
        }
    }
    for (broker, n) in &expected_num {
        for _ in 0..*n {
            let global = waiting.pop_front().expect("the allocator hands out exactly the total");
            expected.insert(global, broker.clone());
        }
    }
    let new_epoch = (epoch + 1000).max(now_ms);
    let (mut map_in, mut map_out) = (BTreeSet::new(), BTreeSet::new());
    for (global, broker) in &expected {
        let owner = &owners[global];
        if owner.bname == *broker {
            continue;
        }
        map_in.insert(broker.clone());
        map_out.insert(owner.bname.clone());
        let in_config = map.entry(broker.clone()).or_insert_with(|| new_config(topic, 0, broker, total, new_epoch));
        in_config.config.write_queue_nums += 1;
        in_config.config.read_queue_nums += 1;
        let mut items = owner.items.clone();
        let gen = items.last().map_or(0, |l| l.gen + 1);
        items.push(LogicQueueMappingItem::new(gen, in_config.config.write_queue_nums - 1, broker, -1));
        detail_mut(in_config).hosted_queues.insert(*global, items.clone());
        if let Some(out) = map.get_mut(&owner.bname) {
            detail_mut(out).hosted_queues.insert(*global, items);
        }
    }
    for config in map.values_mut() {
        let detail = detail_mut(config);
        detail.epoch = new_epoch;
        detail.total_queues = total;
    }
    check_name_epoch_num(topic, &map)?;
    let owners = logic_queue_owners(&map, false, true)?;
    check_physical_consistence(&map)?;
    if owners.values().any(|o| !targets.contains(&o.bname)) {
        return plan_err("The leader broker does not in target broker");
    }
    Ok(TopicRemappingDetailWrapper {
        broker_config_map: map,
        broker_to_map_in: map_in,
        broker_to_map_out: map_out,
        epoch: new_epoch,
        topic: topic.to_owned(),
        kind: TYPE_REMAPPING.to_owned(),
    })
}

/// Java's `MQAdminUtils#convertPhysicalTopicStats`: each logic queue's offsets from the
/// physical queues' ones (`physical`, keyed by broker name and queue id): its min from the
/// oldest decided item, its max and last update from the newest. Logic queues whose items'
/// offsets are missing are left out.
pub fn logic_topic_stats(
    map: &BrokerConfigMap,
    physical: &BTreeMap<(String, i32), TopicOffset>,
) -> Result<BTreeMap<i32, TopicOffset>, StaticTopicError> {
    let owners = logic_queue_owners(map, true, false)?;
    let mut out = BTreeMap::new();
    for (global, owner) in owners {
        let (Some(min_item), Some(max_item)) =
            (static_topic::find_item(&owner.items, 0, true), static_topic::find_item(&owner.items, i64::MAX, true))
        else {
            continue;
        };
        let (Some(min), Some(max)) = (
            physical.get(&(min_item.bname.clone(), min_item.queue_id)),
            physical.get(&(max_item.bname.clone(), max_item.queue_id)),
        ) else {
            continue;
        };
        out.insert(
            global,
            TopicOffset {
                min_offset: min_item.static_offset_loosely(min.min_offset).max(0),
                max_offset: max_item.static_offset_strictly(max.max_offset).max(0),
                last_update_timestamp: max.last_update_timestamp,
            },
        );
    }
    Ok(out)
}

/// Java's `MQAdminUtils#convertPhysicalConsumeStats`: a group's progress on each logic queue
/// from its physical queues' (`physical`, keyed by broker name and queue id), items newest
/// first: the broker offset from the newest item that has data, the consumer offset from the
/// newest item the group has committed on. Logic queues with neither are left out.
///
/// Unlike Java, which reports that item's physical consumer offset as the logic one (wrong by
/// the item's logic start once a queue has moved), the consumer offset is converted to the
/// logic queue's offsets as the broker offset is.
pub fn logic_consume_stats(
    map: &BrokerConfigMap,
    physical: &BTreeMap<(String, i32), OffsetWrapper>,
) -> Result<BTreeMap<i32, OffsetWrapper>, StaticTopicError> {
    let mut out = BTreeMap::new();
    for (global, owner) in logic_queue_owners(map, true, false)? {
        let (mut broker_offset, mut consumer) = (None, None);
        for item in owner.items.iter().rev() {
            let Some(wrapper) = physical.get(&(item.bname.clone(), item.queue_id)) else { continue };
            if consumer.is_none() && wrapper.consumer_offset >= 0 {
                consumer = Some((item.static_offset_loosely(wrapper.consumer_offset), wrapper.last_timestamp));
            }
            if broker_offset.is_none() && item.logic_offset >= 0 {
                broker_offset = Some(item.static_offset_strictly(wrapper.broker_offset));
            }
            if consumer.is_some() && broker_offset.is_some() {
                break;
            }
        }
        if let (Some(broker_offset), Some((consumer_offset, last_timestamp))) = (broker_offset, consumer) {
            out.insert(
                global,
                OffsetWrapper { broker_offset, consumer_offset, last_timestamp, pull_offset: consumer_offset },
            );
        }
    }
    Ok(out)
}

impl AdminClient {
    /// GET_TOPIC_CONFIG with `lo=true`: the topic's config and, for a static topic, its
    /// mapping on the broker at `addr`; `None` when the broker does not have the topic.
    ///
    /// # Errors
    /// Other refusals and transport failures, naming `addr`.
    pub async fn topic_config_and_mapping(
        &self,
        addr: &str,
        topic: &str,
    ) -> Result<Option<TopicConfigAndQueueMapping>, AdminError> {
        let header = GetTopicConfigRequestHeader { topic: topic.to_owned(), lo: Some(true) };
        let request = RemotingCommand::request(request_code::GET_TOPIC_CONFIG).with_header(&header);
        match self.call_body(addr, request).await {
            Ok(config) => Ok(Some(config)),
            Err(AdminError::Response { code: response_code::TOPIC_NOT_EXIST, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// UPDATE_AND_CREATE_STATIC_TOPIC: `config` and the broker's mapping to the broker at
    /// `addr`. Java: `MQClientAPIImpl#createStaticTopic`.
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    pub async fn create_static_topic(
        &self,
        addr: &str,
        config: &TopicConfigAndQueueMapping,
        force: bool,
    ) -> Result<(), AdminError> {
        let c = &config.config;
        let header = CreateTopicRequestHeader {
            topic: c.topic_name.clone(),
            default_topic: "TBW102".to_owned(),
            read_queue_nums: c.read_queue_nums,
            write_queue_nums: c.write_queue_nums,
            perm: c.perm,
            topic_filter_type: c.topic_filter_type.as_str().to_owned(),
            topic_sys_flag: Some(c.topic_sys_flag),
            order: c.order,
            attributes: None,
            force: Some(force),
        };
        let body = config.mapping_detail.clone().unwrap_or_default().encode();
        let request =
            RemotingCommand::request(request_code::UPDATE_AND_CREATE_STATIC_TOPIC).with_header(&header).with_body(body);
        self.call_ok(addr, request).await.map(drop)
    }

    /// Every broker's config and mapping of `topic` (brokers without the topic left out).
    /// Java: `MQAdminUtils#examineTopicConfigAll`.
    ///
    /// # Errors
    /// The cluster info or a broker's answer failed.
    pub async fn static_topic_configs(&self, topic: &str) -> Result<BrokerConfigMap, AdminError> {
        let info = self.cluster_info().await?;
        let mut map = BrokerConfigMap::new();
        for (name, data) in &info.broker_addr_table {
            let Some(addr) = data.master_addr() else { continue };
            if let Some(config) = self.topic_config_and_mapping(addr, topic).await? {
                map.insert(name.clone(), config);
            }
        }
        Ok(map)
    }

    /// Java's `MQAdminUtils#completeNoTargetBrokers`: every other broker of the clusters of
    /// the plan's brokers gets an empty mapping, so each knows the topic is static.
    ///
    /// # Errors
    /// The cluster info failed.
    pub async fn complete_non_target_brokers(&self, plan: &mut TopicRemappingDetailWrapper) -> Result<(), AdminError> {
        let info = self.cluster_info().await?;
        let named: BTreeSet<String> = plan.broker_config_map.keys().cloned().collect();
        let total =
            plan.broker_config_map.values().find_map(|c| c.mapping_detail.as_ref()).map_or(0, |d| d.total_queues);
        for brokers in info.cluster_addr_table.values().filter(|brokers| brokers.iter().any(|b| named.contains(b))) {
            for broker in brokers {
                plan.broker_config_map
                    .entry(broker.clone())
                    .or_insert_with(|| new_config(&plan.topic, 0, broker, total, plan.epoch));
            }
        }
        Ok(())
    }

    /// Sends every broker of `plan` its part (Java's `updateTopicConfigMappingAll`). A broker
    /// missing from the cluster is named before anything is sent.
    ///
    /// # Errors
    /// An unknown broker, or the first refusal (brokers before it were updated).
    pub async fn apply_static_topic(
        &self,
        plan: &TopicRemappingDetailWrapper,
        force: bool,
    ) -> Result<(), StaticTopicError> {
        let addrs = self.master_addrs_of(plan.broker_config_map.keys()).await?;
        for (broker, config) in &plan.broker_config_map {
            self.create_static_topic(&addrs[broker], config, force).await?;
        }
        Ok(())
    }

    /// Carries out a remapping plan in Java's five steps (`MQAdminUtils#remappingStaticTopic`):
    /// the new leaders first (writable with an undecided logic offset), then the old leaders
    /// (which stop taking writes), then each moved queue's logic offset is decided from the
    /// old leader's end rounded up to a block of 10,000, written to the new leaders, and last
    /// the brokers the move does not involve.
    ///
    /// # Errors
    /// An unknown broker, an old leader's offsets that cannot be read, or a refusal.
    pub async fn apply_remapping(
        &self,
        plan: &mut TopicRemappingDetailWrapper,
        force: bool,
    ) -> Result<(), StaticTopicError> {
        let addrs = self.master_addrs_of(plan.broker_config_map.keys()).await?;
        let send = |broker: &String, plan: &TopicRemappingDetailWrapper| {
            let (addr, config) = (addrs[broker].clone(), plan.broker_config_map[broker].clone());
            async move { self.create_static_topic(&addr, &config, force).await }
        };
        for broker in &plan.broker_to_map_in {
            send(broker, plan).await?;
        }
        for broker in &plan.broker_to_map_out {
            send(broker, plan).await?;
        }
        for broker in plan.broker_to_map_out.clone() {
            let stats = self.topic_stats(&addrs[&broker], &plan.topic).await?;
            let hosted = plan.broker_config_map[&broker].mapping_detail.clone().unwrap_or_default().hosted_queues;
            for (global, mut items) in hosted {
                if items.len() < 2 || items[items.len() - 1].logic_offset > 0 {
                    continue;
                }
                let old = items[items.len() - 2].clone();
                let queue =
                    MessageQueue { topic: plan.topic.clone(), broker_name: old.bname.clone(), queue_id: old.queue_id };
                let Some(offsets) = stats.offset_table.get(&queue) else {
                    return plan_err(format!("Cannot get the max offset for old leader {old:?}"));
                };
                if offsets.max_offset < old.start_offset {
                    return plan_err(format!(
                        "The max offset is smaller then the start offset {old:?} {}",
                        offsets.max_offset
                    ));
                }
                let new_start =
                    block_seq_round_up(old.static_offset_strictly(offsets.max_offset), DEFAULT_BLOCK_SEQ_SIZE);
                let last = items.len() - 1;
                items[last].logic_offset = new_start;
                let new_leader = items[last].bname.clone();
                if let Some(config) = plan.broker_config_map.get_mut(&new_leader) {
                    detail_mut(config).hosted_queues.insert(global, items.clone());
                }
                if let Some(config) = plan.broker_config_map.get_mut(&broker) {
                    detail_mut(config).hosted_queues.insert(global, items);
                }
            }
        }
        for broker in &plan.broker_to_map_in {
            send(broker, plan).await?;
        }
        // The old leaders learn the decided offsets too (Java leaves them at -1 there).
        for broker in &plan.broker_to_map_out {
            send(broker, plan).await?;
        }
        for broker in plan.broker_config_map.keys() {
            if !plan.broker_to_map_in.contains(broker) && !plan.broker_to_map_out.contains(broker) {
                send(broker, plan).await?;
            }
        }
        Ok(())
    }

    async fn master_addrs_of<'a>(
        &self,
        brokers: impl Iterator<Item = &'a String>,
    ) -> Result<BTreeMap<String, String>, StaticTopicError> {
        let info = self.cluster_info().await?;
        let mut addrs = BTreeMap::new();
        for broker in brokers {
            let Some(addr) = info.broker_addr_table.get(broker).and_then(|b| b.master_addr()) else {
                return plan_err(format!("Can't find addr for broker {broker}"));
            };
            addrs.insert(broker.clone(), addr.to_owned());
        }
        Ok(addrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_new_static_topic_spreads_its_logic_queues_evenly() {
        let plan = plan_create("T", 4, &targets(&["a", "b"]), BrokerConfigMap::new(), 1_000).unwrap();
        assert_eq!(plan.kind, TYPE_CREATE_OR_UPDATE);
        let owners = logic_queue_owners(&plan.broker_config_map, false, true).unwrap();
        assert_eq!(owners.len(), 4);
        for name in ["a", "b"] {
            let config = &plan.broker_config_map[name];
            assert_eq!((config.config.read_queue_nums, config.config.write_queue_nums), (2, 2));
            let detail = config.mapping_detail.as_ref().unwrap();
            assert_eq!((detail.total_queues, detail.epoch), (4, 2_000), "the clock + 1000, as Java");
            // Physical queues 0 and 1, each leading one logic queue from logic offset 0.
            let mut physical: Vec<i32> = detail.hosted_queues.values().map(|items| items[0].queue_id).collect();
            physical.sort_unstable();
            assert_eq!(physical, vec![0, 1]);
        }
        // Growing keeps the existing queues where they are.
        let grown = plan_create("T", 6, &targets(&["a", "b"]), plan.broker_config_map.clone(), 1_500).unwrap();
        let before = owners;
        let after = logic_queue_owners(&grown.broker_config_map, false, true).unwrap();
        assert!(before.iter().all(|(g, o)| after[g] == *o));
        assert_eq!(grown.epoch, 3_000, "the old epoch + 1000 when the clock is behind it");
        let same = plan_create("T", 6, &targets(&["a", "b"]), grown.broker_config_map.clone(), 3_000).unwrap_err();
        assert_eq!(same.to_string(), "The topic queue num is equal the existed queue num, do nothing");
        let fewer = plan_create("T", 2, &targets(&["a", "b"]), grown.broker_config_map, 3_000).unwrap_err();
        assert_eq!(fewer.to_string(), "Cannot decrease the queue num for static topic 2 < 6");
    }

    #[test]
    fn remapping_to_one_broker_moves_the_others_queues_with_a_new_generation() {
        let created = plan_create("T", 4, &targets(&["a", "b"]), BrokerConfigMap::new(), 1_000).unwrap();
        let plan = plan_remap("T", created.broker_config_map, &targets(&["b"]), 5_000).unwrap();
        assert_eq!(plan.broker_to_map_in, targets(&["b"]));
        assert_eq!(plan.broker_to_map_out, targets(&["a"]));
        let b = &plan.broker_config_map["b"];
        assert_eq!(b.config.write_queue_nums, 4);
        let detail = b.mapping_detail.as_ref().unwrap();
        let moved: Vec<&Vec<LogicQueueMappingItem>> = detail.hosted_queues.values().filter(|i| i.len() == 2).collect();
        assert_eq!(moved.len(), 2);
        for items in moved {
            assert_eq!((items[0].bname.as_str(), items[1].bname.as_str()), ("a", "b"));
            assert_eq!(items[1].gen, 1);
            assert_eq!(items[1].logic_offset, -1, "decided when the plan is applied");
            assert!(items[1].queue_id >= 2, "new physical queues on b");
        }
        // a still holds the moved queues' items (leader elsewhere) and leads none.
        let a = plan.broker_config_map["a"].mapping_detail.as_ref().unwrap();
        assert!(a.leader_id_map().is_empty());
        assert_eq!(a.hosted_queues.len(), 2);
    }

    #[test]
    fn inconsistent_mappings_are_refused() {
        let created = plan_create("T", 2, &targets(&["a", "b"]), BrokerConfigMap::new(), 1_000).unwrap();
        let mut map = created.broker_config_map;
        map.get_mut("a").unwrap().mapping_detail.as_mut().unwrap().epoch = 7;
        let err = plan_remap("T", map.clone(), &targets(&["a"]), 9_000).unwrap_err();
        assert!(err.to_string().starts_with("epoch does not match"), "{err}");
        map.get_mut("a").unwrap().mapping_detail.as_mut().unwrap().epoch = 2_000;
        map.get_mut("a").unwrap().config.write_queue_nums = 0;
        map.get_mut("a").unwrap().config.read_queue_nums = 0;
        let err = plan_remap("T", map, &targets(&["a"]), 9_000).unwrap_err();
        assert_eq!(err.to_string(), "The physical queue id is overflow the write queues");
    }
}
