//! ConsumeQueue and ConsumeQueueStore on real files: appends across segment rolls, duplicate
//! and out-of-order dispatch, blank pre-fill, recovery (clean, torn tail, dirty units past the
//! CommitLog), time search, retention, and a model-based property test.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use ferromq_store::{ConsumeQueue, ConsumeQueueStore, CqUnit, DispatchRequest, CQ_STORE_UNIT_SIZE};
use proptest::prelude::*;

/// Ten units per segment, so a few dozen puts roll several segments.
const SEG: usize = 10 * CQ_STORE_UNIT_SIZE;

fn req(queue_offset: i64, commit_log_offset: i64, size: i32) -> DispatchRequest {
    DispatchRequest {
        topic: "TopicTest".into(),
        queue_id: 1,
        commit_log_offset,
        msg_size: size,
        tags_code: commit_log_offset * 7,
        consume_queue_offset: queue_offset,
        ..Default::default()
    }
}

fn unit(queue_offset: i64, commit_log_offset: i64, size: i32) -> CqUnit {
    CqUnit { queue_offset, commit_log_offset, size, tags_code: commit_log_offset * 7 }
}

fn open(root: &Path) -> ConsumeQueue {
    ConsumeQueue::open(root, "TopicTest", 1, SEG).unwrap()
}

/// Opens and recovers as the store does after a restart whose CommitLog ends at `commit_log_max`.
fn reopen(root: &Path, commit_log_max: i64) -> ConsumeQueue {
    let q = open(root);
    q.recover().unwrap();
    q.truncate_dirty(commit_log_max).unwrap();
    q
}

/// Puts units `from..to` at physical offsets `offset * 100`, size 100.
fn put_range(q: &ConsumeQueue, from: i64, to: i64) {
    for i in from..to {
        assert!(q.put(&req(i, i * 100, 100)).unwrap(), "unit {i} written");
    }
}

fn segment_file(root: &Path, from: i64) -> std::path::PathBuf {
    root.join("TopicTest").join("1").join(format!("{from:020}"))
}

#[test]
fn put_and_get_across_segment_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    assert_eq!((q.min_offset_in_queue(), q.max_offset_in_queue(), q.max_physic_offset()), (0, 0, 0));
    put_range(&q, 0, 25);
    assert_eq!(q.max_offset_in_queue(), 25);
    assert_eq!(q.min_offset_in_queue(), 0);
    assert_eq!(q.max_physic_offset(), 2500);
    for i in 0..25 {
        assert_eq!(q.get(i), Some(unit(i, i * 100, 100)));
    }
    assert_eq!(q.get(25), None);
    assert_eq!(q.get(-1), None);
    assert!(segment_file(dir.path(), 0).exists());
    assert!(segment_file(dir.path(), 2 * SEG as i64).exists());
}

#[test]
fn iter_from_stops_at_the_segment_end_and_at_max() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    put_range(&q, 0, 25);
    let batch = q.iter_from(7, 32);
    assert_eq!(batch, (7..10).map(|i| unit(i, i * 100, 100)).collect::<Vec<_>>());
    assert_eq!(q.iter_from(10, 4), (10..14).map(|i| unit(i, i * 100, 100)).collect::<Vec<_>>());
    assert_eq!(q.iter_from(20, 32).len(), 5, "the last segment holds what is written");
    assert!(q.iter_from(25, 32).is_empty());
    assert!(q.iter_from(3, 0).is_empty());
}

#[test]
fn reads_during_appends_see_only_complete_units() {
    let dir = tempfile::tempdir().unwrap();
    let q = std::sync::Arc::new(open(dir.path()));
    let reader = {
        let q = q.clone();
        std::thread::spawn(move || {
            let mut seen = 0;
            while seen < 200 {
                for u in q.iter_from(seen, 16) {
                    assert_eq!(u, unit(seen, seen * 100, 100));
                    seen += 1;
                }
                std::thread::yield_now();
            }
        })
    };
    put_range(&q, 0, 200);
    reader.join().unwrap();
}

