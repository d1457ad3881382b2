//! The whole store on real files: put and get through the consume queues, restarts, crash
//! recovery over cut and corrupted tails, queries, the lock file and the poisoned state.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferromq_protocol::message::{tags_code, StoredMessage};
use ferromq_store::{FlushDiskType, GetMessageStatus, MessageStore, PutMessageStatus, StoreConfig, StoreError};

fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

fn config(root: &Path, flush: FlushDiskType) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: 4096,
        mapped_file_size_consume_queue: 20 * 16,
        flush_disk_type: flush,
        flush_interval_consume_queue_ms: 50,
        flush_interval_commit_log_ms: 20,
        max_hash_slot_num: 64,
        max_index_num: 32,
        ..StoreConfig::with_root(root)
    }
}

fn msg(topic: &str, queue_id: i32, body: &str, tag: &str, key: &str) -> StoredMessage {
    StoredMessage {
        topic: topic.into(),
        queue_id,
        body: Bytes::copy_from_slice(body.as_bytes()),
        born_host: "127.0.0.1:5555".parse().unwrap(),
        store_host: host(),
        born_timestamp_ms: 1_700_000_000_000,
        properties: format!("TAGS\u{1}{tag}\u{2}KEYS\u{1}{key}\u{2}UNIQ_KEY\u{1}U-{body}\u{2}"),
        ..StoredMessage::default()
    }
}

fn bodies(store: &MessageStore, topic: &str, queue_id: i32) -> Vec<String> {
    let mut out = Vec::new();
    let mut offset = store.min_offset_in_queue(topic, queue_id);
    loop {
        let r = store.get_message(topic, queue_id, offset, 32, 1 << 20, None);
        if r.status != GetMessageStatus::Found {
            break;
        }
        for m in &r.messages {
            let decoded = StoredMessage::decode(m).unwrap().0;
            out.push(String::from_utf8(decoded.body.to_vec()).unwrap());
        }
        offset = r.next_begin_offset;
    }
    out
}

async fn put_all(store: &MessageStore, topic: &str, queue_id: i32, n: usize) {
    for i in 0..n {
        let r = store
            .put_message(msg(
                topic,
                queue_id,
                &format!("m{i}"),
                if i.is_multiple_of(2) { "even" } else { "odd" },
                &format!("k{i}"),
            ))
            .await;
        assert_eq!(r.status, PutMessageStatus::PutOk, "{r:?}");
    }
}

#[tokio::test]
async fn put_then_get_in_order_with_rocketmq_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushDiskType::SyncFlush), host()).unwrap();
    let arrivals = Arc::new(AtomicUsize::new(0));
    let seen = arrivals.clone();
    store.on_message_arrival(Arc::new(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
    }));
    put_all(&store, "T", 0, 40).await;
    put_all(&store, "T", 1, 3).await;
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(arrivals.load(Ordering::SeqCst), 43);
    assert_eq!(store.max_offset_in_queue("T", 0), 40);
    assert_eq!(bodies(&store, "T", 0), (0..40).map(|i| format!("m{i}")).collect::<Vec<_>>());
    assert_eq!(bodies(&store, "T", 1), vec!["m0", "m1", "m2"]);

    let r = store.get_message("T", 0, 5, 3, 1 << 20, None);
    assert_eq!((r.status, r.messages.len(), r.next_begin_offset), (GetMessageStatus::Found, 3, 8));
    assert_eq!(r.queue_offsets, vec![5, 6, 7]);
    assert_eq!(store.get_message("T", 0, 40, 32, 1 << 20, None).status, GetMessageStatus::OffsetOverflowOne);
    let bad = store.get_message("T", 0, 99, 32, 1 << 20, None);
    assert_eq!((bad.status, bad.next_begin_offset), (GetMessageStatus::OffsetOverflowBadly, 40));
    assert_eq!(store.get_message("Nope", 0, 0, 32, 1 << 20, None).status, GetMessageStatus::NoMatchedLogicQueue);

    let odd = tags_code(Some("odd"));
    let filter = move |code: i64| code == odd;
    let r = store.get_message("T", 0, 0, 4, 1 << 20, Some(&filter));
    assert_eq!(r.messages.len(), 4);
    assert_eq!(r.queue_offsets, vec![1, 3, 5, 7]);
    let none = move |_: i64| false;
    let r = store.get_message("T", 0, 0, 4, 1 << 20, Some(&none));
    assert_eq!(r.status, GetMessageStatus::NoMatchedMessage);
    assert!(r.next_begin_offset > 0, "the scan advances past rejected entries");

    // Byte limit: one message at least, then no more than asked.
    let r = store.get_message("T", 0, 0, 32, 100, None);
    assert_eq!(r.messages.len(), 1);
}

