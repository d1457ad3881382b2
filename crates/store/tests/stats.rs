//! Store statistics: counts, TPS windows over an injected clock, the put latency buckets, the
//! runtime-info keys, and the counting done by the store's put and get paths.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use ferromq_protocol::message::StoredMessage;
use ferromq_store::{
    AppendResult, FlushDiskType, GetMessageResult, GetMessageStatus, MessageStore, PutMessageResult, PutMessageStatus,
    StatsRecorder, StoreConfig, Tps, PUT_LATENCY_BUCKET_NAMES, SAMPLES_MAX,
};

const BOOT_MS: i64 = 1_893_456_000_000;

fn stored(msg_num: usize, wrote_bytes: usize) -> PutMessageResult {
    PutMessageResult {
        status: PutMessageStatus::PutOk,
        append: Some(AppendResult { msg_num, wrote_bytes, ..AppendResult::default() }),
        remark: None,
    }
}

fn failed(status: PutMessageStatus) -> PutMessageResult {
    PutMessageResult { status, append: None, remark: Some("no".into()) }
}

fn got(status: GetMessageStatus, messages: usize) -> GetMessageResult {
    GetMessageResult {
        status,
        next_begin_offset: 0,
        min_offset: 0,
        max_offset: 0,
        messages: vec![Bytes::from_static(b"m"); messages],
        queue_offsets: (0..messages as i64).collect(),
        suggest_pulling_from_slave: false,
    }
}

fn kv(stats: &ferromq_store::StoreStats, key: &str) -> String {
    stats.to_kv().into_iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("no key {key}")).1
}

#[test]
fn counts_puts_and_gets() {
    let rec = StatsRecorder::new(BOOT_MS);
    rec.record_put(&stored(1, 100), Duration::ZERO);
    rec.record_put(&stored(3, 300), Duration::from_millis(2));
    rec.record_put(&failed(PutMessageStatus::MessageIllegal), Duration::from_millis(1));
    let timeout = PutMessageResult { status: PutMessageStatus::FlushDiskTimeout, ..stored(1, 50) };
    rec.record_put(&timeout, Duration::from_millis(5_000));
    rec.record_get(&got(GetMessageStatus::Found, 4), Duration::ZERO);
    rec.record_get(&got(GetMessageStatus::OffsetOverflowOne, 0), Duration::from_millis(7));
    rec.record_get(&got(GetMessageStatus::NoMatchedMessage, 0), Duration::ZERO);

    let s = rec.snapshot(BOOT_MS + 3_723_000);
    assert_eq!(s.put_messages_total, 5);
    assert_eq!(s.put_bytes_total, 450);
    assert_eq!(s.put_failures_total, 1, "a flush timeout stored the message: not a failure");
    assert_eq!(s.put_latency_max_ms, 5_000);
    assert_eq!(s.get_found_total, 1);
    assert_eq!(s.get_miss_total, 2);
    assert_eq!(s.get_transferred_messages_total, 4);
    assert_eq!(s.get_latency_max_ms, 7);
    assert_eq!(s.boot_timestamp_ms, BOOT_MS);
    assert_eq!(kv(&s, "runtime"), "[ 0 days, 1 hours, 2 minutes, 3 seconds ]");
    assert_eq!(kv(&s, "putMessageTimesTotal"), "5");
    assert_eq!(kv(&s, "putMessageSizeTotal"), "450");
    assert_eq!(kv(&s, "putMessageFailedTimes"), "1");
    assert_eq!(kv(&s, "putMessageEntireTimeMax"), "5000");
    assert_eq!(kv(&s, "putMessageAverageSize"), "90.0");
    assert_eq!(kv(&s, "getMessageEntireTimeMax"), "7");
    assert_eq!(kv(&s, "bootTimestamp"), BOOT_MS.to_string());
}