#[test]
fn duplicate_puts_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    put_range(&q, 0, 12);
    // Re-dispatch after a crash replays records the queue already has.
    for i in [0, 5, 11] {
        assert!(!q.put(&req(i, i * 100, 100)).unwrap());
    }
    // A record ending at the max physical offset is a duplicate whatever queue offset it claims.
    assert!(!q.put(&req(12, 1100, 100)).unwrap());
    assert_eq!(q.max_offset_in_queue(), 12);
    assert_eq!(q.get(11), Some(unit(11, 1100, 100)));
}

#[test]
fn out_of_order_put_with_a_new_record_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    put_range(&q, 0, 5);
    let err = q.put(&req(3, 5000, 100)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    let text = err.to_string();
    assert!(text.contains("TopicTest/1") && text.contains("order broken"), "{text}");
    assert_eq!(q.max_offset_in_queue(), 5);
    assert_eq!(q.max_physic_offset(), 500);
}

#[test]
fn first_put_at_offset_25_prefills_blanks_and_sets_min_offset() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    assert!(q.put(&req(25, 9000, 100)).unwrap());
    // The first segment starts at the boundary holding offset 25: units 20..25 are blanks.
    assert!(segment_file(dir.path(), 20 * CQ_STORE_UNIT_SIZE as i64).exists());
    assert!(!segment_file(dir.path(), 0).exists());
    assert_eq!(q.min_offset_in_queue(), 25);
    assert_eq!(q.max_offset_in_queue(), 26);
    assert_eq!(q.get(24), None, "blanks are below the min offset");
    assert_eq!(q.get(25), Some(unit(25, 9000, 100)));
    assert!(q.put(&req(26, 9100, 100)).unwrap());
    drop(q);

    let q = reopen(dir.path(), 9200);
    assert_eq!((q.min_offset_in_queue(), q.max_offset_in_queue(), q.max_physic_offset()), (25, 27, 9200));
    assert_eq!(q.get(26), Some(unit(26, 9100, 100)));
}

#[test]
fn a_gap_is_filled_with_blank_units() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    put_range(&q, 0, 2);
    assert!(q.put(&req(5, 500, 100)).unwrap());
    assert_eq!(q.max_offset_in_queue(), 6);
    for i in 2..5 {
        assert!(q.get(i).unwrap().is_blank(), "unit {i}");
    }
    drop(q);
    let q = reopen(dir.path(), 600);
    assert_eq!(q.max_offset_in_queue(), 6);
    assert_eq!(q.max_physic_offset(), 600);
    assert_eq!(q.get(5), Some(unit(5, 500, 100)));
}

#[test]
fn recover_after_reopen_keeps_exactly_the_written_units() {
    let dir = tempfile::tempdir().unwrap();
    for n in [0, 1, 9, 10, 11, 20, 35] {
        let root = dir.path().join(n.to_string());
        let q = open(&root);
        put_range(&q, 0, n);
        q.flush().unwrap();
        assert_eq!(q.dirty_pages(), 0);
        drop(q);
        let q = reopen(&root, n * 100);
        assert_eq!(q.max_offset_in_queue(), n, "{n} units");
        assert_eq!(q.min_offset_in_queue(), 0);
        assert_eq!(q.max_physic_offset(), n * 100);
        assert_eq!(q.get(n), None);
        if n > 0 {
            assert_eq!(q.get(n - 1), Some(unit(n - 1, (n - 1) * 100, 100)));
        }
        put_range(&q, n, n + 3);
        assert_eq!(q.get(n + 2), Some(unit(n + 2, (n + 2) * 100, 100)));
    }
}

