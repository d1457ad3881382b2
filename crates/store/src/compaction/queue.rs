//! One compaction topic queue's compacted store: pairs of segments, a compaction log file
//! (CommitLog-format records, each with its PHYSICALOFFSET rewritten to its position in the
//! compaction log) and a compaction consume queue file of the same name (46-byte units with
//! the original queue offsets). Records are appended to the last pair as dispatch copies them;
//! a compaction run rewrites the sealed pairs, keeping the newest message per key. Java:
//! `CompactionLog`, `TopicPartitionLog`, `SparseConsumeQueue`.
//!
//! Files are read and written with `pread`/`pwrite` (no mappings): a full disk is a write
//! error, and a queue costs two descriptors, not two mappings.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

use bytes::Bytes;
use ferromq_protocol::message::{keys, sysflag, RecordOrBlank, RecordView};
use tracing::{info, warn};

use super::unit::{end_unit, Unit, UNIT_SIZE};
use crate::mapped_file::offset_to_file_name;

/// The blank record that ends a full log segment: size, then Java's BLANK_MAGIC_CODE.
const BLANK_MAGIC: i32 = -875_286_124;
/// The sub-directory a compaction run writes its output to.
pub(crate) const COMPACTING_DIR: &str = "compacting";
/// Written (and synced) into `compacting/` once a run's output is complete: it lists the
/// inputs and outputs, so a restart finishes a replacement that was under way.
const COMMIT_MARKER: &str = "COMMIT";
/// Written (and synced) once the outputs were found whole and their moves begin.
const MOVING_MARKER: &str = "MOVING";
/// Memory a key takes in a run's map besides its bytes (the map entry, the string's header
/// and allocation).
const KEY_ENTRY_OVERHEAD: usize = 64;
/// Position of PHYSICALOFFSET in a record.
const PHYSICAL_OFFSET_AT: usize = 28;

/// Segment sizes: the log's is a multiple of the consume queue's, as Java computes them
/// (`CompactionLog#getCompactionLogSize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sizes {
    pub log: u64,
    pub cq: u64,
}

impl Sizes {
    /// From `compactionMappedFileSize` and `compactionCqMappedFileSize`.
    pub(crate) fn new(log_setting: u64, cq_setting: u64) -> Sizes {
        let cq = (cq_setting / UNIT_SIZE as u64).max(2) * UNIT_SIZE as u64;
        let n = log_setting / cq;
        let log = if n < 5 {
            5 * cq
        } else {
            let rest = log_setting % cq;
            if rest > 0 && rest < cq / 2 {
                n * cq
            } else {
                (n + 1) * cq
            }
        };
        Sizes { log, cq }
    }

    fn units_per_segment(&self) -> u64 {
        self.cq / UNIT_SIZE as u64
    }
}

/// One log file and its consume queue file.
#[derive(Debug)]
struct Segment {
    /// Compaction log offset of the file's first byte (its name).
    base: i64,
    log: File,
    cq: File,
    /// Bytes of records written.
    log_len: u64,
    /// Units written (end unit excluded).
    units: u64,
    first_offset: i64,
    last_offset: i64,
    /// Full: it takes no more records.
    sealed: bool,
}

impl Segment {
    fn create(log_dir: &Path, cq_dir: &Path, base: i64, sizes: Sizes) -> io::Result<Segment> {
        let open = |dir: &Path, len: u64| -> io::Result<File> {
            let path = dir.join(offset_to_file_name(base));
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", path.display())))?;
            // Java's files have their configured length; the blocks come with the writes.
            file.set_len(len)?;
            Ok(file)
        };
        Ok(Segment {
            base,
            log: open(log_dir, sizes.log)?,
            cq: open(cq_dir, sizes.cq)?,
            log_len: 0,
            units: 0,
            first_offset: -1,
            last_offset: -1,
            sealed: false,
        })
    }

