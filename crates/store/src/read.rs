//! Reading a consume queue's messages. Java: `DefaultMessageStore#getMessage`.

use crate::commit_log::CommitLog;
use crate::config::StoreConfig;
use crate::consume_queue::ConsumeQueueStore;
use crate::consume_queue_ext::{is_ext_addr, CqExtUnit};
use crate::get_result::{GetMessageResult, GetMessageStatus};

/// Largest amount a single read may return, whatever the caller asks (Java:
/// `MAX_PULL_MSG_SIZE`).
pub(crate) const MAX_PULL_MSG_BYTES: usize = 128 * 1024 * 1024;

/// Queue entries scanned per read when a filter rejects most of them (Java: 16000 bytes of
/// consume queue, `maxFilterMessageSize`).
const MAX_FILTER_SCAN_UNITS: usize = 16_000 / 20;

/// The parts of the store a read needs.
pub(crate) struct StoreView<'a> {
    pub config: &'a StoreConfig,
    pub commit_log: &'a CommitLog,
    pub consume_queues: &'a ConsumeQueueStore,
    pub memory_budget_bytes: i64,
}

/// Whether a read of `count` messages totalling `bytes` (plus one more of `next_size`) is full.
/// Cold data (beyond the memory budget) is read in smaller batches, as RocketMQ does, to spare
/// the disk. Java: `isTheBatchFull`.
fn batch_full(
    view: &StoreView<'_>,
    next_size: usize,
    max_msg_nums: usize,
    max_bytes: usize,
    bytes: usize,
    count: usize,
    in_memory: bool,
) -> bool {
    if count == 0 {
        return false;
    }
    if count >= max_msg_nums || bytes + next_size > max_bytes {
        return true;
    }
    let c = view.config;
    if in_memory {
        bytes + next_size > c.max_transfer_bytes_on_message_in_memory as usize
            || count >= c.max_transfer_count_on_message_in_memory as usize
    } else {
        bytes + next_size > c.max_transfer_bytes_on_message_in_disk as usize
            || count >= c.max_transfer_count_on_message_in_disk as usize
    }
}

/// Decides which messages a read returns. Java: `MessageFilter`.
pub trait MessageFilter {
    /// Whether the unit may match, from its ConsumeQueue tagsCode (tag hash codes) and, with
    /// extension files, its extension unit (store time and bloom-filter bitmap).
    fn is_matched_by_consume_queue(&self, tags_code: i64, ext: Option<&CqExtUnit>) -> bool;
    /// Whether the stored record (its bytes in the CommitLog) matches; asked only for units
    /// that passed [`is_matched_by_consume_queue`](Self::is_matched_by_consume_queue). SQL92
    /// filters evaluate the record's properties here.
    fn is_matched_by_commit_log(&self, _record: &[u8]) -> bool {
        true
    }
}

/// A closure over the tagsCode filters by the ConsumeQueue only.
impl<F: Fn(i64) -> bool> MessageFilter for F {
    fn is_matched_by_consume_queue(&self, tags_code: i64, _ext: Option<&CqExtUnit>) -> bool {
        self(tags_code)
    }
}

pub(crate) fn get_message(
    view: &StoreView<'_>,
    topic: &str,
    queue_id: i32,
    offset: i64,
    max_msg_nums: usize,
    max_total_bytes: usize,
    filter: Option<&dyn MessageFilter>,
) -> GetMessageResult {
    let mut result = GetMessageResult {
        status: GetMessageStatus::NoMessageInQueue,
        next_begin_offset: offset,
        min_offset: 0,
        max_offset: 0,
        messages: Vec::new(),
        queue_offsets: Vec::new(),
        suggest_pulling_from_slave: false,
    };
    let Some(cq) = view.consume_queues.find(topic, queue_id) else {
        result.status = GetMessageStatus::NoMatchedLogicQueue;
        result.next_begin_offset = 0;
        return result;
    };
    let (min, max) = (cq.min_offset_in_queue(), cq.max_offset_in_queue());
    result.min_offset = min;
    result.max_offset = max;
    if max == 0 {
        result.status = GetMessageStatus::NoMessageInQueue;
        result.next_begin_offset = 0;
        return result;
    }
    if offset < min {
        result.status = GetMessageStatus::OffsetTooSmall;
        result.next_begin_offset = min;
        return result;
    }
    if offset == max {
        result.status = GetMessageStatus::OffsetOverflowOne;
        result.next_begin_offset = offset;
        return result;
    }
    if offset > max {
        result.status = GetMessageStatus::OffsetOverflowBadly;
        result.next_begin_offset = max;
        return result;
    }

    let max_bytes = max_total_bytes.clamp(100, MAX_PULL_MSG_BYTES);
    let max_phy = view.commit_log.max_offset();
    let scan_limit = MAX_FILTER_SCAN_UNITS.max(max_msg_nums);
    result.status = GetMessageStatus::NoMatchedMessage;
    let mut next = offset;
    let mut bytes = 0usize;
    let mut max_phy_pulling = 0i64;
    let mut scanned = 0usize;
    // Units are read a batch's worth at a time, not the whole filter scan limit at once: a
    // pull usually takes the first `max_msg_nums` units, and decoding 800 to use 32 was most
    // of a pull's cost. When a filter lets few through, the steps double.
    let mut step = max_msg_nums.clamp(1, scan_limit);
    'scan: while next < max && scanned < scan_limit && result.messages.len() < max_msg_nums {
        let units = cq.iter_from_with_ext(next, step.min(scan_limit - scanned));
        if units.is_empty() {
            if result.messages.is_empty() {
                result.status = GetMessageStatus::OffsetFoundNull;
            }
            break;
        }
        step = (step * 2).min(scan_limit);
        for (unit, ext) in units {
            if next >= max {
                break 'scan;
            }
            scanned += 1;
            let size = unit.size.max(0) as usize;
            let in_memory = max_phy - unit.commit_log_offset <= view.memory_budget_bytes;
            if batch_full(view, size, max_msg_nums, max_bytes, bytes, result.messages.len(), in_memory) {
                break 'scan;
            }
            next = unit.queue_offset + 1;
            max_phy_pulling = unit.commit_log_offset;
            if unit.size == i32::MAX {
                // A blank pre-fill entry: nothing stored there.
                continue;
            }
            // An extension address that no longer resolves says nothing about the tags: the
            // record decides (Java passes a null tagsCode).
            let unknown_tags = ext.is_none() && is_ext_addr(unit.tags_code);
            if !unknown_tags && filter.is_some_and(|f| !f.is_matched_by_consume_queue(unit.tags_code, ext.as_ref())) {
                continue;
            }
            match view.commit_log.get_message(unit.commit_log_offset, size) {
                Some(msg) if filter.is_some_and(|f| !f.is_matched_by_commit_log(&msg)) => {}
                Some(msg) => {
                    bytes += msg.len();
                    result.messages.push(msg);
                    result.queue_offsets.push(unit.queue_offset);
                    result.status = GetMessageStatus::Found;
                }
                None => {
                    if result.messages.is_empty() {
                        result.status = GetMessageStatus::MessageWasRemoving;
                    }
                }
            }
        }
    }
    result.next_begin_offset = next;
    result.suggest_pulling_from_slave = max_phy - max_phy_pulling > view.memory_budget_bytes;
    result
}
