//! ConsumeQueues: one index per topic queue, mapping queue offsets to CommitLog records.
//!
//! A queue is a [`MappedFileQueue`] of fixed-size segments under `<consumequeue>/<topic>/<queueId>/`
//! holding 20-byte big-endian units `(commit-log offset i64, record size i32, tags code i64)`;
//! queue offset N lives at byte `N * 20` of the concatenated segments. When a queue's first unit
//! is not at offset 0, the units before it in its first segment are "blank" units
//! `(0, i32::MAX, 0)`, so that byte positions stay equal to `offset * 20`.
//!
//! The dispatch thread appends; pulls read concurrently. Recovery walks the tail segments and
//! keeps the prefix of plausible units, then cuts units that point past the recovered CommitLog.
//! Re-dispatch after a crash is idempotent: a unit whose record ends at or below the queue's
//! highest CommitLog end is a duplicate and ignored. Java: `ConsumeQueue`, `ConsumeQueueStore`.

use std::collections::HashMap;
use std::fmt::Display;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use tracing::{debug, info, warn};

use crate::consume_queue_ext::{is_ext_addr, ConsumeQueueExt, CqExtUnit};
use crate::dispatch_request::DispatchRequest;
use crate::lmq::{is_lmq, LightQueues, LMQ_OPEN_QUEUES_MAX};
use crate::mapped_file::ReservePolicy;
use crate::mapped_file_queue::MappedFileQueue;

/// Bytes per ConsumeQueue unit (Java: `ConsumeQueue.CQ_STORE_UNIT_SIZE`).
pub const CQ_STORE_UNIT_SIZE: usize = 20;

/// The unit size as an offset, for byte-offset arithmetic.
const UNIT: i64 = CQ_STORE_UNIT_SIZE as i64;

/// Size field of a blank unit (Java's `fillPreBlank` writes `Integer.MAX_VALUE`). No real
/// record is that large, so the value cannot be mistaken for one.
const BLANK_SIZE: i32 = i32::MAX;

/// The largest gap (in units) that `put` fills with blanks. A queue offset further ahead than
/// this is treated as corrupt rather than filling gigabytes of blanks.
const GAP_FILL_MAX_UNITS: i64 = 300_000;

/// How many tail segments recovery re-validates (Java starts at the third-to-last file): older
/// segments were complete and flushed long before the crash.
const RECOVER_TAIL_SEGMENTS: usize = 3;

/// One ConsumeQueue unit, with the queue offset it was read at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqUnit {
    /// Queue offset (unit index) of this unit.
    pub queue_offset: i64,
    /// Physical offset of the record in the CommitLog.
    pub commit_log_offset: i64,
    /// Record size in bytes (`i32::MAX` for a blank unit).
    pub size: i32,
    /// Tag hash code (or delivery time for the schedule topic).
    pub tags_code: i64,
}

impl CqUnit {
    /// Whether this is a blank filler unit `(0, i32::MAX, 0)` that points at no record.
    pub fn is_blank(&self) -> bool {
        self.commit_log_offset == 0 && self.size == BLANK_SIZE && self.tags_code == 0
    }

    /// CommitLog offset just past the record.
    pub fn commit_log_end(&self) -> i64 {
        self.commit_log_offset.saturating_add(i64::from(self.size))
    }

    /// Decodes the unit at the start of `bytes` (at least 20 bytes long).
    fn decode(queue_offset: i64, bytes: &[u8]) -> CqUnit {
        let (phy, rest) = bytes.split_at(8);
        let (size, tags) = rest.split_at(4);
        CqUnit {
            queue_offset,
            commit_log_offset: i64::from_be_bytes(phy.try_into().expect("split_at(8) yields 8 bytes")),
            size: i32::from_be_bytes(size.try_into().expect("split_at(4) yields 4 bytes")),
            tags_code: i64::from_be_bytes(tags[..8].try_into().expect("a unit has 8 tag bytes")),
        }
    }
}

/// The 20 bytes of a unit.
fn encode_unit(commit_log_offset: i64, size: i32, tags_code: i64) -> [u8; CQ_STORE_UNIT_SIZE] {
    let mut b = [0u8; CQ_STORE_UNIT_SIZE];
    b[..8].copy_from_slice(&commit_log_offset.to_be_bytes());
    b[8..12].copy_from_slice(&size.to_be_bytes());
    b[12..].copy_from_slice(&tags_code.to_be_bytes());
    b
}

/// Recovery's notion of a unit that was written: Java accepts `offset >= 0 && size > 0`, which
/// includes blanks. Zeros (never written) and most torn units fail it.
fn is_plausible(unit: &CqUnit) -> bool {
    unit.commit_log_offset >= 0 && unit.size > 0
}

/// What a forward walk over raw unit bytes found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Scan {
    /// Bytes of plausible units from the start of the slice, a multiple of 20.
    valid_len: usize,
    /// CommitLog end of the last non-blank plausible unit.
    last_real_end: Option<i64>,
}

/// Walks units from the start of `bytes` while they are plausible (Java: `ConsumeQueue#recover`).
/// Pure, so recovery's rules are testable without files.
fn scan_valid_prefix(bytes: &[u8]) -> Scan {
    let mut scan = Scan::default();
    for chunk in bytes.chunks_exact(CQ_STORE_UNIT_SIZE) {
        let unit = CqUnit::decode(0, chunk);
        if !is_plausible(&unit) {
            break;
        }
        scan.valid_len += CQ_STORE_UNIT_SIZE;
        if !unit.is_blank() {
            scan.last_real_end = Some(unit.commit_log_end());
        }
    }
    scan
}

/// Position (bytes from the start of `bytes`) of the first real unit whose record ends past
/// `commit_log_max`. Blanks are kept: they point at nothing. Java: `truncateDirtyLogicFiles`.
fn first_dirty_unit(bytes: &[u8], commit_log_max: i64) -> Option<usize> {
    bytes
        .chunks_exact(CQ_STORE_UNIT_SIZE)
        .position(|chunk| {
            let unit = CqUnit::decode(0, chunk);
            !unit.is_blank() && unit.commit_log_end() > commit_log_max
        })
        .map(|i| i * CQ_STORE_UNIT_SIZE)
}

/// Whether the first bytes (`page`) of a consume queue's newest file show every unit it
/// holds, all of them ending at or below `commit_log_max`: a valid prefix followed by a zeroed
/// unit (the end of what was written). A light queue for which this holds needs no opening to
/// be cut after a crash.
pub(crate) fn page_ends_below(page: &[u8], commit_log_max: i64) -> bool {
    let scan = scan_valid_prefix(page);
    let after = &page[scan.valid_len..];
    scan.valid_len > 0
        && after.len() >= CQ_STORE_UNIT_SIZE
        && after[..CQ_STORE_UNIT_SIZE].iter().all(|b| *b == 0)
        && first_dirty_unit(&page[..scan.valid_len], commit_log_max).is_none()
}

