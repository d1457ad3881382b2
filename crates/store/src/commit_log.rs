//! The CommitLog: every message of every topic, appended to one queue of segments.
//!
//! An append encodes the record outside the lock (into a per-thread buffer), then, inside one
//! short critical section, assigns the queue offset, physical offset and store time by patching
//! fixed positions, writes the end-of-file blank and rolls when the record does not fit, and
//! copies the bytes into the mapping. A batch is encoded as consecutive records and written
//! contiguously into one segment. Java: `CommitLog`, `DefaultAppendMessageCallback`.

mod replica;
mod truncate;

pub use truncate::TruncateError;

pub use replica::{ReplicaAppend, ReplicaAppendError};

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use ferromq_protocol::message::{
    blank_marker, patch_physical_offset, patch_queue_offset, patch_store_timestamp, push_offset_msg_id, sysflag,
    MessageError, StoredMessage, BLANK_MARKER_LEN,
};
use tracing::{error, warn};

use crate::log_limiter::LogLimiter;
use crate::mapped_file_queue::MappedFileQueue;
use crate::put_result::{AppendResult, PutMessageStatus};
use crate::transient_pool::TransientStorePool;

/// Now, in ms since the epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

thread_local! {
    /// Encoding buffer reused by every append on this thread, so the hot path does not
    /// allocate per message.
    static ENCODE_BUF: RefCell<BytesMut> = RefCell::new(BytesMut::with_capacity(64 * 1024));
}

/// Why an append failed.
#[derive(Debug)]
pub struct AppendError {
    /// Status to report.
    pub status: PutMessageStatus,
    /// What happened.
    pub reason: String,
}

impl AppendError {
    fn new(status: PutMessageStatus, reason: impl Into<String>) -> Self {
        AppendError { status, reason: reason.into() }
    }
}

fn illegal(e: MessageError) -> AppendError {
    match e {
        MessageError::TooLong { field: "properties", .. } => {
            AppendError::new(PutMessageStatus::PropertiesSizeExceeded, e.to_string())
        }
        _ => AppendError::new(PutMessageStatus::MessageIllegal, e.to_string()),
    }
}

/// State guarded by the append lock.
#[derive(Debug, Default)]
struct WriterState {
    /// Next queue offset per topic and queue id (Java: `topicQueueTable`).
    topic_queue_table: HashMap<String, HashMap<i32, i64>>,
    /// On a replica: the first bytes of a record whose rest has not arrived from the master
    /// yet. Only whole records are written, so a torn record never reaches the file.
    replica_pending: Vec<u8>,
    /// Next queue offset of each light queue used since the table was last rebuilt; one that
    /// is missing is looked up in its consume queue before a put uses it (Java keeps them in
    /// `lmqTopicQueueTable`).
    light_next: HashMap<Box<str>, i64>,
    /// Light queues that exist (found at open or created since), for `maxLmqConsumeQueueNum`.
    light_total: usize,
}

impl WriterState {
    fn next_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.topic_queue_table.get(topic).and_then(|q| q.get(&queue_id)).copied().unwrap_or(0)
    }

    fn advance(&mut self, topic: &str, queue_id: i32, to: i64) {
        *self.next_offset_slot(topic, queue_id) = to;
    }

    /// The next queue offset of a topic queue, for reading and advancing it with one lookup
    /// (under the CommitLog lock, on every put).
    fn next_offset_slot(&mut self, topic: &str, queue_id: i32) -> &mut i64 {
        if !self.topic_queue_table.contains_key(topic) {
            self.topic_queue_table.insert(topic.to_owned(), HashMap::new());
        }
        let queues = self.topic_queue_table.get_mut(topic).expect("inserted above");
        queues.entry(queue_id).or_insert(0)
    }
}

