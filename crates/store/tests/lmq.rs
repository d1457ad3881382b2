//! Light message queues on real files: one record dispatched to many light queues, their
//! offsets in the record, reads, restarts, the bound on their number, closing idle ones, and a
//! crash that cut the CommitLog behind units of closed light queues.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use ferromq_protocol::message::{keys, StoredMessage};
use ferromq_store::{
    FlushDiskType, GetMessageStatus, MessageStore, PutMessageStatus, StoreConfig, LMQ_OPEN_QUEUES_MAX,
};

fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

fn config(root: &Path) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: 1024 * 1024,
        mapped_file_size_consume_queue: 20 * 64,
        flush_disk_type: FlushDiskType::AsyncFlush,
        flush_interval_consume_queue_ms: 50,
        enable_lmq: true,
        enable_multi_dispatch: true,
        max_hash_slot_num: 64,
        max_index_num: 32,
        ..StoreConfig::with_root(root)
    }
}

fn msg(topic: &str, body: &str, lmq: Option<&str>) -> StoredMessage {
    let mut properties = format!("TAGS\u{1}t\u{2}UNIQ_KEY\u{1}U-{body}\u{2}");
    if let Some(lmq) = lmq {
        properties.push_str(&format!("{}\u{1}{lmq}\u{2}", keys::INNER_MULTI_DISPATCH));
    }
    StoredMessage {
        topic: topic.into(),
        body: Bytes::copy_from_slice(body.as_bytes()),
        born_host: "127.0.0.1:5555".parse().unwrap(),
        store_host: host(),
        properties,
        ..StoredMessage::default()
    }
}

/// (queue offset, body, INNER_MULTI_QUEUE_OFFSET) of every message in queue 0 of `topic`.
fn read(store: &MessageStore, topic: &str) -> Vec<(i64, String, String)> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let r = store.get_message(topic, 0, offset, 32, 1 << 20, None);
        if r.status != GetMessageStatus::Found {
            return out;
        }
        for (i, m) in r.messages.iter().enumerate() {
            let m = StoredMessage::decode(m).unwrap().0;
            let offsets = m.property(keys::INNER_MULTI_QUEUE_OFFSET).unwrap_or_default().to_owned();
            out.push((offset + i as i64, String::from_utf8(m.body.to_vec()).unwrap(), offsets));
        }
        offset = r.next_begin_offset;
    }
}

fn bodies(store: &MessageStore, topic: &str) -> Vec<String> {
    read(store, topic).into_iter().map(|(_, body, _)| body).collect()
}

#[tokio::test]
async fn one_record_reaches_every_listed_light_queue_with_its_offset_in_each() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    assert!(store.put_message(msg("T", "m0", Some("%LMQ%a,%LMQ%b"))).await.is_ok());
    assert!(store.put_message(msg("T", "m1", Some("%LMQ%b"))).await.is_ok());
    assert!(store.put_message(msg("T", "m2", None)).await.is_ok());
    assert!(store.put_message(msg("T", "m3", Some("%LMQ%b,%LMQ%c,%LMQ%a"))).await.is_ok());
    assert!(store.wait_dispatched(Duration::from_secs(10)));

    // Each record once in the CommitLog and in its own topic; the offsets written into it are
    // its offsets in the light queues, in the listed order.
    assert_eq!(bodies(&store, "T"), ["m0", "m1", "m2", "m3"]);
    let records = read(&store, "T");
    assert_eq!(records[0].2, "0,0");
    assert_eq!(records[1].2, "1");
    assert_eq!(records[2].2, "");
    assert_eq!(records[3].2, "2,0,1");
    assert_eq!(read(&store, "%LMQ%a").iter().map(|r| (r.0, r.1.as_str())).collect::<Vec<_>>(), [(0, "m0"), (1, "m3")]);
    assert_eq!(bodies(&store, "%LMQ%b"), ["m0", "m1", "m3"]);
    assert_eq!(bodies(&store, "%LMQ%c"), ["m3"]);
    assert_eq!(store.max_offset_in_queue("%LMQ%b", 0), 3);
    assert_eq!(store.max_offset_in_queue("%LMQ%b", 1), 0, "a light queue has queue 0 only");
    assert_eq!(store.get_message("%LMQ%none", 0, 0, 32, 1 << 20, None).status, GetMessageStatus::NoMatchedLogicQueue);
    // Java's layout: an ordinary consume queue directory per light queue, none in the
    // CommitLog.
    assert!(dir.path().join("consumequeue/%LMQ%b/0/00000000000000000000").is_file());

    // After a restart the light queues' offsets continue from their consume queues.
    store.shutdown();
    drop(store);
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    assert!(store.put_message(msg("T", "m4", Some("%LMQ%c,%LMQ%b"))).await.is_ok());
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(read(&store, "T")[4].2, "1,3");
    assert_eq!(bodies(&store, "%LMQ%b"), ["m0", "m1", "m3", "m4"]);
    assert_eq!(bodies(&store, "%LMQ%c"), ["m3", "m4"]);
}

