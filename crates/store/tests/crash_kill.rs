//! Crash test: a child process (this same binary) appends numbered messages and prints each
//! acknowledgement; the parent kills it with SIGKILL at a random moment, reopens the store and
//! checks it. Under SYNC_FLUSH every acknowledged message must be there; under ASYNC_FLUSH the
//! store must hold a consistent prefix (no gap, no torn record). Repeated with a printed seed;
//! `FERROMQ_CRASH_SEED` replays a run, `FERROMQ_CRASH_ROUNDS` sets the repetitions.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferromq_protocol::message::StoredMessage;
use ferromq_store::{FlushDiskType, GetMessageStatus, MessageStore, PutMessageStatus, StoreConfig};

const CHILD_ENV: &str = "FERROMQ_CRASH_CHILD_DIR";
const FLUSH_ENV: &str = "FERROMQ_CRASH_CHILD_FLUSH";
const START_ENV: &str = "FERROMQ_CRASH_CHILD_START";
const POOL_ENV: &str = "FERROMQ_CRASH_CHILD_POOL";
const TOPIC: &str = "Crash";

fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().expect("address")
}

fn config(root: &Path, flush: FlushDiskType) -> StoreConfig {
    StoreConfig {
        transient_store_pool_enable: std::env::var(POOL_ENV).is_ok(),
        transient_store_pool_size: 2,
        mapped_file_size_commit_log: 64 * 1024,
        mapped_file_size_consume_queue: 20 * 512,
        flush_disk_type: flush,
        flush_interval_consume_queue_ms: 20,
        flush_interval_commit_log_ms: 10,
        max_hash_slot_num: 1024,
        max_index_num: 4096,
        ..StoreConfig::with_root(root)
    }
}

fn body(n: u64) -> String {
    // Sizes vary so records straddle segment ends at different places.
    format!("{n}:{}", "p".repeat((n as usize * 7919) % 700))
}

fn child(dir: &str, flush: FlushDiskType, start: u64) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        let store = MessageStore::open(config(Path::new(dir), flush), host()).expect("open store");
        let mut n = start;
        loop {
            let msg = StoredMessage {
                topic: TOPIC.into(),
                queue_id: (n % 2) as i32,
                body: Bytes::from(body(n)),
                born_host: host(),
                store_host: host(),
                properties: format!("KEYS\u{1}key-{n}\u{2}"),
                ..StoredMessage::default()
            };
            let r = store.put_message(msg).await;
            assert_eq!(r.status, PutMessageStatus::PutOk, "{r:?}");
            println!("ACK {n}");
            n += 1;
        }
    });
}

/// xorshift64*: a seeded generator without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn read_queue(store: &MessageStore, queue_id: i32) -> Vec<u64> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let r = store.get_message(TOPIC, queue_id, offset, 32, 1 << 20, None);
        if r.status != GetMessageStatus::Found {
            return out;
        }
        for m in &r.messages {
            let (decoded, _) = StoredMessage::decode(m).expect("no torn record is visible");
            decoded.verify_body_crc().expect("body intact");
            let text = String::from_utf8(decoded.body.to_vec()).expect("utf8 body");
            let n: u64 = text.split(':').next().and_then(|s| s.parse().ok()).expect("numbered body");
            assert_eq!(text, body(n), "body of message {n}");
            out.push(n);
        }
        offset = r.next_begin_offset;
    }
}

fn round(seed: u64, flush: FlushDiskType, pool: bool) -> Result<String, String> {
    let mut rng = Rng(seed | 1);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let flush_name = if flush == FlushDiskType::SyncFlush { "SYNC_FLUSH" } else { "ASYNC_FLUSH" };
    let mode_name = if pool { format!("{flush_name}+transient pool") } else { flush_name.to_owned() };
    let mut next = 0u64;
    let mut report = Vec::new();
    // Two crashes per round: the second run recovers the first one's files, appends after
    // them and is killed too.
    for _ in 0..2 {
        let mut command = Command::new(&exe);
        if pool {
            // Appends staged in the pool's memory are lost with the process: only a
            // consistent prefix is promised, as under ASYNC_FLUSH.
            command.env(POOL_ENV, "1");
        }
        let mut child = command
            .env(CHILD_ENV, dir.path())
            .env(FLUSH_ENV, flush_name)
            .env(START_ENV, next.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let kill_at = Duration::from_millis(50 + rng.next() % 400);
        let started = Instant::now();
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = line.strip_prefix("ACK ").and_then(|n| n.parse::<u64>().ok()) {
                    last = Some(n);
                }
            }
            last
        });
        std::thread::sleep(kill_at);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let killed_after = started.elapsed();
        let last_ack = reader.join().map_err(|_| "reader panicked")?;

        let store = MessageStore::open(config(dir.path(), flush), host()).map_err(|e| e.to_string())?;
        if !store.wait_dispatched(Duration::from_secs(20)) {
            return Err("dispatch did not catch up after recovery".into());
        }
        let mut seen: Vec<u64> = read_queue(&store, 0);
        seen.extend(read_queue(&store, 1));
        store.shutdown();
        drop(store);
        seen.sort_unstable();
        seen.dedup();
        // Every number below the largest recovered one must be there: no gap, so the store
        // holds a prefix of what was written.
        if let Some(&max) = seen.last() {
            if seen.len() as u64 != max + 1 {
                let missing = (0..=max).find(|n| seen.binary_search(n).is_err());
                return Err(format!("gap: message {missing:?} missing below {max}"));
            }
        }
        let max_seen = seen.last().copied();
        if flush == FlushDiskType::SyncFlush && !pool {
            if let Some(acked) = last_ack {
                if max_seen.is_none_or(|m| m < acked) {
                    return Err(format!("acknowledged message {acked} lost (max recovered {max_seen:?})"));
                }
            }
        }
        report.push(format!("acked {last_ack:?}, recovered {} after {killed_after:?}", seen.len()));
        next = max_seen.map_or(0, |m| m + 1);
    }
    Ok(format!("{mode_name}: {}", report.join("; ")))
}

fn main() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        let flush = if std::env::var(FLUSH_ENV).as_deref() == Ok("SYNC_FLUSH") {
            FlushDiskType::SyncFlush
        } else {
            FlushDiskType::AsyncFlush
        };
        let start = std::env::var(START_ENV).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
        child(&dir, flush, start);
        return;
    }
    // `cargo test -- --list` and filters: this binary has one test, "crash_kill".
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        println!("crash_kill: test");
        return;
    }
    let seed = std::env::var("FERROMQ_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    let rounds: u64 = std::env::var("FERROMQ_CRASH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(6);
    println!("crash_kill: seed {seed} (replay with FERROMQ_CRASH_SEED={seed}), {rounds} rounds");
    let mut rng = Rng(seed | 1);
    let (mut passed, mut failed) = (0, 0);
    for i in 0..rounds {
        let (flush, pool) = match i % 3 {
            0 => (FlushDiskType::SyncFlush, false),
            1 => (FlushDiskType::AsyncFlush, false),
            _ => (FlushDiskType::AsyncFlush, true),
        };
        let round_seed = rng.next();
        match round(round_seed, flush, pool) {
            Ok(summary) => {
                passed += 1;
                println!("round {i} (seed {round_seed}): ok: {summary}");
            }
            Err(e) => {
                failed += 1;
                println!("round {i} (seed {round_seed}): FAILED: {e}");
            }
        }
    }
    println!("crash_kill: {passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
