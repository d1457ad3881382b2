//! Compaction topics (`cleanup.policy=COMPACTION`, advanced-topics.md section 1): every
//! message of such a topic is also copied, at dispatch, into its queue's compacted store under
//! `compaction/` (`compactionLog/<topic>/<queue>/`, `compactionCq/<topic>/<queue>/`), which a
//! periodic run rewrites keeping the newest message per key; reads of the topic are served
//! from it, so consumers see the compacted view and the CommitLog's retention does not shorten
//! it. `compaction/position-checkpoint` holds each queue's last compacted offset. Java:
//! `CompactionStore`, `CompactionService`, `CompactionPositionMgr`.

mod queue;
mod unit;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use ferromq_protocol::body::{CompactionPositionCheckpoint, JsonBody};
use tracing::{error, info, warn};

use crate::config::StoreConfig;
use crate::get_result::{GetMessageResult, GetMessageStatus};
use queue::CompactionQueue;
pub(crate) use queue::Sizes;

/// Decides which topics are compaction topics (the broker's topic table:
/// `cleanup.policy=COMPACTION`).
pub type CompactionTopics = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// What a compaction pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Queues compacted.
    pub compacted: usize,
    /// Queues whose run failed (logged).
    pub failed: usize,
}

/// The compacted stores of every compaction topic queue.
pub(crate) struct CompactionStore {
    root: PathBuf,
    sizes: Sizes,
    enabled: bool,
    /// `maxOffsetMapSize`: the memory one run's key map may take.
    map_bytes: usize,
    /// `compactionThreadNum`: more than 1 compacts queues side by side (at most 4 at once).
    threads: u32,
    queues: RwLock<HashMap<(String, i32), Arc<CompactionQueue>>>,
    topics: RwLock<Option<CompactionTopics>>,
    /// `topic_queueId` -> last compacted offset (Java's key form).
    checkpoint: Mutex<BTreeMap<String, i64>>,
}

impl std::fmt::Debug for CompactionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionStore")
            .field("root", &self.root)
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

fn checkpoint_key(topic: &str, queue_id: i32) -> String {
    format!("{topic}_{queue_id}")
}

impl CompactionStore {
    /// Opens `storePathRootDir/compaction`: every queue found (finishing or discarding a run a
    /// crash interrupted) and the checkpoint. A queue whose files do not load is logged and
    /// left out: its topic is then read from the consume queue.
    pub(crate) fn load(config: &StoreConfig) -> io::Result<CompactionStore> {
        let root = config.store_path_root_dir.join("compaction");
        let sizes = Sizes::new(config.compaction_mapped_file_size, config.compaction_cq_mapped_file_size);
        let map_bytes = usize::try_from(config.max_offset_map_size.max(64 * 1024)).unwrap_or(usize::MAX);
        let store = CompactionStore {
            root: root.clone(),
            sizes,
            enabled: config.enable_compaction,
            map_bytes,
            threads: config.compaction_thread_num,
            queues: RwLock::new(HashMap::new()),
            topics: RwLock::new(None),
            checkpoint: Mutex::new(BTreeMap::new()),
        };
        if !config.enable_compaction {
            return Ok(store);
        }
        let log_root = root.join("compactionLog");
        let mut queues = HashMap::new();
        if log_root.is_dir() {
            for topic in std::fs::read_dir(&log_root)?.filter_map(Result::ok) {
                let Some(topic_name) = topic.file_name().to_str().map(str::to_owned) else { continue };
                for queue in std::fs::read_dir(topic.path())?.filter_map(Result::ok) {
                    let Some(queue_id) = queue.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                        continue;
                    };
                    match CompactionQueue::open(&root, &topic_name, queue_id, sizes) {
                        Ok(q) => {
                            queues.insert((topic_name.clone(), queue_id), Arc::new(q));
                        }
                        Err(e) => error!(topic = %topic_name, queue_id, error = %e,
                            "compaction queue not loaded; its messages are read from the consume queue"),
                    }
                }
            }
        }
        let checkpoint_path = root.join("position-checkpoint");
        match std::fs::read(&checkpoint_path) {
            Ok(bytes) => match CompactionPositionCheckpoint::decode(&bytes) {
                Ok(c) => *store.checkpoint.lock().unwrap_or_else(|e| e.into_inner()) = c.queue_offset_map,
                Err(e) => warn!(file = %checkpoint_path.display(), error = %e,
                    "compaction checkpoint unreadable; the next runs compact from the start"),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        if !queues.is_empty() {
            info!(queues = queues.len(), "compaction queues loaded");
        }
        *store.queues.write().unwrap_or_else(|e| e.into_inner()) = queues;
        Ok(store)
    }

    /// Sets which topics are compaction topics.
    pub(crate) fn set_topics(&self, topics: CompactionTopics) {
        *self.topics.write().unwrap_or_else(|e| e.into_inner()) = Some(topics);
    }

    /// Whether `topic`'s reads and dispatch go through the compacted store.
    pub(crate) fn serves(&self, topic: &str) -> bool {
        self.enabled && self.topics.read().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|f| f(topic))
    }