#[test]
fn put_latency_lands_in_rocketmq_buckets() {
    let rec = StatsRecorder::new(BOOT_MS);
    let latencies_ms =
        [0, 1, 9, 10, 49, 50, 99, 100, 199, 200, 499, 500, 999, 1_000, 2_500, 3_000, 4_999, 5_000, 10_000];
    for ms in latencies_ms {
        rec.record_put(&stored(1, 10), Duration::from_millis(ms));
    }
    // A put that stored nothing has no latency to count.
    rec.record_put(&failed(PutMessageStatus::ServiceNotAvailable), Duration::from_secs(60));
    // Sub-millisecond puts are 0 ms, as with Java's millisecond clock.
    rec.record_put(&stored(1, 10), Duration::from_micros(900));

    let s = rec.snapshot(BOOT_MS);
    assert_eq!(s.put_latency_distribution, [2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1]);
    assert_eq!(s.put_latency_max_ms, 10_000);
    assert_eq!(
        kv(&s, "putMessageDistributeTime"),
        "[<=0ms]:2 [0~10ms]:2 [10~50ms]:2 [50~100ms]:2 [100~200ms]:2 [200~500ms]:2 [500ms~1s]:2 \
         [1~2s]:1 [2~3s]:1 [3~4s]:1 [4~5s]:1 [5~10s]:1 [10s~]:1 "
    );
    assert_eq!(PUT_LATENCY_BUCKET_NAMES.len(), s.put_latency_distribution.len());
}

#[test]
fn tps_windows_come_from_per_second_samples() {
    let rec = StatsRecorder::new(BOOT_MS);
    assert_eq!(rec.snapshot(BOOT_MS).put_tps, Tps::default(), "no samples, no TPS");
    rec.sample(BOOT_MS);
    // Second s (1..=12): 10 puts per second, plus 5 found and 2 missed reads.
    for second in 1..=12 {
        for _ in 0..10 {
            rec.record_put(&stored(1, 10), Duration::ZERO);
        }
        for _ in 0..5 {
            rec.record_get(&got(GetMessageStatus::Found, 2), Duration::ZERO);
        }
        for _ in 0..2 {
            rec.record_get(&got(GetMessageStatus::NoMessageInQueue, 0), Duration::ZERO);
        }
        if second == 12 {
            // The last second was busier: 40 more puts.
            for _ in 0..40 {
                rec.record_put(&stored(1, 10), Duration::ZERO);
            }
        }
        rec.sample(BOOT_MS + second * 1000);
    }
    let s = rec.snapshot(BOOT_MS + 12_500);
    assert_eq!(s.put_tps.last_1s, Some(50.0));
    assert_eq!(s.put_tps.last_10s, Some(14.0));
    assert_eq!(s.put_tps.last_60s, None);
    assert_eq!(s.put_tps.last_600s, None);
    assert_eq!(s.get_found_tps.last_10s, Some(5.0));
    assert_eq!(s.get_miss_tps.last_1s, Some(2.0));
    assert_eq!(s.get_transferred_tps.last_10s, Some(10.0));
    // Java's rendering: 10 s, 60 s and 600 s, empty when unknown.
    assert_eq!(kv(&s, "putTps"), "14.0  ");
    assert_eq!(kv(&s, "getFoundTps"), "5.0  ");
    assert_eq!(kv(&s, "getMissTps"), "2.0  ");
    assert_eq!(kv(&s, "getTotalTps"), "7.0 0.0 0.0");
    assert_eq!(kv(&s, "getTransferredTps"), "10.0  ");
}

#[test]
fn tps_uses_the_real_time_between_samples() {
    let rec = StatsRecorder::new(BOOT_MS);
    rec.sample(BOOT_MS);
    for _ in 0..30 {
        rec.record_put(&stored(1, 10), Duration::ZERO);
    }
    // The sampler ran late: 1.5 s between the two samples.
    rec.sample(BOOT_MS + 1_500);
    assert_eq!(rec.snapshot(BOOT_MS + 1_500).put_tps.last_1s, Some(20.0));
    // Two samples at the same instant give no rate rather than a division by zero.
    rec.sample(BOOT_MS + 1_500);
    assert_eq!(rec.snapshot(BOOT_MS + 1_500).put_tps.last_1s, None);
}

