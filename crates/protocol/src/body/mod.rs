//! The JSON bodies of remoting commands and config files, one concept per module, plus the
//! compressed RegisterBrokerBody stream and the TopicConfig text form.
//!
//! Every type mirrors a Java class field for field, with the Java JSON names. Fields are
//! declared in alphabetical JSON-key order, so serde writes keys in the order fastjson does.
//! Input is read with fastjson's tolerance: missing fields take defaults, unknown fields are
//! ignored, bare integer map keys and `null`s are accepted (see `crate::json` and the private
//! `lenient` module). Output is standard JSON unless a fastjson-style method is asked for.
//! This module does not act on the bodies; processors in the server crates do.

mod acl_config;
mod assignment;
mod auth;
mod broker_member_group;
mod broker_stats;
mod cluster_info;
mod config_lists;
mod connection;
mod consume_queue_data;
mod consume_stats;
mod consumer_list;
mod consumer_offset;
mod consumer_running_info;
mod controller;
mod data_version;
mod error;
mod group_list;
mod ha_runtime_info;
mod heartbeat;
mod kv_table;
mod lenient;
mod lock_batch;
mod message_queue;
pub mod perm;
mod pop;
mod queue_map;
mod register_broker;
mod reset_offset;
mod route;
pub mod static_topic;
mod subscription_group;
mod topic_config;
mod topic_config_wrapper;
mod topic_list;
mod topic_stats;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::json::{parse_lenient, to_fastjson_vec};

pub use acl_config::{AclConfig, PlainAccessConfigBody};
pub use assignment::{
    MessageQueueAssignment, MessageRequestMode, MessageRequestModeSerializeWrapper, QueryAssignmentRequestBody,
    QueryAssignmentResponseBody, SetMessageRequestModeRequestBody,
};
pub use auth::{AclInfo, AclInfoList, PolicyEntryInfo, PolicyInfo, UserInfo, UserInfoList};
pub use broker_member_group::{BrokerMemberGroup, GetBrokerMemberGroupResponseBody};
pub use broker_stats::{BrokerStatsData, BrokerStatsItem};
pub use cluster_info::ClusterInfo;
pub use config_lists::{CreateTopicListRequestBody, SubscriptionGroupList};
pub use connection::{Connection, ConsumerConnection, ProducerConnection, ProducerInfo, ProducerTableInfo};
pub use consume_queue_data::{ConsumeQueueData, QueryConsumeQueueResponseBody};
pub use consume_stats::{ConsumeStats, ConsumeStatsList, OffsetWrapper};
pub use consumer_list::ConsumerListByGroupResponseBody;
pub use consumer_offset::{
    CompactionPositionCheckpoint, ConsumerOffsetSerializeWrapper, LmqConsumerOffsetWrapper, TOPIC_GROUP_SEPARATOR,
};
pub use consumer_running_info::{
    ConsumeStatus, ConsumerRunningInfo, PopProcessQueueInfo, ProcessQueueInfo, PROP_CLIENT_VERSION,
    PROP_CONSUMER_START_TIMESTAMP, PROP_CONSUME_ORDERLY, PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR,
    PROP_THREADPOOL_CORE_SIZE,
};
pub use controller::{ElectMasterResponseBody, EpochEntryBody, EpochEntryCache, SyncStateSet};
pub use data_version::DataVersion;
pub use error::BodyError;
pub use group_list::GroupList;
pub use ha_runtime_info::{HaClientRuntimeInfo, HaConnectionRuntimeInfo, HaRuntimeInfo};
pub use heartbeat::{
    CheckClientRequestBody, ConsumeFromWhere, ConsumeType, ConsumerData, HeartbeatData, MessageModel, ProducerData,
    SubscriptionData, EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG, IS_SUB_CHANGE, IS_SUPPORT_HEART_BEAT_V2, SUB_ALL,
};
pub use kv_table::KVTable;
pub use lock_batch::{LockBatchRequestBody, LockBatchResponseBody, UnlockBatchRequestBody};
pub use message_queue::MessageQueue;
pub use pop::{base64_decode, base64_encode, AckMsg, BatchAck, BatchAckMessageRequestBody, PopCheckPoint};
pub use register_broker::{RegisterBrokerBody, MAPPING_IN_COMPRESSED_BODY_SINCE, MAX_INFLATED_REGISTER_BODY_BYTES};
pub use reset_offset::{MessageQueueForC, ResetOffsetBody, ResetOffsetBodyForC};
pub use route::{BrokerData, QueueData, TopicRouteData, MASTER_ID};
pub use static_topic::{
    LogicQueueMappingItem, TopicConfigAndQueueMapping, TopicQueueMappingDetail, TopicQueueMappingInfo,
    TopicQueueMappingSerializeWrapper, TopicRemappingDetailWrapper,
};
pub use subscription_group::{
    GroupForbidden, SubscriptionGroupConfig, SubscriptionGroupWrapper, DEFAULT_CONSUME_TIMEOUT_MINUTE,
    DEFAULT_RETRY_MAX_TIMES, DEFAULT_RETRY_QUEUE_NUMS,
};
pub use topic_config::{TopicConfig, TopicFilterType, DEFAULT_QUEUE_NUMS};
pub use topic_config_wrapper::{TopicConfigAndMappingSerializeWrapper, TopicConfigSerializeWrapper};
pub use topic_list::TopicList;
pub use topic_stats::{TopicOffset, TopicStatsTable};

