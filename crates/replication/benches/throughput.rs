//! Replication throughput, master to slave, in process over loopback TCP.
//!
//! 1. Catch-up: a slave that stopped after the master's first message reconnects when the
//!    master holds `FERROMQ_BENCH_MB` MiB (default 256) of 1 KiB messages in 64 MiB segments,
//!    and copies all of it. Reports MiB/s from reconnect until the slave's CommitLog ends where
//!    the master's does (and until it has dispatched).
//! 2. Live: the slave follows while producers append 1 KiB messages (256 in flight); reports
//!    the put rate, the replication rate and the slave's lag at the end.
//! 3. Puts that each wait for the slave's acknowledgement of their end offset (what a
//!    SYNC_MASTER put adds) against plain puts: throughput and latency percentiles.
//!
//! Stores go under `FERROMQ_BENCH_DIR` (default: /dev/shm when present, else the temp dir).
//! Run: `cargo bench -p ferromq-replication --bench throughput`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferromq_protocol::message::StoredMessage;
use ferromq_replication::{HaClient, HaClientOptions, HaConfig, HaService};
use ferromq_store::{FlushDiskType, MessageStore, PutMessageStatus, StoreConfig};
use tokio::net::TcpListener;

const MIB: u64 = 1024 * 1024;
const BODY_BYTES: usize = 1024;
const IN_FLIGHT: usize = 256;
const SEGMENT_BYTES: u64 = 64 * MIB;

fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().expect("address")
}

fn bench_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("FERROMQ_BENCH_DIR") {
        return PathBuf::from(dir);
    }
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    }
}

fn open(root: &std::path::Path, segment: u64) -> Arc<MessageStore> {
    let config = StoreConfig {
        mapped_file_size_commit_log: segment,
        flush_disk_type: FlushDiskType::AsyncFlush,
        ..StoreConfig::with_root(root)
    };
    Arc::new(MessageStore::open(config, host()).expect("open store"))
}

fn message(n: u64) -> StoredMessage {
    StoredMessage {
        topic: "Bench".into(),
        queue_id: (n % 8) as i32,
        body: Bytes::from(vec![b'x'; BODY_BYTES]),
        born_host: host(),
        store_host: host(),
        properties: format!("KEYS\u{1}k{n}\u{2}"),
        ..StoredMessage::default()
    }
}

