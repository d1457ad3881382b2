//! Administrative requests: topics, subscription groups, offsets snapshot, broker config and
//! runtime info. Java: `AdminBrokerProcessor`.

use std::collections::BTreeMap;

use ferromq_protocol::body::{
    perm, static_topic, CreateTopicListRequestBody, GroupForbidden, JsonBody, KVTable, SubscriptionGroupList,
    TopicConfig, TopicConfigAndMappingSerializeWrapper, TopicConfigAndQueueMapping, TopicConfigSerializeWrapper,
    TopicFilterType, TopicList,
};
use ferromq_protocol::header::{
    CreateTopicRequestHeader, DeleteSubscriptionGroupRequestHeader, DeleteTopicRequestHeader,
    GetSubscriptionGroupConfigRequestHeader, GetTopicConfigRequestHeader, UpdateGroupForbiddenRequestHeader,
};
use ferromq_protocol::{response_code, version, RemotingCommand};
use ferromq_store::{disk_space, java_double, DiskSpace};
use tracing::info;

use crate::broker::Broker;
use crate::metadata::topic_attributes::AttributeChange;
use crate::metadata::{is_system_topic, topic_attributes, validate_group, validate_topic, SubscriptionGroupConfig};
use crate::processor::{failure, header_or_fail, success};

