//! The RocketMQ client: producer, consumers and the admin client, speaking the remoting
//! protocol to name servers and brokers. It depends on no server crate.
//!
//! [`ClientInstance`] is what the clients of one client id share (name servers, routes,
//! heartbeats, connections); [`Producer`] sends [`Message`]s.

pub mod admin;

mod client_instance;
mod error;
mod fault;
mod message;
mod producer;
mod publish_info;
mod send_result;
mod validators;

pub use client_instance::{ClientConfig, ClientInstance};
pub use error::ClientError;
pub use ferromq_protocol::body::MessageQueue;
pub use message::Message;
pub use producer::{select_by_hash, Producer, ProducerConfig, CREATE_TOPIC_KEY};
pub use send_result::{SendResult, SendStatus};
pub use validators::{check_message, check_topic, TOPIC_MAX_LEN};
