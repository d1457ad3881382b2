//! Offsets: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), SEARCH_OFFSET_BY_TIMESTAMP
//! (29), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), GET_EARLIEST_MSG_STORETIME (32). The
//! consumer-offset rules are the service's (`service/offsets.rs`). Java:
//! `ConsumerManageProcessor`, `AdminBrokerProcessor`.

use ferromq_protocol::header::{
    GetEarliestMsgStoretimeResponseHeader, GetMaxOffsetRequestHeader, OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader, QueueRequestHeader, SearchOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::Connection;

use crate::broker::Broker;
use crate::processor::send::caller_of;
use crate::processor::{header_or_fail, service_failure, success};
use crate::service::OffsetCommit;

impl Broker {
    pub(crate) fn query_consumer_offset(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, QueryConsumerOffsetRequestHeader);
        let zero_if_not_found = h.set_zero_if_not_found != Some(false);
        match self.query_offset_of(&h.consumer_group, &h.topic, h.queue_id, zero_if_not_found) {
            Ok(offset) => success(req).with_header(&OffsetResponseHeader { offset }),
            Err(e) => service_failure(req, &e),
        }
    }

    pub(crate) fn update_consumer_offset(&self, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, UpdateConsumerOffsetRequestHeader);
        let caller = caller_of(conn, req);
        match self.commit_offset_of(&caller, &h.consumer_group, &h.topic, h.queue_id, h.commit_offset) {
            Ok(OffsetCommit::Committed) => success(req),
            Ok(OffsetCommit::PreviouslyReset) => RemotingCommand::response_to(
                req,
                response_code::SUCCESS,
                Some("Offset has been previously reset".to_owned()),
            ),
            Err(e) => service_failure(req, &e),
        }
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
