//! Topic and group name rules: they live in `ferromq_protocol::topic_validator`, shared with
//! the proxy, which checks names before any broker sees them.

pub use ferromq_protocol::topic_validator::*;
