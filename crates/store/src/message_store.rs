//! `MessageStore`: the store as the broker sees it. Opens and recovers the files, appends
//! messages (waiting for the flush under SYNC_FLUSH), runs the dispatch (reput) and
//! consume-queue flush threads, and answers reads and queries. Java: `DefaultMessageStore`.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferromq_protocol::message::{find_properties, keys, StoredMessage};
use tracing::{debug, error, info, warn};

use crate::checkpoint::Checkpoint;
use crate::commit_log::CommitLog;
use crate::config::StoreConfig;
use crate::consume_queue::{ConsumeQueueStore, CqUnit, ExtOptions};
use crate::disk_guard::DiskGuard;
use crate::dispatch::{goes_to_consume_queue, scan, Scanned};
use crate::dispatch_request::DispatchRequest;
use crate::flush::FlushService;
use crate::get_result::{GetMessageResult, QueryMessageResult};
use crate::index_service::IndexService;
use crate::log_limiter::LogLimiter;
use crate::mapped_file_queue::MappedFileQueue;
use crate::put_result::{PutMessageResult, PutMessageStatus};
use crate::recovery;
use crate::retention::{DiskUsageProbe, RetentionReport, RetentionService, RetentionTargets};
use crate::stats::{StatsRecorder, StoreStats};

/// Bytes of a record that hold its store timestamp, whatever its host address lengths.
/// How long deleting a topic waits for its records still in the dispatch queue.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(3);

const STORE_TIMESTAMP_END: i32 =
    (ferromq_protocol::message::store_timestamp_pos(ferromq_protocol::message::sysflag::BORNHOST_V6_FLAG) + 8) as i32;

/// Why the store could not open.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another process holds the store's lock file.
    #[error("Lock failed, MQ already started: {path} is locked by another process")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// A file could not be read, written or mapped.
    #[error("store file {path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.into();
    move |source| StoreError::Io { path, source }
}

/// Called with every dispatched message (long polling wakes parked pulls from here).
pub type ArrivalListener = Arc<dyn Fn(&DispatchRequest) + Send + Sync>;

/// Called with the CommitLog's new end offset when the dispatch thread sees it grow (before
/// it dispatches the new records). Replication wakes its senders from here. It runs on the
/// dispatch thread: it must be quick and must not block. It returns whether it wants further
/// calls: a listener whose service has stopped returns `false` and is dropped (a broker in
/// controller mode starts a replication service at each role change).
pub type CommitLogListener = Arc<dyn Fn(i64) -> bool + Send + Sync>;

/// State shared by the store's threads.
struct Shared {
    config: StoreConfig,
    commit_log: Arc<CommitLog>,
    consume_queues: ConsumeQueueStore,
    index: IndexService,
    checkpoint: Arc<Checkpoint>,
    /// CommitLog offset up to which records are dispatched.
    reput_from: AtomicI64,
    /// Controller mode: dispatch stops at the confirm offset (the checkpoint's
    /// `confirmPhyOffset`), so what the SyncStateSet does not hold yet is invisible to
    /// consumers and can be cut on failover.
    dispatch_bounded: AtomicBool,
    /// Held by the dispatch thread for each pass; a truncation takes it, so no pass reads
    /// bytes that are being cut or stores an offset past the cut.
    reput_gate: Mutex<()>,
    /// Store time of the newest dispatched record.
    last_dispatched_timestamp: AtomicI64,
    listeners: RwLock<Vec<ArrivalListener>>,
    commit_log_listeners: RwLock<Vec<CommitLogListener>>,
    wake_reput: (Mutex<()>, Condvar),
    /// Set by the dispatch thread (under `wake_reput`'s lock) while it waits.
    reput_sleeping: AtomicBool,
    /// Wakes the consume-queue flusher early at shutdown (and the retention and stats threads,
    /// which park on it too).
    wake_flusher: (Mutex<()>, Condvar),
    stop: AtomicBool,
    /// Bytes of RAM beyond which a read counts as cold (suggest reading from a slave).
    memory_budget_bytes: i64,
    retention: RetentionService,
    stats: StatsRecorder,
    /// Computes the bloom-filter bitmap of dispatched records (with extension files only).
    bit_map: RwLock<Option<BitMapCalculator>>,
    /// Rate limit of dispatch error logs (a full disk fails every record until space is back).
    dispatch_errors: LogLimiter,
    /// Watches the store's disks and refuses puts when they are full (Java's DISK_FULL_BIT).
    disk_guard: Arc<DiskGuard>,
    /// The compacted stores of compaction topics.
    compaction: crate::compaction::CompactionStore,
    /// While recovery re-dispatches after a crash: records stored before this time (ms) have
    /// their light queue units on disk already (the checkpoint's logics time is written only
    /// after every consume queue, closed light queues included, was synced), so they are not
    /// dispatched to light queues again, which would open every light queue they name.
    light_redispatch_from_ms: AtomicI64,
}

/// Computes a dispatched record's bloom-filter bitmap from its topic and properties (the
/// broker's SQL92 subscriptions); `None` stores no bitmap. Java:
/// `CommitLogDispatcherCalcBitMap`.
pub type BitMapCalculator = Arc<dyn Fn(&DispatchRequest) -> Option<Vec<u8>> + Send + Sync>;

impl Shared {
    /// Whether dispatch must keep each record's properties (for the bitmap calculator).
    fn keeps_properties(&self) -> bool {
        self.config.enable_consume_queue_ext && self.bit_map.read().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Builds the index entries and the consume-queue unit of one record. Returns false when
    /// the consume queue could not take it (a full disk, say): the caller dispatches the record
    /// again later, which is safe (a unit already written is recognized and skipped), so an
    /// accepted message always becomes consumable once the queue can be written. An index
    /// failure only costs the record its keys (logged): it does not hold up consumption.
    fn dispatch(&self, req: &DispatchRequest) -> bool {
        // Index first: once a message is consumable it is also findable by key.
        if let Err(e) = self.index.build_index(req) {
            if self.dispatch_errors.should_log() {
                error!(topic = %req.topic, physical_offset = req.commit_log_offset, error = %e,
                    "index write failed; the message's keys are not indexed");
            }
        }
        if goes_to_consume_queue(req) {
            let written = self.consume_queues.find_or_create(&req.topic, req.queue_id).and_then(|cq| {
                // Properties are kept only while a calculator is set: without them (the
                // common case) the calculator's lock is not touched.
                let bit_map = match req.properties {
                    Some(_) => self.bit_map.read().unwrap_or_else(|e| e.into_inner()).clone().and_then(|f| f(req)),
                    None => None,
                };
                cq.put_with_bit_map(req, bit_map.as_deref())
            });
            if let Err(e) = written {
                if crate::reserve::is_no_space(&e) {
                    if self.dispatch_errors.should_log() {
                        error!(topic = %req.topic, queue_id = req.queue_id, physical_offset = req.commit_log_offset,
                            error = %e, "consume queue write failed for want of space; dispatch pauses and retries");
                    }
                    return false;
                }
                // Anything else (a broken queue order, a path that cannot be a directory) will not
                // go away by waiting; holding up every later record would stop all topics.
                error!(topic = %req.topic, queue_id = req.queue_id, physical_offset = req.commit_log_offset,
                    error = %e, "consume queue write failed; record not consumable");
            }
        }
        let light = self.config.light_queues()
            && goes_to_consume_queue(req)
            && !req.light_queues.is_empty()
            && req.store_timestamp >= self.light_redispatch_from_ms.load(Ordering::Acquire);
        // The record's unit in each light queue, for the queue and for its listeners.
        let light_units: Vec<DispatchRequest> = if light {
            req.light_queues.iter().map(|(name, offset)| light_unit(req, name, *offset)).collect()
        } else {
            Vec::new()
        };
        if !light_units.is_empty() && !self.dispatch_light(req, &light_units) {
            return false;
        }
        if goes_to_consume_queue(req) && self.compaction.serves(&req.topic) && !self.dispatch_compaction(req) {
            return false;
        }
        self.last_dispatched_timestamp.store(req.store_timestamp, Ordering::Release);
        if goes_to_consume_queue(req) {
            let listeners = self.listeners.read().unwrap_or_else(|e| e.into_inner());
            for listener in listeners.iter() {
                listener(req);
            }
            for unit in &light_units {
                for listener in listeners.iter() {
                    listener(unit);
                }
            }
        }
        true
    }

    /// Copies a compaction topic's record into its queue's compacted store. False when that
    /// failed for want of space (dispatched again later; a copy already made is skipped).
    fn dispatch_compaction(&self, req: &DispatchRequest) -> bool {
        let Some(record) = self.commit_log.get_message(req.commit_log_offset, req.msg_size as usize) else {
            error!(topic = %req.topic, physical_offset = req.commit_log_offset, "compaction copy: record not readable");
            return true;
        };
        let copied = self.compaction.put(
            &req.topic,
            req.queue_id,
            &record,
            req.consume_queue_offset,
            req.tags_code,
            req.store_timestamp,
        );
        match copied {
            Ok(()) => true,
            Err(e) if crate::reserve::is_no_space(&e) => {
                if self.dispatch_errors.should_log() {
                    error!(topic = %req.topic, queue_id = req.queue_id, error = %e,
                        "compaction copy failed for want of space; dispatch pauses and retries");
                }
                false
            }
            Err(e) => {
                error!(topic = %req.topic, queue_id = req.queue_id, queue_offset = req.consume_queue_offset, error = %e,
                    "compaction copy failed; the record is missing from the compacted view");
                true
            }
        }
    }

    /// Writes the record's unit into each of its light queues (same CommitLog position, size
    /// and tagsCode; the queue offset assigned at append). False when one could not take it
    /// for want of space: the record is dispatched again later, and units already written are
    /// recognized and skipped. Java: `ConsumeQueue#multiDispatchLmqQueue`.
    fn dispatch_light(&self, req: &DispatchRequest, units: &[DispatchRequest]) -> bool {
        for unit in units {
            let name = &unit.topic;
            let written = self.consume_queues.find_or_create(name, crate::LMQ_QUEUE_ID).and_then(|cq| cq.put(unit));
            if let Err(e) = written {
                if crate::reserve::is_no_space(&e) {
                    if self.dispatch_errors.should_log() {
                        error!(queue = %name, physical_offset = req.commit_log_offset, error = %e,
                            "light queue write failed for want of space; dispatch pauses and retries");
                    }
                    return false;
                }
                error!(queue = %name, queue_offset = unit.consume_queue_offset, physical_offset = req.commit_log_offset,
                    error = %e, "light queue write failed; record not consumable from it");
            }
        }
        true
    }

    /// Wakes the dispatch thread if it sleeps. Checking the flag first keeps the common case
    /// (the thread is busy dispatching) free of locks and system calls on every put.
    fn notify_reput(&self) {
        // Pairs with the fence in `reput_loop`: either this load sees the flag, or the dispatch
        // thread's next look sees the appended bytes.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.reput_sleeping.load(Ordering::SeqCst) {
            let _guard = self.wake_reput.0.lock();
            self.wake_reput.1.notify_one();
        }
    }

