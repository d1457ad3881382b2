//! The CommitLog on real files: appends, reads, file rolls with the blank marker, batches,
//! queue offsets, size limits and the poisoned state.

use std::net::SocketAddr;

use bytes::Bytes;
use ferromq_protocol::message::{sysflag, RecordOrBlank, RecordView, StoredMessage, BLANK_MAGIC_CODE};
use ferromq_store::{AppendPath, CommitLog, MappedFileQueue, PutMessageStatus};

fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

fn msg(topic: &str, queue_id: i32, body: &[u8]) -> StoredMessage {
    StoredMessage {
        topic: topic.into(),
        queue_id,
        body: Bytes::copy_from_slice(body),
        born_host: "127.0.0.1:5555".parse().unwrap(),
        store_host: host(),
        born_timestamp_ms: 1_700_000_000_000,
        properties: "TAGS\u{1}TagA\u{2}".into(),
        ..StoredMessage::default()
    }
}

fn open(dir: &std::path::Path, file_size: usize) -> CommitLog {
    CommitLog::new(MappedFileQueue::load(dir, file_size, true).unwrap(), 4 * 1024 * 1024, host())
}

#[test]
fn appended_records_read_back_with_assigned_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), 64 * 1024);
    let a = log.append(&msg("T", 0, b"first")).unwrap();
    let b = log.append(&msg("T", 0, b"second")).unwrap();
    let c = log.append(&msg("T", 1, b"other queue")).unwrap();
    assert_eq!((a.wrote_offset, a.logics_offset), (0, 0));
    assert_eq!((b.wrote_offset, b.logics_offset), (a.wrote_bytes as i64, 1));
    assert_eq!(c.logics_offset, 0);
    assert_eq!(a.msg_id, "7F00000100002A9F0000000000000000");
    let bytes = log.get_message(b.wrote_offset, b.wrote_bytes).unwrap();
    let RecordOrBlank::Record(view) = RecordView::parse(&bytes).unwrap() else { panic!("a record") };
    assert_eq!(view.body, b"second");
    assert_eq!(view.queue_offset, 1);
    assert_eq!(view.physical_offset, b.wrote_offset);
    assert_eq!(view.store_timestamp_ms, b.store_timestamp);
    view.verify_body_crc().unwrap();
    assert_eq!(log.get_message_at(c.wrote_offset).unwrap().len(), c.wrote_bytes);
    assert_eq!(log.max_offset(), c.wrote_offset + c.wrote_bytes as i64);
    assert_eq!(log.next_queue_offset("T", 0), 2);
}

#[test]
fn a_record_that_does_not_fit_rolls_to_the_next_file_after_a_blank() {
    let dir = tempfile::tempdir().unwrap();
    let file_size = 1024;
    let log = open(dir.path(), file_size);
    let body = vec![7u8; 300];
    let mut results = Vec::new();
    for _ in 0..5 {
        results.push(log.append(&msg("T", 0, &body)).unwrap());
    }
    let size = results[0].wrote_bytes as i64;
    // Two records fit in the first file (2 * size + 8 <= 1024 < 3 * size + 8).
    assert_eq!(results[2].wrote_offset, file_size as i64);
    assert_eq!(results[4].wrote_offset, 2 * file_size as i64);
    let blank = log.get_message(2 * size, 8).unwrap();
    assert_eq!(&blank[0..4], &((file_size as i64 - 2 * size) as i32).to_be_bytes());
    assert_eq!(&blank[4..8], &BLANK_MAGIC_CODE.to_be_bytes());
    assert_eq!(log.roll_next_file(10), file_size as i64);
    let names: Vec<String> = {
        let mut v: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        v.sort();
        v
    };
    assert!(names.starts_with(&[
        "00000000000000000000".to_owned(),
        "00000000000000001024".to_owned(),
        "00000000000000002048".to_owned()
    ]));
}