#[tokio::test]
async fn queries_by_key_offset_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush), host()).unwrap();
    let before = ferromq_now();
    put_all(&store, "Q", 0, 10).await;
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let after = ferromq_now();
    let found = store.query_message("Q", "k7", 32, before - 1000, after + 1000);
    let keys: Vec<String> = found
        .messages
        .iter()
        .map(|m| StoredMessage::decode(m).unwrap().0.property("KEYS").unwrap().to_owned())
        .collect();
    assert!(keys.contains(&"k7".to_owned()), "{keys:?}");
    let by_uniq = store.query_message("Q", "U-m3", 32, before - 1000, after + 1000);
    assert!(!by_uniq.messages.is_empty());
    assert!(store.query_message("Q", "k7", 32, after + 10_000, after + 20_000).messages.is_empty());

    let r = store.get_message("Q", 0, 4, 1, 1 << 20, None);
    let phy = StoredMessage::decode(&r.messages[0]).unwrap().0.physical_offset;
    let viewed = store.look_message_by_offset(phy).unwrap();
    assert_eq!(StoredMessage::decode(&viewed).unwrap().0.body, &b"m4"[..]);

    let earliest = store.earliest_message_time("Q", 0).unwrap();
    assert!(earliest >= before && earliest <= after);
    assert_eq!(store.offset_in_queue_by_time("Q", 0, before - 1000, true), 0);
}

fn ferromq_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

#[tokio::test]
async fn clean_restart_keeps_everything_and_continues_offsets() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush), host()).unwrap();
        put_all(&store, "R", 0, 50).await;
        store.shutdown();
        assert!(!dir.path().join("abort").exists());
    }
    let store = MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush), host()).unwrap();
    assert_eq!(store.max_offset_in_queue("R", 0), 50);
    let r = store.put_message(msg("R", 0, "m50", "even", "k50")).await;
    assert_eq!(r.append.unwrap().logics_offset, 50);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(bodies(&store, "R", 0).len(), 51);
}

#[tokio::test]
async fn a_clean_restart_dispatches_what_the_consume_queues_lost() {
    // The last segments are checked while the consume queues load; records the queues turn
    // out not to hold (here: all, on every segment, the early-checked ones included) are
    // dispatched again all the same, once each.
    let dir = tempfile::tempdir().unwrap();
    {
        let store = MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush), host()).unwrap();
        for i in 0..200 {
            let queue = i % 2;
            assert_eq!(
                store.put_message(msg("L", queue, &format!("m{i}"), "t", "k")).await.status,
                PutMessageStatus::PutOk
            );
        }
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        store.shutdown();
        assert!(!dir.path().join("abort").exists());
    }
    let segments = std::fs::read_dir(dir.path().join("commitlog")).unwrap().count();
    assert!(segments >= 4, "more segments than the three re-checked: {segments}");
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
    let store = MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush), host()).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(bodies(&store, "L", 0), (0..200).step_by(2).map(|i| format!("m{i}")).collect::<Vec<_>>());
    assert_eq!(bodies(&store, "L", 1), (1..200).step_by(2).map(|i| format!("m{i}")).collect::<Vec<_>>());
    assert_eq!((store.max_offset_in_queue("L", 0), store.max_offset_in_queue("L", 1)), (100, 100));
}

