//! QUERY_MESSAGE (12), VIEW_MESSAGE_BY_ID (33) and QUERY_CONSUME_QUEUE (321). Java:
//! `QueryMessageProcessor`, `AdminBrokerProcessor#queryConsumeQueue`.

use bytes::BytesMut;
use ferromq_protocol::body::{ConsumeQueueData, JsonBody, QueryConsumeQueueResponseBody};
use ferromq_protocol::header::{
    QueryConsumeQueueRequestHeader, QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader,
    UNIQUE_KEY_QUERY,
};
use ferromq_protocol::{response_code, RemotingCommand};

use crate::broker::Broker;
use crate::processor::{failure, header_or_fail, success};

/// Results of a UNIQ_KEY query (Java: `defaultQueryMaxNum`).
const DEFAULT_QUERY_MAX_NUM: i32 = 32;

/// Most units one QUERY_CONSUME_QUEUE returns, whatever the count asked (a bound on the
/// answer's size; Java has none).
const MAX_QUERY_CQ_UNITS: usize = 1_000;

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

    /// QUERY_CONSUME_QUEUE (321): up to `count` units of a consume queue from `index`, with the
    /// queue's bounds and, for a named group, its subscription. An index without a unit gets
    /// SUCCESS without a body and a remark saying so, as from Java; a count of 0 gets no units. Java:
    /// `AdminBrokerProcessor#queryConsumeQueue` (extension units are shown as plain units).
    pub(crate) fn query_consume_queue(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, QueryConsumeQueueRequestHeader);
        let Some((min, max)) = self.store.consume_queue_bounds(&h.topic, h.queue_id) else {
            return failure(req, response_code::SYSTEM_ERROR, format!("{}@{} is not exist!", h.queue_id, h.topic));
        };
        let mut body =
            QueryConsumeQueueResponseBody { max_queue_index: max, min_queue_index: min, ..Default::default() };
        if let Some(group) = h.consumer_group.as_deref() {
            body.subscription_data = self.consumers.find_subscription(group, &h.topic);
            // Java writes the group's SQL92 filter data here; a tag filter has none ("null").
            body.filter_data = Some(match body.subscription_data {
                None => format!("{group}@{} is not online!", h.topic),
                Some(_) => "null".to_owned(),
            });
        }
        if h.index < min || h.index >= max {
            return RemotingCommand::response_to(
                req,
                response_code::SUCCESS,
                Some(format!("Index {} of {}@{} is not exist!", h.index, h.queue_id, h.topic)),
            );
        }
        let count = usize::try_from(h.count).unwrap_or(0).min(MAX_QUERY_CQ_UNITS);
        let units = self.store.consume_queue_units(&h.topic, h.queue_id, h.index, count);
        body.queue_data = units
            .iter()
            .map(|u| ConsumeQueueData {
                physic_offset: u.commit_log_offset,
                physic_size: u.size,
                tags_code: u.tags_code,
                ..Default::default()
            })
            .collect();
        success(req).with_body(body.encode())
    }
}