    /// Where dispatch may go: the CommitLog's readable end, or the confirm offset below it when
    /// dispatch is bounded.
    fn dispatch_end(&self) -> i64 {
        let max = self.commit_log.max_offset();
        if self.dispatch_bounded.load(Ordering::Acquire) {
            max.min(self.checkpoint.confirm_phy_offset())
        } else {
            max
        }
    }

    fn announce_commit_log_end(&self, end: i64) {
        let mut gone = false;
        for listener in self.commit_log_listeners.read().unwrap_or_else(|e| e.into_inner()).iter() {
            gone |= !listener(end);
        }
        if gone {
            // Rare (a service stopped): asked again, a live listener only wakes its senders twice.
            self.commit_log_listeners.write().unwrap_or_else(|e| e.into_inner()).retain(|l| l(end));
        }
    }

    fn run_retention(&self, now_utc_ms: i64) -> RetentionReport {
        let targets = RetentionTargets {
            commit_log: &self.commit_log,
            consume_queues: &self.consume_queues,
            index: &self.index,
            dispatched_offset: self.reput_from.load(Ordering::Acquire),
        };
        self.retention.run_once(&targets, now_utc_ms)
    }
}

/// The dispatch request of `req`'s unit in light queue `name` at `offset`.
fn light_unit(req: &DispatchRequest, name: &str, offset: i64) -> DispatchRequest {
    DispatchRequest {
        topic: name.to_owned(),
        queue_id: crate::LMQ_QUEUE_ID,
        commit_log_offset: req.commit_log_offset,
        msg_size: req.msg_size,
        tags_code: req.tags_code,
        store_timestamp: req.store_timestamp,
        consume_queue_offset: offset,
        keys: None,
        uniq_key: None,
        sys_flag: req.sys_flag,
        prepared_transaction_offset: req.prepared_transaction_offset,
        properties: None,
        light_queues: Vec::new(),
    }
}

/// The message store.
pub struct MessageStore {
    shared: Arc<Shared>,
    flush: Mutex<FlushService>,
    /// SYNC_FLUSH puts between their append and their answer: a put alone flushes for
    /// itself, any more share the group commit.
    sync_puts: AtomicUsize,
    threads: Mutex<Vec<JoinHandle<()>>>,
    _lock_file: File,
    shut_down: AtomicBool,
}

/// Counts a SYNC_FLUSH put in [`MessageStore::sync_puts`] while it lives.
struct SyncPut<'a>(&'a AtomicUsize);

impl Drop for SyncPut<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for MessageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageStore").field("root", &self.shared.config.store_path_root_dir).finish_non_exhaustive()
    }
}

fn total_memory_bytes() -> i64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(8 << 30)
}

/// What a message asks of the light queues (see [`MessageStore::light_ask`]).
enum LightAsk<'m> {
    Nothing,
    /// Dispatch to these light queues (`INNER_MULTI_DISPATCH`), or the reason it cannot be.
    Dispatch(Result<Vec<&'m str>, String>),
    /// It carries offsets of its own (`INNER_MULTI_QUEUE_OFFSET`), which are the store's to set.
    OwnOffsets,
}

impl MessageStore {
    /// Opens the store under `config.store_path_root_dir`, recovering from the files, and
    /// starts its threads. `store_host` is written into every record as STOREHOST.
    ///
    /// # Errors
    /// [`StoreError::Locked`] when another process uses the directory; I/O errors.
    pub fn open(config: StoreConfig, store_host: SocketAddr) -> Result<MessageStore, StoreError> {
        let root = config.store_path_root_dir.clone();
        std::fs::create_dir_all(&root).map_err(io_err(&root))?;
        let lock_path = config.lock_path();
        let mut lock_file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(io_err(&lock_path))?;
        match lock_file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(StoreError::Locked { path: lock_path }),
            Err(std::fs::TryLockError::Error(e)) => return Err(StoreError::Io { path: lock_path, source: e }),
        }
        let _ = lock_file.write_all(b"lock");

        let abort_path = config.abort_path();
        let last_exit_ok = !abort_path.exists();
        // The marker is its existence: creating it takes an inode, not a block, so a store on a
        // full disk still starts. The pid inside is for people and may not fit.
        let mut abort_file = File::create(&abort_path).map_err(io_err(&abort_path))?;
        if let Err(e) = abort_file.write_all(std::process::id().to_string().as_bytes()) {
            warn!(file = %abort_path.display(), error = %e, "cannot write the pid into the abort marker");
        }
        drop(abort_file);

        let checkpoint =
            Arc::new(Checkpoint::open(&config.checkpoint_path()).map_err(io_err(config.checkpoint_path()))?);
        let commit_dir = config.commit_log_dir();
        let segment_size = config.mapped_file_size_commit_log as usize;
        let window = usize::try_from(config.commit_log_prefault_window).unwrap_or(usize::MAX).min(segment_size);
        let policy = Arc::new(crate::ReservePolicy::new(window));
        let queue =
            MappedFileQueue::load_with(&commit_dir, segment_size, true, policy.clone()).map_err(io_err(&commit_dir))?;
        // What the CommitLog leaves free for the consume queues and index of what it accepted.
        if let Some(space) = crate::disk_space(&commit_dir) {
            policy.set_keep_free(dispatch_headroom(space.total_bytes()));
        }
        // Background reservations stop short of where the disk guard refuses puts.
        policy.set_background_free_percent(crate::mapped_file::background_free_percent(
            config.disk_space_warning_level_percent() as u64,
        ));
        if config.flush_disk_type == crate::FlushDiskType::SyncFlush {
            queue.set_append_path(crate::AppendPath::WriteCall);
            // Every group commit flushes a few pages: into zero-filled blocks that is a data
            // write, into fallocated ones also a conversion of unwritten extents.
            policy.set_zero_fill(true);
        }
        queue.set_warm(config.warm_mapped_file_enable);
        let mut commit_log = CommitLog::new(queue, config.max_message_size as usize, store_host);
        // Java 4.x enables the pool only under ASYNC_FLUSH: under SYNC_FLUSH every put waits for
        // its bytes on disk anyway, so a staging buffer only adds a copy.
        if config.transient_store_pool_enable && config.flush_disk_type == crate::FlushDiskType::AsyncFlush {
            let pool = crate::TransientStorePool::new(
                config.transient_store_pool_size as usize,
                config.mapped_file_size_commit_log as usize,
            )
            .map_err(io_err(&commit_dir))?;
            info!(buffers = config.transient_store_pool_size, "transient store pool enabled");
            commit_log = commit_log.with_transient_pool(pool);
        }
        let commit_log = Arc::new(commit_log);
        let check_ahead =
            if last_exit_ok { recovery::CheckAhead::start(&commit_log, config.check_crc_on_recover) } else { None };
        let cq_dir = config.consume_queue_dir();
        let consume_queues = ConsumeQueueStore::load_with_options(
            &cq_dir,
            config.consume_queue_file_size() as usize,
            ext_options(&config),
            config.light_queues(),
        )
        .map_err(io_err(&cq_dir))?;
        let index = IndexService::load(&config.index_dir(), &config, last_exit_ok, checkpoint.index_msg_timestamp())
            .map_err(io_err(config.index_dir()))?;
        let compaction_dir = config.store_path_root_dir.join("compaction");
        let compaction = crate::compaction::CompactionStore::load(&config).map_err(io_err(&compaction_dir))?;