#[test]
fn recover_drops_a_torn_unit_of_garbage_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    put_range(&q, 0, 13);
    drop(q);
    // Units 10..13 are in the second segment; a torn write left 7 bytes of unit 13.
    let mut f = std::fs::OpenOptions::new().write(true).open(segment_file(dir.path(), SEG as i64)).unwrap();
    f.seek(SeekFrom::Start(3 * CQ_STORE_UNIT_SIZE as u64)).unwrap();
    f.write_all(&[0x12; 7]).unwrap();
    drop(f);

    let q = reopen(dir.path(), 1300);
    assert_eq!(q.max_offset_in_queue(), 13);
    assert_eq!(q.max_physic_offset(), 1300);
    assert_eq!(q.get(13), None);
    assert!(q.put(&req(13, 1300, 100)).unwrap());
    assert_eq!(q.get(13), Some(unit(13, 1300, 100)));
    drop(q);
    assert_eq!(reopen(dir.path(), 1400).max_offset_in_queue(), 14);
}

#[test]
fn recover_deletes_segments_after_a_hole() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    put_range(&q, 0, 25);
    drop(q);
    // Unit 14 was never written (zeros) while the third segment reached disk.
    let mut f = std::fs::OpenOptions::new().write(true).open(segment_file(dir.path(), SEG as i64)).unwrap();
    f.seek(SeekFrom::Start(4 * CQ_STORE_UNIT_SIZE as u64)).unwrap();
    f.write_all(&[0; CQ_STORE_UNIT_SIZE]).unwrap();
    drop(f);

    let q = reopen(dir.path(), 2500);
    assert_eq!(q.max_offset_in_queue(), 14);
    assert_eq!(q.max_physic_offset(), 1400);
    assert!(!segment_file(dir.path(), 2 * SEG as i64).exists());
    // Re-dispatch refills from the hole.
    put_range(&q, 14, 25);
    assert_eq!(q.get(24), Some(unit(24, 2400, 100)));
}

#[test]
fn truncate_dirty_cuts_units_beyond_the_commit_log_and_put_continues() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    put_range(&q, 0, 25);
    // The CommitLog recovered to 1250: unit 12 (1200..1300) is torn there, 13.. are gone.
    q.truncate_dirty(1250).unwrap();
    assert_eq!(q.max_offset_in_queue(), 12);
    assert_eq!(q.max_physic_offset(), 1200);
    assert_eq!(q.get(12), None);
    assert!(!segment_file(dir.path(), 2 * SEG as i64).exists());
    // New records continue at the recovered CommitLog end.
    assert!(q.put(&req(12, 1250, 40)).unwrap());
    assert_eq!(q.get(12), Some(unit(12, 1250, 40)));
    assert_eq!(q.max_physic_offset(), 1290);

    // A cut on a segment boundary removes the whole later segment.
    q.truncate_dirty(1000).unwrap();
    assert_eq!(q.max_offset_in_queue(), 10);
    assert!(!segment_file(dir.path(), SEG as i64).exists());
    put_range(&q, 10, 11);
    assert_eq!(q.max_offset_in_queue(), 11);

    // Nothing past the CommitLog: nothing changes.
    q.truncate_dirty(i64::MAX).unwrap();
    assert_eq!(q.max_offset_in_queue(), 11);

    // Everything is past it: the queue empties but keeps its first segment.
    q.truncate_dirty(0).unwrap();
    assert_eq!((q.min_offset_in_queue(), q.max_offset_in_queue(), q.max_physic_offset()), (0, 0, 0));
    put_range(&q, 0, 1);
}

#[test]
fn truncated_units_do_not_come_back_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    put_range(&q, 0, 8);
    q.truncate_dirty(500).unwrap();
    assert_eq!(q.max_offset_in_queue(), 5);
    drop(q);
    // The CommitLog since grew past the old units' range with other queues' records.
    let q = reopen(dir.path(), 100_000);
    assert_eq!(q.max_offset_in_queue(), 5);
    assert_eq!(q.max_physic_offset(), 500);
}

