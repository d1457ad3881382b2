//! A replica store fed with a master's raw CommitLog bytes (`read_commit_log` on one side,
//! `append_replicated` on the other), without sockets: chunks of any size, records and blank
//! markers cut anywhere, offsets checked, a crash with a record half received.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use ferromq_protocol::message::StoredMessage;
use ferromq_store::{FlushDiskType, MessageStore, PutMessageStatus, ReplicaAppendError, StoreConfig};

const SEGMENT: i64 = 64 * 1024;
const TOPIC: &str = "Replica";

fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

fn config(root: &Path) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: SEGMENT as u64,
        mapped_file_size_consume_queue: 20 * 128,
        flush_disk_type: FlushDiskType::AsyncFlush,
        flush_interval_consume_queue_ms: 20,
        flush_interval_commit_log_ms: 10,
        max_hash_slot_num: 256,
        max_index_num: 1024,
        ..StoreConfig::with_root(root)
    }
}

fn open(root: &Path) -> MessageStore {
    MessageStore::open(config(root), host()).unwrap()
}

fn msg(n: u64) -> StoredMessage {
    StoredMessage {
        topic: TOPIC.into(),
        queue_id: (n % 3) as i32,
        body: Bytes::from(format!("{n}:{}", "b".repeat(((n * 7919) % 1800) as usize))),
        born_host: host(),
        store_host: host(),
        properties: format!("KEYS\u{1}k{n}\u{2}"),
        ..StoredMessage::default()
    }
}

async fn fill(store: &MessageStore, from: u64, to: u64) {
    for n in from..to {
        let r = store.put_message(msg(n)).await;
        assert_eq!(r.status, PutMessageStatus::PutOk, "{r:?}");
    }
    assert!(store.wait_dispatched(Duration::from_secs(10)));
}

/// xorshift64*: seeded chunk sizes without a dependency.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// Ships the master's log from `from` to its end in chunks of the sizes `sizes` picks.
fn ship(master: &MessageStore, replica: &MessageStore, mut from: i64, mut sizes: impl FnMut() -> usize) -> i64 {
    let end = master.max_phy_offset();
    while from < end {
        let bytes = master.read_commit_log(from, sizes()).expect("readable");
        assert!(!bytes.is_empty());
        let appended = replica.append_replicated(from, &bytes).unwrap();
        from += bytes.len() as i64;
        assert_eq!(appended.next_offset, from);
        assert!(appended.max_phy_offset <= from);
    }
    from
}

/// Compares the replica's segments with the master's. A segment's missing tail reads as zeros
/// (the store's rule): the preallocator of either store may be between creating the next
/// segment and sizing it while this reads the directory.
fn assert_same_files(master: &MessageStore, replica: &MessageStore) {
    let dir = replica.config().commit_log_dir();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let theirs = std::fs::read(&path).unwrap();
        match std::fs::read(master.config().commit_log_dir().join(path.file_name().unwrap())) {
            Ok(ours) => {
                let len = ours.len().max(theirs.len());
                let at = |bytes: &[u8], i: usize| bytes.get(i).copied().unwrap_or(0);
                let first = (0..len).find(|&i| at(&ours, i) != at(&theirs, i));
                assert!(
                    first.is_none(),
                    "{} differs from byte {first:?} (master {} bytes, replica {} bytes)",
                    path.display(),
                    ours.len(),
                    theirs.len()
                );
            }
            Err(_) => assert!(theirs.iter().all(|b| *b == 0), "{} has data the master lacks", path.display()),
        }
    }
}

fn assert_same_queues(master: &MessageStore, replica: &MessageStore) {
    for q in 0..3 {
        let max = master.max_offset_in_queue(TOPIC, q);
        assert_eq!(replica.max_offset_in_queue(TOPIC, q), max);
        let mut offset = replica.min_offset_in_queue(TOPIC, q);
        while offset < max {
            let ours = master.consume_queue_units(TOPIC, q, offset, 50);
            assert_eq!(replica.consume_queue_units(TOPIC, q, offset, 50), ours);
            offset += ours.len() as i64;
        }
    }
}

