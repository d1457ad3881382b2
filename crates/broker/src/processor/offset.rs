//! Offsets: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), SEARCH_OFFSET_BY_TIMESTAMP
//! (29), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), GET_EARLIEST_MSG_STORETIME (32). Java:
//! `ConsumerManageProcessor`, `AdminBrokerProcessor`.

use ferromq_protocol::header::{
    GetEarliestMsgStoretimeResponseHeader, GetMaxOffsetRequestHeader, OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader, QueueRequestHeader, SearchOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::Connection;

use crate::broker::Broker;
use crate::processor::{failure, header_or_fail, success};

impl Broker {
    pub(crate) fn query_consumer_offset(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, QueryConsumerOffsetRequestHeader);
        if let Some(offset) = self.offsets().query_offset(&h.consumer_group, &h.topic, h.queue_id) {
            return success(req).with_header(&OffsetResponseHeader { offset });
        }
        // No committed offset. 5.x `setZeroIfNotFound=false`: say so.
        if h.set_zero_if_not_found == Some(false) {
            return failure(
                req,
                response_code::QUERY_NOT_FOUND,
                "Not found, do not set to zero, maybe this group boot first",
            );
        }
        // A queue that still starts at 0, with its first message warm, is consumed from 0
        // (a new group reads a young topic whole); otherwise the client applies its
        // consume-from rule (CONSUME_FROM_LAST_OFFSET: the end).
        //
        // A queue that has never held a message answers 0 too (Java 4.9.8's rule; Java 5
        // answers QUERY_NOT_FOUND): the client would then ask for the max offset, and a
        // message stored in between would be skipped by this group for good. Offset 0 is the
        // max offset of such a queue, without the race (docs/decisions).
        let min = self.store.min_offset_in_queue(&h.topic, h.queue_id);
        let never_held = || self.store.max_offset_in_queue(&h.topic, h.queue_id) <= 0;
        if min <= 0 && (never_held() || self.store.check_in_mem_by_consume_offset(&h.topic, h.queue_id, 0)) {
            return success(req).with_header(&OffsetResponseHeader { offset: 0 });
        }
        failure(req, response_code::QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
    }

    pub(crate) fn update_consumer_offset(&self, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, UpdateConsumerOffsetRequestHeader);
        // A group comes into being by heartbeat, pull or admin request; an offset alone does
        // not create one (Java 5).
        if !self.groups().contains(&h.consumer_group) {
            return failure(
                req,
                response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
                format!("Group {} not exist!", h.consumer_group),
            );
        }
        if self.topics().select(&h.topic).is_none() {
            return failure(req, response_code::TOPIC_NOT_EXIST, format!("Topic {} not exist!", h.topic));
        }
        if self.offsets().has_offset_reset(&h.consumer_group, &h.topic, h.queue_id) {
            // The consumer has not pulled since the reset; its commit would undo it.
            return RemotingCommand::response_to(
                req,
                response_code::SUCCESS,
                Some("Offset has been previously reset".to_owned()),
            );
        }
        self.offsets().commit_offset(
            &conn.remote_addr().to_string(),
            &h.consumer_group,
            &h.topic,
            h.queue_id,
            h.commit_offset,
        );
        success(req)
    }

    pub(crate) fn get_max_offset(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, GetMaxOffsetRequestHeader);
        let offset = self.store.max_offset_in_queue(&h.topic, h.queue_id);
        success(req).with_header(&OffsetResponseHeader { offset })
    }

    pub(crate) fn get_min_offset(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, QueueRequestHeader);
        let offset = self.store.min_offset_in_queue(&h.topic, h.queue_id);
        success(req).with_header(&OffsetResponseHeader { offset })
    }

    pub(crate) fn get_earliest_msg_storetime(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, QueueRequestHeader);
        let timestamp = self.store.earliest_message_time(&h.topic, h.queue_id).unwrap_or(-1);
        success(req).with_header(&GetEarliestMsgStoretimeResponseHeader { timestamp })
    }

    pub(crate) fn search_offset_by_timestamp(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, SearchOffsetRequestHeader);
        let lower = !h.boundary_type.as_deref().is_some_and(|b| b.eq_ignore_ascii_case("upper"));
        let offset = self.store.offset_in_queue_by_time(&h.topic, h.queue_id, h.timestamp, lower);
        success(req).with_header(&OffsetResponseHeader { offset })
    }
}
