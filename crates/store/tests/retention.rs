//! Retention on real files: which CommitLog segments a run deletes and when, how the consume
//! queues and the index follow, and what readers see afterwards. The clock and the disk usage
//! are injected; the store's own retention thread does not run within a test (it waits a
//! minute before its first run).

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use bytes::Bytes;
use ferromq_protocol::message::StoredMessage;
use ferromq_store::{
    offset_to_file_name, FlushDiskType, GetMessageStatus, MessageStore, PutMessageStatus, StoreConfig,
    DELETE_FILES_BATCH_MAX,
};

const SEGMENT: i64 = 4096;
const HOUR_MS: i64 = 3_600_000;
/// 2030-01-01T00:00:00Z.
const MIDNIGHT_UTC_MS: i64 = 1_893_456_000_000;

fn at(hour: i64, minute: i64) -> i64 {
    MIDNIGHT_UTC_MS + hour * HOUR_MS + minute * 60_000
}

fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

fn config(root: &Path) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: SEGMENT as u64,
        mapped_file_size_consume_queue: 20 * 8,
        flush_disk_type: FlushDiskType::SyncFlush,
        flush_interval_consume_queue_ms: 50,
        max_hash_slot_num: 16,
        max_index_num: 16,
        file_reserved_time_hours: 72,
        delete_when: "04".into(),
        disk_max_used_space_ratio: 75,
        ..StoreConfig::with_root(root)
    }
}

fn msg(queue_id: i32, i: usize) -> StoredMessage {
    StoredMessage {
        topic: "T".into(),
        queue_id,
        body: Bytes::from(format!("m{i}-{}", "x".repeat(300))),
        born_host: "127.0.0.1:5555".parse().unwrap(),
        store_host: host(),
        born_timestamp_ms: 1_700_000_000_000,
        properties: format!("KEYS\u{1}k{i}\u{2}UNIQ_KEY\u{1}U-{i}\u{2}"),
        ..StoredMessage::default()
    }
}

/// Opens a store under `config`, with the disk reported at 10 % used, and puts `n` messages
/// alternately into queues 0 and 1 of topic T.
async fn filled_store(config: StoreConfig, n: usize) -> MessageStore {
    let store = MessageStore::open(config, host()).unwrap();
    store.set_disk_usage_probe(Arc::new(|_| Some(10.0)));
    for i in 0..n {
        let r = store.put_message(msg((i % 2) as i32, i)).await;
        assert_eq!(r.status, PutMessageStatus::PutOk, "{r:?}");
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store
}

/// Start offsets of the CommitLog segments in service, oldest first.
fn segments(store: &MessageStore) -> Vec<i64> {
    let last = (store.max_phy_offset() - 1) / SEGMENT * SEGMENT;
    (store.min_phy_offset()..=last).step_by(SEGMENT as usize).collect()
}

fn segment_path(root: &Path, offset: i64) -> PathBuf {
    root.join("commitlog").join(offset_to_file_name(offset))
}

fn set_modified(path: &Path, ms: i64) {
    let file = File::options().write(true).open(path).unwrap();
    file.set_modified(UNIX_EPOCH + Duration::from_millis(ms as u64)).unwrap();
}

/// Gives every segment in service a modification time: `expired(i)` decides, for the i-th
/// oldest, between 73 h and 1 h before `now`.
fn age_segments(root: &Path, store: &MessageStore, now: i64, expired: impl Fn(usize) -> bool) {
    for (i, offset) in segments(store).into_iter().enumerate() {
        let hours = if expired(i) { 73 } else { 1 };
        set_modified(&segment_path(root, offset), now - hours * HOUR_MS);
    }
}

/// (queue offset, physical offset) of every message of a queue, read through the store.
fn queue_units(store: &MessageStore, queue_id: i32) -> Vec<(i64, i64)> {
    let mut units = Vec::new();
    let mut offset = store.min_offset_in_queue("T", queue_id);
    loop {
        let r = store.get_message("T", queue_id, offset, 32, 1 << 20, None);
        if r.status != GetMessageStatus::Found {
            return units;
        }
        for m in &r.messages {
            let decoded = StoredMessage::decode(m).unwrap().0;
            units.push((decoded.queue_offset, decoded.physical_offset));
        }
        offset = r.next_begin_offset;
    }
}

fn files_in(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| entries.count())
}