#[tokio::test]
async fn bad_targets_batches_and_topics_that_do_not_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    for bad in ["%LMQ%a,plain", "%LMQ%a,%LMQ%a", "%LMQ%a/../../x", "%LMQ%"] {
        let r = store.put_message(msg("T", "bad", Some(bad))).await;
        assert_eq!(r.status, PutMessageStatus::MessageIllegal, "{bad}: {r:?}");
    }
    let direct = store.put_message(msg("%LMQ%a", "direct", None)).await;
    assert_eq!(direct.status, PutMessageStatus::MessageIllegal, "a light queue is no topic to send to: {direct:?}");
    let batch = vec![msg("T", "b0", None), msg("T", "b1", Some("%LMQ%a"))];
    let r = store.put_messages(batch).await;
    assert_eq!(r.status, PutMessageStatus::MessageIllegal, "{r:?}");
    assert!(r.remark.unwrap().contains("batch"));
    // A retry topic's copy keeps the original's properties but is not dispatched again.
    let mut retry = msg("%RETRY%g", "r", Some("%LMQ%a"));
    retry.properties.push_str(&format!("{}\u{1}7\u{2}", keys::INNER_MULTI_QUEUE_OFFSET));
    assert!(store.put_message(retry).await.is_ok());
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert!(bodies(&store, "%LMQ%a").is_empty());
    assert_eq!(bodies(&store, "%RETRY%g"), ["r"]);
}

#[tokio::test]
async fn without_enable_lmq_the_property_is_kept_and_nothing_is_dispatched() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(StoreConfig { enable_lmq: false, ..config(dir.path()) }, host()).unwrap();
    assert!(store.put_message(msg("T", "m0", Some("%LMQ%a"))).await.is_ok());
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(read(&store, "T")[0].2, "");
    assert!(bodies(&store, "%LMQ%a").is_empty());
    assert!(!dir.path().join("consumequeue/%LMQ%a").exists());
}

#[tokio::test]
async fn creating_light_queues_past_the_bound_is_refused_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let bounded = || StoreConfig { max_lmq_consume_queue_num: 2, ..config(dir.path()) };
    let store = MessageStore::open(bounded(), host()).unwrap();
    assert!(store.put_message(msg("T", "m0", Some("%LMQ%a,%LMQ%b"))).await.is_ok());
    let r = store.put_message(msg("T", "m1", Some("%LMQ%a,%LMQ%c"))).await;
    assert_eq!(r.status, PutMessageStatus::LmqConsumeQueueNumExceeded, "{r:?}");
    assert!(r.remark.unwrap().starts_with("[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]"));
    // Nothing of the refused send was stored; existing light queues still take messages.
    assert!(store.put_message(msg("T", "m2", Some("%LMQ%b"))).await.is_ok());
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(bodies(&store, "T"), ["m0", "m2"]);
    store.shutdown();
    drop(store);

    let store = MessageStore::open(bounded(), host()).unwrap();
    let r = store.put_message(msg("T", "m3", Some("%LMQ%d"))).await;
    assert_eq!(r.status, PutMessageStatus::LmqConsumeQueueNumExceeded, "the light queues on disk count: {r:?}");
    assert!(store.put_message(msg("T", "m4", Some("%LMQ%a"))).await.is_ok());
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(bodies(&store, "%LMQ%a"), ["m0", "m4"]);
}

