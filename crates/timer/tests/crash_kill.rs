//! Crash test: a child process (this same binary) runs a store and (started after a random
//! delay) a timer wheel, sends timer messages due over the next few seconds (some beyond a
//! small roll window) and prints each acknowledgement; the parent kills it with SIGKILL at a random moment, twice per round
//! (the second child recovers the first one's files), then reopens everything and checks
//! that every acknowledged timer is delivered, at least once and never early.
//! `FERROMQ_TIMER_CRASH_SEED` replays a run, `FERROMQ_TIMER_CRASH_ROUNDS` sets the rounds.

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use ferromq_timer::TimerConfig;

const CHILD_ENV: &str = "FERROMQ_TIMER_CRASH_CHILD_DIR";
const START_ENV: &str = "FERROMQ_TIMER_CRASH_CHILD_START";
const TIMER_DELAY_ENV: &str = "FERROMQ_TIMER_CRASH_CHILD_TIMER_DELAY_MS";
const TOPIC: &str = "KillTopic";

fn config() -> TimerConfig {
    // A 1 s roll window: messages due later than that roll, across the kills too.
    TimerConfig { timer_roll_window_slot: 10, ..timer_config(100) }
}

fn child(dir: &str, start: u64, timer_delay: Duration) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        let root = Path::new(dir);
        let store = open_store(root);
        let config = config();
        // The timer starts late, so a kill may find messages stored but not yet enqueued
        // (only the replay from the checkpoint's queue offset delivers those).
        let timer_started = tokio::time::Instant::now() + timer_delay;
        let mut running = None;
        let mut n = start;
        loop {
            if running.is_none() && tokio::time::Instant::now() >= timer_started {
                running = Some(Running::start(config.clone(), root, &store));
            }
            let deliver = now_ms() + 200 + ((n * 7919) % 2500) as i64;
            put(&store, timer_message(TOPIC, (n % 2) as i32, deliver, &format!("m{n}"), &config)).await;
            println!("ACK {n} {deliver}");
            n += 1;
            if n.is_multiple_of(16) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
}

fn round(seed: u64) -> Result<String, String> {
    let mut rng = Rng(seed | 1);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut acked: HashMap<String, i64> = HashMap::new();
    let mut next = 0u64;
    let mut report = Vec::new();
    for _ in 0..2 {
        let mut child = Command::new(&exe)
            .env(CHILD_ENV, dir.path())
            .env(START_ENV, next.to_string())
            .env(TIMER_DELAY_ENV, rng.below(800).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let reader = std::thread::spawn(move || {
            let mut acks = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut parts = line.split(' ');
                if let (Some("ACK"), Some(n), Some(d)) = (parts.next(), parts.next(), parts.next()) {
                    if let (Ok(n), Ok(d)) = (n.parse::<u64>(), d.parse::<i64>()) {
                        acks.push((n, d));
                    }
                }
            }
            acks
        });
        let kill_at = Duration::from_millis(300 + rng.below(1700));
        std::thread::sleep(kill_at);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let acks = reader.join().map_err(|_| "reader panicked")?;
        report.push(format!("killed after {kill_at:?} with {} acked", acks.len()));
        next = acks.last().map_or(next, |(n, _)| n + 1) + 1_000;
        acked.extend(acks.into_iter().map(|(n, d)| (format!("m{n}"), d)));
    }
    verify(dir.path(), &acked).map(|summary| format!("{}; {summary}", report.join(", ")))
}

fn verify(root: &Path, acked: &HashMap<String, i64>) -> Result<String, String> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        let store = open_store(root);
        let running = Running::start(config(), root, &store);
        let last_due = acked.values().copied().max().unwrap_or(0);
        let wait = Duration::from_millis((last_due - now_ms()).max(0) as u64) + Duration::from_secs(5);
        let deadline = std::time::Instant::now() + wait;
        let mut seen = HashSet::new();
        let deliveries = loop {
            seen.clear();
            let mut deliveries = 0usize;
            for queue_id in 0..2 {
                for d in read_queue(&store, TOPIC, queue_id) {
                    if d.store_timestamp_ms < d.deliver_ms() {
                        return Err(format!("{} delivered {} ms early", d.uniq, d.deliver_ms() - d.store_timestamp_ms));
                    }
                    deliveries += 1;
                    seen.insert(d.uniq);
                }
            }
            if acked.keys().all(|k| seen.contains(k)) || std::time::Instant::now() >= deadline {
                break deliveries;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        running.stop().await;
        let missing: Vec<&String> = acked.keys().filter(|k| !seen.contains(*k)).collect();
        if !missing.is_empty() {
            let mut sample: Vec<&&String> = missing.iter().take(5).collect();
            sample.sort();
            return Err(format!("{} acknowledged timers never delivered, e.g. {sample:?}", missing.len()));
        }
        Ok(format!("{} acked, all delivered ({} deliveries)", acked.len(), deliveries))
    })
}

fn main() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        let start = std::env::var(START_ENV).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
        let delay = std::env::var(TIMER_DELAY_ENV).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
        child(&dir, start, Duration::from_millis(delay));
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        println!("crash_kill: test");
        return;
    }
    let seed = std::env::var("FERROMQ_TIMER_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    let rounds: u64 = std::env::var("FERROMQ_TIMER_CRASH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    println!("timer crash_kill: seed {seed} (replay with FERROMQ_TIMER_CRASH_SEED={seed}), {rounds} rounds");
    let mut rng = Rng(seed | 1);
    let mut failed = 0;
    for i in 0..rounds {
        let round_seed = rng.next();
        match round(round_seed) {
            Ok(summary) => println!("round {i} (seed {round_seed}): ok: {summary}"),
            Err(e) => {
                failed += 1;
                println!("round {i} (seed {round_seed}): FAILED: {e}");
            }
        }
    }
    println!("timer crash_kill: {} passed, {failed} failed", rounds - failed);
    if failed > 0 {
        std::process::exit(1);
    }
}