#[tokio::test]
async fn expired_segments_are_deleted_only_at_the_delete_hour() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled_store(config(dir.path()), 60).await;
    let before = segments(&store);
    assert!(before.len() >= 5, "{before:?}");
    age_segments(dir.path(), &store, at(4, 0), |i| i < 3);

    let report = store.run_retention_once(at(3, 59));
    assert!(!report.time_up);
    assert_eq!(report.commit_log_segments_deleted, 0);
    assert_eq!(segments(&store), before);

    let report = store.run_retention_once(at(4, 0));
    assert!(report.time_up && !report.manual && !report.disk_over_ratio);
    assert_eq!(report.commit_log_segments_deleted, 3);
    assert_eq!(report.commit_log_min_offset, before[3]);
    assert_eq!(store.min_phy_offset(), before[3]);
    assert_eq!(segments(&store), before[3..]);
    for &offset in &before[..3] {
        assert!(!segment_path(dir.path(), offset).exists(), "segment {offset} still on disk");
    }
    for &offset in &before[3..] {
        assert!(segment_path(dir.path(), offset).exists(), "segment {offset} deleted");
    }

    // The rest is younger than fileReservedTime: the whole hour long, nothing more goes.
    let report = store.run_retention_once(at(4, 59));
    assert!(report.time_up);
    assert_eq!(report.commit_log_segments_deleted, 0);
}

#[tokio::test]
async fn deletion_stops_at_the_first_unexpired_segment() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled_store(config(dir.path()), 60).await;
    let before = segments(&store);
    age_segments(dir.path(), &store, at(4, 30), |i| i != 1);

    let report = store.run_retention_once(at(4, 30));
    assert_eq!(report.commit_log_segments_deleted, 1);
    assert_eq!(segments(&store), before[1..]);
}

#[tokio::test]
async fn every_listed_delete_hour_counts() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled_store(StoreConfig { delete_when: "04;16".into(), ..config(dir.path()) }, 40).await;
    let before = segments(&store);
    age_segments(dir.path(), &store, at(16, 0), |_| true);

    assert_eq!(store.run_retention_once(at(10, 0)).commit_log_segments_deleted, 0);
    let report = store.run_retention_once(at(16, 30));
    assert!(report.time_up);
    assert_eq!(report.commit_log_segments_deleted, before.len() - 1);
}

#[tokio::test]
async fn disk_over_ratio_deletes_unexpired_segments_a_batch_per_run_but_never_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled_store(config(dir.path()), 160).await;
    let before = segments(&store);
    assert!(before.len() > DELETE_FILES_BATCH_MAX + 2, "{} segments", before.len());
    age_segments(dir.path(), &store, at(10, 0), |_| false);

    store.set_disk_usage_probe(Arc::new(|_| Some(75.0)));
    let report = store.run_retention_once(at(10, 0));
    assert!(!report.disk_over_ratio, "exactly the ratio is not over it");
    assert_eq!(report.commit_log_segments_deleted, 0);
    // Over diskMaxUsedSpaceRatio but under diskSpaceCleanForciblyRatio: expired segments only
    // (none here), as in Java.
    store.set_disk_usage_probe(Arc::new(|_| Some(80.0)));
    let report = store.run_retention_once(at(10, 0));
    assert!(report.disk_over_ratio && !report.clean_forcibly);
    assert_eq!(report.commit_log_segments_deleted, 0, "unexpired segments stay under 85 %");

    store.set_disk_usage_probe(Arc::new(|_| Some(90.0)));
    let report = store.run_retention_once(at(10, 0));
    assert!(report.disk_over_ratio && report.clean_forcibly && !report.time_up);
    assert_eq!(report.disk_used_percent, Some(90.0));
    assert_eq!(report.commit_log_segments_deleted, DELETE_FILES_BATCH_MAX);
    assert_eq!(segments(&store), before[DELETE_FILES_BATCH_MAX..]);

    let report = store.run_retention_once(at(10, 0));
    assert_eq!(report.commit_log_segments_deleted, before.len() - DELETE_FILES_BATCH_MAX - 1);
    assert_eq!(segments(&store), [*before.last().unwrap()]);
    let report = store.run_retention_once(at(10, 0));
    assert_eq!(report.commit_log_segments_deleted, 0);
    assert!(segment_path(dir.path(), *before.last().unwrap()).exists());

    // The newest segment still takes and serves messages.
    let r = store.put_message(msg(0, 999)).await;
    assert_eq!(r.status, PutMessageStatus::PutOk);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let last = store.max_offset_in_queue("T", 0) - 1;
    assert_eq!(store.get_message("T", 0, last, 1, 1 << 20, None).status, GetMessageStatus::Found);
}

