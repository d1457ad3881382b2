//! The message-key index on real files: small files (16 slots, 8 entries, so 7 keys each) make
//! slot collisions and rolls happen after a handful of messages.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use ferromq_protocol::message::sysflag::{
    TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE,
};
use ferromq_store::{index_key_hash, DispatchRequest, IndexFile, IndexService, StoreConfig};

/// A store time with whole seconds, so index times (seconds after a file's begin) are exact.
const T0: i64 = 1_700_000_000_000;
const TOPIC: &str = "TopicTest";

fn small_config(root: &Path) -> StoreConfig {
    let mut config = StoreConfig::with_root(root);
    config.max_hash_slot_num = 16;
    config.max_index_num = 8;
    config
}

fn open(config: &StoreConfig) -> IndexService {
    IndexService::load(&config.index_dir(), config, true, 0).unwrap()
}

fn message(offset: i64, store_timestamp: i64, keys: Option<&str>, uniq_key: Option<&str>) -> DispatchRequest {
    DispatchRequest {
        topic: TOPIC.to_owned(),
        commit_log_offset: offset,
        msg_size: 100,
        store_timestamp,
        keys: keys.map(str::to_owned),
        uniq_key: uniq_key.map(str::to_owned),
        ..DispatchRequest::default()
    }
}

fn offsets(index: &IndexService, key: &str, max_num: usize, begin: i64, end: i64) -> Vec<i64> {
    index.query_offsets(TOPIC, key, max_num, begin, end).phy_offsets
}

fn all_offsets(index: &IndexService, key: &str) -> Vec<i64> {
    offsets(index, key, 64, 0, i64::MAX)
}

/// Message `i` has key "k" at offset `i * 100`, stored at `T0 + i` seconds.
fn put_numbered(index: &IndexService, range: std::ops::Range<i64>) {
    for i in range {
        index.build_index(&message(i * 100, T0 + i * 1000, Some("k"), None)).unwrap();
    }
}

fn index_file_names(config: &StoreConfig) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(config.index_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn keys_are_found_within_their_time_range_and_not_outside_it() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(&small_config(dir.path()));
    for (offset, seconds) in [(100, 0), (200, 10), (300, 20)] {
        index.build_index(&message(offset, T0 + seconds * 1000, Some("k"), None)).unwrap();
    }
    assert_eq!(offsets(&index, "k", 64, T0, T0 + 20_000), vec![300, 200, 100]);
    assert_eq!(offsets(&index, "k", 64, T0 + 5_000, T0 + 15_000), vec![200]);
    assert_eq!(offsets(&index, "k", 64, T0 + 10_000, T0 + 10_000), vec![200]);
    assert!(offsets(&index, "k", 64, T0 + 21_000, T0 + 40_000).is_empty());
    assert!(offsets(&index, "k", 64, T0 - 10_000, T0 - 1).is_empty());
    assert!(all_offsets(&index, "other").is_empty());
    let result = index.query_offsets("OtherTopic", "k", 64, 0, i64::MAX);
    assert!(result.phy_offsets.is_empty(), "the topic is part of the key");
    assert_eq!((result.index_last_update_timestamp, result.index_last_update_phyoffset), (T0 + 20_000, 300));
}

#[test]
fn hash_collisions_return_both_offsets_and_slot_neighbours_only_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(&small_config(dir.path()));
    // "Aa" and "BB" have the same Java hashCode, so "TopicTest#Aa" and "TopicTest#BB" do too.
    assert_eq!(index_key_hash(&format!("{TOPIC}#Aa")), index_key_hash(&format!("{TOPIC}#BB")));
    let hash = index_key_hash(&format!("{TOPIC}#Aa"));
    let neighbour = (0..1000)
        .map(|i| format!("n{i}"))
        .find(|key| {
            let other = index_key_hash(&format!("{TOPIC}#{key}"));
            other != hash && other % 16 == hash % 16
        })
        .expect("some key shares the slot");
    index.build_index(&message(100, T0, Some("Aa"), None)).unwrap();
    index.build_index(&message(200, T0, Some(&neighbour), None)).unwrap();
    index.build_index(&message(300, T0, Some("BB"), None)).unwrap();
    assert_eq!(all_offsets(&index, "Aa"), vec![300, 100], "the caller filters on the real key");
    assert_eq!(all_offsets(&index, "BB"), vec![300, 100]);
    assert_eq!(all_offsets(&index, &neighbour), vec![200]);
}

