//! SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320): the remoting side
//! of [`Service::send`](crate::service::Service::send). This file only turns the send header
//! and body into a [`SendRequest`] and the receipt or refusal into a response; what a send
//! does is in `service/send.rs`.

use ferromq_protocol::header::{SendMessageRequestHeader, SendMessageResponseHeader};
use ferromq_protocol::message::{decode_batch, MessageProperties};
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::Connection;

use crate::broker::Broker;
use crate::processor::{failure, service_failure};
use crate::service::{AutoCreate, BatchMessage, Caller, SendBody, SendReceipt, SendRequest, SendStatus};

impl Broker {
    /// A send header, decoded, and its place among the bounded sends with the topic checked
    /// and the queue picked: what a request that stores a message (send or reply) starts
    /// with. The error is the answer to give.
    pub(super) fn admit_send(
        &self,
        conn: &Connection,
        req: &RemotingCommand,
    ) -> Result<AdmittedSend<'_>, Box<RemotingCommand>> {
        let header = SendMessageRequestHeader::decode_for(req.code, &req.ext_fields)
            .map_err(|e| Box::new(failure(req, response_code::SYSTEM_ERROR, e.to_string())))?;
        let auto_create = auto_create_of(&header);
        let admitted = self
            .admit(&caller_of(conn, req), &header.topic, queue_of(&header), Some(&auto_create))
            .map_err(|e| Box::new(service_failure(req, &e)))?;
        Ok(AdmittedSend { header, created: admitted.created, queue_id: admitted.queue_id, permit: admitted.permit })
    }

    /// The fields every send answer carries (Java's `MSG_REGION` and `TRACE_ON`).
    pub(super) fn add_send_answer_fields(&self, response: &mut RemotingCommand) {
        response.ext_fields.insert("MSG_REGION".into(), &self.config.region_id);
        response.ext_fields.insert("TRACE_ON".into(), if self.config.trace_on { "true" } else { "false" });
    }

    /// Serves the three send codes.
    pub(crate) async fn send(&self, conn: Connection, req: RemotingCommand) -> RemotingCommand {
        let mut request = match self.send_request_of(&req) {
            Ok(r) => r,
            Err(response) => return *response,
        };
        // A static topic's logic queue is written through its leader item here.
        let logic = match self.route_static_send(&req, &mut request) {
            Ok(logic) => logic,
            Err(response) => return *response,
        };
        match self.send_message(&caller_of(&conn, &req), request).await {
            Ok(mut receipt) => {
                if let Some(logic) = logic {
                    // Answered in logic terms: the logic queue and its offset (-1 while a move
                    // has not decided where the new leader's offsets start, as Java).
                    receipt.queue_id = logic.global_id;
                    receipt.queue_offset = logic.leader().static_offset_loosely(receipt.queue_offset);
                }
                self.send_answer(&req, receipt)
            }
            Err(e) => service_failure(&req, &e),
        }
    }

    fn send_request_of(&self, req: &RemotingCommand) -> Result<SendRequest, Box<RemotingCommand>> {
        let fail = |code, remark: String| Box::new(failure(req, code, remark));
        let mut header = SendMessageRequestHeader::decode_for(req.code, &req.ext_fields)
            .map_err(|e| fail(response_code::SYSTEM_ERROR, e.to_string()))?;
        let properties = MessageProperties::decode(header.properties.as_deref().unwrap_or(""));
        // As Java, the header's batch flag (V2 key `m`) decides, not the request code.
        let body = if header.batch == Some(true) {
            // Bounded before decoding: the encoded batch as a whole against maxMessageSize.
            let max = self.store.max_message_size();
            if req.body.len() as u64 > max {
                return Err(fail(
                    response_code::MESSAGE_ILLEGAL,
                    format!("the batch body size {} over max value, MAX: {max}", req.body.len()),
                ));
            }
            let entries = decode_batch(&req.body)
                .map_err(|e| fail(response_code::MESSAGE_ILLEGAL, format!("malformed batch body: {e}")))?;
            let messages = entries
                .into_iter()
                .map(|e| BatchMessage {
                    body: e.body,
                    properties: MessageProperties::decode(&e.properties),
                    flag: e.flag,
                })
                .collect();
            SendBody::Batch { messages, properties }
        } else {
            SendBody::One(BatchMessage { body: req.body.clone(), properties, flag: header.flag })
        };
        // Moved, not copied: the header is not used after this.
        let auto_create = AutoCreate {
            default_topic: std::mem::take(&mut header.default_topic),
            queue_nums: header.default_topic_queue_nums,
        };
        Ok(SendRequest {
            queue_id: queue_of(&header),
            auto_create: Some(auto_create),
            sys_flag: header.sys_flag,
            born_timestamp_ms: header.born_timestamp,
            reconsume_times: header.reconsume_times.unwrap_or(0),
            max_reconsume_times: header.max_reconsume_times,
            producer_group: header.producer_group,
            topic: header.topic,
            body,
        })
    }

    fn send_answer(&self, req: &RemotingCommand, receipt: SendReceipt) -> RemotingCommand {
        let code = match receipt.status {
            SendStatus::Ok => response_code::SUCCESS,
            SendStatus::FlushDiskTimeout => response_code::FLUSH_DISK_TIMEOUT,
            SendStatus::FlushSlaveTimeout => response_code::FLUSH_SLAVE_TIMEOUT,
            SendStatus::SlaveNotAvailable => response_code::SLAVE_NOT_AVAILABLE,
        };
        // Stored either way: the answer carries the message id with any of these codes.
        let mut response =
            RemotingCommand::response_to(req, code, receipt.remark).with_header(&SendMessageResponseHeader {
                msg_id: receipt.msg_id,
                queue_id: receipt.queue_id,
                queue_offset: receipt.queue_offset,
                transaction_id: receipt.transaction_id,
                batch_uniq_id: None,
                recall_handle: receipt.recall_handle,
            });
        self.add_send_answer_fields(&mut response);
        response
    }
}

/// The caller of a remoting request: the connection's peer and the client's version.
pub(crate) fn caller_of(conn: &Connection, req: &RemotingCommand) -> Caller {
    Caller { remote_addr: conn.remote_addr(), client_version: req.version }
}

/// A negative queue id in the header leaves the choice to the broker.
fn queue_of(header: &SendMessageRequestHeader) -> Option<i32> {
    (header.queue_id >= 0).then_some(header.queue_id)
}

fn auto_create_of(header: &SendMessageRequestHeader) -> AutoCreate {
    AutoCreate { default_topic: header.default_topic.clone(), queue_nums: header.default_topic_queue_nums }
}

/// A send header admitted to store: see [`Broker::admit_send`].
pub(super) struct AdmittedSend<'a> {
    pub(super) header: SendMessageRequestHeader,
    /// The topic was created by this request.
    pub(super) created: bool,
    pub(super) queue_id: i32,
    pub(super) permit: tokio::sync::SemaphorePermit<'a>,
}
