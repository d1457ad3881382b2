//! SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): the reply half of request-reply.
//! A consumer answers a request message with a reply naming the requester's client id
//! (`REPLY_TO_CLIENT`); the broker pushes the reply to that producer client over the
//! connection it registered by heartbeat (PUSH_REPLY_MESSAGE_TO_CLIENT, 326) and, with
//! `storeReplyMessageEnable`, stores it in the reply topic as well. The answer says whether
//! the push succeeded. Java: `ReplyMessageProcessor`.

use ferromq_protocol::header::{ReplyMessageRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader};
use ferromq_protocol::message::{keys, MessageProperties, StoredMessage};
use ferromq_protocol::{request_code, response_code, LanguageCode, RemotingCommand};
use ferromq_remoting::Connection;
use ferromq_store::PutMessageStatus;
use tracing::{debug, warn};

use crate::broker::{now_ms, Broker};
use crate::processor::admin_query::CALL_CLIENT_TIMEOUT;
use crate::processor::send::AdmittedSend;

impl Broker {
    /// Serves both reply codes.
    pub(crate) async fn send_reply(&self, conn: Connection, req: RemotingCommand) -> RemotingCommand {
        let AdmittedSend { header, created, queue_id, permit } = match self.admit_send(&conn, &req) {
            Ok(admitted) => admitted,
            Err(response) => return *response,
        };
        self.created_topic_routable(created).await;
        // The push below may wait for a slow requester (up to the call timeout); it must not
        // hold a place the broker's sends are bounded by (Java runs replies on a pool of their
        // own).
        drop(permit);
        if let Err(e) = self.check_body_size(req.body.len()) {
            return crate::processor::service_failure(&req, &e);
        }
        let (code, remark, mut response_header) = match self.push_reply(&conn, &header, &req).await {
            // A reply that was only pushed has no message id; "0" keeps clients' decoders happy
            // (as Java answers).
            Ok(()) => (
                response_code::SUCCESS,
                None,
                Some(SendMessageResponseHeader { msg_id: "0".into(), queue_id, queue_offset: 0, ..Default::default() }),
            ),
            Err(remark) => (response_code::SYSTEM_ERROR, Some(remark), None),
        };
        if self.config.store_reply_message_enable {
            // Stored as it came (Java adds neither CLUSTER nor UNIQ_KEY to a reply).
            let msg = StoredMessage {
                topic: header.topic.clone(),
                queue_id,
                flag: header.flag,
                body: req.body.clone(),
                properties: header.properties.clone().unwrap_or_default(),
                sys_flag: header.sys_flag,
                born_timestamp_ms: header.born_timestamp,
                born_host: conn.remote_addr(),
                store_host: self.store_host,
                reconsume_times: header.reconsume_times.unwrap_or(0),
                ..StoredMessage::default()
            };
            let result = self.store.put_message(msg).await;
            // Replication is not waited for: the reply went to the requester already.
            let stored = matches!(result.status, PutMessageStatus::PutOk | PutMessageStatus::FlushDiskTimeout);
            match result.append {
                Some(append) if stored => {
                    self.stats.topic_put_nums.count(&header.topic, append.msg_num as u64);
                    response_header = Some(SendMessageResponseHeader {
                        msg_id: append.msg_id,
                        queue_id,
                        queue_offset: append.logics_offset,
                        ..Default::default()
                    });
                }
                _ => warn!(topic = %header.topic, status = ?result.status, "reply message not stored"),
            }
        }
        let mut response = RemotingCommand::response_to(&req, code, remark);
        if let Some(h) = &response_header {
            response = response.with_header(h);
        }
        self.add_send_answer_fields(&mut response);
        response
    }

    /// Pushes the reply to the producer client named by its REPLY_TO_CLIENT property and
    /// waits for its answer; the error is the remark for the replier.
    async fn push_reply(
        &self,
        conn: &Connection,
        header: &SendMessageRequestHeader,
        req: &RemotingCommand,
    ) -> Result<(), String> {
        let mut properties = MessageProperties::decode(header.properties.as_deref().unwrap_or(""));
        let Some(requester) = properties.get(keys::REPLY_TO_CLIENT).map(str::to_owned) else {
            warn!(topic = %header.topic, "reply without REPLY_TO_CLIENT: nobody to push it to");
            return Err(format!("reply message properties[{}] is null", keys::REPLY_TO_CLIENT));
        };
        let Some(target) = self.producers.find_connection(&requester) else {
            warn!(requester = %requester, "reply not pushed: the requester has no connection here");
            return Err(format!("push reply message fail, channel of <{requester}> not found."));
        };
        let now = now_ms();
        properties.insert(keys::PUSH_REPLY_TIME, now.to_string().as_str());
        let born = conn.remote_addr();
        let push_header = ReplyMessageRequestHeader {
            producer_group: header.producer_group.clone(),
            topic: header.topic.clone(),
            default_topic: header.default_topic.clone(),
            default_topic_queue_nums: header.default_topic_queue_nums,
            queue_id: header.queue_id,
            sys_flag: header.sys_flag,
            born_timestamp: header.born_timestamp,
            flag: header.flag,
            properties: Some(properties.encode()),
            reconsume_times: header.reconsume_times,
            unit_mode: header.unit_mode.unwrap_or(false),
            born_host: format!("{}:{}", born.ip(), born.port()),
            store_host: format!("{}:{}", self.store_host.ip(), self.store_host.port()),
            store_timestamp: now,
        };
        let mut push = RemotingCommand::request(request_code::PUSH_REPLY_MESSAGE_TO_CLIENT).with_header(&push_header);
        push.language = LanguageCode::Java;
        push.body = req.body.clone();
        match target.invoke(push, CALL_CLIENT_TIMEOUT).await {
            Ok(answer) if answer.code == response_code::SUCCESS => {
                debug!(requester = %requester, "reply pushed");
                Ok(())
            }
            Ok(answer) => {
                warn!(requester = %requester, code = answer.code, remark = ?answer.remark, "requester refused the reply");
                Err(format!("push reply message to {requester}fail."))
            }
            Err(e) => {
                warn!(requester = %requester, error = %e, "reply push failed");
                Err(format!("push reply message to {requester}fail."))
            }
        }
    }
}