/// The first index in `[lo, hi)` for which `pred` is false, assuming `pred` is true then false.
fn partition_point(mut lo: i64, mut hi: i64, mut pred: impl FnMut(i64) -> bool) -> i64 {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// How a consume queue's files reserve blocks and are read: a page at a time. A queue holds 20
/// bytes a message, and a broker may have 10,000 queues with a few units each: reserving the
/// default 256 KiB ahead took 2.6 GB of disk for them, and reading around the first page of
/// each made a restart read (and zero-fill) that much.
fn queue_file_policy() -> ReservePolicy {
    let policy = ReservePolicy::new(CQ_RESERVE_STEP);
    policy.set_random_access(true);
    policy
}

/// Bytes a consume queue reserves ahead of its writer at a time (819 units).
const CQ_RESERVE_STEP: usize = 16 * 1024;

/// Refuses topic names that would escape the consumequeue directory.
fn check_topic_path(topic: &str) -> io::Result<()> {
    if topic.is_empty() || topic == "." || topic == ".." || topic.contains(['/', '\\', '\0']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("topic {topic:?} cannot be used as a consume queue directory name"),
        ));
    }
    Ok(())
}

/// The ConsumeQueue of one topic queue. Java: `ConsumeQueue`.
///
/// `Send + Sync`: appends, truncation and deletion are serialized by an internal lock; reads
/// take no lock and see only units below the segments' write positions.
#[derive(Debug)]
pub struct ConsumeQueue {
    topic: String,
    queue_id: i32,
    files: MappedFileQueue,
    file_size: usize,
    /// Serializes the writer side: put, recover, truncation, deletion, min-offset correction.
    writer: Mutex<()>,
    /// CommitLog end (offset + size) of the last real unit; 0 when there is none (Java uses -1;
    /// any real record ends above 0, so both mean "nothing dispatched").
    max_physic_offset: AtomicI64,
    /// Byte offset of the first unit that points at a live record (or the end when none does).
    min_logic_offset: AtomicI64,
    /// The extension files (`enableConsumeQueueExt`): units' tagsCode slots hold addresses there.
    ext: Option<ConsumeQueueExt>,
}

/// Where a queue's extension files live and how large they are (`enableConsumeQueueExt`,
/// `mappedFileSizeConsumeQueueExt`).
#[derive(Debug, Clone)]
pub struct ExtOptions {
    /// The `consumequeue_ext` directory.
    pub root: PathBuf,
    /// Bytes per extension file.
    pub file_size: usize,
}

impl ConsumeQueue {
    /// Opens the queue of `topic`/`queue_id` under `root` (the `consumequeue` directory),
    /// loading existing segments. Call [`recover`](Self::recover) before using a queue that
    /// had segments: until then every segment counts as full.
    ///
    /// # Errors
    /// `InvalidInput` for a segment size that is not a positive multiple of 20 or a topic that
    /// is not a safe directory name; I/O errors and inconsistent segment files from loading.
    pub fn open(root: &Path, topic: &str, queue_id: i32, file_size: usize) -> io::Result<ConsumeQueue> {
        ConsumeQueue::open_with_ext(root, topic, queue_id, file_size, None)
    }

    /// As [`open`](Self::open), with extension files when `ext` is given.
    ///
    /// # Errors
    /// As [`open`](Self::open), and the extension files' errors.
    pub fn open_with_ext(
        root: &Path,
        topic: &str,
        queue_id: i32,
        file_size: usize,
        ext: Option<&ExtOptions>,
    ) -> io::Result<ConsumeQueue> {
        ConsumeQueue::open_with_policy(root, topic, queue_id, file_size, ext, queue_file_policy())
    }

    /// Opens a light queue's consume queue (`consumequeue/<name>/0`, no extension files). A
    /// broker may hold a million of them, most with a unit or two: they reserve a page ahead,
    /// not [`CQ_RESERVE_STEP`].
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_light(root: &Path, name: &str, file_size: usize) -> io::Result<ConsumeQueue> {
        let policy = ReservePolicy::new(crate::OS_PAGE_SIZE);
        policy.set_random_access(true);
        ConsumeQueue::open_with_policy(root, name, crate::LMQ_QUEUE_ID, file_size, None, policy)
    }

