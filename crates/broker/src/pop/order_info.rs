//! FIFO pop state, persisted as `<storePathRootDir>/config/consumerOrderInfo.json`: for each
//! `topic@group` and queue, the batch popped last (its offsets, pop time, invisible time), which
//! of its offsets are acknowledged, and how often each was delivered. A queue with an
//! unacknowledged batch still invisible is blocked: nobody else pops it, so a message group is
//! consumed in order, one batch at a time. Java: `ConsumerOrderInfoManager`.
//!
//! The consumer offset of a FIFO pop moves only as far as the first unacknowledged offset, so
//! once a batch's invisible time passes the next pop reads it again (in place, no retry topic).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::metadata::{ConfigFile, MetadataError};

/// Entries untouched this long are dropped (Java: `CLEAN_SPAN_FROM_LAST`, 24 h).
const CLEAN_SPAN_MS: i64 = 24 * 3600 * 1000;

/// One queue's FIFO state, in Java's JSON shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct OrderInfo {
    /// The attempt id of the pop that took the batch.
    #[serde(rename = "a", skip_serializing_if = "Option::is_none")]
    pub(crate) attempt_id: Option<String>,
    /// Bit i set: offset `o[i]` acknowledged.
    #[serde(rename = "cm")]
    pub(crate) commit_offset_bit: u64,
    #[serde(rename = "i")]
    pub(crate) invisible_time: i64,
    #[serde(rename = "l")]
    pub(crate) last_consume_timestamp: i64,
    /// First element absolute, the others differences from it.
    #[serde(rename = "o")]
    pub(crate) offset_list: Vec<i64>,
    /// Offset -> times delivered before (reconsume times).
    #[serde(rename = "oc", skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) offset_consumed_count: BTreeMap<i64, i32>,
    /// Offset -> next visible time, for offsets whose invisible time was changed.
    #[serde(rename = "ot", skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) offset_next_visible_time: BTreeMap<i64, i64>,
    #[serde(rename = "popTime")]
    pub(crate) pop_time: i64,
}

impl OrderInfo {
    fn offsets(&self) -> Vec<i64> {
        let Some(first) = self.offset_list.first() else { return Vec::new() };
        std::iter::once(*first).chain(self.offset_list.iter().skip(1).map(|d| first + d)).collect()
    }

    fn set_offsets(&mut self, offsets: &[i64]) {
        self.offset_list = match offsets.first() {
            Some(first) => std::iter::once(*first).chain(offsets.iter().skip(1).map(|o| o - first)).collect(),
            None => Vec::new(),
        };
    }

    fn is_acked(&self, index: usize) -> bool {
        index < 64 && self.commit_offset_bit & (1 << index) != 0
    }

    fn next_visible_time(&self, offset: i64) -> i64 {
        self.offset_next_visible_time
            .get(&offset)
            .copied()
            .unwrap_or_else(|| self.pop_time.saturating_add(self.invisible_time))
    }

    /// The first unacknowledged offset, or the one after the batch when all are.
    fn next_offset(&self) -> Option<i64> {
        let offsets = self.offsets();
        let last = *offsets.last()?;
        Some(offsets.iter().enumerate().find(|(i, _)| !self.is_acked(*i)).map_or(last + 1, |(_, o)| *o))
    }
}

/// consumerOrderInfo.json.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct OrderInfoWrapper {
    pub(crate) table: BTreeMap<String, BTreeMap<i32, OrderInfo>>,
}

/// The FIFO pop state of every `topic@group`.
#[derive(Debug)]
pub(crate) struct ConsumerOrderInfoManager {
    file: ConfigFile,
    table: Mutex<HashMap<String, HashMap<i32, OrderInfo>>>,
}

fn key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

/// What `commit_and_next` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Commit {
    /// No batch of this queue holds the offset.
    Unknown,
    /// The batch is not the one the ack names (an older pop): ignored.
    StalePopTime,
    /// Acknowledged; the consumer offset moves to this.
    Next(i64),
}

impl ConsumerOrderInfoManager {
    /// Reads `path` (or its backup); a missing file is an empty table.
    pub(crate) fn load(path: impl Into<PathBuf>) -> Result<Self, MetadataError> {
        let file = ConfigFile::new(path);
        let loaded = file.load::<OrderInfoWrapper>()?;
        if loaded.needs_rewrite() {
            file.mark_dirty();
        }
        let wrapper = loaded.into_value().unwrap_or_default();
        let table = wrapper.table.into_iter().map(|(k, v)| (k, v.into_iter().collect())).collect();
        Ok(ConsumerOrderInfoManager { file, table: Mutex::new(table) })
    }