#[test]
fn uniq_key_and_every_keys_element_are_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(&small_config(dir.path()));
    let uniq = "7F00000100002A9F0000000000000001";
    index.build_index(&message(100, T0, Some("order-1  order-2 "), Some(uniq))).unwrap();
    index.build_index(&message(200, T0 + 1000, None, Some("7F00000100002A9F0000000000000002"))).unwrap();
    assert_eq!(all_offsets(&index, uniq), vec![100]);
    assert_eq!(all_offsets(&index, "order-1"), vec![100]);
    assert_eq!(all_offsets(&index, "order-2"), vec![100]);
    assert_eq!(all_offsets(&index, "7F00000100002A9F0000000000000002"), vec![200]);
    assert!(all_offsets(&index, "").is_empty(), "empty KEYS elements are not indexed");
}

#[test]
fn full_files_roll_and_are_all_searched_newest_first_up_to_max_num() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let index = open(&config);
    put_numbered(&index, 0..20);
    assert_eq!(index.file_count(), 3, "7 keys per file");
    let names = index_file_names(&config);
    assert_eq!(names.len(), 3);
    assert!(names.iter().all(|name| name.len() == 17 && name.bytes().all(|b| b.is_ascii_digit())));
    assert!(names.windows(2).all(|pair| pair[0] < pair[1]), "distinct names in creation order: {names:?}");
    assert_eq!(index.total_size_bytes(), 3 * (40 + 16 * 4 + 8 * 20));

    let newest_first: Vec<i64> = (0..20).rev().map(|i| i * 100).collect();
    assert_eq!(all_offsets(&index, "k"), newest_first);
    assert_eq!(offsets(&index, "k", 5, 0, i64::MAX), newest_first[..5]);
    assert_eq!(offsets(&index, "k", 9, 0, i64::MAX), newest_first[..9], "max_num spans files");
    // Seconds 5..=12 live in the first two files.
    assert_eq!(offsets(&index, "k", 64, T0 + 5_000, T0 + 12_000), vec![1200, 1100, 1000, 900, 800, 700, 600, 500]);
}

#[test]
fn max_num_is_capped_at_max_msgs_num_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config(dir.path());
    config.max_msgs_num_batch = 4;
    let index = open(&config);
    put_numbered(&index, 0..10);
    assert_eq!(all_offsets(&index, "k"), vec![900, 800, 700, 600]);
}

#[test]
fn reopened_index_finds_the_same_keys_and_keeps_writing() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let index = open(&config);
    put_numbered(&index, 0..10);
    index.build_index(&message(1000, T0 + 10_000, Some("other"), Some("U1"))).unwrap();
    index.flush().unwrap();
    let before = all_offsets(&index, "k");
    drop(index);

    let index = open(&config);
    assert_eq!(index.file_count(), 2);
    assert_eq!(all_offsets(&index, "k"), before);
    assert_eq!(all_offsets(&index, "other"), vec![1000]);
    assert_eq!(all_offsets(&index, "U1"), vec![1000]);
    put_numbered(&index, 11..20);
    assert_eq!(all_offsets(&index, "k").len(), 19);
    assert_eq!(index.file_count(), 3);
}

#[test]
fn flush_reports_the_end_of_the_newest_full_file() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(&small_config(dir.path()));
    assert_eq!(index.flush().unwrap(), None);
    put_numbered(&index, 0..3);
    assert_eq!(index.flush().unwrap(), None, "the file being written never moves the checkpoint");
    put_numbered(&index, 3..16);
    assert_eq!(index.flush().unwrap(), Some(T0 + 13_000), "second file ends with message 13");
    assert_eq!(index.flush().unwrap(), Some(T0 + 13_000), "nothing new: same answer");
}