    /// Opens an existing pair and finds its units: up to the first invalid one.
    fn open(log_path: &Path, cq_path: &Path, base: i64) -> io::Result<Segment> {
        let open = |path: &Path| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map_err(|e| io::Error::new(e.kind(), format!("opening {}: {e}", path.display())))
        };
        let (log, cq) = (open(log_path)?, open(cq_path)?);
        let cq_len = cq.metadata()?.len();
        let mut segment =
            Segment { base, log, cq, log_len: 0, units: 0, first_offset: -1, last_offset: -1, sealed: false };
        let mut buf = vec![0u8; 64 * UNIT_SIZE];
        let mut at = 0u64;
        'scan: while at < cq_len {
            let n = segment.cq.read_at(&mut buf, at)?;
            if n < UNIT_SIZE {
                break;
            }
            for chunk in buf[..n - n % UNIT_SIZE].chunks_exact(UNIT_SIZE) {
                let Some(unit) = Unit::decode(chunk).filter(|u| u.position >= base) else {
                    // The end unit seals the segment; zeros end what was written.
                    segment.sealed = chunk[..8] == [0xff; 8];
                    break 'scan;
                };
                if segment.units == 0 {
                    segment.first_offset = unit.queue_offset;
                }
                segment.last_offset = unit.queue_offset;
                segment.log_len = (unit.position - base) as u64 + unit.size as u64;
                segment.units += 1;
            }
            at += (n - n % UNIT_SIZE) as u64;
        }
        Ok(segment)
    }

    fn unit(&self, index: u64) -> io::Result<Option<Unit>> {
        let mut buf = [0u8; UNIT_SIZE];
        self.cq.read_exact_at(&mut buf, index * UNIT_SIZE as u64)?;
        Ok(Unit::decode(&buf))
    }

    /// Index of the first unit whose queue offset is at least `offset` (`units` if none).
    fn lower_bound(&self, offset: i64) -> io::Result<u64> {
        let (mut lo, mut hi) = (0, self.units);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.unit(mid)? {
                Some(u) if u.queue_offset < offset => lo = mid + 1,
                _ => hi = mid,
            }
        }
        Ok(lo)
    }

    fn record(&self, unit: &Unit) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; unit.size as usize];
        self.log.read_exact_at(&mut buf, (unit.position - self.base) as u64)?;
        Ok(buf)
    }

    fn sync(&self) -> io::Result<()> {
        self.log.sync_data()?;
        self.cq.sync_data()
    }
}

/// What a record is to compaction: its key (the whole KEYS value) and whether its body is empty
/// (a tombstone). A record that does not parse has no key and is kept.
fn key_of(record: &[u8]) -> (Option<String>, bool) {
    match RecordView::parse(record) {
        Ok(RecordOrBlank::Record(view)) => {
            let key = view
                .properties_str()
                .ok()
                .and_then(|p| ferromq_protocol::message::find_property(p, keys::KEYS))
                .filter(|k| !k.trim().is_empty())
                .map(str::to_owned);
            let empty = view.body.is_empty() && view.sys_flag & sysflag::COMPRESSED_FLAG == 0;
            (key, empty)
        }
        _ => (None, false),
    }
}

/// A queue's segments.
#[derive(Debug)]
pub(crate) struct CompactionQueue {
    pub topic: String,
    pub queue_id: i32,
    log_dir: PathBuf,
    cq_dir: PathBuf,
    sizes: Sizes,
    segments: RwLock<Vec<Segment>>,
    /// One compaction run at a time.
    compacting: Mutex<()>,
}

/// Where a run stops early: fault injection for the crash tests (a run stopped there leaves
/// its files as a process killed there would).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Never,
    #[cfg_attr(not(test), allow(dead_code))]
    BeforeMarker,
    #[cfg_attr(not(test), allow(dead_code))]
    BeforeSwap,
}

/// Where a read landed.
#[derive(Debug, Default)]
pub(crate) struct Read {
    pub records: Vec<(i64, Bytes)>,
    /// The offset after the last unit looked at.
    pub next: i64,
}

