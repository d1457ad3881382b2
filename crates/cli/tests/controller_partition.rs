//! Controller mode under network partitions, as real processes on a private network of Linux
//! network namespaces (`ferromq_testkit::netns`): the name server and three `ferromq
//! controller`s in the hub (10.77.0.1), three `ferromq broker`s of one broker set in controller
//! mode with `allAckInSyncStateSet=true`, each on a host of its own (10.77.0.11-13). Links are
//! cut with blackhole routes while every process keeps running.
//!
//! - The master cut from everyone (controllers, name server, replicas) while a client on its
//!   own host keeps sending to it: a replica of the SyncStateSet becomes master, the isolated
//!   one acknowledges no write sent after that, every write acknowledged anywhere is on the new
//!   master, and once the network heals the old master comes back as a replica whose CommitLog
//!   is byte-for-byte the new master's (its lone tail cut).
//! - The master cut from its replicas only (it still reaches the controllers): no election; it
//!   shrinks the SyncStateSet to itself after `haMaxTimeSlaveNotCatchup` and goes on
//!   acknowledging; once healed the replicas catch up, rejoin the set and hold its CommitLog.
//!
//! Needs root and iproute2 (`compat/setup.sh` installs `ip` when missing). `FERROMQ_TEST_LOGS=1`
//! shows the servers' output.

#![cfg(target_os = "linux")]

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::controller::{
    all_on, caught_up_as_replica, max_offset, replica_info, same_commit_log, send, wait_for, Proc, T,
};
use ferromq_protocol::header::SendMessageResponseHeader;
use ferromq_protocol::message::decode_offset_msg_id;
use ferromq_protocol::{response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::netns::{Network, Node};

const NAMESRV_PORT: u16 = 9876;
const BROKER_PORT: u16 = 10911;

/// A message body and the CommitLog offset its acknowledgement gave.
type Acked = Arc<Mutex<Vec<(String, i64)>>>;

/// The processes on `net`, killed before the network goes.
struct Cluster {
    controllers: Vec<String>,
    servers: Vec<Proc>,
    brokers: Vec<Proc>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for p in self.brokers.iter_mut().chain(self.servers.iter_mut()) {
            p.kill();
        }
    }
}

/// Starts the name server, three controllers and three brokers (`broker_conf`: more lines)
/// on `net`; the calling thread is in the hub.
fn cluster(net: &Network, dir: &Path, broker_conf: &str) -> Cluster {
    let hub = Network::ip_of(Node::Hub);
    let namesrv = format!("{hub}:{NAMESRV_PORT}");
    let proc = |name: String, node: Node, port: u16, args: &'static [&'static str], conf: String| Proc {
        name,
        host: Network::ip_of(node),
        netns: Some(net.name(node).to_owned()),
        port,
        conf,
        dir: dir.to_owned(),
        args,
        process: None,
    };
    let mut servers = vec![proc(
        "namesrv".into(),
        Node::Hub,
        NAMESRV_PORT,
        &["namesrv"],
        format!(
            "listenPort={NAMESRV_PORT}\nbindAddress={hub}\nkvConfigPath={}\nconfigStorePath={}\n",
            dir.join("kvConfig.json").display(),
            dir.join("namesrv.properties").display()
        ),
    )];
    let ports = [9878u16, 9879, 9880];
    let peers: Vec<String> = ports.iter().enumerate().map(|(i, p)| format!("n{i}-{hub}:{p}")).collect();
    for (i, port) in ports.into_iter().enumerate() {
        servers.push(proc(
            format!("n{i}"),
            Node::Hub,
            port,
            &["controller"],
            format!(
                "controllerDLegerGroup=g1\ncontrollerDLegerPeers={}\ncontrollerDLegerSelfId=n{i}\n\
                 controllerStorePath={}\nscanInactiveMasterInterval=300\nscanNotActiveBrokerInterval=300\n\
                 controllerHeartBeatTimeoutMills=3000\nconfigStorePath={}\n",
                peers.join(";"),
                dir.join(format!("ctrl-n{i}")).display(),
                dir.join(format!("n{i}.properties")).display(),
            ),
        ));
    }
    for s in &mut servers {
        s.start();
    }
    let controllers: Vec<String> = ports.iter().map(|p| format!("{hub}:{p}")).collect();
    let mut brokers: Vec<Proc> = (0..3)
        .map(|i| {
            let ip = Network::ip_of(Node::Host(i));
            let name = format!("b{i}");
            let store = dir.join(format!("store-{name}"));
            proc(
                name,
                Node::Host(i),
                BROKER_PORT,
                &["broker"],
                format!(
                    "brokerClusterName=PartitionCluster\nbrokerName={}\nlistenPort={BROKER_PORT}\n\
                     bindAddress={ip}\nbrokerIP1={ip}\nbrokerIP2={ip}\nnamesrvAddr={namesrv}\n\
                     storePathRootDir={}\nenableControllerMode=true\ncontrollerAddr={}\n\
                     allAckInSyncStateSet=true\ncontrollerHeartBeatTimeoutMills=3000\n\
                     brokerHeartbeatInterval=300\nsyncBrokerMetadataPeriod=1000\ncheckSyncStateSetPeriod=1000\n\
                     haSendHeartbeatInterval=500\nmapedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\n\
                     registerNameServerPeriod=10000\nslaveTimeout=2000\n{broker_conf}",
                    common::controller::BROKER_NAME,
                    store.display(),
                    controllers.join(";"),
                ),
            )
        })
        .collect();
    for b in &mut brokers {
        b.start();
    }
    Cluster { controllers, servers, brokers }
}