#[test]
fn truncate_dirty_keeps_prefilled_blanks() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    assert!(q.put(&req(25, 9000, 100)).unwrap());
    q.truncate_dirty(9000).unwrap();
    // Consumers' offsets never go backwards: the queue still starts at 25.
    assert_eq!((q.min_offset_in_queue(), q.max_offset_in_queue(), q.max_physic_offset()), (25, 25, 0));
    assert!(q.put(&req(25, 9000, 50)).unwrap());
    drop(q);
    let q = reopen(dir.path(), 9050);
    assert_eq!((q.min_offset_in_queue(), q.max_offset_in_queue()), (25, 26));
}

/// Store times of the records at `i * 100`: equal runs, steps and a segment roll.
const TIMES: [i64; 14] = [10, 20, 20, 20, 30, 50, 50, 60, 70, 90, 90, 95, 97, 100];

fn time_of(phy: i64, _size: i32) -> Option<i64> {
    TIMES.get(usize::try_from(phy / 100).ok()?).copied()
}

#[test]
fn offset_of_time_lower_and_upper_follow_java() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    assert_eq!(q.offset_of_time(50, true, time_of), 0, "empty queue");
    assert_eq!(q.offset_of_time(50, false, time_of), 0, "empty queue");
    put_range(&q, 0, TIMES.len() as i64);
    let cases = [
        // (timestamp, lower, upper)
        (20, 1, 3),    // exact hit on a run: its first and its last unit
        (10, 0, 0),    // exact hit on the first unit
        (100, 13, 13), // exact hit on the last unit
        (90, 9, 10),   // a run across the segment boundary
        (25, 4, 3),    // between units: lower is the later, upper the earlier
        (55, 7, 6),
        (5, 0, 0),     // before all: the min offset for both
        (101, 14, 13), // after all: lower is the max offset, upper the last unit
    ];
    for (ts, lower, upper) in cases {
        assert_eq!(q.offset_of_time(ts, true, time_of), lower, "lower {ts}");
        assert_eq!(q.offset_of_time(ts, false, time_of), upper, "upper {ts}");
    }
}

#[test]
fn offset_of_time_starts_at_the_min_offset_and_treats_unreadable_records_as_old() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    for i in 3..TIMES.len() as i64 {
        assert!(q.put(&req(i, i * 100, 100)).unwrap());
    }
    assert_eq!(q.min_offset_in_queue(), 3);
    assert_eq!(q.offset_of_time(5, true, time_of), 3);
    assert_eq!(q.offset_of_time(5, false, time_of), 3);
    assert_eq!(q.offset_of_time(20, true, time_of), 3);
    // Records below 600 were deleted from the CommitLog.
    let deleted_below_600 = |phy: i64, size: i32| if phy < 600 { None } else { time_of(phy, size) };
    assert_eq!(q.offset_of_time(5, true, deleted_below_600), 6);
    assert_eq!(q.offset_of_time(60, false, deleted_below_600), 7);
}

#[test]
fn correct_min_offset_and_delete_expired_follow_the_commit_log_min() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    put_range(&q, 0, 30);
    q.correct_min_offset(1000);
    assert_eq!(q.min_offset_in_queue(), 10);
    assert_eq!(q.get(9), None);
    q.correct_min_offset(950);
    assert_eq!(q.min_offset_in_queue(), 10, "the min never moves back");

    assert_eq!(q.delete_expired(1550).unwrap(), 1);
    assert!(!segment_file(dir.path(), 0).exists());
    assert_eq!(q.min_offset_in_queue(), 16);
    assert_eq!(q.offset_of_time(0, true, |_, _| Some(1)), 16);

    // Every record is gone: the newest segment stays and the queue reads as empty.
    assert_eq!(q.delete_expired(100_000).unwrap(), 1);
    assert!(segment_file(dir.path(), 2 * SEG as i64).exists());
    assert_eq!((q.min_offset_in_queue(), q.max_offset_in_queue()), (30, 30));
    assert_eq!(q.get(29), None);
    assert!(q.put(&req(30, 100_000, 100)).unwrap());
    assert_eq!(q.min_offset_in_queue(), 30);
    assert_eq!(q.get(30), Some(unit(30, 100_000, 100)));
}

