//! Restart time with many consume queues: `queue_restart <queues> <dir> [bulk MiB]` puts 3
//! messages into each of <queues> queues (8 per topic) and, with a bulk size, that many MiB of
//! 1 KiB messages into topic Bulk (the CommitLog recovery re-checks its last three 256 MiB
//! segments at a clean restart), shuts down cleanly, reopens and reports the times. A second run
//! on the same <dir> only reopens. `SEGMENT_MIB` sets the CommitLog segment size (256 by
//! default; a broker's default is 1024).
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferromq_protocol::message::StoredMessage;
use ferromq_store::{MessageStore, PutMessageStatus, StoreConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let queues: usize = args[1].parse().unwrap();
    let root = std::path::PathBuf::from(&args[2]);
    let bulk_mib: usize = args.get(3).map_or(0, |a| a.parse().unwrap());
    let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
    let r2 = root.clone();
    let segment_mib: u64 = std::env::var("SEGMENT_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(256);
    let config =
        move || StoreConfig { mapped_file_size_commit_log: segment_mib * 1024 * 1024, ..StoreConfig::with_root(&r2) };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async move {
        if !root.join("commitlog").exists() {
            let t = Instant::now();
            let store = MessageStore::open(config(), host).unwrap();
            for round in 0..3 {
                for q in 0..queues {
                    let msg = StoredMessage {
                        topic: format!("T{}", q / 8),
                        queue_id: (q % 8) as i32,
                        body: Bytes::from_static(&[b'x'; 1024]),
                        born_host: host,
                        store_host: host,
                        ..StoredMessage::default()
                    };
                    assert_eq!(store.put_message(msg).await.status, PutMessageStatus::PutOk, "round {round}");
                }
            }
            for i in 0..bulk_mib * 1024 {
                let msg = StoredMessage {
                    topic: "Bulk".to_owned(),
                    queue_id: (i % 8) as i32,
                    body: Bytes::from_static(&[b'x'; 1024]),
                    born_host: host,
                    store_host: host,
                    ..StoredMessage::default()
                };
                assert_eq!(store.put_message(msg).await.status, PutMessageStatus::PutOk, "bulk {i}");
            }
            let last = format!("T{}", (queues - 1) / 8);
            while store.max_offset_in_queue(&last, ((queues - 1) % 8) as i32) < 3 || store.dispatch_behind_bytes() > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            println!("seeded {queues} queues in {:?}", t.elapsed());
            let t = Instant::now();
            store.shutdown();
            println!("shutdown {:?}", t.elapsed());
        }
        let t = Instant::now();
        let store = MessageStore::open(config(), host).unwrap();
        println!("reopened in {:?}", t.elapsed());
        store.shutdown();
    });
}
