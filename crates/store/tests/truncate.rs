//! Controller mode's store operations on real files: cutting the log back at runtime
//! (`truncate_files`: CommitLog, consume queues, queue offsets, dispatch) and dispatch bounded
//! by the confirm offset.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use ferromq_protocol::message::StoredMessage;
use ferromq_store::{FlushDiskType, MessageStore, PutMessageStatus, StoreConfig, TruncateError};

const SEGMENT: i64 = 16 * 1024;
const TOPIC: &str = "Cut";

fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

fn open(root: &Path) -> MessageStore {
    let config = StoreConfig {
        mapped_file_size_commit_log: SEGMENT as u64,
        mapped_file_size_consume_queue: 20 * 64,
        flush_disk_type: FlushDiskType::AsyncFlush,
        flush_interval_consume_queue_ms: 20,
        flush_interval_commit_log_ms: 10,
        max_hash_slot_num: 256,
        max_index_num: 1024,
        ..StoreConfig::with_root(root)
    };
    MessageStore::open(config, host()).unwrap()
}

fn msg(n: u64) -> StoredMessage {
    StoredMessage {
        topic: TOPIC.into(),
        queue_id: (n % 2) as i32,
        body: Bytes::from(format!("{n}:{}", "x".repeat(((n * 7919) % 900) as usize))),
        born_host: host(),
        store_host: host(),
        properties: format!("KEYS\u{1}k{n}\u{2}"),
        ..StoredMessage::default()
    }
}

/// Puts messages `from..to`; returns each one's physical offset.
async fn fill(store: &MessageStore, from: u64, to: u64) -> Vec<i64> {
    let mut offsets = Vec::new();
    for n in from..to {
        let r = store.put_message(msg(n)).await;
        assert_eq!(r.status, PutMessageStatus::PutOk, "{r:?}");
        offsets.push(r.append.unwrap().wrote_offset);
    }
    offsets
}

fn queue_ends(store: &MessageStore) -> (i64, i64) {
    (store.max_offset_in_queue(TOPIC, 0), store.max_offset_in_queue(TOPIC, 1))
}

#[tokio::test]
async fn a_cut_drops_the_tail_everywhere_and_new_puts_continue_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let offsets = fill(&store, 0, 60).await;
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert!(offsets[59] > 2 * SEGMENT, "the messages span several segments");
    // Message 37 is the first one cut: queue 1 keeps 0..=35 odd (18), queue 0 keeps 19.
    let cut = offsets[37];
    store.truncate_files(cut).unwrap();
    assert_eq!(store.max_phy_offset(), cut);
    assert_eq!(store.dispatched_phy_offset(), cut);
    assert_eq!(queue_ends(&store), (19, 18));
    assert!(store.look_message_by_offset(offsets[36]).is_some());
    assert!(store.look_message_by_offset(cut).is_none(), "the cut record is gone");

    // New puts take the cut record's place and the next queue offsets.
    let r = store.put_message(msg(1001)).await;
    assert_eq!(r.status, PutMessageStatus::PutOk);
    let append = r.append.unwrap();
    assert_eq!((append.wrote_offset, append.logics_offset), (cut, 18));
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(queue_ends(&store), (19, 19));
    let end = store.max_phy_offset();
    drop(store);

    // A restart recovers the cut log, not the old records behind it.
    let store = open(dir.path());
    assert_eq!(store.max_phy_offset(), end);
    assert_eq!(queue_ends(&store), (19, 19));
}

#[tokio::test]
async fn a_cut_at_a_segment_boundary_removes_the_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let offsets = fill(&store, 0, 60).await;
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let first_in_second = *offsets.iter().find(|&&o| o >= SEGMENT).unwrap();
    assert_eq!(first_in_second, SEGMENT, "a segment's first record starts at its offset");
    store.truncate_files(SEGMENT).unwrap();
    // The log ends with the first segment, sealed by its end marker.
    assert!(store.max_phy_offset() <= SEGMENT && store.max_phy_offset() > offsets[0]);
    let kept = offsets.iter().filter(|&&o| o < SEGMENT).count() as i64;
    let (q0, q1) = queue_ends(&store);
    assert_eq!(q0 + q1, kept);
    let r = store.put_message(msg(7)).await;
    assert_eq!(r.append.unwrap().wrote_offset, SEGMENT);
    let files = std::fs::read_dir(dir.path().join("commitlog")).unwrap().count();
    let names: Vec<_> =
        std::fs::read_dir(dir.path().join("commitlog")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(files <= 3, "later segments removed (the next may be pre-created): {names:?}");
}

#[tokio::test]
async fn a_cut_inside_a_record_or_below_the_log_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let offsets = fill(&store, 0, 10).await;
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let end = store.max_phy_offset();
    let inside = offsets[4] + 3;
    assert!(!store.is_offset_aligned(inside));
    assert!(store.is_offset_aligned(offsets[4]));
    assert!(matches!(store.truncate_files(inside), Err(TruncateError::Unaligned { offset }) if offset == inside));
    assert!(matches!(store.truncate_files(-1), Err(TruncateError::BelowMin { .. })));
    assert_eq!(store.max_phy_offset(), end);
    assert_eq!(queue_ends(&store), (5, 5));
    // At or past the end: nothing to cut.
    store.truncate_files(end).unwrap();
    store.truncate_files(end + 1000).unwrap();
    assert_eq!(store.max_phy_offset(), end);
}

#[tokio::test]
async fn bounded_dispatch_stops_at_the_confirm_offset() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.set_confirm_offset(0);
    store.bound_dispatch_by_confirm(true);
    let offsets = fill(&store, 0, 10).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(queue_ends(&store), (0, 0), "nothing confirmed, nothing consumable");
    assert_eq!(store.dispatched_phy_offset(), 0);

    store.set_confirm_offset(offsets[4]);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.dispatched_phy_offset(), offsets[4]);
    assert_eq!(queue_ends(&store), (2, 2), "messages 0..4 only");

    // A confirm offset inside a record dispatches up to the record before it.
    store.set_confirm_offset(offsets[6] + 5);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(store.dispatched_phy_offset(), offsets[6]);

    // A cut below the confirm offset lowers it; unbounded, everything left is dispatched.
    store.truncate_files(offsets[5]).unwrap();
    assert_eq!(store.confirm_offset(), offsets[5]);
    assert_eq!(queue_ends(&store), (3, 2));
    store.bound_dispatch_by_confirm(false);
    fill(&store, 100, 102).await;
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(queue_ends(&store), (4, 3));
    drop(store);
    let store = open(dir.path());
    assert_eq!(store.confirm_offset(), offsets[5], "kept in the checkpoint");
}
