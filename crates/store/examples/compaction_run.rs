//! Compaction throughput and size ratio on a key-skewed workload:
//! `compaction_run <dir> <messages> <keys> <body bytes>` puts <messages> into one queue of a
//! compaction topic with keys drawn from <keys> with a Zipf-like skew (key i about 1/(i+1) as
//! often as key 0), runs one compaction and reports the input (compaction log bytes before),
//! the time, MB/s of input and the size after. Three repetitions on fresh stores under <dir>.
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferromq_protocol::message::StoredMessage;
use ferromq_store::{MessageStore, StoreConfig};

fn dir_bytes(dir: &Path) -> u64 {
    // Written bytes, not the files' preallocated lengths: blocks in use.
    let mut total = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let meta = entry.metadata().unwrap();
        if meta.is_dir() {
            total += dir_bytes(&entry.path());
        } else {
            total += std::os::unix::fs::MetadataExt::blocks(&meta) * 512;
        }
    }
    total
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let root = std::path::PathBuf::from(&args[1]);
    let messages: usize = args[2].parse().unwrap();
    let keys: usize = args[3].parse().unwrap();
    let body: usize = args[4].parse().unwrap();
    let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
    // Zipf-like: the cumulative weights of 1/(i+1), drawn with a fixed LCG.
    let weights: Vec<f64> = (0..keys).map(|i| 1.0 / (i as f64 + 1.0)).collect();
    let total: f64 = weights.iter().sum();
    let mut cumulative = Vec::with_capacity(keys);
    let mut sum = 0.0;
    for w in &weights {
        sum += w / total;
        cumulative.push(sum);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for run in 0..3 {
        let dir = root.join(format!("run{run}"));
        let _ = std::fs::remove_dir_all(&dir);
        let config = StoreConfig { max_offset_map_size: 1 << 30, ..StoreConfig::with_root(&dir) };
        rt.block_on(async {
            let store = MessageStore::open(config, host).unwrap();
            store.set_compaction_topics(Arc::new(|t: &str| t == "Kv"));
            let mut seed: u64 = 0x2545_f491_4f6c_dd1d ^ run;
            let payload = Bytes::from(vec![b'v'; body]);
            for _ in 0..messages {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                let x = (seed >> 11) as f64 / (1u64 << 53) as f64;
                let key = cumulative.partition_point(|c| *c < x).min(keys - 1);
                let msg = StoredMessage {
                    topic: "Kv".into(),
                    body: payload.clone(),
                    born_host: host,
                    store_host: host,
                    properties: format!("KEYS\u{1}key-{key}\u{2}"),
                    ..StoredMessage::default()
                };
                assert!(store.put_message(msg).await.is_ok());
            }
            assert!(store.wait_dispatched(Duration::from_secs(120)));
            let log = dir.join("compaction/compactionLog");
            let before = dir_bytes(&log);
            let t = Instant::now();
            let report = store.compact_now();
            let elapsed = t.elapsed();
            let after = dir_bytes(&log);
            assert_eq!(report.compacted, 1);
            println!(
                "run {run}: {messages} messages x {body} B over {keys} keys: compaction log {:.1} MiB -> {:.2} MiB \
                 (ratio {:.3}) in {:.0} ms = {:.0} MB/s of input",
                before as f64 / 1_048_576.0,
                after as f64 / 1_048_576.0,
                after as f64 / before as f64,
                elapsed.as_secs_f64() * 1e3,
                before as f64 / 1e6 / elapsed.as_secs_f64()
            );
            store.shutdown();
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
}