/// Puts until the CommitLog holds `bytes`, `IN_FLIGHT` puts at a time. Returns messages put.
async fn fill(store: &Arc<MessageStore>, bytes: i64) -> u64 {
    let mut tasks = tokio::task::JoinSet::new();
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    for _ in 0..IN_FLIGHT {
        let (store, next) = (store.clone(), next.clone());
        tasks.spawn(async move {
            while store.max_phy_offset() < bytes {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let r = store.put_message(message(n)).await;
                assert_eq!(r.status, PutMessageStatus::PutOk);
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    next.load(std::sync::atomic::Ordering::Relaxed)
}

async fn wait_for(what: &str, limit: Duration, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn mb_per_s(bytes: i64, took: Duration) -> f64 {
    bytes as f64 / MIB as f64 / took.as_secs_f64()
}

fn main() {
    let mb: u64 = std::env::var("FERROMQ_BENCH_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(256);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let root = bench_root();
        println!("stores under {}; {mb} MiB; {BODY_BYTES}-byte bodies", root.display());
        let ha_config = HaConfig::default();
        let options = HaClientOptions::default();

        // 1. Catch-up from the master's first message, across segments.
        let dir = tempfile::tempdir_in(&root).expect("temp dir");
        let segment = SEGMENT_BYTES;
        let master = open(&dir.path().join("master"), segment);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let ha = HaService::start(master.clone(), ha_config.clone(), listener).expect("HA service");
        let slave = open(&dir.path().join("slave"), segment);
        fill(&master, 1).await;
        let client = HaClient::start_with(slave.clone(), ha_config.clone(), options.clone());
        client.update_master_address(&ha.local_addr().to_string());
        let first = master.max_phy_offset();
        wait_for("first message", Duration::from_secs(60), || slave.max_phy_offset() >= first).await;
        client.shutdown().await;
        drop(client);
        let messages = fill(&master, (mb * MIB) as i64).await;
        let total = master.max_phy_offset();
        let copied_bytes = total - first;
        let began = Instant::now();
        let client = HaClient::start_with(slave.clone(), ha_config.clone(), options.clone());
        client.update_master_address(&ha.local_addr().to_string());
        wait_for("catch-up", Duration::from_secs(600), || slave.max_phy_offset() >= total).await;
        let copied = began.elapsed();
        assert!(slave.wait_dispatched(Duration::from_secs(600)));
        let dispatched = began.elapsed();
        wait_for("acknowledged", Duration::from_secs(60), || ha.push2_slave_max_offset() >= total).await;
        println!(
            "catch-up: {messages} messages, {:.1} MiB in {:.2?} = {:.0} MiB/s (CommitLog copied); \
             {:.0} MiB/s including the slave's dispatch",
            copied_bytes as f64 / MIB as f64,
            copied,
            mb_per_s(copied_bytes, copied),
            mb_per_s(copied_bytes, dispatched)
        );

        // 2. Live: the slave follows while producers write.
        let before = master.max_phy_offset();
        let began = Instant::now();
        let target = before + (mb * MIB / 2) as i64;
        let put = fill(&master, target).await;
        let written = began.elapsed();
        let lag_at_end = master.max_phy_offset() - slave.max_phy_offset();
        let end = master.max_phy_offset();
        wait_for("live catch-up", Duration::from_secs(600), || slave.max_phy_offset() >= end).await;
        let replicated = began.elapsed();
        println!(
            "live: {put} puts of 1 KiB ({IN_FLIGHT} in flight) in {written:.2?} = {:.0} msg/s, {:.0} MiB/s appended; \
             slave lag when the writers stopped {:.1} KiB; all replicated after {replicated:.2?} = {:.0} MiB/s",
            put as f64 / written.as_secs_f64(),
            mb_per_s(end - before, written),
            lag_at_end as f64 / 1024.0,
            mb_per_s(end - before, replicated)
        );
        // 3. Puts that wait for the slave's acknowledgement (SYNC_MASTER with inSyncReplicas 2),
        //    against the same puts without waiting, both with IN_FLIGHT writers.
        let ha = Arc::new(ha);
        for sync in [false, true] {
            let (count, took, latencies) = timed_puts(&master, sync.then(|| ha.clone()), 50_000).await;
            println!(
                "{}: {count} puts of 1 KiB ({IN_FLIGHT} in flight) in {took:.2?} = {:.0} msg/s; latency p50 {:?} p99 {:?} max {:?}",
                if sync { "put + slave ack" } else { "put only      " },
                count as f64 / took.as_secs_f64(),
                latencies[latencies.len() / 2],
                latencies[latencies.len() * 99 / 100],
                latencies[latencies.len() - 1],
            );
        }
        client.shutdown().await;
        ha.shutdown().await;
    });
}

/// `count` puts by `IN_FLIGHT` writers; with `ha`, each put then waits for a slave's
/// acknowledgement of its end. Returns the count, the time and the sorted latencies.
async fn timed_puts(
    store: &Arc<MessageStore>,
    ha: Option<Arc<HaService>>,
    count: u64,
) -> (u64, Duration, Vec<Duration>) {
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let began = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..IN_FLIGHT {
        let (store, next, ha) = (store.clone(), next.clone(), ha.clone());
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if n >= count {
                    return latencies;
                }
                let put_began = Instant::now();
                let r = store.put_message(message(n)).await;
                assert_eq!(r.status, PutMessageStatus::PutOk);
                if let Some(ha) = &ha {
                    let a = r.append.expect("appended");
                    let end = a.wrote_offset + a.wrote_bytes as i64;
                    ha.wait_for_replicas(end, 2, Duration::from_secs(3)).await.expect("acknowledged");
                }
                latencies.push(put_began.elapsed());
            }
        });
    }
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        all.extend(done.expect("writer"));
    }
    let took = began.elapsed();
    all.sort();
    (count, took, all)
}
