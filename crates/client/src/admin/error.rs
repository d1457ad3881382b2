//! `AdminError`: why an admin call failed, naming the address asked.

use ferromq_protocol::body::BodyError;
use ferromq_protocol::message::MessageError;
use ferromq_protocol::HeaderError;
use ferromq_remoting::RemotingError;

/// Why an admin call failed. Every variant that involved a peer names its address.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// No name server address was configured.
    #[error("no name server address given (use -n or NAMESRV_ADDR)")]
    NoNamesrv,
    /// The request could not be sent or its response never came.
    #[error("{request} to {addr} failed")]
    Remoting {
        /// Peer address.
        addr: String,
        /// Request code name.
        request: &'static str,
        /// Transport error.
        #[source]
        source: RemotingError,
    },
    /// The peer answered with a failure code.
    #[error("{request} to {addr} answered {code_name} ({code}): {remark}")]
    Response {
        /// Peer address.
        addr: String,
        /// Request code name.
        request: &'static str,
        /// Response code.
        code: i32,
        /// RocketMQ's name for `code`.
        code_name: &'static str,
        /// The peer's remark.
        remark: String,
    },
    /// A response body could not be decoded.
    #[error("cannot decode the {request} response body from {addr}")]
    Body {
        /// Peer address.
        addr: String,
        /// Request code name.
        request: &'static str,
        /// Decoder error.
        #[source]
        source: BodyError,
    },
    /// A response header could not be decoded.
    #[error("cannot decode the {request} response header from {addr}")]
    Header {
        /// Peer address.
        addr: String,
        /// Request code name.
        request: &'static str,
        /// Decoder error.
        #[source]
        source: HeaderError,
    },
    /// Message records in a response could not be decoded.
    #[error("cannot decode the messages {addr} returned for {request}")]
    Message {
        /// Peer address.
        addr: String,
        /// Request code name.
        request: &'static str,
        /// Decoder error.
        #[source]
        source: MessageError,
    },
    /// An offset message id could not be decoded.
    #[error("invalid offset message id {id:?}")]
    MessageId {
        /// The id given.
        id: String,
        /// Decoder error.
        #[source]
        source: MessageError,
    },
    /// The topic's route does not contain what was asked for.
    #[error("{what} not found in the route of topic {topic} from {addr}")]
    NotInRoute {
        /// Name server address.
        addr: String,
        /// Topic.
        topic: String,
        /// What is missing.
        what: String,
    },
}
