//! The RocketMQ client: producer, consumers and the admin client, speaking the remoting
//! protocol to name servers and brokers. It depends on no server crate.
//!
//! [`ClientInstance`] is what the clients of one client id share (name servers, routes,
//! heartbeats, connections); [`Producer`] sends [`Message`]s; [`TransactionProducer`] sends
//! half messages ended by a [`TransactionListener`]; [`LitePullConsumer`] pulls
//! [`MessageExt`]s the application polls; [`PushConsumer`] calls the application's listener.
//! Consumers subscribe with a tag expression or a SQL92 [`MessageSelector`].

pub mod admin;

mod allocate;
mod broker_requests;
mod client_instance;
mod consumed_offset;
mod consumer_calls;
mod consumer_stats;
mod error;
mod fault;
mod lite_pull_consumer;
mod local_offset_store;
mod message;
mod message_ext;
mod periodic;
mod producer;
mod publish_info;
mod pull_node;
mod push_consumer;
mod send_result;
mod simple_consumer;
mod subscription;
mod trace;
mod transaction_producer;
mod validators;

pub use allocate::{allocate_averagely, AllocateStrategy, DEFAULT_VIRTUAL_NODES};
pub use client_instance::{ClientConfig, ClientInstance};
pub use error::ClientError;
pub use ferromq_protocol::body::ConsumeFromWhere;
pub use ferromq_protocol::body::MessageModel;
pub use ferromq_protocol::body::MessageQueue;
pub use ferromq_protocol::signature::SessionCredentials;
pub use lite_pull_consumer::{LitePullConsumer, LitePullConsumerConfig, PULL_BATCH_SIZE, PULL_THRESHOLD_FOR_QUEUE};
pub use message::Message;
pub use message_ext::MessageExt;
pub use producer::{select_by_hash, Producer, ProducerConfig, CREATE_TOPIC_KEY};
pub use push_consumer::{
    ConsumeOrderlyStatus, ConsumeStatus, MessageListener, MessageListenerOrderly, PushConsumer, PushConsumerConfig,
};
pub use send_result::{SendResult, SendStatus};
pub use simple_consumer::{ReceivedMessage, SimpleConsumer, SimpleConsumerConfig};
pub use subscription::{build_subscription, MessageSelector};
pub use transaction_producer::{
    LocalTransactionState, TransactionCheckConfig, TransactionListener, TransactionProducer, TransactionSendResult,
};
pub use validators::{check_message, check_topic, TOPIC_MAX_LEN};
