//! Light message queues (LMQ, advanced-topics.md section 2): queues named `%LMQ%...`, each
//! with the one queue id 0, that exist only as consume queues. A message whose
//! `INNER_MULTI_DISPATCH` property lists such names is written once to the CommitLog; its
//! queue offset in each light queue is assigned at append (under the CommitLog lock, written
//! into `INNER_MULTI_QUEUE_OFFSET`) and dispatch writes one unit into each light queue's
//! consume queue besides the unit of its own topic. Java: `LmqDispatch`, `MultiDispatchUtils`.
//!
//! A broker may have a million light queues, so their consume queues are opened when used and
//! closed when idle ([`LightQueues`]); what stays in memory per light queue is its next offset
//! (in the CommitLog's writer state).

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tracing::{debug, warn};

use crate::consume_queue::ConsumeQueue;

/// The prefix of every light queue's name. Java: `MixAll.LMQ_PREFIX`.
pub const LMQ_PREFIX: &str = "%LMQ%";

/// The queue id of every light queue. Java: `MixAll.LMQ_QUEUE_ID`.
pub const LMQ_QUEUE_ID: i32 = 0;

/// Separator of the names and offsets in the multi-dispatch properties.
pub const LMQ_DISPATCH_SEPARATOR: char = ',';

/// The longest light queue name (a directory name under `consumequeue`, as a topic).
pub const LMQ_NAME_MAX: usize = 127;

/// How many light queues' consume queues stay open at once (each holds a mapping and a file
/// descriptor); the least recently used idle ones beyond are closed.
pub const LMQ_OPEN_QUEUES_MAX: usize = 4096;

/// Whether `name` is a light queue (or a light queue's consumer group). Java: `MixAll.isLmq`.
pub fn is_lmq(name: &str) -> bool {
    name.starts_with(LMQ_PREFIX)
}

/// Whether messages of `topic` may be dispatched to light queues: not retry topics, system
/// topics or the delay-level topic (their records are copies of messages that were, or will
/// be, dispatched when stored under their real topic). Java: `MixAll.topicAllowsLMQ`.
pub fn topic_allows_lmq(topic: &str) -> bool {
    !topic.starts_with("%RETRY%") && !topic.starts_with("rmq_sys_") && topic != crate::SCHEDULE_TOPIC
}

/// Checks an `INNER_MULTI_DISPATCH` value and splits it into light queue names.
///
/// # Errors
/// The reason, for an empty list, a name that is not a light queue (`%LMQ%` and then letters,
/// digits, `%`, `|`, `-` or `_`, at most 127 bytes) or a name listed twice. Java writes a
/// "null" offset for a non-LMQ name, which its dispatch cannot read, and assigns one offset to
/// both copies of a repeated name: FerroMQ refuses both (docs/decisions/0028).
pub fn parse_targets(value: &str) -> Result<Vec<&str>, String> {
    let names: Vec<&str> = value.split(LMQ_DISPATCH_SEPARATOR).collect();
    for (i, name) in names.iter().enumerate() {
        if !is_lmq(name) || name.len() == LMQ_PREFIX.len() {
            return Err(format!("INNER_MULTI_DISPATCH names {name:?}, which is not a light queue (%LMQ%<name>)"));
        }
        if name.len() > LMQ_NAME_MAX {
            return Err(format!("light queue name {name:?} is longer than {LMQ_NAME_MAX} bytes"));
        }
        if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'-' | b'_')) {
            return Err(format!("light queue name {name:?} has characters other than letters, digits, %, |, - and _"));
        }
        if names[..i].contains(name) {
            return Err(format!("INNER_MULTI_DISPATCH lists light queue {name:?} twice"));
        }
    }
    Ok(names)
}

/// The light queues and offsets a stored record was dispatched to: its `INNER_MULTI_DISPATCH`
/// and `INNER_MULTI_QUEUE_OFFSET` paired in order; empty when either is missing, their counts
/// differ or an offset is not a number (records FerroMQ did not write so: logged by the caller).
pub(crate) fn dispatch_targets(names: &str, offsets: &str) -> Option<Vec<(String, i64)>> {
    let mut targets = Vec::new();
    let mut offsets = offsets.split(LMQ_DISPATCH_SEPARATOR);
    for name in names.split(LMQ_DISPATCH_SEPARATOR) {
        if !is_lmq(name) || name.len() == LMQ_PREFIX.len() || name.contains(['/', '\\', '\0']) {
            return None;
        }
        let offset = offsets.next()?.parse::<i64>().ok().filter(|o| *o >= 0)?;
        targets.push((name.to_owned(), offset));
    }
    if offsets.next().is_some() {
        return None;
    }
    Some(targets)
}

