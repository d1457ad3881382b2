//! Controller mode end to end, as real processes: a name server, three `ferromq controller`s
//! and a broker set of three `ferromq broker`s with `enableControllerMode=true` and
//! `allAckInSyncStateSet=true`. The controllers elect a master, the other two replicate
//! (AutoSwitchHA) and join the SyncStateSet. The master is SIGKILLed under SYNC load: a member
//! of the SyncStateSet becomes master with no person involved, every acknowledged message is
//! on it (once), producing resumes there, and the old master, started again on its store,
//! comes back as a replica whose CommitLog is byte-for-byte the new master's; timer messages
//! are each delivered once across the failover (the replicas adopt the master's timer
//! progress). A replica that
//! stays connected but stops acknowledging (SIGSTOP) leaves the SyncStateSet after
//! `haMaxTimeSlaveNotCatchup`, writes go on without it, and it rejoins once caught up.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::cluster::{port_away_from, start_namesrv, tail};
use common::controller::{
    all_on, caught_up_as_replica, commit_log, max_offset, replica_info, runtime_info, same_commit_log, send,
    send_timer, timer_checkpoint, wait_for, Proc, BROKER_NAME, T, TOPIC,
};
use ferromq_protocol::header::SendMessageResponseHeader;
use ferromq_protocol::message::decode_offset_msg_id;
use ferromq_protocol::{request_code, response_code, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};
use ferromq_testkit::{free_broker_port, free_port, ChildProcess};

const BIN: &str = env!("CARGO_BIN_EXE_ferromq");
/// Timer messages the SIGKILL test sends, half due before the kill and half after.
const TIMERS: usize = 20;
const TIMER_TOPIC: &str = "FailoverTimer";

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

struct Cluster {
    ns: String,
    controllers: Vec<String>,
    /// The controllers' `/metrics` ports.
    metrics_ports: Vec<u16>,
    ctrl: Vec<Proc>,
    brokers: Vec<Proc>,
    _ns_proc: ChildProcess,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for p in self.brokers.iter_mut().chain(self.ctrl.iter_mut()) {
            p.kill();
        }
        // A failed test shows what the brokers did: their logs go with the temporary directory.
        if std::thread::panicking() {
            for p in &self.brokers {
                eprintln!("--- {} ({}) log tail:\n{}", p.name, p.addr(), tail(&p.log(), 80));
            }
        }
    }
}