#[tokio::test]
async fn an_unmeasurable_disk_does_not_force_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled_store(config(dir.path()), 40).await;
    let before = segments(&store);
    age_segments(dir.path(), &store, at(10, 0), |_| false);
    store.set_disk_usage_probe(Arc::new(|_| None));

    let report = store.run_retention_once(at(10, 0));
    assert_eq!(report.disk_used_percent, None);
    assert!(!report.disk_over_ratio);
    assert_eq!(segments(&store), before);
}

#[tokio::test]
async fn a_manual_trigger_deletes_expired_segments_at_any_hour() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled_store(config(dir.path()), 60).await;
    let before = segments(&store);
    age_segments(dir.path(), &store, at(10, 0), |i| i < 2);

    assert_eq!(store.run_retention_once(at(10, 0)).commit_log_segments_deleted, 0);
    store.trigger_delete_files();
    let report = store.run_retention_once(at(10, 0));
    assert!(report.manual && !report.time_up);
    assert_eq!(report.commit_log_segments_deleted, 2);
    assert_eq!(segments(&store), before[2..]);
    // The trigger lasts several runs, like Java's; fresh segments stay all the same.
    assert!(store.run_retention_once(at(10, 0)).manual);
    assert_eq!(segments(&store), before[2..]);
}

#[tokio::test]
async fn consume_queues_and_index_follow_the_commit_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled_store(config(dir.path()), 100).await;
    let units = [queue_units(&store, 0), queue_units(&store, 1)];
    assert_eq!(units[0].len(), 50);
    let index_dir = dir.path().join("index");
    let index_files_before = files_in(&index_dir);
    let cq_dir = |queue_id: i32| dir.path().join("consumequeue").join("T").join(queue_id.to_string());
    let cq_files_before = [files_in(&cq_dir(0)), files_in(&cq_dir(1))];
    assert!(index_files_before > 3 && cq_files_before[0] > 3, "{index_files_before} {cq_files_before:?}");

    let before = segments(&store);
    age_segments(dir.path(), &store, at(4, 0), |i| i + 1 < before.len() / 2);
    let report = store.run_retention_once(at(4, 0));
    assert!(report.commit_log_segments_deleted > 1);
    let min_phy = store.min_phy_offset();
    assert_eq!(min_phy, before[report.commit_log_segments_deleted]);

    assert!(report.consume_queue_segments_deleted > 0);
    assert!(report.index_files_deleted > 0);
    assert_eq!(files_in(&index_dir), index_files_before - report.index_files_deleted);
    let cq_files_after = [files_in(&cq_dir(0)), files_in(&cq_dir(1))];
    assert_eq!(
        cq_files_before[0] + cq_files_before[1] - cq_files_after[0] - cq_files_after[1],
        report.consume_queue_segments_deleted
    );
    for queue_id in [0, 1] {
        let expected_min = units[queue_id as usize].iter().find(|(_, phy)| *phy >= min_phy).unwrap().0;
        assert!(expected_min > 0);
        assert_eq!(store.min_offset_in_queue("T", queue_id), expected_min, "queue {queue_id}");
        // What is left is exactly the messages at or above the CommitLog's min.
        let left: Vec<_> = units[queue_id as usize].iter().filter(|(_, phy)| *phy >= min_phy).copied().collect();
        assert_eq!(queue_units(&store, queue_id), left);
    }

    // Nothing moved: the next run leaves the consume queues and the index alone.
    let report = store.run_retention_once(at(10, 0));
    assert_eq!((report.consume_queue_segments_deleted, report.index_files_deleted), (0, 0));
}