#[tokio::test]
async fn a_corrupt_record_after_a_clean_stop_ends_recovery_there() {
    // A clean restart re-checks the last segments (their checks run side by side, then the walk
    // goes on from where each stopped): a record whose body no longer matches its CRC ends the
    // data there, in whichever segment it is, and nothing after it survives.
    let dir = tempfile::tempdir().unwrap();
    {
        let store = MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush), host()).unwrap();
        put_all(&store, "R", 0, 50).await;
        store.shutdown();
    }
    let commit_log = dir.path().join("commitlog");
    let mut segments: Vec<_> = std::fs::read_dir(&commit_log).unwrap().map(|e| e.unwrap().path()).collect();
    segments.sort();
    assert!(segments.len() >= 3, "several segments: {segments:?}");
    let (path, at) = segments
        .iter()
        .find_map(|p| {
            let bytes = std::fs::read(p).unwrap();
            // The body, then the topic's length (one byte) and the topic.
            bytes.windows(5).position(|w| w == b"m30\x01R").map(|at| (p.clone(), at))
        })
        .expect("m30's body followed by its topic");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[at + 1] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();

    let store = MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush), host()).unwrap();
    assert_eq!(store.max_offset_in_queue("R", 0), 30, "m30 and everything after it are gone");
    let kept = bodies(&store, "R", 0);
    assert_eq!(kept, (0..30).map(|i| format!("m{i}")).collect::<Vec<_>>());
    // New messages go on from there.
    let r = store.put_message(msg("R", 0, "again", "even", "k")).await;
    assert_eq!(r.append.unwrap().logics_offset, 30);
}

#[tokio::test]
async fn warmed_segments_are_written_through_before_use_and_recover_like_any_other() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    // Segments much larger than a record, so an unwarmed one would keep holes past its end.
    let warm = || StoreConfig {
        warm_mapped_file_enable: true,
        mapped_file_size_commit_log: 64 * 1024,
        ..config(dir.path(), FlushDiskType::SyncFlush)
    };
    let body = |i: usize| format!("m{i}-{}", "x".repeat(1000));
    {
        let store = MessageStore::open(warm(), host()).unwrap();
        // About 70 KiB: the first segment (filled before the first append) and the next one
        // (filled by the background preparer, or on demand if it was not ready) both serve.
        for i in 0..64 {
            let r = store.put_message(msg("W", 0, &body(i), "t", "k")).await;
            assert_eq!(r.status, PutMessageStatus::PutOk, "{r:?}");
        }
        store.shutdown();
    }
    let segments: Vec<_> = std::fs::read_dir(dir.path().join("commitlog")).unwrap().map(|e| e.unwrap()).collect();
    assert!(segments.len() >= 2, "rolled: {} segments", segments.len());
    for segment in &segments {
        let meta = segment.metadata().unwrap();
        assert_eq!(meta.len(), 64 * 1024);
        // Zero-filled through to disk: every block allocated, none left as a hole.
        assert!(meta.blocks() * 512 >= meta.len(), "{:?} has holes: {} blocks", segment.path(), meta.blocks());
    }
    let store = MessageStore::open(warm(), host()).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(bodies(&store, "W", 0), (0..64).map(body).collect::<Vec<_>>());
    let r = store.put_message(msg("W", 0, "more", "t", "k")).await;
    assert_eq!(r.append.unwrap().logics_offset, 64);
}

#[tokio::test]
async fn a_sync_flush_put_that_does_not_wait_is_in_the_file_when_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushDiskType::SyncFlush), host()).unwrap();
    let mut m = msg("NW", 0, "no-wait-body", "t", "k");
    m.properties.push_str("WAIT\u{1}false\u{2}");
    let r = store.put_message(m).await;
    assert_eq!(r.status, PutMessageStatus::PutOk, "{r:?}");
    let append = r.append.unwrap();
    // Read through the file, not the store: the bytes must already be written (they would
    // survive the process), not only staged in memory for the next group commit.
    let on_disk = std::fs::read(segment_path(dir.path(), 0)).unwrap();
    let record = &on_disk[append.wrote_offset as usize..append.wrote_offset as usize + append.wrote_bytes];
    let decoded = StoredMessage::decode(record).unwrap().0;
    assert_eq!(&decoded.body[..], b"no-wait-body");
}

