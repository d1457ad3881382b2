//! `ClientError`: everything a client call can fail with, with the topic, broker address and
//! response code it concerns.

use std::time::Duration;

use ferromq_protocol::body::BodyError;
use ferromq_protocol::message::MessageError;
use ferromq_protocol::HeaderError;
use ferromq_remoting::RemotingError;

/// What went wrong in a client call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The message or topic breaks a client-side rule (Java: `Validators`).
    #[error("invalid message for topic {topic:?}: {reason}")]
    Validation {
        /// Topic of the message.
        topic: String,
        /// The rule broken, as Java words it.
        reason: String,
    },
    /// No name server knows the topic, and no usable template route exists.
    #[error("no route info of topic {topic:?}")]
    RouteNotFound {
        /// The topic.
        topic: String,
    },
    /// No name server address is configured.
    #[error("no name server address configured")]
    NoNameServer,
    /// Every name server failed; the last failure is attached.
    #[error("no name server answered for topic {topic:?}")]
    NameServerUnavailable {
        /// The topic asked about.
        topic: String,
        /// The last transport failure.
        #[source]
        source: RemotingError,
    },
    /// The broker answered with an error code.
    #[error("broker {broker_addr} answered code {code} for topic {topic:?}: {remark}")]
    Broker {
        /// The topic.
        topic: String,
        /// The broker's address.
        broker_addr: String,
        /// Response code.
        code: i32,
        /// Response remark.
        remark: String,
    },
    /// The name server answered with an unexpected error code.
    #[error("name server {addr} answered code {code} for topic {topic:?}: {remark}")]
    NameServer {
        /// The topic.
        topic: String,
        /// The name server's address.
        addr: String,
        /// Response code.
        code: i32,
        /// Response remark.
        remark: String,
    },
    /// A remote call failed in transport.
    #[error("call to {addr} for topic {topic:?} failed")]
    Remoting {
        /// The topic.
        topic: String,
        /// The peer address.
        addr: String,
        /// The cause.
        #[source]
        source: RemotingError,
    },
    /// The send did not complete within the send timeout.
    #[error("send to topic {topic:?} timed out after {timeout:?}")]
    Timeout {
        /// The topic.
        topic: String,
        /// The limit.
        timeout: Duration,
    },
    /// A response header could not be read.
    #[error("bad response header from {addr}")]
    Header {
        /// The peer address.
        addr: String,
        /// The cause.
        #[source]
        source: HeaderError,
    },
    /// A response body could not be read.
    #[error("bad response body from {addr}")]
    Body {
        /// The peer address.
        addr: String,
        /// The cause.
        #[source]
        source: BodyError,
    },
    /// The broker of a queue has no known master address.
    #[error("broker {broker_name:?} of topic {topic:?} has no master address")]
    BrokerNotFound {
        /// The topic.
        topic: String,
        /// Broker group name.
        broker_name: String,
    },
    /// A selector returned an index outside the queue list.
    #[error("selector chose queue {index} of {queue_count} for topic {topic:?}")]
    BadSelector {
        /// The topic.
        topic: String,
        /// The index returned.
        index: usize,
        /// How many queues there were.
        queue_count: usize,
    },
    /// The producer is not running (not started, or shut down).
    #[error("producer group {group:?} is not running")]
    NotRunning {
        /// Producer group.
        group: String,
    },
    /// A consumer call made in a state that does not allow it (not started, not assigned,
    /// mixing `assign` and `subscribe`).
    #[error("consumer group {group:?}: {reason}")]
    IllegalState {
        /// Consumer group.
        group: String,
        /// What is wrong.
        reason: String,
    },
    /// Message data from a broker (a record, an offset message id) could not be read.
    #[error("bad message data for topic {topic:?}")]
    BadMessage {
        /// The topic.
        topic: String,
        /// The cause.
        #[source]
        source: MessageError,
    },
    /// Compressing the body failed.
    #[error("cannot compress message body")]
    Compress(#[source] std::io::Error),
}