#[test]
fn the_sample_ring_keeps_ten_minutes() {
    let rec = StatsRecorder::new(BOOT_MS);
    for second in 0..(SAMPLES_MAX as i64 + 100) {
        rec.record_put(&stored(1, 10), Duration::ZERO);
        rec.sample(BOOT_MS + second * 1000);
    }
    let s = rec.snapshot(BOOT_MS);
    assert_eq!(s.put_tps.last_600s, Some(1.0));
    assert_eq!(s.put_tps.last_60s, Some(1.0));
    assert_eq!(kv(&s, "putTps"), "1.0 1.0 1.0");
}

#[test]
fn runtime_info_keys_are_rocketmq_names_sorted() {
    let keys: Vec<String> = StatsRecorder::new(BOOT_MS).snapshot(BOOT_MS).to_kv().into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "bootTimestamp",
            "getFoundTps",
            "getMessageEntireTimeMax",
            "getMissTps",
            "getTotalTps",
            "getTransferredTps",
            "putMessageAverageSize",
            "putMessageDistributeTime",
            "putMessageEntireTimeMax",
            "putMessageFailedTimes",
            "putMessageSizeTotal",
            "putMessageTimesTotal",
            "putTps",
            "runtime",
        ]
    );
}

fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

fn config(root: &Path) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: 64 * 1024,
        mapped_file_size_consume_queue: 20 * 64,
        flush_disk_type: FlushDiskType::SyncFlush,
        max_hash_slot_num: 64,
        max_index_num: 64,
        ..StoreConfig::with_root(root)
    }
}

fn msg(body: &str) -> StoredMessage {
    StoredMessage {
        topic: "T".into(),
        body: Bytes::copy_from_slice(body.as_bytes()),
        born_host: "127.0.0.1:5555".parse().unwrap(),
        store_host: host(),
        ..StoredMessage::default()
    }
}

#[tokio::test]
async fn the_store_counts_its_puts_and_reads() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path()), host()).unwrap();
    let mut bytes = 0;
    for i in 0..3 {
        let r = store.put_message(msg(&format!("m{i}"))).await;
        bytes += r.append.unwrap().wrote_bytes as u64;
    }
    let r = store.put_messages(vec![msg("b0"), msg("b1")]).await;
    assert_eq!(r.status, PutMessageStatus::PutOk);
    bytes += r.append.unwrap().wrote_bytes as u64;
    let too_big = "x".repeat(store.config().max_message_size as usize + 1);
    assert_eq!(store.put_message(msg(&too_big)).await.status, PutMessageStatus::MessageIllegal);
    assert!(store.wait_dispatched(Duration::from_secs(10)));

    assert_eq!(store.get_message("T", 0, 0, 32, 1 << 20, None).status, GetMessageStatus::Found);
    assert_eq!(store.get_message("T", 0, 5, 32, 1 << 20, None).status, GetMessageStatus::OffsetOverflowOne);
    assert_eq!(store.get_message("NONE", 0, 0, 32, 1 << 20, None).status, GetMessageStatus::NoMatchedLogicQueue);

    let s = store.stats();
    assert_eq!(s.put_messages_total, 5);
    assert_eq!(s.put_bytes_total, bytes);
    assert_eq!(s.put_failures_total, 1);
    assert_eq!(s.put_latency_distribution.iter().sum::<u64>(), 4, "one bucket entry per stored put");
    assert_eq!(s.get_found_total, 1);
    assert_eq!(s.get_miss_total, 2);
    assert_eq!(s.get_transferred_messages_total, 5);
    assert!(s.timestamp_ms >= s.boot_timestamp_ms);
}