/// Runs `body` on a thread of the hub, with a Tokio runtime whose threads are there too.
fn in_hub(net: &Network, body: impl AsyncFnOnce() + Send) {
    std::thread::scope(|s| {
        let hub = s.spawn(|| {
            net.enter(Node::Hub);
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            runtime.block_on(body());
        });
        if let Err(panic) = hub.join() {
            std::panic::resume_unwind(panic);
        }
    });
}

/// The broker set's master, once all three are in its SyncStateSet and it takes writes.
async fn full_set(client: &RemotingClient, controllers: &[String]) -> String {
    let (master, _) = wait_for("a master with a full SyncStateSet", Duration::from_secs(60), async || {
        replica_info(client, controllers).await.filter(|(_, set)| set.len() == 3)
    })
    .await;
    wait_for("the master to take writes", Duration::from_secs(20), async || {
        let r = client.invoke(&master, send("warmup"), T).await.ok()?;
        (r.code == response_code::SUCCESS).then_some(())
    })
    .await;
    master
}

/// `body` and its offset when `answer` acknowledges it.
fn acked(body: String, answer: &RemotingCommand) -> Option<(String, i64)> {
    (answer.code == response_code::SUCCESS).then(|| {
        let h: SendMessageResponseHeader = answer.decode_header().unwrap();
        (body, decode_offset_msg_id(&h.msg_id).unwrap().1)
    })
}

/// Producers sending one message after another to `master` until `stop`, each keeping what
/// was acknowledged; a send that fails is followed by the next after a short pause.
fn load(
    client: &Arc<RemotingClient>,
    master: &str,
    stop: &Arc<AtomicBool>,
    tag: &str,
) -> (Acked, Vec<tokio::task::JoinHandle<()>>) {
    let acked_all: Acked = Arc::default();
    let tasks = (0..4)
        .map(|s| {
            let (client, master, stop, out) = (client.clone(), master.to_owned(), stop.clone(), acked_all.clone());
            let tag = format!("{tag}{s}");
            tokio::spawn(async move {
                for i in 0u64.. {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let body = format!("{tag}-{i}");
                    match client.invoke(&master, send(&body), Duration::from_secs(5)).await {
                        Ok(r) => match acked(body, &r) {
                            Some(a) => out.lock().unwrap().push(a),
                            None => tokio::time::sleep(Duration::from_millis(50)).await,
                        },
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                }
            })
        })
        .collect();
    (acked_all, tasks)
}

/// A client on `netns` sending to `master` one message after another until `stop`: each body,
/// when it was sent, and the offset it was acknowledged at.
type Sent = Arc<Mutex<Vec<(String, Instant, Option<i64>)>>>;

fn client_in(netns: String, master: String, stop: Arc<AtomicBool>) -> (Sent, std::thread::JoinHandle<()>) {
    let sent: Sent = Arc::default();
    let out = sent.clone();
    let thread = std::thread::spawn(move || {
        ferromq_testkit::netns::enter(&netns);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let client = RemotingClient::new(ClientConfig::default());
            for i in 0u64.. {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                let (body, at) = (format!("local-{i}"), Instant::now());
                let answer = client.invoke(&master, send(&body), Duration::from_secs(5)).await;
                let offset = answer.ok().and_then(|r| acked(body.clone(), &r)).map(|(_, o)| o);
                out.lock().unwrap().push((body, at, offset));
                if offset.is_none() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            client.shutdown().await;
        });
    });
    (sent, thread)
}