    fn open_with_policy(
        root: &Path,
        topic: &str,
        queue_id: i32,
        file_size: usize,
        ext: Option<&ExtOptions>,
        policy: ReservePolicy,
    ) -> io::Result<ConsumeQueue> {
        if file_size == 0 || !file_size.is_multiple_of(CQ_STORE_UNIT_SIZE) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("consume queue {topic}/{queue_id}: segment size {file_size} is not a multiple of 20"),
            ));
        }
        check_topic_path(topic)?;
        let dir = root.join(topic).join(queue_id.to_string());
        let files = MappedFileQueue::load_with(&dir, file_size, false, Arc::new(policy)).map_err(|e| {
            io::Error::new(e.kind(), format!("consume queue {topic}/{queue_id}: loading {}: {e}", dir.display()))
        })?;
        let min = files.min_offset();
        let ext = ext.map(|o| ConsumeQueueExt::open(&o.root, topic, queue_id, o.file_size)).transpose()?;
        Ok(ConsumeQueue {
            topic: topic.to_owned(),
            queue_id,
            files,
            file_size,
            writer: Mutex::new(()),
            max_physic_offset: AtomicI64::new(0),
            min_logic_offset: AtomicI64::new(min),
            ext,
        })
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The queue id.
    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }

    fn writer(&self) -> MutexGuard<'_, ()> {
        // The guarded state lives in the segments and atomics, each updated in one step; a
        // panic while holding the lock leaves nothing half-written that the lock protects.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn error(&self, kind: io::ErrorKind, what: impl Display) -> io::Error {
        io::Error::new(kind, format!("consume queue {}/{}: {what}", self.topic, self.queue_id))
    }

    fn context(&self, e: io::Error, what: impl Display) -> io::Error {
        self.error(e.kind(), format_args!("{what}: {e}"))
    }

    /// Appends the unit for `req` at queue offset `req.consume_queue_offset`. Returns `Ok(false)`
    /// for a duplicate (its record ends at or below [`max_physic_offset`](Self::max_physic_offset),
    /// as when recovery re-dispatches), `Ok(true)` when written. Java: `putMessagePositionInfo`.
    ///
    /// A first unit at a non-zero offset creates the segment holding it and fills the units
    /// before it with blanks (Java: `fillPreBlank`); it becomes the min offset. An offset past
    /// the end is a gap: logged and filled with blanks (Java only logs and appends at the end,
    /// which would shift every later unit off its queue offset).
    ///
    /// # Errors
    /// `InvalidInput` for a negative offset, non-positive size or a gap larger than
    /// `GAP_FILL_MAX_UNITS`; `InvalidData` for an offset below the end whose record is new
    /// (the queue order is broken); I/O errors creating segments.
    pub fn put(&self, req: &DispatchRequest) -> io::Result<bool> {
        self.put_with_bit_map(req, None)
    }

    /// As [`put`](Self::put); with extension files, the unit's tagsCode, store time and
    /// `bit_map` go to an extension unit and the ConsumeQueue unit holds its address (Java:
    /// `putMessagePositionInfoWrapper`). Should the extension write fail, the unit keeps the
    /// plain tagsCode (logged), as in Java.
    ///
    /// # Errors
    /// As [`put`](Self::put).
    pub fn put_with_bit_map(&self, req: &DispatchRequest, bit_map: Option<&[u8]>) -> io::Result<bool> {
        let end = req.commit_log_offset.checked_add(i64::from(req.msg_size));
        let Some(end) = end.filter(|_| req.commit_log_offset >= 0 && req.msg_size > 0) else {
            return Err(self.error(
                io::ErrorKind::InvalidInput,
                format_args!("invalid unit at commit-log offset {} size {}", req.commit_log_offset, req.msg_size),
            ));
        };
        let Some(expect) = req.consume_queue_offset.checked_mul(UNIT).filter(|e| *e >= 0) else {
            return Err(self.error(
                io::ErrorKind::InvalidInput,
                format_args!("invalid queue offset {}", req.consume_queue_offset),
            ));
        };
        let _writer = self.writer();
        let max_physic = self.max_physic_offset();
        if end <= max_physic {
            debug!(topic = %self.topic, queue_id = self.queue_id, commit_log_offset = req.commit_log_offset,
                max_physic, "unit already in the consume queue; ignored");
            return Ok(false);
        }
        let last = self.files.last();
        let fresh = last.is_none();
        let current = match &last {
            Some(f) => f.file_from_offset() + f.wrote_position() as i64,
            // A new queue starts at the segment boundary holding its first unit.
            None => expect - expect.rem_euclid(self.file_size as i64),
        };
        // No real unit at or after the min yet: the unit written now becomes the min.
        let no_live_unit = fresh || self.min_logic_offset() >= current;
        if expect < current {
            return Err(self.error(
                io::ErrorKind::InvalidData,
                format_args!(
                    "queue order broken: unit for offset {} (commit-log offset {}) arrives below the end {} \
                     and above max physical offset {max_physic}",
                    req.consume_queue_offset,
                    req.commit_log_offset,
                    current / UNIT
                ),
            ));
        }
        if expect > current {
            self.fill_blanks(current, expect, fresh)?;
        }
        let tags_code = match &self.ext {
            Some(ext) => {
                let unit = CqExtUnit {
                    tags_code: req.tags_code,
                    msg_store_time: req.store_timestamp,
                    filter_bit_map: bit_map.map(<[u8]>::to_vec),
                };
                ext.put(&unit).unwrap_or_else(|e| {
                    warn!(topic = %self.topic, queue_id = self.queue_id, error = %e, "consume queue ext write failed");
                    req.tags_code
                })
            }
            None => req.tags_code,
        };
        self.append_unit(expect, &encode_unit(req.commit_log_offset, req.msg_size, tags_code))?;
        self.max_physic_offset.store(end, Ordering::Release);
        if no_live_unit {
            self.min_logic_offset.store(expect, Ordering::Release);
        }
        Ok(true)
    }

    /// Writes blank units over `[from, to)` (byte offsets); `from` is the current end.
    fn fill_blanks(&self, from: i64, to: i64, fresh: bool) -> io::Result<()> {
        let units = (to - from) / UNIT;
        if fresh {
            info!(topic = %self.topic, queue_id = self.queue_id, first_offset = to / UNIT, blanks = units,
                "consume queue starts at a non-zero offset; pre-filling blank units");
        } else {
            if units > GAP_FILL_MAX_UNITS {
                return Err(self.error(
                    io::ErrorKind::InvalidInput,
                    format_args!("queue offset {} is {units} units past the end {}", to / UNIT, from / UNIT),
                ));
            }
            warn!(topic = %self.topic, queue_id = self.queue_id, end = from / UNIT, expected = to / UNIT,
                "gap in consume queue offsets; filling blank units");
        }
        let blank = encode_unit(0, BLANK_SIZE, 0);
        let mut at = from;
        while at < to {
            self.append_unit(at, &blank)?;
            at += UNIT;
        }
        Ok(())
    }

    /// Appends one unit that must land at byte offset `at`.
    fn append_unit(&self, at: i64, unit: &[u8; CQ_STORE_UNIT_SIZE]) -> io::Result<()> {
        let seg = self.files.last_or_create(at).map_err(|e| self.context(e, "creating a segment"))?;
        let pos = seg.file_from_offset() + seg.wrote_position() as i64;
        if pos != at {
            // Segments are contiguous and hold whole units, so this is a bookkeeping bug; refuse
            // rather than write a unit at the wrong queue offset.
            return Err(self.error(
                io::ErrorKind::InvalidData,
                format_args!("segment write position {} is not the expected offset {}", pos / UNIT, at / UNIT),
            ));
        }
        seg.append(unit).map_err(|e| self.context(e, "appending a unit"))
    }

    /// Queue offset just past the last unit, blanks included (Java: `getMaxOffsetInQueue`).
    pub fn max_offset_in_queue(&self) -> i64 {
        self.files.max_offset() / UNIT
    }

    /// Queue offset of the first unit pointing at a live record (Java: `getMinOffsetInQueue`).
    pub fn min_offset_in_queue(&self) -> i64 {
        self.min_logic_offset() / UNIT
    }

    fn min_logic_offset(&self) -> i64 {
        self.min_logic_offset.load(Ordering::Acquire)
    }

    /// CommitLog end (offset + size) of the last real unit; 0 for a queue without one.
    pub fn max_physic_offset(&self) -> i64 {
        self.max_physic_offset.load(Ordering::Acquire)
    }

    /// The unit at `queue_offset`, ignoring the min offset.
    fn unit_at(&self, queue_offset: i64) -> Option<CqUnit> {
        let byte = queue_offset.checked_mul(UNIT).filter(|b| *b >= 0)?;
        let seg = self.files.find(byte)?;
        let pos = (byte - seg.file_from_offset()) as usize;
        seg.with_bytes(pos, CQ_STORE_UNIT_SIZE, |b| CqUnit::decode(queue_offset, b))
    }

    /// The unit at `queue_offset`, if it is at or above the min offset and written. A blank unit
    /// inside the queue (a filled gap) is returned as is; see [`CqUnit::is_blank`]. Java: `get`.
    pub fn get(&self, queue_offset: i64) -> Option<CqUnit> {
        if queue_offset < self.min_offset_in_queue() {
            return None;
        }
        self.unit_at(queue_offset).map(|u| self.resolve(u).0)
    }

    /// A unit with its real tagsCode and extension unit, when its tagsCode is an extension
    /// address that resolves (otherwise as stored).
    fn resolve(&self, mut unit: CqUnit) -> (CqUnit, Option<CqExtUnit>) {
        let Some(ext) = self.ext.as_ref().filter(|_| is_ext_addr(unit.tags_code)) else { return (unit, None) };
        match ext.get(unit.tags_code) {
            Some(e) => {
                unit.tags_code = e.tags_code;
                (unit, Some(e))
            }
            None => (unit, None),
        }
    }

    /// As [`iter_from`](Self::iter_from), each unit with its extension unit (resolved tagsCode;
    /// `None` without extension files, or for an address that no longer resolves, whose raw
    /// tagsCode is then kept: see [`is_ext_addr`]).
    pub fn iter_from_with_ext(&self, queue_offset: i64, max: usize) -> Vec<(CqUnit, Option<CqExtUnit>)> {
        self.iter_raw(queue_offset, max).into_iter().map(|u| self.resolve(u)).collect()
    }

    /// Up to `max` consecutive units from `queue_offset`, stopping at the end of its segment or
    /// of the written data (Java: `iterateFrom`, which is bounded by one segment too). Empty
    /// when `queue_offset` is below the min or not written.
    pub fn iter_from(&self, queue_offset: i64, max: usize) -> Vec<CqUnit> {
        let units = self.iter_raw(queue_offset, max);
        if self.ext.is_none() {
            return units;
        }
        units.into_iter().map(|u| self.resolve(u).0).collect()
    }

    fn iter_raw(&self, queue_offset: i64, max: usize) -> Vec<CqUnit> {
        if max == 0 || queue_offset < self.min_offset_in_queue() {
            return Vec::new();
        }
        let Some(byte) = queue_offset.checked_mul(UNIT) else { return Vec::new() };
        let Some(seg) = self.files.find(byte) else { return Vec::new() };
        let pos = (byte - seg.file_from_offset()) as usize;
        let available = seg.wrote_position().saturating_sub(pos) / CQ_STORE_UNIT_SIZE;
        let n = available.min(max);
        seg.with_bytes(pos, n * CQ_STORE_UNIT_SIZE, |bytes| {
            let mut units = Vec::with_capacity(n);
            for (chunk, q) in bytes.chunks_exact(CQ_STORE_UNIT_SIZE).zip(queue_offset..) {
                units.push(CqUnit::decode(q, chunk));
            }
            units
        })
        .unwrap_or_default()
    }

    /// The queue offset for a store time (Java: `getOffsetInQueueByTime` followed by
    /// `ConsumeQueueStore`'s clamp to `[min, max]`). `store_time_of(commit_log_offset, size)`
    /// reads a record's store time from the CommitLog.
    ///
    /// With `lower`, the first unit whose store time is `>= timestamp_ms`; otherwise (upper) the
    /// last unit whose store time is `<= timestamp_ms`. Equal times form a run: lower returns
    /// its first unit, upper its last. For a time between two units, lower returns the later
    /// and upper the earlier one. Before every unit: both return the min offset (Java's upper
    /// returns 0, clamped to the min by the store). After every unit: lower returns the max
    /// offset (one past the last unit), upper the last unit. An empty queue returns the min
    /// offset.
    ///
    /// Units whose time cannot be read (`None`: the record's file was deleted) and blank units
    /// count as older than any time, like Java's units below the CommitLog's min offset. Java
    /// instead returns 0 when a lookup fails mid-search; the clamp then makes that the min.
    /// Java searches one segment chosen by its first/last times; a search over the whole
    /// range gives the same answer for store times that never decrease, in fewer lookups.
    pub fn offset_of_time(
        &self,
        timestamp_ms: i64,
        lower: bool,
        store_time_of: impl Fn(i64, i32) -> Option<i64>,
    ) -> i64 {
        let lo = self.min_offset_in_queue();
        let hi = self.max_offset_in_queue();
        if lo >= hi {
            return lo.min(hi);
        }
        let time_at = |q: i64| match self.unit_at(q) {
            Some(u) if !u.is_blank() => store_time_of(u.commit_log_offset, u.size).unwrap_or(i64::MIN),
            _ => i64::MIN,
        };
        if lower {
            partition_point(lo, hi, |q| time_at(q) < timestamp_ms)
        } else {
            let after = partition_point(lo, hi, |q| time_at(q) <= timestamp_ms);
            if after == lo {
                lo
            } else {
                after - 1
            }
        }
    }

    /// Recovers the write position after a restart (Java: `ConsumeQueue#recover`): walks the
    /// last three segments from the oldest of them while units are plausible (`offset >= 0 &&
    /// size > 0`, blanks included), drops everything after (later segments are deleted, nothing
    /// is zeroed), and recomputes the max physical offset and the min offset.
    ///
    /// The min offset is the first non-blank unit, so a pre-filled queue keeps its real start.
    /// (Java resets it to 0 on load and lets `correctMinOffset` move it, which stops at a blank
    /// when the CommitLog starts at 0.) Call [`correct_min_offset`](Self::correct_min_offset)
    /// afterwards to skip units whose records were deleted.
    ///
    /// # Errors
    /// Deleting segments past the end failed.
    pub fn recover(&self) -> io::Result<()> {
        let _writer = self.writer();
        let segments = self.files.segments();
        let Some(first) = segments.first() else {
            self.max_physic_offset.store(0, Ordering::Release);
            self.min_logic_offset.store(0, Ordering::Release);
            return Ok(());
        };
        let start = segments.len().saturating_sub(RECOVER_TAIL_SEGMENTS);
        let mut end = segments[start].file_from_offset();
        let mut last_real_end = None;
        for seg in &segments[start..] {
            let scan = seg.with_allocated(0, self.file_size, scan_valid_prefix).unwrap_or_default();
            end = seg.file_from_offset() + scan.valid_len as i64;
            last_real_end = scan.last_real_end.or(last_real_end);
            if scan.valid_len < self.file_size {
                break;
            }
        }
        self.files.truncate(end, false).map_err(|e| self.context(e, format_args!("truncating at {}", end / UNIT)))?;
        let max_physic = match last_real_end {
            Some(e) => e,
            // Only blanks in the walked segments: the last real unit, if any, is further back.
            None => self.last_real_end_before(end),
        };
        self.max_physic_offset.store(max_physic, Ordering::Release);
        let min = self.first_real_unit_from(first.file_from_offset(), end);
        self.min_logic_offset.store(min, Ordering::Release);
        if let Some(ext) = &self.ext {
            ext.recover().map_err(|e| self.context(e, "recovering the ext files"))?;
            self.cut_ext_after_last_unit()?;
        }
        debug!(topic = %self.topic, queue_id = self.queue_id, min_offset = min / UNIT, max_offset = end / UNIT,
            max_physic, "consume queue recovered");
        Ok(())
    }

    /// CommitLog end of the last non-blank unit below byte offset `end`, or 0. Walks back over
    /// blanks only, which exist just before a queue's first unit or in a filled gap.
    fn last_real_end_before(&self, end: i64) -> i64 {
        let mut q = end / UNIT - 1;
        while q >= self.files.min_offset() / UNIT {
            match self.unit_at(q) {
                Some(u) if u.is_blank() => q -= 1,
                Some(u) => return u.commit_log_end(),
                None => break,
            }
        }
        0
    }

    /// Byte offset of the first non-blank unit in `[from, end)`, or `end`.
    fn first_real_unit_from(&self, from: i64, end: i64) -> i64 {
        let mut q = from / UNIT;
        while q < end / UNIT {
            match self.unit_at(q) {
                Some(u) if u.is_blank() => q += 1,
                Some(_) => return q * UNIT,
                None => break,
            }
        }
        end
    }

    /// Drops the units whose records end past `commit_log_max`, the recovered CommitLog end
    /// (Java: `truncateDirtyLogicFiles`). Walks segments back from the newest: a segment whose
    /// first unit is dirty goes whole; otherwise the cut is inside it. Blank units are kept.
    ///
    /// Unlike Java, the cut tail is zeroed: the stale units would otherwise look valid to the
    /// next recovery and come back, pointing at whatever the CommitLog later holds there. Like
    /// recovery, this must run before the queue serves reads (zeroing rewrites bytes a reader
    /// could be looking at). Java also sets the max physical offset to `commit_log_max` when no
    /// unit is left; here it stays at the last remaining real unit (0 if none).
    ///
    /// # Errors
    /// Deleting or zeroing segments failed.
    pub fn truncate_dirty(&self, commit_log_max: i64) -> io::Result<()> {
        let _writer = self.writer();
        let mut cut = None;
        for seg in self.files.segments().iter().rev() {
            let written = seg.wrote_position() / CQ_STORE_UNIT_SIZE * CQ_STORE_UNIT_SIZE;
            if written == 0 {
                // An empty newest segment says nothing about the ones before it.
                continue;
            }
            match seg.with_bytes(0, written, |b| first_dirty_unit(b, commit_log_max)).flatten() {
                Some(pos) => {
                    cut = Some(seg.file_from_offset() + pos as i64);
                    if pos > 0 {
                        break;
                    }
                }
                None => break,
            }
        }
        if let Some(cut) = cut {
            warn!(topic = %self.topic, queue_id = self.queue_id, from_offset = cut / UNIT,
                max_offset = self.max_offset_in_queue(), commit_log_max,
                "dropping consume queue units beyond the commit log");
            self.files
                .truncate(cut, true)
                .map_err(|e| self.context(e, format_args!("truncating at {}", cut / UNIT)))?;
            if self.min_logic_offset() > cut {
                self.min_logic_offset.store(cut, Ordering::Release);
            }
        }
        let max_physic = self.last_real_end_before(self.files.max_offset());
        self.max_physic_offset.store(max_physic, Ordering::Release);
        if cut.is_some() && self.ext.is_some() {
            self.cut_ext_after_last_unit()?;
        }
        Ok(())
    }

    /// Drops extension units after the one the last unit points to (after recovery or a cut).
    fn cut_ext_after_last_unit(&self) -> io::Result<()> {
        let Some(ext) = &self.ext else { return Ok(()) };
        let mut q = self.files.max_offset() / UNIT - 1;
        let first = self.files.min_offset() / UNIT;
        while q >= first {
            match self.unit_at(q) {
                Some(u) if is_ext_addr(u.tags_code) => {
                    return ext
                        .truncate_by_max_address(u.tags_code)
                        .map_err(|e| self.context(e, "cutting the ext files"))
                }
                Some(u) if u.is_blank() => q -= 1,
                // A unit written without the extension (enabled later): nothing to cut by.
                Some(_) => return Ok(()),
                None => break,
            }
        }
        ext.truncate_all().map_err(|e| self.context(e, "cutting the ext files"))
    }

    /// Moves the min offset to the first unit whose record is at or above `commit_log_min`,
    /// after CommitLog segments were deleted (Java: `correctMinOffset`). Never moves it back.
    /// When even the last unit is below, the min becomes the max (Java keeps "a future slot"),
    /// so the queue reads as empty but keeps its offsets.
    pub fn correct_min_offset(&self, commit_log_min: i64) {
        let _writer = self.writer();
        self.correct_min_offset_locked(commit_log_min);
    }

    fn correct_min_offset_locked(&self, commit_log_min: i64) {
        let end = self.files.max_offset();
        let start = self.min_logic_offset().max(self.files.min_offset());
        if start >= end {
            self.min_logic_offset.store(start, Ordering::Release);
            return;
        }
        // Units point into the CommitLog in order, so a binary search finds the first live one.
        // A blank inside the queue (a filled gap) reads as below any CommitLog offset.
        let live = partition_point(start / UNIT, end / UNIT, |q| {
            self.unit_at(q).is_none_or(|u| u.is_blank() || u.commit_log_offset < commit_log_min)
        });
        let min = live * UNIT;
        if min != self.min_logic_offset() {
            info!(topic = %self.topic, queue_id = self.queue_id, min_offset = live, commit_log_min,
                "consume queue min offset corrected");
        }
        self.min_logic_offset.store(min, Ordering::Release);
    }

    /// Deletes the oldest segments whose last unit points below `commit_log_min` (their records
    /// are gone), never the newest, then corrects the min offset (Java: `deleteExpiredFile`).
    /// Returns how many segments were deleted.
    ///
    /// # Errors
    /// Deleting a file failed; the segments before it are gone and the min is not corrected.
    pub fn delete_expired(&self, commit_log_min: i64) -> io::Result<usize> {
        let _writer = self.writer();
        let mut deleted = 0;
        loop {
            let segments = self.files.segments();
            if segments.len() <= 1 {
                break;
            }
            let expired = segments[0]
                .with_bytes(self.file_size - CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE, |b| {
                    CqUnit::decode(0, b).commit_log_offset < commit_log_min
                })
                .unwrap_or(false);
            if !expired {
                break;
            }
            self.files.delete_first().map_err(|e| self.context(e, "deleting an expired segment"))?;
            deleted += 1;
        }
        self.correct_min_offset_locked(commit_log_min);
        if let Some(ext) = &self.ext {
            // Extension units before the first unit still in the queue are not referenced.
            if let Some(u) = self.unit_at(self.min_offset_in_queue()).filter(|u| is_ext_addr(u.tags_code)) {
                ext.delete_before_address(u.tags_code).map_err(|e| self.context(e, "deleting expired ext files"))?;
            }
        }
        Ok(deleted)
    }

    /// Forces written units to disk (Java: `flush(0)`).
    ///
    /// # Errors
    /// The `msync` failure.
    pub fn flush(&self) -> io::Result<()> {
        if let Some(ext) = &self.ext {
            ext.flush().map_err(|e| self.context(e, "flushing the ext files"))?;
        }
        self.files.flush().map(|_| ()).map_err(|e| self.context(e, "flushing"))
    }

    /// Pages written but not yet flushed.
    pub fn dirty_pages(&self) -> usize {
        self.files.dirty_pages()
    }

    /// Deletes every segment and the queue's directory (Java: `destroy`). The queue then reads
    /// as empty; it is meant to be dropped, since appending would need the directory again.
    ///
    /// # Errors
    /// Deleting a file failed.
    pub fn destroy(&self) -> io::Result<()> {
        let _writer = self.writer();
        self.files.destroy().map_err(|e| self.context(e, "destroying"))?;
        if let Some(ext) = &self.ext {
            ext.destroy().map_err(|e| self.context(e, "destroying the ext files"))?;
        }
        self.max_physic_offset.store(0, Ordering::Release);
        self.min_logic_offset.store(0, Ordering::Release);
        // Best effort: a stray non-segment file keeps the directory, which is harmless.
        if let Err(e) = std::fs::remove_dir(self.files.dir()) {
            debug!(dir = %self.files.dir().display(), error = %e, "consume queue directory kept");
        }
        Ok(())
    }
}

