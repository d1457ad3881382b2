//! The broker's service layer: what a request does, apart from how it came. The remoting
//! processors (`processor/*`) and the gRPC proxy in local mode both call it; each converts its
//! own wire form to the typed requests here and the results back (design.md 3.1).
//!
//! Rules (style-review.md 3.1): the service takes and returns plain data (bytes, strings,
//! protocol message types), never a remoting frame, header or connection; every decision both
//! protocols share (queue choice, auto-create, retry/DLQ redirection, size limits, admission)
//! is made here; an expected outcome (stored but a flush timed out, replicas missing) is an
//! `Ok` carrying a status, and `Err` is a refusal. A layering test (`tests/layering.rs`)
//! keeps frames out of this module.

mod ack;
mod end_transaction;
mod error;
mod metadata;
mod offsets;
mod pop;
pub(crate) mod send;
pub(crate) mod send_back;

use std::net::SocketAddr;
use std::sync::Arc;

pub use ack::{AckRequest, ChangeInvisibleRequest, InvisibleChanged};
pub use end_transaction::{EndTransactionRequest, TransactionDecision, TransactionEnded};
pub use error::ServiceError;
pub use offsets::OffsetCommit;
pub use pop::{PopRequest, PopStatus, Popped};
pub use send::{AutoCreate, BatchMessage, SendBody, SendReceipt, SendRequest, SendStatus};
pub use send_back::{SendBackRequest, SentBack};

use crate::broker::Broker;

/// The broker's operations for in-process callers. Cheap to clone.
#[derive(Clone)]
pub struct Service {
    pub(crate) broker: Arc<Broker>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").field("broker_name", &self.broker.config.broker_name).finish_non_exhaustive()
    }
}

impl Service {
    pub(crate) fn new(broker: Arc<Broker>) -> Service {
        Service { broker }
    }

    /// The broker's `brokerName`.
    pub fn broker_name(&self) -> &str {
        &self.broker.config.broker_name
    }
}

/// Who is asking: what both protocols can say about a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    /// The client's address: a remoting connection's peer, a gRPC client's peer. Becomes the
    /// born host of what it sends and names it in logs and remarks.
    pub remote_addr: SocketAddr,
    /// The client's RocketMQ version ordinal (`ferromq_protocol::version`); rules that depend
    /// on it (max reconsume times from V3_4_9 on) read it here.
    pub client_version: i32,
}