#[tokio::test]
async fn replica_fed_in_random_chunks_equals_its_master() {
    let (mdir, rdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = open(mdir.path());
    fill(&master, 0, 300).await;
    assert!(master.max_phy_offset() > 4 * SEGMENT);
    for seed in [1u64, 7, 42] {
        let rdir = rdir.path().join(seed.to_string());
        let replica = open(&rdir);
        let mut rng = Rng(seed);
        // Mostly small chunks, so records and blank markers are cut everywhere.
        ship(&master, &replica, 0, || match rng.below(4) {
            0 => 1 + rng.below(8) as usize,
            1 => 1 + rng.below(200) as usize,
            _ => 1 + rng.below(5000) as usize,
        });
        assert_eq!(replica.max_phy_offset(), master.max_phy_offset());
        assert!(replica.wait_dispatched(Duration::from_secs(10)));
        assert_same_files(&master, &replica);
        assert_same_queues(&master, &replica);
        let found = replica.query_message(TOPIC, "k299", 2, 0, i64::MAX);
        assert_eq!(found.messages.len(), 1, "the replica's index is built");
    }
}

#[tokio::test]
async fn a_sealed_segment_is_shipped_up_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let master = open(dir.path());
    fill(&master, 0, 120).await;
    let mut offset = 0;
    // Walk the first segment by records until the blank marker.
    while let Some(record) = master.look_message_by_offset(offset) {
        offset += record.len() as i64;
    }
    assert!(offset < SEGMENT);
    let tail = master.read_commit_log(offset, usize::MAX).expect("the marker and the unused space");
    assert_eq!(tail.len() as i64, SEGMENT - offset);
    assert!(tail[8..].iter().all(|b| *b == 0));
    let capped = master.read_commit_log(offset + 8, 100).unwrap();
    assert_eq!(capped.len(), 100);
    assert!(master.read_commit_log(master.max_phy_offset(), 100).is_none(), "nothing past the end");
}