/// The CommitLog.
#[derive(Debug)]
pub struct CommitLog {
    queue: MappedFileQueue,
    writer: Mutex<WriterState>,
    /// `maxMessageSize`; changed at runtime by UPDATE_BROKER_CONFIG (Java reads it per put).
    max_message_size: std::sync::atomic::AtomicUsize,
    store_host: SocketAddr,
    /// Store time of the newest appended record (for the checkpoint after a flush).
    last_store_timestamp: AtomicI64,
    /// When the put holding the append lock took it (ms), 0 when none holds it (Java:
    /// `beginTimeInLock`, reported as `pageCacheLockTimeMills`).
    begin_time_in_lock: AtomicI64,
    /// Set after a failed write or flush: the page-cache state is unknown, so nothing more is
    /// accepted.
    poisoned: AtomicBool,
    /// Fault injection: the next flushes fail as if `msync` had (tests of the poison path).
    inject_flush_failure: AtomicBool,
    /// Fault injection: the next appends fail as if their write system call had.
    inject_write_failure: AtomicBool,
    /// Test hook: writing staged appends out fails.
    inject_commit_failure: AtomicBool,
    /// Set (under the append lock) at shutdown: later appends are refused, so the final
    /// flush covers every append that was accepted.
    closed: AtomicBool,
    /// With `transientStorePoolEnable`: buffers that take appends until committed.
    pool: Option<TransientStorePool>,
    /// Segments holding a pool buffer, oldest first: what `commit` must visit.
    buffered_segments: Mutex<Vec<Arc<crate::MappedFile>>>,
}

/// Reserves the blocks for `len` more bytes of `file` (see [`crate::reserve`]).
fn reserve_for(file: &crate::MappedFile, len: usize) -> Result<(), AppendError> {
    file.ensure_reserved(file.wrote_position() + len).map_err(|e| CommitLog::no_space(&e))
}

/// Queue offsets are not consumed by half (prepared) and rolled-back transaction records.
fn takes_queue_offset(sys_flag: i32) -> bool {
    matches!(sysflag::transaction_value(sys_flag), sysflag::TRANSACTION_NOT_TYPE | sysflag::TRANSACTION_COMMIT_TYPE)
}

impl CommitLog {
    /// Opens the CommitLog over `queue`.
    pub fn new(queue: MappedFileQueue, max_message_size: usize, store_host: SocketAddr) -> Self {
        CommitLog {
            queue,
            writer: Mutex::new(WriterState::default()),
            max_message_size: std::sync::atomic::AtomicUsize::new(max_message_size),
            store_host,
            last_store_timestamp: AtomicI64::new(0),
            begin_time_in_lock: AtomicI64::new(0),
            poisoned: AtomicBool::new(false),
            inject_flush_failure: AtomicBool::new(false),
            inject_write_failure: AtomicBool::new(false),
            inject_commit_failure: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            pool: None,
            buffered_segments: Mutex::new(Vec::new()),
        }
    }