#[test]
fn destroy_removes_the_files_and_empties_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    put_range(&q, 0, 12);
    q.destroy().unwrap();
    assert!(!dir.path().join("TopicTest").join("1").exists());
    assert_eq!((q.min_offset_in_queue(), q.max_offset_in_queue(), q.max_physic_offset()), (0, 0, 0));
}

#[test]
fn store_loads_queues_and_skips_entries_that_are_not_queues() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("consumequeue");
    {
        let store = ConsumeQueueStore::load(&root, SEG).unwrap();
        let a0 = store.find_or_create("TopicA", 0).unwrap();
        let a1 = store.find_or_create("TopicA", 1).unwrap();
        let b3 = store.find_or_create("%RETRY%group", 3).unwrap();
        assert!(std::sync::Arc::ptr_eq(&a0, &store.find_or_create("TopicA", 0).unwrap()));
        for i in 0..12 {
            a0.put(&req(i, i * 300, 100)).unwrap();
            a1.put(&req(i, i * 300 + 100, 100)).unwrap();
        }
        b3.put(&req(7, 3600, 100)).unwrap();
        store.flush_all().unwrap();
        assert!(store.find_or_create("../escape", 0).is_err());
    }
    std::fs::create_dir_all(root.join("TopicA").join("not-a-queue")).unwrap();
    std::fs::write(root.join("stray-file"), b"x").unwrap();
    std::fs::write(root.join("TopicA").join("7"), b"a file, not a queue").unwrap();

    let store = ConsumeQueueStore::load(&root, SEG).unwrap();
    store.recover_all().unwrap();
    store.truncate_dirty_all(3700).unwrap();
    let names: Vec<(String, i32)> = store.all().into_iter().map(|(t, id, _)| (t, id)).collect();
    assert_eq!(names, [("%RETRY%group".to_owned(), 3), ("TopicA".to_owned(), 0), ("TopicA".to_owned(), 1)]);
    assert_eq!(store.max_physic_offset(), 3700);
    assert_eq!(
        store.queue_max_offsets(),
        [(("%RETRY%group".to_owned(), 3), 8), (("TopicA".to_owned(), 0), 12), (("TopicA".to_owned(), 1), 12)]
    );
    assert_eq!(store.find("TopicA", 1).unwrap().get(11), Some(unit(11, 3400, 100)));
    assert!(store.find("TopicA", 2).is_none());

    store.delete_topic("TopicA").unwrap();
    assert!(store.find("TopicA", 0).is_none());
    assert!(!root.join("TopicA").join("0").exists() && !root.join("TopicA").join("1").exists());
    // Only an empty topic directory goes (as Java's deleteEmptyDirectory): the stray entries
    // keep it.
    assert!(root.join("TopicA").join("not-a-queue").exists());
    assert_eq!(store.max_physic_offset(), 3700);
    assert!(store.delete_topic("..").is_err());
    assert!(root.exists());
}

#[test]
fn empty_store_has_nothing_dispatched() {
    let dir = tempfile::tempdir().unwrap();
    let store = ConsumeQueueStore::load(&dir.path().join("cq"), SEG).unwrap();
    store.recover_all().unwrap();
    assert_eq!(store.max_physic_offset(), 0);
    assert!(store.queue_max_offsets().is_empty());
}

#[derive(Debug, Clone)]
enum Op {
    /// `count` new records, each `gap` bytes after the previous one ends.
    Put { count: usize, gap: i64, size: i32 },
    /// Records of other queues: the CommitLog grows by `bytes`.
    OtherQueues { bytes: i64 },
    /// Re-dispatch of an existing unit (`back` from the newest).
    Duplicate { back: usize },
    /// Restart: reopen, recover, cut to the CommitLog end.
    Reopen,
    /// The CommitLog recovered to the start of unit `keep` (or inside it when `torn`).
    TruncateDirty { keep: usize, torn: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..15, 0i64..50, 1i32..200).prop_map(|(count, gap, size)| Op::Put { count, gap, size }),
        1 => (1i64..3000).prop_map(|bytes| Op::OtherQueues { bytes }),
        1 => (0usize..40).prop_map(|back| Op::Duplicate { back }),
        2 => Just(Op::Reopen),
        1 => (0usize..120, any::<bool>()).prop_map(|(keep, torn)| Op::TruncateDirty { keep, torn }),
    ]
}