#[test]
fn a_batch_is_contiguous_with_consecutive_queue_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), 4096);
    log.append(&msg("T", 2, b"before")).unwrap();
    let batch: Vec<StoredMessage> = (0..3).map(|i| msg("T", 2, format!("batch-{i}").as_bytes())).collect();
    let r = log.append_batch(&batch).unwrap();
    assert_eq!(r.msg_num, 3);
    assert_eq!(r.logics_offset, 1);
    assert_eq!(r.msg_id.split(',').count(), 3);
    let bytes = log.get_message(r.wrote_offset, r.wrote_bytes).unwrap();
    let all = StoredMessage::decode_all(&bytes).unwrap();
    assert_eq!(all.iter().map(|m| m.queue_offset).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(all[2].body, &b"batch-2"[..]);
    assert_eq!(log.next_queue_offset("T", 2), 4);
    // A batch across two queues is refused.
    let mixed = vec![msg("T", 0, b"a"), msg("T", 1, b"b")];
    assert_eq!(log.append_batch(&mixed).unwrap_err().status, PutMessageStatus::MessageIllegal);
}

#[test]
fn half_and_rollback_transaction_records_take_no_queue_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), 4096);
    let mut half = msg("T", 0, b"half");
    half.sys_flag = sysflag::TRANSACTION_PREPARED_TYPE;
    assert_eq!(log.append(&half).unwrap().logics_offset, 0);
    let normal = log.append(&msg("T", 0, b"normal")).unwrap();
    assert_eq!(normal.logics_offset, 0);
    let mut commit = msg("T", 0, b"commit");
    commit.sys_flag = sysflag::TRANSACTION_COMMIT_TYPE;
    assert_eq!(log.append(&commit).unwrap().logics_offset, 1);
}

#[test]
fn oversized_messages_are_illegal_and_the_log_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let log = CommitLog::new(MappedFileQueue::load(dir.path(), 4096, false).unwrap(), 1000, host());
    assert_eq!(log.append(&msg("T", 0, &[0u8; 1001])).unwrap_err().status, PutMessageStatus::MessageIllegal);
    // Under the body limit but larger than a segment.
    let log2 = CommitLog::new(MappedFileQueue::load(&dir.path().join("b"), 512, false).unwrap(), 4096, host());
    assert_eq!(log2.append(&msg("T", 0, &[0u8; 600])).unwrap_err().status, PutMessageStatus::MessageIllegal);
    let long_topic = "t".repeat(200);
    assert_eq!(log.append(&msg(&long_topic, 0, b"x")).unwrap_err().status, PutMessageStatus::MessageIllegal);
    assert!(log.append(&msg("T", 0, b"fine")).is_ok());
}

#[test]
fn a_failed_flush_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), 4096);
    log.append(&msg("T", 0, b"one")).unwrap();
    log.inject_flush_failure(true);
    assert!(log.flush().is_err());
    assert!(log.is_poisoned());
    let err = log.append(&msg("T", 0, b"two")).unwrap_err();
    assert_eq!(err.status, PutMessageStatus::ServiceNotAvailable);
    assert!(err.reason.contains("poisoned"), "{}", err.reason);
}

#[test]
fn a_failed_write_poisons_the_log_and_keeps_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), 4096);
    let one = log.append(&msg("T", 0, b"one")).unwrap();
    log.inject_write_failure(true);
    let err = log.append(&msg("T", 0, b"two")).unwrap_err();
    assert_eq!(err.status, PutMessageStatus::UnknownError);
    assert!(err.reason.contains("write failed"), "{}", err.reason);
    assert!(log.is_poisoned());
    log.inject_write_failure(false);
    assert_eq!(log.append(&msg("T", 0, b"three")).unwrap_err().status, PutMessageStatus::ServiceNotAvailable);
    assert_eq!(log.max_offset(), one.wrote_bytes as i64);
    assert_eq!(log.next_queue_offset("T", 0), 1, "the failed append took no queue offset");
    assert!(log.get_message(one.wrote_offset, one.wrote_bytes).is_some());
}

