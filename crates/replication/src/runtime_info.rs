//! `HARuntimeInfo`, the body of GET_BROKER_HA_STATUS (907). The type lives in
//! `ferromq-protocol` (so admin tools can read it without a server crate) and is re-exported
//! here, where `HaService` and `HaClient` build it. Java:
//! `org.apache.rocketmq.remoting.protocol.body.HARuntimeInfo`.

pub use ferromq_protocol::body::{HaClientRuntimeInfo, HaConnectionRuntimeInfo, HaRuntimeInfo};