#[tokio::test]
async fn reading_below_the_corrected_min_is_offset_too_small() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled_store(config(dir.path()), 60).await;
    age_segments(dir.path(), &store, at(4, 0), |i| i < 2);
    assert_eq!(store.run_retention_once(at(4, 0)).commit_log_segments_deleted, 2);

    let min = store.min_offset_in_queue("T", 0);
    assert!(min > 0);
    for offset in [0, min - 1] {
        let r = store.get_message("T", 0, offset, 32, 1 << 20, None);
        assert_eq!(r.status, GetMessageStatus::OffsetTooSmall, "offset {offset}");
        assert_eq!(r.next_begin_offset, min);
        assert_eq!(r.min_offset, min);
        assert!(r.messages.is_empty());
    }
    let r = store.get_message("T", 0, min, 1, 1 << 20, None);
    assert_eq!(r.status, GetMessageStatus::Found);
    let first = StoredMessage::decode(&r.messages[0]).unwrap().0;
    assert_eq!(first.queue_offset, min);
    assert!(first.physical_offset >= store.min_phy_offset());
}

#[tokio::test]
async fn slices_read_before_deletion_stay_readable_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled_store(config(dir.path()), 40).await;
    let held = store.get_message("T", 0, 0, 4, 1 << 20, None);
    assert_eq!(held.status, GetMessageStatus::Found);
    let copies: Vec<Vec<u8>> = held.messages.iter().map(|m| m.to_vec()).collect();

    age_segments(dir.path(), &store, at(4, 0), |i| i == 0);
    assert_eq!(store.run_retention_once(at(4, 0)).commit_log_segments_deleted, 1);
    assert!(!segment_path(dir.path(), 0).exists());
    assert_eq!(store.get_message("T", 0, 0, 4, 1 << 20, None).status, GetMessageStatus::OffsetTooSmall);

    for (slice, copy) in held.messages.iter().zip(&copies) {
        assert_eq!(&slice[..], &copy[..]);
    }
    let first = StoredMessage::decode(&held.messages[0]).unwrap().0;
    assert_eq!(first.physical_offset, 0);
    assert!(first.body.starts_with(b"m0-"));
}

#[tokio::test]
async fn a_reopened_store_keeps_the_corrected_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (min_phy, min_q0) = {
        let store = filled_store(config(dir.path()), 60).await;
        age_segments(dir.path(), &store, at(4, 0), |i| i < 3);
        assert_eq!(store.run_retention_once(at(4, 0)).commit_log_segments_deleted, 3);
        (store.min_phy_offset(), store.min_offset_in_queue("T", 0))
    };
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    assert_eq!(store.min_phy_offset(), min_phy);
    assert_eq!(store.min_offset_in_queue("T", 0), min_q0);
    assert_eq!(store.get_message("T", 0, 0, 4, 1 << 20, None).status, GetMessageStatus::OffsetTooSmall);
    assert_eq!(store.get_message("T", 0, min_q0, 4, 1 << 20, None).status, GetMessageStatus::Found);
}

#[tokio::test]
async fn shutdown_does_not_wait_for_the_retention_thread() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    let started = Instant::now();
    store.shutdown();
    assert!(started.elapsed() < Duration::from_secs(5), "shutdown took {:?}", started.elapsed());
}