    fn table(&self) -> MutexGuard<'_, HashMap<String, HashMap<i32, OrderInfo>>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a pop (with `attempt_id`) must skip the queue: its last batch has an
    /// unacknowledged offset still invisible, and the pop is not a retry of that attempt.
    pub(crate) fn needs_block(
        &self,
        topic: &str,
        group: &str,
        queue_id: i32,
        attempt_id: Option<&str>,
        now: i64,
    ) -> bool {
        let table = self.table();
        let Some(info) = table.get(&key(topic, group)).and_then(|q| q.get(&queue_id)) else { return false };
        if attempt_id.is_some() && info.attempt_id.as_deref() == attempt_id {
            return false;
        }
        info.offsets().iter().enumerate().any(|(i, o)| !info.is_acked(i) && now < info.next_visible_time(*o))
    }

    /// When the queue unblocks at the earliest (None: not blocked).
    pub(crate) fn block_ends_at(&self, topic: &str, group: &str, queue_id: i32) -> Option<i64> {
        let table = self.table();
        let info = table.get(&key(topic, group))?.get(&queue_id)?;
        info.offsets()
            .iter()
            .enumerate()
            .filter(|(i, _)| !info.is_acked(*i))
            .map(|(_, o)| info.next_visible_time(*o))
            .max()
    }

    /// Records a FIFO pop of `offsets` and returns each offset's reconsume count. Counts carry
    /// over (+1) for offsets popped again, except for a retry of the same attempt.
    #[allow(clippy::too_many_arguments)] // Java's `update` signature, one value per field
    pub(crate) fn update(
        &self,
        attempt_id: Option<&str>,
        topic: &str,
        group: &str,
        queue_id: i32,
        pop_time: i64,
        invisible_time: i64,
        offsets: &[i64],
    ) -> Vec<i32> {
        let mut table = self.table();
        let queues = table.entry(key(topic, group)).or_default();
        let old = queues.remove(&queue_id);
        let same_attempt = attempt_id.is_some() && old.as_ref().and_then(|o| o.attempt_id.as_deref()) == attempt_id;
        let mut info = OrderInfo {
            attempt_id: attempt_id.map(str::to_owned),
            invisible_time,
            last_consume_timestamp: pop_time,
            pop_time,
            ..OrderInfo::default()
        };
        info.set_offsets(offsets);
        let mut counts = Vec::with_capacity(offsets.len());
        for o in offsets {
            let before = old.as_ref().map_or(0, |old| {
                let was_popped = old.offsets().contains(o);
                let count = old.offset_consumed_count.get(o).copied().unwrap_or(0);
                if was_popped && !same_attempt {
                    count + 1
                } else {
                    count
                }
            });
            if before > 0 {
                info.offset_consumed_count.insert(*o, before);
            }
            counts.push(before);
        }
        queues.insert(queue_id, info);
        self.file.mark_dirty();
        counts
    }

    /// Acknowledges `offset` of the batch popped at `pop_time`.
    pub(crate) fn commit_and_next(
        &self,
        topic: &str,
        group: &str,
        queue_id: i32,
        offset: i64,
        pop_time: i64,
    ) -> Commit {
        let mut table = self.table();
        let Some(info) = table.get_mut(&key(topic, group)).and_then(|q| q.get_mut(&queue_id)) else {
            return Commit::Unknown;
        };
        let Some(index) = info.offsets().iter().position(|o| *o == offset) else { return Commit::Unknown };
        if info.pop_time != pop_time {
            return Commit::StalePopTime;
        }
        if index < 64 {
            info.commit_offset_bit |= 1 << index;
        }
        info.last_consume_timestamp = crate::broker::now_ms();
        self.file.mark_dirty();
        info.next_offset().map_or(Commit::Unknown, Commit::Next)
    }

    /// Changes when `offset` of the batch popped at `pop_time` becomes visible. Returns the
    /// batch's pop time, or None when no such batch holds the offset.
    pub(crate) fn update_next_visible_time(
        &self,
        topic: &str,
        group: &str,
        queue_id: i32,
        offset: i64,
        pop_time: i64,
        next_visible_time: i64,
    ) -> Option<i64> {
        let mut table = self.table();
        let info = table.get_mut(&key(topic, group))?.get_mut(&queue_id)?;
        if info.pop_time != pop_time || !info.offsets().contains(&offset) {
            return None;
        }
        info.offset_next_visible_time.insert(offset, next_visible_time);
        self.file.mark_dirty();
        Some(info.pop_time)
    }

