//! Broker admin calls: topics, subscription groups, broker config and runtime, consumer and
//! producer views, offset resets and searches, consumer running info, HA status.
//! Java: `MQClientAPIImpl#createTopic` and friends.

use std::collections::BTreeMap;

use ferromq_protocol::body::{
    static_topic, BrokerStatsData, ConsumeStats, ConsumeStatsList, ConsumerConnection, ConsumerRunningInfo,
    CreateTopicListRequestBody, GroupList, HaRuntimeInfo, JsonBody, KVTable, MessageQueue, ProducerConnection,
    ProducerTableInfo, QueryConsumeQueueResponseBody, ResetOffsetBody, SubscriptionGroupConfig, SubscriptionGroupList,
    SubscriptionGroupWrapper, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType, TopicList, TopicStatsTable,
};
use ferromq_protocol::header::{
    CloneGroupOffsetRequestHeader, CreateTopicRequestHeader, DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader, GetConsumeStatsInBrokerHeader, GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader, GetConsumerRunningInfoRequestHeader, GetMaxOffsetRequestHeader,
    GetProducerConnectionListRequestHeader, GetSubscriptionGroupConfigRequestHeader, GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader, OffsetResponseHeader, QueryConsumeQueueRequestHeader,
    QueryTopicConsumeByWhoRequestHeader, QueueRequestHeader, ResetOffsetRequestHeader, SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader, ViewBrokerStatsDataRequestHeader,
};
use ferromq_protocol::{properties_text, request_code, RemotingCommand};

use crate::admin::client::{code_name, decode_header, AdminClient};
use crate::admin::error::AdminError;

/// The topic new topics are modelled on (Java: `TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`).
const DEFAULT_TOPIC: &str = "TBW102";

impl AdminClient {
    /// UPDATE_AND_CREATE_TOPIC on the broker at `addr`.
    ///
    /// # Errors
    /// The broker's refusal (code and remark) or a transport failure, naming `addr`.
    pub async fn create_topic(&self, addr: &str, config: &TopicConfig) -> Result<(), AdminError> {
        let attributes: Vec<String> = config.attributes.iter().map(|(k, v)| format!("+{k}={v}")).collect();
        self.update_topic(addr, config, &attributes.join(",")).await
    }

