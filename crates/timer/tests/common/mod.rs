//! Helpers shared by the timer's integration tests: a real `MessageStore` in a temporary
//! directory, sends that go through the broker's transform, and reading what was delivered.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferromq_protocol::message::{keys, MessageProperties, StoredMessage};
use ferromq_store::{FlushDiskType, GetMessageStatus, MessageStore, PutMessageStatus, StoreConfig};
use ferromq_timer::{timer_transform, Clock, SystemClock, TimerConfig, TimerDecision, TimerMessageStore};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().expect("address")
}

pub fn now_ms() -> i64 {
    SystemClock.now_ms()
}

pub fn store_config(root: &Path) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: 4 * 1024 * 1024,
        mapped_file_size_consume_queue: 20 * 4096,
        flush_disk_type: FlushDiskType::AsyncFlush,
        flush_interval_consume_queue_ms: 50,
        flush_interval_commit_log_ms: 20,
        // The timer's checkpoint waits for the CommitLog to be flushed; small test writes
        // dirty no whole page, so only the thorough flush would otherwise reach them.
        flush_commit_log_thorough_interval_ms: 100,
        max_hash_slot_num: 1024,
        max_index_num: 8192,
        ..StoreConfig::with_root(root)
    }
}

/// A small wheel: 3600 slots per revolution, 64 KiB timerlog segments, flushed every 100 ms.
pub fn timer_config(precision_ms: u32) -> TimerConfig {
    TimerConfig {
        timer_precision_ms: precision_ms,
        timer_slots_total: 3600,
        timer_flush_interval_ms: 100,
        mapped_file_size_timer_log: 64 * 1024,
        ..TimerConfig::default()
    }
}

pub fn open_store(root: &Path) -> Arc<MessageStore> {
    Arc::new(MessageStore::open(store_config(root), host()).expect("open store"))
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct ManualClock(pub AtomicI64);

impl ManualClock {
    pub fn set(&self, now_ms: i64) {
        self.0.store(now_ms, Ordering::Release);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::Acquire)
    }
}

/// A timer running in the background until [`Running::stop`].
pub struct Running {
    pub timer: Arc<TimerMessageStore>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Running {
    pub fn start(config: TimerConfig, root: &Path, store: &Arc<MessageStore>) -> Running {
        Self::start_with_clock(config, root, store, Arc::new(SystemClock))
    }

    pub fn start_with_clock(
        config: TimerConfig,
        root: &Path,
        store: &Arc<MessageStore>,
        clock: Arc<dyn Clock>,
    ) -> Running {
        let timer = TimerMessageStore::open_with_clock(config, root, store.clone(), clock).expect("open timer");
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(timer.clone().run(async move {
            let _ = rx.await;
        }));
        Running { timer, stop: Some(tx), task }
    }

    /// Clean stop: the tasks end and the final checkpoint is written.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        (&mut self.task).await.expect("timer task");
    }

    /// Crash: the tasks are aborted and the timer dropped without a final flush.
    pub async fn crash(self) {
        self.task.abort();
        let _ = self.task.await;
        drop(self.timer);
    }
}

/// A timer message as the broker builds it: user properties, then the transform.
pub fn timer_message(topic: &str, queue_id: i32, deliver_ms: i64, uniq: &str, config: &TimerConfig) -> StoredMessage {
    let mut props = MessageProperties::new();
    props.insert(keys::UNIQ_KEY, uniq);
    props.insert(keys::TAGS, "timer");
    props.insert(keys::TIMER_DELIVER_MS, deliver_ms.to_string());
    let (mut topic, mut queue_id) = (topic.to_owned(), queue_id);
    let decision = timer_transform(&mut props, &mut topic, &mut queue_id, now_ms, config).expect("accepted");
    assert!(matches!(decision, TimerDecision::Wheel { .. }), "{decision:?}");
    StoredMessage {
        topic,
        queue_id,
        body: Bytes::from(format!("body-{uniq}")),
        born_host: "127.0.0.1:5555".parse().expect("address"),
        store_host: host(),
        born_timestamp_ms: now_ms(),
        properties: props.encode(),
        ..StoredMessage::default()
    }
}

pub async fn put(store: &MessageStore, msg: StoredMessage) {
    let r = store.put_message(msg).await;
    assert_eq!(r.status, PutMessageStatus::PutOk, "{r:?}");
}

/// One message found in a real topic.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub uniq: String,
    pub store_timestamp_ms: i64,
    pub props: MessageProperties,
    pub body: Bytes,
}

impl Delivered {
    pub fn timer_out_ms(&self) -> i64 {
        self.props.get(keys::TIMER_OUT_MS).and_then(|v| v.parse().ok()).expect("TIMER_OUT_MS")
    }

    pub fn deliver_ms(&self) -> i64 {
        self.props.get(keys::TIMER_DELIVER_MS).and_then(|v| v.parse().ok()).expect("TIMER_DELIVER_MS")
    }
}

/// Every message in a queue, in queue order.
pub fn read_queue(store: &MessageStore, topic: &str, queue_id: i32) -> Vec<Delivered> {
    let mut out = Vec::new();
    let mut offset = store.min_offset_in_queue(topic, queue_id);
    loop {
        let r = store.get_message(topic, queue_id, offset, 64, 4 << 20, None);
        if r.status != GetMessageStatus::Found {
            return out;
        }
        for m in &r.messages {
            let (msg, _) = StoredMessage::decode(m).expect("whole record");
            let props = MessageProperties::decode(&msg.properties);
            out.push(Delivered {
                uniq: props.get(keys::UNIQ_KEY).unwrap_or_default().to_owned(),
                store_timestamp_ms: msg.store_timestamp_ms,
                props,
                body: msg.body.clone(),
            });
        }
        offset = r.next_begin_offset;
    }
}

/// Polls until `count` distinct messages are in the queue or `timeout` passes.
pub async fn wait_for_distinct(
    store: &MessageStore,
    topic: &str,
    queue_id: i32,
    count: usize,
    timeout: Duration,
) -> Vec<Delivered> {
    let deadline = Instant::now() + timeout;
    loop {
        let found = read_queue(store, topic, queue_id);
        let mut ids: Vec<&str> = found.iter().map(|d| d.uniq.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() >= count || Instant::now() >= deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `cond` until it holds or `timeout` passes; returns whether it held.
pub async fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !cond() {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// A deterministic generator (xorshift64*), seeded.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