#[tokio::test]
async fn a_second_process_cannot_open_a_locked_store() {
    let dir = tempfile::tempdir().unwrap();
    let _store = MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush), host()).unwrap();
    match MessageStore::open(config(dir.path(), FlushDiskType::AsyncFlush), host()) {
        Err(StoreError::Locked { .. }) => {}
        other => panic!("expected a lock failure, got {other:?}"),
    }
}

#[tokio::test]
async fn failed_flush_fails_the_waiting_put_and_poisons_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushDiskType::SyncFlush), host()).unwrap();
    put_all(&store, "P", 0, 2).await;
    store.inject_flush_failure(true);
    let r = store.put_message(msg("P", 0, "doomed", "t", "k")).await;
    assert_eq!(r.status, PutMessageStatus::FlushFailed);
    assert!(r.append.is_none(), "nothing is reported stored");
    assert!(store.is_poisoned());
    let r = store.put_message(msg("P", 0, "after", "t", "k")).await;
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    // Reads still work.
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert!(bodies(&store, "P", 0).starts_with(&["m0".to_owned(), "m1".to_owned()]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_sync_flush_put_flushes_for_itself_and_concurrent_ones_share_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(MessageStore::open(config(dir.path(), FlushDiskType::SyncFlush), host()).unwrap());
    // One at a time: each put is flushed by its own thread, and durable when answered.
    for i in 0..5 {
        let r = store.put_message(msg("L", 0, &format!("m{i}"), "t", "k")).await;
        assert_eq!(r.status, PutMessageStatus::PutOk, "{r:?}");
        let a = r.append.unwrap();
        assert!(store.flushed_phy_offset() >= a.wrote_offset + a.wrote_bytes as i64, "flushed when acknowledged");
    }
    assert_eq!(store.own_flush_count(), 5, "a put alone flushes for itself");

    // Many at once: each durable when answered, and flushes shared (a put flushing alone
    // while others wait would serialize them one device flush each).
    let (own_before, all_before) = (store.own_flush_count(), store.flush_count());
    let tasks: Vec<_> = (0..32)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..10 {
                    let r = store.put_message(msg("C", t % 4, &format!("{t}-{i}"), "t", "k")).await;
                    assert_eq!(r.status, PutMessageStatus::PutOk, "{r:?}");
                    let a = r.append.unwrap();
                    assert!(store.flushed_phy_offset() >= a.wrote_offset + a.wrote_bytes as i64);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let (own, all) = (store.own_flush_count() - own_before, store.flush_count() - all_before);
    assert!(all < 320, "320 concurrent puts took {all} flushes ({own} by puts alone): not shared");
}

#[tokio::test]
async fn a_put_past_its_flush_timeout_is_written_or_reported_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig { sync_flush_timeout_ms: 50, ..config(dir.path(), FlushDiskType::SyncFlush) };
    let store = MessageStore::open(cfg, host()).unwrap();
    store.inject_flush_stall(true);
    let r = store.put_message(msg("T", 0, "late", "t", "k")).await;
    assert_eq!(r.status, PutMessageStatus::FlushDiskTimeout);
    assert!(r.append.is_some(), "a flush timeout still reports the message stored");
    // Reported stored, so it is in the file (readable) although no flush ran.
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(bodies(&store, "T", 0), ["late".to_owned()]);

    // Its write fails: the put must not hear "stored, not yet flushed".
    store.inject_commit_failure(true);
    let r = store.put_message(msg("T", 0, "lost", "t", "k")).await;
    assert_eq!(r.status, PutMessageStatus::UnknownError, "{r:?}");
    assert!(r.append.is_none());
    assert!(store.is_poisoned());
    store.inject_flush_stall(false);
}

/// Writes `n` messages (sizes vary) with a clean shutdown, and returns the CommitLog end of
/// each record.
async fn write_fixture(root: &Path, n: usize) -> Vec<i64> {
    let store = MessageStore::open(config(root, FlushDiskType::AsyncFlush), host()).unwrap();
    let mut ends = Vec::new();
    for i in 0..n {
        let body = "x".repeat(10 + (i * 37) % 200);
        let r = store.put_message(msg("S", (i % 2) as i32, &format!("{i}-{body}"), "t", &format!("k{i}"))).await;
        let a = r.append.unwrap();
        ends.push(a.wrote_offset + a.wrote_bytes as i64);
    }
    store.shutdown();
    ends
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn segment_path(root: &Path, offset: i64) -> std::path::PathBuf {
    root.join("commitlog").join(format!("{:020}", offset - offset % 4096))
}

fn all_bodies(store: &MessageStore) -> usize {
    bodies(store, "S", 0).len() + bodies(store, "S", 1).len()
}

#[tokio::test]
async fn truncation_sweep_recovers_exactly_the_complete_prefix() {
    let fixture = tempfile::tempdir().unwrap();
    let ends = write_fixture(fixture.path(), 40).await;
    let last_end = *ends.last().unwrap();
    let last_file_start = last_end - last_end % 4096;
    let mut cuts: Vec<i64> = (last_file_start..last_end).step_by(37).collect();
    cuts.extend(ends.iter().copied().filter(|e| *e > last_file_start));
    cuts.push(last_file_start);
    for cut in cuts {
        let work = tempfile::tempdir().unwrap();
        copy_dir(fixture.path(), work.path());
        let path = segment_path(work.path(), last_file_start);
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len((cut - last_file_start) as u64).unwrap();
        drop(file);
        std::fs::write(work.path().join("abort"), b"1").unwrap();
        let store = MessageStore::open(config(work.path(), FlushDiskType::AsyncFlush), host()).unwrap();
        let complete = ends.iter().filter(|e| **e <= cut).count();
        // The previous segment ended with a blank marker, so recovery reaches at least the
        // start of the cut segment.
        let expected = ends[complete - 1].max(last_file_start);
        assert_eq!(store.max_phy_offset(), expected, "cut at {cut}");
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        assert_eq!(all_bodies(&store), complete, "cut at {cut}: the consume queues agree with the commit log");
        // The store keeps working after recovery.
        let r = store.put_message(msg("S", 0, "after", "t", "k")).await;
        assert!(r.is_ok(), "{r:?}");
    }
}

#[tokio::test]
async fn garbage_tail_and_flipped_body_byte_are_cut() {
    let fixture = tempfile::tempdir().unwrap();
    let ends = write_fixture(fixture.path(), 30).await;
    let last_end = *ends.last().unwrap();

    // Garbage after the last record.
    let work = tempfile::tempdir().unwrap();
    copy_dir(fixture.path(), work.path());
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(segment_path(work.path(), last_end)).unwrap();
        f.seek(SeekFrom::Start((last_end % 4096) as u64)).unwrap();
        f.write_all(&[0xAB; 77]).unwrap();
    }
    std::fs::write(work.path().join("abort"), b"1").unwrap();
    let store = MessageStore::open(config(work.path(), FlushDiskType::AsyncFlush), host()).unwrap();
    assert_eq!(store.max_phy_offset(), last_end);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(all_bodies(&store), 30);
    drop(store);

    // A flipped byte in the body of record 25: records 25.. are dropped (CRC).
    let work = tempfile::tempdir().unwrap();
    copy_dir(fixture.path(), work.path());
    let start_25 = ends[24];
    {
        use std::io::{Read, Seek, SeekFrom, Write};
        let path = segment_path(work.path(), start_25);
        let mut f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let body_byte = (start_25 % 4096) as u64 + 90; // inside the body (fixed part is 84 bytes + body length)
        f.seek(SeekFrom::Start(body_byte)).unwrap();
        let mut b = [0u8; 1];
        f.read_exact(&mut b).unwrap();
        f.seek(SeekFrom::Start(body_byte)).unwrap();
        f.write_all(&[b[0] ^ 0xFF]).unwrap();
    }
    std::fs::write(work.path().join("abort"), b"1").unwrap();
    let store = MessageStore::open(config(work.path(), FlushDiskType::AsyncFlush), host()).unwrap();
    assert_eq!(store.max_phy_offset(), start_25);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(all_bodies(&store), 25);
}

#[tokio::test]
async fn puts_after_shutdown_are_refused_and_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path(), FlushDiskType::SyncFlush), host()).unwrap();
    put_all(&store, "Z", 0, 3).await;
    store.shutdown();
    let end = store.max_phy_offset();
    let r = store.put_message(msg("Z", 0, "late", "t", "k")).await;
    assert_eq!(r.status, PutMessageStatus::ServiceNotAvailable);
    assert_eq!(store.max_phy_offset(), end, "nothing written after shutdown");
}