/// The `INNER_MULTI_QUEUE_OFFSET` value for `offsets`.
pub(crate) fn offsets_property(offsets: &[i64]) -> String {
    let mut text = String::with_capacity(offsets.len() * 4);
    for (i, offset) in offsets.iter().enumerate() {
        if i > 0 {
            text.push(LMQ_DISPATCH_SEPARATOR);
        }
        text.push_str(&offset.to_string());
    }
    text
}

/// An open light queue and when it was last used (a tick of [`LightQueues::clock`]).
#[derive(Debug)]
struct Open {
    queue: Arc<ConsumeQueue>,
    used: AtomicU64,
}

/// The consume queues of light queues: opened on first use, at most
/// [`LMQ_OPEN_QUEUES_MAX`] open at once. Closing one flushes it; its files stay and it is
/// opened again (and its end found again) when next used.
#[derive(Debug)]
pub(crate) struct LightQueues {
    root: PathBuf,
    file_size: usize,
    capacity: usize,
    open: RwLock<HashMap<String, Open>>,
    /// Serializes opening, so one light queue is never opened twice at once (two writers).
    opening: Mutex<()>,
    clock: AtomicU64,
    /// Light queues with a directory under `consumequeue` (found at load, plus created since).
    count: AtomicUsize,
    /// Closed queues whose written pages may not be on disk yet: the consume-queue flush
    /// syncs them all with one `syncfs` (an `msync` each, on the dispatch thread, took half a
    /// millisecond per queue) and then drops them.
    closing: Mutex<Vec<Arc<ConsumeQueue>>>,
}

impl LightQueues {
    pub(crate) fn new(root: &Path, file_size: usize, on_disk: usize, capacity: usize) -> LightQueues {
        LightQueues {
            root: root.to_owned(),
            file_size,
            capacity: capacity.max(1),
            open: RwLock::new(HashMap::new()),
            opening: Mutex::new(()),
            clock: AtomicU64::new(0),
            count: AtomicUsize::new(on_disk),
            closing: Mutex::new(Vec::new()),
        }
    }