/// Stops the tasks of [`load`] and waits for them.
async fn stop_load(stop: &AtomicBool, tasks: Vec<tokio::task::JoinHandle<()>>) {
    stop.store(true, Ordering::Release);
    for t in tasks {
        t.await.unwrap();
    }
}

#[test]
fn an_isolated_master_is_fenced_while_a_replica_takes_over() {
    let net = Network::new(3);
    let dir = tempfile::tempdir().unwrap();
    in_hub(&net, async || {
        // A short catch-up limit: the isolated master soon tries to drop its replicas from the
        // set, which it must not manage without the controllers.
        let mut c = cluster(&net, dir.path(), "haMaxTimeSlaveNotCatchup=3000\n");
        let client = Arc::new(RemotingClient::new(ClientConfig::default()));
        let controllers = c.controllers.clone();
        let addrs: Vec<String> = c.brokers.iter().map(Proc::addr).collect();
        let old_master = full_set(&client, &controllers).await;
        let old = addrs.iter().position(|a| *a == old_master).expect("one of ours");

        // Load from the hub, and from a client on the master's own host, which the partition
        // leaves connected to it.
        let stop = Arc::new(AtomicBool::new(false));
        let (hub_acked, hub_tasks) = load(&client, &old_master, &stop, "hub");
        let local_stop = Arc::new(AtomicBool::new(false));
        let (local, local_thread) =
            client_in(net.name(Node::Host(old)).to_owned(), old_master.clone(), local_stop.clone());
        tokio::time::sleep(Duration::from_millis(1500)).await;

        let cut_at = Instant::now();
        net.cut(Node::Host(old), Node::Hub);
        for other in (0..3).filter(|i| *i != old) {
            net.cut(Node::Host(old), Node::Host(other));
        }
        let new_master = wait_for("a new master", Duration::from_secs(60), async || {
            replica_info(&client, &controllers).await.map(|(m, _)| m).filter(|m| *m != old_master)
        })
        .await;
        let elected_at = Instant::now();
        wait_for("the first acknowledged send on the new master", Duration::from_secs(60), async || {
            let r = client.invoke(&new_master, send("new-epoch"), T).await.ok()?;
            (r.code == response_code::SUCCESS).then_some(())
        })
        .await;
        println!("failover: partition to the first acknowledged send on the new master in {:?}", cut_at.elapsed());
        stop_load(&stop, hub_tasks).await;
        let mut after = Vec::new();
        for i in 0..20 {
            let body = format!("after-{i}");
            let r = client.invoke(&new_master, send(&body), T).await.unwrap();
            after.push(acked(body, &r).unwrap_or_else(|| panic!("the new master refused a write: {:?}", r.remark)));
        }
        // The local client goes on for longer than a send's timeout and the catch-up limit.
        tokio::time::sleep(Duration::from_secs(8)).await;
        local_stop.store(true, Ordering::Release);
        while !local_thread.is_finished() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        local_thread.join().unwrap();
        let local = local.lock().unwrap().clone();
        // It wrote through before the cut, so what it is refused later is the fence's doing.
        assert!(
            local.iter().any(|(_, at, offset)| *at < cut_at && offset.is_some()),
            "the local client had no write acknowledged before the cut: {local:?}"
        );
        let fenced: Vec<_> = local.iter().filter(|(_, at, _)| *at > elected_at).collect();
        let acked_alone: Vec<_> = fenced.iter().filter(|(_, _, offset)| offset.is_some()).collect();
        println!(
            "local client: {} sends, {} after the election, {} of them acknowledged",
            local.len(),
            fenced.len(),
            acked_alone.len()
        );
        assert!(
            acked_alone.is_empty(),
            "the isolated old master acknowledged writes after the election: {acked_alone:?}"
        );

        // Every write acknowledged before, by either master, is on the new one.
        let mut acknowledged = hub_acked.lock().unwrap().clone();
        assert!(acknowledged.len() > 20, "the load ran ({} acks)", acknowledged.len());
        acknowledged.extend(after);
        acknowledged.extend(local.iter().filter_map(|(body, _, offset)| Some((body.clone(), (*offset)?))));
        all_on(&client, &new_master, &acknowledged).await;

        // The network heals: the old master learns the new epoch, becomes a replica and cuts
        // what it wrote alone.
        net.heal(Node::Host(old), Node::Hub);
        for other in (0..3).filter(|i| *i != old) {
            net.heal(Node::Host(old), Node::Host(other));
        }
        let end = max_offset(&client, &new_master).await.unwrap();
        caught_up_as_replica(&client, &addrs[old], end).await;
        let new_idx = addrs.iter().position(|a| *a == new_master).unwrap();
        for b in (0..3).filter(|i| *i != new_idx) {
            same_commit_log(&c.brokers[new_idx], &c.brokers[b], end);
        }
        let (_, set) = wait_for("the old master back in the SyncStateSet", Duration::from_secs(30), async || {
            replica_info(&client, &controllers).await.filter(|(m, set)| *m == new_master && set.len() == 3)
        })
        .await;
        assert_eq!(set.len(), 3);
        client.shutdown().await;
        c.brokers.iter_mut().for_each(Proc::kill);
    });
}