#[tokio::test]
async fn transient_pool_store_serves_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let pooled = |root: &Path| StoreConfig {
        transient_store_pool_enable: true,
        transient_store_pool_size: 2,
        ..config(root, FlushDiskType::AsyncFlush)
    };
    {
        let store = MessageStore::open(pooled(dir.path()), host()).unwrap();
        put_all(&store, "TP", 0, 60).await;
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        assert_eq!(bodies(&store, "TP", 0).len(), 60);
        store.shutdown();
    }
    let store = MessageStore::open(pooled(dir.path()), host()).unwrap();
    assert_eq!(bodies(&store, "TP", 0), (0..60).map(|i| format!("m{i}")).collect::<Vec<_>>());
}

/// Schedule-topic records are indexed by delivery time (store time + level delay), also when
/// recovery rebuilds the consume queue after a crash.
#[tokio::test]
async fn schedule_topic_units_carry_the_delivery_time() {
    use ferromq_store::SCHEDULE_TOPIC;
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        message_delay_level: ferromq_store::DelayLevels::parse("1s 5s 1d").unwrap(),
        ..config(dir.path(), FlushDiskType::SyncFlush)
    };
    let delayed = |level: &str, queue_id: i32| StoredMessage {
        properties: format!("DELAY\u{1}{level}\u{2}REAL_TOPIC\u{1}T\u{2}REAL_QID\u{1}0\u{2}TAGS\u{1}a\u{2}"),
        ..msg(SCHEDULE_TOPIC, queue_id, "d", "a", "k")
    };
    let check = |store: &MessageStore| {
        for (queue_id, delay) in [(0, 1_000), (1, 5_000), (2, 86_400_000)] {
            let units = store.consume_queue_units(SCHEDULE_TOPIC, queue_id, 0, 1);
            assert_eq!(units.len(), 1, "queue {queue_id}");
            let stored = store.message_store_time(SCHEDULE_TOPIC, queue_id, 0).unwrap();
            assert_eq!(units[0].tags_code, stored + delay, "queue {queue_id}");
        }
        // Level 9 is beyond the three configured: clamped to the last.
        let units = store.consume_queue_units(SCHEDULE_TOPIC, 2, 1, 10);
        let stored = store.message_store_time(SCHEDULE_TOPIC, 2, 1).unwrap();
        assert_eq!(units[0].tags_code, stored + 86_400_000);
        // Other topics keep the tag hash.
        let plain = store.consume_queue_units("Plain", 0, 0, 1);
        assert_eq!(plain[0].tags_code, tags_code(Some("a")));
    };
    {
        let store = MessageStore::open(cfg.clone(), host()).unwrap();
        for (level, q) in [("1", 0), ("2", 1), ("3", 2), ("9", 2)] {
            assert_eq!(store.put_message(delayed(level, q)).await.status, PutMessageStatus::PutOk);
        }
        assert_eq!(store.put_message(msg("Plain", 0, "p", "a", "k")).await.status, PutMessageStatus::PutOk);
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        check(&store);
    }
    // Simulated crash: consume queues rebuilt from the CommitLog.
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
    std::fs::write(dir.path().join("abort"), b"1").unwrap();
    let store = MessageStore::open(cfg, host()).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    check(&store);
}