    /// UPDATE_AND_CREATE_TOPIC on the broker at `addr` with `attributes` as mqadmin's `-a`
    /// gives them: changes to the topic's current attributes (`+key=value` sets, `-key`
    /// removes; empty changes none). `config.attributes` is not sent.
    ///
    /// # Errors
    /// The broker's refusal (code and remark) or a transport failure, naming `addr`.
    pub async fn update_topic(&self, addr: &str, config: &TopicConfig, attributes: &str) -> Result<(), AdminError> {
        let header = CreateTopicRequestHeader {
            topic: config.topic_name.clone(),
            default_topic: DEFAULT_TOPIC.to_owned(),
            read_queue_nums: config.read_queue_nums,
            write_queue_nums: config.write_queue_nums,
            perm: config.perm,
            topic_filter_type: match config.topic_filter_type {
                TopicFilterType::MultiTag => "MULTI_TAG".to_owned(),
                TopicFilterType::SingleTag => "SINGLE_TAG".to_owned(),
            },
            topic_sys_flag: Some(config.topic_sys_flag),
            order: config.order,
            attributes: (!attributes.is_empty()).then(|| attributes.to_owned()),
            force: None,
        };
        self.call_ok(addr, RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC).with_header(&header))
            .await
            .map(drop)
    }

    /// DELETE_TOPIC_IN_BROKER on the broker at `addr`.
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    pub async fn delete_topic_in_broker(&self, addr: &str, topic: &str) -> Result<(), AdminError> {
        let header = DeleteTopicRequestHeader { topic: topic.to_owned() };
        self.call_ok(addr, RemotingCommand::request(request_code::DELETE_TOPIC_IN_BROKER).with_header(&header))
            .await
            .map(drop)
    }

    /// GET_TOPIC_STATS_INFO: each queue's offset range on the broker at `addr`.
    ///
    /// # Errors
    /// TOPIC_NOT_EXIST and transport failures, naming `addr`.
    pub async fn topic_stats(&self, addr: &str, topic: &str) -> Result<TopicStatsTable, AdminError> {
        let header = GetTopicStatsInfoRequestHeader { topic: topic.to_owned() };
        self.call_body(addr, RemotingCommand::request(request_code::GET_TOPIC_STATS_INFO).with_header(&header)).await
    }

    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on the broker at `addr`.
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    pub async fn create_subscription_group(
        &self,
        addr: &str,
        settings: &SubscriptionGroupConfig,
    ) -> Result<(), AdminError> {
        let body = serde_json::to_vec(settings).expect("the settings struct holds only plain fields");
        let request = RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).with_body(body);
        self.call_ok(addr, request).await.map(drop)
    }

    /// SET_MESSAGE_REQUEST_MODE: whether `group` pulls or pops `topic` on the broker at
    /// `addr` (and, popping, how many other clients' queues each client shares).
    /// Java: `MQClientAPIImpl#setMessageRequestMode`.
    ///
    /// # Errors
    /// TOPIC_NOT_EXIST, SUBSCRIPTION_GROUP_NOT_EXIST, NO_PERMISSION (retry topics) and
    /// transport failures, naming `addr`.
    pub async fn set_message_request_mode(
        &self,
        addr: &str,
        body: &ferromq_protocol::body::SetMessageRequestModeRequestBody,
    ) -> Result<(), AdminError> {
        use ferromq_protocol::body::JsonBody as _;
        let request = RemotingCommand::request(request_code::SET_MESSAGE_REQUEST_MODE).with_body(body.encode());
        self.call_ok(addr, request).await.map(drop)
    }

    /// GET_SUBSCRIPTIONGROUP_CONFIG: one group's config on the broker at `addr` (a broker with
    /// `autoCreateSubscriptionGroup` creates it first, as Java's does).
    ///
    /// # Errors
    /// SUBSCRIPTION_GROUP_NOT_EXIST and transport failures, naming `addr`.
    pub async fn subscription_group(&self, addr: &str, group: &str) -> Result<SubscriptionGroupConfig, AdminError> {
        let header = GetSubscriptionGroupConfigRequestHeader { group: group.to_owned() };
        let request = RemotingCommand::request(request_code::GET_SUBSCRIPTIONGROUP_CONFIG).with_header(&header);
        self.call_body(addr, request).await
    }

    /// DELETE_SUBSCRIPTIONGROUP on the broker at `addr`, dropping its offsets if `clean_offset`.
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    pub async fn delete_subscription_group(
        &self,
        addr: &str,
        group: &str,
        clean_offset: bool,
    ) -> Result<(), AdminError> {
        let header =
            DeleteSubscriptionGroupRequestHeader { group_name: group.to_owned(), clean_offset: Some(clean_offset) };
        self.call_ok(addr, RemotingCommand::request(request_code::DELETE_SUBSCRIPTIONGROUP).with_header(&header))
            .await
            .map(drop)
    }

    /// GET_ALL_SUBSCRIPTIONGROUP_CONFIG: every subscription group the broker at `addr` knows.
    ///
    /// # Errors
    /// Transport failures or an unreadable body, naming `addr`.
    pub async fn all_subscription_groups(&self, addr: &str) -> Result<SubscriptionGroupWrapper, AdminError> {
        self.call_body(addr, RemotingCommand::request(request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).await
    }

    /// GET_ALL_TOPIC_CONFIG: every topic the broker at `addr` has.
    ///
    /// # Errors
    /// Transport failures or an unreadable body, naming `addr`.
    pub async fn all_topic_config(&self, addr: &str) -> Result<TopicConfigSerializeWrapper, AdminError> {
        self.call_body(addr, RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG)).await
    }

    /// GET_TOPIC_CONFIG: the topic's config on the broker at `addr`.
    ///
    /// # Errors
    /// The broker's refusal (no such topic) or a transport failure, naming `addr`.
    pub async fn topic_config(&self, addr: &str, topic: &str) -> Result<TopicConfig, AdminError> {
        let header = GetTopicConfigRequestHeader { topic: topic.to_owned(), lo: None };
        self.call_body(addr, RemotingCommand::request(request_code::GET_TOPIC_CONFIG).with_header(&header)).await
    }

    /// GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the topics the broker at `addr` reserves for itself.
    ///
    /// # Errors
    /// Transport failures or an unreadable body, naming `addr`.
    pub async fn broker_system_topics(&self, addr: &str) -> Result<TopicList, AdminError> {
        self.call_body(addr, RemotingCommand::request(request_code::GET_SYSTEM_TOPIC_LIST_FROM_BROKER)).await
    }

    /// GET_BROKER_RUNTIME_INFO: the broker's runtime statistics.
    ///
    /// # Errors
    /// Transport failures, naming `addr`.
    pub async fn broker_runtime_info(&self, addr: &str) -> Result<BTreeMap<String, String>, AdminError> {
        let table: KVTable =
            self.call_body(addr, RemotingCommand::request(request_code::GET_BROKER_RUNTIME_INFO)).await?;
        Ok(table.table)
    }

    /// GET_BROKER_HA_STATUS: the broker's replication state (a master's slaves, or a slave's
    /// link to its master). Java: `MQClientAPIImpl#getBrokerHAStatus`.
    ///
    /// # Errors
    /// The broker's refusal (a broker without replication answers SYSTEM_ERROR, an older one
    /// REQUEST_CODE_NOT_SUPPORTED), a transport failure or an unreadable body, naming `addr`.
    pub async fn broker_ha_status(&self, addr: &str) -> Result<HaRuntimeInfo, AdminError> {
        self.call_body(addr, RemotingCommand::request(request_code::GET_BROKER_HA_STATUS)).await
    }

    /// GET_BROKER_CONFIG: the broker's effective configuration, in file order.
    ///
    /// # Errors
    /// Transport failures or an unreadable body, naming `addr`.
    pub async fn broker_config(&self, addr: &str) -> Result<Vec<(String, String)>, AdminError> {
        self.call_properties(addr, RemotingCommand::request(request_code::GET_BROKER_CONFIG)).await
    }

    /// UPDATE_BROKER_CONFIG: applies `entries` on the broker at `addr`.
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    pub async fn update_broker_config(&self, addr: &str, entries: &BTreeMap<String, String>) -> Result<(), AdminError> {
        let body = properties_text::to_text(entries.iter());
        let request = RemotingCommand::request(request_code::UPDATE_BROKER_CONFIG).with_body(body.into_bytes());
        self.call_ok(addr, request).await.map(drop)
    }

    /// GET_CONSUME_STATS: a group's progress on the broker at `addr`, on `topic` or on every
    /// topic it has offsets for.
    ///
    /// # Errors
    /// Transport failures, naming `addr`.
    pub async fn consume_stats(
        &self,
        addr: &str,
        group: &str,
        topic: Option<&str>,
    ) -> Result<ConsumeStats, AdminError> {
        let header = GetConsumeStatsRequestHeader {
            consumer_group: group.to_owned(),
            topic: topic.map(str::to_owned),
            topic_list: None,
        };
        self.call_body(addr, RemotingCommand::request(request_code::GET_CONSUME_STATS).with_header(&header)).await
    }

    /// GET_CONSUMER_CONNECTION_LIST: the online consumers of a group on the broker at `addr`.
    ///
    /// # Errors
    /// CONSUMER_NOT_ONLINE and transport failures, naming `addr`.
    pub async fn consumer_connection(&self, addr: &str, group: &str) -> Result<ConsumerConnection, AdminError> {
        let header = GetConsumerConnectionListRequestHeader { consumer_group: group.to_owned() };
        let request = RemotingCommand::request(request_code::GET_CONSUMER_CONNECTION_LIST).with_header(&header);
        self.call_body(addr, request).await
    }

    /// GET_PRODUCER_CONNECTION_LIST: the online producers of a group on the broker at `addr`.
    ///
    /// # Errors
    /// Transport failures, naming `addr`.
    pub async fn producer_connection(&self, addr: &str, group: &str) -> Result<ProducerConnection, AdminError> {
        let header = GetProducerConnectionListRequestHeader { producer_group: group.to_owned() };
        let request = RemotingCommand::request(request_code::GET_PRODUCER_CONNECTION_LIST).with_header(&header);
        self.call_body(addr, request).await
    }

    /// GET_ALL_PRODUCER_INFO: every producer group's clients on the broker at `addr`.
    ///
    /// # Errors
    /// Transport failures or an unreadable body, naming `addr`.
    pub async fn all_producer_info(&self, addr: &str) -> Result<ProducerTableInfo, AdminError> {
        self.call_body(addr, RemotingCommand::request(request_code::GET_ALL_PRODUCER_INFO)).await
    }

    /// GET_BROKER_CONSUME_STATS: every subscription group's progress on the broker at `addr`
    /// (only on ordered topics with `is_order`).
    ///
    /// # Errors
    /// Transport failures or an unreadable body, naming `addr`.
    pub async fn broker_consume_stats(&self, addr: &str, is_order: bool) -> Result<ConsumeStatsList, AdminError> {
        let request = RemotingCommand::request(request_code::GET_BROKER_CONSUME_STATS)
            .with_header(&GetConsumeStatsInBrokerHeader { is_order });
        self.call_body(addr, request).await
    }

    /// UPDATE_AND_CREATE_TOPIC_LIST: creates or updates `topics` on the broker at `addr` in
    /// one request (each config's attributes are signed changes: `+key`, `-key`).
    ///
    /// # Errors
    /// The broker's refusal (no topic of the list is changed then) or a transport failure.
    pub async fn update_topic_list(&self, addr: &str, topics: Vec<TopicConfig>) -> Result<(), AdminError> {
        let body = CreateTopicListRequestBody { topic_config_list: topics }.encode();
        self.call_ok(addr, RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC_LIST).with_body(body))
            .await
            .map(drop)
    }

    /// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: creates or updates `groups` on the broker at
    /// `addr` in one request.
    ///
    /// # Errors
    /// The broker's refusal (no group of the list is stored then) or a transport failure.
    pub async fn update_subscription_group_list(
        &self,
        addr: &str,
        groups: Vec<SubscriptionGroupConfig>,
    ) -> Result<(), AdminError> {
        let body = SubscriptionGroupList { group_config_list: groups }.encode();
        let request = RemotingCommand::request(request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST).with_body(body);
        self.call_ok(addr, request).await.map(drop)
    }

    /// CLEAN_EXPIRED_CONSUMEQUEUE, CLEAN_UNUSED_TOPIC or DELETE_EXPIRED_COMMITLOG (a request
    /// without header or body) on the broker at `addr`.
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    pub async fn store_maintenance(&self, addr: &str, code: i32) -> Result<(), AdminError> {
        self.call_ok(addr, RemotingCommand::request(code)).await.map(drop)
    }

    /// QUERY_CONSUME_QUEUE: up to `count` units of a consume queue from `index` on the broker
    /// at `addr`; `None` (and the broker's remark) when there is no unit at `index`.
    ///
    /// # Errors
    /// SYSTEM_ERROR for a queue the broker does not have, and transport failures.
    pub async fn query_consume_queue(
        &self,
        addr: &str,
        queue: (&str, i32),
        index: i64,
        count: i32,
        group: Option<&str>,
    ) -> Result<Result<QueryConsumeQueueResponseBody, Option<String>>, AdminError> {
        let header = QueryConsumeQueueRequestHeader {
            topic: queue.0.to_owned(),
            queue_id: queue.1,
            index,
            count,
            consumer_group: group.map(str::to_owned),
        };
        let request = RemotingCommand::request(request_code::QUERY_CONSUME_QUEUE).with_header(&header);
        let response = self.call_ok(addr, request).await?;
        if response.body.is_empty() {
            return Ok(Err(response.remark));
        }
        QueryConsumeQueueResponseBody::decode(&response.body).map(Ok).map_err(|source| AdminError::Body {
            addr: addr.to_owned(),
            request: "QUERY_CONSUME_QUEUE",
            source,
        })
    }

    /// CLONE_GROUP_OFFSET: copies `src`'s committed offsets on `topic` to `dest` on the broker
    /// at `addr` (`offline`: even for topics an online `src` does not subscribe to).
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    pub async fn clone_group_offset(
        &self,
        addr: &str,
        src: &str,
        dest: &str,
        topic: &str,
        offline: bool,
    ) -> Result<(), AdminError> {
        let header = CloneGroupOffsetRequestHeader {
            src_group: src.to_owned(),
            dest_group: dest.to_owned(),
            topic: Some(topic.to_owned()),
            offline: Some(offline),
        };
        self.call_ok(addr, RemotingCommand::request(request_code::CLONE_GROUP_OFFSET).with_header(&header))
            .await
            .map(drop)
    }

    /// VIEW_BROKER_STATS_DATA: one counter of the broker at `addr` over the last minute, hour
    /// and day (`TOPIC_PUT_NUMS` of a topic, `GROUP_GET_NUMS` of `topic@group`).
    ///
    /// # Errors
    /// The broker's SYSTEM_ERROR for a counter it does not keep, and transport failures.
    pub async fn broker_stats_data(&self, addr: &str, name: &str, key: &str) -> Result<BrokerStatsData, AdminError> {
        let header = ViewBrokerStatsDataRequestHeader { stats_name: name.to_owned(), stats_key: key.to_owned() };
        self.call_body(addr, RemotingCommand::request(request_code::VIEW_BROKER_STATS_DATA).with_header(&header)).await
    }

    /// QUERY_TOPIC_CONSUME_BY_WHO: the consumer groups of `topic` on the broker at `addr`
    /// (online subscribers and groups with offsets).
    ///
    /// # Errors
    /// Transport failures or an unreadable body, naming `addr`.
    pub async fn topic_consume_by_who(&self, addr: &str, topic: &str) -> Result<GroupList, AdminError> {
        let header = QueryTopicConsumeByWhoRequestHeader { topic: topic.to_owned() };
        self.call_body(addr, RemotingCommand::request(request_code::QUERY_TOPIC_CONSUME_BY_WHO).with_header(&header))
            .await
    }

    /// INVOKE_BROKER_TO_RESET_OFFSET: moves a group's offsets on `topic` to the first message
    /// stored at or after `timestamp_ms`; returns the new offsets.
    ///
    /// # Errors
    /// TOPIC_NOT_EXIST, SUBSCRIPTION_GROUP_NOT_EXIST and transport failures, naming `addr`.
    pub async fn reset_offset_by_time(
        &self,
        addr: &str,
        topic: &str,
        group: &str,
        timestamp_ms: i64,
        force: bool,
    ) -> Result<ResetOffsetBody, AdminError> {
        let header = ResetOffsetRequestHeader {
            topic: topic.to_owned(),
            group: group.to_owned(),
            queue_id: None,
            offset: None,
            timestamp: timestamp_ms,
            is_force: force,
        };
        let request = RemotingCommand::request(request_code::INVOKE_BROKER_TO_RESET_OFFSET).with_header(&header);
        self.call_body(addr, request).await
    }

    /// GET_CONSUMER_RUNNING_INFO through the broker at `addr`, which asks the consumer client
    /// `client_id` of `group`; with `jstack`, the client adds a dump of its tasks.
    /// Java: `MQClientAPIImpl#getConsumerRunningInfo`.
    ///
    /// # Errors
    /// SYSTEM_ERROR when the client is not online at that broker (or does not run the group),
    /// CONSUME_MSG_TIMEOUT when it does not answer, and transport failures, naming `addr`.
    pub async fn consumer_running_info(
        &self,
        addr: &str,
        group: &str,
        client_id: &str,
        jstack: bool,
    ) -> Result<ConsumerRunningInfo, AdminError> {
        let header = GetConsumerRunningInfoRequestHeader {
            consumer_group: group.to_owned(),
            client_id: client_id.to_owned(),
            jstack_enable: Some(jstack),
        };
        let request = RemotingCommand::request(request_code::GET_CONSUMER_RUNNING_INFO).with_header(&header);
        self.call_body(addr, request).await
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP: the offset of the first message of `mq` stored at or after
    /// `timestamp_ms`. Java: `MQClientAPIImpl#searchOffset`.
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    pub async fn search_offset(&self, addr: &str, mq: &MessageQueue, timestamp_ms: i64) -> Result<i64, AdminError> {
        let header = SearchOffsetRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            timestamp: timestamp_ms,
            boundary_type: None,
            broker_name: Some(mq.broker_name.clone()),
            lo: static_topic::PHYSICAL_QUEUE,
        };
        let request = RemotingCommand::request(request_code::SEARCH_OFFSET_BY_TIMESTAMP).with_header(&header);
        self.offset_call(addr, request).await
    }

    /// GET_MAX_OFFSET: the offset after the last message of `mq`. Java: `MQClientAPIImpl#getMaxOffset`.
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    pub async fn max_offset(&self, addr: &str, mq: &MessageQueue) -> Result<i64, AdminError> {
        let header = GetMaxOffsetRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            committed: None,
            broker_name: Some(mq.broker_name.clone()),
            lo: static_topic::PHYSICAL_QUEUE,
        };
        self.offset_call(addr, RemotingCommand::request(request_code::GET_MAX_OFFSET).with_header(&header)).await
    }

    /// GET_MIN_OFFSET: the offset of the first message of `mq` still stored. Java:
    /// `MQClientAPIImpl#getMinOffset`.
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    pub async fn min_offset(&self, addr: &str, mq: &MessageQueue) -> Result<i64, AdminError> {
        let header = QueueRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            broker_name: Some(mq.broker_name.clone()),
            lo: static_topic::PHYSICAL_QUEUE,
        };
        self.offset_call(addr, RemotingCommand::request(request_code::GET_MIN_OFFSET).with_header(&header)).await
    }

    /// Sends a request answered with an offset header.
    async fn offset_call(&self, addr: &str, request: RemotingCommand) -> Result<i64, AdminError> {
        let name = code_name(request.code);
        let response = self.call_ok(addr, request).await?;
        decode_header::<OffsetResponseHeader>(addr, name, &response).map(|h| h.offset)
    }

    /// UPDATE_CONSUMER_OFFSET: commits a group's offset on one queue.
    ///
    /// # Errors
    /// The broker's refusal or a transport failure, naming `addr`.
    pub async fn update_consumer_offset(
        &self,
        addr: &str,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> Result<(), AdminError> {
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: group.to_owned(),
            topic: topic.to_owned(),
            queue_id,
            commit_offset: offset,
            broker_name: None,
            lo: static_topic::PHYSICAL_QUEUE,
        };
        self.call_ok(addr, RemotingCommand::request(request_code::UPDATE_CONSUMER_OFFSET).with_header(&header))
            .await
            .map(drop)
    }
}
