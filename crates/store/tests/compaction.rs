//! Compaction topics through the whole store: records copied into the compacted store at
//! dispatch (and caught up when the topics become known), a run keeping the newest message
//! per key, Java's files and checkpoint, restarts, and the CommitLog's retention leaving the
//! compacted view whole.

use std::fs::File;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use ferromq_protocol::message::StoredMessage;
use ferromq_store::{offset_to_file_name, FlushDiskType, GetMessageStatus, MessageStore, StoreConfig};

const SEGMENT: i64 = 64 * 1024;
const HOUR_MS: i64 = 3_600_000;

fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

fn config(root: &Path) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: SEGMENT as u64,
        mapped_file_size_consume_queue: 20 * 64,
        flush_disk_type: FlushDiskType::AsyncFlush,
        compaction_mapped_file_size: 16 * 1024,
        compaction_cq_mapped_file_size: 46 * 40,
        max_hash_slot_num: 64,
        max_index_num: 64,
        ..StoreConfig::with_root(root)
    }
}

fn msg(topic: &str, offset_key: usize, version: usize, body: Option<&str>) -> StoredMessage {
    let key = format!("k{offset_key}");
    let body = body.map_or_else(|| format!("{key}-v{version}-{}", "x".repeat(200)), str::to_owned);
    StoredMessage {
        topic: topic.into(),
        body: Bytes::from(body),
        born_host: "127.0.0.1:5555".parse().unwrap(),
        store_host: host(),
        properties: format!("KEYS\u{1}{key}\u{2}UNIQ_KEY\u{1}U-{key}-{version}\u{2}"),
        ..StoredMessage::default()
    }
}

fn compaction_topics() -> ferromq_store::CompactionTopics {
    Arc::new(|topic: &str| topic == "Kv")
}

/// (queue offset, body prefix up to the version) read from `offset` on.
fn read_from(store: &MessageStore, topic: &str, mut offset: i64) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    loop {
        let r = store.get_message(topic, 0, offset, 16, 1 << 20, None);
        if r.status != GetMessageStatus::Found {
            return out;
        }
        for (m, queue_offset) in r.messages.iter().zip(&r.queue_offsets) {
            let m = StoredMessage::decode(m).unwrap().0;
            let body = String::from_utf8(m.body.to_vec()).unwrap();
            out.push((*queue_offset, body.split('-').take(2).collect::<Vec<_>>().join("-")));
        }
        offset = r.next_begin_offset;
    }
}

/// 10 keys x 30 versions, in turn; the last version of k3 is a tombstone (empty body).
async fn fill(store: &MessageStore, topic: &str) {
    for version in 0..30 {
        for key in 0..10 {
            let tombstone = version == 29 && key == 3;
            let r = store.put_message(msg(topic, key, version, tombstone.then_some(""))).await;
            assert!(r.is_ok(), "{r:?}");
        }
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
}

fn newest() -> Vec<(i64, String)> {
    (0..10).filter(|k| *k != 3).map(|k| (290 + k, format!("k{k}-v29"))).collect()
}

#[tokio::test]
async fn consumers_read_the_newest_message_per_key_after_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    store.set_compaction_topics(compaction_topics());
    fill(&store, "Kv").await;
    fill(&store, "Plain").await;
    assert_eq!(read_from(&store, "Kv", 0).len(), 300, "before a run every version is there");
    let report = store.compact_now();
    assert_eq!(report.compacted, 1);
    assert_eq!(read_from(&store, "Kv", 0), newest());
    assert_eq!(read_from(&store, "Kv", 100), newest(), "a compacted-away offset reads on from the next message");
    assert_eq!(store.min_offset_in_queue("Kv", 0), 290);
    assert_eq!(store.max_offset_in_queue("Kv", 0), 300);
    assert_eq!(store.get_message("Kv", 0, 300, 16, 1 << 20, None).status, GetMessageStatus::OffsetOverflowOne);
    assert_eq!(read_from(&store, "Plain", 0).len(), 300, "other topics are untouched");
    // Java's layout.
    let name = offset_to_file_name(0);
    assert!(dir.path().join("compaction/compactionLog/Kv/0").join(&name).is_file());
    assert!(dir.path().join("compaction/compactionCq/Kv/0").join(&name).is_file());
    let checkpoint = std::fs::read_to_string(dir.path().join("compaction/position-checkpoint")).unwrap();
    assert!(checkpoint.contains("\"Kv_0\":299"), "{checkpoint}");
    assert!(!dir.path().join("compaction/compactionLog/Plain").exists());

    // New versions after the run, a restart, another run.
    assert!(store.put_message(msg("Kv", 0, 30, None)).await.is_ok());
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store.shutdown();
    drop(store);
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    store.set_compaction_topics(compaction_topics());
    let mut expected = newest();
    expected.push((300, "k0-v30".into()));
    assert_eq!(read_from(&store, "Kv", 0), expected);
    assert_eq!(store.compact_now().compacted, 1);
    expected.remove(0);
    assert_eq!(read_from(&store, "Kv", 0), expected);
}

#[tokio::test]
async fn records_dispatched_before_the_topics_are_known_are_caught_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    fill(&store, "Kv").await;
    assert!(!dir.path().join("compaction/compactionLog/Kv").exists());
    store.set_compaction_topics(compaction_topics());
    assert_eq!(read_from(&store, "Kv", 0).len(), 300);
    store.compact_now();
    assert_eq!(read_from(&store, "Kv", 0), newest());
}

#[tokio::test]
async fn the_commit_log_retention_leaves_the_compacted_view_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(StoreConfig { delete_when: "04".into(), ..config(dir.path()) }, host()).unwrap();
    store.set_disk_usage_probe(Arc::new(|_| Some(10.0)));
    store.set_compaction_topics(compaction_topics());
    fill(&store, "Kv").await;
    store.compact_now();
    // Every CommitLog segment but the newest expired.
    let now = 1_700_000_000_000 / 86_400_000 * 86_400_000 + 4 * HOUR_MS;
    let last = (store.max_phy_offset() - 1) / SEGMENT * SEGMENT;
    for offset in (0..last).step_by(SEGMENT as usize) {
        let file =
            File::options().write(true).open(dir.path().join("commitlog").join(offset_to_file_name(offset))).unwrap();
        file.set_modified(UNIX_EPOCH + Duration::from_millis((now - 73 * HOUR_MS) as u64)).unwrap();
    }
    let report = store.run_retention_once(now);
    assert!(report.commit_log_segments_deleted > 0);
    assert!(store.min_phy_offset() > 0);
    assert_eq!(read_from(&store, "Kv", 0), newest(), "kept messages whose CommitLog records are gone stay readable");
    assert_eq!(store.min_offset_in_queue("Kv", 0), 290);
}