#[tokio::test]
async fn idle_light_queues_are_closed_and_read_again_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        MessageStore::open(StoreConfig { max_lmq_consume_queue_num: 100_000, ..config(dir.path()) }, host()).unwrap();
    let queues = LMQ_OPEN_QUEUES_MAX + 600;
    let names: Vec<String> = (0..queues).map(|i| format!("%LMQ%q{i}")).collect();
    for (n, chunk) in names.chunks(200).enumerate() {
        for round in 0..2 {
            let r = store.put_message(msg("T", &format!("c{n}r{round}"), Some(&chunk.join(",")))).await;
            assert!(r.is_ok(), "{r:?}");
        }
    }
    assert!(store.wait_dispatched(Duration::from_secs(60)));
    let (count, open) = store.light_queue_counts();
    assert_eq!(count, queues);
    assert!(open <= LMQ_OPEN_QUEUES_MAX, "{open} open");
    assert_eq!(bodies(&store, "%LMQ%q0"), ["c0r0", "c0r1"]);
    assert_eq!(
        bodies(&store, &names[queues - 1]),
        [format!("c{}r0", (queues - 1) / 200), format!("c{}r1", (queues - 1) / 200)]
    );
    // A third message to the first (long closed) queue continues its offsets.
    assert!(store.put_message(msg("T", "again", Some("%LMQ%q0,%LMQ%q1"))).await.is_ok());
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(read(&store, "%LMQ%q1").iter().map(|r| r.0).collect::<Vec<_>>(), [0, 1, 2]);
    let open = std::fs::read_dir(dir.path().join("consumequeue")).unwrap().count();
    assert_eq!(open, queues + 1, "a directory per light queue and one for T");
}

#[tokio::test]
async fn a_crash_that_cut_the_commit_log_cuts_closed_light_queues_too() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    let mut ends = Vec::new();
    for (i, lmq) in ["%LMQ%a,%LMQ%b", "%LMQ%a,%LMQ%b", "%LMQ%a,%LMQ%c"].into_iter().enumerate() {
        let r = store.put_message(msg("T", &format!("m{i}"), Some(lmq))).await;
        let append = r.append.unwrap();
        ends.push(append.wrote_offset + append.wrote_bytes as i64);
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store.shutdown();
    drop(store);

    // The last record is lost (cut as a torn tail would be) while the consume queues kept
    // its units, as after a power cut: recovery must cut every light queue, none being open.
    let segment = dir.path().join("commitlog/00000000000000000000");
    let file = std::fs::OpenOptions::new().write(true).open(&segment).unwrap();
    file.set_len(ends[1] as u64).unwrap();
    drop(file);
    std::fs::write(dir.path().join("abort"), b"1").unwrap();
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    assert_eq!(store.max_phy_offset(), ends[1]);
    assert_eq!(store.max_offset_in_queue("%LMQ%a", 0), 2, "the unit of the lost record is cut");
    // Recovery dispatched m0 and m1 again, opening a and b; c, only in the lost record, was
    // closed and is cut all the same.
    assert_eq!(store.max_offset_in_queue("%LMQ%c", 0), 0);
    assert!(bodies(&store, "%LMQ%c").is_empty());
    assert_eq!(bodies(&store, "%LMQ%a"), ["m0", "m1"]);
    assert_eq!(bodies(&store, "%LMQ%b"), ["m0", "m1"]);
    assert!(store.put_message(msg("T", "m2-again", Some("%LMQ%b,%LMQ%c"))).await.is_ok());
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    assert_eq!(
        read(&store, "%LMQ%b").iter().map(|r| (r.0, r.1.as_str())).collect::<Vec<_>>(),
        [(0, "m0"), (1, "m1"), (2, "m2-again")]
    );
    assert_eq!(read(&store, "%LMQ%c").iter().map(|r| (r.0, r.1.as_str())).collect::<Vec<_>>(), [(0, "m2-again")]);
}

#[tokio::test]
async fn a_crash_restart_does_not_reopen_light_queues_the_checkpoint_covers() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    for i in 0..20 {
        assert!(store.put_message(msg("T", &format!("m{i}"), Some(&format!("%LMQ%c{i}")))).await.is_ok());
        // Distinct store times: the checkpoint's logics time splits them.
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
    store.shutdown();
    drop(store);
    // As if the process died after the last consume queue flush.
    std::fs::write(dir.path().join("abort"), b"1").unwrap();
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    let (count, open) = store.light_queue_counts();
    assert_eq!(count, 20);
    assert!(open <= 1, "{open} light queues reopened by the re-dispatch");
    for i in 0..20 {
        assert_eq!(bodies(&store, &format!("%LMQ%c{i}")), [format!("m{i}")]);
    }
}
