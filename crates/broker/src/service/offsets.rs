//! Consumer offsets and queue offsets: what QUERY/UPDATE_CONSUMER_OFFSET, GET_MIN/MAX_OFFSET
//! and SEARCH_OFFSET_BY_TIMESTAMP answer over remoting, and GetOffset, UpdateOffset and
//! QueryOffset over gRPC. Java: `ConsumerManageProcessor`, `AdminBrokerProcessor`.

use ferromq_protocol::response_code;

use super::{Caller, Service, ServiceError};
use crate::broker::Broker;

/// How a consumer-offset commit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetCommit {
    /// The offset is stored.
    Committed,
    /// Not stored: an admin reset the offset and the consumer has not pulled since (its commit
    /// would undo the reset).
    PreviouslyReset,
}

impl Service {
    /// The group's committed offset of a queue. Without one, `zero_if_not_found` (remoting's
    /// default) answers 0 for a queue a new group may read whole; otherwise QUERY_NOT_FOUND.
    ///
    /// # Errors
    /// QUERY_NOT_FOUND (as [`ServiceError::Other`]) when there is no offset to give.
    pub fn query_consumer_offset(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        zero_if_not_found: bool,
    ) -> Result<i64, ServiceError> {
        self.broker.query_offset_of(group, topic, queue_id, zero_if_not_found)
    }

    /// Commits the group's consumed offset of a queue.
    ///
    /// # Errors
    /// SUBSCRIPTION_GROUP_NOT_EXIST, TOPIC_NOT_EXIST.
    pub fn update_consumer_offset(
        &self,
        caller: &Caller,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> Result<OffsetCommit, ServiceError> {
        self.broker.commit_offset_of(caller, group, topic, queue_id, offset)
    }

    /// The queue's next offset (one past its last message).
    pub fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.broker.store.max_offset_in_queue(topic, queue_id)
    }

    /// The queue's first offset still stored.
    pub fn min_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.broker.store.min_offset_in_queue(topic, queue_id)
    }

    /// The offset of the first (`lower`) or last message stored at `timestamp_ms`.
    pub fn offset_by_time(&self, topic: &str, queue_id: i32, timestamp_ms: i64, lower: bool) -> i64 {
        self.broker.store.offset_in_queue_by_time(topic, queue_id, timestamp_ms, lower)
    }
}

impl Broker {
    pub(crate) fn query_offset_of(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        zero_if_not_found: bool,
    ) -> Result<i64, ServiceError> {
        if let Some(offset) = self.offsets().query_offset(group, topic, queue_id) {
            return Ok(offset);
        }
        // No committed offset. 5.x `setZeroIfNotFound=false`: say so.
        if !zero_if_not_found {
            return Err(ServiceError::Other {
                code: response_code::QUERY_NOT_FOUND,
                remark: "Not found, do not set to zero, maybe this group boot first".into(),
            });
        }
        // A queue that still starts at 0, with its first message warm, is consumed from 0
        // (a new group reads a young topic whole); otherwise the client applies its
        // consume-from rule (CONSUME_FROM_LAST_OFFSET: the end).
        //
        // A queue that has never held a message answers 0 too (Java 4.9.8's rule; Java 5
        // answers QUERY_NOT_FOUND): the client would then ask for the max offset, and a
        // message stored in between would be skipped by this group for good. Offset 0 is the
        // max offset of such a queue, without the race (docs/decisions).
        let min = self.store.min_offset_in_queue(topic, queue_id);
        let never_held = || self.store.max_offset_in_queue(topic, queue_id) <= 0;
        if min <= 0 && (never_held() || self.store.check_in_mem_by_consume_offset(topic, queue_id, 0)) {
            return Ok(0);
        }
        Err(ServiceError::Other {
            code: response_code::QUERY_NOT_FOUND,
            remark: "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first".into(),
        })
    }

    pub(crate) fn commit_offset_of(
        &self,
        caller: &Caller,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> Result<OffsetCommit, ServiceError> {
        // A group comes into being by heartbeat, pull or admin request; an offset alone does
        // not create one (Java 5).
        if !self.groups().contains(group) {
            return Err(ServiceError::GroupNotExist(format!("Group {group} not exist!")));
        }
        if self.topics().select(topic).is_none() {
            return Err(ServiceError::TopicNotExist(format!("Topic {topic} not exist!")));
        }
        if self.offsets().has_offset_reset(group, topic, queue_id) {
            return Ok(OffsetCommit::PreviouslyReset);
        }
        self.offsets().commit_offset(&caller.remote_addr.to_string(), group, topic, queue_id, offset);
        Ok(OffsetCommit::Committed)
    }
}