/// Topic -> queue id -> queue.
type QueueTable = HashMap<String, HashMap<i32, Arc<ConsumeQueue>>>;

/// Queues below which loading and recovery stay on the calling thread ([`crate::parallel::map`]:
/// opening is a few system calls per file, and 10,000 queues one after the other took most of a
/// second).
const PARALLEL_FROM: usize = 256;

/// Every ConsumeQueue of the store, by topic and queue id. Java: `ConsumeQueueStore`.
#[derive(Debug)]
pub struct ConsumeQueueStore {
    root: PathBuf,
    file_size: usize,
    ext: Option<ExtOptions>,
    table: RwLock<QueueTable>,
    /// With `enableLmq`: the light queues (`%LMQ%...`), kept apart from `table` because there
    /// may be a million of them, opened when used.
    light: Option<LightQueues>,
}

impl ConsumeQueueStore {
    /// Opens every queue under `root` (the `consumequeue` directory: `<topic>/<queueId>/`),
    /// creating `root` if missing. Entries that are not directories or whose queue directory
    /// name is not a number are skipped. Queues still need [`recover_all`](Self::recover_all).
    ///
    /// # Errors
    /// I/O errors listing directories; a queue that fails to open.
    pub fn load(root: &Path, file_size: usize) -> io::Result<ConsumeQueueStore> {
        ConsumeQueueStore::load_with_ext(root, file_size, None)
    }

