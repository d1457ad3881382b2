//! Timer wheel throughput with many pending timers, on real files (a temporary directory).
//!
//! Each run stores N timer messages in `rmq_sys_wheel_timer` first (not timed), then opens
//! the timer over them and measures:
//!
//! * enqueue: from start until all N are linked into the wheel (`pending() == N`): reading the
//!   timer queue, the CommitLog record, appending a timerlog unit and updating the slot;
//! * dequeue: after the (manual) clock jumps past every delivery time, until all N are re-put
//!   to their real topic: walking the slots' chains, reading and re-putting each message.
//!
//! The clock is a manual one, so the messages can be due an hour ahead (spread over 3600
//! slots) and still be delivered without waiting. The criterion group runs 100 000 timers
//! per iteration (each phase includes up to one idle poll, 100 ms, noticing the clock jump); afterwards one run with 1 000 000 pending timers prints its rates and the
//! process's resident memory. Run: `cargo bench -p ferromq-timer --bench timer`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput};
use ferromq_protocol::message::{keys, MessageProperties, StoredMessage};
use ferromq_store::{FlushDiskType, MessageStore, PutMessageStatus, StoreConfig};
use ferromq_timer::{timer_transform, Clock, TimerConfig, TimerMessageStore};

#[derive(Debug)]
struct ManualClock(AtomicI64);

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::Acquire)
    }
}

fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().expect("address")
}

fn system_now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn store_config(root: &Path) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: 256 * 1024 * 1024,
        flush_disk_type: FlushDiskType::AsyncFlush,
        message_index_enable: false,
        ..StoreConfig::with_root(root)
    }
}

/// What one run measured.
struct Rates {
    put: Duration,
    enqueue: Duration,
    dequeue: Duration,
    /// Anonymous (heap) and file-backed (mapped CommitLog, timerlog) resident MiB.
    rss_mib_after_enqueue: (u64, u64),
}

fn status_mib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .map_or(0, |kib: u64| kib / 1024)
}

fn rss_mib() -> (u64, u64) {
    (status_mib("RssAnon:"), status_mib("RssFile:"))
}

async fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn run_once(n: u64) -> Rates {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(MessageStore::open(store_config(dir.path()), host()).expect("store"));
    let clock = Arc::new(ManualClock(AtomicI64::new(system_now_ms())));
    let config = TimerConfig::default();
    let base = clock.now_ms() + 600_000;

    let began = Instant::now();
    for i in 0..n {
        let mut props = MessageProperties::new();
        props.insert(keys::UNIQ_KEY, format!("U{i:012}"));
        props.insert(keys::TIMER_DELIVER_MS, (base + (i as i64 % 3600) * 1000 + 500).to_string());
        let (mut topic, mut queue_id) = ("BenchTopic".to_owned(), (i % 4) as i32);
        timer_transform(&mut props, &mut topic, &mut queue_id, || clock.now_ms(), &config).expect("timer message");
        let msg = StoredMessage {
            topic,
            queue_id,
            body: Bytes::from_static(&[b'x'; 64]),
            born_host: host(),
            store_host: host(),
            properties: props.encode(),
            ..StoredMessage::default()
        };
        let r = store.put_message(msg).await;
        assert_eq!(r.status, PutMessageStatus::PutOk);
    }
    assert!(store.wait_dispatched(Duration::from_secs(60)));
    let put = began.elapsed();

    let timer = TimerMessageStore::open_with_clock(config, dir.path(), store.clone(), clock.clone()).expect("timer");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let began = Instant::now();
    let task = tokio::spawn(timer.clone().run(async move {
        let _ = rx.await;
    }));
    wait_until(Duration::from_secs(600), || timer.pending() == n).await;
    let enqueue = began.elapsed();
    let rss_mib_after_enqueue = rss_mib();

    let began = Instant::now();
    clock.0.store(base + 3_700_000, Ordering::Release);
    wait_until(Duration::from_secs(600), || timer.stats().delivered == n).await;
    let dequeue = began.elapsed();

    let _ = tx.send(());
    task.await.expect("timer task");
    drop(timer);
    store.shutdown();
    Rates { put, enqueue, dequeue, rss_mib_after_enqueue }
}

fn per_sec(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let mut criterion = Criterion::default().sample_size(10).configure_from_args();
    let n = 100_000u64;
    let mut group = criterion.benchmark_group("timer_wheel");
    group.throughput(Throughput::Elements(n));
    group.bench_function("enqueue_then_dequeue_100k", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let r = rt.block_on(run_once(n));
                total += r.enqueue + r.dequeue;
            }
            total
        })
    });
    group.finish();
    criterion.final_summary();

    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n = 1_000_000u64;
    let rss_before = rss_mib();
    let r = rt.block_on(run_once(n));
    println!(
        "timer_wheel 1M pending: store put {:.0}/s ({:?}); enqueue {:.0}/s ({:?}); dequeue {:.0}/s ({:?}); \
         resident after enqueue: {} MiB anonymous, {} MiB file-backed ({} / {} MiB before the run)",
        per_sec(n, r.put),
        r.put,
        per_sec(n, r.enqueue),
        r.enqueue,
        per_sec(n, r.dequeue),
        r.dequeue,
        r.rss_mib_after_enqueue.0,
        r.rss_mib_after_enqueue.1,
        rss_before.0,
        rss_before.1,
    );
}