    /// Light queues with a consume queue directory.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Light queues open now.
    pub(crate) fn open_count(&self) -> usize {
        self.read().len()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Open>> {
        // Entries are inserted and removed whole.
        self.open.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Open>> {
        self.open.write().unwrap_or_else(|e| e.into_inner())
    }

    fn cached(&self, name: &str) -> Option<Arc<ConsumeQueue>> {
        let open = self.read();
        let entry = open.get(name)?;
        entry.used.store(self.clock.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        Some(entry.queue.clone())
    }

    /// The directory of `name`'s consume queue.
    fn dir(&self, name: &str) -> PathBuf {
        self.root.join(name).join(LMQ_QUEUE_ID.to_string())
    }

    /// Whether `name` has a consume queue (open or on disk).
    pub(crate) fn exists(&self, name: &str) -> bool {
        self.read().contains_key(name) || self.dir(name).is_dir()
    }

    /// The consume queue of `name`: open, opened from disk, or (with `create`) made empty;
    /// `None` when it has none and `create` is false.
    ///
    /// # Errors
    /// Opening or recovering its files failed.
    pub(crate) fn find(&self, name: &str, create: bool) -> io::Result<Option<Arc<ConsumeQueue>>> {
        if let Some(queue) = self.cached(name) {
            return Ok(Some(queue));
        }
        let (queue, closing) = {
            let _opening = self.opening.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(queue) = self.cached(name) {
                return Ok(Some(queue));
            }
            let existed = self.dir(name).is_dir();
            if !existed && !create {
                return Ok(None);
            }
            let queue = Arc::new(ConsumeQueue::open_light(&self.root, name, self.file_size)?);
            if existed {
                queue.recover()?;
            } else {
                self.count.fetch_add(1, Ordering::Relaxed);
            }
            let mut open = self.write();
            let used = AtomicU64::new(self.clock.fetch_add(1, Ordering::Relaxed));
            open.insert(name.to_owned(), Open { queue: queue.clone(), used });
            let closing = if open.len() > self.capacity { self.take_idle(&mut open) } else { Vec::new() };
            (queue, closing)
        };
        self.close(closing);
        Ok(Some(queue))
    }

    /// Queues leave the table here: kept until the next [`sync_closed`](Self::sync_closed),
    /// which this call makes itself when as many wait as may be open (a pass over every light
    /// queue, after a crash or for retention, closes them faster than the flusher runs).
    fn close(&self, closing: Vec<Arc<ConsumeQueue>>) {
        if closing.is_empty() {
            return;
        }
        let waiting = {
            let mut pending = self.closing.lock().unwrap_or_else(|e| e.into_inner());
            pending.extend(closing);
            pending.len()
        };
        if waiting >= self.capacity {
            if let Err(e) = self.sync_closed() {
                warn!(error = %e, "closed light queues not synced");
            }
        }
    }

    /// Puts the closed queues' pages on disk (one `syncfs` of the consume queue file system)
    /// and releases them. Returns how many there were.
    ///
    /// # Errors
    /// The sync failed; the queues stay for the next call.
    pub(crate) fn sync_closed(&self) -> io::Result<usize> {
        // Taken out, so queues closing meanwhile (the dispatch thread) never wait for the sync.
        let pending = std::mem::take(&mut *self.closing.lock().unwrap_or_else(|e| e.into_inner()));
        if pending.is_empty() {
            return Ok(0);
        }
        if let Err(e) = crate::reserve::sync_file_system(&self.root) {
            self.closing.lock().unwrap_or_else(|e| e.into_inner()).extend(pending);
            return Err(e);
        }
        debug!(queues = pending.len(), "closed light queues synced");
        Ok(pending.len())
    }

    /// Removes the least recently used idle queues until a quarter of the capacity is free (so
    /// the sort is paid once per many opens). A queue someone holds is not idle: only the table
    /// holds a reference to an idle one, and none is handed out while the table is locked.
    fn take_idle(&self, open: &mut HashMap<String, Open>) -> Vec<Arc<ConsumeQueue>> {
        let target = self.capacity - self.capacity / 4;
        let mut idle: Vec<(u64, String)> = open
            .iter()
            .filter(|(_, o)| Arc::strong_count(&o.queue) == 1)
            .map(|(name, o)| (o.used.load(Ordering::Relaxed), name.clone()))
            .collect();
        idle.sort_unstable();
        let excess = open.len().saturating_sub(target);
        idle.into_iter().take(excess).filter_map(|(_, name)| open.remove(&name)).map(|o| o.queue).collect()
    }

    /// The open queues.
    pub(crate) fn all_open(&self) -> Vec<(String, Arc<ConsumeQueue>)> {
        self.read().iter().map(|(name, o)| (name.clone(), o.queue.clone())).collect()
    }

    /// The names of the light queues with a consume queue directory.
    ///
    /// # Errors
    /// Listing the consume queue directory failed.
    pub(crate) fn names_on_disk(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.root)? {
            let entry = entry?;
            if let Some(name) = entry.file_name().to_str() {
                if is_lmq(name) && entry.path().join(LMQ_QUEUE_ID.to_string()).is_dir() {
                    names.push(name.to_owned());
                }
            }
        }
        Ok(names)
    }

    /// Deletes the segments of every light queue (open or not) whose units all point below
    /// `commit_log_min`, opening closed ones in turn. Returns the segments deleted.
    ///
    /// # Errors
    /// Listing the directory failed; a queue that failed is logged and skipped.
    pub(crate) fn delete_expired_all(&self, commit_log_min: i64) -> io::Result<usize> {
        let mut deleted = 0;
        for name in self.names_on_disk()? {
            // The newest file is never deleted: a closed queue of one file has nothing to do
            // (most of a million light queues), and is not opened.
            if !self.read().contains_key(&name) && self.files_on_disk(&name)? <= 1 {
                continue;
            }
            let cleaned = self.find(&name, false).and_then(|queue| match queue {
                Some(queue) => {
                    let n = queue.delete_expired(commit_log_min)?;
                    queue.correct_min_offset(commit_log_min);
                    Ok(n)
                }
                None => Ok(0),
            });
            match cleaned {
                Ok(n) => deleted += n,
                Err(e) => warn!(queue = %name, error = %e, "cannot delete expired light queue segments"),
            }
        }
        Ok(deleted)
    }

    /// Cuts every light queue's units that point at or past `commit_log_max` (after a crash or
    /// a truncation), opening the closed ones in turn. Returns how many queues it visited.
    ///
    /// # Errors
    /// The first queue that failed.
    pub(crate) fn truncate_dirty_all(&self, commit_log_max: i64) -> io::Result<usize> {
        let names = self.names_on_disk()?;
        for name in &names {
            // Most light queues hold a few units, all below the end: read their first page
            // and skip them without opening (a mapping each).
            if self.read().contains_key(name) || self.may_pass(name, commit_log_max)? {
                if let Some(queue) = self.find(name, false)? {
                    queue.truncate_dirty(commit_log_max)?;
                }
            }
        }
        Ok(names.len())
    }

    /// Segment files in `name`'s consume queue directory.
    fn files_on_disk(&self, name: &str) -> io::Result<usize> {
        Ok(std::fs::read_dir(self.dir(name))?
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .count())
    }

    /// Whether `name`'s consume queue may hold a unit reaching past `commit_log_max`: false
    /// only when its newest file's first page holds units, all of them, ending below it.
    fn may_pass(&self, name: &str, commit_log_max: i64) -> io::Result<bool> {
        let dir = self.dir(name);
        let newest = std::fs::read_dir(&dir)?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_str().is_some_and(|n| n.parse::<i64>().is_ok()))
            .map(|e| e.path())
            .max();
        let Some(newest) = newest else { return Ok(false) };
        let mut page = vec![0u8; crate::OS_PAGE_SIZE];
        let read = std::os::unix::fs::FileExt::read_at(&std::fs::File::open(&newest)?, &mut page, 0)?;
        Ok(!crate::consume_queue::page_ends_below(&page[..read], commit_log_max))
    }

    /// Destroys `name`'s consume queue (open or not). Returns whether it had one.
    ///
    /// # Errors
    /// Opening or deleting its files failed.
    pub(crate) fn destroy(&self, name: &str) -> io::Result<bool> {
        let _opening = self.opening.lock().unwrap_or_else(|e| e.into_inner());
        let queue = match self.write().remove(name) {
            Some(open) => open.queue,
            None if self.dir(name).is_dir() => Arc::new(ConsumeQueue::open_light(&self.root, name, self.file_size)?),
            None => return Ok(false),
        };
        queue.destroy()?;
        self.count.fetch_sub(1, Ordering::Relaxed);
        if let Err(e) = std::fs::remove_dir(self.root.join(name)) {
            debug!(queue = name, error = %e, "light queue directory kept");
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_light_queues_listed_once() {
        assert_eq!(parse_targets("%LMQ%a,%LMQ%b-1").unwrap(), vec!["%LMQ%a", "%LMQ%b-1"]);
        assert!(parse_targets("").unwrap_err().contains("not a light queue"));
        assert!(parse_targets("%LMQ%a,plain").unwrap_err().contains("\"plain\""));
        assert!(parse_targets("%LMQ%").is_err());
        assert!(parse_targets("%LMQ%a/b").unwrap_err().contains("characters"));
        assert!(parse_targets("%LMQ%a,%LMQ%a").unwrap_err().contains("twice"));
        assert!(parse_targets(&format!("%LMQ%{}", "x".repeat(123))).unwrap_err().contains("127"));
    }

    #[test]
    fn dispatch_targets_pair_names_with_offsets() {
        assert_eq!(
            dispatch_targets("%LMQ%a,%LMQ%b", "3,0"),
            Some(vec![("%LMQ%a".to_owned(), 3), ("%LMQ%b".to_owned(), 0)])
        );
        assert_eq!(dispatch_targets("%LMQ%a,%LMQ%b", "3"), None);
        assert_eq!(dispatch_targets("%LMQ%a", "3,4"), None);
        assert_eq!(dispatch_targets("%LMQ%a", "null"), None);
        assert_eq!(dispatch_targets("%LMQ%a", "-1"), None);
        assert_eq!(dispatch_targets(" ", "0"), None, "only light queues");
        assert_eq!(dispatch_targets("%LMQ%a,T", "0,0"), None);
        assert_eq!(offsets_property(&[3, 0, 12]), "3,0,12");
    }

    #[test]
    fn which_topics_dispatch_to_light_queues() {
        assert!(topic_allows_lmq("orders"));
        assert!(!topic_allows_lmq("%RETRY%g"));
        assert!(!topic_allows_lmq("rmq_sys_TRANS_HALF_TOPIC"));
        assert!(!topic_allows_lmq("SCHEDULE_TOPIC_XXXX"));
    }
}
