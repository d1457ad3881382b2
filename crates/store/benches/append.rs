//! CommitLog append throughput for 1 KiB messages, against a bare baseline that writes the
//! same encoded bytes with `write` into a file, measured in the same run. No flushing in
//! either (durability cost is measured by the `store_load` example). Run:
//! `cargo bench -p ferromq-store --bench append`.

use std::io::Write;
use std::net::SocketAddr;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ferromq_protocol::message::StoredMessage;
use ferromq_store::{CommitLog, MappedFileQueue};

/// Segment size for the runs: large enough that criterion's iterations roll a few segments.
const SEGMENT: usize = 64 * 1024 * 1024;

fn message() -> StoredMessage {
    let host: SocketAddr = "10.0.0.1:10911".parse().expect("addr");
    StoredMessage {
        topic: "BenchTopic".into(),
        queue_id: 1,
        body: Bytes::from(vec![b'x'; 1024]),
        born_host: "10.0.0.5:40000".parse().expect("addr"),
        store_host: host,
        born_timestamp_ms: 1_700_000_000_000,
        properties: "UNIQ_KEY\u{1}7F0000011A2B18B4AAC25C3F1F0A0000\u{2}TAGS\u{1}TagA\u{2}WAIT\u{1}true\u{2}".into(),
        ..StoredMessage::default()
    }
}

fn appends(c: &mut Criterion) {
    let msg = message();
    let encoded = msg.encode().expect("encodes");
    let mut group = c.benchmark_group("append_1KiB");
    group.throughput(Throughput::Bytes(encoded.len() as u64));

    group.bench_function("baseline_write_syscall", |b| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = std::fs::File::create(dir.path().join("baseline")).expect("file");
        let mut written = 0usize;
        b.iter(|| {
            if written + encoded.len() > SEGMENT {
                file = std::fs::File::create(dir.path().join(format!("baseline-{written}"))).expect("file");
                written = 0;
            }
            file.write_all(&encoded).expect("write");
            written += encoded.len();
        });
    });

    group.bench_function("commit_log_single", |b| {
        let dir = tempfile::tempdir().expect("tempdir");
        let log =
            CommitLog::new(MappedFileQueue::load(dir.path(), SEGMENT, true).expect("queue"), 4 << 20, msg.store_host);
        b.iter(|| log.append(&msg).expect("append"));
    });

    let batch: Vec<StoredMessage> = (0..16).map(|_| msg.clone()).collect();
    group.throughput(Throughput::Bytes((encoded.len() * batch.len()) as u64));
    group.bench_function("commit_log_batch_of_16", |b| {
        let dir = tempfile::tempdir().expect("tempdir");
        let log =
            CommitLog::new(MappedFileQueue::load(dir.path(), SEGMENT, true).expect("queue"), 4 << 20, msg.store_host);
        b.iter_batched(|| (), |()| log.append_batch(&batch).expect("append"), BatchSize::SmallInput);
    });
    group.finish();
}

criterion_group!(benches, appends);
criterion_main!(benches);
