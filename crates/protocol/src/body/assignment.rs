//! Server-side queue assignment: QUERY_ASSIGNMENT (400), SET_MESSAGE_REQUEST_MODE (401) and
//! `messageRequestMode.json` (also GET_ALL_MESSAGE_REQUEST_MODE's body). Java:
//! `QueryAssignmentRequestBody`, `QueryAssignmentResponseBody`, `MessageQueueAssignment`,
//! `SetMessageRequestModeRequestBody`, `MessageRequestModeSerializeWrapper`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::body::lenient::{self, java_enum};
use crate::body::{JsonBody, MessageModel, MessageQueue};

java_enum! {
    /// How a group reads a topic: by pulling queues it owns, or by popping.
    #[derive(Default)]
    pub enum MessageRequestMode {
        #[default]
        Pull = "PULL",
        Pop = "POP",
    }
}

/// SET_MESSAGE_REQUEST_MODE body, and one entry of `messageRequestMode.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SetMessageRequestModeRequestBody {
    #[serde(deserialize_with = "lenient::or_default")]
    pub consumer_group: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub mode: MessageRequestMode,
    /// POP: how many other clients' queues each client also pops (`<= 0`: every queue).
    #[serde(deserialize_with = "lenient::int")]
    pub pop_share_queue_num: i32,
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic: String,
}

impl JsonBody for SetMessageRequestModeRequestBody {}

/// `messageRequestMode.json`: topic -> group -> mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageRequestModeSerializeWrapper {
    #[serde(deserialize_with = "lenient::or_default")]
    pub message_request_mode_map: BTreeMap<String, BTreeMap<String, SetMessageRequestModeRequestBody>>,
}

impl JsonBody for MessageRequestModeSerializeWrapper {}

/// QUERY_ASSIGNMENT request body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueryAssignmentRequestBody {
    #[serde(deserialize_with = "lenient::or_default")]
    pub client_id: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub consumer_group: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub message_model: MessageModel,
    /// `AVG` or `AVG_BY_CIRCLE`.
    #[serde(deserialize_with = "lenient::or_default")]
    pub strategy_name: String,
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic: String,
}

impl JsonBody for QueryAssignmentRequestBody {}

/// One assigned queue and how to read it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueueAssignment {
    /// Not filled by the broker (Java keeps the map for extensions).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient::or_default")]
    pub attachments: Option<BTreeMap<String, String>>,
    pub message_queue: MessageQueue,
    #[serde(default, deserialize_with = "lenient::or_default")]
    pub mode: MessageRequestMode,
}

/// QUERY_ASSIGNMENT response body; `None` assignments mean "keep what you have".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueryAssignmentResponseBody {
    #[serde(deserialize_with = "lenient::or_default")]
    pub message_queue_assignments: Option<BTreeSet<MessageQueueAssignment>>,
}

impl JsonBody for QueryAssignmentResponseBody {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_file_round_trips_java_shape() {
        let text = r#"{"messageRequestModeMap":{"T":{"G":{"consumerGroup":"G","mode":"POP","popShareQueueNum":0,"topic":"T"}}}}"#;
        let wrapper = MessageRequestModeSerializeWrapper::decode(text.as_bytes()).unwrap();
        assert_eq!(wrapper.message_request_mode_map["T"]["G"].mode, MessageRequestMode::Pop);
        assert_eq!(String::from_utf8(wrapper.encode()).unwrap(), text);
    }

    #[test]
    fn assignment_response_shape() {
        let body = QueryAssignmentResponseBody {
            message_queue_assignments: Some(BTreeSet::from([MessageQueueAssignment {
                attachments: None,
                message_queue: MessageQueue::new("T", "b", -1),
                mode: MessageRequestMode::Pop,
            }])),
        };
        let text = String::from_utf8(body.encode()).unwrap();
        assert_eq!(
            text,
            r#"{"messageQueueAssignments":[{"messageQueue":{"brokerName":"b","queueId":-1,"topic":"T"},"mode":"POP"}]}"#
        );
        assert_eq!(QueryAssignmentResponseBody::decode(text.as_bytes()).unwrap(), body);
        let null = QueryAssignmentResponseBody::decode(br#"{"messageQueueAssignments":null}"#).unwrap();
        assert_eq!(null.message_queue_assignments, None);
        let req = QueryAssignmentRequestBody::decode(
            br#"{"clientId":"c","consumerGroup":"G","messageModel":"CLUSTERING","strategyName":"AVG","topic":"T"}"#,
        )
        .unwrap();
        assert_eq!(req.strategy_name, "AVG");
    }
}
