//! QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33). Java: `QueryMessageProcessor`.

use bytes::BytesMut;
use ferromq_protocol::header::{
    QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader, UNIQUE_KEY_QUERY,
};
use ferromq_protocol::{response_code, RemotingCommand};

use crate::broker::Broker;
use crate::processor::{failure, header_or_fail, success};

/// Results of a UNIQ_KEY query (Java: `defaultQueryMaxNum`).
const DEFAULT_QUERY_MAX_NUM: i32 = 32;

impl Broker {
    pub(crate) fn query_message(&self, req: &RemotingCommand) -> RemotingCommand {
        let mut h = header_or_fail!(req, QueryMessageRequestHeader);
        if req.ext(UNIQUE_KEY_QUERY) == Some("true") {
            h.max_num = DEFAULT_QUERY_MAX_NUM;
        }
        let found =
            self.store.query_message(&h.topic, &h.key, h.max_num.max(0) as usize, h.begin_timestamp, h.end_timestamp);
        // Found or not, the answer tells how far the index reaches (Java fills the header
        // before it looks at the result).
        let index = QueryMessageResponseHeader {
            index_last_update_timestamp: found.index_last_update_timestamp,
            index_last_update_phyoffset: found.index_last_update_phyoffset,
        };
        if found.messages.is_empty() {
            return failure(req, response_code::QUERY_NOT_FOUND, "can not find message, maybe time range not correct")
                .with_header(&index);
        }
        let mut body = BytesMut::new();
        for m in &found.messages {
            body.extend_from_slice(m);
        }
        success(req).with_header(&index).with_body(body.freeze())
    }

    pub(crate) fn view_message_by_id(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, ViewMessageRequestHeader);
        match self.store.look_message_by_offset(h.offset) {
            Some(msg) => success(req).with_body(msg),
            None => {
                failure(req, response_code::SYSTEM_ERROR, format!("can not find message by the offset, {}", h.offset))
            }
        }
    }
}