    /// As [`load`](Self::load); with `ext`, every queue has extension files.
    ///
    /// # Errors
    /// As [`load`](Self::load).
    pub fn load_with_ext(root: &Path, file_size: usize, ext: Option<ExtOptions>) -> io::Result<ConsumeQueueStore> {
        ConsumeQueueStore::load_with_options(root, file_size, ext, false)
    }

    /// As [`load_with_ext`](Self::load_with_ext); with `light_queues` (`enableLmq`), the
    /// directories of light queues are only counted: their queues open when first used.
    ///
    /// # Errors
    /// As [`load`](Self::load).
    pub fn load_with_options(
        root: &Path,
        file_size: usize,
        ext: Option<ExtOptions>,
        light_queues: bool,
    ) -> io::Result<ConsumeQueueStore> {
        std::fs::create_dir_all(root)
            .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", root.display())))?;
        let mut found = Vec::new();
        let mut light_on_disk = 0;
        // Iterated, not collected: a million light queue directories would leave megabytes
        // of freed entries behind in the allocator.
        let context = |e: io::Error| io::Error::new(e.kind(), format!("listing {}: {e}", root.display()));
        for topic_entry in std::fs::read_dir(root).map_err(context)? {
            let topic_entry = topic_entry.map_err(context)?;
            if light_queues && topic_entry.file_name().to_str().is_some_and(is_lmq) {
                light_on_disk += 1;
                continue;
            }
            let Some(topic) = dir_name(&topic_entry)? else { continue };
            for queue_entry in read_dir(&topic_entry.path())? {
                let Some(name) = dir_name(&queue_entry)? else { continue };
                let Ok(queue_id) = name.parse::<i32>() else {
                    debug!(path = %queue_entry.path().display(), "ignoring non-numeric consume queue directory");
                    continue;
                };
                found.push((topic.clone(), queue_id));
            }
        }
        let opened = crate::parallel::map(&found, found.len() >= PARALLEL_FROM, |(topic, queue_id)| {
            ConsumeQueue::open_with_ext(root, topic, *queue_id, file_size, ext.as_ref())
        })
        .into_iter()
        .collect::<io::Result<Vec<_>>>()?;
        let mut table = QueueTable::new();
        for ((topic, queue_id), queue) in found.into_iter().zip(opened) {
            table.entry(topic).or_default().insert(queue_id, Arc::new(queue));
        }
        let queues: usize = table.values().map(HashMap::len).sum();
        info!(root = %root.display(), topics = table.len(), queues, light_queues = light_on_disk, "consume queues loaded");
        let light = light_queues.then(|| LightQueues::new(root, file_size, light_on_disk, LMQ_OPEN_QUEUES_MAX));
        Ok(ConsumeQueueStore { root: root.to_owned(), file_size, ext, table: RwLock::new(table), light })
    }