        let memory_budget_bytes = total_memory_bytes() * config.access_message_in_memory_max_ratio as i64 / 100;
        let shared = Arc::new(Shared {
            config: config.clone(),
            commit_log: commit_log.clone(),
            consume_queues,
            index,
            checkpoint: checkpoint.clone(),
            reput_from: AtomicI64::new(0),
            dispatch_bounded: AtomicBool::new(false),
            reput_gate: Mutex::new(()),
            last_dispatched_timestamp: AtomicI64::new(0),
            listeners: RwLock::new(Vec::new()),
            commit_log_listeners: RwLock::new(Vec::new()),
            wake_reput: (Mutex::new(()), Condvar::new()),
            reput_sleeping: AtomicBool::new(false),
            wake_flusher: (Mutex::new(()), Condvar::new()),
            stop: AtomicBool::new(false),
            memory_budget_bytes,
            retention: RetentionService::new(&config),
            stats: StatsRecorder::new(crate::commit_log::now_ms()),
            bit_map: RwLock::new(None),
            dispatch_errors: LogLimiter::new(),
            disk_guard: Arc::new(DiskGuard::new(&config, crate::default_disk_usage_probe())),
            compaction,
            light_redispatch_from_ms: AtomicI64::new(0),
        });
        shared.disk_guard.check();

        shared.consume_queues.recover_all().map_err(io_err(&cq_dir))?;
        // A record recovery could not dispatch (no room for its unit) is dispatched again by
        // the dispatch thread, which starts there; so are all after it (dispatched out of
        // order, a later unit would take its place). The queue offsets the records already hold
        // are remembered, so new puts never take one of them again.
        let mut undispatched: Option<i64> = None;
        let mut scanned_next: HashMap<String, HashMap<i32, i64>> = HashMap::new();
        let mut scanned_light: HashMap<String, i64> = HashMap::new();
        if !last_exit_ok {
            shared.light_redispatch_from_ms.store(checkpoint.logics_msg_timestamp(), Ordering::Release);
        }
        let recovery_started = std::time::Instant::now();
        let summary = recovery::recover(
            &shared.config,
            &commit_log,
            &checkpoint,
            &shared.consume_queues,
            last_exit_ok,
            check_ahead,
            |req| {
                if goes_to_consume_queue(req) {
                    for (name, offset) in &req.light_queues {
                        let next = scanned_light.entry(name.clone()).or_insert(0);
                        *next = (*next).max(offset + 1);
                    }
                    let queues = match scanned_next.get_mut(&req.topic) {
                        Some(queues) => queues,
                        None => scanned_next.entry(req.topic.clone()).or_default(),
                    };
                    let next = queues.entry(req.queue_id).or_insert(0);
                    *next = (*next).max(req.consume_queue_offset + 1);
                }
                if undispatched.is_none() && !shared.dispatch(req) {
                    undispatched = Some(req.commit_log_offset);
                }
            },
        )
        .map_err(io_err(&commit_dir))?;
        shared.light_redispatch_from_ms.store(0, Ordering::Release);
        shared.consume_queues.truncate_dirty_all(summary.max_phy_offset).map_err(io_err(&cq_dir))?;
        if !last_exit_ok && config.light_queues() {
            // Closed light queues are not among the loaded ones: after a crash each is opened
            // to cut units past the recovered end (a cost only of crashes, with light queues).
            let started = std::time::Instant::now();
            let visited =
                shared.consume_queues.truncate_dirty_light(summary.max_phy_offset).map_err(io_err(&cq_dir))?;
            info!(light_queues = visited, elapsed_ms = started.elapsed().as_millis() as u64, "light queues checked");
        }
        let commit_log_min = commit_log.min_offset();
        for (_, _, cq) in shared.consume_queues.all() {
            cq.correct_min_offset(commit_log_min);
        }
        let mut next_offsets: HashMap<(String, i32), i64> =
            shared.consume_queues.queue_max_offsets().into_iter().collect();
        for (topic, queues) in scanned_next {
            for (queue_id, scanned) in queues {
                let next = next_offsets.entry((topic.clone(), queue_id)).or_insert(0);
                *next = (*next).max(scanned);
            }
        }
        commit_log.set_topic_queue_table(next_offsets);
        // After the table (which clears the light queues' offsets): what recovery saw in records
        // not dispatched yet must not be handed out again.
        commit_log.set_light_queues(shared.consume_queues.light_queue_count(), scanned_light);
        commit_log.queue().prefault_last();
        shared.index.prepare();
        shared.reput_from.store(undispatched.unwrap_or(summary.max_phy_offset), Ordering::Release);
        info!(
            normal = last_exit_ok,
            files_scanned = summary.files_scanned,
            bytes_checked = summary.bytes_checked,
            bytes_truncated = summary.bytes_truncated,
            redispatched = summary.redispatched,
            commit_log_check_ms = recovery_started.elapsed().as_millis() as u64,
            physical_offset = summary.max_phy_offset,
            min_physical_offset = commit_log.min_offset(),
            queues = shared.consume_queues.all().len(),
            "store recovered"
        );