/// What the queue should hold.
#[derive(Debug)]
struct Model {
    /// Queue offset of the first unit (blank-filled before it).
    start: i64,
    started: bool,
    units: Vec<CqUnit>,
    commit_log_end: i64,
}

impl Model {
    fn next_offset(&self) -> i64 {
        self.start + self.units.len() as i64
    }

    fn check(&self, q: &ConsumeQueue) {
        let max = if self.started { self.next_offset() } else { 0 };
        let min = if self.started { self.start } else { 0 };
        assert_eq!(q.max_offset_in_queue(), max);
        assert_eq!(q.min_offset_in_queue(), min);
        assert_eq!(q.max_physic_offset(), self.units.last().map_or(0, CqUnit::commit_log_end));
        assert_eq!(q.get(min - 1), None);
        assert_eq!(q.get(max), None);
        let mut read = Vec::new();
        let mut at = min;
        while at < max {
            let batch = q.iter_from(at, 7);
            assert!(!batch.is_empty(), "units from {at} are readable");
            at += batch.len() as i64;
            read.extend(batch);
        }
        assert_eq!(read, self.units);
        for u in &self.units {
            assert_eq!(q.get(u.queue_offset).as_ref(), Some(u));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn queue_matches_a_vec_model_through_puts_restarts_and_truncation(
        start in 0i64..30,
        ops in proptest::collection::vec(op(), 1..25),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut q = open(dir.path());
        let mut model = Model { start, started: false, units: Vec::new(), commit_log_end: 0 };
        for op in ops {
            match op {
                Op::Put { count, gap, size } => {
                    for _ in 0..count {
                        let u = CqUnit {
                            queue_offset: model.next_offset(),
                            commit_log_offset: model.commit_log_end + gap,
                            size,
                            tags_code: model.commit_log_end + gap,
                        };
                        let r = DispatchRequest {
                            commit_log_offset: u.commit_log_offset,
                            msg_size: u.size,
                            tags_code: u.tags_code,
                            consume_queue_offset: u.queue_offset,
                            ..Default::default()
                        };
                        prop_assert!(q.put(&r).unwrap());
                        model.commit_log_end = u.commit_log_end();
                        model.units.push(u);
                        model.started = true;
                    }
                }
                Op::OtherQueues { bytes } => model.commit_log_end += bytes,
                Op::Duplicate { back } => {
                    if let Some(u) = model.units.iter().rev().nth(back % model.units.len().max(1)) {
                        let r = DispatchRequest {
                            commit_log_offset: u.commit_log_offset,
                            msg_size: u.size,
                            tags_code: u.tags_code,
                            consume_queue_offset: u.queue_offset,
                            ..Default::default()
                        };
                        prop_assert!(!q.put(&r).unwrap());
                    }
                }
                Op::Reopen => {
                    drop(q);
                    q = reopen(dir.path(), model.commit_log_end);
                }
                Op::TruncateDirty { keep, torn } => {
                    if model.units.is_empty() {
                        continue;
                    }
                    let keep = keep % (model.units.len() + 1);
                    let max = match model.units.get(keep) {
                        Some(u) if torn => u.commit_log_end() - 1,
                        Some(u) => u.commit_log_offset,
                        None => model.commit_log_end,
                    };
                    q.truncate_dirty(max).unwrap();
                    model.units.truncate(keep);
                    model.commit_log_end = max;
                }
            }
            model.check(&q);
        }
    }
}
