//! Store-level load run: N concurrent writers put 1 KiB messages through `MessageStore` for a
//! while and the run reports messages per second, put latency percentiles and, under
//! SYNC_FLUSH, flushes per acknowledged message (group commit). Bounded in time and count.
//!
//! `cargo run --release -p ferromq-store --example store_load -- <writers> <seconds> <sync|async> [dir] [warm]`
//!
//! `warm` zero-fills segments before use (`warmMapedFileEnable`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferromq_protocol::message::StoredMessage;
use ferromq_store::{FlushDiskType, MessageStore, PutMessageStatus, StoreConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let writers: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(64);
    let seconds: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let sync = args.get(3).map(String::as_str) != Some("async");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = args.get(4).map_or_else(|| tmp.path().to_owned(), std::path::PathBuf::from);
    let warm = args.get(5).map(String::as_str) == Some("warm");
    let host: SocketAddr = "127.0.0.1:10911".parse().expect("addr");
    let config = StoreConfig {
        mapped_file_size_commit_log: 256 * 1024 * 1024,
        flush_disk_type: if sync { FlushDiskType::SyncFlush } else { FlushDiskType::AsyncFlush },
        warm_mapped_file_enable: warm,
        ..StoreConfig::with_root(&root)
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async move {
        let store = Arc::new(MessageStore::open(config, host).expect("open"));
        // Warm-up put outside the measured time: it creates the first segment (and, with
        // `warm`, zero-fills it), as the broker runs' warm-up sends do.
        let first = StoredMessage {
            topic: "LoadTopic".into(),
            body: Bytes::from_static(b"warm-up"),
            born_host: host,
            store_host: host,
            ..StoredMessage::default()
        };
        assert_eq!(store.put_message(first).await.status, PutMessageStatus::PutOk);
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicU64::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        let started = Instant::now();
        for w in 0..writers {
            let (store, stop, acked) = (store.clone(), stop.clone(), acked.clone());
            tasks.spawn(async move {
                let mut latencies = Vec::with_capacity(100_000);
                while !stop.load(Ordering::Relaxed) && latencies.len() < 5_000_000 {
                    let msg = StoredMessage {
                        topic: "LoadTopic".into(),
                        queue_id: (w % 8) as i32,
                        body: Bytes::from_static(&[b'x'; 1024]),
                        born_host: host,
                        store_host: host,
                        ..StoredMessage::default()
                    };
                    let t = Instant::now();
                    let r = store.put_message(msg).await;
                    assert_eq!(r.status, PutMessageStatus::PutOk);
                    latencies.push(t.elapsed().as_micros() as u64);
                    acked.fetch_add(1, Ordering::Relaxed);
                    // An ASYNC_FLUSH put completes without suspending; yield so the writers
                    // share the runtime like independent clients' requests would.
                    tokio::task::yield_now().await;
                }
                latencies
            });
        }
        let flushes_before = store.flush_count();
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        while let Some(l) = tasks.join_next().await {
            all.extend(l.expect("writer"));
        }
        let elapsed = started.elapsed().as_secs_f64();
        let flushes = store.flush_count() - flushes_before;
        all.sort_unstable();
        let pct = |p: f64| all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1))).copied().unwrap_or(0);
        let n = acked.load(Ordering::Relaxed);
        println!(
            "{{\"writers\":{writers},\"flush\":\"{}\",\"seconds\":{elapsed:.2},\"acked\":{n},\"msgs_per_s\":{:.0},\"p50_us\":{},\"p99_us\":{},\"p999_us\":{},\"max_us\":{},\"flushes\":{flushes},\"flushes_per_ack\":{:.4}}}",
            if sync { "SYNC_FLUSH" } else { "ASYNC_FLUSH" },
            n as f64 / elapsed,
            pct(0.50),
            pct(0.99),
            pct(0.999),
            all.last().copied().unwrap_or(0),
            flushes as f64 / n.max(1) as f64
        );
        store.shutdown();
    });
}