    /// Routes appends through `pool`'s buffers; readers then see only committed bytes (call
    /// [`commit`](Self::commit) regularly).
    pub fn with_transient_pool(mut self, pool: TransientStorePool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Whether appends go through the transient pool.
    pub fn uses_transient_pool(&self) -> bool {
        self.pool.is_some()
    }

    /// Makes appends waiting for a commit readable: copies transient-pool buffers into the
    /// file mappings (returning the buffers of full segments to the pool), or writes staged
    /// appends ([`AppendPath::WriteCall`](crate::AppendPath::WriteCall)). Returns whether
    /// anything was committed. A failed write poisons the CommitLog.
    pub fn commit(&self) -> bool {
        let Some(pool) = &self.pool else {
            if self.queue.append_path() != crate::AppendPath::WriteCall || self.is_poisoned() {
                return false;
            }
            let written = if self.inject_commit_failure.load(Ordering::Acquire) {
                Err(std::io::Error::other("injected write failure"))
            } else {
                self.queue.commit_staged()
            };
            return match written {
                Ok(any) => any,
                Err(e) => {
                    self.poison(&format!("commit log write failed: {e}"));
                    false
                }
            };
        };
        let mut any = false;
        let mut holders = self.buffered_segments.lock().unwrap_or_else(|e| e.into_inner());
        holders.retain(|file| {
            any |= file.has_uncommitted();
            match file.commit() {
                Some(buffer) => {
                    pool.return_buffer(buffer);
                    false
                }
                None => true,
            }
        });
        any
    }

    /// Refuses every later append; appends already inside the lock complete first.
    pub fn close(&self) {
        let _state = self.writer();
        self.closed.store(true, Ordering::Release);
    }

    /// Makes every later flush fail as a failing `msync` would. Only the system call is
    /// replaced: the poison handling that follows is the real one.
    pub fn inject_flush_failure(&self, fail: bool) {
        self.inject_flush_failure.store(fail, Ordering::Release);
    }

    /// Makes every later append fail as a failing write system call would (nothing is
    /// copied). The poison handling that follows is the real one.
    pub fn inject_write_failure(&self, fail: bool) {
        self.inject_write_failure.store(fail, Ordering::Release);
    }

    /// Makes every later write of staged appends ([`AppendPath::WriteCall`](crate::AppendPath::WriteCall))
    /// fail as a failing `pwrite` would (nothing is written). The poison handling that follows
    /// is the real one.
    pub fn inject_commit_failure(&self, fail: bool) {
        self.inject_commit_failure.store(fail, Ordering::Release);
    }

    /// The largest body accepted (`maxMessageSize`).
    pub fn max_message_size(&self) -> usize {
        self.max_message_size.load(Ordering::Relaxed)
    }

    /// Changes `maxMessageSize` for the next appends.
    pub fn set_max_message_size(&self, bytes: usize) {
        self.max_message_size.store(bytes, Ordering::Relaxed);
    }

    /// The segment queue.
    pub fn queue(&self) -> &MappedFileQueue {
        &self.queue
    }

    /// The broker address written as STOREHOST.
    pub fn store_host(&self) -> SocketAddr {
        self.store_host
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, WriterState> {
        // The state is a map of counters updated after a successful copy; a panic between the
        // two cannot leave a half-written entry.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a failed flush poisoned the store.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Poisons the store; logged once.
    pub fn poison(&self, reason: &str) {
        if !self.poisoned.swap(true, Ordering::AcqRel) {
            error!(reason, "commit log poisoned: refusing further writes");
        }
    }

    /// Store time of the newest appended record.
    pub fn last_store_timestamp(&self) -> i64 {
        self.last_store_timestamp.load(Ordering::Acquire)
    }

    /// Appends one message. `msg`'s queue offset, physical offset and store time are assigned
    /// here; its STOREHOST is this CommitLog's.
    ///
    /// # Errors
    /// [`AppendError`] with MESSAGE_ILLEGAL for oversized or invalid records,
    /// SERVICE_NOT_AVAILABLE when poisoned, CREATE_MAPPED_FILE_FAILED when rolling fails.
    pub fn append(&self, msg: &StoredMessage) -> Result<AppendResult, AppendError> {
        self.append_batch(std::slice::from_ref(msg))
    }

    /// Appends messages of one topic queue contiguously into one segment, with consecutive
    /// queue offsets.
    ///
    /// # Errors
    /// As [`append`](Self::append); an empty batch is MESSAGE_ILLEGAL.
    pub fn append_batch(&self, msgs: &[StoredMessage]) -> Result<AppendResult, AppendError> {
        let Some(first) = msgs.first() else {
            return Err(AppendError::new(PutMessageStatus::MessageIllegal, "empty batch"));
        };
        if self.is_poisoned() {
            return Err(AppendError::new(PutMessageStatus::ServiceNotAvailable, "store poisoned after a failed flush"));
        }
        let max_message_size = self.max_message_size();
        for m in msgs {
            if m.body.len() > max_message_size {
                return Err(AppendError::new(
                    PutMessageStatus::MessageIllegal,
                    format!("message body of {} bytes exceeds maxMessageSize {max_message_size}", m.body.len()),
                ));
            }
            if m.topic != first.topic || m.queue_id != first.queue_id {
                return Err(AppendError::new(PutMessageStatus::MessageIllegal, "a batch must target one topic queue"));
            }
        }
        ENCODE_BUF.with(|cell| {
            let mut buf = cell.borrow_mut();
            buf.clear();
            let mut sizes: smallvec_lite::Sizes = smallvec_lite::Sizes::default();
            for m in msgs {
                let before = buf.len();
                if m.store_host == self.store_host {
                    m.encode_into(&mut buf).map_err(illegal)?;
                } else {
                    // Callers normally set STOREHOST already; a clone keeps the record right
                    // when they did not.
                    let mut owned = m.clone();
                    owned.store_host = self.store_host;
                    owned.encode_into(&mut buf).map_err(illegal)?;
                }
                sizes.push(buf.len() - before);
            }
            let total = buf.len();
            if total + BLANK_MARKER_LEN > self.queue.file_size() {
                return Err(AppendError::new(
                    PutMessageStatus::MessageIllegal,
                    format!("{total} bytes do not fit a {}-byte segment", self.queue.file_size()),
                ));
            }
            self.write_locked(&mut buf, &sizes, first)
        })
    }

    fn write_locked(
        &self,
        buf: &mut BytesMut,
        sizes: &smallvec_lite::Sizes,
        first: &StoredMessage,
    ) -> Result<AppendResult, AppendError> {
        let total = buf.len();
        let mut state = self.writer();
        // The lock's time is the records' store time, as Java's `beginLockTimestamp`.
        let locked_at = now_ms();
        self.begin_time_in_lock.store(locked_at, Ordering::Relaxed);
        let result = self.write_under_lock(&mut state, buf, sizes, first, total, locked_at);
        self.begin_time_in_lock.store(0, Ordering::Relaxed);
        drop(state);
        let (append, file) = result?;
        self.queue.reserve_ahead(&file);
        Ok(append)
    }

    /// How long the put now holding the append lock has held it, in ms (0 when none does).
    /// Java: `getPageCacheLockTimeMills`.
    pub fn page_cache_lock_time_ms(&self) -> i64 {
        let begin = self.begin_time_in_lock.load(Ordering::Relaxed);
        if begin <= 0 {
            return 0;
        }
        (now_ms() - begin).max(0)
    }

    fn write_under_lock(
        &self,
        state: &mut WriterState,
        buf: &mut BytesMut,
        sizes: &smallvec_lite::Sizes,
        first: &StoredMessage,
        total: usize,
        store_timestamp: i64,
    ) -> Result<(AppendResult, Arc<crate::MappedFile>), AppendError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(AppendError::new(PutMessageStatus::ServiceNotAvailable, "message store is shut down"));
        }
        let mut file = self.segment_for_append()?;
        if file.remaining() < total + BLANK_MARKER_LEN {
            let remaining = file.remaining();
            let blank = blank_marker(remaining as u32).map_err(illegal)?;
            reserve_for(&file, BLANK_MARKER_LEN)?;
            file.append(&blank).map_err(|e| self.write_failed(&e))?;
            file.mark_full();
            file = self.segment_for_append()?;
        }
        // Blocks first: a put the disk has no room for is refused here, before any byte is
        // written, so it needs no poisoning and later puts succeed once space is back.
        reserve_for(&file, total)?;
        let wrote_offset = file.file_from_offset() + file.wrote_position() as i64;
        let takes_offset = takes_queue_offset(first.sys_flag);
        let next_queue_offset = takes_offset.then(|| state.next_offset_slot(&first.topic, first.queue_id));
        let queue_offset = next_queue_offset.as_deref().copied().unwrap_or(0);
        let mut msg_id = String::with_capacity(sizes.len() * 33);
        let mut pos = 0;
        for (i, &size) in sizes.iter().enumerate() {
            let record = &mut buf[pos..pos + size];
            let physical = wrote_offset + pos as i64;
            let this_queue_offset = if takes_offset { queue_offset + i as i64 } else { 0 };
            patch_queue_offset(record, this_queue_offset).map_err(illegal)?;
            patch_physical_offset(record, physical).map_err(illegal)?;
            patch_store_timestamp(record, store_timestamp).map_err(illegal)?;
            if i > 0 {
                msg_id.push(',');
            }
            push_offset_msg_id(&mut msg_id, self.store_host, physical);
            pos += size;
        }
        let written = if self.inject_write_failure.load(Ordering::Acquire) {
            Err(std::io::Error::other("injected write failure"))
        } else {
            file.append_size_last(&buf[..total])
        };
        written.map_err(|e| self.write_failed(&e))?;
        if let Some(next) = next_queue_offset {
            *next = queue_offset + sizes.len() as i64;
        }
        self.last_store_timestamp.store(store_timestamp, Ordering::Release);
        let append = AppendResult {
            wrote_offset,
            wrote_bytes: total,
            msg_id,
            store_timestamp,
            logics_offset: queue_offset,
            msg_num: sizes.len(),
        };
        Ok((append, file))
    }

    /// The status and remark of a put the disk has no room for.
    fn no_space(e: &io::Error) -> AppendError {
        // A producer retrying against a full disk would flood the log.
        static REFUSALS: LogLimiter = LogLimiter::new();
        if REFUSALS.should_log() {
            warn!(error = %e, "put refused: no room on the store disk");
        }
        AppendError::new(PutMessageStatus::ServiceNotAvailable, e.to_string())
    }

    /// A failed write leaves unknown bytes past the write position: poison the CommitLog so
    /// nothing more is appended (or acknowledged) until an operator restarts the broker, whose
    /// recovery cuts the log at the last whole record.
    fn write_failed(&self, e: &std::io::Error) -> AppendError {
        let reason = format!("commit log write failed: {e}");
        self.poison(&reason);
        AppendError::new(PutMessageStatus::UnknownError, reason)
    }

    fn segment_for_append(&self) -> Result<Arc<crate::MappedFile>, AppendError> {
        self.segment_for_append_from(0)
    }

    /// As `segment_for_append`; an empty queue starts at the segment holding `start_offset`.
    fn segment_for_append_from(&self, start_offset: i64) -> Result<Arc<crate::MappedFile>, AppendError> {
        let file = self.queue.last_or_create(start_offset).map_err(|e| {
            warn!(error = %e, "cannot create the next commit log segment");
            AppendError::new(
                PutMessageStatus::CreateMappedFileFailed,
                format!("cannot create a commit log segment: {e}"),
            )
        })?;
        if let Some(pool) = &self.pool {
            // A fresh segment takes a pool buffer if one is free; otherwise it is written
            // directly, so an append never waits for a buffer.
            if file.wrote_position() == 0 && !file.holds_buffer() {
                if let Some(buffer) = pool.borrow_buffer() {
                    match file.attach_buffer(buffer) {
                        Ok(()) => self.buffered_segments.lock().unwrap_or_else(|e| e.into_inner()).push(file.clone()),
                        Err(buffer) => pool.return_buffer(buffer),
                    }
                }
            }
        }
        Ok(file)
    }

    /// The `size` bytes at `offset`, zero-copy.
    pub fn get_message(&self, offset: i64, size: usize) -> Option<Bytes> {
        let file = self.queue.find(offset)?;
        file.slice((offset - file.file_from_offset()) as usize, size)
    }

    /// The record at `offset`, its size read from its TOTALSIZE.
    pub fn get_message_at(&self, offset: i64) -> Option<Bytes> {
        let file = self.queue.find(offset)?;
        let pos = (offset - file.file_from_offset()) as usize;
        let size = file.with_bytes(pos, 4, |b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))?;
        if size <= 0 {
            return None;
        }
        file.slice(pos, size as usize)
    }

