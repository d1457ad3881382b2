//! `TimerMessageStore`: the timer wheel as the broker sees it. Opens and recovers the files,
//! runs the enqueue and dequeue tasks and the flusher, and answers metrics. Java:
//! `TimerMessageStore` (its services are `enqueue.rs`, `dequeue.rs` and `flush.rs` here).
//!
//! Shared state and who changes it:
//!
//! * `core` (the wheel in memory, under a mutex): the enqueue task links units into slots at
//!   or after the write time; recovery and the flusher touch it too. Timerlog appends happen
//!   only while holding it, so there is one writer.
//! * `write_time_ms`: advanced only by the enqueue task, to the current time rounded down to
//!   the precision. A message due before it is delivered at once instead of being linked,
//!   so once the write time has passed a slot, nothing is added to that slot any more.
//! * `read_time_ms`: advanced only by the dequeue task, one slot at a time and only after
//!   the whole slot is delivered; always below the write time, so never ahead of the clock.
//! * `queue_offset`: the next `rmq_sys_wheel_timer` queue offset to enqueue; advanced by
//!   the enqueue task once a message is linked (or delivered at once).

use std::collections::VecDeque;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use ferromq_store::MessageStore;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tracing::{error, info};

use crate::checkpoint::{CheckpointFile, TimerCheckpoint};
use crate::clock::{Clock, SystemClock};
use crate::config::{TimerConfig, TIMER_TOPIC};
use crate::error::TimerError;
use crate::recovery::{self, Replay};
use crate::timer_log::TimerLog;
use crate::wheel::TimerWheel;
use crate::{dequeue, enqueue, flush};

/// Counters since open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimerStats {
    /// Units linked into the wheel (messages, rolls and delete markers).
    pub enqueued: u64,
    /// Messages re-put to their real topic.
    pub delivered: u64,
    /// Messages re-put to the timer topic to be enqueued again (rolls).
    pub rolled: u64,
    /// Messages skipped because a delete marker recalled them.
    pub recalled: u64,
    /// Messages given up: unreadable, refused by the store, or failing after three tries.
    pub dropped: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) enqueued: AtomicU64,
    pub(crate) delivered: AtomicU64,
    pub(crate) rolled: AtomicU64,
    pub(crate) recalled: AtomicU64,
    pub(crate) dropped: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The wheel, behind the core lock.
#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) wheel: TimerWheel,
}

/// The flusher's state, behind its own lock (one flush at a time).
#[derive(Debug)]
pub(crate) struct FlushState {
    pub(crate) file: CheckpointFile,
    /// The checkpoint last written (or loaded).
    pub(crate) written: TimerCheckpoint,
    /// Progress flushed to the timer's files but not yet written to the checkpoint because
    /// the messages it delivered are not yet on disk in the CommitLog; oldest first.
    pub(crate) candidates: VecDeque<flush::Candidate>,
}

/// State shared by the tasks, the flusher and the public handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: TimerConfig,
    pub(crate) precision_ms: i64,
    pub(crate) roll_window_slots: i64,
    pub(crate) store: Arc<MessageStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) core: Mutex<Core>,
    /// Appended only under `core`; read without it (written units never change).
    pub(crate) log: Arc<TimerLog>,
    pub(crate) read_time_ms: AtomicI64,
    pub(crate) write_time_ms: AtomicI64,
    pub(crate) queue_offset: AtomicI64,
    /// Sum of the unit counts of the slots still to be delivered (Java's `getAllCongestNum`).
    pub(crate) pending: AtomicI64,
    pub(crate) replay: Mutex<Replay>,
    /// `replay` holds something (skips or adopted progress): only then does the enqueue task
    /// take its lock per message.
    pub(crate) replaying: AtomicBool,
    pub(crate) flush: Mutex<FlushState>,
    pub(crate) stop: AtomicBool,
    /// Wakes the enqueue task when a timer-topic message is dispatched.
    pub(crate) arrivals: Notify,
    /// Wakes the dequeue task when the write time moves.
    pub(crate) write_moved: Notify,
    /// Wakes the flusher early (stop).
    pub(crate) flush_wake: (Mutex<()>, Condvar),
    pub(crate) poisoned: AtomicBool,
    pub(crate) counters: Counters,
    pub(crate) topic_metrics: crate::topic_metrics::TopicMetrics,
    rng: AtomicU64,
}

impl Shared {
    pub(crate) fn core(&self) -> MutexGuard<'_, Core> {
        // The wheel is updated slot by slot; a panic elsewhere cannot leave a slot half set.
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// `time_ms` rounded down to the precision.
    pub(crate) fn floor_ms(&self, time_ms: i64) -> i64 {
        time_ms.div_euclid(self.precision_ms) * self.precision_ms
    }

    /// Java's idle wait of the enqueue and dequeue services: `100 * precision / 1000` ms.
    pub(crate) fn idle_wait(&self) -> Duration {
        Duration::from_millis((100 * self.precision_ms / 1000).max(1) as u64)
    }

    fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.arrivals.notify_waiters();
        self.write_moved.notify_waiters();
        let _guard = self.flush_wake.0.lock();
        self.flush_wake.1.notify_all();
    }

    fn next_random_below_1000(&self) -> u64 {
        // xorshift64*: only for Java's probabilistic flow control.
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.store(x, Ordering::Relaxed);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D) % 1000
    }
}

/// The timer wheel over a [`MessageStore`].
///
/// Open it after the store, [`run`](Self::run) it, and let `run` end (or call
/// [`shutdown`](Self::shutdown)) before shutting the store down: the last deliveries and the
/// final checkpoint need the store. Dropping it without `shutdown` stops the flusher without
/// a final flush, as a crash would.
#[derive(Debug)]
pub struct TimerMessageStore {
    shared: Arc<Shared>,
    flusher: Mutex<Option<JoinHandle<()>>>,
    shut_down: AtomicBool,
}

impl TimerMessageStore {
    /// Opens the timer's files under `root` (the store's `storePathRootDir`: `timerwheel`,
    /// `timerlog/`, `config/timercheck`), recovers them and starts the flusher.
    ///
    /// # Errors
    /// Invalid config, I/O errors, a wheel file written with another `timer_slots_total`.
    pub fn open(config: TimerConfig, root: &Path, store: Arc<MessageStore>) -> Result<Arc<Self>, TimerError> {
        Self::open_with_clock(config, root, store, Arc::new(SystemClock))
    }

    /// As [`open`](Self::open), reading time from `clock`.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_with_clock(
        config: TimerConfig,
        root: &Path,
        store: Arc<MessageStore>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Self>, TimerError> {
        config.validate()?;
        let now = clock.now_ms();
        let recovered = recovery::recover(&config, root, &store, now)?;
        let precision_ms = config.precision_ms();
        let shared = Arc::new(Shared {
            precision_ms,
            roll_window_slots: config.roll_window_slots(),
            store: store.clone(),
            clock,
            core: Mutex::new(Core { wheel: recovered.wheel }),
            log: Arc::new(recovered.log),
            read_time_ms: AtomicI64::new(recovered.read_time_ms),
            write_time_ms: AtomicI64::new(now.div_euclid(precision_ms) * precision_ms),
            queue_offset: AtomicI64::new(recovered.queue_offset),
            pending: AtomicI64::new(recovered.pending),
            replaying: AtomicBool::new(!recovered.replay.skip.is_empty() || recovered.replay.adopted.is_some()),
            replay: Mutex::new(recovered.replay),
            flush: Mutex::new(FlushState {
                file: recovered.checkpoint_file,
                written: recovered.checkpoint,
                candidates: VecDeque::new(),
            }),
            stop: AtomicBool::new(false),
            arrivals: Notify::new(),
            write_moved: Notify::new(),
            flush_wake: (Mutex::new(()), Condvar::new()),
            poisoned: AtomicBool::new(false),
            counters: Counters::default(),
            topic_metrics: crate::topic_metrics::TopicMetrics::default(),
            rng: AtomicU64::new((now as u64) | 1),
            config,
        });
        let weak = Arc::downgrade(&shared);
        store.on_message_arrival(Arc::new(move |req| {
            if req.topic == TIMER_TOPIC {
                if let Some(shared) = weak.upgrade() {
                    shared.arrivals.notify_one();
                }
            }
        }));
        let flusher = flush::start_flusher(shared.clone()).map_err(crate::error::io_err(root))?;
        info!(
            precision_ms,
            slots_total = shared.config.timer_slots_total,
            roll_window_slots = shared.roll_window_slots,
            flush_interval_ms = shared.config.timer_flush_interval_ms,
            "timer wheel opened"
        );
        Ok(Arc::new(TimerMessageStore {
            shared,
            flusher: Mutex::new(Some(flusher)),
            shut_down: AtomicBool::new(false),
        }))
    }

    /// Runs the enqueue and dequeue tasks until `shutdown` completes (or a task dies), then
    /// stops them and calls [`shutdown`](Self::shutdown) (final flush and checkpoint).
    pub async fn run(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        let mut tasks = JoinSet::new();
        tasks.spawn(enqueue::run(self.shared.clone()));
        tasks.spawn(dequeue::run(self.shared.clone()));
        info!(
            read_time_ms = self.shared.read_time_ms.load(Ordering::Acquire),
            queue_offset = self.shared.queue_offset.load(Ordering::Acquire),
            "timer wheel running"
        );
        tokio::pin!(shutdown);
        tokio::select! {
            () = &mut shutdown => {}
            Some(ended) = tasks.join_next() => error!(result = ?ended, "timer task ended unexpectedly"),
        }
        self.shared.request_stop();
        while let Some(ended) = tasks.join_next().await {
            if let Err(e) = ended {
                error!(error = %e, "timer task failed");
            }
        }
        if let Err(e) = self.shutdown() {
            error!(error = %e, "timer wheel final flush failed");
        }
    }

