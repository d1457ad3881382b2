//! The broker's view of its clients: which connections run which producer and consumer
//! groups, what the consumer groups subscribe to, and which client holds which queue for
//! orderly consumption. Fed by HEART_BEAT, UNREGISTER_CLIENT, LOCK_BATCH_MQ and
//! UNLOCK_BATCH_MQ, emptied by closed connections and expiry scans; consumer membership
//! changes are pushed to the members as NOTIFY_CONSUMER_IDS_CHANGED.
//! Java: `org.apache.rocketmq.broker.client` and `client.rebalance`.
//!
//! Request decoding and responses belong to the processors; these tables never read the clock
//! (callers pass epoch milliseconds) and never touch the store.

mod client_channel;
mod consumer_group_info;
mod consumer_ids_notifier;
mod consumer_manager;
mod producer_manager;
mod pull_offsets;
mod rebalance_lock;

pub use client_channel::{ClientChannelInfo, CHANNEL_EXPIRED_TIMEOUT_MS};
pub use consumer_group_info::ConsumerGroupInfo;
pub use consumer_manager::{ConsumerGroupEvent, ConsumerManager};
pub use producer_manager::ProducerManager;
pub use pull_offsets::PullOffsets;
pub use rebalance_lock::{RebalanceLockManager, REBALANCE_LOCK_MAX_LIVE_TIME_MS};