    /// Raw bytes from `offset` for replication: at most `max_bytes`, never past the end of the
    /// segment holding `offset`. Past a sealed segment's end-of-file blank marker this is the
    /// unused tail up to the segment's end, which masters ship too (Java's write position
    /// covers it). `None` when nothing is readable at `offset` yet, or any more.
    pub fn data_for_replica(&self, offset: i64, max_bytes: usize) -> Option<Bytes> {
        let file = self.queue.find(offset)?;
        let pos = usize::try_from(offset - file.file_from_offset()).ok()?;
        if pos >= file.file_size() {
            return None;
        }
        // A sealed segment is shipped through to its end, blank marker and unused space alike.
        if let Some(sealed) = file.slice_sealed(pos, (file.file_size() - pos).min(max_bytes)) {
            return Some(sealed);
        }
        let committed = file.committed_position();
        if pos < committed {
            return file.slice(pos, (committed - pos).min(max_bytes));
        }
        None
    }

    /// Every written byte from `offset` to the end of its segment (for dispatch).
    pub fn data_from(&self, offset: i64) -> Option<Bytes> {
        let file = self.queue.find(offset)?;
        let pos = (offset - file.file_from_offset()) as usize;
        let committed = file.committed_position();
        if pos > committed {
            return None;
        }
        file.slice(pos, committed - pos)
    }