    fn queue(&self, topic: &str, queue_id: i32) -> Option<Arc<CompactionQueue>> {
        self.queues.read().unwrap_or_else(|e| e.into_inner()).get(&(topic.to_owned(), queue_id)).cloned()
    }

    fn queue_or_create(&self, topic: &str, queue_id: i32) -> io::Result<Arc<CompactionQueue>> {
        if let Some(q) = self.queue(topic, queue_id) {
            return Ok(q);
        }
        let mut queues = self.queues.write().unwrap_or_else(|e| e.into_inner());
        if let Some(q) = queues.get(&(topic.to_owned(), queue_id)) {
            return Ok(q.clone());
        }
        let q = Arc::new(CompactionQueue::open(&self.root, topic, queue_id, self.sizes)?);
        queues.insert((topic.to_owned(), queue_id), q.clone());
        Ok(q)
    }

    /// Copies a dispatched record of a compaction topic into its queue's compacted store (a
    /// record already there, dispatched again, is skipped).
    ///
    /// # Errors
    /// Writing failed; the caller dispatches the record again later.
    pub(crate) fn put(
        &self,
        topic: &str,
        queue_id: i32,
        record: &[u8],
        queue_offset: i64,
        tags_code: i64,
        store_timestamp: i64,
    ) -> io::Result<()> {
        self.queue_or_create(topic, queue_id)?.append(record, queue_offset, tags_code, store_timestamp).map(drop)
    }

    /// The offset after the last one `topic`'s queue holds in its compacted store (0 with
    /// none).
    pub(crate) fn held_end(&self, topic: &str, queue_id: i32) -> i64 {
        self.queue(topic, queue_id).map_or(0, |q| q.bounds().1)
    }

    /// The first offset `topic`'s queue holds in its compacted store, if it has one.
    pub(crate) fn min_offset(&self, topic: &str, queue_id: i32) -> Option<i64> {
        let (min, max) = self.queue(topic, queue_id)?.bounds();
        Some(if min < 0 { max } else { min })
    }