impl Broker {
    pub(crate) fn update_and_create_topic(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, CreateTopicRequestHeader);
        if h.topic == h.default_topic {
            return failure(req, response_code::INVALID_PARAMETER, system_topic_conflict(&h.topic));
        }
        let mut config = TopicConfig::new(h.topic.clone(), h.read_queue_nums, h.write_queue_nums);
        config.perm = h.perm;
        // Java's header check (`TopicFilterType.valueOf`) refuses any other spelling.
        config.topic_filter_type = match h.topic_filter_type.as_str() {
            "SINGLE_TAG" => TopicFilterType::SingleTag,
            "MULTI_TAG" => TopicFilterType::MultiTag,
            other => {
                return failure(
                    req,
                    response_code::SYSTEM_ERROR,
                    format!(
                        "org.apache.rocketmq.remoting.exception.RemotingCommandException: topicFilterType = [{other}] \
                         value invalid (SINGLE_TAG or MULTI_TAG)"
                    ),
                );
            }
        };
        config.topic_sys_flag = h.topic_sys_flag.unwrap_or(0);
        config.order = h.order;
        // The header lists changes to the topic's attributes, not the whole set.
        let changes = match topic_attributes::parse_changes(h.attributes.as_deref().unwrap_or("")) {
            Ok(changes) => changes,
            Err(reason) => return failure(req, response_code::SYSTEM_ERROR, reason),
        };
        if let Err((code, remark)) = self.check_topic_update(&config.topic_name, &changes) {
            return failure(req, code, remark);
        }
        if let Some(remark) = self.static_queue_change(&config) {
            return failure(req, response_code::INVALID_PARAMETER, remark);
        }
        // Read, change and write back as one step; a poisoned lock guards no state.
        let _serialized = self.topic_updates.lock().unwrap_or_else(|e| e.into_inner());
        match self.apply_topic_update(config, &changes) {
            Ok(()) => success(req),
            Err((code, remark)) => failure(req, code, remark),
        }
    }

    /// UPDATE_AND_CREATE_TOPIC_LIST (5.x): every topic is checked before any is changed, then
    /// each is updated as UPDATE_AND_CREATE_TOPIC would, its `attributes` read as signed
    /// changes. Java: `AdminBrokerProcessor#updateAndCreateTopicList`.
    pub(crate) fn update_and_create_topic_list(&self, req: &RemotingCommand) -> RemotingCommand {
        let body = match CreateTopicListRequestBody::decode(&req.body) {
            Ok(b) => b,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("malformed topic list: {e}")),
        };
        let mut updates = Vec::with_capacity(body.topic_config_list.len());
        for mut config in body.topic_config_list {
            let changes = match topic_attributes::changes_from_map(&config.attributes) {
                Ok(changes) => changes,
                Err(reason) => return failure(req, response_code::SYSTEM_ERROR, reason),
            };
            if let Err((code, remark)) = self.check_topic_update(&config.topic_name, &changes) {
                return failure(req, code, remark);
            }
            config.attributes.clear();
            updates.push((config, changes));
        }
        // The attribute changes are checked against every topic's current attributes before
        // any topic is stored, so a refused list changes nothing.
        let _serialized = self.topic_updates.lock().unwrap_or_else(|e| e.into_inner());
        let mut resolved = Vec::with_capacity(updates.len());
        for (config, changes) in updates {
            match self.resolve_topic_update(config, &changes) {
                Ok(config) => resolved.push(config),
                Err((code, remark)) => return failure(req, code, remark),
            }
        }
        for config in resolved {
            if let Err((code, remark)) = self.store_topic_update(config) {
                return failure(req, code, remark);
            }
        }
        success(req)
    }

    /// What an admin request may not do to a topic, whatever its queues: an illegal name, a
    /// system topic, or MIXED messages unless `enableMixedMessageType`.
    /// With light queues on, `%LMQ%` topics and groups exist without configs: a config for one
    /// would never be read (Java accepts it and drops it silently; docs/decisions/0028).
    /// A plain topic update that changes a static topic's queue numbers would cut physical
    /// queues its mapping uses (Java lets it through); those go through UPDATE_AND_CREATE_STATIC_TOPIC.
    fn static_queue_change(&self, config: &TopicConfig) -> Option<String> {
        self.mappings().get(&config.topic_name)?;
        let current = self.topics().select(&config.topic_name)?;
        let same =
            current.read_queue_nums == config.read_queue_nums && current.write_queue_nums == config.write_queue_nums;
        (!same).then(|| {
            format!(
                "topic {} is a static topic: its queue numbers change with updateStaticTopic or remappingStaticTopic",
                config.topic_name
            )
        })
    }

    fn light_queue_config(&self, name: &str) -> Option<String> {
        (self.topics().options().lmq && ferromq_store::is_lmq(name))
            .then(|| format!("{name} is a light queue name (enableLmq): light queues and their groups take no config"))
    }

    fn check_topic_update(&self, topic: &str, changes: &[AttributeChange]) -> Result<(), (i32, String)> {
        validate_topic(topic).map_err(|remark| (response_code::INVALID_PARAMETER, remark))?;
        if let Some(remark) = self.light_queue_config(topic) {
            return Err((response_code::INVALID_PARAMETER, remark));
        }
        if self.refuses_system_topic(topic) {
            return Err((response_code::INVALID_PARAMETER, system_topic_conflict(topic)));
        }
        if !self.config.enable_mixed_message_type && topic_attributes::sets_mixed_message_type(changes) {
            return Err((response_code::INVALID_PARAMETER, "MIXED message type is not supported.".to_owned()));
        }
        Ok(())
    }

    /// Stores `config` with `changes` applied to the topic's current attributes. The caller
    /// holds `topic_updates`.
    fn apply_topic_update(&self, config: TopicConfig, changes: &[AttributeChange]) -> Result<(), (i32, String)> {
        let config = self.resolve_topic_update(config, changes)?;
        self.store_topic_update(config)
    }

    /// `config` with `changes` applied to the topic's current attributes (checked against the
    /// attributes a topic may have). The caller holds `topic_updates`.
    fn resolve_topic_update(
        &self,
        mut config: TopicConfig,
        changes: &[AttributeChange],
    ) -> Result<TopicConfig, (i32, String)> {
        let current = self.topics().select(&config.topic_name);
        let current_attributes = current.as_ref().map(|c| c.attributes.clone()).unwrap_or_default();
        config.attributes = topic_attributes::alter(current.is_none(), &current_attributes, changes)
            .map_err(|reason| (response_code::SYSTEM_ERROR, reason))?;
        Ok(config)
    }

    /// Stores a resolved topic update and announces the topic.
    fn store_topic_update(&self, config: TopicConfig) -> Result<(), (i32, String)> {
        self.topics()
            .update(config.clone())
            .map_err(|e| (response_code::SYSTEM_ERROR, format!("cannot save topic {}: {e}", config.topic_name)))?;
        info!(topic = %config.topic_name, read = config.read_queue_nums, write = config.write_queue_nums,
            perm = config.perm, "topic updated");
        self.on_topic_created(&config);
        Ok(())
    }

    /// GET_TOPIC_CONFIG (351): the topic's config as stored. Java:
    /// `AdminBrokerProcessor#getTopicConfig` (whose static-topic queue mapping FerroMQ does not
    /// have, so `lo` adds nothing).
    pub(crate) fn get_topic_config(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, GetTopicConfigRequestHeader);
        match self.topic_config_of(&h.topic) {
            Ok(config) => {
                // With `lo=true` a static topic's answer carries its queue mapping (Java's
                // `TopicConfigAndQueueMapping`, one JSON object).
                let mapping_detail =
                    if h.lo == Some(true) { self.mappings().get(&h.topic).map(|d| (*d).clone()) } else { None };
                success(req).with_body(TopicConfigAndQueueMapping { config, mapping_detail }.encode())
            }
            Err(e) => crate::processor::service_failure(req, &e),
        }
    }

    /// UPDATE_AND_CREATE_STATIC_TOPIC (513): a static topic's config and this broker's part of
    /// its queue mapping (the body), fenced against the mapping held (see
    /// `TopicQueueMappingManager`). Java: `AdminBrokerProcessor#updateAndCreateStaticTopic`,
    /// which also checks less: here the mapping must be this broker's and its physical queues
    /// must exist in the config, and the mapping is stored before the config so a refused
    /// mapping changes nothing.
    pub(crate) fn update_and_create_static_topic(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, CreateTopicRequestHeader);
        let detail = match static_topic::decode_detail(&req.body) {
            Ok(d) => d,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("malformed queue mapping: {e}")),
        };
        if let Err(remark) = validate_topic(&h.topic) {
            return failure(req, response_code::INVALID_PARAMETER, remark);
        }
        if h.topic == h.default_topic || is_system_topic(&h.topic) {
            return failure(req, response_code::INVALID_PARAMETER, system_topic_conflict(&h.topic));
        }
        if let Some(remark) = self.light_queue_config(&h.topic) {
            return failure(req, response_code::INVALID_PARAMETER, remark);
        }
        if detail.topic != h.topic || detail.bname != self.config.broker_name {
            return failure(
                req,
                response_code::INVALID_PARAMETER,
                format!(
                    "the queue mapping is of topic {} on broker {}, not of topic {} on this broker {}",
                    detail.topic, detail.bname, h.topic, self.config.broker_name
                ),
            );
        }
        let own_queues = detail.hosted_queues.values().flatten().filter(|i| i.bname == detail.bname);
        if let Some(item) = own_queues.clone().find(|i| i.queue_id >= h.write_queue_nums) {
            return failure(
                req,
                response_code::INVALID_PARAMETER,
                format!(
                    "physical queue {} of the mapping is past the {} write queues",
                    item.queue_id, h.write_queue_nums
                ),
            );
        }
        let mut config = TopicConfig::new(h.topic.clone(), h.read_queue_nums, h.write_queue_nums);
        config.perm = h.perm;
        config.topic_filter_type =
            if h.topic_filter_type == "MULTI_TAG" { TopicFilterType::MultiTag } else { TopicFilterType::SingleTag };
        config.topic_sys_flag = h.topic_sys_flag.unwrap_or(0);
        let _serialized = self.topic_updates.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(current) = self.topics().select(&h.topic) {
            config.attributes = current.attributes;
            config.order = current.order;
        }
        let epoch = detail.epoch;
        if let Err(e) = self.mappings().update(detail, h.force == Some(true)) {
            return failure(req, response_code::SYSTEM_ERROR, e.to_string());
        }
        info!(topic = %h.topic, epoch, "static topic queue mapping updated");
        match self.store_topic_update(config) {
            Ok(()) => success(req),
            Err((code, remark)) => failure(req, code, remark),
        }
    }

    /// GET_SUBSCRIPTIONGROUP_CONFIG (352): the group's config, created first when
    /// `autoCreateSubscriptionGroup` (as every lookup of a group does in Java).
    pub(crate) fn get_subscription_group_config(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, GetSubscriptionGroupConfigRequestHeader);
        match self.subscription_group_of(&h.group) {
            Ok(config) => success(req).with_body(config.encode()),
            Err(e) => crate::processor::service_failure(req, &e),
        }
    }

    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (5.x): every name is checked before any group
    /// is stored. Java: `AdminBrokerProcessor#updateAndCreateSubscriptionGroupList`.
    pub(crate) fn update_and_create_subscription_group_list(&self, req: &RemotingCommand) -> RemotingCommand {
        let body = match SubscriptionGroupList::decode(&req.body) {
            Ok(b) => b,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("malformed group list: {e}")),
        };
        if let Some(remark) = body
            .group_config_list
            .iter()
            .find_map(|g| validate_group(&g.group_name).err().or_else(|| self.light_queue_config(&g.group_name)))
        {
            return failure(req, response_code::INVALID_PARAMETER, remark);
        }
        for config in body.group_config_list {
            let name = config.group_name.clone();
            if let Err(e) = self.groups().update(config) {
                return failure(req, response_code::SYSTEM_ERROR, format!("cannot save group {name}: {e}"));
            }
            info!(group = %name, "subscription group updated");
        }
        success(req)
    }

    /// UPDATE_AND_GET_GROUP_FORBIDDEN (353): with `readable`, allows or forbids the group to
    /// read the topic (a forbidden pull gets NO_PERMISSION); answers the setting now in force.
    /// Java: `AdminBrokerProcessor#updateAndGetGroupForbidden`.
    pub(crate) fn update_and_get_group_forbidden(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, UpdateGroupForbiddenRequestHeader);
        if let Some(readable) = h.readable {
            if let Err(e) = self.groups().update_forbidden(&h.group, &h.topic, perm::INDEX_PERM_READ, !readable) {
                return failure(req, response_code::SYSTEM_ERROR, format!("cannot save the forbidden table: {e}"));
            }
            info!(group = %h.group, topic = %h.topic, readable, "group read permission changed");
        }
        let readable = !self.groups().is_forbidden(&h.group, &h.topic, perm::INDEX_PERM_READ);
        let body = GroupForbidden { group: h.group, readable: Some(readable), topic: h.topic };
        let mut response = success(req).with_body(body.encode());
        response.remark = Some(String::new());
        response
    }

    /// GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305): the topics the broker reserves for itself.
    pub(crate) fn get_system_topic_list(&self, req: &RemotingCommand) -> RemotingCommand {
        let topic_list = self.topics().system_topic_set();
        success(req).with_body(TopicList { topic_list, broker_addr: None }.encode())
    }

    pub(crate) fn delete_topic(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, DeleteTopicRequestHeader);
        if let Err(remark) = validate_topic(&h.topic) {
            return failure(req, response_code::INVALID_PARAMETER, remark);
        }
        if self.refuses_system_topic(&h.topic) {
            return failure(req, response_code::INVALID_PARAMETER, system_topic_conflict(&h.topic));
        }
        if let Err(e) = self.topics().delete(&h.topic) {
            return failure(req, response_code::SYSTEM_ERROR, format!("cannot delete topic {}: {e}", h.topic));
        }
        self.offsets().remove_topic(&h.topic);
        if self.mappings().delete(&h.topic) {
            info!(topic = %h.topic, "static topic queue mapping deleted");
        }
        self.stats.on_topic_deleted(&h.topic);
        self.metrics.on_topic_deleted(&h.topic);
        self.half_messages.forget(&h.topic);
        // Its consume queues go too, so a topic created again under the name starts at 0
        // (Java: `deleteTopics`); the records stay in the CommitLog until retention.
        if let Err(e) = self.store.delete_topic(&h.topic) {
            return failure(req, response_code::SYSTEM_ERROR, format!("cannot delete the queues of {}: {e}", h.topic));
        }
        info!(topic = %h.topic, "topic deleted");
        success(req)
    }

    /// CLEAN_UNUSED_TOPIC (316): deletes the consume queues of topics no longer configured
    /// (system topics are kept). Java: `AdminBrokerProcessor#cleanUnusedTopic`.
    pub(crate) fn clean_unused_topic(&self, req: &RemotingCommand) -> RemotingCommand {
        let topics = self.topics();
        match self.store.clean_unused_topics(|t| topics.contains(t) || topics.is_system_topic(t)) {
            Ok(deleted) => {
                info!(deleted = ?deleted, "unused topics cleaned");
                success(req)
            }
            Err(e) => failure(req, response_code::SYSTEM_ERROR, format!("cleaning unused topics failed: {e}")),
        }
    }

    /// CLEAN_EXPIRED_CONSUMEQUEUE (306): destroys the consume queues whose messages retention
    /// removed (system topics are kept). Java: `AdminBrokerProcessor#cleanExpiredConsumeQueue`.
    pub(crate) fn clean_expired_consume_queue(&self, req: &RemotingCommand) -> RemotingCommand {
        let topics = self.topics();
        match self.store.clean_expired_consume_queues(|t| topics.is_system_topic(t)) {
            Ok(destroyed) => {
                info!(destroyed, "expired consume queues cleaned");
                success(req)
            }
            Err(e) => failure(req, response_code::SYSTEM_ERROR, format!("cleaning expired consume queues failed: {e}")),
        }
    }

    /// DELETE_EXPIRED_COMMITLOG (329): the next retention runs delete expired CommitLog
    /// segments whatever the hour. Java: `executeDeleteFilesManually`.
    pub(crate) fn delete_expired_commit_log(&self, req: &RemotingCommand) -> RemotingCommand {
        self.store.trigger_delete_files();
        info!("expired CommitLog deletion triggered");
        success(req)
    }

    /// Java: `validateSystemTopicWhenUpdateTopic` (on by default) keeps admin requests off
    /// the system topics, which the broker manages itself.
    fn refuses_system_topic(&self, topic: &str) -> bool {
        self.config.validate_system_topic_when_update_topic && self.topics().is_system_topic(topic)
    }

    /// GET_ALL_TOPIC_CONFIG (21): the topic table with the static topics' mappings (what a
    /// slave copies). Java: `AdminBrokerProcessor#getAllTopicConfig`.
    pub(crate) fn get_all_topic_config(&self, req: &RemotingCommand) -> RemotingCommand {
        let all: TopicConfigSerializeWrapper = self.topics().all();
        let mappings = self.mappings().snapshot();
        let wrapper = TopicConfigAndMappingSerializeWrapper {
            data_version: all.data_version,
            topic_config_table: all.topic_config_table,
            mapping_data_version: mappings.data_version,
            topic_queue_mapping_detail_map: mappings
                .topic_queue_mapping_info_map
                .into_iter()
                .map(|(topic, detail)| (topic, serde_json::to_value(detail).expect("a mapping is plain JSON")))
                .collect(),
            topic_queue_mapping_info_map: Default::default(),
        };
        success(req).with_body(wrapper.encode())
    }

    pub(crate) fn update_and_create_subscription_group(&self, req: &RemotingCommand) -> RemotingCommand {
        // No group given, nothing to do (Java answers SUCCESS too).
        if req.body.iter().all(u8::is_ascii_whitespace) || req.body.as_ref() == b"null" {
            return success(req);
        }
        let config = match ferromq_protocol::json::parse_lenient::<SubscriptionGroupConfig>(&req.body) {
            Ok(c) => c,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("malformed subscription group: {e}")),
        };
        if let Err(remark) = validate_group(&config.group_name) {
            return failure(req, response_code::INVALID_PARAMETER, remark);
        }
        if let Some(remark) = self.light_queue_config(&config.group_name) {
            return failure(req, response_code::INVALID_PARAMETER, remark);
        }
        let name = config.group_name.clone();
        if let Err(e) = self.groups().update(config) {
            return failure(req, response_code::SYSTEM_ERROR, format!("cannot save group {name}: {e}"));
        }
        success(req)
    }

    pub(crate) fn delete_subscription_group(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, DeleteSubscriptionGroupRequestHeader);
        if let Err(e) = self.groups().delete(&h.group_name) {
            return failure(req, response_code::SYSTEM_ERROR, format!("cannot delete group {}: {e}", h.group_name));
        }
        if h.clean_offset == Some(true) {
            self.offsets().remove_offset(&h.group_name);
            self.pop.inflight.clear_group(&h.group_name);
            self.pull_offsets.forget_group(&h.group_name);
        }
        success(req)
    }

    pub(crate) fn get_all_subscription_group(&self, req: &RemotingCommand) -> RemotingCommand {
        match serde_json::to_vec(&self.groups().all()) {
            Ok(body) => success(req).with_body(body),
            Err(e) => failure(req, response_code::SYSTEM_ERROR, e.to_string()),
        }
    }

    pub(crate) fn get_all_consumer_offset(&self, req: &RemotingCommand) -> RemotingCommand {
        success(req).with_body(self.offsets().snapshot().encode())
    }

    pub(crate) fn get_broker_config(&self, req: &RemotingCommand) -> RemotingCommand {
        let text = self.settings.read().unwrap_or_else(|e| e.into_inner()).to_text_redacted();
        success(req).with_body(text.into_bytes())
    }

    pub(crate) fn get_broker_runtime_info(&self, req: &RemotingCommand) -> RemotingCommand {
        let stats = self.store.stats();
        let mut table: BTreeMap<String, String> = stats.to_kv().into_iter().collect();
        // 4.x tools (clusterList, exportMetrics) read the old spelling.
        if let Some(tps) = table.get("getTransferredTps").cloned() {
            table.insert("getTransferedTps".into(), tps);
        }
        // Sends and pulls are served as they arrive (a send beyond the permits is refused, not
        // queued), so no request waits at the head of a queue.
        table.insert("sendThreadPoolQueueHeadWaitTimeMills".into(), "0".into());
        table.insert("pullThreadPoolQueueHeadWaitTimeMills".into(), "0".into());
        table.insert("pageCacheLockTimeMills".into(), self.store.page_cache_lock_time_ms().to_string());
        // Java's RunningFlags bits (DISK_FULL_BIT while the disk guard refuses puts).
        let guard = self.store.disk_guard();
        table.insert("runningFlags".into(), guard.flag_bits().to_string());
        table.insert("diskFull".into(), guard.is_full().to_string());
        table.insert("brokerVersion".into(), version::CURRENT.to_string());
        table.insert("brokerVersionDesc".into(), "V5_3_3".into());
        table.insert("commitLogMinOffset".into(), self.store.min_phy_offset().to_string());
        table.insert("commitLogMaxOffset".into(), self.store.max_phy_offset().to_string());
        table.insert("dispatchBehindBytes".into(), self.store.dispatch_behind_bytes().to_string());
        table.insert("pullThreadPoolQueueSize".into(), self.pull_hold.len().to_string());
        table.insert("pullThreadPoolQueueCapacity".into(), self.config.pull_thread_pool_queue_capacity.to_string());
        table.insert("sendThreadPoolQueueCapacity".into(), self.config.send_thread_pool_queue_capacity.to_string());
        table.insert(
            "sendThreadPoolQueueSize".into(),
            (self.config.send_thread_pool_queue_capacity - self.send_permits.available_permits()).to_string(),
        );
        // Java 5's timer keys (zeros without a running wheel, as Java writes them).
        let (read_behind, offset_behind) =
            self.timer().map_or((0, 0), |t| (t.dequeue_behind_ms() / 1000, t.enqueue_behind_messages()));
        table.insert("timerReadBehind".into(), read_behind.to_string());
        table.insert("timerOffsetBehind".into(), offset_behind.to_string());
        let (congest, enqueue_tps, dequeue_tps) = match &self.timer() {
            Some(t) => {
                let (enqueue_tps, dequeue_tps) = self.stats.timer_tps.rates();
                (t.pending(), enqueue_tps, dequeue_tps)
            }
            None => (0, 0.0, 0.0),
        };
        table.insert("timerCongestNum".into(), congest.to_string());
        table.insert("timerEnqueueTps".into(), java_double(enqueue_tps));
        table.insert("timerDequeueTps".into(), java_double(dequeue_tps));
        // Java's BrokerStats: totals now and at the last two midnights, for today's and
        // yesterday's traffic in `clusterList`.
        table.insert("msgPutTotalTodayNow".into(), stats.put_messages_total.to_string());
        table.insert("msgPutTotalTodayMorning".into(), stats.daily.put_today_morning.to_string());
        table.insert("msgPutTotalYesterdayMorning".into(), stats.daily.put_yesterday_morning.to_string());
        table.insert("msgGetTotalTodayNow".into(), stats.get_transferred_messages_total.to_string());
        table.insert("msgGetTotalTodayMorning".into(), stats.daily.get_today_morning.to_string());
        table.insert("msgGetTotalYesterdayMorning".into(), stats.daily.get_yesterday_morning.to_string());
        // A master runs the schedule and transaction-check services (Java: isSpecialServiceRunning).
        table.insert("brokerActive".into(), (!self.is_slave()).to_string());
        table.insert(
            "earliestMessageTimeStamp".into(),
            self.store.earliest_message_time_in_log().unwrap_or(-1).to_string(),
        );
        let store_config = self.store.config();
        // One `statvfs` per directory.
        let ratio = |space: Option<DiskSpace>| space.and_then(|s| s.used_percent()).map_or(-1.0, |p| p / 100.0);
        let commit_log_space = disk_space(&store_config.commit_log_dir());
        table.insert("commitLogDiskRatio".into(), java_double(ratio(commit_log_space)));
        table.insert("consumeQueueDiskRatio".into(), java_double(ratio(disk_space(&store_config.consume_queue_dir()))));
        if let Some(space) = commit_log_space {
            table.insert(
                "commitLogDirCapacity".into(),
                format!(
                    "Total : {}, Free : {}.",
                    human_readable_bytes(space.total_bytes()),
                    human_readable_bytes(space.free_bytes())
                ),
            );
        }
        let unflushed = (self.store.max_phy_offset() - self.store.flushed_phy_offset()).max(0) as u64;
        table.insert("remainHowManyDataToFlush".into(), human_readable_bytes(unflushed));
        self.insert_ha_runtime_info(&mut table);
        success(req).with_body(KVTable { table }.encode())
    }
}

/// Bytes as Java's `MixAll.humanReadableByteCount(bytes, false)` writes them: `512 B`,
/// `1.5 KiB`, `3.0 GiB`.
fn human_readable_bytes(bytes: u64) -> String {
    const UNIT: f64 = 1024.0;
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let exp = ((bytes as f64).ln() / UNIT.ln()) as i32;
    let prefix = b"KMGTPE"[(exp - 1) as usize] as char;
    format!("{:.1} {prefix}iB", bytes as f64 / UNIT.powi(exp))
}

fn system_topic_conflict(topic: &str) -> String {
    format!("The topic[{topic}] is conflict with system topic.")
}

#[cfg(test)]
mod tests {
    use super::human_readable_bytes;

    #[test]
    fn byte_counts_read_as_in_java() {
        assert_eq!(human_readable_bytes(0), "0 B");
        assert_eq!(human_readable_bytes(1023), "1023 B");
        assert_eq!(human_readable_bytes(1024), "1.0 KiB");
        assert_eq!(human_readable_bytes(1536), "1.5 KiB");
        assert_eq!(human_readable_bytes(3 << 30), "3.0 GiB");
        assert_eq!(human_readable_bytes(u64::MAX), "16.0 EiB");
    }
}
