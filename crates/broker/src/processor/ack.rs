//! ACK_MESSAGE (200051) and CHANGE_MESSAGE_INVISIBLETIME (200053): the remoting side of
//! [`Service::ack`](crate::service::Service::ack) and
//! [`Service::change_invisible_time`](crate::service::Service::change_invisible_time).

use ferromq_protocol::header::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
};
use ferromq_protocol::RemotingCommand;
use ferromq_remoting::Connection;

use crate::broker::Broker;
use crate::processor::send::caller_of;
use crate::processor::{header_or_fail, service_failure, success};
use crate::service::{AckRequest, ChangeInvisibleRequest};

impl Broker {
    /// ACK_MESSAGE.
    pub(crate) async fn ack_message(&self, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, AckMessageRequestHeader);
        let ack = AckRequest {
            consumer_group: h.consumer_group,
            topic: h.topic,
            queue_id: h.queue_id,
            offset: h.offset,
            extra_info: h.extra_info,
        };
        match self.ack(&caller_of(conn, req), &ack).await {
            Ok(()) => success(req),
            Err(e) => service_failure(req, &e),
        }
    }

    /// CHANGE_MESSAGE_INVISIBLETIME.
    pub(crate) async fn change_invisible_time(&self, conn: &Connection, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, ChangeInvisibleTimeRequestHeader);
        let change = ChangeInvisibleRequest {
            consumer_group: h.consumer_group,
            topic: h.topic,
            queue_id: h.queue_id,
            offset: h.offset,
            extra_info: h.extra_info,
            invisible_time: h.invisible_time,
        };
        match self.change_invisible(&caller_of(conn, req), &change).await {
            Ok(c) => success(req).with_header(&ChangeInvisibleTimeResponseHeader {
                pop_time: c.pop_time,
                invisible_time: c.invisible_time,
                revive_qid: c.revive_qid,
            }),
            Err(e) => service_failure(req, &e),
        }
    }
}
