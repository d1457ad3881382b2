//! RESUME_CHECK_HALF_MESSAGE (323): `mqadmin resumeCheckHalfMessage` gives a half message
//! another round of check-backs. The stored copy it names (the half message, or the copy a
//! discard left in TRANS_CHECK_MAX_TIME_TOPIC) is put into the half queue again with
//! TRANSACTION_CHECK_TIMES 0, so the check service asks the producer about it anew.
//! Java: `AdminBrokerProcessor#resumeCheckHalfMessage`.

use ferromq_protocol::header::ResumeCheckHalfMessageRequestHeader;
use ferromq_protocol::message::{decode_offset_msg_id, keys, sysflag, MessageProperties, StoredMessage};
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_store::PutMessageStatus;
use tracing::{info, warn};

use crate::broker::Broker;
use crate::metadata::RMQ_SYS_TRANS_HALF_TOPIC;
use crate::processor::{failure, header_or_fail, success};

impl Broker {
    pub(crate) async fn resume_check_half_message(&self, req: &RemotingCommand) -> RemotingCommand {
        let h = header_or_fail!(req, ResumeCheckHalfMessageRequestHeader);
        let msg_id = h.msg_id.as_deref().unwrap_or("");
        let (_, offset) = match decode_offset_msg_id(msg_id) {
            Ok(decoded) => decoded,
            Err(e) => return failure(req, response_code::SYSTEM_ERROR, format!("not an offset message id: {e}")),
        };
        let Some(bytes) = self.store.look_message_by_offset(offset) else {
            return failure(req, response_code::SYSTEM_ERROR, format!("no message at offset {offset} ({msg_id})"));
        };
        let half = match StoredMessage::decode(&bytes) {
            Ok((m, _)) => m,
            Err(e) => {
                return failure(req, response_code::SYSTEM_ERROR, format!("the message at {msg_id} is unreadable: {e}"))
            }
        };
        // Only a transaction's message has somewhere to go once committed (Java re-puts
        // whatever it finds; such a message would be checked back for nothing).
        // A committed message keeps REAL_TOPIC (as Java stores it) but is done: checking it
        // again could commit it twice.
        let committed = sysflag::transaction_value(half.sys_flag) == sysflag::TRANSACTION_COMMIT_TYPE;
        if committed || half.property(keys::REAL_TOPIC).is_none() {
            return failure(req, response_code::SYSTEM_ERROR, format!("the message {msg_id} is not a half message"));
        }
        let mut props = MessageProperties::decode(&half.properties);
        props.insert(keys::TRANSACTION_CHECK_TIMES, "0");
        props.insert(keys::WAIT, "false");
        let copy = self.stored_copy(&half, RMQ_SYS_TRANS_HALF_TOPIC.to_owned(), 0, &props);
        let result = self.store.put_message(copy).await;
        if result.status == PutMessageStatus::PutOk {
            info!(msg_id, real_topic = ?half.property(keys::REAL_TOPIC), "half message put back for checking");
            success(req)
        } else {
            warn!(msg_id, status = ?result.status, "half message not put back");
            failure(req, response_code::SYSTEM_ERROR, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")
        }
    }
}