/// The admin clean-ups: consume queues left with no live message go (and their offsets start
/// again at 0), a deleted topic's queues go, and so do those of topics no longer configured;
/// a protected topic stays.
#[tokio::test]
async fn expired_deleted_and_unused_consume_queues_are_destroyed() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    store.set_disk_usage_probe(Arc::new(|_| Some(10.0)));
    let put = |topic: &'static str, i: usize| {
        let store = &store;
        async move {
            let r = store.put_message(StoredMessage { topic: topic.into(), ..msg(0, i) }).await;
            assert_eq!(r.status, PutMessageStatus::PutOk, "{r:?}");
            r.append.unwrap().logics_offset
        }
    };
    for i in 0..4 {
        assert_eq!(put("Early", i).await, i as i64);
        put("Kept", i).await;
    }
    for i in 0..100 {
        let r = store.put_message(msg((i % 2) as i32, i)).await;
        assert_eq!(r.status, PutMessageStatus::PutOk);
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let cq_dir = |topic: &str| dir.path().join("consumequeue").join(topic);

    // Retention removes the oldest half: every message of Early and Kept, some of T.
    let before = segments(&store);
    age_segments(dir.path(), &store, at(4, 0), |i| i + 1 < before.len() / 2);
    assert!(store.run_retention_once(at(4, 0)).commit_log_segments_deleted > 1);
    assert_eq!(store.clean_expired_consume_queues(|t| t == "Kept").unwrap(), 1, "Early's queue; Kept is protected");
    assert!(!cq_dir("Early").join("0").exists());
    assert!(cq_dir("Kept").join("0").exists());
    assert!(cq_dir("T").join("0").exists() && store.max_offset_in_queue("T", 0) == 50);
    assert_eq!(put("Early", 4).await, 0, "the destroyed queue starts again at 0");
    assert_eq!(put("Kept", 4).await, 4, "the protected queue goes on");

    // Topics no longer configured go; the retained ones stay.
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.clean_unused_topics(|t| t == "T" || t == "Early").unwrap(), vec!["Kept".to_owned()]);
    assert!(!cq_dir("Kept").exists() && cq_dir("Early").exists());

    // Deleting a topic destroys its queues; the name starts again at offset 0.
    assert!(store.delete_topic("T").unwrap());
    assert!(!cq_dir("T").exists());
    assert_eq!(store.max_offset_in_queue("T", 0), 0);
    assert!(!store.delete_topic("Nope").unwrap());
    assert!(store.delete_topic("../escape").is_err(), "a name that is not a directory name");
    let r = store.put_message(msg(0, 0)).await;
    assert_eq!(r.append.unwrap().logics_offset, 0);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(store.clean_unused_topics(|t| t == "T").unwrap(), vec!["Early".to_owned()]);
    assert!(!cq_dir("Early").exists() && cq_dir("T").exists());
}

#[tokio::test]
async fn closed_light_queues_follow_the_commit_log_too() {
    let dir = tempfile::tempdir().unwrap();
    let lmq = || StoreConfig { enable_lmq: true, enable_multi_dispatch: true, ..config(dir.path()) };
    let store = MessageStore::open(lmq(), host()).unwrap();
    for i in 0..100 {
        let mut m = msg(0, i);
        m.properties.push_str("INNER_MULTI_DISPATCH\u{1}%LMQ%room\u{2}");
        assert_eq!(store.put_message(m).await.status, PutMessageStatus::PutOk);
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store.shutdown();
    drop(store);
    // Reopened, the light queue is closed: retention must open it to clean it.
    let store = MessageStore::open(lmq(), host()).unwrap();
    store.set_disk_usage_probe(Arc::new(|_| Some(10.0)));
    assert_eq!(store.light_queue_counts(), (1, 0));
    let room = dir.path().join("consumequeue/%LMQ%room/0");
    let files_before = files_in(&room);
    assert!(files_before > 3, "{files_before}");
    let before = segments(&store);
    age_segments(dir.path(), &store, at(4, 0), |i| i + 1 < before.len() / 2);
    let report = store.run_retention_once(at(4, 0));
    assert!(report.commit_log_segments_deleted > 1);
    let min_phy = store.min_phy_offset();
    assert!(files_in(&room) < files_before, "light queue segments below the CommitLog's min are deleted");
    let min = store.min_offset_in_queue("%LMQ%room", 0);
    assert!(min > 0);
    let first = store.get_message("%LMQ%room", 0, min, 1, 1 << 20, None);
    assert_eq!(first.status, GetMessageStatus::Found);
    let first = StoredMessage::decode(&first.messages[0]).unwrap().0;
    assert!(first.physical_offset >= min_phy);
    assert_eq!(store.get_message("%LMQ%room", 0, min - 1, 1, 1 << 20, None).status, GetMessageStatus::OffsetTooSmall);
}