#[tokio::test]
async fn a_record_head_is_held_back_until_its_rest_arrives() {
    let (mdir, rdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = open(mdir.path());
    fill(&master, 0, 3).await;
    let first = master.look_message_by_offset(0).unwrap().len() as i64;
    let second = master.look_message_by_offset(first).unwrap().len() as i64;
    let replica = open(rdir.path());
    // The first record and half the second.
    let head = master.read_commit_log(0, (first + second / 2) as usize).unwrap();
    let appended = replica.append_replicated(0, &head).unwrap();
    assert_eq!((appended.max_phy_offset, appended.next_offset), (first, first + second / 2));
    assert_eq!(replica.max_phy_offset(), first, "no torn record in the file");
    let file = std::fs::read(replica.config().commit_log_dir().join("00000000000000000000")).unwrap();
    assert!(file[first as usize..].iter().all(|b| *b == 0), "the head is not in the file");
    // The next bytes must follow the head...
    let err = replica.append_replicated(first + 5, b"xx").unwrap_err();
    assert!(
        matches!(err, ReplicaAppendError::OffsetMismatch { expected, received } if expected == first + second / 2 && received == first + 5)
    );
    // ...or restart at the whole-record end (a new connection): the head is dropped.
    let rest = master.read_commit_log(first, usize::MAX).unwrap();
    let appended = replica.append_replicated(first, &rest).unwrap();
    assert_eq!(appended.max_phy_offset, master.max_phy_offset());
    assert!(replica.wait_dispatched(Duration::from_secs(5)));
    assert_same_queues(&master, &replica);
}

#[tokio::test]
async fn offsets_are_checked_and_records_must_land_where_they_were_written() {
    let (mdir, rdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = open(mdir.path());
    fill(&master, 0, 80).await;
    let replica = open(rdir.path());
    let first = master.look_message_by_offset(0).unwrap();
    assert!(matches!(replica.append_replicated(100, &first), Err(ReplicaAppendError::Unaligned { offset: 100, .. })));
    // An empty replica may start at a boundary, but a record written at 0 cannot land there.
    assert!(matches!(
        replica.append_replicated(SEGMENT, &first),
        Err(ReplicaAppendError::Diverged { offset, recorded: 0 }) if offset == SEGMENT
    ));
    // The master's second segment starts the replica there.
    let end = ship(&master, &replica, SEGMENT, || 4096);
    assert_eq!(replica.min_phy_offset(), SEGMENT);
    assert_eq!(replica.max_phy_offset(), end);
    assert!(matches!(
        replica.append_replicated(0, &first),
        Err(ReplicaAppendError::OffsetMismatch { expected, received: 0 }) if expected == end
    ));
    // Heartbeats (empty bodies) only check the offset.
    assert!(replica.append_replicated(end, &[]).is_ok());
    assert!(replica.append_replicated(end + 1, &[]).is_err());
    assert!(replica.wait_dispatched(Duration::from_secs(5)));
    assert_same_files(&master, &replica);
    assert_same_queues(&master, &replica);
    drop(replica);
    let reopened = open(rdir.path());
    assert_eq!((reopened.min_phy_offset(), reopened.max_phy_offset()), (SEGMENT, end));
}

#[tokio::test]
async fn an_empty_segment_left_behind_does_not_pin_the_replica_at_zero() {
    let (mdir, rdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = open(mdir.path());
    fill(&master, 0, 150).await;
    let start = master.max_phy_offset() - master.max_phy_offset() % SEGMENT;
    assert!(start > 0);
    // A replica whose first segment was created but never written (power loss).
    std::fs::create_dir_all(rdir.path().join("commitlog")).unwrap();
    std::fs::write(rdir.path().join("commitlog").join("00000000000000000000"), vec![0u8; SEGMENT as usize]).unwrap();
    let replica = open(rdir.path());
    assert_eq!(replica.max_phy_offset(), 0);
    let end = ship(&master, &replica, start, || 3000);
    assert_eq!((replica.min_phy_offset(), replica.max_phy_offset()), (start, end));
    assert!(replica.wait_dispatched(Duration::from_secs(5)));
    drop(replica);
    let reopened = open(rdir.path());
    assert_eq!((reopened.min_phy_offset(), reopened.max_phy_offset()), (start, end), "no stray segment file");
}

#[tokio::test]
async fn a_crash_with_a_record_half_received_recovers_whole_records() {
    let (mdir, rdir, crashed) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = open(mdir.path());
    fill(&master, 0, 40).await;
    let replica = open(rdir.path());
    // Everything but the last 50 bytes: the last record arrives only in part.
    let end = master.max_phy_offset();
    let mut at = 0;
    while at < end - 50 {
        let bytes = master.read_commit_log(at, (end - 50 - at) as usize).unwrap();
        replica.append_replicated(at, &bytes).unwrap();
        at += bytes.len() as i64;
    }
    let whole = replica.max_phy_offset();
    assert!(whole < end - 50);
    assert!(replica.wait_dispatched(Duration::from_secs(5)));
    // The files as a crash leaves them.
    copy_dir(rdir.path(), crashed.path());
    std::fs::write(crashed.path().join("abort"), b"1").unwrap();
    drop(replica);
    let recovered = open(crashed.path());
    assert_eq!(recovered.max_phy_offset(), whole);
    assert!(recovered.wait_dispatched(Duration::from_secs(5)));
    let appended = recovered.append_replicated(whole, &master.read_commit_log(whole, usize::MAX).unwrap()).unwrap();
    assert_eq!(appended.max_phy_offset, end);
    assert!(recovered.wait_dispatched(Duration::from_secs(5)));
    assert_same_files(&master, &recovered);
    assert_same_queues(&master, &recovered);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