    /// Reads `topic`'s queue from its compacted store: from the first message held at or after
    /// `offset` (offsets compacted away are skipped). `max_offset` is the consume queue's end,
    /// which every dispatched message of the queue has reached. `None` when the queue has no
    /// compacted store (it is read from the consume queue then).
    pub(crate) fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_count: usize,
        max_bytes: usize,
        max_offset: i64,
    ) -> Option<GetMessageResult> {
        let queue = self.queue(topic, queue_id)?;
        let (min, held_max) = queue.bounds();
        let max = max_offset.max(held_max);
        let min = if min < 0 { held_max } else { min };
        let mut result = GetMessageResult {
            status: GetMessageStatus::NoMessageInQueue,
            next_begin_offset: offset,
            min_offset: min,
            max_offset: max,
            messages: Vec::new(),
            queue_offsets: Vec::new(),
            suggest_pulling_from_slave: false,
        };
        if max == 0 {
            result.next_begin_offset = 0;
            return Some(result);
        }
        if offset == max {
            result.status = GetMessageStatus::OffsetOverflowOne;
            return Some(result);
        }
        if offset > max {
            result.status = GetMessageStatus::OffsetOverflowBadly;
            result.next_begin_offset = max;
            return Some(result);
        }
        match queue.read(offset, max_count.max(1), max_bytes) {
            Ok(read) if read.records.is_empty() => {
                // Everything from `offset` on was compacted away or is not copied yet.
                result.status = GetMessageStatus::OffsetOverflowOne;
                result.next_begin_offset = held_max.max(offset);
            }
            Ok(read) => {
                result.status = GetMessageStatus::Found;
                result.next_begin_offset = read.next;
                for (queue_offset, record) in read.records {
                    result.queue_offsets.push(queue_offset);
                    result.messages.push(record);
                }
            }
            Err(e) => {
                warn!(topic, queue_id, offset, error = %e, "compaction queue read failed");
                result.status = GetMessageStatus::OffsetFoundNull;
            }
        }
        Some(result)
    }

    /// Runs a compaction of every compaction topic queue and writes the checkpoint.
    pub(crate) fn compact_all(&self) -> CompactionReport {
        let mut report = CompactionReport::default();
        if !self.enabled {
            return report;
        }
        let queues: Vec<Arc<CompactionQueue>> = self
            .queues
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|q| self.serves(&q.topic))
            .cloned()
            .collect();
        let parallel = self.threads > 1 && queues.len() > 1;
        let outcomes = crate::parallel::map(&queues, parallel, |queue| {
            let key = checkpoint_key(&queue.topic, queue.queue_id);
            let from = self.checkpoint.lock().unwrap_or_else(|e| e.into_inner()).get(&key).copied().unwrap_or(-1);
            (key, queue.compact(from, self.map_bytes))
        });
        for (queue, (key, outcome)) in queues.iter().zip(outcomes) {
            match outcome {
                Ok(Some(to)) => {
                    self.checkpoint.lock().unwrap_or_else(|e| e.into_inner()).insert(key, to);
                    report.compacted += 1;
                }
                Ok(None) => {}
                Err(e) => {
                    error!(topic = %queue.topic, queue_id = queue.queue_id, error = %e, "compaction run failed; the queue is unchanged");
                    report.failed += 1;
                }
            }
        }
        if report.compacted > 0 {
            if let Err(e) = self.persist_checkpoint() {
                warn!(error = %e, "compaction checkpoint not written; the next run redoes some work");
            }
        }
        report
    }

    fn persist_checkpoint(&self) -> io::Result<()> {
        let map = self.checkpoint.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let body = CompactionPositionCheckpoint { queue_offset_map: map }.encode();
        std::fs::create_dir_all(&self.root)?;
        ferromq_config::file::replace_file(&self.root.join("position-checkpoint"), &body)
            .map_err(|e| io::Error::other(e.to_string()))
    }

    /// Removes `topic`'s compacted stores (its files and checkpoint entries): the topic was
    /// deleted, so a topic of the same name starts again at offset 0.
    ///
    /// # Errors
    /// Deleting the files failed.
    pub(crate) fn destroy_topic(&self, topic: &str) -> io::Result<bool> {
        let removed = {
            let mut queues = self.queues.write().unwrap_or_else(|e| e.into_inner());
            let before = queues.len();
            queues.retain(|(t, _), _| t != topic);
            before != queues.len()
        };
        let mut existed = removed;
        for dir in [self.root.join("compactionLog").join(topic), self.root.join("compactionCq").join(topic)] {
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => existed = true,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io::Error::new(e.kind(), format!("deleting {}: {e}", dir.display()))),
            }
        }
        let prefix = format!("{topic}_");
        let had_checkpoint = {
            let mut checkpoint = self.checkpoint.lock().unwrap_or_else(|e| e.into_inner());
            let before = checkpoint.len();
            checkpoint.retain(|k, _| !(k.starts_with(&prefix) && k[prefix.len()..].parse::<i32>().is_ok()));
            before != checkpoint.len()
        };
        if had_checkpoint {
            self.persist_checkpoint()?;
        }
        Ok(existed)
    }

    /// Flushes every queue's files.
    pub(crate) fn flush(&self) -> io::Result<()> {
        let queues: Vec<Arc<CompactionQueue>> =
            self.queues.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        queues.iter().try_for_each(|q| q.flush())
    }
}