#[test]
fn staged_write_call_appends_roll_files_and_read_back_once_committed() {
    let dir = tempfile::tempdir().unwrap();
    let file_size = 4096;
    let log = open(dir.path(), file_size);
    log.queue().set_append_path(AppendPath::WriteCall);
    let mut results = Vec::new();
    for i in 0..40u8 {
        results.push(log.append(&msg("T", 0, &vec![i; 250 + usize::from(i) * 7])).unwrap());
    }
    assert!(log.queue().segments().len() >= 3, "rolled across files");
    assert!(log.queue().segments().iter().all(|f| f.append_path() == AppendPath::WriteCall));
    let first = &results[0];
    assert!(log.get_message(first.wrote_offset, first.wrote_bytes).is_none(), "staged until committed");
    assert_eq!(log.max_offset(), 0);
    assert!(log.commit());
    let last = results.last().unwrap();
    assert_eq!(log.max_offset(), last.wrote_offset + last.wrote_bytes as i64);
    for (i, r) in results.iter().enumerate() {
        let bytes = log.get_message(r.wrote_offset, r.wrote_bytes).unwrap();
        let RecordOrBlank::Record(view) = RecordView::parse(&bytes).unwrap() else { panic!("a record") };
        assert_eq!(view.body, vec![i as u8; 250 + i * 7]);
        assert_eq!(view.queue_offset, i as i64);
        view.verify_body_crc().unwrap();
    }
    log.flush().unwrap();
    // The files on disk hold the same bytes as the mapping.
    let last = results.last().unwrap();
    let seg_from = last.wrote_offset - last.wrote_offset % file_size as i64;
    let on_disk = std::fs::read(dir.path().join(format!("{seg_from:020}"))).unwrap();
    let at = (last.wrote_offset - seg_from) as usize;
    assert_eq!(&on_disk[at..at + last.wrote_bytes], &log.get_message(last.wrote_offset, last.wrote_bytes).unwrap()[..]);
}

#[test]
fn transient_pool_appends_are_visible_only_after_commit_and_buffers_return() {
    use ferromq_store::TransientStorePool;
    let dir = tempfile::tempdir().unwrap();
    let log = CommitLog::new(MappedFileQueue::load(dir.path(), 1024, false).unwrap(), 4096, host())
        .with_transient_pool(TransientStorePool::new(1, 1024).unwrap());
    let a = log.append(&msg("T", 0, &[1u8; 300])).unwrap();
    assert!(log.get_message(a.wrote_offset, a.wrote_bytes).is_none(), "not readable before commit");
    assert_eq!(log.max_offset(), 0);
    assert!(log.commit());
    assert_eq!(log.get_message(a.wrote_offset, a.wrote_bytes).unwrap().len(), a.wrote_bytes);
    assert_eq!(log.max_offset(), a.wrote_bytes as i64);
    // Fill the first segment (its buffer comes back once committed); the second segment is
    // written directly while the buffer is out, then the third gets the buffer again.
    let b = log.append(&msg("T", 0, &[2u8; 300])).unwrap();
    let c = log.append(&msg("T", 0, &[3u8; 300])).unwrap();
    assert_eq!(c.wrote_offset, 1024, "rolled");
    assert!(log.get_message(c.wrote_offset, c.wrote_bytes).is_some(), "direct write: no buffer was free");
    assert!(log.get_message(b.wrote_offset, b.wrote_bytes).is_none());
    log.commit();
    assert!(log.get_message(b.wrote_offset, b.wrote_bytes).is_some());
    let d = log.append(&msg("T", 0, &[4u8; 300])).unwrap();
    let e = log.append(&msg("T", 0, &[5u8; 300])).unwrap();
    assert_eq!(e.wrote_offset, 2048);
    assert!(log.get_message(e.wrote_offset, e.wrote_bytes).is_none(), "the returned buffer is reused");
    log.commit();
    let read = log.get_message(e.wrote_offset, e.wrote_bytes).unwrap();
    let decoded = StoredMessage::decode(&read).unwrap().0;
    assert_eq!(&decoded.body[..], &[5u8; 300][..]);
    assert!(log.get_message(d.wrote_offset, d.wrote_bytes).is_some());
}
