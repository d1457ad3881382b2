//! SIGKILL of a slave mid-stream: a child process (this same binary) runs the slave store and
//! its HA client against a master in this process; the master writes while the child is killed
//! at a random moment. The parent reopens the slave's directory (crash recovery), replicates
//! from its recovered offset, and checks the CommitLog files are the master's byte for byte
//! and the ConsumeQueues equal. `FERROMQ_HA_KILL_SEED` replays a run,
//! `FERROMQ_HA_KILL_ROUNDS` sets the repetitions.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use ferromq_store::FlushDiskType;

const CHILD_DIR: &str = "FERROMQ_HA_KILL_CHILD_DIR";
const CHILD_MASTER: &str = "FERROMQ_HA_KILL_CHILD_MASTER";

/// The child: a slave replicating until it is killed.
fn child(dir: &str, master: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        let store = open_store(Path::new(dir), FlushDiskType::AsyncFlush);
        let client = start_slave(&store, master.parse().expect("master address"), ha_config());
        wait_until("connected", Duration::from_secs(10), || client.is_connected()).await;
        println!("READY {}", store.max_phy_offset());
        loop {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    });
}

/// xorshift64*: a seeded generator without a dependency.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

fn main() {
    if let (Ok(dir), Ok(master)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_MASTER)) {
        child(&dir, &master);
        return;
    }
    let seed = std::env::var("FERROMQ_HA_KILL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1
    });
    let rounds: u32 = std::env::var("FERROMQ_HA_KILL_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    println!("slave_kill: seed {seed}, {rounds} rounds");
    let mut rng = Rng(seed);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (master, ha) = start_master(mdir.path(), ha_config()).await;
        let mut next = 0u64;
        for round in 0..rounds {
            let mut slave_process = Command::new(std::env::current_exe().unwrap())
                .env(CHILD_DIR, sdir.path())
                .env(CHILD_MASTER, ha.local_addr().to_string())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn the slave");
            let mut ready = String::new();
            BufReader::new(slave_process.stdout.take().unwrap()).read_line(&mut ready).unwrap();
            assert!(ready.starts_with("READY"), "child said {ready:?}");

            let writer = {
                let master = master.clone();
                let from = next;
                tokio::spawn(async move {
                    for chunk in 0..40 {
                        put_range(&master, from + chunk * 20, from + chunk * 20 + 20).await;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                })
            };
            next += 800;
            let kill_after = Duration::from_millis(20 + rng.below(300));
            tokio::time::sleep(kill_after).await;
            slave_process.kill().expect("SIGKILL");
            slave_process.wait().unwrap();
            writer.await.unwrap();

            let slave = open_store(sdir.path(), FlushDiskType::AsyncFlush);
            let recovered = slave.max_phy_offset();
            let client = start_slave(&slave, ha.local_addr(), ha_config());
            wait_caught_up(&master, &slave).await;
            assert_eq!(slave.min_phy_offset(), 0, "the slave resumed its own log");
            let files = assert_commit_logs_identical(&master, &slave);
            assert_consume_queues_equal(&master, &slave);
            println!(
                "round {round}: killed after {kill_after:?}, recovered at {recovered}, caught up to {} ({files} files): ok",
                master.max_phy_offset()
            );
            client.shutdown().await;
            drop(client);
            drop(slave);
        }
        ha.shutdown().await;
    });
    println!("slave_kill: {rounds} passed");
}