#[test]
fn abnormal_exit_load_drops_files_newer_than_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let index = open(&config);
    put_numbered(&index, 0..20);
    let checkpoint = index.flush().unwrap().unwrap();
    assert_eq!(checkpoint, T0 + 13_000);
    drop(index);

    let clean = IndexService::load(&config.index_dir(), &config, true, checkpoint).unwrap();
    assert_eq!(clean.file_count(), 3, "a clean exit keeps every file");
    drop(clean);

    let index = IndexService::load(&config.index_dir(), &config, false, checkpoint).unwrap();
    assert_eq!(index.file_count(), 2);
    assert_eq!(index_file_names(&config).len(), 2, "the newer file is deleted from disk");
    let kept: Vec<i64> = (0..14).rev().map(|i| i * 100).collect();
    assert_eq!(all_offsets(&index, "k"), kept);
    // Recovery re-dispatches from the checkpoint; the last kept message is not indexed twice
    // (Java indexes it again: it skips only offsets below the last file's end).
    put_numbered(&index, 13..20);
    let mut expected: Vec<i64> = (14..20).rev().map(|i| i * 100).collect();
    expected.extend(&kept);
    assert_eq!(all_offsets(&index, "k"), expected);
}

#[test]
fn rolled_back_transaction_records_are_not_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(&small_config(dir.path()));
    for (offset, sys_flag) in
        [(100, TRANSACTION_PREPARED_TYPE), (200, TRANSACTION_COMMIT_TYPE), (300, TRANSACTION_ROLLBACK_TYPE | 0x1)]
    {
        index.build_index(&DispatchRequest { sys_flag, ..message(offset, T0, Some("tx"), None) }).unwrap();
    }
    assert_eq!(all_offsets(&index, "tx"), vec![200, 100]);
}

#[test]
fn records_before_the_last_indexed_offset_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(&small_config(dir.path()));
    index.build_index(&message(1000, T0, Some("a"), None)).unwrap();
    index.build_index(&message(500, T0, Some("a"), None)).unwrap();
    index.build_index(&message(999, T0, Some("b"), None)).unwrap();
    assert_eq!(all_offsets(&index, "a"), vec![1000]);
    assert!(all_offsets(&index, "b").is_empty());
    // The last offset itself is skipped too: a dispatch retried after a consume-queue
    // failure must not index its keys twice (Java would).
    index.build_index(&message(1000, T0, Some("a"), None)).unwrap();
    assert_eq!(all_offsets(&index, "a"), vec![1000]);
    index.build_index(&message(1001, T0, Some("a"), None)).unwrap();
    assert_eq!(all_offsets(&index, "a"), vec![1001, 1000]);
}

#[test]
fn disabled_index_creates_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config(dir.path());
    config.message_index_enable = false;
    let index = open(&config);
    index.build_index(&message(100, T0, Some("k"), Some("U"))).unwrap();
    assert_eq!(index.file_count(), 0);
    assert!(all_offsets(&index, "k").is_empty());
}

#[test]
fn delete_expired_removes_old_files_but_never_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let config = small_config(dir.path());
    let index = open(&config);
    put_numbered(&index, 0..20);
    // File ends: 600, 1300, 1900.
    assert_eq!(index.delete_expired(600).unwrap(), 0);
    assert_eq!(index.delete_expired(601).unwrap(), 1);
    assert_eq!(index.delete_expired(i64::MAX).unwrap(), 1);
    assert_eq!(index.file_count(), 1);
    assert_eq!(index_file_names(&config).len(), 1);
    assert_eq!(all_offsets(&index, "k"), (14..20).rev().map(|i| i * 100).collect::<Vec<_>>());
    index.destroy().unwrap();
    assert_eq!(index.file_count(), 0);
    assert!(index_file_names(&config).is_empty());
}

#[test]
fn invalid_dimensions_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config(dir.path());
    config.max_index_num = 1;
    assert!(IndexService::load(&config.index_dir(), &config, true, 0).is_err(), "entry 0 is never used");
    config.max_index_num = 8;
    config.max_hash_slot_num = 0;
    assert!(IndexService::load(&config.index_dir(), &config, true, 0).is_err());
}