    /// Forgets a queue's state (its offset was reset).
    pub(crate) fn clear_block(&self, topic: &str, group: &str, queue_id: i32) {
        if let Some(q) = self.table().get_mut(&key(topic, group)) {
            if q.remove(&queue_id).is_some() {
                self.file.mark_dirty();
            }
        }
    }

    /// Drops entries untouched for a day, and those `keep` refuses (topic or group gone,
    /// queue no longer readable). Java: `autoClean`.
    pub(crate) fn auto_clean(&self, now: i64, keep: impl Fn(&str, i32) -> bool) {
        let mut table = self.table();
        let before: usize = table.values().map(HashMap::len).sum();
        table.retain(|k, queues| {
            queues
                .retain(|q, info| now - info.last_consume_timestamp.max(info.pop_time) < CLEAN_SPAN_MS && keep(k, *q));
            !queues.is_empty()
        });
        if table.values().map(HashMap::len).sum::<usize>() != before {
            self.file.mark_dirty();
        }
    }

    pub(crate) fn snapshot(&self) -> OrderInfoWrapper {
        OrderInfoWrapper {
            table: self
                .table()
                .iter()
                .map(|(k, q)| (k.clone(), q.iter().map(|(i, o)| (*i, o.clone())).collect()))
                .collect(),
        }
    }

    /// Writes the file when something changed.
    pub(crate) fn persist_if_dirty(&self) -> Result<bool, MetadataError> {
        self.file.persist_if_dirty(|| self.snapshot())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manager() -> (tempfile::TempDir, ConsumerOrderInfoManager) {
        let dir = tempfile::tempdir().unwrap();
        let m = ConsumerOrderInfoManager::load(dir.path().join("consumerOrderInfo.json")).unwrap();
        (dir, m)
    }

    #[test]
    fn a_batch_blocks_until_acked_or_invisible() {
        let (_dir, m) = manager();
        assert!(!m.needs_block("T", "G", 0, None, 0));
        assert_eq!(m.update(Some("a1"), "T", "G", 0, 1_000, 60_000, &[5, 6, 7]), vec![0, 0, 0]);
        assert!(m.needs_block("T", "G", 0, Some("a2"), 2_000));
        assert!(!m.needs_block("T", "G", 0, Some("a1"), 2_000), "the same attempt may pop again");
        assert!(!m.needs_block("T", "G", 0, None, 61_000), "invisible time passed");
        assert_eq!(m.commit_and_next("T", "G", 0, 6, 1_000), Commit::Next(5));
        assert_eq!(m.commit_and_next("T", "G", 0, 5, 999), Commit::StalePopTime);
        assert_eq!(m.commit_and_next("T", "G", 0, 9, 1_000), Commit::Unknown);
        assert_eq!(m.commit_and_next("T", "G", 0, 5, 1_000), Commit::Next(7));
        assert_eq!(m.commit_and_next("T", "G", 0, 7, 1_000), Commit::Next(8));
        assert!(!m.needs_block("T", "G", 0, Some("a2"), 2_000), "all acked");
    }

    #[test]
    fn counts_carry_over_and_state_survives_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("consumerOrderInfo.json");
        let m = ConsumerOrderInfoManager::load(&path).unwrap();
        m.update(Some("a1"), "T", "G", 1, 1_000, 100, &[5, 6]);
        assert_eq!(m.update(Some("a1"), "T", "G", 1, 1_100, 100, &[5, 6]), vec![0, 0], "same attempt");
        assert_eq!(m.update(Some("a2"), "T", "G", 1, 1_200, 100, &[5, 6, 7]), vec![1, 1, 0]);
        assert_eq!(m.update_next_visible_time("T", "G", 1, 7, 1_200, 9_000), Some(1_200));
        assert_eq!(m.block_ends_at("T", "G", 1), Some(9_000));
        m.persist_if_dirty().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"o\"") && text.contains("\"oc\"") && text.contains("\"popTime\""), "{text}");
        let again = ConsumerOrderInfoManager::load(&path).unwrap();
        assert_eq!(again.snapshot(), m.snapshot());
        // Java writes integer keys bare; they load too.
        std::fs::write(
            &path,
            r#"{"table":{"T@G":{1:{"a":"x","cm":1,"i":100,"l":5,"o":[5,1],"oc":{6:2},"popTime":5}}}}"#,
        )
        .unwrap();
        let java = ConsumerOrderInfoManager::load(&path).unwrap();
        assert_eq!(java.commit_and_next("T", "G", 1, 6, 5), Commit::Next(7));
    }
}
