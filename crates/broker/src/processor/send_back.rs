//! CONSUMER_SEND_MSG_BACK (36): the remoting side of
//! [`Service::send_back`](crate::service::Service::send_back).

use ferromq_protocol::header::ConsumerSendMsgBackRequestHeader;
use ferromq_protocol::RemotingCommand;
use ferromq_remoting::Connection;

use crate::broker::Broker;
use crate::processor::send::caller_of;
use crate::processor::{header_or_fail, service_failure, success};
use crate::service::SendBackRequest;

impl Broker {
    pub(crate) async fn consumer_send_msg_back(&self, conn: Connection, req: RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(&req, ConsumerSendMsgBackRequestHeader);
        let back = SendBackRequest {
            group: h.group,
            offset: h.offset,
            delay_level: h.delay_level,
            max_reconsume_times: h.max_reconsume_times,
        };
        match self.send_back_of(&caller_of(&conn, &req), &back).await {
            Ok(_) => success(&req),
            Err(e) => service_failure(&req, &e),
        }
    }
}