    /// Stops the tasks and the flusher, flushes the timerlog and the wheel and writes the
    /// checkpoint. Idempotent; returns the checkpoint written last.
    ///
    /// # Errors
    /// The final flush failed (or an earlier one poisoned the timer): the next open replays
    /// from the previous checkpoint, delivering some messages twice but losing none.
    pub fn shutdown(&self) -> Result<TimerCheckpoint, TimerError> {
        self.shared.request_stop();
        self.join_flusher();
        if self.shut_down.swap(true, Ordering::AcqRel) {
            return Ok(self.checkpoint());
        }
        let result = flush::flush_cycle(&self.shared, true);
        info!(
            read_time_ms = self.shared.read_time_ms.load(Ordering::Acquire),
            queue_offset = self.shared.queue_offset.load(Ordering::Acquire),
            pending = self.pending(),
            ok = result.is_ok(),
            "timer wheel shut down"
        );
        result
    }

    fn join_flusher(&self) {
        let handle = self.flusher.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }

    /// Flushes the timerlog and the wheel now and writes the checkpoint as far as the
    /// CommitLog is durable (what the flusher does every `timerFlushIntervalMs`).
    ///
    /// # Errors
    /// A flush failure, or [`TimerError::Poisoned`] after an earlier one.
    pub fn flush(&self) -> Result<TimerCheckpoint, TimerError> {
        flush::flush_cycle(&self.shared, false)
    }

    /// Messages in the wheel still to be delivered (delete markers count -1). Java:
    /// `getAllCongestNum`.
    pub fn pending(&self) -> u64 {
        self.shared.pending.load(Ordering::Acquire).max(0) as u64
    }

    /// The checkpoint last written: the progress a replica adopts (GET_TIMER_CHECK_POINT).
    pub fn checkpoint(&self) -> TimerCheckpoint {
        self.shared.flush.lock().unwrap_or_else(|e| e.into_inner()).written
    }

    /// Every slot before this time has been delivered.
    pub fn read_time_ms(&self) -> i64 {
        self.shared.read_time_ms.load(Ordering::Acquire)
    }

    /// Messages due before this time are no longer linked but delivered at once.
    pub fn write_time_ms(&self) -> i64 {
        self.shared.write_time_ms.load(Ordering::Acquire)
    }

    /// Next timer-queue offset to enqueue.
    pub fn queue_offset(&self) -> i64 {
        self.shared.queue_offset.load(Ordering::Acquire)
    }

    /// Timer-queue messages not yet enqueued. Java: `getEnqueueBehindMessages`.
    pub fn enqueue_behind_messages(&self) -> i64 {
        self.shared.store.max_offset_in_queue(TIMER_TOPIC, 0) - self.queue_offset()
    }

    /// How far the read pointer is behind the clock, ms. Java: `getDequeueBehindMillis`.
    pub fn dequeue_behind_ms(&self) -> i64 {
        self.shared.now_ms() - self.read_time_ms()
    }

    /// Counters since open.
    /// Each topic's messages into and out of the wheel since start (bounded; see
    /// [`crate::topic_metrics`]).
    pub fn topic_counts(&self) -> Vec<(String, crate::topic_metrics::TopicTimerCounts)> {
        self.shared.topic_metrics.topics()
    }

    /// How late due messages were delivered since start.
    pub fn delay_latency(&self) -> crate::topic_metrics::DelayLatency {
        self.shared.topic_metrics.latency()
    }

    pub fn stats(&self) -> TimerStats {
        let c = &self.shared.counters;
        TimerStats {
            enqueued: c.enqueued.load(Ordering::Relaxed),
            delivered: c.delivered.load(Ordering::Relaxed),
            rolled: c.rolled.load(Ordering::Relaxed),
            recalled: c.recalled.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
        }
    }

    /// Whether an earlier flush failure froze the checkpoint.
    pub fn is_poisoned(&self) -> bool {
        self.shared.poisoned.load(Ordering::Acquire)
    }

    /// Units in the slot of `deliver_ms`. Java: `getCongestNum`.
    pub fn congest_num(&self, deliver_ms: i64) -> i64 {
        i64::from(self.shared.core().wheel.slot(deliver_ms).num)
    }

    /// Flow control for a send to the slot of `deliver_ms` (TIMER_OUT_MS): false up to
    /// `timerCongestNumEachSlot` messages in the slot, true from twice that, and in between
    /// the random draw Java makes. Java: `isReject` (WHEEL_TIMER_FLOW_CONTROL).
    pub fn is_reject(&self, deliver_ms: i64) -> bool {
        let congest = self.congest_num(deliver_ms);
        let each = i64::from(self.shared.config.timer_congest_num_each_slot);
        if congest <= each {
            return false;
        }
        if congest >= each.saturating_mul(2) {
            return true;
        }
        let threshold = 1000.0 * (congest - each) as f64 / (each as f64 + 0.1);
        self.shared.next_random_below_1000() as f64 > threshold
    }

    /// The configuration.
    pub fn config(&self) -> &TimerConfig {
        &self.shared.config
    }
}

impl Drop for TimerMessageStore {
    fn drop(&mut self) {
        // No final flush here: only `shutdown` writes the last checkpoint.
        self.shared.request_stop();
        self.join_flusher();
    }
}
