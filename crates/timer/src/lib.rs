//! RocketMQ 5.x timer wheel: messages delivered at any time (to the precision), with the
//! same files as Java's `TimerMessageStore`.
//!
//! # The message path
//!
//! ```text
//! send with TIMER_DELIVER_MS / TIMER_DELAY_MS / TIMER_DELAY_SEC
//!   --> timer_transform (broker): TIMER_OUT_MS, REAL_TOPIC, REAL_QID; topic rmq_sys_wheel_timer, queue 0
//!   --> store (CommitLog + ConsumeQueue of the timer topic)
//!   --> enqueue task: a 52-byte unit in timerlog/, linked into its slot of the timerwheel
//!   --> dequeue task, once the clock has passed the slot: re-put to REAL_TOPIC / REAL_QID
//! ```
//!
//! Messages due further than the roll window are linked into a nearer slot and, when it
//! comes, put back into the timer topic to be enqueued again ("rolled"). A recall stores a
//! delete marker that lands in the same slot and cancels the message there ([`recall`]).
//!
//! # Files, under the store's `storePathRootDir`
//!
//! * `timerwheel`: `2 * slotsTotal` slots of 32 bytes ([`Slot`]); the whole wheel is kept in
//!   memory and changed slots are written back by the flusher.
//! * `timerlog/`: 100 MiB segments named by 20-digit offset, of 52-byte units
//!   ([`TimerLogUnit`]) and a 16-byte blank tail.
//! * `config/timercheck`: [`TimerCheckpoint`], 56 bytes in a 4096-byte file.
//!
//! Byte layouts are Java's (big-endian), so a Java broker can take over the files and vice
//! versa; the golden tests in `tests/layouts.rs` pin them.
//!
//! # Crash safety (at least once)
//!
//! The checkpoint never claims more than is on disk. Each flush cycle writes the timerlog
//! first, then the wheel slots it references, then the checkpoint, and the checkpoint only
//! once the CommitLog holds every message the recorded progress delivered (see `flush.rs`).
//! After a crash (`SIGKILL`, or power loss of synced data) recovery re-links the timerlog tail
//! into the wheel, replays the timer queue from the checkpoint's queue offset (skipping
//! messages whose units survived) and resumes reading at the checkpoint's read time, so no
//! due message is lost; those delivered since the last checkpoint may be delivered again.
//! Messages that fell due during the downtime are delivered at once.
//!
//! # Not here
//!
//! Reading `broker.conf`, request codes (RECALL_MESSAGE is the broker's), the persisted
//! per-topic timer metrics file (`timermetrics`; the counts are kept in memory,
//! [`topic_metrics`]), a wheel that enqueues on a replica (a replica adopts its master's
//! progress instead: [`adopt_master_progress`]), and the disruptor and
//! warm-up options of Java.

mod adopt;
mod base64url;
mod chain;
mod checkpoint;
mod clock;
mod config;
mod dequeue;
mod enqueue;
mod error;
mod flush;
pub mod recall;
mod recovery;
mod slot;
mod store;
mod timer_log;
pub mod topic_metrics;
mod transform;
mod wheel;

pub use adopt::adopt_master_progress;
pub use checkpoint::{DataVersion, TimerCheckpoint, TIMER_CHECKPOINT_FILE_LEN, TIMER_CHECKPOINT_SIZE};
pub use clock::{Clock, SystemClock};
pub use config::{
    snap_precision_ms, TimerConfig, DEFAULT_SLOTS_TOTAL, DEFAULT_TIMER_LOG_FILE_SIZE, PRECISION_CANDIDATES_MS,
    TIMER_BLANK_SLOTS, TIMER_TOPIC, TIMER_WHEEL_TTL_DAY,
};
pub use error::TimerError;
pub use recall::{RecallHandle, RecallRefusal};
pub use slot::{Slot, SLOT_SIZE};
pub use store::{TimerMessageStore, TimerStats};
pub use timer_log::{
    blank_marker, is_magic_ok, offset_for_last_unit, TimerLogUnit, BLANK_MAGIC_CODE, MAGIC_DEFAULT, MAGIC_DELETE,
    MAGIC_ROLL, MIN_BLANK_LEN, UNIT_PRE_SIZE_FOR_MSG, UNIT_SIZE,
};
pub use transform::{is_timer_message, round_deliver_ms, timer_transform, TimerDecision, TimerRefusal};