/// A name server and three controllers, started; three brokers in controller mode, not
/// started. `controller_addr(i)` is broker `i`'s `controllerAddr` (the controllers, or relays
/// in front of them).
fn cluster(dir: &Path, controller_addr: impl Fn(usize, &[String]) -> String) -> Cluster {
    let (ns_proc, ns_port) = start_namesrv(dir);
    let ns = format!("127.0.0.1:{ns_port}");
    let mut taken = vec![ns_port];
    let ctrl_ports: Vec<u16> = (0..3)
        .map(|_| {
            let p = port_away_from(&taken, free_port);
            taken.push(p);
            p
        })
        .collect();
    let peers: Vec<String> = ctrl_ports.iter().enumerate().map(|(i, p)| format!("n{i}-127.0.0.1:{p}")).collect();
    let controllers: Vec<String> = ctrl_ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let metrics_ports: Vec<u16> = (0..3)
        .map(|_| {
            let p = port_away_from(&taken, free_port);
            taken.push(p);
            p
        })
        .collect();
    let mut ctrl: Vec<Proc> = (0..3)
        .map(|i| Proc {
            name: format!("n{i}"),
            host: "127.0.0.1".into(),
            netns: None,
            port: ctrl_ports[i],
            conf: format!(
                "controllerDLegerGroup=g1\ncontrollerDLegerPeers={}\ncontrollerDLegerSelfId=n{i}\n\
                 controllerStorePath={}\nscanInactiveMasterInterval=300\nscanNotActiveBrokerInterval=300\n\
                 controllerHeartBeatTimeoutMills=3000\nconfigStorePath={}\n\
                 metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\nmetricsPromExporterPort={}\n",
                peers.join(";"),
                dir.join(format!("ctrl-n{i}")).display(),
                dir.join(format!("n{i}.properties")).display(),
                metrics_ports[i]
            ),
            dir: dir.to_owned(),
            args: &["controller"],
            process: None,
        })
        .collect();
    for c in &mut ctrl {
        c.start();
    }
    let brokers: Vec<Proc> = (0..3)
        .map(|i| {
            let port = port_away_from(&taken, free_broker_port);
            taken.push(port);
            let name = format!("b{i}");
            Proc {
                conf: format!(
                    "brokerClusterName=FailoverCluster\nbrokerName={BROKER_NAME}\nlistenPort={port}\n\
                     brokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\nnamesrvAddr={ns}\nstorePathRootDir={}\n\
                     enableControllerMode=true\ncontrollerAddr={}\nallAckInSyncStateSet=true\n\
                     controllerHeartBeatTimeoutMills=3000\nbrokerHeartbeatInterval=300\n\
                     syncBrokerMetadataPeriod=1000\ncheckSyncStateSetPeriod=1000\nhaSendHeartbeatInterval=500\n\
                     mapedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\nregisterNameServerPeriod=10000\n\
                     slaveTimeout=2000\nslaveSyncInterval=1000\n",
                    dir.join(format!("store-{name}")).display(),
                    controller_addr(i, &controllers),
                ),
                name,
                host: "127.0.0.1".into(),
                netns: None,
                port,
                dir: dir.to_owned(),
                args: &["broker"],
                process: None,
            }
        })
        .collect();
    Cluster { ns, controllers, metrics_ports, ctrl, brokers, _ns_proc: ns_proc }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_master_is_killed_under_sync_load_and_a_replica_takes_over_losing_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), |_, controllers| controllers.join(";"));
    for b in &mut c.brokers {
        b.start();
    }
    let (ns, controllers) = (c.ns.clone(), c.controllers.clone());
    let brokers = &mut c.brokers;
    let client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let addrs: Vec<String> = brokers.iter().map(Proc::addr).collect();

    // A master is elected and both replicas join its SyncStateSet.
    let (first_master, _) = wait_for("a master with a full SyncStateSet", Duration::from_secs(60), async || {
        replica_info(&client, &controllers).await.filter(|(_, set)| set.len() == 3)
    })
    .await;
    // The dashboard's controller page shows the group and the full SyncStateSet.
    let dashboard_port = free_port();
    let _dashboard = ChildProcess(
        std::process::Command::new(BIN)
            .args(["dashboard", "-n", &ns, "--bind", "127.0.0.1", "--port", &dashboard_port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("ferromq dashboard"),
    );
    let state = wait_for("the controller page to show three in-sync replicas", Duration::from_secs(30), async || {
        let state = dashboard_get(dashboard_port, "/controller/state.query").await?;
        let in_sync =
            state["data"]["syncStateData"]["replicasInfoTable"][BROKER_NAME]["inSyncReplicas"].as_array()?.len();
        (in_sync == 3).then_some(state)
    })
    .await;
    assert_eq!(state["data"]["enabled"], true, "{state}");
    assert!(state["data"]["controllers"].as_array().unwrap().iter().any(|c| c["isLeader"] == true), "{state}");
    // Each controller's /metrics: one leader, and on it the three live replicas of the set.
    let metrics_ports = c.metrics_ports.clone();
    let scraped = wait_for("the controllers' metrics", Duration::from_secs(20), async || {
        let mut texts = Vec::new();
        for port in &metrics_ports {
            texts.push(http_get(*port, "/metrics").await?);
        }
        let leaders: Vec<&String> = texts.iter().filter(|t| metric(t, "role", &[]) == Some(1.0)).collect();
        let set = format!("broker_set=\"{BROKER_NAME}\"");
        let alive =
            leaders.first().and_then(|t| metric(t, "active_broker_num", &[&set, "cluster=\"FailoverCluster\""]));
        (leaders.len() == 1 && alive == Some(3.0)).then_some(texts)
    })
    .await;
    assert!(scraped
        .iter()
        .all(|t| t.contains("dledger_disk_usage_bytes") && t.contains("rocketmq_rpc_latency_milliseconds_bucket")));
    let killed = addrs.iter().position(|a| *a == first_master).expect("the master is one of ours");
    wait_for("the master to take writes", Duration::from_secs(20), async || {
        let r = client.invoke(&first_master, send("warmup"), T).await.ok()?;
        (r.code == response_code::SUCCESS).then_some(())
    })
    .await;

    // Timer messages: some due at once (the master delivers them), some due after the
    // failover. The replicas adopt the master's timer progress, so the new master delivers
    // the late ones and not the early ones again.
    let timers_sent = now_ms();
    let late_due = timers_sent + 12_000;
    for i in 0..TIMERS {
        let (body, due) =
            if i % 2 == 0 { (format!("early-{i}"), timers_sent + 1000) } else { (format!("late-{i}"), late_due) };
        let r = client.invoke(&first_master, send_timer(TIMER_TOPIC, &body, due), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }
    let replicas: Vec<usize> = (0..3).filter(|i| *i != killed).collect();
    wait_for("the replicas to adopt the master's timer progress", Duration::from_secs(30), async || {
        replicas
            .iter()
            .all(|r| {
                timer_checkpoint(&brokers[*r].store()).is_some_and(|cp| {
                    cp.master_timer_queue_offset >= TIMERS as i64 && cp.last_read_time_ms > timers_sent + 1000
                })
            })
            .then_some(())
    })
    .await;

    // SYNC load: every acknowledgement means all three hold the message.
    let acked: Arc<Mutex<Vec<(String, i64)>>> = Arc::default();
    let mut senders = tokio::task::JoinSet::new();
    for s in 0..4 {
        let (client, master, acked) = (client.clone(), first_master.clone(), acked.clone());
        senders.spawn(async move {
            for i in 0..1_000_000u64 {
                let body = format!("s{s}-{i}");
                match client.invoke(&master, send(&body), Duration::from_secs(5)).await {
                    Ok(r) if r.code == response_code::SUCCESS => {
                        let h: SendMessageResponseHeader = r.decode_header().unwrap();
                        let (_, offset) = decode_offset_msg_id(&h.msg_id).unwrap();
                        acked.lock().unwrap().push((body, offset));
                    }
                    _ => return,
                }
            }
        });
    }
    // Our client, routed by the name server, produces through the failover: what it is told
    // succeeded is kept, and it succeeds again on the new master after its retries and a
    // route refresh.
    let producer = ferromq_client::Producer::new(
        ferromq_client::ProducerConfig { group: "FailoverProducer".into(), ..Default::default() },
        ferromq_client::ClientConfig::with_namesrv(&ns),
    );
    producer.start().await.unwrap();
    let client_acked: Arc<Mutex<Vec<(String, i64)>>> = Arc::default();
    let client_resumed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let kill_signal = Arc::new(tokio::sync::Notify::new());
    let routed = {
        let (acked, resumed, killed_notice) = (client_acked.clone(), client_resumed.clone(), kill_signal.clone());
        let producer = Arc::new(producer);
        let p = producer.clone();
        let task = tokio::spawn(async move {
            let killed = killed_notice.notified();
            tokio::pin!(killed);
            let mut after_kill = false;
            let deadline = Instant::now() + Duration::from_secs(90);
            for i in 0u64.. {
                if !after_kill && futures_poll_once(&mut killed).await {
                    after_kill = true;
                }
                let body = format!("client-{i}");
                if let Ok(r) = p.send(ferromq_client::Message::new(TOPIC, body.clone().into_bytes())).await {
                    if r.status == ferromq_client::SendStatus::SendOk {
                        let (_, offset) = decode_offset_msg_id(&r.offset_msg_id).unwrap();
                        acked.lock().unwrap().push((body, offset));
                        if after_kill {
                            resumed.store(true, std::sync::atomic::Ordering::Release);
                            return;
                        }
                    }
                } else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                if Instant::now() > deadline {
                    return;
                }
            }
        });
        (task, producer)
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let killed_at = Instant::now();
    brokers[killed].kill();
    kill_signal.notify_one();
    while senders.join_next().await.is_some() {}
    let before = acked.lock().unwrap().clone();
    assert!(before.len() > 20, "the load ran ({} acks)", before.len());

    // A replica of the SyncStateSet is master, and producing resumes on it.
    let new_master = wait_for("a new master", Duration::from_secs(60), async || {
        replica_info(&client, &controllers).await.map(|(m, _)| m).filter(|m| *m != first_master)
    })
    .await;
    wait_for("the first acknowledged send on the new master", Duration::from_secs(60), async || {
        let r = client.invoke(&new_master, send("after-0"), T).await.ok()?;
        (r.code == response_code::SUCCESS).then_some(())
    })
    .await;
    println!("failover: SIGKILL to the first acknowledged send in {:?}", killed_at.elapsed());
    let mut after = Vec::new();
    for i in 1..50 {
        let body = format!("after-{i}");
        let r = client.invoke(&new_master, send(&body), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let h: SendMessageResponseHeader = r.decode_header().unwrap();
        after.push((body, decode_offset_msg_id(&h.msg_id).unwrap().1));
    }

    routed.0.await.unwrap();
    assert!(client_resumed.load(std::sync::atomic::Ordering::Acquire), "our client never produced on the new master");
    routed.1.shutdown().await;
    let client_acked = client_acked.lock().unwrap().clone();

    // Nothing acknowledged is lost, and nothing is there twice.
    let acknowledged: Vec<(String, i64)> = before.iter().chain(&after).chain(&client_acked).cloned().collect();
    all_on(&client, &new_master, &acknowledged).await;
    let pulled =
        ferromq_testkit::pull_messages(&client, &new_master, TOPIC, 0, 0, usize::MAX, Duration::from_secs(3)).await;
    let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
    for m in &pulled {
        *seen.entry(m.body.to_vec()).or_default() += 1;
    }
    // (Our client's own retries may store a message twice when an answer was lost: at least
    // once, as every RocketMQ client. The raw senders never retry, so theirs must be there once.)
    let twice: Vec<_> = seen
        .iter()
        .filter(|(b, n)| **n > 1 && !b.starts_with(b"client-"))
        .map(|(b, _)| String::from_utf8_lossy(b).into_owned())
        .collect();
    assert!(twice.is_empty(), "messages stored twice: {twice:?}");
    for (body, _) in before.iter().chain(&after).chain(&client_acked) {
        assert!(seen.contains_key(body.as_bytes()), "{body} is consumable on the new master");
    }

    // Each timer message delivered once: the early ones by the old master, the late ones by
    // the new one.
    let timers = wait_for("the late timer messages on the new master", Duration::from_secs(60), async || {
        let pulled =
            ferromq_testkit::pull_messages(&client, &new_master, TIMER_TOPIC, 0, 0, usize::MAX, Duration::from_secs(1))
                .await;
        (pulled.len() >= TIMERS && now_ms() > late_due + 2000).then_some(pulled)
    })
    .await;
    let mut delivered: HashMap<Vec<u8>, usize> = HashMap::new();
    for m in &timers {
        *delivered.entry(m.body.to_vec()).or_default() += 1;
    }
    assert_eq!(delivered.len(), TIMERS, "every timer message delivered");
    let again: Vec<_> =
        delivered.iter().filter(|(_, n)| **n > 1).map(|(b, _)| String::from_utf8_lossy(b).into_owned()).collect();
    assert!(again.is_empty(), "timer messages delivered again after the failover: {again:?}");

    // The old master comes back as a replica and ends with the new master's CommitLog.
    brokers[killed].start();
    let end = max_offset(&client, &new_master).await.unwrap();
    wait_for("the old master to catch up as a replica", Duration::from_secs(60), async || {
        (max_offset(&client, &addrs[killed]).await? == end).then_some(())
    })
    .await;
    let info = runtime_info(&client, &addrs[killed]).await.unwrap();
    assert_eq!(info.get("brokerActive").map(String::as_str), Some("false"), "it is a replica now: {info:?}");
    let new_idx = addrs.iter().position(|a| *a == new_master).unwrap();
    let (theirs, ours) = (commit_log(&brokers[new_idx].store(), end), commit_log(&brokers[killed].store(), end));
    assert_eq!(theirs.len(), ours.len());
    let first_diff = theirs.iter().zip(&ours).position(|(a, b)| a != b);
    assert!(first_diff.is_none(), "CommitLogs differ at byte {first_diff:?}:\n{}", tail(&brokers[killed].log(), 30));

    // mqadmin getBrokerEpoch: every replica lists both epochs, the second starting where the
    // new master took over.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferromq"))
        .args(["admin", "-n", &ns, "getBrokerEpoch", "-b", BROKER_NAME])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("#brokerAddr").count(), 3, "{text}");
    assert_eq!(text.matches("#Epoch: EpochEntry{epoch=1, startOffset=0,").count(), 3, "{text}");
    assert_eq!(text.matches(&format!("endOffset={end}}}")).count(), 3, "{text}");

    // The controller leader is SIGKILLed: another controller leads with the same state, the
    // brokers' heartbeats reach it, and nothing changes for them (no election, no lost writes).
    let leader = controller_leader(&client, &controllers).await;
    let leader_idx = controllers.iter().position(|c| *c == leader).expect("a controller of ours");
    c.ctrl[leader_idx].kill();
    let rest: Vec<String> = controllers.iter().filter(|c| **c != leader).cloned().collect();
    wait_for("a new controller leader", Duration::from_secs(30), async || {
        let l = controller_leader(&client, &rest).await;
        (!l.is_empty() && l != leader).then_some(())
    })
    .await;
    // Longer than a heartbeat timeout: the new leader has judged every broker by now.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (master, set) = replica_info(&client, &rest).await.expect("the new leader answers");
    assert_eq!(master, new_master, "the broker set kept its master");
    assert_eq!(set.len(), 3, "and its SyncStateSet");
    for i in 0..20 {
        let r = client.invoke(&new_master, send(&format!("after-leader-change-{i}")), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }

    client.shutdown().await;
}

/// Whether `f` is ready now (polled once, without waiting).
async fn futures_poll_once<F: std::future::Future + Unpin>(f: &mut F) -> bool {
    std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut *f).poll(cx).is_ready())).await
}

/// The controller leader's address, as the first controller that answers names it.
/// The value of the first `name{labels} value` line of a Prometheus text whose labels include
/// every one of `with`.
fn metric(text: &str, name: &str, with: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && with.iter().all(|w| l.contains(w)))
        .find_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse().ok()))
}