    /// The light queues, when `topic` is one and they are enabled.
    fn light_for(&self, topic: &str) -> Option<&LightQueues> {
        self.light.as_ref().filter(|_| is_lmq(topic))
    }

    /// Light queues with a consume queue (0 when they are not enabled).
    pub fn light_queue_count(&self) -> usize {
        self.light.as_ref().map_or(0, LightQueues::count)
    }

    /// Light queues whose consume queue is open now.
    pub fn open_light_queue_count(&self) -> usize {
        self.light.as_ref().map_or(0, LightQueues::open_count)
    }

    /// The end (next queue offset) of light queue `name`'s consume queue, `None` when it has
    /// none.
    ///
    /// # Errors
    /// Its consume queue exists and cannot be opened.
    pub fn light_queue_end(&self, name: &str) -> io::Result<Option<i64>> {
        match self.light_for(name) {
            Some(light) => Ok(light.find(name, false)?.map(|q| q.max_offset_in_queue())),
            None => Ok(None),
        }
    }

    /// Whether light queues are enabled and `name` has a consume queue.
    pub fn light_queue_exists(&self, name: &str) -> bool {
        self.light_for(name).is_some_and(|light| light.exists(name))
    }

    /// Deletes expired segments of every light queue, open or not (see
    /// [`ConsumeQueue::delete_expired`]); retention calls it when the CommitLog's min offset
    /// moved. Returns the segments deleted.
    ///
    /// # Errors
    /// Listing the consume queue directory failed.
    pub fn delete_expired_light(&self, commit_log_min: i64) -> io::Result<usize> {
        self.light.as_ref().map_or(Ok(0), |light| light.delete_expired_all(commit_log_min))
    }

    /// Cuts the units of every light queue (open or not) that point at or past
    /// `commit_log_max`; see [`ConsumeQueue::truncate_dirty`]. Returns how many it visited.
    ///
    /// # Errors
    /// The first queue that failed.
    pub fn truncate_dirty_light(&self, commit_log_max: i64) -> io::Result<usize> {
        self.light.as_ref().map_or(Ok(0), |light| light.truncate_dirty_all(commit_log_max))
    }