/// With `enableConsumeQueueExt`, units carry extension addresses: reads see the real
/// tagsCode, store time and the calculator's bitmap, also after an unclean restart that
/// rebuilds the queues, and filters get the extension unit.
#[tokio::test]
async fn consume_queue_ext_keeps_tags_store_time_and_bitmaps() {
    use ferromq_store::{is_ext_addr, CqExtUnit, MessageFilter};
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        enable_consume_queue_ext: true,
        mapped_file_size_consume_queue_ext: 200, // a few units per file: rolls
        ..config(dir.path(), FlushDiskType::SyncFlush)
    };
    // The bitmap: one byte, the body's last digit.
    let calculator: ferromq_store::BitMapCalculator = std::sync::Arc::new(|req| {
        let p = req.properties.as_deref()?;
        let key = p.split('\u{2}').find_map(|kv| kv.strip_prefix("KEYS\u{1}"))?;
        Some(vec![key.as_bytes()[key.len() - 1] - b'0'])
    });
    struct OddBits;
    impl MessageFilter for OddBits {
        fn is_matched_by_consume_queue(&self, tags_code: i64, ext: Option<&CqExtUnit>) -> bool {
            assert!(!is_ext_addr(tags_code), "filters see the real tagsCode");
            ext.and_then(|e| e.filter_bit_map.as_ref()).is_some_and(|b| b[0] % 2 == 1)
        }
    }
    let check = |store: &MessageStore, with_bitmaps: bool| {
        let units = store.consume_queue_units("X", 0, 0, 32);
        assert_eq!(units.len(), 10);
        for u in &units {
            assert_eq!(u.tags_code, tags_code(Some(if u.queue_offset % 2 == 0 { "even" } else { "odd" })));
        }
        let r = store.get_message("X", 0, 0, 32, 1 << 20, Some(&OddBits));
        let got: Vec<String> = r
            .messages
            .iter()
            .map(|m| String::from_utf8(StoredMessage::decode(m).unwrap().0.body.to_vec()).unwrap())
            .collect();
        if with_bitmaps {
            assert_eq!(got, ["m1", "m3", "m5", "m7", "m9"]);
        } else {
            assert!(got.is_empty(), "no bitmaps after a rebuild without the calculator: {got:?}");
        }
    };
    {
        let store = MessageStore::open(cfg.clone(), host()).unwrap();
        store.set_bit_map_calculator(calculator.clone());
        put_all(&store, "X", 0, 10).await;
        assert!(store.wait_dispatched(Duration::from_secs(10)));
        check(&store, true);
        assert!(dir.path().join("consumequeue_ext/X/0").read_dir().unwrap().count() > 1, "ext files rolled");
        store.shutdown();
    }
    // Clean restart: everything as it was.
    {
        let store = MessageStore::open(cfg.clone(), host()).unwrap();
        check(&store, true);
        store.shutdown();
    }
    // Crash with the queues lost: rebuilt from the CommitLog (no calculator during recovery).
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
    std::fs::remove_dir_all(dir.path().join("consumequeue_ext")).unwrap();
    std::fs::write(dir.path().join("abort"), b"1").unwrap();
    let store = MessageStore::open(cfg, host()).unwrap();
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    check(&store, false);
    store.set_bit_map_calculator(calculator);
    let r = store.put_message(msg("X", 0, "m10", "even", "k11")).await;
    assert_eq!(r.status, PutMessageStatus::PutOk);
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    let r = store.get_message("X", 0, 0, 32, 1 << 20, Some(&OddBits));
    assert_eq!(r.messages.len(), 1, "the new message has its bitmap");
}