#[test]
fn a_file_of_other_dimensions_fails_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small_config(dir.path());
    let index = open(&config);
    put_numbered(&index, 0..3);
    drop(index);
    config.max_hash_slot_num = 32;
    let err = IndexService::load(&config.index_dir(), &config, true, 0).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
}

#[test]
fn readers_and_a_writer_share_the_service() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<IndexService>();

    let dir = tempfile::tempdir().unwrap();
    let index = open(&small_config(dir.path()));
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    let found = all_offsets(&index, "k");
                    assert!(found.windows(2).all(|pair| pair[0] > pair[1]), "newest first: {found:?}");
                }
            });
        }
        put_numbered(&index, 0..200);
        done.store(true, Ordering::Release);
    });
    assert_eq!(all_offsets(&index, "k").len(), 64);
    assert_eq!(index.file_count(), 29);
}

/// The exact bytes of a file holding two keys in one slot, laid out by hand from fact sheet 4.4.
#[test]
fn file_bytes_match_the_rocketmq_layout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("20231114221320123");
    let mut file = IndexFile::create(&path, 16, 8, 0, 0).unwrap();
    // Java: "T#k".hashCode() == 84 * 31 * 31 + 35 * 31 + 107 == 81916; 81916 % 16 == 12.
    let (hash, slot) = (81916_i32, 12_usize);
    let store_time = 1_700_000_000_123_i64;
    assert!(file.put_key("T#k", 1234, store_time).unwrap());
    assert!(file.put_key("T#k", 2000, store_time + 5_500).unwrap());
    file.flush().unwrap();

    let mut expected = vec![0_u8; 40 + 16 * 4 + 8 * 20];
    let mut put = |pos: usize, bytes: &[u8]| expected[pos..pos + bytes.len()].copy_from_slice(bytes);
    put(0, &store_time.to_be_bytes()); // beginTimestamp
    put(8, &(store_time + 5_500).to_be_bytes()); // endTimestamp
    put(16, &1234_i64.to_be_bytes()); // beginPhyOffset
    put(24, &2000_i64.to_be_bytes()); // endPhyOffset
    put(32, &1_i32.to_be_bytes()); // hashSlotCount
    put(36, &3_i32.to_be_bytes()); // indexCount: entries 1 and 2 used
    put(40 + slot * 4, &2_i32.to_be_bytes()); // slot -> newest entry
    let entry = |n: usize| 40 + 16 * 4 + n * 20;
    put(entry(1), &hash.to_be_bytes());
    put(entry(1) + 4, &1234_i64.to_be_bytes());
    put(entry(1) + 12, &0_i32.to_be_bytes()); // timeDiff (s)
    put(entry(1) + 16, &0_i32.to_be_bytes()); // prevIndex: end of chain
    put(entry(2), &hash.to_be_bytes());
    put(entry(2) + 4, &2000_i64.to_be_bytes());
    put(entry(2) + 12, &5_i32.to_be_bytes()); // 5.5 s, truncated to whole seconds
    put(entry(2) + 16, &1_i32.to_be_bytes());
    assert_eq!(std::fs::read(&path).unwrap(), expected);

    let loaded = IndexFile::load(&path, 16, 8).unwrap();
    assert_eq!((loaded.index_count(), loaded.hash_slot_count(), loaded.end_phy_offset()), (3, 1, 2000));
    let mut found = Vec::new();
    loaded.select_phy_offsets("T#k", 10, 0, i64::MAX, &mut found);
    assert_eq!(found, vec![2000, 1234]);
}

#[test]
fn a_new_file_is_seeded_with_the_previous_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let file = IndexFile::create(&path, 16, 8, 5_000, T0).unwrap();
    file.flush().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let mut header = Vec::new();
    for value in [T0, T0, 5_000, 5_000] {
        header.extend_from_slice(&value.to_be_bytes());
    }
    header.extend_from_slice(&0_i32.to_be_bytes());
    header.extend_from_slice(&1_i32.to_be_bytes());
    assert_eq!(bytes[..40], header);
    assert!(bytes[40..].iter().all(|b| *b == 0));
    assert!(file.is_time_matched(T0, T0) && !file.is_time_matched(T0 + 1, T0 + 2));
}
