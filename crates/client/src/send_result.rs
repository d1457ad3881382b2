//! `SendResult` and `SendStatus`: what a successful send reports. Java: `SendResult`,
//! `SendStatus` and `MQClientAPIImpl#processSendResponse`.

use ferromq_protocol::body::MessageQueue;
use ferromq_protocol::header::SendMessageResponseHeader;
use ferromq_protocol::{response_code, RemotingCommand};

use crate::error::ClientError;

/// How durable a sent message is. Codes 10/11/12 mean stored but not flushed or replicated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SendStatus {
    /// Stored as configured.
    SendOk,
    /// Stored but the flush did not complete in time (code 10).
    FlushDiskTimeout,
    /// Stored but the slave did not confirm in time (code 12).
    FlushSlaveTimeout,
    /// Stored but no slave is available (code 11).
    SlaveNotAvailable,
}

/// The outcome of a send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendResult {
    /// Durability status.
    pub status: SendStatus,
    /// Client unique id (`UNIQ_KEY`); comma-joined for a batch.
    pub msg_id: String,
    /// Offset message id(s) from the broker.
    pub offset_msg_id: String,
    /// The queue the message went to.
    pub message_queue: MessageQueue,
    /// Queue offset (of the first message of a batch).
    pub queue_offset: i64,
    /// Transaction id, when the broker sends one.
    pub transaction_id: Option<String>,
    /// Region of the broker (`MSG_REGION`, default `DefaultRegion`).
    pub region_id: String,
}

/// Maps a send response onto a result, or a typed error for codes other than 0/10/11/12.
pub(crate) fn process_send_response(
    resp: &RemotingCommand,
    broker_addr: &str,
    mq: &MessageQueue,
    msg_id: String,
) -> Result<SendResult, ClientError> {
    let status = match resp.code {
        response_code::SUCCESS => SendStatus::SendOk,
        response_code::FLUSH_DISK_TIMEOUT => SendStatus::FlushDiskTimeout,
        response_code::FLUSH_SLAVE_TIMEOUT => SendStatus::FlushSlaveTimeout,
        response_code::SLAVE_NOT_AVAILABLE => SendStatus::SlaveNotAvailable,
        code => {
            return Err(ClientError::Broker {
                topic: mq.topic.clone(),
                broker_addr: broker_addr.to_owned(),
                code,
                remark: resp.remark.clone().unwrap_or_default(),
            })
        }
    };
    let header: SendMessageResponseHeader =
        resp.decode_header().map_err(|source| ClientError::Header { addr: broker_addr.to_owned(), source })?;
    Ok(SendResult {
        status,
        msg_id,
        offset_msg_id: header.msg_id,
        message_queue: MessageQueue::new(&mq.topic, &mq.broker_name, header.queue_id),
        queue_offset: header.queue_offset,
        transaction_id: header.transaction_id,
        region_id: resp.ext("MSG_REGION").unwrap_or("DefaultRegion").to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(code: i32) -> RemotingCommand {
        RemotingCommand::response(code, Some("why".to_owned())).with_header(&SendMessageResponseHeader {
            msg_id: "OFF".into(),
            queue_id: 2,
            queue_offset: 7,
            ..Default::default()
        })
    }

    #[test]
    fn codes_10_11_12_are_statuses_and_others_errors() {
        let mq = MessageQueue::new("T", "b", 1);
        let r = process_send_response(&resp(0), "x:1", &mq, "U".into()).unwrap();
        assert_eq!((r.status, r.queue_offset, r.message_queue.queue_id), (SendStatus::SendOk, 7, 2));
        assert_eq!(r.region_id, "DefaultRegion");
        let s = |c| process_send_response(&resp(c), "x:1", &mq, "U".into()).unwrap().status;
        assert_eq!(s(10), SendStatus::FlushDiskTimeout);
        assert_eq!(s(11), SendStatus::SlaveNotAvailable);
        assert_eq!(s(12), SendStatus::FlushSlaveTimeout);
        let e = process_send_response(&resp(17), "x:1", &mq, "U".into()).unwrap_err();
        assert!(matches!(e, ClientError::Broker { code: 17, .. }), "{e:?}");
    }
}