    fn read_table(&self) -> std::sync::RwLockReadGuard<'_, QueueTable> {
        // Entries are inserted and removed whole; a panic elsewhere cannot leave one half-made.
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_table(&self) -> std::sync::RwLockWriteGuard<'_, QueueTable> {
        self.table.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The queue, created (empty) if it does not exist.
    ///
    /// # Errors
    /// A topic that is not a safe directory name; creating the directory failed.
    pub fn find_or_create(&self, topic: &str, queue_id: i32) -> io::Result<Arc<ConsumeQueue>> {
        if let Some(light) = self.light_for(topic) {
            if queue_id != crate::LMQ_QUEUE_ID {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("light queue {topic} has only queue id 0, not {queue_id}"),
                ));
            }
            return light
                .find(topic, true)?
                .ok_or_else(|| io::Error::other(format!("light queue {topic} not created")));
        }
        if let Some(q) = self.find(topic, queue_id) {
            return Ok(q);
        }
        let mut table = self.write_table();
        let queues = table.entry(topic.to_owned()).or_default();
        if let Some(q) = queues.get(&queue_id) {
            return Ok(q.clone());
        }
        let q = Arc::new(ConsumeQueue::open_with_ext(&self.root, topic, queue_id, self.file_size, self.ext.as_ref())?);
        queues.insert(queue_id, q.clone());
        Ok(q)
    }

    /// The queue, if it exists.
    /// A light queue is opened from disk if closed; one that cannot be is logged and `None`.
    pub fn find(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        if let Some(light) = self.light_for(topic) {
            if queue_id != crate::LMQ_QUEUE_ID {
                return None;
            }
            return light.find(topic, false).unwrap_or_else(|e| {
                warn!(queue = topic, error = %e, "light queue cannot be opened");
                None
            });
        }
        self.read_table().get(topic)?.get(&queue_id).cloned()
    }

    /// Every queue (of light queues, the open ones), sorted by topic and queue id.
    pub fn all(&self) -> Vec<(String, i32, Arc<ConsumeQueue>)> {
        let mut all: Vec<_> = self
            .read_table()
            .iter()
            .flat_map(|(topic, queues)| queues.iter().map(|(id, q)| (topic.clone(), *id, q.clone())))
            .collect();
        if let Some(light) = &self.light {
            all.extend(light.all_open().into_iter().map(|(name, q)| (name, crate::LMQ_QUEUE_ID, q)));
        }
        all.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        all
    }

    /// Recovers every queue (see [`ConsumeQueue::recover`]).
    ///
    /// # Errors
    /// The first queue that failed.
    pub fn recover_all(&self) -> io::Result<()> {
        let started = std::time::Instant::now();
        let queues = self.all();
        crate::parallel::map(&queues, queues.len() >= PARALLEL_FROM, |(_, _, q)| q.recover())
            .into_iter()
            .collect::<io::Result<()>>()?;
        info!(queues = queues.len(), elapsed_ms = started.elapsed().as_millis() as u64, "consume queues recovered");
        Ok(())
    }

    /// Cuts every queue back to the recovered CommitLog end (see [`ConsumeQueue::truncate_dirty`]).
    ///
    /// # Errors
    /// The first queue that failed.
    pub fn truncate_dirty_all(&self, commit_log_max: i64) -> io::Result<()> {
        self.all().iter().try_for_each(|(_, _, q)| q.truncate_dirty(commit_log_max))
    }

    /// The highest CommitLog end any queue points to; 0 with no units. After a clean restart,
    /// dispatch resumes here (Java: `getMaxPhyOffsetInConsumeQueue`).
    pub fn max_physic_offset(&self) -> i64 {
        self.all().iter().map(|(_, _, q)| q.max_physic_offset()).max().unwrap_or(0)
    }

    /// Flushes every queue, continuing past failures.
    ///
    /// # Errors
    /// The first failure.
    pub fn flush_all(&self) -> io::Result<()> {
        let mut first_error = None;
        for (_, _, q) in self.all() {
            if let Err(e) = q.flush() {
                warn!(error = %e, "consume queue flush failed");
                first_error.get_or_insert(e);
            }
        }
        // After the open ones: a light queue closed meanwhile is among these.
        if let Some(light) = &self.light {
            if let Err(e) = light.sync_closed() {
                warn!(error = %e, "closed light queues not synced");
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Removes a topic: its queues are destroyed and its directory deleted.
    ///
    /// # Errors
    /// A topic that is not a safe directory name; deleting files failed.
    pub fn delete_topic(&self, topic: &str) -> io::Result<()> {
        check_topic_path(topic)?;
        if let Some(light) = self.light_for(topic) {
            return light.destroy(topic).map(|_| ());
        }
        let removed = self.write_table().remove(topic);
        for q in removed.into_iter().flat_map(HashMap::into_values) {
            q.destroy()?;
        }
        if let Some(ext) = &self.ext {
            if let Err(e) = std::fs::remove_dir_all(ext.root.join(topic)) {
                debug!(topic, error = %e, "consume queue ext directory not removed");
            }
        }
        // Only an empty directory goes (Java: `deleteEmptyDirectory`): files a queue created
        // again meanwhile must not be deleted under it.
        if let Err(e) = std::fs::remove_dir(self.root.join(topic)) {
            debug!(topic, error = %e, "consume queue directory of a deleted topic not removed");
        }
        Ok(())
    }

    /// Topics that have consume queues.
    pub fn topics(&self) -> Vec<String> {
        self.read_table().keys().cloned().collect()
    }

    /// The queues whose units all point below `commit_log_min` (their messages are gone),
    /// except those of the topics `keep` protects. A queue without units is not among them (it
    /// may have been created just now). Java: `ConsumeQueueStore#cleanExpired`'s test.
    pub fn expired(&self, commit_log_min: i64, keep: impl Fn(&str) -> bool) -> Vec<(String, i32, Arc<ConsumeQueue>)> {
        self.all()
            .into_iter()
            .filter(|(topic, _, q)| {
                let end = q.max_physic_offset();
                self.light_for(topic).is_none() && !keep(topic) && end > 0 && end <= commit_log_min
            })
            .collect()
    }

    /// The queues of `topic`.
    pub fn queues_of(&self, topic: &str) -> Vec<(i32, Arc<ConsumeQueue>)> {
        if self.light_for(topic).is_some() {
            return self.find(topic, crate::LMQ_QUEUE_ID).map(|q| vec![(crate::LMQ_QUEUE_ID, q)]).unwrap_or_default();
        }
        self.read_table().get(topic).map(|qs| qs.iter().map(|(id, q)| (*id, q.clone())).collect()).unwrap_or_default()
    }

    /// Removes one queue from the table and destroys its files; a topic left without queues
    /// goes from the table. Returns whether the queue was there.
    ///
    /// # Errors
    /// Deleting files failed.
    pub fn destroy_queue(&self, topic: &str, queue_id: i32) -> io::Result<bool> {
        let removed = {
            let mut table = self.write_table();
            let removed = table.get_mut(topic).and_then(|qs| qs.remove(&queue_id));
            if table.get(topic).is_some_and(HashMap::is_empty) {
                table.remove(topic);
            }
            removed
        };
        match removed {
            Some(q) => q.destroy().map(|()| true),
            None => Ok(false),
        }
    }

    /// `((topic, queue id), max offset)` of every queue: the next queue offset to assign, for
    /// rebuilding the CommitLog's topic-queue table after recovery (Java: `recoverOffsetTable`).
    /// Light queues are not among them: their offsets are found when next used.
    pub fn queue_max_offsets(&self) -> Vec<((String, i32), i64)> {
        self.all()
            .into_iter()
            .filter(|(topic, _, _)| self.light_for(topic).is_none())
            .map(|(topic, id, q)| ((topic, id), q.max_offset_in_queue()))
            .collect()
    }
}

fn read_dir(dir: &Path) -> io::Result<Vec<std::fs::DirEntry>> {
    let context = |e: io::Error| io::Error::new(e.kind(), format!("listing {}: {e}", dir.display()));
    std::fs::read_dir(dir).map_err(context)?.map(|e| e.map_err(context)).collect()
}

/// The UTF-8 name of a directory entry, or `None` (logged) for files and non-UTF-8 names.
fn dir_name(entry: &std::fs::DirEntry) -> io::Result<Option<String>> {
    let is_dir = entry
        .file_type()
        .map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", entry.path().display())))?
        .is_dir();
    match entry.file_name().into_string() {
        Ok(name) if is_dir => Ok(Some(name)),
        _ => {
            debug!(path = %entry.path().display(), "ignoring entry in the consume queue directory");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(list: &[(i64, i32, i64)]) -> Vec<u8> {
        list.iter().flat_map(|&(p, s, t)| encode_unit(p, s, t)).collect()
    }

    #[test]
    fn unit_is_big_endian_offset_size_tags() {
        let b = encode_unit(0x0102_0304_0506_0708, 0x0A0B_0C0D, -2);
        assert_eq!(&b[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[8..12], &[0x0A, 0x0B, 0x0C, 0x0D]);
        assert_eq!(&b[12..], &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE]);
        let u = CqUnit::decode(7, &b);
        assert_eq!(
            u,
            CqUnit { queue_offset: 7, commit_log_offset: 0x0102_0304_0506_0708, size: 0x0A0B_0C0D, tags_code: -2 }
        );
        assert!(!u.is_blank());
        assert!(CqUnit::decode(0, &encode_unit(0, BLANK_SIZE, 0)).is_blank());
    }

    #[test]
    fn scan_keeps_blanks_and_stops_at_the_first_implausible_unit() {
        let bytes = units(&[(0, BLANK_SIZE, 0), (100, 50, 1), (150, 10, 2), (0, 0, 0), (200, 10, 3)]);
        assert_eq!(scan_valid_prefix(&bytes), Scan { valid_len: 60, last_real_end: Some(160) });
        let blanks_only = units(&[(0, BLANK_SIZE, 0), (0, BLANK_SIZE, 0)]);
        assert_eq!(scan_valid_prefix(&blanks_only), Scan { valid_len: 40, last_real_end: None });
        let negative = units(&[(-1, 10, 0)]);
        assert_eq!(scan_valid_prefix(&negative), Scan::default());
        // A trailing partial unit is not a unit.
        assert_eq!(scan_valid_prefix(&bytes[..30]).valid_len, 20);
    }

    #[test]
    fn first_dirty_unit_skips_blanks_and_compares_record_ends() {
        let bytes = units(&[(0, BLANK_SIZE, 0), (100, 50, 1), (150, 10, 2)]);
        assert_eq!(first_dirty_unit(&bytes, 160), None);
        assert_eq!(first_dirty_unit(&bytes, 159), Some(40));
        assert_eq!(first_dirty_unit(&bytes, 150), Some(40));
        assert_eq!(first_dirty_unit(&bytes, 149), Some(20));
        assert_eq!(first_dirty_unit(&bytes, 0), Some(20));
    }

    #[test]
    fn a_first_page_tells_whether_a_queue_ends_below() {
        let mut page = units(&[(0, BLANK_SIZE, 0), (100, 50, 1), (150, 10, 2)]);
        page.resize(4096, 0);
        assert!(page_ends_below(&page, 160));
        assert!(!page_ends_below(&page, 159), "a unit past the end");
        assert!(!page_ends_below(&[0; 4096], 160), "nothing shown: open it");
        let full = units(&[(100, 50, 1), (150, 10, 2)]);
        assert!(!page_ends_below(&full, 160), "no end seen in the page");
        let mut garbage = units(&[(100, 50, 1)]);
        garbage.extend_from_slice(&[0xab; 20]);
        garbage.resize(4096, 0);
        assert!(!page_ends_below(&garbage, 160), "what follows is not the end");
    }

    #[test]
    fn partition_point_finds_the_first_false() {
        assert_eq!(partition_point(3, 10, |i| i < 6), 6);
        assert_eq!(partition_point(3, 10, |_| true), 10);
        assert_eq!(partition_point(3, 10, |_| false), 3);
        assert_eq!(partition_point(5, 5, |_| true), 5);
    }

    #[test]
    fn topic_names_that_escape_the_directory_are_refused() {
        for bad in ["", ".", "..", "a/b", "a\\b", "a\0b"] {
            assert!(check_topic_path(bad).is_err(), "{bad:?}");
        }
        assert!(check_topic_path("%RETRY%group-1").is_ok());
    }

    #[test]
    fn queues_are_shareable_between_threads() {
        fn check<T: Send + Sync>() {}
        check::<ConsumeQueue>();
        check::<ConsumeQueueStore>();
    }

    #[test]
    fn segment_size_must_be_whole_units() {
        let dir = tempfile::tempdir().unwrap();
        let err = ConsumeQueue::open(dir.path(), "t", 0, 30).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("t/0"), "{err}");
    }

    #[test]
    fn invalid_requests_are_refused_with_context() {
        let dir = tempfile::tempdir().unwrap();
        let q = ConsumeQueue::open(dir.path(), "t", 3, 200).unwrap();
        let bad = [(-1, 10, 0), (0, 0, 0), (0, 10, -1)];
        for (phy, size, offset) in bad {
            let req = DispatchRequest {
                commit_log_offset: phy,
                msg_size: size,
                consume_queue_offset: offset,
                ..Default::default()
            };
            let err = q.put(&req).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert!(err.to_string().contains("consume queue t/3"), "{err}");
        }
        assert_eq!(q.max_offset_in_queue(), 0);
    }

    #[test]
    fn a_huge_gap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let q = ConsumeQueue::open(dir.path(), "t", 0, 200).unwrap();
        let req = |phy, offset| DispatchRequest {
            commit_log_offset: phy,
            msg_size: 10,
            consume_queue_offset: offset,
            ..Default::default()
        };
        assert!(q.put(&req(0, 0)).unwrap());
        let err = q.put(&req(10, GAP_FILL_MAX_UNITS + 2)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(q.max_offset_in_queue(), 1);
    }
}
