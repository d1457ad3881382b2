//! The admin client: what `mqadmin` asks of name servers and brokers, as typed async calls.
//!
//! Built directly on `ferromq-remoting`'s `RemotingClient` and `ferromq-protocol`'s headers and
//! bodies; it keeps no route cache and no producer or consumer state. Formatting results for
//! people is the CLI's job. Java: `DefaultMQAdminExt`, `MQClientAPIImpl`.

mod acl;
mod auth;
mod broker;
mod client;
mod controller;
mod error;
mod json;
mod message;
mod namesrv;
mod reset;
pub mod static_topic;

pub use client::{AdminClient, DEFAULT_TIMEOUT};
pub use controller::ElectedMaster;
pub use error::AdminError;
pub use ferromq_protocol::body::SubscriptionGroupConfig;
pub use json::{
    from_str as json_from_str, json, to_string_pretty as json_to_string_pretty, Map as JsonMap, Value as JsonValue,
};
pub use message::{PullResult, PullStatus, SendResult, TOOLS_CONSUMER_GROUP, TOOLS_PRODUCER_GROUP};
pub use reset::{rollback_to, ResetOutcome, RollbackStats};
