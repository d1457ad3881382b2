//! RocketMQ's message store.
//!
//! Messages are appended to the CommitLog (segments of fixed size, memory-mapped); a dispatch
//! service follows it and builds one ConsumeQueue per topic queue (20-byte units pointing into
//! the CommitLog) and the IndexFiles (keys to offsets). Flushing is synchronous (group commit)
//! or periodic. A checkpoint and an abort marker drive recovery after a crash. The on-disk
//! layout is RocketMQ's, so the formats are shared with the Java broker.
//!
//! This crate uses files only: no sockets, no request codes.

mod config;
mod dispatch_request;
mod mapped_file;
mod mapped_file_queue;

pub use config::{FlushDiskType, StoreConfig};
pub use dispatch_request::DispatchRequest;
pub use mapped_file::{offset_to_file_name, MappedFile, OS_PAGE_SIZE};
pub use mapped_file_queue::MappedFileQueue;
