//! The RocketMQ client: producer, consumers and the admin client, speaking the remoting
//! protocol to name servers and brokers. It depends on no server crate.

pub mod admin;