#[test]
fn a_master_cut_from_its_replicas_shrinks_the_set_and_keeps_writing() {
    let net = Network::new(3);
    let dir = tempfile::tempdir().unwrap();
    in_hub(&net, async || {
        let mut c = cluster(&net, dir.path(), "haMaxTimeSlaveNotCatchup=4000\n");
        let client = Arc::new(RemotingClient::new(ClientConfig::default()));
        let controllers = c.controllers.clone();
        let addrs: Vec<String> = c.brokers.iter().map(Proc::addr).collect();
        let master = full_set(&client, &controllers).await;
        let m = addrs.iter().position(|a| *a == master).expect("one of ours");
        let replicas: Vec<usize> = (0..3).filter(|i| *i != m).collect();

        let stop = Arc::new(AtomicBool::new(false));
        let (acked_all, tasks) = load(&client, &master, &stop, "load");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        for r in &replicas {
            net.cut(Node::Host(m), Node::Host(*r));
        }
        // The master still heartbeats to the controllers: no election, and the set shrinks to
        // the master alone once its replicas have been behind for haMaxTimeSlaveNotCatchup.
        let cut_at = Instant::now();
        let (_, set) = wait_for("the SyncStateSet shrunk to the master", Duration::from_secs(60), async || {
            replica_info(&client, &controllers).await.filter(|(_, set)| set.len() == 1)
        })
        .await;
        println!("SyncStateSet {set:?} {:?} after the cut", cut_at.elapsed());
        let (now_master, _) = replica_info(&client, &controllers).await.unwrap();
        assert_eq!(now_master, master, "no election while the master reaches the controllers");
        let shrunk = acked_all.lock().unwrap().len();
        wait_for("writes acknowledged by the master alone", Duration::from_secs(30), async || {
            (acked_all.lock().unwrap().len() > shrunk + 20).then_some(())
        })
        .await;

        // Healed: the replicas catch up and rejoin; the master never changed.
        for r in &replicas {
            net.heal(Node::Host(m), Node::Host(*r));
        }
        wait_for("the replicas back in the SyncStateSet", Duration::from_secs(60), async || {
            replica_info(&client, &controllers).await.filter(|(_, set)| set.len() == 3)
        })
        .await;
        let healed = acked_all.lock().unwrap().len();
        wait_for("writes acknowledged by all three again", Duration::from_secs(30), async || {
            (acked_all.lock().unwrap().len() > healed + 20).then_some(())
        })
        .await;
        stop_load(&stop, tasks).await;
        let (now_master, _) = replica_info(&client, &controllers).await.unwrap();
        assert_eq!(now_master, master, "the master kept its role");

        let acknowledged = acked_all.lock().unwrap().clone();
        all_on(&client, &master, &acknowledged).await;
        let end = max_offset(&client, &master).await.unwrap();
        for r in &replicas {
            wait_for("the replica caught up", Duration::from_secs(30), async || {
                (max_offset(&client, &addrs[*r]).await? == end).then_some(())
            })
            .await;
            same_commit_log(&c.brokers[m], &c.brokers[*r], end);
        }
        client.shutdown().await;
        c.brokers.iter_mut().for_each(Proc::kill);
    });
}