        let flush = FlushService::start(&config, commit_log.clone(), checkpoint.clone()).map_err(io_err(&root))?;
        let store = MessageStore {
            shared: shared.clone(),
            flush: Mutex::new(flush),
            sync_puts: AtomicUsize::new(0),
            threads: Mutex::new(Vec::new()),
            _lock_file: lock_file,
            shut_down: AtomicBool::new(false),
        };
        store.spawn("store-reput", reput_loop).map_err(io_err(&root))?;
        store.spawn("store-cq-flush", cq_flush_loop).map_err(io_err(&root))?;
        store.spawn("store-retention", retention_loop).map_err(io_err(&root))?;
        store.spawn("store-stats", stats_loop).map_err(io_err(&root))?;
        store.spawn("store-disk-guard", disk_guard_loop).map_err(io_err(&root))?;
        if config.enable_compaction {
            store.spawn("store-compaction", compaction_loop).map_err(io_err(&root))?;
        }
        Ok(store)
    }

    fn spawn(&self, name: &str, body: fn(&Shared)) -> std::io::Result<()> {
        let shared = self.shared.clone();
        let handle = std::thread::Builder::new().name(name.into()).spawn(move || body(&shared))?;
        self.threads.lock().unwrap_or_else(|e| e.into_inner()).push(handle);
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &StoreConfig {
        &self.shared.config
    }

    /// Sets the bloom-filter bitmap calculator run on every dispatched record (effective with
    /// `enableConsumeQueueExt` only; records dispatched before it is set get no bitmap).
    pub fn set_bit_map_calculator(&self, calculator: BitMapCalculator) {
        *self.shared.bit_map.write().unwrap_or_else(|e| e.into_inner()) = Some(calculator);
    }

    /// Registers a listener for dispatched (consumable) messages.
    pub fn on_message_arrival(&self, listener: ArrivalListener) {
        self.shared.listeners.write().unwrap_or_else(|e| e.into_inner()).push(listener);
    }

    /// Registers a listener for CommitLog growth (see [`CommitLogListener`]).
    pub fn on_commit_log_advance(&self, listener: CommitLogListener) {
        self.shared.commit_log_listeners.write().unwrap_or_else(|e| e.into_inner()).push(listener);
    }

    /// How many CommitLog listeners are registered (the ones whose service stopped are
    /// dropped at the next advance).
    pub fn commit_log_listener_count(&self) -> usize {
        self.shared.commit_log_listeners.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Raw CommitLog bytes from `offset` for replication: at most `max_bytes`, never past the
    /// end of the segment holding `offset`, possibly cutting a record. Past a segment's
    /// end-of-file blank marker this is the unused space up to the segment's end, which a
    /// master ships too. `None` when nothing is readable at `offset`: not written yet, or
    /// deleted (below [`min_phy_offset`](Self::min_phy_offset)). Java:
    /// `DefaultMessageStore#getCommitLogData`.
    pub fn read_commit_log(&self, offset: i64, max_bytes: usize) -> Option<Bytes> {
        self.shared.commit_log.data_for_replica(offset, max_bytes)
    }

    /// Appends CommitLog bytes a master shipped from `offset` (a replica). `offset` must be
    /// where this replica's CommitLog ends (the previous call's
    /// [`next_offset`](crate::ReplicaAppend::next_offset)); an empty CommitLog starts at
    /// `offset`, a segment boundary. Records are checked and written whole, so the dispatch
    /// thread builds ConsumeQueues and the index as on the master, and recovery after a crash
    /// cuts at most a torn tail. Flushing follows this store's `flushDiskType` (see
    /// [`wait_flushed`](Self::wait_flushed)). Java: `DefaultMessageStore#appendToCommitLog`.
    ///
    /// # Errors
    /// [`ReplicaAppendError`](crate::ReplicaAppendError): an offset other than this replica's
    /// end, bytes that are not records at this position (diverged logs), a store that takes
    /// no writes, or a segment that cannot be created.
    pub fn append_replicated(
        &self,
        offset: i64,
        bytes: &[u8],
    ) -> Result<crate::ReplicaAppend, crate::ReplicaAppendError> {
        let appended = self.shared.commit_log.append_replicated(offset, bytes)?;
        self.shared.notify_reput();
        Ok(appended)
    }

    /// The confirm offset (controller mode): how far the SyncStateSet holds the CommitLog.
    /// Kept in the checkpoint as `confirmPhyOffset`. Java: `CommitLog#getConfirmOffset`
    /// (the stored value; the master's computed one is the replication service's).
    pub fn confirm_offset(&self) -> i64 {
        self.shared.checkpoint.confirm_phy_offset()
    }

    /// Sets the confirm offset; with [`bound_dispatch_by_confirm`](Self::bound_dispatch_by_confirm)
    /// dispatch follows it. Java: `setConfirmOffset`.
    pub fn set_confirm_offset(&self, offset: i64) {
        let previous = self.shared.checkpoint.confirm_phy_offset();
        self.shared.checkpoint.set_confirm_phy_offset(offset);
        if offset > previous {
            self.shared.notify_reput();
        }
    }

    /// Controller mode: whether dispatch (consume queues, index, woken pulls) stops at the
    /// confirm offset, so records the SyncStateSet does not hold yet stay invisible to
    /// consumers (Java: reput up to `getConfirmOffset` unless `readUnCommitted`).
    pub fn bound_dispatch_by_confirm(&self, bounded: bool) {
        self.shared.dispatch_bounded.store(bounded, Ordering::Release);
        self.shared.notify_reput();
    }

    /// Whether an entry starts at `offset` (a record, a segment's end marker or boundary, or
    /// the CommitLog's end). Java: `isOffsetAligned`.
    pub fn is_offset_aligned(&self, offset: i64) -> bool {
        self.shared.commit_log.is_offset_aligned(offset)
    }

    /// Cuts the store back to `offset` at runtime (controller mode: a replica drops what it
    /// wrote past the point it shares with its new master). The CommitLog is cut and its
    /// tail zeroed, consume-queue units of cut records are dropped, dispatch restarts at
    /// `offset` if it was past it, the confirm offset is lowered to it, and the queue-offset
    /// table is rebuilt from the consume queues. Index entries of cut records stay (as in Java):
    /// a query reads the record now at that offset, and clients match keys themselves.
    /// Nothing happens when `offset` is at or past the end. Java: `truncateFiles`.
    ///
    /// # Errors
    /// [`TruncateError`](crate::TruncateError): `offset` is inside a record or below the
    /// first one, the store takes no writes, or a file could not be cut.
    pub fn truncate_files(&self, offset: i64) -> Result<(), crate::TruncateError> {
        if offset >= self.shared.commit_log.queue().max_offset() {
            self.shared.commit_log.truncate_to(offset)?;
            return Ok(());
        }
        let _gate = self.shared.reput_gate.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.commit_log.truncate_to(offset)?;
        self.shared.consume_queues.truncate_dirty_all(offset).map_err(crate::TruncateError::Io)?;
        self.shared.consume_queues.truncate_dirty_light(offset).map_err(crate::TruncateError::Io)?;
        self.shared.reput_from.fetch_min(offset, Ordering::AcqRel);
        if self.shared.checkpoint.confirm_phy_offset() > offset {
            self.shared.checkpoint.set_confirm_phy_offset(offset);
        }
        self.shared.commit_log.set_topic_queue_table(self.shared.consume_queues.queue_max_offsets());
        if let Err(e) = self.shared.checkpoint.flush() {
            warn!(error = %e, "cannot write the checkpoint after truncating");
        }
        Ok(())
    }

    /// Rebuilds the queue-offset table from the consume queues (a replica about to take writes,
    /// once dispatch caught up: replicated records never touch the table). Java:
    /// `recoverTopicQueueTable`.
    pub fn recover_topic_queue_table(&self) {
        let _gate = self.shared.reput_gate.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.commit_log.set_topic_queue_table(self.shared.consume_queues.queue_max_offsets());
    }

    /// Under SYNC_FLUSH: waits (sharing the group commit, at most `syncFlushTimeout`) until
    /// the CommitLog is on disk up to `offset`, and says whether it is. Under ASYNC_FLUSH: says
    /// whether it already is, without waiting. A replica under SYNC_FLUSH acknowledges only
    /// what this returns true for.
    pub async fn wait_flushed(&self, offset: i64) -> bool {
        if self.flushed_phy_offset() >= offset {
            return true;
        }
        let rx = {
            let flush = self.flush.lock().unwrap_or_else(|e| e.into_inner());
            if !flush.is_sync() {
                return false;
            }
            flush.request(offset)
        };
        matches!(tokio::time::timeout(self.shared.config.sync_flush_timeout(), rx).await, Ok(Ok(true)))
    }

    /// Appends one message and, under SYNC_FLUSH unless its WAIT property is "false", waits
    /// until it is on disk.
    pub async fn put_message(&self, msg: StoredMessage) -> PutMessageResult {
        self.put_message_waiting(msg, None).await
    }

    /// Appends one message the broker itself moves (a delayed or timer message reaching its
    /// real topic): it never waits for the flush, whatever its WAIT property says, which is
    /// stored as the producer sent it (Java sets WAIT=false on its in-memory copy only).
    pub async fn put_message_without_flush_wait(&self, msg: StoredMessage) -> PutMessageResult {
        self.put_message_waiting(msg, Some(false)).await
    }

    /// `wait`: whether a SYNC_FLUSH put waits for its flush; `None` for what the message's
    /// WAIT property says (read only under SYNC_FLUSH).
    async fn put_message_waiting(&self, msg: StoredMessage, wait: Option<bool>) -> PutMessageResult {
        if let Some(refused) = self.refuse_when_full() {
            return refused;
        }
        let _counted = self.sync_put();
        let began = std::time::Instant::now();
        let result = match self.light_ask(&msg) {
            LightAsk::Nothing => self.shared.commit_log.append(&msg),
            LightAsk::OwnOffsets => {
                // Offsets are the broker's to assign: a producer's own would be dispatched.
                let mut owned = msg.clone();
                let mut props = owned.properties_map();
                props.remove(keys::INNER_MULTI_QUEUE_OFFSET);
                owned.set_properties(&props);
                self.shared.commit_log.append(&owned)
            }
            LightAsk::Dispatch(Err(reason)) => {
                Err(crate::commit_log::AppendError { status: PutMessageStatus::MessageIllegal, reason })
            }
            LightAsk::Dispatch(Ok(names)) => {
                let queues = &self.shared.consume_queues;
                let max = usize::try_from(self.shared.config.max_lmq_consume_queue_num).unwrap_or(usize::MAX);
                self.shared.commit_log.append_light(&msg, &names, max, &|name| queues.light_queue_end(name))
            }
        };
        let result =
            self.after_append(result, || wait.unwrap_or_else(|| msg.property(keys::WAIT) != Some("false"))).await;
        self.shared.stats.record_put(&result, began.elapsed());
        result
    }

    /// Appends a batch of one topic queue contiguously (SEND_BATCH_MESSAGE).
    pub async fn put_messages(&self, msgs: Vec<StoredMessage>) -> PutMessageResult {
        if let Some(refused) = self.refuse_when_full() {
            return refused;
        }
        let _counted = self.sync_put();
        let began = std::time::Instant::now();
        let result = if msgs.iter().any(|m| matches!(self.light_ask(m), LightAsk::Dispatch(_))) {
            // Java stores such a batch without dispatching it to the light queues.
            Err(crate::commit_log::AppendError {
                status: PutMessageStatus::MessageIllegal,
                reason:
                    "a batch cannot be dispatched to light queues (INNER_MULTI_DISPATCH): send its messages one by one"
                        .into(),
            })
        } else {
            self.shared.commit_log.append_batch(&msgs)
        };
        let wait = || msgs.first().is_none_or(|m| m.property(keys::WAIT) != Some("false"));
        let result = self.after_append(result, wait).await;
        self.shared.stats.record_put(&result, began.elapsed());
        result
    }

    /// What `msg` asks of the light queues, its properties read once: most messages ask
    /// nothing, and each lookup is a scan of the properties string.
    fn light_ask<'m>(&self, msg: &'m StoredMessage) -> LightAsk<'m> {
        if !self.shared.config.light_queues() {
            return LightAsk::Nothing;
        }
        if crate::lmq::is_lmq(&msg.topic) {
            // Its offsets come from the light queue table; a record stored under the light
            // queue's name would take one from the topic table as well.
            return LightAsk::Dispatch(Err(format!(
                "{} is a light queue: send to a topic with INNER_MULTI_DISPATCH={} instead",
                msg.topic, msg.topic
            )));
        }
        let [dispatch, own_offsets] =
            find_properties(&msg.properties, [keys::INNER_MULTI_DISPATCH, keys::INNER_MULTI_QUEUE_OFFSET]);
        match dispatch.filter(|v| !v.trim().is_empty()) {
            Some(names) if crate::lmq::topic_allows_lmq(&msg.topic) => {
                LightAsk::Dispatch(crate::lmq::parse_targets(names))
            }
            _ if own_offsets.is_some() => LightAsk::OwnOffsets,
            _ => LightAsk::Nothing,
        }
    }

    /// Tells the store which topics are compaction topics (`cleanup.policy=COMPACTION`), and
    /// copies into their compacted stores what their consume queues hold beyond them (records
    /// dispatched before this call, or lost from the compacted store's tail in a crash).
    /// Dispatch waits meanwhile, so nothing is copied out of order.
    pub fn set_compaction_topics(&self, topics: crate::compaction::CompactionTopics) {
        let _gate = self.shared.reput_gate.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.compaction.set_topics(topics);
        for topic in self.shared.consume_queues.topics() {
            if !self.shared.compaction.serves(&topic) {
                continue;
            }
            for (queue_id, cq) in self.shared.consume_queues.queues_of(&topic) {
                self.catch_up_compaction(&topic, queue_id, &cq);
            }
        }
    }

    fn catch_up_compaction(&self, topic: &str, queue_id: i32, cq: &crate::ConsumeQueue) {
        let held = self.shared.compaction.held_end(topic, queue_id);
        let mut offset = held.max(cq.min_offset_in_queue());
        let end = cq.max_offset_in_queue();
        let mut copied = 0u64;
        while offset < end {
            let units = cq.iter_from(offset, 1024);
            let Some(last) = units.last().map(|u| u.queue_offset) else { break };
            for unit in units.iter().filter(|u| !u.is_blank()) {
                let Some(record) = self.shared.commit_log.get_message(unit.commit_log_offset, unit.size as usize)
                else {
                    continue;
                };
                let timestamp = ferromq_protocol::message::RecordView::parse(&record)
                    .ok()
                    .and_then(|r| match r {
                        ferromq_protocol::message::RecordOrBlank::Record(v) => Some(v.store_timestamp_ms),
                        _ => None,
                    })
                    .unwrap_or(0);
                if let Err(e) =
                    self.shared.compaction.put(topic, queue_id, &record, unit.queue_offset, unit.tags_code, timestamp)
                {
                    error!(topic, queue_id, queue_offset = unit.queue_offset, error = %e, "compaction catch-up stopped");
                    return;
                }
                copied += 1;
            }
            offset = last + 1;
        }
        if copied > 0 {
            info!(topic, queue_id, copied, "compaction store caught up with the consume queue");
        }
    }

    /// Runs a compaction of every compaction topic queue now (the periodic run every
    /// `compactionScheduleInternal` does the same).
    pub fn compact_now(&self) -> crate::compaction::CompactionReport {
        self.shared.compaction.compact_all()
    }

    /// Light queues with a consume queue, and how many of those are open now.
    pub fn light_queue_counts(&self) -> (usize, usize) {
        (self.shared.consume_queues.light_queue_count(), self.shared.consume_queues.open_light_queue_count())
    }

    /// SERVICE_NOT_AVAILABLE while the disk guard says the disk is full (counted as a failed
    /// put).
    fn refuse_when_full(&self) -> Option<PutMessageResult> {
        if !self.shared.disk_guard.is_full() {
            return None;
        }
        let refused = PutMessageResult::failed(PutMessageStatus::ServiceNotAvailable, self.shared.disk_guard.remark());
        self.shared.stats.record_put(&refused, Duration::ZERO);
        Some(refused)
    }

    /// The largest message body accepted (`maxMessageSize`, as changed at runtime).
    pub fn max_message_size(&self) -> u64 {
        self.shared.commit_log.max_message_size() as u64
    }

    /// Changes `maxMessageSize` at once (UPDATE_BROKER_CONFIG, as Java applies it on the next
    /// put). The caller checks the value against what a pull can carry back.
    pub fn set_max_message_size(&self, bytes: u64) {
        self.shared.commit_log.set_max_message_size(usize::try_from(bytes).unwrap_or(usize::MAX));
    }

    /// How long the put now holding the CommitLog lock has held it, in ms (Java's
    /// `pageCacheLockTimeMills`).
    pub fn page_cache_lock_time_ms(&self) -> i64 {
        self.shared.commit_log.page_cache_lock_time_ms()
    }

    /// The disk-full guard (its flag and the measured ratios).
    pub fn disk_guard(&self) -> &DiskGuard {
        &self.shared.disk_guard
    }

    /// Counts a put under SYNC_FLUSH until the returned guard drops (from before its append,
    /// so a put appending while another waits keeps that one from flushing alone).
    fn sync_put(&self) -> Option<SyncPut<'_>> {
        if self.shared.config.flush_disk_type != crate::FlushDiskType::SyncFlush {
            return None;
        }
        self.sync_puts.fetch_add(1, Ordering::AcqRel);
        Some(SyncPut(&self.sync_puts))
    }

    fn flush_failed() -> PutMessageResult {
        PutMessageResult {
            status: PutMessageStatus::FlushFailed,
            append: None,
            remark: Some("flush failed; the store is poisoned and refuses writes".into()),
        }
    }

    async fn after_append(
        &self,
        result: Result<crate::AppendResult, crate::commit_log::AppendError>,
        wait: impl FnOnce() -> bool,
    ) -> PutMessageResult {
        let append = match result {
            Ok(a) => a,
            Err(e) => return PutMessageResult::failed(e.status, e.reason),
        };
        self.shared.notify_reput();
        let end = append.wrote_offset + append.wrote_bytes as i64;
        let own_flush = {
            let flush = self.flush.lock().unwrap_or_else(|e| e.into_inner());
            if !flush.is_sync() {
                return PutMessageResult::ok(append);
            }
            if wait() {
                // Alone: no other put is appending or waiting (its own flush would block the
                // others' answers, and a group commit would share it).
                (self.sync_puts.load(Ordering::Acquire) <= 1).then(|| flush.inline()).flatten()
            } else {
                flush.wake();
                drop(flush);
                // Acknowledged before its flush, so it must at least reach the page cache now.
                return match self.write_through(&append) {
                    Ok(()) => PutMessageResult::ok(append),
                    Err(failed) => failed,
                };
            }
        };
        // Alone, the put flushes for itself (the store's lock released: other puts queue
        // meanwhile); else, or when a flush is running already, it waits for the group commit.
        match own_flush.and_then(|f| f.run()) {
            Some(Some(flushed)) if flushed >= end => return PutMessageResult::ok(append),
            Some(None) => return Self::flush_failed(),
            _ => {}
        }
        let rx = self.flush.lock().unwrap_or_else(|e| e.into_inner()).request(end);
        match tokio::time::timeout(self.shared.config.sync_flush_timeout(), rx).await {
            Ok(Ok(true)) => PutMessageResult::ok(append),
            Ok(Ok(false)) | Ok(Err(_)) => Self::flush_failed(),
            // The sender hears its message is stored but not yet flushed: it must at least be
            // written, or it hears that it is not stored at all.
            Err(_) => match self.write_through(&append) {
                Ok(()) => PutMessageResult {
                    status: PutMessageStatus::FlushDiskTimeout,
                    append: Some(append),
                    remark: Some("flush did not complete within syncFlushTimeout".into()),
                },
                Err(failed) => failed,
            },
        }
    }

    /// Writes the staged bytes up to the end of `append` to the file, for a put acknowledged
    /// before its flush: staged bytes would be lost with the process, written ones survive it.
    /// A failed write has poisoned the store; the put is then answered as not stored.
    fn write_through(&self, append: &crate::AppendResult) -> Result<(), PutMessageResult> {
        self.shared.commit_log.commit();
        if self.shared.commit_log.max_offset() < append.wrote_offset + append.wrote_bytes as i64 {
            return Err(PutMessageResult {
                status: PutMessageStatus::UnknownError,
                append: None,
                remark: Some("commit log write failed; the store is poisoned and refuses writes".into()),
            });
        }
        Ok(())
    }

    /// Reads up to `max_msg_nums` messages (and about `max_total_bytes`) of a queue from
    /// `offset`, keeping those `filter` matches (by tagsCode, then by the stored record). Java:
    /// `DefaultMessageStore#getMessage`.
    pub fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: usize,
        max_total_bytes: usize,
        filter: Option<&dyn crate::read::MessageFilter>,
    ) -> GetMessageResult {
        let began = std::time::Instant::now();
        if self.shared.compaction.serves(topic) {
            let max = self.max_offset_in_queue(topic, queue_id);
            let bytes = max_total_bytes.min(crate::read::MAX_PULL_MSG_BYTES);
            if let Some(result) = self.shared.compaction.get_message(topic, queue_id, offset, max_msg_nums, bytes, max)
            {
                self.shared.stats.record_get(&result, began.elapsed());
                return result;
            }
        }
        let view = self.shared_view();
        let result = crate::read::get_message(&view, topic, queue_id, offset, max_msg_nums, max_total_bytes, filter);
        self.shared.stats.record_get(&result, began.elapsed());
        result
    }

    /// Destroys the consume queues of `topic` and forgets its queue offsets, so a topic of the
    /// same name created later starts at offset 0; its records stay in the CommitLog until
    /// retention removes them. Records of the topic still waiting for dispatch are waited for
    /// (up to 3 s). Returns whether the topic had consume queues. Java:
    /// `DefaultMessageStore#deleteTopics`.
    ///
    /// # Errors
    /// A topic name that is not a safe directory name, files that could not be deleted, or a
    /// topic still being written to after the wait.
    pub fn delete_topic(&self, topic: &str) -> Result<bool, StoreError> {
        let dir = self.shared.config.consume_queue_dir().join(topic);
        let deleted = self.when_topic_settled(topic, || {
            let had_queues = !self.shared.consume_queues.queues_of(topic).is_empty();
            self.shared.consume_queues.delete_topic(topic)?;
            if crate::lmq::is_lmq(topic) {
                self.shared.commit_log.forget_light_queue(topic);
            }
            // A compaction topic's compacted copy goes with it.
            let had_compacted = self.shared.compaction.destroy_topic(topic)?;
            Ok(had_queues || had_compacted)
        });
        let had_queues = deleted.map_err(io_err(dir))?;
        if had_queues {
            info!(topic, "consume queues of a deleted topic destroyed");
        }
        Ok(had_queues)
    }

    /// Deletes the consume queues of every topic `retain` does not keep (DELETE for topics
    /// whose config is gone). Returns the topics deleted. Java: `cleanUnusedTopic`.
    ///
    /// # Errors
    /// As [`MessageStore::delete_topic`]; the topics before the failing one are deleted.
    pub fn clean_unused_topics(&self, retain: impl Fn(&str) -> bool) -> Result<Vec<String>, StoreError> {
        let mut deleted = Vec::new();
        for topic in self.shared.consume_queues.topics() {
            if !retain(&topic) && self.delete_topic(&topic)? {
                deleted.push(topic);
            }
        }
        Ok(deleted)
    }

    /// Destroys the consume queues whose every message is below the CommitLog's minimum
    /// offset (retention removed them all), except those of the topics `keep` protects; their
    /// queue offsets start again at 0. A queue with a record waiting for dispatch is left for
    /// a later run. Returns how many queues went. Java: `DefaultMessageStore#cleanExpiredConsumerQueue`.
    ///
    /// # Errors
    /// Files that could not be deleted.
    pub fn clean_expired_consume_queues(&self, keep: impl Fn(&str) -> bool) -> Result<usize, StoreError> {
        let min = self.shared.commit_log.min_offset();
        let mut destroyed = 0;
        // A compaction topic's history lives on in its compacted store, whose offsets its
        // consume queue must keep counting.
        let keep = |topic: &str| keep(topic) || self.shared.compaction.serves(topic);
        for (topic, queue_id, cq) in self.shared.consume_queues.expired(min, keep) {
            let dispatched = cq.max_offset_in_queue();
            let done = self.shared.commit_log.forget_settled_queues(
                &topic,
                Some(queue_id),
                |_| dispatched,
                || self.shared.consume_queues.destroy_queue(&topic, queue_id),
            );
            match done {
                Some(result) => {
                    if result.map_err(io_err(self.shared.config.consume_queue_dir().join(&topic)))? {
                        destroyed += 1;
                        info!(topic, queue_id, commit_log_min = min, "expired consume queue destroyed");
                    }
                }
                None => debug!(topic, queue_id, "expired consume queue has a record in flight; left for later"),
            }
        }
        Ok(destroyed)
    }

    /// Runs `destroy` once no record of `topic` waits for dispatch, with the topic's queue
    /// offsets forgotten and puts held off meanwhile.
    fn when_topic_settled<R>(&self, topic: &str, destroy: impl FnOnce() -> std::io::Result<R>) -> std::io::Result<R> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        let mut destroy = Some(destroy);
        loop {
            let queues: HashMap<i32, i64> = self
                .shared
                .consume_queues
                .queues_of(topic)
                .into_iter()
                .map(|(id, q)| (id, q.max_offset_in_queue()))
                .collect();
            let settled = self.shared.commit_log.forget_settled_queues(
                topic,
                None,
                |id| queues.get(&id).copied().unwrap_or(0),
                || destroy.take().map(|f| f()),
            );
            if let Some(result) = settled {
                return result.expect("runs once");
            }
            if Instant::now() >= deadline {
                return Err(std::io::Error::other(format!(
                    "topic {topic} still has records waiting for dispatch; try again"
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Makes the next retention runs delete expired CommitLog segments whatever the hour
    /// (TRIGGER_DELETE_FILES). Java: `DefaultMessageStore#executeDeleteFilesManually`.
    pub fn trigger_delete_files(&self) {
        self.shared.retention.trigger_delete();
    }

    /// Runs retention once as if the time were `now_utc_ms` (ms since the epoch); the store's
    /// thread does this every [`RETENTION_INTERVAL`](crate::RETENTION_INTERVAL).
    pub fn run_retention_once(&self, now_utc_ms: i64) -> RetentionReport {
        self.shared.run_retention(now_utc_ms)
    }

    /// Replaces how retention measures disk usage (default: `statvfs`).
    pub fn set_disk_usage_probe(&self, probe: DiskUsageProbe) {
        self.shared.retention.set_disk_usage_probe(probe.clone());
        self.shared.disk_guard.set_probe(probe);
        self.shared.disk_guard.check();
    }

    /// Put and get counts, TPS and put latency. Java: `StoreStatsService#getRuntimeInfo`.
    pub fn stats(&self) -> StoreStats {
        self.shared.stats.snapshot(crate::commit_log::now_ms())
    }

    pub(crate) fn shared_view(&self) -> crate::read::StoreView<'_> {
        crate::read::StoreView {
            config: &self.shared.config,
            commit_log: &self.shared.commit_log,
            consume_queues: &self.shared.consume_queues,
            memory_budget_bytes: self.shared.memory_budget_bytes,
        }
    }

    /// Offset after the last entry of a queue (0 for an unknown queue).
    pub fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.shared.consume_queues.find(topic, queue_id).map_or(0, |cq| cq.max_offset_in_queue())
    }

    /// First offset of a queue.
    /// A compaction topic's queue answers from its compacted store, which the CommitLog's
    /// retention does not shorten.
    pub fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        if self.shared.compaction.serves(topic) {
            if let Some(min) = self.shared.compaction.min_offset(topic, queue_id) {
                return min;
            }
        }
        self.shared.consume_queues.find(topic, queue_id).map_or(0, |cq| cq.min_offset_in_queue())
    }

    /// Up to `max` ConsumeQueue units of a queue from `queue_offset` (fewer at a segment end;
    /// empty below the min offset, past the written units, or for an unknown queue). For
    /// services that read a queue's index themselves, such as the broker's delay-level
    /// scheduler, whose units carry delivery times as tagsCode.
    pub fn consume_queue_units(&self, topic: &str, queue_id: i32, queue_offset: i64, max: usize) -> Vec<CqUnit> {
        self.shared.consume_queues.find(topic, queue_id).map_or_else(Vec::new, |cq| cq.iter_from(queue_offset, max))
    }

    /// `(min, max)` queue offsets of a consume queue, `None` when the store has no such queue.
    pub fn consume_queue_bounds(&self, topic: &str, queue_id: i32) -> Option<(i64, i64)> {
        self.shared.consume_queues.find(topic, queue_id).map(|cq| (cq.min_offset_in_queue(), cq.max_offset_in_queue()))
    }

    /// Whether the message at `queue_offset` of a queue is stored and still warm: within the
    /// last `accessMessageInMemoryMaxRatio` percent of memory's worth of CommitLog, the
    /// estimate pulls use too (Java: `checkInMemByConsumeOffset`, which asks the page cache).
    /// False for an unknown or empty queue.
    pub fn check_in_mem_by_consume_offset(&self, topic: &str, queue_id: i32, queue_offset: i64) -> bool {
        let Some(unit) = self.shared.consume_queues.find(topic, queue_id).and_then(|cq| cq.get(queue_offset)) else {
            return false;
        };
        self.shared.commit_log.max_offset() - unit.commit_log_offset <= self.shared.memory_budget_bytes
    }

    /// Store time of the oldest message still in the CommitLog. Java: `getEarliestMessageTime`.
    /// (The first record of a segment is never a blank.)
    pub fn earliest_message_time_in_log(&self) -> Option<i64> {
        let log = &self.shared.commit_log;
        let min = log.min_offset();
        (min < log.max_offset()).then(|| log.store_timestamp_at(min, STORE_TIMESTAMP_END)).flatten()
    }

    /// Store time of a queue's first message.
    pub fn earliest_message_time(&self, topic: &str, queue_id: i32) -> Option<i64> {
        let cq = self.shared.consume_queues.find(topic, queue_id)?;
        let unit = cq.get(cq.min_offset_in_queue())?;
        self.shared.commit_log.store_timestamp_at(unit.commit_log_offset, unit.size)
    }

    /// Store time of the message at a queue offset.
    pub fn message_store_time(&self, topic: &str, queue_id: i32, queue_offset: i64) -> Option<i64> {
        let unit = self.shared.consume_queues.find(topic, queue_id)?.get(queue_offset)?;
        self.shared.commit_log.store_timestamp_at(unit.commit_log_offset, unit.size)
    }

    /// Queue offset for a time: `lower` = first message stored at or after it, otherwise the
    /// last message stored at or before it.
    pub fn offset_in_queue_by_time(&self, topic: &str, queue_id: i32, timestamp_ms: i64, lower: bool) -> i64 {
        let Some(cq) = self.shared.consume_queues.find(topic, queue_id) else { return 0 };
        let commit_log = &self.shared.commit_log;
        cq.offset_of_time(timestamp_ms, lower, |phy, size| commit_log.store_timestamp_at(phy, size))
    }

    /// Messages whose key (or UNIQ_KEY) hashes like `key`, stored within `[begin, end]`.
    pub fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> QueryMessageResult {
        let found = self.shared.index.query_offsets(topic, key, max_num, begin_ms, end_ms);
        let messages = found.phy_offsets.iter().filter_map(|&phy| self.shared.commit_log.get_message_at(phy)).collect();
        QueryMessageResult {
            messages,
            index_last_update_timestamp: found.index_last_update_timestamp,
            index_last_update_phyoffset: found.index_last_update_phyoffset,
        }
    }

    /// The record at a CommitLog offset (VIEW_MESSAGE_BY_ID).
    pub fn look_message_by_offset(&self, commit_log_offset: i64) -> Option<Bytes> {
        self.shared.commit_log.get_message_at(commit_log_offset)
    }

    /// First CommitLog offset still stored.
    pub fn min_phy_offset(&self) -> i64 {
        self.shared.commit_log.min_offset()
    }

    /// CommitLog offset after the last record.
    pub fn max_phy_offset(&self) -> i64 {
        self.shared.commit_log.max_offset()
    }

    /// CommitLog offset below which every appended byte is on disk. The timer wheel holds
    /// its checkpoint back until the messages it re-put are this durable.
    pub fn flushed_phy_offset(&self) -> i64 {
        let segments = self.shared.commit_log.queue().segments();
        // A full segment's end-of-file blank leaves its write position short of the file
        // size, so compare with the write position, not the size.
        for f in &segments {
            if f.flushed_position() < f.wrote_position() {
                return f.file_from_offset() + f.flushed_position() as i64;
            }
        }
        segments.last().map_or(0, |f| f.file_from_offset() + f.wrote_position() as i64)
    }

    /// CommitLog offset up to which records are dispatched to the consume queues and index.
    pub fn dispatched_phy_offset(&self) -> i64 {
        self.shared.reput_from.load(Ordering::Acquire)
    }

    /// Bytes appended and not yet dispatched.
    pub fn dispatch_behind_bytes(&self) -> i64 {
        self.max_phy_offset() - self.dispatched_phy_offset()
    }

    /// Flushes performed by the CommitLog flush service.
    pub fn flush_count(&self) -> u64 {
        self.flush.lock().unwrap_or_else(|e| e.into_inner()).flush_count()
    }

    /// Of [`flush_count`](Self::flush_count), the flushes SYNC_FLUSH puts did for themselves,
    /// finding no other put appending or waiting (the rest are group commits).
    pub fn own_flush_count(&self) -> u64 {
        self.flush.lock().unwrap_or_else(|e| e.into_inner()).own_flush_count()
    }

    /// Whether a failed flush poisoned the store.
    pub fn is_poisoned(&self) -> bool {
        self.shared.commit_log.is_poisoned()
    }

    /// Test hook: make CommitLog flushes fail as a failing `msync` would.
    pub fn inject_flush_failure(&self, fail: bool) {
        self.shared.commit_log.inject_flush_failure(fail);
    }

    /// Test hook: the SYNC_FLUSH group commit stops (or resumes) answering, as a disk that
    /// does not complete a flush would.
    pub fn inject_flush_stall(&self, stalled: bool) {
        self.flush.lock().unwrap_or_else(|e| e.into_inner()).stall(stalled);
    }

    /// Test hook: make writes of staged CommitLog bytes (SYNC_FLUSH) fail as a failing
    /// `pwrite` would; appends still succeed (into the stage).
    pub fn inject_commit_failure(&self, fail: bool) {
        self.shared.commit_log.inject_commit_failure(fail);
    }

    /// Waits (up to `timeout`) until every record appended before the call is dispatched.
    /// With the transient store pool that includes records not yet committed to the file
    /// (dispatch sees them once the commit service has run).
    pub fn wait_dispatched(&self, timeout: Duration) -> bool {
        let mut end = self.shared.commit_log.queue().max_offset();
        if self.shared.dispatch_bounded.load(Ordering::Acquire) {
            end = end.min(self.shared.checkpoint.confirm_phy_offset());
        }
        self.wait_dispatched_to(end, timeout)
    }

    fn wait_dispatched_to(&self, offset: i64, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        while self.shared.reput_from.load(Ordering::Acquire) < offset {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Stops the threads after dispatching and flushing everything, writes the checkpoint and
    /// removes the abort marker: the next open takes the normal recovery path.
    pub fn shutdown(&self) {
        if self.shut_down.swap(true, Ordering::AcqRel) {
            return;
        }
        // Appends end here; the final commit and flush below cover every accepted one.
        self.shared.commit_log.close();
        self.shared.commit_log.commit();
        // A poisoned log will never write what is still staged, so dispatch can only reach
        // what was written.
        let caught_up = if self.shared.commit_log.is_poisoned() {
            self.wait_dispatched_to(self.shared.commit_log.queue().max_committed_offset(), Duration::from_secs(5))
        } else {
            self.wait_dispatched(Duration::from_secs(5))
        };
        if !caught_up {
            warn!(behind = self.dispatch_behind_bytes(), "shutting down before dispatch caught up");
        }
        self.shared.stop.store(true, Ordering::Release);
        self.shared.notify_reput();
        {
            let _guard = self.shared.wake_flusher.0.lock();
            self.shared.wake_flusher.1.notify_all();
        }
        for t in self.threads.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = t.join();
        }
        self.flush.lock().unwrap_or_else(|e| e.into_inner()).shutdown();
        if let Err(e) = self.shared.compaction.flush() {
            warn!(error = %e, "compaction store flush at shutdown failed; the next start copies its tail again");
        }
        let clean = flush_logics(&self.shared).is_ok() && !self.shared.commit_log.is_poisoned();
        if clean {
            if let Err(e) = std::fs::remove_file(self.shared.config.abort_path()) {
                warn!(error = %e, "cannot remove the abort file");
            }
        }
        info!(physical_offset = self.max_phy_offset(), clean, "store shut down");
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Flushes consume queues, the index and the checkpoint; records how far they reach.
fn flush_logics(shared: &Shared) -> std::io::Result<()> {
    let logics_ts = shared.last_dispatched_timestamp.load(Ordering::Acquire);
    shared.consume_queues.flush_all()?;
    shared.checkpoint.set_logics_msg_timestamp(logics_ts);
    if let Some(ts) = shared.index.flush()? {
        shared.checkpoint.set_index_msg_timestamp(ts);
    }
    shared.checkpoint.flush()
}

fn cq_flush_loop(shared: &Shared) {
    let interval = Duration::from_millis(shared.config.flush_interval_consume_queue_ms.max(1));
    while !shared.stop.load(Ordering::Acquire) {
        {
            let guard = shared.wake_flusher.0.lock().unwrap_or_else(|e| e.into_inner());
            if !shared.stop.load(Ordering::Acquire) {
                let _ = shared.wake_flusher.1.wait_timeout(guard, interval);
            }
        }
        if let Err(e) = flush_logics(shared) {
            error!(error = %e, "consume queue / checkpoint flush failed");
        }
    }
}

/// Compacts the compaction topics every `compactionScheduleInternal`. Java:
/// `CompactionLog#doCompaction` scheduled per queue.
fn compaction_loop(shared: &Shared) {
    let interval = Duration::from_millis(shared.config.compaction_schedule_internal_ms.max(1_000));
    let mut last = std::time::Instant::now();
    while !shared.stop.load(Ordering::Acquire) {
        {
            let guard = shared.wake_flusher.0.lock().unwrap_or_else(|e| e.into_inner());
            if !shared.stop.load(Ordering::Acquire) {
                let _ = shared.wake_flusher.1.wait_timeout(guard, Duration::from_secs(1));
            }
        }
        if last.elapsed() >= interval && !shared.stop.load(Ordering::Acquire) {
            shared.compaction.compact_all();
            last = std::time::Instant::now();
        }
    }
}

/// Deletes expired files periodically. Java: `DefaultMessageStore#cleanFilesPeriodically`.
fn retention_loop(shared: &Shared) {
    let (delay, interval) = (crate::RETENTION_INITIAL_DELAY, crate::RETENTION_INTERVAL);
    crate::retention::run_periodically(&shared.stop, &shared.wake_flusher, delay, interval, || {
        shared.run_retention(crate::commit_log::now_ms());
    });
}

/// Measures the store's disks (see [`DiskGuard`]).
fn disk_guard_loop(shared: &Shared) {
    crate::disk_guard::run(&shared.disk_guard, &shared.stop);
}

/// Free bytes the CommitLog's reservations leave on its filesystem, so that the consume queues
/// and the index of every accepted message can still be written: a sixteenth of the disk,
/// between 1 and 16 MiB.
fn dispatch_headroom(total_bytes: u64) -> u64 {
    (total_bytes / 16).clamp(1 << 20, 16 << 20)
}

/// Samples the statistics every second. Java: `StoreStatsService#run`.
fn stats_loop(shared: &Shared) {
    crate::stats::run_sampler(&shared.stats, &shared.stop, &shared.wake_flusher);
}

/// While dispatching a batch, how many records pass between looks at the CommitLog's end for
/// [`CommitLogListener`]s.
const ANNOUNCE_EVERY_RECORDS: u32 = 32;

/// Under a high put rate the dispatch thread polls at this interval instead of being woken by
/// each put: a wake-up is a system call and an inter-processor interrupt on the putting core,
/// paid per message when dispatch keeps up (Java's ReputMessageService polls every
/// millisecond and is never woken). Under a low rate every put wakes it, so a message is
/// dispatched (and pullable) at once.
const BUSY_POLL_INTERVAL: Duration = Duration::from_millis(1);

/// How long dispatch waits before retrying a record whose consume queue could not be written.
const DISPATCH_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Empty polls in a row after which the dispatch thread sleeps until a put wakes it.
const BUSY_POLLS: u32 = 10;

/// The rate is measured over windows of this length...
const RATE_WINDOW: Duration = Duration::from_millis(10);

/// ...and a window with at least this many dispatched records switches to polling (6,400
/// records per second).
const BUSY_RECORDS_PER_WINDOW: u32 = 64;

/// Tells the CommitLog listeners about a new end, once per change.
fn announce_if_grown(shared: &Shared, announced_end: &mut i64, end: i64) {
    if end != *announced_end {
        *announced_end = end;
        shared.announce_commit_log_end(end);
    }
}

/// Follows the CommitLog and dispatches each record. Java: `ReputMessageService`.
fn reput_loop(shared: &Shared) {
    let mut announced_end = -1;
    let mut empty_polls = BUSY_POLLS;
    let mut window_start = std::time::Instant::now();
    let mut window_records = 0u32;
    while !shared.stop.load(Ordering::Acquire) {
        // With the transient pool, appends become readable when committed; this thread is
        // woken by every put, so committing here publishes them at once (Java's commit service
        // with `wakeCommitWhenPutMessage`).
        shared.commit_log.commit();
        let gate = shared.reput_gate.lock().unwrap_or_else(|e| e.into_inner());
        let from = shared.reput_from.load(Ordering::Acquire);
        announce_if_grown(shared, &mut announced_end, shared.commit_log.max_offset());
        let max = shared.dispatch_end();
        if from >= max {
            drop(gate);
            if empty_polls < BUSY_POLLS {
                empty_polls += 1;
                std::thread::sleep(BUSY_POLL_INTERVAL);
                continue;
            }
            let guard = shared.wake_reput.0.lock().unwrap_or_else(|e| e.into_inner());
            // Announce the sleep before the last look, so a put that lands in between sees the
            // flag and wakes us (it takes the same lock to notify).
            shared.reput_sleeping.store(true, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
            if shared.dispatch_end() <= from && !shared.stop.load(Ordering::Acquire) {
                let _ = shared.wake_reput.1.wait_timeout(guard, Duration::from_millis(10));
            } else {
                drop(guard);
            }
            shared.reput_sleeping.store(false, Ordering::Release);
            continue;
        }
        if from < shared.commit_log.min_offset() {
            warn!(
                physical_offset = from,
                min = shared.commit_log.min_offset(),
                "dispatch behind deleted data; skipping ahead"
            );
            shared.reput_from.store(shared.commit_log.min_offset(), Ordering::Release);
            continue;
        }
        let Some(mut data) = shared.commit_log.data_from(from) else {
            drop(gate);
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        // Bounded dispatch ends at the confirm offset: a record end, normally; a record the
        // bound cuts waits for the bound to pass it.
        data.truncate(usize::try_from(max - from).unwrap_or(usize::MAX));
        let mut pos = 0usize;
        let mut next = from;
        let mut dispatched = 0u32;
        // Once per batch, not per record: it takes the calculator's lock.
        let keep_properties = shared.keeps_properties();
        while pos < data.len() {
            if record_beyond(&data[pos..]) {
                break;
            }
            match scan(&data[pos..], from + pos as i64, false, &shared.config.message_delay_level, keep_properties) {
                Scanned::Record(req) => {
                    if !shared.dispatch(&req) {
                        // Retried from this record after a pause (see `Shared::dispatch`).
                        std::thread::sleep(DISPATCH_RETRY_PAUSE);
                        break;
                    }
                    pos += req.msg_size as usize;
                    next = from + pos as i64;
                    dispatched += 1;
                    // A long batch must not delay replication of what is appended meanwhile.
                    if dispatched.is_multiple_of(ANNOUNCE_EVERY_RECORDS) {
                        announce_if_grown(shared, &mut announced_end, shared.commit_log.max_offset());
                    }
                }
                Scanned::Blank => {
                    next = shared.commit_log.roll_next_file(from + pos as i64);
                    break;
                }
                Scanned::End(e) => {
                    // Written bytes are whole records: this is corruption, not a torn write.
                    error!(physical_offset = from + pos as i64, error = ?e, "undispatchable record; dispatch paused");
                    std::thread::sleep(Duration::from_millis(100));
                    break;
                }
            }
        }
        shared.reput_from.store(next, Ordering::Release);
        drop(gate);
        window_records = window_records.saturating_add(dispatched);
        let now = std::time::Instant::now();
        if now.duration_since(window_start) >= RATE_WINDOW {
            // A busy window keeps (or starts) polling; a quiet one goes back to being woken.
            empty_polls = if window_records >= BUSY_RECORDS_PER_WINDOW { 0 } else { BUSY_POLLS };
            window_start = now;
            window_records = 0;
        } else if window_records >= BUSY_RECORDS_PER_WINDOW {
            empty_polls = 0;
        }
    }
}

/// Whether `data` holds less than the entry starting it (only when a dispatch bound cut it).
fn record_beyond(data: &[u8]) -> bool {
    match ferromq_protocol::message::peek_record_size(data) {
        Ok(ferromq_protocol::message::RecordOrBlank::Record(size)) => size > data.len(),
        Ok(ferromq_protocol::message::RecordOrBlank::Blank { .. }) => false,
        // Fewer than 8 bytes: a cut record head; anything else is the scan's to report.
        Err(_) => data.len() < ferromq_protocol::message::BLANK_MARKER_LEN,
    }
}

/// The extension files' settings when `enableConsumeQueueExt` is on.
fn ext_options(config: &StoreConfig) -> Option<ExtOptions> {
    config.enable_consume_queue_ext.then(|| ExtOptions {
        root: config.consume_queue_ext_dir(),
        file_size: usize::try_from(config.mapped_file_size_consume_queue_ext).unwrap_or(usize::MAX),
    })
}