impl CompactionQueue {
    /// Opens (or creates) the queue's directories, finishing or discarding a compaction run a
    /// crash interrupted, and loads its segments.
    pub(crate) fn open(root: &Path, topic: &str, queue_id: i32, sizes: Sizes) -> io::Result<CompactionQueue> {
        let log_dir = root.join("compactionLog").join(topic).join(queue_id.to_string());
        let cq_dir = root.join("compactionCq").join(topic).join(queue_id.to_string());
        for dir in [&log_dir, &cq_dir] {
            std::fs::create_dir_all(dir)
                .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", dir.display())))?;
        }
        settle_interrupted_run(&log_dir, &cq_dir)?;
        let mut bases: Vec<i64> = std::fs::read_dir(&log_dir)?
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i64>().ok()))
            .collect();
        bases.sort_unstable();
        let mut segments = Vec::with_capacity(bases.len());
        for base in bases {
            let name = offset_to_file_name(base);
            let cq_path = cq_dir.join(&name);
            if !cq_path.is_file() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "compaction log {} has no consume queue file {}",
                        log_dir.join(&name).display(),
                        cq_path.display()
                    ),
                ));
            }
            segments.push(Segment::open(&log_dir.join(&name), &cq_path, base)?);
        }
        // Only the last segment takes appends; the others are full whatever their end says.
        let count = segments.len();
        for segment in segments.iter_mut().take(count.saturating_sub(1)) {
            segment.sealed = true;
        }
        Ok(CompactionQueue {
            topic: topic.to_owned(),
            queue_id,
            log_dir,
            cq_dir,
            sizes,
            segments: RwLock::new(segments),
            compacting: Mutex::new(()),
        })
    }

    fn read_segments(&self) -> std::sync::RwLockReadGuard<'_, Vec<Segment>> {
        // Segments change whole under the write lock.
        self.segments.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_segments(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Segment>> {
        self.segments.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The first queue offset held (-1 when none) and the offset after the last (0 when none).
    pub(crate) fn bounds(&self) -> (i64, i64) {
        let segments = self.read_segments();
        let min = segments.iter().find(|s| s.units > 0).map_or(-1, |s| s.first_offset);
        let max = segments.iter().rev().find(|s| s.units > 0).map_or(0, |s| s.last_offset + 1);
        (min, max)
    }

    /// Appends `record` (a CommitLog record of this queue at `queue_offset`) unless an offset
    /// at or past it is already held (a record dispatched again after a restart).
    ///
    /// # Errors
    /// Writing failed (the caller retries the record later).
    pub(crate) fn append(
        &self,
        record: &[u8],
        queue_offset: i64,
        tags_code: i64,
        store_timestamp: i64,
    ) -> io::Result<bool> {
        let mut segments = self.write_segments();
        if segments.iter().rev().find(|s| s.units > 0).is_some_and(|s| s.last_offset >= queue_offset) {
            return Ok(false);
        }
        append_to(
            &mut segments,
            &self.log_dir,
            &self.cq_dir,
            self.sizes,
            record,
            queue_offset,
            tags_code,
            store_timestamp,
        )?;
        Ok(true)
    }

    /// Up to `max_count` records (and about `max_bytes`) from the first held offset at or after
    /// `offset`.
    ///
    /// # Errors
    /// Reading a file failed.
    pub(crate) fn read(&self, offset: i64, max_count: usize, max_bytes: usize) -> io::Result<Read> {
        let segments = self.read_segments();
        let mut read = Read { records: Vec::new(), next: offset };
        let mut bytes = 0usize;
        let start = segments.iter().position(|s| s.units > 0 && s.last_offset >= offset);
        let Some(start) = start else { return Ok(read) };
        for segment in &segments[start..] {
            let mut index = if segment.first_offset >= offset { 0 } else { segment.lower_bound(offset)? };
            while index < segment.units {
                let Some(unit) = segment.unit(index)? else { break };
                if read.records.len() >= max_count
                    || (!read.records.is_empty() && bytes + unit.size as usize > max_bytes)
                {
                    return Ok(read);
                }
                let record = segment.record(&unit)?;
                bytes += record.len();
                read.next = unit.queue_offset + 1;
                read.records.push((unit.queue_offset, Bytes::from(record)));
                index += 1;
            }
        }
        Ok(read)
    }

    /// Runs one compaction: seals the last segment if it holds records, then rewrites every
    /// sealed segment keeping, of the records past `checkpoint`'s keys, only the newest per
    /// key (a newest one with an empty body goes too: a tombstone). Returns the highest queue
    /// offset the run's key map covered (the new checkpoint), or `None` when there was nothing
    /// new to compact.
    ///
    /// Crash safety: the output is written and synced under `compacting/`, then a marker
    /// naming inputs and outputs is synced, and only then are files replaced; a restart finishes
    /// a marked replacement and discards an unmarked output (docs/decisions/0029).
    ///
    /// # Errors
    /// Reading or writing failed; the live segments are
    /// then unchanged.
    pub(crate) fn compact(&self, checkpoint: i64, map_bytes: usize) -> io::Result<Option<i64>> {
        self.run(checkpoint, map_bytes, Stop::Never)
    }

    fn run(&self, checkpoint: i64, map_bytes: usize, stop: Stop) -> io::Result<Option<i64>> {
        let _run = self.compacting.lock().unwrap_or_else(|e| e.into_inner());
        {
            let mut segments = self.write_segments();
            if let Some(last) = segments.last_mut().filter(|s| s.units > 0 && !s.sealed) {
                seal(last, self.sizes)?;
            }
        }
        // Sealed segments do not change while this run holds `compacting`: appends go to a
        // newer segment, and only runs replace sealed ones.
        let inputs: Vec<(i64, u64, i64)> =
            self.read_segments().iter().filter(|s| s.sealed).map(|s| (s.base, s.units, s.last_offset)).collect();
        if !inputs.iter().any(|(_, units, last)| *units > 0 && *last > checkpoint) {
            return Ok(None);
        }
        // The newest offset of each key written since the checkpoint, up to `map_bytes` of
        // map: past it the mapping stops, this run compacts what was mapped (the rest is kept
        // as a tail) and the next run goes on from there (Java fails the run, and every later
        // one, with "offset map is full").
        let mut newest: HashMap<String, i64> = HashMap::new();
        let mut last_mapped = checkpoint;
        let (mut used, mut full) = (0usize, false);
        self.for_each_input(&inputs, |unit, record| {
            let offset = unit.queue_offset;
            if offset > checkpoint && !full {
                if let (Some(key), _) = key_of(record) {
                    if !newest.contains_key(&key) {
                        let cost = key.len() + KEY_ENTRY_OVERHEAD;
                        if used + cost > map_bytes && !newest.is_empty() {
                            full = true;
                            return Ok(());
                        }
                        used += cost;
                    }
                    newest.insert(key, offset);
                }
                last_mapped = last_mapped.max(offset);
            }
            Ok(())
        })?;
        if full {
            warn!(topic = %self.topic, queue_id = self.queue_id, keys = newest.len(), up_to = last_mapped,
                "compaction key map full (maxOffsetMapSize): this run compacts up to the offset mapped");
        }
        let out_log = self.log_dir.join(COMPACTING_DIR);
        let out_cq = self.cq_dir.join(COMPACTING_DIR);
        // A previous run's leftovers: a marked output is finished, an unmarked one discarded.
        {
            let _segments = self.write_segments();
            settle_interrupted_run(&self.log_dir, &self.cq_dir)?;
        }
        for dir in [&out_log, &out_cq] {
            std::fs::create_dir_all(dir)?;
        }
        let mut output: Vec<Segment> = Vec::new();
        let (mut kept, mut dropped) = (0u64, 0u64);
        self.for_each_input(&inputs, |unit, record| {
            let offset = unit.queue_offset;
            let (key, empty) = key_of(record);
            let keep = offset > last_mapped
                || match key {
                    Some(key) => offset >= newest.get(&key).copied().unwrap_or(-1) && !empty,
                    None => true,
                };
            if keep {
                append_to(
                    &mut output,
                    &out_log,
                    &out_cq,
                    self.sizes,
                    record,
                    offset,
                    unit.tags_code,
                    unit.store_timestamp,
                )?;
                kept += 1;
            } else {
                dropped += 1;
            }
            Ok(())
        })?;
        for segment in &mut output {
            if !segment.sealed {
                seal(segment, self.sizes)?;
            }
            segment.sync()?;
        }
        if stop == Stop::BeforeMarker {
            return Ok(None);
        }
        let input_names: Vec<String> = inputs.iter().map(|(base, ..)| offset_to_file_name(*base)).collect();
        let output_names: Vec<String> = output.iter().map(|s| offset_to_file_name(s.base)).collect();
        let marker = format!("inputs {}\noutputs {}\n", input_names.join(" "), output_names.join(" "));
        // The outputs' names in both directories are on disk before the marker says to use them.
        for dir in [&out_cq, &self.cq_dir, &out_log] {
            ferromq_config::file::sync_dir(dir).map_err(|e| io::Error::other(e.to_string()))?;
        }
        ferromq_config::file::write_synced(&out_log.join(COMMIT_MARKER), marker.as_bytes())
            .map_err(|e| io::Error::other(e.to_string()))?;
        ferromq_config::file::sync_dir(&out_log).map_err(|e| io::Error::other(e.to_string()))?;
        drop(output);
        if stop == Stop::BeforeSwap {
            return Ok(None);
        }
        {
            // Readers wait for the swap; appends go on into the newest segment afterwards.
            let mut segments = self.write_segments();
            settle_interrupted_run(&self.log_dir, &self.cq_dir)?;
            let mut reopened = Vec::with_capacity(output_names.len() + segments.len());
            for name in &output_names {
                let base = name.parse::<i64>().map_err(|_| io::Error::other(format!("bad output name {name}")))?;
                let mut segment = Segment::open(&self.log_dir.join(name), &self.cq_dir.join(name), base)?;
                segment.sealed = true;
                reopened.push(segment);
            }
            // Only now that the outputs are open does the list change. Segments that were no
            // input (the one appends went to during the run, and any it rolled to) stay, after
            // the outputs.
            reopened.extend(segments.drain(..).filter(|s| !inputs.iter().any(|(base, ..)| *base == s.base)));
            *segments = reopened;
        }
        info!(topic = %self.topic, queue_id = self.queue_id, kept, dropped, keys = newest.len(), checkpoint = last_mapped,
            "compaction run done");
        Ok(Some(last_mapped))
    }

    fn for_each_input(
        &self,
        inputs: &[(i64, u64, i64)],
        mut f: impl FnMut(&Unit, &[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        for (base, units, _) in inputs {
            for index in 0..*units {
                let (unit, record) = {
                    let segments = self.read_segments();
                    let segment = segments
                        .iter()
                        .find(|s| s.base == *base)
                        .ok_or_else(|| io::Error::other("compaction input segment vanished"))?;
                    let Some(unit) = segment.unit(index)? else { break };
                    (unit, segment.record(&unit)?)
                };
                f(&unit, &record)?;
            }
        }
        Ok(())
    }

    /// Flushes the files to disk.
    ///
    /// # Errors
    /// A failed sync.
    pub(crate) fn flush(&self) -> io::Result<()> {
        self.read_segments().iter().try_for_each(Segment::sync)
    }
}

/// Appends a record and its unit to the last of `segments`, rolling to a new pair when the
/// record or the unit (plus the end unit) does not fit.
#[allow(clippy::too_many_arguments)]
fn append_to(
    segments: &mut Vec<Segment>,
    log_dir: &Path,
    cq_dir: &Path,
    sizes: Sizes,
    record: &[u8],
    queue_offset: i64,
    tags_code: i64,
    store_timestamp: i64,
) -> io::Result<()> {
    if record.len() < PHYSICAL_OFFSET_AT + 8 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a {}-byte record is too short", record.len())));
    }
    if record.len() as u64 + 8 > sizes.log {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a {}-byte record does not fit a {}-byte compaction log segment", record.len(), sizes.log),
        ));
    }
    let fits = |s: &Segment| {
        !s.sealed && s.units + 2 <= sizes.units_per_segment() && s.log_len + record.len() as u64 + 8 <= sizes.log
    };
    if segments.last().is_none_or(|s| !fits(s)) {
        let base = match segments.last_mut() {
            Some(last) => {
                if !last.sealed {
                    seal(last, sizes)?;
                }
                last.base + sizes.log as i64
            }
            None => 0,
        };
        segments.push(Segment::create(log_dir, cq_dir, base, sizes)?);
    }
    let segment = segments.last_mut().expect("pushed above");
    let position = segment.base + segment.log_len as i64;
    let mut copy = record.to_vec();
    copy[PHYSICAL_OFFSET_AT..PHYSICAL_OFFSET_AT + 8].copy_from_slice(&position.to_be_bytes());
    segment.log.write_all_at(&copy, segment.log_len)?;
    let unit = Unit { position, size: record.len() as i32, tags_code, store_timestamp, queue_offset };
    // The unit last: a unit always points at a whole record.
    segment.cq.write_all_at(&unit.encode(), segment.units * UNIT_SIZE as u64)?;
    segment.log_len += record.len() as u64;
    if segment.units == 0 {
        segment.first_offset = queue_offset;
    }
    segment.last_offset = queue_offset;
    segment.units += 1;
    Ok(())
}

