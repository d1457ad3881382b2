//! Bodies of LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42), which orderly consumers use to own
//! queues on a broker. Java: `LockBatchRequestBody`, `LockBatchResponseBody`,
//! `UnlockBatchRequestBody`.
//!
//! Lock bookkeeping (leases, expiry) is the broker's job.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody, MessageQueue};

/// Request to lock (or, as [`UnlockBatchRequestBody`], unlock) a set of queues for a client.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LockBatchRequestBody {
    /// Client id (`ip@instance`) asking for the locks.
    #[serde(deserialize_with = "lenient::or_default")]
    pub client_id: String,
    /// Consumer group the locks are for.
    #[serde(deserialize_with = "lenient::or_default")]
    pub consumer_group: String,
    /// Queues to lock.
    #[serde(deserialize_with = "lenient::or_default")]
    pub mq_set: BTreeSet<MessageQueue>,
    /// 5.x: lock on this broker only, without forwarding to replicas.
    #[serde(deserialize_with = "lenient::boolean")]
    pub only_this_broker: bool,
}

impl JsonBody for LockBatchRequestBody {}

/// UNLOCK_BATCH_MQ request; same fields as the lock request.
pub type UnlockBatchRequestBody = LockBatchRequestBody;

/// The queues the broker locked for the client.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LockBatchResponseBody {
    /// Queues now locked by the requester.
    #[serde(rename = "lockOKMQSet", deserialize_with = "lenient::or_default")]
    pub lock_ok_mq_set: BTreeSet<MessageQueue>,
}

impl JsonBody for LockBatchResponseBody {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trip_and_key_order() {
        let request = LockBatchRequestBody {
            client_id: "10.0.0.5@1".into(),
            consumer_group: "g".into(),
            mq_set: BTreeSet::from([MessageQueue::new("T", "b", 1), MessageQueue::new("T", "b", 0)]),
            only_this_broker: true,
        };
        let text = String::from_utf8(request.encode()).unwrap();
        assert_eq!(
            text,
            r#"{"clientId":"10.0.0.5@1","consumerGroup":"g","mqSet":[{"brokerName":"b","queueId":0,"topic":"T"},{"brokerName":"b","queueId":1,"topic":"T"}],"onlyThisBroker":true}"#
        );
        assert_eq!(UnlockBatchRequestBody::decode(text.as_bytes()).unwrap(), request);
    }

    #[test]
    fn response_uses_java_field_name() {
        let response = LockBatchResponseBody { lock_ok_mq_set: BTreeSet::from([MessageQueue::new("T", "b", 2)]) };
        assert_eq!(response.encode(), br#"{"lockOKMQSet":[{"brokerName":"b","queueId":2,"topic":"T"}]}"#);
        assert_eq!(LockBatchResponseBody::decode(&response.encode()).unwrap(), response);
    }
}