    /// Store time of the record at `offset` of `size` bytes.
    pub fn store_timestamp_at(&self, offset: i64, size: i32) -> Option<i64> {
        let file = self.queue.find(offset)?;
        let pos = (offset - file.file_from_offset()) as usize;
        file.with_bytes(pos, size.max(0) as usize, |b| {
            let sys_flag = i32::from_be_bytes([b[36], b[37], b[38], b[39]]);
            let at = ferromq_protocol::message::store_timestamp_pos(sys_flag);
            b.get(at..at + 8).map(|t| i64::from_be_bytes([t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]]))
        })
        .flatten()
    }

    /// First offset still stored.
    pub fn min_offset(&self) -> i64 {
        self.queue.min_offset()
    }

    /// Offset after the last byte readers can see (committed).
    pub fn max_offset(&self) -> i64 {
        self.queue.max_committed_offset()
    }

    /// Start of the segment after the one holding `offset`.
    pub fn roll_next_file(&self, offset: i64) -> i64 {
        let size = self.queue.file_size() as i64;
        offset + size - offset.rem_euclid(size)
    }

    /// Replaces the queue-offset table (after recovery, from the consume queues).
    pub fn set_topic_queue_table(&self, table: impl IntoIterator<Item = ((String, i32), i64)>) {
        let mut state = self.writer();
        state.topic_queue_table.clear();
        // Light queues are looked up again, in their consume queues, when next used.
        state.light_next.clear();
        for ((topic, queue_id), next) in table {
            state.advance(&topic, queue_id, next);
        }
    }

    /// Sets how many light queues exist and the next offsets of those that recovery saw in
    /// records (a record whose unit could not be written still holds its offset).
    pub fn set_light_queues(&self, total: usize, next: impl IntoIterator<Item = (String, i64)>) {
        let mut state = self.writer();
        state.light_total = total;
        for (name, offset) in next {
            let slot = state.light_next.entry(name.into_boxed_str()).or_insert(0);
            *slot = (*slot).max(offset);
        }
    }

    /// Forgets a destroyed light queue: its count and next offset (a queue of the same name
    /// starts again at 0).
    pub fn forget_light_queue(&self, name: &str) {
        let mut state = self.writer();
        if state.light_next.remove(name).is_some() || state.light_total > 0 {
            state.light_total = state.light_total.saturating_sub(1);
        }
    }

    /// Appends one message that is also dispatched to the light queues `names`: each one's
    /// next offset is taken under the append lock and written into the record's
    /// `INNER_MULTI_QUEUE_OFFSET` (which is why the record is encoded under the lock), then
    /// advanced. A light queue this CommitLog has not used yet is looked up first, outside the
    /// lock, by `next_in_queue`: its consume queue's end, or `None` when it has none and would
    /// be created, which `max_light_queues` bounds. Java: `LmqDispatch`.
    ///
    /// # Errors
    /// As [`append`](Self::append); LMQ_CONSUME_QUEUE_NUM_EXCEEDED past `max_light_queues`;
    /// UNKNOWN_ERROR when a light queue's consume queue cannot be read.
    pub fn append_light(
        &self,
        msg: &StoredMessage,
        names: &[&str],
        max_light_queues: usize,
        next_in_queue: &dyn Fn(&str) -> io::Result<Option<i64>>,
    ) -> Result<AppendResult, AppendError> {
        if self.is_poisoned() {
            return Err(AppendError::new(PutMessageStatus::ServiceNotAvailable, "store poisoned after a failed flush"));
        }
        let max_message_size = self.max_message_size();
        if msg.body.len() > max_message_size {
            return Err(AppendError::new(
                PutMessageStatus::MessageIllegal,
                format!("message body of {} bytes exceeds maxMessageSize {max_message_size}", msg.body.len()),
            ));
        }
        loop {
            let missing: Vec<&str> = {
                let mut state = self.writer();
                let missing: Vec<&str> = names.iter().copied().filter(|n| !state.light_next.contains_key(*n)).collect();
                if missing.is_empty() {
                    let (append, file) = self.append_light_locked(&mut state, msg, names)?;
                    drop(state);
                    self.queue.reserve_ahead(&file);
                    return Ok(append);
                }
                missing
            };
            let mut found = Vec::with_capacity(missing.len());
            for name in missing {
                let next = next_in_queue(name).map_err(|e| {
                    AppendError::new(PutMessageStatus::UnknownError, format!("light queue {name}: {e}"))
                })?;
                found.push((name, next));
            }
            let mut state = self.writer();
            let created = found.iter().filter(|(n, next)| next.is_none() && !state.light_next.contains_key(*n)).count();
            if created > 0 && state.light_total + created > max_light_queues {
                return Err(AppendError::new(
                    PutMessageStatus::LmqConsumeQueueNumExceeded,
                    format!(
                        "[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]broker config enableLmq and enableMultiDispatch, lmq \
                         consumeQueue num exceed maxLmqConsumeQueueNum config num {max_light_queues} ({} exist)",
                        state.light_total
                    ),
                ));
            }
            state.light_total += created;
            for (name, next) in found {
                state.light_next.entry(name.into()).or_insert(next.unwrap_or(0));
            }
        }
    }

    fn append_light_locked(
        &self,
        state: &mut WriterState,
        msg: &StoredMessage,
        names: &[&str],
    ) -> Result<(AppendResult, Arc<crate::MappedFile>), AppendError> {
        let offsets: Vec<i64> = names.iter().map(|n| state.light_next.get(*n).copied().unwrap_or(0)).collect();
        let mut props = msg.properties_map();
        props.insert(ferromq_protocol::message::keys::INNER_MULTI_QUEUE_OFFSET, crate::lmq::offsets_property(&offsets));
        let mut owned = msg.clone();
        owned.set_properties(&props);
        owned.store_host = self.store_host;
        let mut buf = BytesMut::with_capacity(owned.encoded_len());
        owned.encode_into(&mut buf).map_err(illegal)?;
        let total = buf.len();
        if total + BLANK_MARKER_LEN > self.queue.file_size() {
            return Err(AppendError::new(
                PutMessageStatus::MessageIllegal,
                format!("{total} bytes do not fit a {}-byte segment", self.queue.file_size()),
            ));
        }
        let mut sizes = smallvec_lite::Sizes::default();
        sizes.push(total);
        let locked_at = now_ms();
        self.begin_time_in_lock.store(locked_at, Ordering::Relaxed);
        let result = self.write_under_lock(state, &mut buf, &sizes, &owned, total, locked_at);
        self.begin_time_in_lock.store(0, Ordering::Relaxed);
        let (append, file) = result?;
        for (name, offset) in names.iter().zip(&offsets) {
            if let Some(next) = state.light_next.get_mut(*name) {
                *next = offset + 1;
            }
        }
        Ok((append, file))
    }

    /// Next queue offset of a topic queue.
    pub fn next_queue_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.writer().next_offset(topic, queue_id)
    }

    /// Forgets the queue offsets of `topic` (`queue_id`: that queue only) and runs `destroy`
    /// (which removes the consume queues) while no put can take an offset, but only if every
    /// affected queue is settled: its next offset is the one `dispatched` gives (what its
    /// consume queue holds), so no record of it waits for dispatch. Returns `None` when one is
    /// not settled; nothing is changed then. Puts wait meanwhile, so `destroy` must be quick.
    pub fn forget_settled_queues<R>(
        &self,
        topic: &str,
        queue_id: Option<i32>,
        dispatched: impl Fn(i32) -> i64,
        destroy: impl FnOnce() -> R,
    ) -> Option<R> {
        let mut state = self.writer();
        if let Some(queues) = state.topic_queue_table.get(topic) {
            let unsettled = queues
                .iter()
                .filter(|(id, _)| queue_id.is_none_or(|q| q == **id))
                .any(|(id, next)| *next != dispatched(*id));
            if unsettled {
                return None;
            }
        }
        match queue_id {
            Some(id) => {
                if let Some(queues) = state.topic_queue_table.get_mut(topic) {
                    queues.remove(&id);
                    if queues.is_empty() {
                        state.topic_queue_table.remove(topic);
                    }
                }
            }
            None => {
                state.topic_queue_table.remove(topic);
            }
        }
        Some(destroy())
    }

    /// Flushes everything written; poisons the store and returns the error on failure.
    ///
    /// # Errors
    /// The `msync` failure.
    pub fn flush(&self) -> io::Result<i64> {
        let result = if self.inject_flush_failure.load(Ordering::Acquire) {
            Err(io::Error::other("injected flush failure"))
        } else {
            self.queue.flush()
        };
        result.inspect_err(|e| self.poison(&format!("flush failed: {e}")))
    }
}

/// A tiny inline list of record sizes: one element for single messages, so the common path
/// does not allocate.
mod smallvec_lite {
    #[derive(Debug, Default)]
    pub struct Sizes {
        first: Option<usize>,
        rest: Vec<usize>,
    }

    impl Sizes {
        pub fn push(&mut self, size: usize) {
            if self.first.is_none() {
                self.first = Some(size);
            } else {
                self.rest.push(size);
            }
        }

        pub fn len(&self) -> usize {
            usize::from(self.first.is_some()) + self.rest.len()
        }

        pub fn iter(&self) -> impl Iterator<Item = &usize> {
            self.first.iter().chain(self.rest.iter())
        }
    }
}