/// Closes a segment: the end unit after its units, the blank record after its records.
fn seal(segment: &mut Segment, sizes: Sizes) -> io::Result<()> {
    segment.cq.write_all_at(&end_unit(), segment.units * UNIT_SIZE as u64)?;
    let left = sizes.log.saturating_sub(segment.log_len);
    if left >= 8 {
        let mut blank = [0u8; 8];
        blank[..4].copy_from_slice(&i32::try_from(left).unwrap_or(i32::MAX).to_be_bytes());
        blank[4..].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
        segment.log.write_all_at(&blank, segment.log_len)?;
    }
    segment.sealed = true;
    Ok(())
}

/// Finishes a compaction run's replacement whose marker was written (moves each output into
/// place, deletes the inputs it replaced), or discards an output without a marker. Idempotent:
/// a crash during it is finished by the next call.
fn settle_interrupted_run(log_dir: &Path, cq_dir: &Path) -> io::Result<()> {
    let out_log = log_dir.join(COMPACTING_DIR);
    let out_cq = cq_dir.join(COMPACTING_DIR);
    let marker = out_log.join(COMMIT_MARKER);
    match std::fs::read_to_string(&marker) {
        Ok(text) => {
            let list = |label: &str| -> Vec<String> {
                text.lines()
                    .find_map(|l| l.strip_prefix(label))
                    .map(|rest| rest.split_whitespace().map(str::to_owned).collect())
                    .unwrap_or_default()
            };
            let (inputs, outputs) = (list("inputs "), list("outputs "));
            // Before the first move, every output pair must be in `compacting/`; if one is
            // missing (a power cut lost it), nothing has been replaced yet: discard the run.
            // `MOVING` records that the check passed and moves began (an output's name may be
            // an input's, so "already moved" cannot be told from the files).
            let moving = out_log.join(MOVING_MARKER);
            if !moving.exists() {
                let complete = outputs.iter().all(|name| out_log.join(name).is_file() && out_cq.join(name).is_file());
                if !complete {
                    warn!(dir = %log_dir.display(), "compaction output incomplete after a crash; discarded");
                    std::fs::remove_file(&marker)?;
                    return discard_outputs(&out_log, &out_cq);
                }
                ferromq_config::file::write_synced(&moving, b"").map_err(|e| io::Error::other(e.to_string()))?;
                ferromq_config::file::sync_dir(&out_log).map_err(|e| io::Error::other(e.to_string()))?;
            }
            for name in &outputs {
                for (from, to) in [(&out_log, log_dir), (&out_cq, cq_dir)] {
                    let source = from.join(name);
                    if source.exists() {
                        std::fs::rename(&source, to.join(name))?;
                    }
                }
            }
            for name in inputs.iter().filter(|n| !outputs.contains(n)) {
                for dir in [log_dir, cq_dir] {
                    match std::fs::remove_file(dir.join(name)) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            for dir in [log_dir, cq_dir] {
                ferromq_config::file::sync_dir(dir).map_err(|e| io::Error::other(e.to_string()))?;
            }
            std::fs::remove_file(&marker)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    discard_outputs(&out_log, &out_cq)
}

/// Removes the output directories (no marker in them any more).
fn discard_outputs(out_log: &Path, out_cq: &Path) -> io::Result<()> {
    for dir in [out_log, out_cq] {
        if dir.exists() {
            if let Err(e) = std::fs::remove_dir_all(dir) {
                warn!(dir = %dir.display(), error = %e, "compaction output directory not removed");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferromq_protocol::message::StoredMessage;

    fn record(offset: i64, key: &str, body: &str) -> Vec<u8> {
        let host = "127.0.0.1:10911".parse().unwrap();
        let msg = StoredMessage {
            topic: "Kv".into(),
            queue_offset: offset,
            body: Bytes::copy_from_slice(body.as_bytes()),
            born_host: host,
            store_host: host,
            properties: format!("KEYS\u{1}{key}\u{2}"),
            ..StoredMessage::default()
        };
        msg.encode().unwrap().to_vec()
    }

    /// 60 messages over 6 keys, 10 versions each; the last version of k5 is a tombstone.
    fn filled(root: &Path) -> CompactionQueue {
        let q = CompactionQueue::open(root, "Kv", 0, Sizes::new(4096, 46 * 10)).unwrap();
        for i in 0..60i64 {
            let key = format!("k{}", i % 6);
            let body = if i == 59 { String::new() } else { format!("{key}-v{}", i / 6) };
            assert!(q.append(&record(i, &key, &body), i, 0, 0).unwrap());
        }
        q
    }

    fn view(q: &CompactionQueue) -> Vec<(i64, String)> {
        let read = q.read(0, 1000, usize::MAX).unwrap();
        read.records
            .iter()
            .map(|(offset, bytes)| {
                let m = StoredMessage::decode(bytes).unwrap().0;
                (*offset, String::from_utf8(m.body.to_vec()).unwrap())
            })
            .collect()
    }

    fn compacted() -> Vec<(i64, String)> {
        [(54, "k0-v9"), (55, "k1-v9"), (56, "k2-v9"), (57, "k3-v9"), (58, "k4-v9")]
            .map(|(o, b)| (o, b.to_owned()))
            .to_vec()
    }

    #[test]
    fn a_run_keeps_the_newest_message_per_key_and_drops_tombstones() {
        let dir = tempfile::tempdir().unwrap();
        let q = filled(dir.path());
        assert_eq!(view(&q).len(), 60);
        assert_eq!(q.read(0, 1000, usize::MAX).unwrap().records.len(), 60);
        assert_eq!(q.compact(-1, 1000).unwrap(), Some(59));
        assert_eq!(view(&q), compacted());
        assert_eq!(q.bounds(), (54, 59));
        // Reads from a compacted-away offset start at the next message held.
        assert_eq!(q.read(10, 1, usize::MAX).unwrap().records[0].0, 54);
        // Nothing new: no run. New versions: only they are mapped.
        assert_eq!(q.compact(59, 1000).unwrap(), None);
        assert!(q.append(&record(60, "k0", "k0-v10"), 60, 0, 0).unwrap());
        assert!(!q.append(&record(60, "k0", "again"), 60, 0, 0).unwrap(), "a record dispatched again is skipped");
        assert_eq!(q.compact(59, 1000).unwrap(), Some(60));
        assert_eq!(
            view(&q),
            [
                (55, "k1-v9".into()),
                (56, "k2-v9".into()),
                (57, "k3-v9".into()),
                (58, "k4-v9".into()),
                (60, "k0-v10".into())
            ]
        );
        // Records keep their queue offsets; their PHYSICALOFFSET is their place in the log.
        let read = q.read(0, 1, usize::MAX).unwrap();
        assert_eq!(StoredMessage::decode(&read.records[0].1).unwrap().0.queue_offset, 55);
        drop(q);
        let reopened = CompactionQueue::open(dir.path(), "Kv", 0, Sizes::new(4096, 46 * 10)).unwrap();
        assert_eq!(view(&reopened).len(), 5);
        assert!(reopened.append(&record(61, "k9", "new"), 61, 0, 0).unwrap());
        assert_eq!(view(&reopened).last().unwrap(), &(61, "new".to_owned()));
        // A map too small for every key: the run compacts up to what it mapped and keeps
        // the rest; the next runs go on from its checkpoint.
        for (i, key) in [(62i64, "k1"), (63, "k2"), (64, "k3"), (65, "k1")] {
            assert!(reopened.append(&record(i, key, &format!("{key}-v{i}")), i, 0, 0).unwrap());
        }
        let one_key = 2 + KEY_ENTRY_OVERHEAD;
        assert_eq!(reopened.compact(61, one_key).unwrap(), Some(62), "k1 at 62 mapped, then the map was full");
        let k1 = |q: &CompactionQueue| {
            view(q).into_iter().filter(|(_, b)| b.starts_with("k1-")).map(|(o, _)| o).collect::<Vec<_>>()
        };
        assert_eq!(k1(&reopened), [62, 65], "k1's older version went; 65, past the map, is kept");
        assert_eq!(reopened.compact(62, 1 << 20).unwrap(), Some(65));
        assert_eq!(k1(&reopened), [65]);
        assert_eq!(view(&reopened).iter().map(|(o, _)| *o).collect::<Vec<_>>(), [58, 60, 61, 63, 64, 65]);
    }

    #[test]
    fn a_crash_before_the_marker_keeps_the_old_segments() {
        let dir = tempfile::tempdir().unwrap();
        let q = filled(dir.path());
        assert_eq!(q.run(-1, 1000, Stop::BeforeMarker).unwrap(), None);
        let out = dir.path().join("compactionLog/Kv/0").join(COMPACTING_DIR);
        assert!(out.join(offset_to_file_name(0)).is_file(), "the output was written");
        drop(q);
        let q = CompactionQueue::open(dir.path(), "Kv", 0, Sizes::new(4096, 46 * 10)).unwrap();
        assert!(!out.exists(), "an output without its marker is discarded");
        assert_eq!(view(&q).len(), 60);
        assert_eq!(q.compact(-1, 1000).unwrap(), Some(59));
        assert_eq!(view(&q), compacted());
    }

    #[test]
    fn a_marked_output_missing_a_file_is_discarded() {
        let dir = tempfile::tempdir().unwrap();
        let q = filled(dir.path());
        assert_eq!(q.run(-1, 1000, Stop::BeforeSwap).unwrap(), None);
        drop(q);
        // As if a power cut lost an output's consume queue file after the marker.
        std::fs::remove_file(dir.path().join("compactionCq/Kv/0").join(COMPACTING_DIR).join(offset_to_file_name(0)))
            .unwrap();
        let q = CompactionQueue::open(dir.path(), "Kv", 0, Sizes::new(4096, 46 * 10)).unwrap();
        assert_eq!(view(&q).len(), 60, "the old segments stay");
        assert!(!dir.path().join("compactionLog/Kv/0").join(COMPACTING_DIR).exists());
    }

    #[test]
    fn a_crash_after_the_marker_is_finished_at_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let q = filled(dir.path());
        let inputs_before = std::fs::read_dir(dir.path().join("compactionLog/Kv/0")).unwrap().count();
        assert_eq!(q.run(-1, 1000, Stop::BeforeSwap).unwrap(), None);
        drop(q);
        let q = CompactionQueue::open(dir.path(), "Kv", 0, Sizes::new(4096, 46 * 10)).unwrap();
        assert_eq!(view(&q), compacted());
        let live = |dir: &str| {
            std::fs::read_dir(dir).unwrap().filter(|e| e.as_ref().unwrap().file_type().unwrap().is_file()).count()
        };
        let (logs, cqs) = (
            live(dir.path().join("compactionLog/Kv/0").to_str().unwrap()),
            live(dir.path().join("compactionCq/Kv/0").to_str().unwrap()),
        );
        assert_eq!(logs, cqs, "log and consume queue files pair up");
        assert!(logs < inputs_before, "{logs} files after, {inputs_before} before");
        assert!(!dir.path().join("compactionLog/Kv/0").join(COMPACTING_DIR).exists());
    }

    #[test]
    fn segment_sizes_as_java_computes_them() {
        assert_eq!(Sizes::new(100 * 1024 * 1024, 10 * 1024 * 1024), Sizes { log: 104_857_460, cq: 10_485_746 });
        assert_eq!(Sizes::new(4096, 46 * 10), Sizes { log: 460 * 9, cq: 460 });
        assert_eq!(Sizes::new(100, 460), Sizes { log: 460 * 5, cq: 460 });
    }
}