/// The body of a GET on 127.0.0.1:`port`, or `None` while nothing answers there.
async fn http_get(port: u16, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.ok()?;
    let body = raw.windows(4).position(|w| w == b"\r\n\r\n").map(|at| &raw[at + 4..])?;
    Some(String::from_utf8_lossy(body).into_owned())
}

/// A GET of the dashboard: its JSON answer, or `None` while it is not up.
async fn dashboard_get(port: u16, path: &str) -> Option<serde_json::Value> {
    serde_json::from_str(&http_get(port, path).await?).ok()
}

async fn controller_leader(client: &RemotingClient, controllers: &[String]) -> String {
    for c in controllers {
        let req = RemotingCommand::request(request_code::CONTROLLER_GET_METADATA_INFO);
        let Ok(r) = client.invoke(c, req, T).await else { continue };
        if let Ok(h) = r.decode_header::<ferromq_protocol::header::GetMetaDataResponseHeader>() {
            if let Some(l) = h.controller_leader_address.filter(|l| !l.is_empty()) {
                return l;
            }
        }
    }
    String::new()
}

/// Sends SIGSTOP or SIGCONT to a process the test started.
fn signal(p: &Proc, sig: &str) {
    let pid = p.process.as_ref().expect("running").0.id().to_string();
    let status = std::process::Command::new("kill").args([sig, &pid]).status().unwrap();
    assert!(status.success(), "kill {sig} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_master_is_fenced_and_truncates_what_it_wrote_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), |_, controllers| controllers.join(";"));
    let client = RemotingClient::new(ClientConfig::default());
    let (controllers, addrs): (Vec<String>, Vec<String>) =
        (c.controllers.clone(), c.brokers.iter().map(Proc::addr).collect());
    for b in &mut c.brokers {
        b.start();
    }
    let (old_master, _) = wait_for("a full SyncStateSet", Duration::from_secs(60), async || {
        replica_info(&client, &controllers).await.filter(|(_, set)| set.len() == 3)
    })
    .await;
    let old = addrs.iter().position(|a| *a == old_master).unwrap();
    wait_for("the master to take writes", Duration::from_secs(20), async || {
        let r = client.invoke(&old_master, send("before"), T).await.ok()?;
        (r.code == response_code::SUCCESS).then_some(())
    })
    .await;

    // The master freezes (a long pause, or a partition from everyone): no heartbeats, no
    // replication. Writes sent to it meanwhile wait in its socket.
    signal(&c.brokers[old], "-STOP");
    let frozen_at = Instant::now();
    let stale_client = Arc::new(RemotingClient::new(ClientConfig::default()));
    let mut stale_sends = tokio::task::JoinSet::new();
    for i in 0..5 {
        let (client, addr) = (stale_client.clone(), old_master.clone());
        stale_sends
            .spawn(async move { client.invoke(&addr, send(&format!("isolated-{i}")), Duration::from_secs(60)).await });
    }
    let new_master = wait_for("a new master", Duration::from_secs(60), async || {
        replica_info(&client, &controllers).await.map(|(m, _)| m).filter(|m| *m != old_master)
    })
    .await;
    wait_for("a write acknowledged by the new master", Duration::from_secs(60), async || {
        let r = client.invoke(&new_master, send("new-epoch"), T).await.ok()?;
        (r.code == response_code::SUCCESS).then_some(())
    })
    .await;
    println!("failover: SIGSTOP to the first acknowledged send in {:?}", frozen_at.elapsed());

    // It wakes up in the new epoch: whatever it stores alone, it must not acknowledge.
    signal(&c.brokers[old], "-CONT");
    while let Some(sent) = stale_sends.join_next().await {
        if let Ok(r) = sent.unwrap() {
            assert_ne!(r.code, response_code::SUCCESS, "the fenced old master acknowledged a write alone");
        }
    }
    for i in 0..20 {
        let r = client.invoke(&new_master, send(&format!("after-{i}")), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }

    // It learns the new epoch, becomes a replica and cuts what it wrote alone.
    let end = max_offset(&client, &new_master).await.unwrap();
    caught_up_as_replica(&client, &addrs[old], end).await;
    let new_idx = addrs.iter().position(|a| *a == new_master).unwrap();
    same_commit_log(&c.brokers[new_idx], &c.brokers[old], end);
    stale_client.shutdown().await;
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cpp_client_keeps_producing_through_a_failover() {
    const CPP_TOPIC: &str = "FailoverCpp";
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), |_, controllers| controllers.join(";"));
    for b in &mut c.brokers {
        b.start();
    }
    let client = RemotingClient::new(ClientConfig::default());
    let (controllers, addrs): (Vec<String>, Vec<String>) =
        (c.controllers.clone(), c.brokers.iter().map(Proc::addr).collect());
    let (old_master, _) = wait_for("a full SyncStateSet", Duration::from_secs(60), async || {
        replica_info(&client, &controllers).await.filter(|(_, set)| set.len() == 3)
    })
    .await;
    let old = addrs.iter().position(|a| *a == old_master).unwrap();

    // The official C++ client (PyPI `rocketmq`), routed by the name server, sends one message
    // after another; the master is SIGKILLed while it does.
    let home = dir.path().join("cpp-home");
    let ns = c.ns.clone();
    let run = tokio::task::spawn_blocking(move || {
        // A failed send waits 20 ms before the next, as an application backing off would: without
        // it the client burns through its count in connection-refused failures (~6 ms each) before a
        // failover on a loaded machine (three clusters at once under CI) is over and its route poll (every 30 s)
        // has seen the new master. 4,000 sends then last over 80 s if need be.
        let args = [
            "produce",
            "--topic",
            CPP_TOPIC,
            "--group",
            "CppFailover",
            "--count",
            "4000",
            "--send-timeout-ms",
            "1000",
            "--pause-after-failure-ms",
            "20",
        ];
        common::e2e::run_e2e("cpp failover", &home, &args, &ns, 150)
    });
    // Killed once it has stored some hundreds of messages (about 100 KB), with thousands to go.
    let start = max_offset(&client, &old_master).await.unwrap_or(0);
    wait_for("the C++ client to produce", Duration::from_secs(60), async || {
        (max_offset(&client, &old_master).await? > start + 100_000).then_some(())
    })
    .await;
    let killed_at_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    c.brokers[old].kill();
    let (run, problem) = run.await.unwrap();
    assert!(problem.is_none(), "{problem:?}");
    let sent: Vec<(String, i64)> = run
        .events("sent")
        .filter(|e| e.bool("ok") == Some(true))
        .map(|e| (e.str("body").unwrap().to_owned(), e.int("sent_at_ms").unwrap()))
        .collect();
    let failed = run.events("send_failed").count();
    let back_after_ms = sent.iter().map(|(_, at)| *at - killed_at_ms).filter(|d| *d > 0).min();
    println!(
        "C++ client: {} sent, {failed} failed, {:?}; first success {back_after_ms:?} ms after the kill",
        sent.len(),
        run.elapsed
    );
    assert!(sent.iter().any(|(_, at)| *at < killed_at_ms), "it produced before the kill");
    assert!(sent.iter().any(|(_, at)| *at > killed_at_ms), "it produced again after the failover");

    // Every message it was told succeeded is on the new master.
    let (new_master, _) = replica_info(&client, &controllers).await.unwrap();
    assert_ne!(new_master, old_master);
    let mut stored = std::collections::HashSet::new();
    for q in 0..8 {
        for m in ferromq_testkit::pull_messages(
            &client,
            &new_master,
            CPP_TOPIC,
            q,
            0,
            usize::MAX,
            Duration::from_millis(800),
        )
        .await
        {
            stored.insert(String::from_utf8_lossy(&m.body).into_owned());
        }
    }
    let lost: Vec<_> = sent.iter().filter(|(b, _)| !stored.contains(b)).map(|(b, _)| b.clone()).collect();
    assert!(lost.is_empty(), "{} acknowledged messages lost, e.g. {:?}", lost.len(), &lost[..lost.len().min(5)]);
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_replica_leaves_the_sync_state_set_and_rejoins_when_caught_up() {
    // A replica that stays connected but stops acknowledging (SIGSTOP: its socket stays open)
    // holds every write of an allAckInSyncStateSet master until the master drops it from the
    // SyncStateSet after haMaxTimeSlaveNotCatchup; once it runs again it catches up and the
    // master takes it back in.
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster(dir.path(), |_, controllers| controllers.join(";"));
    for b in &mut c.brokers {
        b.conf.push_str("haMaxTimeSlaveNotCatchup=10000\n");
        b.start();
    }
    let client = RemotingClient::new(ClientConfig::default());
    let (controllers, addrs): (Vec<String>, Vec<String>) =
        (c.controllers.clone(), c.brokers.iter().map(Proc::addr).collect());
    let (master, full) = wait_for("a full SyncStateSet", Duration::from_secs(60), async || {
        replica_info(&client, &controllers).await.filter(|(_, set)| set.len() == 3)
    })
    .await;
    wait_for("the master to take writes", Duration::from_secs(20), async || {
        let r = client.invoke(&master, send("before"), T).await.ok()?;
        (r.code == response_code::SUCCESS).then_some(())
    })
    .await;
    let lagging = addrs.iter().position(|a| *a != master).unwrap();

    signal(&c.brokers[lagging], "-STOP");
    let stopped_at = Instant::now();
    // A write the stopped replica does not acknowledge puts it behind from now on.
    let first = {
        let (client, master) = (RemotingClient::new(ClientConfig::default()), master.clone());
        tokio::spawn(async move { client.invoke(&master, send("behind"), Duration::from_secs(30)).await })
    };
    // Behind for less than haMaxTimeSlaveNotCatchup (10 s) it stays in the set, even though the
    // controllers stopped hearing from it after their 3 s heartbeat timeout.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (_, set) = replica_info(&client, &controllers).await.unwrap();
    assert_eq!(set, full, "still a member {:?} after SIGSTOP", stopped_at.elapsed());
    // Writes go on once the set no longer waits for it (each attempt bounded; the first ones
    // may time out while the master still counts the stopped replica).
    wait_for("a write acknowledged without the stopped replica", Duration::from_secs(60), async || {
        let r = client.invoke(&master, send("while-lagging"), Duration::from_secs(10)).await.ok()?;
        (r.code == response_code::SUCCESS).then_some(())
    })
    .await;
    let (still_master, shrunk) = wait_for("the SyncStateSet without it", Duration::from_secs(60), async || {
        replica_info(&client, &controllers).await.filter(|(_, set)| set.len() == 2)
    })
    .await;
    println!("SyncStateSet {full:?} -> {shrunk:?} {:?} after SIGSTOP", stopped_at.elapsed());
    assert_eq!(still_master, master, "a lagging replica is no reason to change the master");
    assert!(shrunk.is_subset(&full));
    assert!(stopped_at.elapsed() >= Duration::from_secs(10), "not before haMaxTimeSlaveNotCatchup");
    let _ = first.await;
    for i in 0..10 {
        let r = client.invoke(&master, send(&format!("lagging-{i}")), T).await.unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    }

    signal(&c.brokers[lagging], "-CONT");
    let end = max_offset(&client, &master).await.unwrap();
    wait_for("the replica caught up", Duration::from_secs(60), async || {
        let info = runtime_info(&client, &addrs[lagging]).await?;
        (info.get("commitLogMaxOffset")?.parse::<i64>().ok()? >= end).then_some(())
    })
    .await;
    let (master_after, set) = wait_for("the SyncStateSet whole again", Duration::from_secs(60), async || {
        replica_info(&client, &controllers).await.filter(|(_, set)| set.len() == 3)
    })
    .await;
    assert_eq!((master_after, set), (master.clone(), full));
    let (theirs, ours) = (
        commit_log(&c.brokers[lagging].store(), end),
        commit_log(&c.brokers[addrs.iter().position(|a| *a == master).unwrap()].store(), end),
    );
    assert!(theirs == ours, "the replica's CommitLog is the master's");
    client.shutdown().await;
}