/// A body carried as JSON. The default methods are all a body type needs.
pub trait JsonBody: Serialize + DeserializeOwned {
    /// Standard JSON: quoted keys, object fields in alphabetical order, absent optional
    /// fields left out. Java peers (fastjson) read this.
    fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("body types hold only string- or integer-keyed maps, which always serialize")
    }

    /// fastjson's default style: like [`JsonBody::encode`] but integer-keyed maps have
    /// unquoted keys, as Java writes them for old peers and in its config files.
    fn encode_fastjson(&self) -> Vec<u8> {
        to_fastjson_vec(self).expect("body types hold only string- or integer-keyed maps, which always serialize")
    }

    /// Reads standard JSON or fastjson's dialect; missing fields take defaults and unknown
    /// fields are ignored.
    ///
    /// # Errors
    ///
    /// [`BodyError::Json`] when the bytes are not JSON of this shape.
    fn decode(bytes: &[u8]) -> Result<Self, BodyError> {
        parse_lenient(bytes)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use serde_json::Value;

    use super::*;

    /// serde_json's `Value` map sorts keys, so re-serializing through it gives fastjson's
    /// alphabetical order; a body whose fields are declared out of order would differ.
    fn assert_keys_alphabetical<T: JsonBody>(body: &T) {
        let direct = String::from_utf8(body.encode()).unwrap();
        let sorted = serde_json::to_string(&serde_json::from_str::<Value>(&direct).unwrap()).unwrap();
        assert_eq!(direct, sorted, "fields of {} out of order", std::any::type_name::<T>());
    }

    #[test]
    fn every_body_declares_fields_in_json_key_order() {
        let queue = MessageQueue::new("T", "b", 0);
        let group = BrokerData {
            zone_name: Some("z".into()),
            broker_addrs: BTreeMap::from([(0, "a:1".into())]),
            ..BrokerData::default()
        };
        let subscription = SubscriptionData {
            code_set: BTreeSet::from([1]),
            tags_set: BTreeSet::from(["a".into()]),
            ..SubscriptionData::default()
        };
        assert_keys_alphabetical(&ClusterInfo {
            broker_addr_table: BTreeMap::from([("b".into(), group.clone())]),
            cluster_addr_table: BTreeMap::from([("c".into(), BTreeSet::from(["b".into()]))]),
        });
        assert_keys_alphabetical(&ConsumerListByGroupResponseBody::default());
        assert_keys_alphabetical(&ConsumerOffsetSerializeWrapper {
            data_version: Some(DataVersion::default()),
            offset_table: BTreeMap::new(),
        });
        assert_keys_alphabetical(&DataVersion::default());
        assert_keys_alphabetical(&HeartbeatData {
            consumer_data_set: vec![ConsumerData {
                subscription_data_set: vec![subscription],
                ..ConsumerData::default()
            }],
            producer_data_set: vec![ProducerData::default()],
            ..HeartbeatData::default()
        });
        assert_keys_alphabetical(&HaRuntimeInfo {
            ha_client_runtime_info: HaClientRuntimeInfo { master_addr: Some("a:1".into()), ..Default::default() },
            ha_connection_info: vec![HaConnectionRuntimeInfo::default()],
            ..HaRuntimeInfo::default()
        });
        assert_keys_alphabetical(&KVTable::default());
        assert_keys_alphabetical(&LockBatchRequestBody {
            mq_set: BTreeSet::from([queue.clone()]),
            ..LockBatchRequestBody::default()
        });
        assert_keys_alphabetical(&LockBatchResponseBody { lock_ok_mq_set: BTreeSet::from([queue]) });
        assert_keys_alphabetical(&TopicConfig::default());
        let mut detail = TopicQueueMappingDetail::default();
        detail.hosted_queues.insert(0, vec![LogicQueueMappingItem::default()]);
        assert_keys_alphabetical(&detail);
        assert_keys_alphabetical(&TopicQueueMappingInfo::default());
        assert_keys_alphabetical(&TopicRemappingDetailWrapper {
            broker_config_map: BTreeMap::from([(
                "a".to_owned(),
                TopicConfigAndQueueMapping { mapping_detail: Some(detail), ..Default::default() },
            )]),
            ..Default::default()
        });
        assert_keys_alphabetical(&TopicConfigSerializeWrapper::default());
        assert_keys_alphabetical(&TopicConfigAndMappingSerializeWrapper::default());
        assert_keys_alphabetical(&TopicList { broker_addr: Some("a:1".into()), ..TopicList::default() });
        assert_keys_alphabetical(&TopicRouteData {
            broker_datas: vec![group],
            order_topic_conf: Some("b:4".into()),
            queue_datas: vec![QueueData::default()],
            topic_queue_mapping_by_broker: Some(BTreeMap::new()),
            ..TopicRouteData::default()
        });
    }

    #[test]
    fn register_body_declares_fields_in_json_key_order() {
        let body = RegisterBrokerBody::default();
        let direct = String::from_utf8(body.encode(false, crate::version::V5_0_0)).unwrap();
        let sorted = serde_json::to_string(&serde_json::from_str::<Value>(&direct).unwrap()).unwrap();
        assert_eq!(direct, sorted);
    }
}
